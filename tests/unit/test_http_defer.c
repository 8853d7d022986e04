/*
 * Requests held to answer later (sxe_http_defer()), through real sockets under fake time:
 * answered from a timer, pipelined requests waiting their turn, bodies and headers that stay valid
 * while other connections are served, a client that goes away (told once, or at the next call),
 * a full table, a handler that never answers (503), per-request user pointers.
 */
#include "http_defer_test.h"

static void test_answered_later_in_order_with_pipelined_requests(void **state)
{
    char out[4096] = "";
    int fd = client();

    (void)state;
    sxe_test_say(
        fd,
        "GET /later/1 HTTP/1.1\r\nHost: x\r\nX-Tag: one\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_string_equal(out, ""); /* the first waits, and the second behind it */
    struct sxe_http_defer_stats stats;
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 1);
    assert_int_equal(stats.deferred, 1);

    /* Other connections are served meanwhile, through the same read buffer. */
    int other = client();
    char other_out[1024] = "";
    sxe_test_say(other, "GET / HTTP/1.1\r\nHost: y\r\nX-Tag: clobber-the-buffer\r\n\r\n");
    pump(0);
    sxe_test_heard(other, other_out, sizeof(other_out));
    assert_non_null(strstr(other_out, "hello\n"));

    pump(10 * SXE_NS_PER_MSEC);
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    char *first = strstr(out, "later /later/1 tag=one user=u1 body= path=/later/1\n");
    char *second = strstr(out, "hello\n");
    assert_non_null(first);
    assert_non_null(second);
    assert_true(first < second);
    assert_int_equal(pendings[0].rc, 0);
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 0);

    /* The connection goes on, held requests and all. */
    out[0] = '\0';
    sxe_test_say(fd, "GET /later/2 HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    pump(10 * SXE_NS_PER_MSEC);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "later /later/2 tag= user=u1"));
    close(fd);
    close(other);
}

static void test_a_held_request_keeps_its_normal_path(void **state)
{
    char out[4096] = "", other_out[1024] = "";
    int fd = client(), other = client();

    (void)state;
    /* One path written into the server's scratch, one that is normal where it lies. */
    sxe_test_say(fd, "GET /x/../later/./a//%62/%2e%2e/c?q HTTP/1.1\r\nHost: x\r\n\r\n");
    sxe_test_say(other, "GET /later/d HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    /* The scratch is used again meanwhile, by a request answered at once. */
    int third = client();
    char third_out[1024] = "";
    sxe_test_say(third, "GET /./now/. HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_heard(third, third_out, sizeof(third_out));
    assert_non_null(strstr(third_out, "HTTP/1.1 404")); /* "/now/" is not the exact "/now" */
    pump(10 * SXE_NS_PER_MSEC);
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    sxe_test_heard(other, other_out, sizeof(other_out));
    assert_non_null(strstr(out, "later /x/../later/./a//%62/%2e%2e/c?q tag= user=u1 body= "
                                "path=/later/a/c\n"));
    assert_non_null(strstr(other_out, "later /later/d tag= user=u1 body= path=/later/d\n"));
    close(fd);
    close(other);
    close(third);
}

static void test_bodies_stay_valid_while_held(void **state)
{
    char out[4096] = "";
    int fd = client();

    (void)state;
    sxe_test_say(fd, "POST /later/len HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                     "POST /later/chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n");
    pump(0);
    pump(10 * SXE_NS_PER_MSEC);
    pump(0);
    pump(10 * SXE_NS_PER_MSEC);
    sxe_test_heard(fd, out, sizeof(out));
    char *first = strstr(out, "later /later/len tag= user=u1 body=hello path=/later/len\n");
    char *second =
        strstr(out, "later /later/chunked tag= user=u1 body=abcdefg path=/later/chunked\n");
    assert_non_null(first);
    assert_non_null(second);
    assert_true(first < second);
    close(fd);
}

static void test_a_client_that_leaves_cancels_its_held_request_once(void **state)
{
    struct sxe_http_defer_stats stats;
    int fd = client();

    (void)state;
    sxe_test_say(fd, "GET /cancel HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    close(fd);
    pump(0);
    assert_int_equal(cancels, 1);
    assert_int_equal(cancel_rc, -ECANCELED); /* answering from the callback is refused */
    assert_string_equal(log_lines, "/cancel 499 0\n");
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.cancelled, 1);
    assert_int_equal(stats.held, 0);
    pump(10 * SXE_NS_PER_MSEC); /* its answer's timer was stopped by on_cancel */
    assert_int_equal(pendings[0].rc, 0);
}

static void leave_before_answer(void **state, const char *request)
{
    struct sxe_http_defer_stats stats;
    int fd = client();

    (void)state;
    sxe_test_say(fd, request);
    pump(0);
    close(fd);
    pump(0);
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.cancelled, 1);
    assert_int_equal(stats.held, 1); /* kept for the holder, who has not heard yet */
    pump(10 * SXE_NS_PER_MSEC);
    assert_int_equal(pendings[0].rc, -ECANCELED);
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 0);
}

static void test_without_a_cancel_callback_the_next_call_says_so(void **state)
{
    leave_before_answer(state, "GET /later HTTP/1.1\r\nHost: x\r\n\r\n");
}

static void test_the_table_of_held_requests_is_fixed(void **state)
{
    int fds[3];
    char out[1024] = "";
    struct sxe_http_defer_stats stats;

    (void)state;
    for (int i = 0; i < 3; i++) {
        fds[i] = client();
        sxe_test_say(fds[i], "GET /later HTTP/1.1\r\nHost: x\r\n\r\n");
        pump(0);
    }
    sxe_test_heard(fds[2], out, sizeof(out));
    assert_non_null(strstr(out, "503 Service Unavailable"));
    assert_non_null(strstr(out, "busy\n"));
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.refused, 1);
    assert_int_equal(stats.held, 2);
    pump(10 * SXE_NS_PER_MSEC);
    for (int i = 0; i < 2; i++) {
        out[0] = '\0';
        sxe_test_heard(fds[i], out, sizeof(out));
        assert_non_null(strstr(out, "later /later"));
    }
    for (int i = 0; i < 3; i++) {
        close(fds[i]);
    }
}

