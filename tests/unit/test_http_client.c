/*
 * The HTTP client (sxe/http_client.h) against real sockets on one loop: an sxe HTTP server
 * (keep-alive, chunked answers, echoed bodies) and a scripted upstream that misbehaves on request
 * (malformed and smuggling-shaped heads, a body to the close, a reset mid-body, silence, 100
 * Continue, a pooled connection that dies under the next request).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/fiber.h"
#include "sxe/http.h"
#include "sxe/http_client.h"
#include "sxe/timer.h"
#include "sxe_test.h"
#include "sys.h"

/* The client against real servers on one loop. */

static sxe_loop_t *loop;
static sxe_http_server_t *server;
static sxe_conn_t *scripted;
static char server_address[64], scripted_address[64];
static sxe_http_client_t *client;
static int finished;

struct result {
    int err;
    int status;
    char body[4096];
    size_t body_len;
    size_t streamed;
    int order;
};

static void hello(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_respond(http, 200, "text/plain", "hello\n", 6);
}

static void echo(sxe_http_t *http, void *arg)
{
    size_t len;
    const char *body = sxe_http_body(http, &len);

    (void)arg;
    sxe_http_respond(http, 200, "text/plain", body != NULL ? body : "", len);
}

/* A whole chunked response with a body of 1 MiB (256 chunks of 4 KiB), in a file to sendfile. */
static int big_fd = -1;
static off_t big_size;

static void make_big_response(void)
{
    char path[] = "/tmp/sxe-test-client-XXXXXX", block[4096];
    FILE *file;

    assert_true((big_fd = mkstemp(path)) >= 0);
    assert_int_equal(unlink(path), 0);
    assert_non_null(file = fdopen(dup(big_fd), "w"));
    memset(block, 'b', sizeof(block));
    fputs("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", file);
    for (int i = 0; i < 256; i++) {
        fputs("1000\r\n", file);
        fwrite(block, 1, sizeof(block), file);
        fputs("\r\n", file);
    }
    fputs("0\r\n\r\n", file);
    assert_int_equal(fclose(file), 0);
    big_size = lseek(big_fd, 0, SEEK_END);
}

/* "/interim": an interim 102 every 10 ms, and never a final answer. */
static sxe_timer_t interim_timer;
static uint64_t interim_conn;

static void send_interim(sxe_timer_t *timer, void *arg)
{
    sxe_conn_t *conn = sxe_conn_from_id(loop, interim_conn);

    (void)arg;
    if (conn == NULL) {
        sxe_timer_stop(loop, timer);
        return;
    }
    (void)sxe_conn_write(conn, "HTTP/1.1 102 Processing\r\n\r\n", 27);
}

/*
 * The scripted upstream: reads a request head, answers by its target, and for "/once" closes the
 * connection when the next request arrives on it.
 */
