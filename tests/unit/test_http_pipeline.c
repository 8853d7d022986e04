/*
 * The HTTP client's pipelining (sxe_http_client_options.pipeline), against real sockets on one
 * loop: an sxe HTTP server, and a scripted upstream that counts the request heads each read brings
 * (so a batch that leaves in one send is seen arriving together) and answers by target: "/ok",
 * "/none" (204, no body), "/last" (Connection: close, then it closes), "/hang" (never).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/http.h"
#include "sxe/http_client.h"
#include "sxe_test.h"
#include "sys.h"

static sxe_loop_t *loop;
static sxe_http_server_t *server;
static sxe_conn_t *scripted;
static char server_address[64], scripted_address[64];
static sxe_http_client_t *client;
static int finished;
static int most_heads; /* the most request heads the scripted upstream got in one read */

struct result {
    int err;
    int status;
    int order;
    char body[64];
};

static void hello(sxe_http_t *http, void *arg)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(http);

    (void)arg; /* the target, which says which request this answers */
    sxe_http_respond(http, 200, "text/plain", request->target, request->target_len);
}

static size_t script(sxe_conn_t *conn, const char *data, size_t len)
{
    size_t at = 0;
    int heads = 0;
    const char *end;

    for (const char *from = data; (end = memmem(from, len - (size_t)(from - data), "\r\n\r\n", 4));
         from = end + 4) {
        heads++; /* every request head that came with this read, answered or not */
    }
    while ((end = memmem(data + at, len - at, "\r\n\r\n", 4)) != NULL) {
        const char *head = data + at;
        at = (size_t)(end + 4 - data);
        if (strncmp(head, "GET /ok ", 8) == 0) {
            (void)sxe_conn_write(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 40);
        } else if (strncmp(head, "GET /last ", 10) == 0) {
            static const char last[] =
                "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 4\r\n\r\nlast";
            (void)sxe_conn_write(conn, last, sizeof(last) - 1);
            (void)sxe_conn_close_when_sent(conn);
            break;
        } else if (strncmp(head, "GET /none ", 10) == 0) {
            (void)sxe_conn_write(conn, "HTTP/1.1 204 No Content\r\n\r\n", 27);
        } else if (strncmp(head, "GET /hang ", 10) == 0) {
            at = len; /* an upstream that answers in order answers nothing behind it either */
            break;
        }
    }
    most_heads = heads > most_heads ? heads : most_heads;
    return at; /* whatever is not consumed is offered again with the next read */
}

static const struct sxe_conn_handlers script_handlers = {.on_read = script};