static void test_a_request_never_answered_gets_503(void **state)
{
    char out[1024] = "";
    struct sxe_http_defer_stats stats;
    int fd = client();

    (void)state;
    sxe_test_say(fd, "GET /never HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    pump(SXE_NS_PER_SEC / 2);
    sxe_test_heard(fd, out, sizeof(out));
    assert_string_equal(out, "");
    pump(SXE_NS_PER_SEC / 2 + 1);
    pump(0);
    ssize_t got;
    while ((got = sxe_test_heard(fd, out, sizeof(out))) > 0) {
    }
    assert_non_null(strstr(out, "HTTP/1.1 503 Service Unavailable"));
    assert_non_null(strstr(out, "Connection: close"));
    assert_int_equal(got, -1); /* and the connection closed */
    assert_int_equal(cancels, 1);
    assert_string_equal(log_lines, "/never 503 24\n"); /* once, though it was cancelled too */
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.timed_out, 1);
    assert_int_equal(stats.held, 0);
    close(fd);
}

static void test_answered_before_the_handler_returns(void **state)
{
    char out[1024] = "";
    struct sxe_http_defer_stats stats;
    int fd = client();

    (void)state;
    sxe_test_say(fd, "GET /now HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "now\n"));
    assert_non_null(strstr(out, "hello\n"));
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.deferred, 1);
    assert_int_equal(stats.held, 0);
    close(fd);
}

static void test_a_started_stream_outlives_the_response_timeout(void **state)
{
    char out[4096] = "";
    int fd = client();

    (void)state;
    sxe_test_say(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    for (int second = 0; second < 3; second++) { /* three times the response timeout */
        assert_int_equal(sxe_http_send(stream_held, "data: x\n\n", 9), 0);
        pump(SXE_NS_PER_SEC);
    }
    assert_int_equal(sxe_http_finish(stream_held), 0);
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "HTTP/1.1 200 OK"));
    assert_null(strstr(out, "503"));
    assert_non_null(strstr(out, "9\r\ndata: x\n\n\r\n0\r\n\r\n"));
    struct sxe_http_defer_stats stats;
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.timed_out, 0);
    assert_int_equal(stats.held, 0);
    close(fd);
}