static size_t script(sxe_conn_t *conn, const char *data, size_t len)
{
    static const struct {
        const char *target;
        const char *reply;
        bool close;
    } replies[] = {
        {"/smuggle ", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
         false},
        {"/to-close ", "HTTP/1.1 200 OK\r\n\r\nall of it", true},
        {"/reset ", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart", true},
        {"/continue ",
         "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false},
        {"/switch ", "HTTP/1.1 101 Switching\r\nUpgrade: x\r\n\r\n", false},
        {"/extra ",
         "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" /* 40 bytes, then 50 more */
         "EXTRA-BYTES-EXTRA-BYTES-EXTRA-BYTES-EXTRA-BYTES-EX",
         false},
        {"/extra-after-none ", "HTTP/1.1 204 No Content\r\n\r\nEXTRA-BYTES\r\n\r\n", false},
        {"/once ", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false},
        {"/too-big ", "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n", false},
        {"/hang ", "", false},
        {"/big ", "", false},
        {"/interim ", "HTTP/1.1 102 Processing\r\n\r\n", false},
    };
    const char *end = memmem(data, len, "\r\n\r\n", 4);

    if (end == NULL) {
        return 0;
    }
    if (sxe_conn_user(conn) == &finished) { /* answered "/once" before: the server went away */
        sxe_conn_close(conn);
        return len;
    }
    for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
        if (strstr(data, replies[i].target) != NULL && strstr(data, replies[i].target) < end) {
            (void)sxe_conn_write(conn, replies[i].reply, strlen(replies[i].reply));
            if (strcmp(replies[i].target, "/big ") == 0) {
                (void)sxe_conn_sendfile(conn, big_fd, 0, (size_t)big_size);
            }
            if (strcmp(replies[i].target, "/too-big ") == 0) {
                static char body[5000];
                (void)sxe_conn_write(conn, body, sizeof(body));
            }
            if (strcmp(replies[i].target, "/once ") == 0) {
                sxe_conn_set_user(conn, &finished);
            }
            if (strcmp(replies[i].target, "/interim ") == 0) {
                interim_conn = sxe_conn_id(conn);
                sxe_timer_init(&interim_timer, send_interim, NULL);
                assert_int_equal(sxe_timer_start(loop, &interim_timer, 10 * SXE_NS_PER_MSEC,
                                                 10 * SXE_NS_PER_MSEC),
                                 0);
            }
            if (replies[i].close) {
                (void)sxe_conn_close_when_sent(conn);
            }
            break;
        }
    }
    return (size_t)(end + 4 - data);
}

static const struct sxe_conn_handlers script_handlers = {.on_read = script};

static void address_of(sxe_conn_t *listener, char *out, size_t size)
{
    struct sockaddr_in address;
    socklen_t len = sizeof(address);

    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&address, &len), 0);
    snprintf(out, size, "127.0.0.1:%d", ntohs(address.sin_port));
}

static int setup(void **state)
{
    struct sxe_loop_options options = {.connections = 64, .timers = 64, .buffer_size = 32768};
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

    (void)state;
    finished = 0;
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    assert_int_equal(sxe_http_server_create(&server, loop, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/hello", 0, hello, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, NULL, "/echo", 0, echo, NULL), 0);
    assert_int_equal(sxe_http_server_listen(server, "127.0.0.1:0"), 0);
    snprintf(server_address, sizeof(server_address), "127.0.0.1:%d", sxe_http_server_port(server));
    assert_int_equal(sxe_conn_listen(loop, &scripted, (struct sockaddr *)&any, sizeof(any), NULL,
                                     &script_handlers, NULL),
                     0);
    address_of(scripted, scripted_address, sizeof(scripted_address));
    assert_int_equal(sxe_http_client_create(&client, loop, server_address, NULL), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_http_client_destroy(client);
    sxe_http_server_destroy(server);
    sxe_loop_destroy(loop);
    return 0;
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
        memcpy(result->body, body,
               body_len < sizeof(result->body) ? body_len : sizeof(result->body));
        result->body_len = body_len;
    }
}

static void fetch(const char *method, const char *target, const char *body, struct result *result)
{
    struct sxe_http_client_request request = {
        .method = method, .target = target, .body = body, .body_len = body ? strlen(body) : 0};

    memset(result, 0, sizeof(*result));
    assert_int_equal(sxe_http_client_fetch(client, &request, fetched, result, NULL), 0);
    assert_int_equal(result->order, 0); /* never from inside the call */
}

static void use_scripted(const struct sxe_http_client_options *options)
{
    sxe_http_client_destroy(client);
    assert_int_equal(sxe_http_client_create(&client, loop, scripted_address, options), 0);
}

static void test_fetches_reuse_one_kept_alive_connection(void **state)
{
    struct sxe_http_client_stats stats;
    struct result result;

    (void)state;
    for (int i = 1; i <= 3; i++) {
        fetch(NULL, "/hello", NULL, &result);
        run_until(i);
        assert_int_equal(result.err, 0);
        assert_int_equal(result.status, 200);
        assert_int_equal(result.body_len, 6);
        assert_memory_equal(result.body, "hello\n", 6);
    }
    fetch("POST", "/echo", "a body", &result);
    run_until(4);
    assert_int_equal(result.status, 200);
    assert_int_equal(result.body_len, 6);
    assert_memory_equal(result.body, "a body", 6);
    fetch("HEAD", "/hello", NULL, &result);
    run_until(5);
    assert_int_equal(result.status, 200);
    assert_int_equal(result.body_len, 0);
    fetch(NULL, "/nowhere", NULL, &result);
    run_until(6);
    assert_int_equal(result.status, 404);
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.connects, 1);
    assert_int_equal(stats.reused, 5);
    assert_int_equal(stats.requests, 6);
    assert_int_equal(stats.open, 1);
    assert_int_equal(stats.busy, 0);
}

static void test_calls_queue_for_the_pools_connections_in_order(void **state)
{
    struct sxe_http_client_options options = {.connections = 2, .queue = 3};
    struct result results[6];
    struct sxe_http_client_stats stats;

    (void)state;
    sxe_http_client_destroy(client);
    assert_int_equal(sxe_http_client_create(&client, loop, server_address, &options), 0);
    for (int i = 0; i < 5; i++) {
        fetch(NULL, "/hello", NULL, &results[i]);
    }
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.queued, 3);
    assert_int_equal(sxe_http_client_fetch(client, &(struct sxe_http_client_request){.target = "/"},
                                           fetched, &results[5], NULL),
                     -ENOBUFS);
    run_until(5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(results[i].status, 200);
    }
    assert_true(results[2].order > 2 && results[4].order > 2); /* the queued came later */
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.connects, 2);
    assert_int_equal(stats.refused, 1);
    assert_int_equal(stats.queued, 0);
}

