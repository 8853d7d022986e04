/*
 * The HTTP client's upgrades (request.upgrade, on_upgrade): the request says Connection: upgrade
 * and Upgrade, a 101 hands the connection to the caller with what followed the 101, an answer
 * that does not switch is read as usual, a connection the caller does not take is closed, and a
 * request that asks wrongly is refused. The upstream is a scripted socket on the same loop.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "sxe/conn.h"
#include "sxe/http_client.h"
#include "sxe_test.h"

static sxe_loop_t *loop;
static sxe_conn_t *scripted;
static sxe_http_client_t *client;
static int events;           /* callbacks seen: what sxe_test_run_until() waits for */
static char head_seen[1024]; /* the last request head the upstream read */
static char relayed[256];    /* what the caller's new handlers read after the switch */
static int status_seen, done_err = 1;
static bool take_it = true; /* on_upgrade gives the connection handlers of its own */

/* The upstream: /switch answers 101 and a greeting in the new protocol, /stay answers 200. */
static size_t script(sxe_conn_t *conn, const char *data, size_t len)
{
    const char *end = memmem(data, len, "\r\n\r\n", 4);

    if (end == NULL) {
        return 0;
    }
    snprintf(head_seen, sizeof(head_seen), "%.*s", (int)(end - data), data);
    if (strstr(head_seen, "GET /switch ") != NULL) {
        static const char answer[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\n"
                                     "Connection: upgrade\r\n\r\nhello in test";
        (void)sxe_conn_write(conn, answer, sizeof(answer) - 1);
    } else {
        (void)sxe_conn_write(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 40);
    }
    return (size_t)(end + 4 - data);
}

static const struct sxe_conn_handlers script_handlers = {.on_read = script};

/* The caller's protocol after the switch: it keeps what it reads. */
static size_t after_switch(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)conn;
    snprintf(relayed + strlen(relayed), sizeof(relayed) - strlen(relayed), "%.*s", (int)len, data);
    events++;
    return len;
}

static const struct sxe_conn_handlers switched_handlers = {.on_read = after_switch};

static void on_upgrade(sxe_http_call_t *call, const struct sxe_http_response_head *response,
                       sxe_conn_t *conn, void *arg)
{
    (void)call;
    (void)arg;
    status_seen = response->status;
    assert_non_null(sxe_http_response_header(response, "Upgrade"));
    if (take_it) {
        assert_int_equal(sxe_conn_set_handlers(conn, &switched_handlers), 0);
    }
    events++;
}

static void on_head(sxe_http_call_t *call, const struct sxe_http_response_head *response, void *arg)
{
    (void)call;
    (void)arg;
    status_seen = response->status;
}

static void on_done(sxe_http_call_t *call, int err, void *arg)
{
    (void)call;
    (void)arg;
    done_err = err;
    events++;
}

static const struct sxe_http_client_handlers handlers = {
    .on_head = on_head, .on_done = on_done, .on_upgrade = on_upgrade};

static int setup(void **state)
{
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in bound;
    socklen_t bound_len = sizeof(bound);
    char address[64];

    (void)state;
    events = status_seen = 0;
    done_err = 1;
    take_it = true;
    relayed[0] = head_seen[0] = '\0';
    assert_int_equal(
        sxe_loop_create(&loop, &(struct sxe_loop_options){.connections = 16, .timers = 16}), 0);
    assert_int_equal(sxe_conn_listen(loop, &scripted, (struct sockaddr *)&any, sizeof(any), NULL,
                                     &script_handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(scripted, (struct sockaddr *)&bound, &bound_len), 0);
    snprintf(address, sizeof(address), "127.0.0.1:%d", ntohs(bound.sin_port));
    assert_int_equal(sxe_http_client_create(&client, loop, address, NULL), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_http_client_destroy(client);
    sxe_loop_destroy(loop);
    return 0;
}

static void test_a_101_hands_the_connection_over(void **state)
{
    struct sxe_http_client_stats stats;

    (void)state;
    assert_int_equal(sxe_http_client_stream(client,
                                            &(struct sxe_http_client_request){
                                                .target = "/switch", .upgrade = "test, other"},
                                            &handlers, NULL, NULL),
                     0);
    sxe_test_run_until(loop, &events, 2); /* on_upgrade, then the greeting read */
    assert_int_equal(status_seen, 101);
    assert_non_null(strstr(head_seen, "\r\nConnection: upgrade\r\nUpgrade: test, other"));
    assert_string_equal(relayed, "hello in test"); /* what followed the 101 */
    assert_int_equal(done_err, 1);                 /* no other callback of the call */
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.upgraded, 1);
    assert_int_equal(stats.open, 0); /* it left the pool */
    assert_int_equal(stats.busy, 0);
    /* Its place in the pool serves the next call afresh, on a new connection. */
    status_seen = 0;
    done_err = 1;
    assert_int_equal(sxe_http_client_stream(client,
                                            &(struct sxe_http_client_request){.target = "/stay"},
                                            &handlers, NULL, NULL),
                     0);
    sxe_test_run_until(loop, &events, 3);
    assert_int_equal(status_seen, 200);
    assert_int_equal(done_err, 0);
    assert_non_null(strstr(head_seen, "GET /stay "));
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.open, 1);
    assert_int_equal(stats.busy, 0);
}