static void test_a_request_arriving_behind_a_held_one_waits(void **state)
{
    char out[4096] = "";
    int fd = client();

    (void)state;
    sxe_test_say(fd, "GET /later/a HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_say(fd, "GET /later/b HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0); /* read, and the connection pauses: they wait behind the held one */
    sxe_test_heard(fd, out, sizeof(out));
    assert_string_equal(out, "");
    pump(10 * SXE_NS_PER_MSEC); /* /later/a answered; /later/b held in turn */
    pump(0);
    pump(10 * SXE_NS_PER_MSEC); /* /later/b answered; / answered at once */
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    char *a = strstr(out, "later /later/a"), *b = strstr(out, "later /later/b");
    char *hello_at = strstr(out, "hello\n");
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(hello_at);
    assert_true(a < b && b < hello_at);
    close(fd);
}

static void test_a_handler_that_closes_its_held_connection(void **state)
{
    struct sxe_http_defer_stats stats;
    int fd = client();
    char out[256] = "";

    (void)state;
    sxe_test_say(fd, "GET /close HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    assert_int_equal(sxe_test_heard(fd, out, sizeof(out)), -1);
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.cancelled, 1);
    assert_int_equal(stats.held, 1); /* until the holder's next call, which it has not made */
    assert_string_equal(log_lines, "/close 499 0\n");
    close(fd);
}

static void test_no_buffer_to_hold_a_request_in(void **state)
{
    struct sxe_http_server_options options = {.loop = {.connections = 16, .buffers = 1}};
    sxe_http_server_t *small;
    int fds[2];
    char out[1024] = "";

    (void)state;
    sxe_http_server_destroy(server);
    assert_int_equal(sxe_http_server_create(&small, NULL, &options), 0);
    assert_int_equal(
        sxe_http_server_route(small, NULL, "/later", SXE_HTTP_ROUTE_PREFIX, later, NULL), 0);
    assert_int_equal(sxe_http_server_listen(small, "127.0.0.1:0"), 0);
    server = small;
    port = sxe_http_server_port(small);
    for (int i = 0; i < 2; i++) { /* the one buffer holds the first; the second cannot wait */
        fds[i] = client();
        sxe_test_say(fds[i], "GET /later HTTP/1.1\r\nHost: x\r\n\r\n");
        pump(0);
    }
    sxe_test_heard(fds[1], out, sizeof(out));
    assert_non_null(strstr(out, "503 Service Unavailable"));
    pump(10 * SXE_NS_PER_MSEC);
    out[0] = '\0';
    sxe_test_heard(fds[0], out, sizeof(out));
    assert_non_null(strstr(out, "later /later"));
    close(fds[0]);
    close(fds[1]);
}

/* A slot given back is held again: rounds of two held requests in a table of two, each round
 * answered before the next, are all held, none refused. */
static void test_slots_given_back_are_held_again(void **state)
{
    struct sxe_http_defer_stats stats;

    (void)state;
    for (int round = 0; round < 3; round++) {
        int fds[2];
        for (int i = 0; i < 2; i++) {
            fds[i] = client();
            sxe_test_say(fds[i], "GET /later HTTP/1.1\r\nHost: x\r\n\r\n");
            pump(0);
        }
        sxe_http_server_defer_stats(server, &stats);
        assert_int_equal(stats.held, 2);
        assert_int_equal(stats.refused, 0);
        pump(10 * SXE_NS_PER_MSEC);
        for (int i = 0; i < 2; i++) {
            char out[1024] = "";
            sxe_test_heard(fds[i], out, sizeof(out));
            assert_non_null(strstr(out, "later /later"));
            close(fds[i]);
        }
        sxe_http_server_defer_stats(server, &stats);
        assert_int_equal(stats.held, 0);
    }
    assert_int_equal(stats.deferred, 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_answered_later_in_order_with_pipelined_requests, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bodies_stay_valid_while_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_client_that_leaves_cancels_its_held_request_once,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_without_a_cancel_callback_the_next_call_says_so, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_the_table_of_held_requests_is_fixed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_request_never_answered_gets_503, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answered_before_the_handler_returns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_request_arriving_behind_a_held_one_waits, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_handler_that_closes_its_held_connection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_buffer_to_hold_a_request_in, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_started_stream_outlives_the_response_timeout, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_held_request_keeps_its_normal_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slots_given_back_are_held_again, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