static void test_a_chunked_response_is_gathered_whole_or_refused_past_the_limit(void **state)
{
    struct sxe_http_client_options options = {.limits.body_bytes = 1000};
    struct result result;

    (void)state;
    use_scripted(NULL);
    fetch(NULL, "/big", NULL, &result); /* 1 MiB, the default limit: fits exactly */
    run_until(1);
    assert_int_equal(result.err, 0);
    assert_int_equal(result.body_len, 1 << 20);
    assert_int_equal(result.body[4095], 'b');
    use_scripted(&options);
    fetch(NULL, "/big", NULL, &result);
    run_until(2);
    assert_int_equal(result.err, -EMSGSIZE);
}

/* Streams: counts body bytes, pausing after each piece and resuming from a timer. */
static sxe_timer_t resume_timer;
static sxe_http_call_t *streaming;

static void resume_later(sxe_timer_t *timer, void *arg)
{
    (void)timer;
    (void)arg;
    sxe_http_call_resume(streaming);
}

static void on_head(sxe_http_call_t *call, const struct sxe_http_response_head *response, void *arg)
{
    struct result *result = arg;

    (void)call;
    result->status = response->status;
}

static void on_body(sxe_http_call_t *call, const char *data, size_t len, void *arg)
{
    struct result *result = arg;

    for (size_t i = 0; i < len; i++) {
        assert_int_equal(data[i], 'b');
    }
    result->streamed += len;
    sxe_http_call_pause(call);
    assert_int_equal(sxe_timer_start(loop, &resume_timer, 100 * SXE_NS_PER_USEC, 0), 0);
}

static void on_done(sxe_http_call_t *call, int err, void *arg)
{
    struct result *result = arg;

    (void)call;
    result->err = err;
    result->order = ++finished;
}

static const struct sxe_http_client_handlers stream_handlers = {
    .on_head = on_head, .on_body = on_body, .on_done = on_done};

static void test_a_streamed_body_of_any_size_passes_with_backpressure(void **state)
{
    struct result result = {0};

    (void)state;
    use_scripted(NULL);
    sxe_timer_init(&resume_timer, resume_later, NULL);
    assert_int_equal(sxe_http_client_stream(client,
                                            &(struct sxe_http_client_request){.target = "/big"},
                                            &stream_handlers, &result, &streaming),
                     0);
    run_until(1);
    assert_int_equal(result.err, 0);
    assert_int_equal(result.status, 200);
    assert_int_equal(result.streamed, 1 << 20);
    sxe_timer_stop(loop, &resume_timer);
}