static void test_an_answer_that_does_not_switch_is_read_as_usual(void **state)
{
    (void)state;
    assert_int_equal(sxe_http_client_stream(
                         client,
                         &(struct sxe_http_client_request){.target = "/stay", .upgrade = "test"},
                         &handlers, NULL, NULL),
                     0);
    sxe_test_run_until(loop, &events, 1);
    assert_int_equal(status_seen, 200);
    assert_int_equal(done_err, 0);
}

static void test_a_connection_not_taken_is_closed(void **state)
{
    struct sxe_test_capture capture;
    struct sxe_http_client_stats stats;

    (void)state;
    take_it = false;
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_http_client_stream(
                         client,
                         &(struct sxe_http_client_request){.target = "/switch", .upgrade = "test"},
                         &handlers, NULL, NULL),
                     0);
    sxe_test_run_until(loop, &events, 1);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "GET /switch was not taken; closing it"));
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.open, 0);
    /* The client goes on: its slot serves the next call. */
    assert_int_equal(sxe_http_client_stream(client,
                                            &(struct sxe_http_client_request){.target = "/stay"},
                                            &handlers, NULL, NULL),
                     0);
    sxe_test_run_until(loop, &events, 2);
    assert_int_equal(done_err, 0);
}

static void done_fetch(sxe_http_call_t *call, int err,
                       const struct sxe_http_response_head *response, const char *body,
                       size_t body_len, void *arg)
{
    (void)call;
    (void)err;
    (void)response;
    (void)body;
    (void)body_len;
    (void)arg;
}

/* Asking wrongly: in debug builds an assert says so; in release builds, -EINVAL. */
static void ask_wrongly(void *arg)
{
    static const struct sxe_http_client_handlers no_upgrade = {.on_done = on_done};
    int which = *(int *)arg;
    struct sxe_http_client_request request = {.target = "/switch", .upgrade = "test"};

    if (which == 0) {
        assert_int_equal(sxe_http_client_fetch(client, &request, done_fetch, NULL, NULL), -EINVAL);
    } else if (which == 1) {
        assert_int_equal(sxe_http_client_stream(client, &request, &no_upgrade, NULL, NULL),
                         -EINVAL);
    } else if (which == 2) {
        request.upgrade = "test\r\nX-Smuggled: 1";
        assert_int_equal(sxe_http_client_stream(client, &request, &handlers, NULL, NULL), -EINVAL);
    } else if (which == 3) {
        request.upgrade = "";
        assert_int_equal(sxe_http_client_stream(client, &request, &handlers, NULL, NULL), -EINVAL);
    } else {
        request.body = "x";
        request.body_len = 1;
        assert_int_equal(sxe_http_client_stream(client, &request, &handlers, NULL, NULL), -EINVAL);
    }
}

static void test_asking_wrongly_is_refused(void **state)
{
    (void)state;
    for (int which = 0; which < 5; which++) {
#ifdef SXE_DEBUG
        const char *const expected[] = {"request->upgrade == NULL", NULL};
        sxe_test_expect_abort(ask_wrongly, &which, expected);
#else
        ask_wrongly(&which);
#endif
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_101_hands_the_connection_over, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_answer_that_does_not_switch_is_read_as_usual, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_connection_not_taken_is_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_asking_wrongly_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