static int setup(void **state)
{
    struct sxe_loop_options options = {.connections = 64, .timers = 128};
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in address;
    socklen_t len = sizeof(address);

    (void)state;
    finished = most_heads = 0;
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    assert_int_equal(sxe_http_server_create(&server, loop, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, NULL, "/", SXE_HTTP_ROUTE_PREFIX, hello, NULL),
                     0);
    assert_int_equal(sxe_http_server_listen(server, "127.0.0.1:0"), 0);
    snprintf(server_address, sizeof(server_address), "127.0.0.1:%d", sxe_http_server_port(server));
    assert_int_equal(sxe_conn_listen(loop, &scripted, (struct sockaddr *)&any, sizeof(any), NULL,
                                     &script_handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(scripted, (struct sockaddr *)&address, &len), 0);
    snprintf(scripted_address, sizeof(scripted_address), "127.0.0.1:%d", ntohs(address.sin_port));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe__sys_reset();
    sxe_http_client_destroy(client);
    sxe_http_server_destroy(server);
    sxe_loop_destroy(loop);
    return 0;
}

static void make_client(const char *address, uint32_t pipeline)
{
    struct sxe_http_client_options options = {
        .pipeline = pipeline, .connections = 4, .timeout = 200 * SXE_NS_PER_MSEC};
    assert_int_equal(sxe_http_client_create(&client, loop, address, &options), 0);
}

static void run_until(int count);
static sxe_http_call_t *fetch(const char *method, const char *target, struct result *result);

/* A client to the scripted upstream with a pooled connection (it has carried a whole answer). */
static void warm_client(uint32_t pipeline)
{
    struct result warm;

    make_client(scripted_address, pipeline);
    fetch(NULL, "/ok", &warm);
    run_until(1);
}

/* Runs the loop until count calls have finished (5 s at most). */
static void run_until(int count)
{
    sxe_test_run_until(loop, &finished, count);
}

static void fetched(sxe_http_call_t *call, int err, const struct sxe_http_response_head *response,
                    const char *body, size_t body_len, void *arg)
{
    struct result *result = arg;

    (void)call;
    result->err = err;
    result->order = ++finished;
    if (err == 0) {
        result->status = response->status;
        snprintf(result->body, sizeof(result->body), "%.*s", (int)body_len, body);
    }
}

static sxe_http_call_t *fetch(const char *method, const char *target, struct result *result)
{
    struct sxe_http_client_request request = {.method = method, .target = target};
    sxe_http_call_t *call;

    memset(result, 0, sizeof(*result));
    assert_int_equal(sxe_http_client_fetch(client, &request, fetched, result, &call), 0);
    return call;
}

static void test_requests_of_one_turn_leave_together_and_are_answered_in_order(void **state)
{
    struct sxe_http_client_stats stats;
    struct result results[12];
    char targets[11][8]; /* a request's strings stay put until its call ends */

    (void)state;
    make_client(server_address, 8);
    fetch(NULL, "/warm", &results[0]); /* a connection that has carried a whole response */
    run_until(1);
    for (int i = 1; i <= 10; i++) { /* one turn: 8 share the warm connection, 2 open new ones */
        snprintf(targets[i], sizeof(targets[i]), "/%d", i);
        fetch(i == 10 ? "HEAD" : NULL, i == 3 ? "/3?x" : targets[i], &results[i]);
    }
    run_until(11);
    for (int i = 1; i <= 10; i++) {
        assert_int_equal(results[i].err, 0);
        assert_int_equal(results[i].status, 200);
        assert_string_equal(results[i].body, i == 10 ? "" : i == 3 ? "/3?x" : targets[i]);
    }
    for (int i = 1; i < 8; i++) { /* the batch's answers came in its order */
        assert_true(results[i].order < results[i + 1].order);
    }
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.pipelined, 7);
    assert_int_equal(stats.connects, 3);
    assert_int_equal(stats.requests, 11);
    assert_int_equal(stats.busy, 0);

    fetch("POST", "/post", &results[0]); /* not idempotent: nothing joins it */
    fetch(NULL, "/after-post", &results[1]);
    run_until(13);
    assert_int_equal(results[0].status, 200);
    assert_int_equal(results[1].status, 200);
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.pipelined, 7);

    /* HEAD neither joins a batch nor starts one: a body an upstream sends after its answer by
     * mistake would be read as the next call's answer, which may be another client's. */
    fetch(NULL, "/warm-again", &results[0]);
    run_until(14);
    fetch("HEAD", "/head", &results[0]);
    fetch(NULL, "/behind-head", &results[1]);
    fetch("HEAD", "/head-behind", &results[2]);
    run_until(17);
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.pipelined, 7);
}

/* Answers without a body (204) between answers with one, all in one read: each ends where its
 * head does, and the next is read afresh, as the next call's. */
static void test_answers_without_a_body_end_at_their_head(void **state)
{
    static const char *const targets[] = {"/none", "/ok", "/none", "/none", "/ok", "/ok"};
    struct result results[6];

    (void)state;
    warm_client(8);
    for (int i = 0; i < 6; i++) {
        fetch(NULL, targets[i], &results[i]);
    }
    run_until(7);
    for (int i = 0; i < 6; i++) {
        bool none = strcmp(targets[i], "/none") == 0;
        assert_int_equal(results[i].err, 0);
        assert_int_equal(results[i].status, none ? 204 : 200);
        assert_string_equal(results[i].body, none ? "" : "ok");
        assert_int_equal(results[i].order, i + 2);
    }
    struct sxe_http_client_stats stats;
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.pipelined, 5);
    assert_int_equal(stats.connects, 1);
}