static void test_upstream_faults_fail_the_call_with_their_reason(void **state)
{
    struct sxe_http_client_options options = {
        .timeout = 50 * SXE_NS_PER_MSEC, .limits.header_bytes = 1024, .limits.body_bytes = 1000};
    struct sxe_test_capture capture;
    struct result result;

    (void)state;
    use_scripted(&options);
    sxe_test_capture_start(&capture);
    fetch(NULL, "/smuggle", NULL, &result);
    run_until(1);
    assert_int_equal(result.err, -EPROTO);
    assert_non_null(strstr(capture.text, "a malformed response from"));
    sxe_test_capture_stop();
    fetch(NULL, "/switch", NULL, &result);
    run_until(2);
    assert_int_equal(result.err, -EPROTO);
    fetch(NULL, "/reset", NULL, &result);
    run_until(3);
    assert_int_equal(result.err, -ECONNRESET);
    fetch(NULL, "/hang", NULL, &result);
    run_until(4);
    assert_int_equal(result.err, -ETIMEDOUT);
    /* Interim answers every 10 ms are no final one: the 50 ms still runs out. */
    uint64_t started = sxe_clock_mono_ns();
    fetch(NULL, "/interim", NULL, &result);
    run_until(5);
    assert_int_equal(result.err, -ETIMEDOUT);
    assert_true(sxe_clock_mono_ns() - started < SXE_NS_PER_SEC);
    sxe_timer_stop(loop, &interim_timer);
    fetch(NULL, "/too-big", NULL, &result); /* a body past body_bytes */
    run_until(6);
    assert_int_equal(result.err, -EMSGSIZE);
    fetch(NULL, "/to-close", NULL, &result); /* a body that ends with the connection */
    run_until(7);
    assert_int_equal(result.err, 0);
    assert_int_equal(result.body_len, 9);
    assert_memory_equal(result.body, "all of it", 9);
    fetch(NULL, "/continue", NULL, &result); /* an interim 100 is skipped */
    run_until(8);
    assert_int_equal(result.err, 0);
    assert_int_equal(result.status, 200);
    assert_memory_equal(result.body, "ok", 2);
    sxe_test_capture_start(&capture);
    fetch(NULL, "/extra", NULL, &result); /* answered, but the connection is not reused */
    run_until(9);
    assert_int_equal(result.err, 0);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "50 bytes from"));
    assert_non_null(strstr(capture.text, "after a whole response; closing the connection"));
    struct sxe_http_client_stats stats;
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.failed, 6);
    assert_int_equal(stats.requests, 3);
    run_until(9);
    assert_true(sxe_loop_run_once(loop, 0) >= 0);
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.open, 0);
    sxe_test_capture_start(&capture); /* the same after an answer without a body */
    fetch(NULL, "/extra-after-none", NULL, &result);
    run_until(10);
    sxe_test_capture_stop();
    assert_int_equal(result.err, 0);
    assert_int_equal(result.status, 204);
    assert_non_null(strstr(capture.text, "15 bytes from"));
}

static void test_a_refused_connect_fails_the_call(void **state)
{
    struct result result;
    int port = sxe_http_server_port(server);
    char address[64];

    (void)state;
    sxe_http_server_destroy(server); /* its port is free now, and refuses */
    server = NULL;
    snprintf(address, sizeof(address), "127.0.0.1:%d", port);
    sxe_http_client_destroy(client);
    assert_int_equal(sxe_http_client_create(&client, loop, address, NULL), 0);
    fetch(NULL, "/hello", NULL, &result);
    run_until(1);
    assert_int_equal(result.err, -ECONNREFUSED);
}

static void test_a_dead_pooled_connection_is_retried_once_for_idempotent_methods(void **state)
{
    struct sxe_http_client_stats stats;
    struct result result;

    (void)state;
    use_scripted(NULL);
    fetch(NULL, "/once", NULL, &result); /* the server closes under the next request */
    run_until(1);
    assert_int_equal(result.err, 0);
    fetch(NULL, "/once", NULL, &result); /* sent again on a new connection */
    run_until(2);
    assert_int_equal(result.err, 0);
    assert_memory_equal(result.body, "ok", 2);
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.retried, 1);
    assert_int_equal(stats.connects, 2);
    fetch("POST", "/once", "x", &result); /* not idempotent: not sent twice */
    run_until(3);
    assert_int_equal(result.err, -ECONNRESET);
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.retried, 1);
}

/* RFC 9110 §9.2.2's idempotent methods are sent again on a new connection when a pooled one dies
 * under them; the others (and a method in the wrong case: methods are case-sensitive) are not. */
static void test_which_methods_are_retried(void **state)
{
    static const struct {
        const char *method;
        bool retried;
    } methods[] = {{"GET", true},     {"HEAD", true},  {"PUT", true},   {"DELETE", true},
                   {"OPTIONS", true}, {"TRACE", true}, {"POST", false}, {"PATCH", false},
                   {"get", false},    {"PUTS", false}};
    struct sxe_http_client_stats stats;
    struct result result;

    (void)state;
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        use_scripted(NULL);
        fetch(NULL, "/once", NULL, &result); /* the server closes under the next request */
        run_until(finished + 1);
        assert_int_equal(result.err, 0);
        fetch(methods[i].method, "/once", NULL, &result);
        run_until(finished + 1);
        sxe_http_client_stats(client, &stats);
        assert_int_equal(stats.retried, methods[i].retried ? 1 : 0);
        assert_int_equal(result.err, methods[i].retried ? 0 : -ECONNRESET);
    }
}

/*
 * A pooled connection whose call waits past the loop's idle timeout is not closed for it: the
 * call's own timeout, longer, decides, and the call fails with it, and is not sent again. The
 * upstream is a plain socket the test answers once by hand, then leaves silent.
 */
static void test_a_pooled_connection_timed_out_is_not_retried(void **state)
{
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t address_len = sizeof(address);
    struct sxe_http_client_stats stats;
    struct result result;
    char text[64], heard[1024] = "";

    (void)state;
    teardown(NULL); /* for a loop of its own, without the server */
    server = NULL;
    assert_int_equal(
        sxe_loop_create(&loop, &(struct sxe_loop_options){.idle_timeout = 50 * SXE_NS_PER_MSEC}),
        0);
    int upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(bind(upstream, (struct sockaddr *)&address, sizeof(address)), 0);
    assert_int_equal(listen(upstream, 4), 0);
    assert_int_equal(getsockname(upstream, (struct sockaddr *)&address, &address_len), 0);
    snprintf(text, sizeof(text), "127.0.0.1:%d", ntohs(address.sin_port));
    assert_int_equal(
        sxe_http_client_create(&client, loop, text,
                               &(struct sxe_http_client_options){.timeout = 300 * SXE_NS_PER_MSEC}),
        0);

    fetch(NULL, "/first", NULL, &result);
    assert_true(sxe_loop_run_once(loop, 0) >= 0); /* connects, and sends */
    int peer = accept(upstream, NULL, NULL);
    while (strstr(heard, "\r\n\r\n") == NULL) {
        assert_true(sxe_test_heard(peer, heard, sizeof(heard)) >= 0);
        assert_true(sxe_loop_run_once(loop, 1) >= 0);
    }
    sxe_test_say(peer, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    run_until(1);
    assert_int_equal(result.err, 0);
    fetch(NULL, "/second", NULL, &result); /* on the pooled connection, never answered */
    uint64_t began = sxe_clock_mono_ns();
    run_until(2);
    assert_int_equal(result.err, -ETIMEDOUT);
    assert_true(sxe_clock_mono_ns() - began >= 250 * SXE_NS_PER_MSEC); /* not the idle 50 ms */
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.retried, 0);
    assert_int_equal(stats.connects, 1);
    close(peer);
    close(upstream);
}

/*
 * Sent again once only: two pooled connections, both dead, under one GET: the first fails it,
 * the second, its one retry, fails it for good (a third try would have found a new connection).
 */