static int sends;

static ssize_t counted_send(int fd, const void *data, size_t len, int flags)
{
    sends++;
    return send(fd, data, len, flags);
}

static ssize_t counted_sendmsg(int fd, const struct msghdr *message, int flags)
{
    sends++;
    return sendmsg(fd, message, flags);
}

static void test_a_batch_leaves_in_one_send_and_arrives_in_one_read(void **state)
{
    struct result results[4];

    (void)state;
    warm_client(4);
    assert_int_equal(most_heads, 1);
    sxe__sys.send = counted_send;
    sxe__sys.sendmsg = counted_sendmsg;
    for (int i = 0; i < 4; i++) {
        fetch(NULL, "/ok", &results[i]);
    }
    assert_int_equal(sends, 0); /* corked until the turn's end */
    assert_true(sxe_loop_run_once(loop, 0) >= 0);
    if (strcmp(sxe_loop_backend(loop), "epoll") == 0) { /* io_uring sends through its ring */
        assert_int_equal(sends, 1);
    }
    run_until(5);
    assert_int_equal(most_heads, 4);
    for (int i = 0; i < 4; i++) {
        assert_string_equal(results[i].body, "ok");
    }
}

static void test_the_calls_behind_a_closing_answer_are_sent_again(void **state)
{
    struct sxe_http_client_stats stats;
    struct result results[3];

    (void)state;
    warm_client(4);
    fetch(NULL, "/last", &results[0]); /* answered with Connection: close, then the close */
    fetch(NULL, "/ok", &results[1]);
    fetch(NULL, "/ok", &results[2]);
    run_until(4);
    assert_string_equal(results[0].body, "last");
    assert_string_equal(results[1].body, "ok");
    assert_string_equal(results[2].body, "ok");
    assert_true(results[0].order < results[1].order);
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.retried, 2);
    assert_int_equal(stats.failed, 0);
}

static void test_cancelled_behind_and_destroyed_in_flight(void **state)
{
    struct sxe_http_client_stats stats;
    struct result results[3];

    (void)state;
    warm_client(4);
    fetch(NULL, "/ok", &results[0]);
    sxe_http_call_t *call = fetch(NULL, "/ok", &results[1]);
    fetch(NULL, "/ok", &results[2]);
    sxe_http_call_cancel(call); /* its answer is read and dropped: the one behind it gets its own */
    run_until(3);
    assert_int_equal(results[1].order, 0);
    assert_string_equal(results[2].body, "ok");
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.connects, 1);
    assert_int_equal(stats.requests, 3);
    most_heads = 0;

    for (int i = 0; i < 3; i++) {
        fetch(NULL, "/hang", &results[i]);
    }
    for (int i = 0; i < 5; i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
    }
    assert_int_equal(most_heads, 3);
    sxe_http_client_destroy(client);
    client = NULL;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(results[i].err, -ECANCELED);
    }
}

static void test_a_silent_first_call_times_out_and_the_ones_behind_go_again(void **state)
{
    struct sxe_http_client_stats stats;
    struct result results[2];

    (void)state;
    warm_client(4);
    fetch(NULL, "/hang", &results[0]);
    fetch(NULL, "/ok", &results[1]); /* waits behind it, its own timer restarted meanwhile */
    run_until(3);
    assert_int_equal(results[0].err, -ETIMEDOUT);
    assert_string_equal(results[1].body, "ok");
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.retried, 1);
    assert_int_equal(stats.failed, 1);
}

static struct {
    int heads;
    int done;
} streamed[5];

static void on_head(sxe_http_call_t *call, const struct sxe_http_response_head *response, void *arg)
{
    (void)call;
    (void)response;
    ((typeof(&streamed[0]))arg)->heads++;
}

static void on_done(sxe_http_call_t *call, int err, void *arg)
{
    (void)call;
    assert_int_equal(err, 0);
    ((typeof(&streamed[0]))arg)->done++;
    finished++;
}

/* Streams count calls of /ok, call i counted in streamed[i]. */
static void stream_ok(sxe_http_call_t **calls, int count)
{
    static const struct sxe_http_client_handlers handlers = {.on_head = on_head,
                                                             .on_done = on_done};
    struct sxe_http_client_request ok = {.target = "/ok"};

    for (int i = 0; i < count; i++) {
        assert_int_equal(sxe_http_client_stream(client, &ok, &handlers, &streamed[i], &calls[i]),
                         0);
    }
}

/* A few turns of the loop, a millisecond each at most: whatever was coming has come. */
static void turn_a_few(void)
{
    for (int i = 0; i < 5; i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
    }
}

static void test_a_paused_call_behind_holds_its_answer_until_resumed(void **state)
{
    sxe_http_call_t *calls[2];

    (void)state;
    memset(streamed, 0, sizeof(streamed));
    warm_client(4);
    stream_ok(calls, 2);
    sxe_http_call_pause(calls[1]);
    run_until(2);
    turn_a_few();
    assert_int_equal(streamed[0].done, 1);
    assert_int_equal(streamed[1].heads, 0); /* its answer waits, unread */
    sxe_http_call_resume(calls[1]);
    run_until(3);
    assert_int_equal(streamed[1].heads, 1);
}

/* The first call paused holds the connection's reading: a call behind it paused and resumed
 * meanwhile does not take the hold off. Twice, so that the calls' places in memory come in either
 * order (the second pair takes the first's places as they were freed). */
static void test_a_call_behind_resumed_leaves_the_first_paused(void **state)
{
    sxe_http_call_t *calls[2];

    (void)state;
    memset(streamed, 0, sizeof(streamed));
    warm_client(4); /* both calls on the one connection */
    for (int pair = 0; pair < 2; pair++) {
        stream_ok(calls, 2);
        sxe_http_call_pause(calls[0]); /* on the pooled connection, before any answer */
        sxe_http_call_pause(calls[1]);
        sxe_http_call_resume(calls[1]);
        turn_a_few();
        assert_int_equal(streamed[0].heads, pair); /* the answers wait, unread */
        assert_int_equal(streamed[1].heads, pair);
        sxe_http_call_resume(calls[0]);
        run_until(1 + 2 * (pair + 1));
        assert_int_equal(streamed[0].heads, pair + 1);
        assert_int_equal(streamed[1].heads, pair + 1);
    }
}

/* A call that waits for a connection (all four have one each) is paused and resumed before it
 * has one: its answer comes once one is free. */
static void test_a_call_waiting_for_a_connection_pauses_and_resumes(void **state)
{
    sxe_http_call_t *calls[5];

    (void)state;
    memset(streamed, 0, sizeof(streamed));
    warm_client(1);
    stream_ok(calls, 5);
    sxe_http_call_pause(calls[4]);
    sxe_http_call_resume(calls[4]);
    run_until(1 + 5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(streamed[i].done, 1);
        assert_int_equal(streamed[i].heads, 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_requests_of_one_turn_leave_together_and_are_answered_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answers_without_a_body_end_at_their_head, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_batch_leaves_in_one_send_and_arrives_in_one_read,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_calls_behind_a_closing_answer_are_sent_again,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancelled_behind_and_destroyed_in_flight, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_silent_first_call_times_out_and_the_ones_behind_go_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_paused_call_behind_holds_its_answer_until_resumed,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_call_waiting_for_a_connection_pauses_and_resumes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_call_behind_resumed_leaves_the_first_paused, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