static void test_a_retry_that_fails_too_is_not_retried_again(void **state)
{
    struct sxe_http_client_stats stats;
    struct result first, second, third;

    (void)state;
    use_scripted(NULL);
    fetch(NULL, "/once", NULL, &first);  /* two at once: two connections, each closing under */
    fetch(NULL, "/once", NULL, &second); /* the request after */
    run_until(2);
    assert_int_equal(first.err, 0);
    assert_int_equal(second.err, 0);
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.connects, 2);
    fetch(NULL, "/once", NULL, &third);
    run_until(3);
    assert_int_equal(third.err, -ECONNRESET);
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.retried, 1);
    assert_int_equal(stats.connects, 2);
}

static void cancel_on_head(sxe_http_call_t *call, const struct sxe_http_response_head *response,
                           void *arg)
{
    (void)response;
    ++*(int *)arg;
    sxe_http_call_cancel(call);
}

static void never(sxe_http_call_t *call, int err, void *arg)
{
    (void)call;
    (void)err;
    (void)arg;
    fail_msg("a cancelled call's callback ran");
}

static void test_cancelled_and_destroyed_calls(void **state)
{
    static const struct sxe_http_client_handlers cancelling = {.on_head = cancel_on_head,
                                                               .on_done = never};
    struct result queued, flying;
    sxe_http_call_t *call;
    int heads = 0;

    (void)state;
    use_scripted(NULL);
    assert_int_equal(sxe_http_client_stream(client,
                                            &(struct sxe_http_client_request){.target = "/big"},
                                            &cancelling, &heads, NULL),
                     0);
    while (heads == 0) {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
    assert_int_equal(sxe_http_client_stream(client,
                                            &(struct sxe_http_client_request){.target = "/hello"},
                                            &cancelling, &heads, &call),
                     0);
    sxe_http_call_cancel(call); /* before it was sent */
    for (int i = 0; i < 5; i++) {
        assert_true(sxe_loop_run_once(loop, 1 * SXE_NS_PER_MSEC) >= 0);
    }
    assert_int_equal(heads, 1);
    struct sxe_http_client_options one = {.connections = 1};
    sxe_http_client_destroy(client);
    assert_int_equal(sxe_http_client_create(&client, loop, server_address, &one), 0);
    fetch(NULL, "/hello", NULL, &flying);
    fetch(NULL, "/hello", NULL, &queued);
    sxe_http_client_destroy(client);
    client = NULL;
    assert_int_equal(flying.err, -ECANCELED);
    assert_int_equal(queued.err, -ECANCELED);
}

static void fiber_fetches(void *arg)
{
    struct sxe_http_client_reply reply;
    int *rc = arg;

    *rc = sxe_http_client_fetch_wait(client, &(struct sxe_http_client_request){.target = "/hello"},
                                     &reply);
    assert_int_equal(*rc, 0);
    assert_int_equal(reply.response.status, 200);
    assert_int_equal(reply.body_len, 6);
    assert_memory_equal(reply.body, "hello\n", 6);
    assert_non_null(sxe_http_response_header(&reply.response, "Content-Type"));
    sxe_http_client_reply_free(&reply);
    assert_int_equal(sxe_http_client_fetch_wait(
                         client, &(struct sxe_http_client_request){.target = "/nowhere"}, &reply),
                     0);
    *rc = reply.response.status;
    sxe_http_client_reply_free(&reply);
    finished++;
}

static void test_a_fiber_fetches_as_sequential_code(void **state)
{
    struct sxe_fibers_options options = {.count = 2};
    struct sxe_http_client_reply reply;
    sxe_fibers_t *fibers;
    int rc = 1;

    (void)state;
    assert_int_equal(sxe_http_client_fetch_wait(
                         client, &(struct sxe_http_client_request){.target = "/"}, &reply),
                     -EPERM);
    assert_int_equal(sxe_fibers_create(&fibers, loop, &options), 0);
    assert_int_equal(sxe_fiber_start(fibers, fiber_fetches, &rc, NULL), 0);
    run_until(1);
    assert_int_equal(rc, 404);
    sxe_fibers_destroy(fibers);
}

static void fetch_with_crlf(void *arg)
{
    struct result result;

    (void)arg;
    int rc = sxe_http_client_fetch(client,
                                   &(struct sxe_http_client_request){.target = "/a\r\nX: smuggled"},
                                   fetched, &result, NULL);
    (void)rc;
}

static void fetch_with_a_spaced_method(void *arg)
{
    struct result result;

    (void)arg;
    int rc = sxe_http_client_fetch(
        client, &(struct sxe_http_client_request){.method = "GE T", .target = "/a"}, fetched,
        &result, NULL);
    (void)rc;
}

static void test_invalid_requests_are_refused(void **state)
{
    struct result result;

    (void)state;
    assert_int_equal(sxe_http_client_create(&(sxe_http_client_t *){NULL}, loop, "nowhere", NULL),
                     -EINVAL);
#ifdef SXE_DEBUG
    const char *const expected[] = {"bad_text(request->target)", NULL};
    sxe_test_expect_abort(fetch_with_crlf, NULL, expected);
    const char *const method[] = {"bad_text(method)", NULL};
    sxe_test_expect_abort(fetch_with_a_spaced_method, NULL, method);
    (void)result;
#else
    (void)fetch_with_crlf;
    (void)fetch_with_a_spaced_method;
    assert_int_equal(
        sxe_http_client_fetch(client,
                              &(struct sxe_http_client_request){.method = "GE T", .target = "/a"},
                              fetched, &result, NULL),
        -EINVAL);
    assert_int_equal(sxe_http_client_fetch(
                         client, &(struct sxe_http_client_request){.target = "/a\r\nX: smuggled"},
                         fetched, &result, NULL),
                     -EINVAL);
    assert_int_equal(sxe_http_client_fetch(client,
                                           &(struct sxe_http_client_request){.target = "/a b"},
                                           fetched, &result, NULL),
                     -EINVAL);
#endif
}

/*
 * Resuming a call that is not paused changes nothing: its timeout still runs from when it was
 * made, under a clock that stands still but where the test moves it.
 */
static void test_resuming_a_call_that_is_not_paused_changes_nothing(void **state)
{
    struct sxe_http_client_options options = {.timeout = SXE_NS_PER_SEC};
    struct result result;
    sxe_http_call_t *call;

    (void)state;
    sxe__sys_clock_fake(sxe_clock_mono_ns(), sxe_clock_wall_ns());
    use_scripted(&options);
    struct sxe_http_client_request request = {.target = "/hang"};
    memset(&result, 0, sizeof(result));
    assert_int_equal(sxe_http_client_fetch(client, &request, fetched, &result, &call), 0);
    for (int i = 0; i < 20; i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0); /* connected and sent */
    }
    sxe__sys_clock_advance(600 * SXE_NS_PER_MSEC);
    assert_true(sxe_loop_run_once(loop, 0) >= 0);
    sxe_http_call_resume(call);
    sxe__sys_clock_advance(500 * SXE_NS_PER_MSEC); /* 1.1 s since the call was made */
    for (int i = 0; i < 5 && finished == 0; i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
    }
    assert_int_equal(finished, 1);
    assert_int_equal(result.err, -ETIMEDOUT);
    sxe__sys_reset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fetches_reuse_one_kept_alive_connection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_calls_queue_for_the_pools_connections_in_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_chunked_response_is_gathered_whole_or_refused_past_the_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_streamed_body_of_any_size_passes_with_backpressure,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_upstream_faults_fail_the_call_with_their_reason, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_refused_connect_fails_the_call, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_dead_pooled_connection_is_retried_once_for_idempotent_methods, setup, teardown),
        cmocka_unit_test_setup_teardown(test_which_methods_are_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancelled_and_destroyed_calls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_fetches_as_sequential_code, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_requests_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resuming_a_call_that_is_not_paused_changes_nothing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_pooled_connection_timed_out_is_not_retried, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_retry_that_fails_too_is_not_retried_again, setup,
                                        teardown),
    };
    make_big_response();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
