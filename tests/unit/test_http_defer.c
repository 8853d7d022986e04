/*
 * Requests held to answer later (sxe_http_defer()), through real sockets under fake time:
 * answered from a timer, pipelined requests waiting their turn, bodies and headers that stay valid
 * while other connections are served, a client that goes away (told once, or at the next call),
 * a full table, a handler that never answers (503), per-request user pointers, invalid use.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe/fiber.h"
#include "sxe/http.h"
#include "sxe/timer.h"
#include "sxe_test.h"
#include "sys.h"

static sxe_http_server_t *server;
static int port;

/* A held request, answered when its timer fires. */
static struct pending {
    sxe_http_t *held;
    sxe_timer_t timer;
    int rc; /* what the answer returned */
} pendings[4];
static unsigned pending_count;
static unsigned cancels;
static int cancel_rc;

static void on_cancel(sxe_http_t *held, void *arg)
{
    struct pending *pending = arg;

    sxe_timer_stop(sxe_http_server_loop(server), &pending->timer); /* the handle is going */
    cancels++;
    cancel_rc = sxe_http_respond(held, 200, "text/plain", "no\n", 3); /* too late: refused */
}

/* Answers with what the held request still says: its target, a header, its body. */
static void answer(sxe_timer_t *timer, void *arg)
{
    struct pending *pending = arg;
    sxe_http_t *held = pending->held;

    (void)timer;
    /* Chunked: a start that fails (the request was cancelled) touches nothing else of it. */
    if ((pending->rc = sxe_http_start(held, 200, "Content-Type: text/plain\r\n", -1)) < 0) {
        return;
    }
    const struct sxe_http_request *request = sxe_http_request(held);
    const struct sxe_http_header *tag = sxe_http_find_header(request, "X-Tag");
    size_t body_len, path_len;
    const char *body = sxe_http_body(held, &body_len);
    const char *path = sxe_http_path(held, &path_len);
    char text[512];
    int len = snprintf(text, sizeof(text), "later %.*s tag=%.*s user=%s body=%.*s path=%.*s\n",
                       (int)request->target_len, request->target, tag ? (int)tag->value_len : 0,
                       tag ? tag->value : "", (const char *)sxe_http_user(held), (int)body_len,
                       body ? body : "", (int)path_len, path);

    if ((pending->rc = sxe_http_send(held, text, (size_t)len)) == 0) {
        pending->rc = sxe_http_finish(held);
    }
}

/* Holds the request and answers it 10 ms later (or never, for /never). */
static void later(sxe_http_t *http, void *arg)
{
    struct pending *pending = &pendings[pending_count % 4];
    bool with_cancel = arg != NULL;

    pending->held = sxe_http_defer(http, with_cancel ? on_cancel : NULL, pending);
    if (pending->held == NULL) {
        assert_int_equal(errno, ENOBUFS);
        sxe_http_respond(http, 503, "text/plain", "busy\n", 5);
        return;
    }
    pending_count++;
    static char user[] = "u1";
    sxe_http_set_user(pending->held, user);
    sxe_timer_init(&pending->timer, answer, pending);
    if (strncmp(sxe_http_request(http)->target, "/never", 6) != 0) {
        assert_int_equal(
            sxe_timer_start(sxe_http_server_loop(server), &pending->timer, 10 * SXE_NS_PER_MSEC, 0),
            0);
    }
}

/* Holds the request and answers it at once, before returning. */
static void at_once(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_t *held = sxe_http_defer(http, NULL, NULL);
    assert_non_null(held);
    assert_int_equal(sxe_http_respond(held, 200, "text/plain", "now\n", 4), 0);
}

static int fiber_rc; /* what the fiber handler's answer returned */

/* A fiber handler: waits 5 ms as sequential code, then answers, or (/fiber/mute) does not. */
static void fiber_handler(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_non_null(sxe_fiber_self());
    assert_int_equal(sxe_fiber_sleep(5 * SXE_NS_PER_MSEC), 0);
    if (strncmp(sxe_http_request(http)->target, "/fiber/mute", 11) != 0) {
        fiber_rc = sxe_http_respond(http, 200, "text/plain", "from a fiber\n", 13);
    }
}

static sxe_http_t *stream_held;

/* Holds the request and starts a chunked response at once: a stream, finished by the test. */
static void stream(sxe_http_t *http, void *arg)
{
    (void)arg;
    stream_held = sxe_http_defer(http, NULL, NULL);
    assert_non_null(stream_held);
    assert_int_equal(sxe_http_start(stream_held, 200, "Content-Type: text/event-stream\r\n", -1),
                     0);
}

/* Holds the request, then closes its connection: the hold is cancelled with it. */
static void hold_and_close(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_non_null(sxe_http_defer(http, NULL, NULL));
    sxe_conn_close(sxe_http_conn(http));
}

static void hello(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_respond(http, 200, "text/plain", "hello\n", 6);
}

/* A held request that switches protocols 10 ms later (a proxy waiting for its upstream's 101), to
 * a raw protocol whose handlers keep what they read. */
static char raw_read[256];
static int raw_closes, switch_rc;
static bool close_at_switch;
static sxe_http_t *switching;
static sxe_timer_t switch_timer;

static size_t raw_on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)conn;
    snprintf(raw_read + strlen(raw_read), sizeof(raw_read) - strlen(raw_read), "%.*s", (int)len,
             data);
    return len;
}

static void raw_on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    (void)conn;
    (void)reason;
    (void)err;
    raw_closes++;
}

static const struct sxe_conn_handlers raw = {.on_read = raw_on_read, .on_close = raw_on_close};

static void switch_later(sxe_timer_t *timer, void *arg)
{
    sxe_conn_t *conn = sxe_http_conn(switching);

    (void)timer;
    (void)arg;
    switch_rc = sxe_http_upgrade(switching, "Upgrade: raw\r\nConnection: upgrade\r\n", &raw);
    if (switch_rc == 0 && close_at_switch) {
        sxe_conn_close(conn); /* before the module consumed the request: raw's on_close hears */
    }
}

static void upgrade_later(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_non_null(switching = sxe_http_defer(http, NULL, NULL));
    sxe_timer_init(&switch_timer, switch_later, NULL);
    assert_int_equal(
        sxe_timer_start(sxe_http_server_loop(server), &switch_timer, 10 * SXE_NS_PER_MSEC, 0), 0);
}

/* What the log hook saw: "target status body-bytes" per request. */
static char log_lines[2048];
static size_t log_used;

static void record_log(const sxe_http_t *http, void *arg)
{
    const struct sxe_http_request *request = sxe_http_request(http);

    (void)arg;
    int len = snprintf(log_lines + log_used, sizeof(log_lines) - log_used, "%.*s %d %llu\n",
                       (int)request->target_len, request->target, sxe_http_status(http),
                       (unsigned long long)sxe_http_body_sent(http));
    log_used += (size_t)len < sizeof(log_lines) - log_used ? (size_t)len : 0;
}

static int setup(void **state)
{
    struct sxe_http_server_options options = {.loop = {.connections = 16},
                                              .deferred = 2,
                                              .response_timeout = SXE_NS_PER_SEC,
                                              .fibers = 1,
                                              .fiber_stack_size = 32768,
                                              .on_log = record_log};

    (void)state;
    sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, 1795296612ULL * SXE_NS_PER_SEC);
    memset(pendings, 0, sizeof(pendings));
    pending_count = cancels = 0;
    cancel_rc = 0;
    fiber_rc = 1;
    log_used = 0;
    log_lines[0] = '\0';
    raw_read[0] = '\0';
    raw_closes = switch_rc = 0;
    close_at_switch = false;
    assert_int_equal(sxe_http_server_create(&server, NULL, &options), 0);
    assert_int_equal(sxe_http_route(server, NULL, "/later", true, later, NULL), 0);
    assert_int_equal(sxe_http_route(server, NULL, "/never", true, later, &cancels), 0);
    assert_int_equal(sxe_http_route(server, NULL, "/cancel", true, later, &cancels), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/now", false, at_once, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/", false, hello, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/stream", false, stream, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/close", false, hold_and_close, NULL), 0);
    assert_int_equal(sxe_http_route_fiber(server, "GET", "/fiber", true, fiber_handler, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/switch", false, upgrade_later, NULL), 0);
    assert_int_equal(sxe_http_listen(server, "127.0.0.1:0"), 0);
    port = sxe_http_port(server);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_http_server_destroy(server);
    sxe__sys_reset();
    return 0;
}

/* Turns the loop a few times, after moving fake time on by ns. */
static void pump(uint64_t ns)
{
    sxe__sys_clock_advance(ns);
    for (int i = 0; i < 5; i++) {
        assert_true(sxe_loop_run_once(sxe_http_server_loop(server), SXE_NS_PER_MSEC) >= 0);
    }
}

static int client(void)
{
    return sxe_test_client(port);
}

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

static const char switch_request[] =
    "GET /switch HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: raw\r\n\r\n";

static void test_a_held_request_switches_protocols_later(void **state)
{
    char out[1024] = "";
    int fd = client();

    (void)state;
    sxe_test_say(fd, switch_request);
    sxe_test_say(fd, "early|"); /* before the 101: the new protocol's, not a request */
    pump(0);
    pump(10 * SXE_NS_PER_MSEC);
    assert_int_equal(switch_rc, 0);
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_memory_equal(out, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: raw\r\n", 48);
    sxe_test_say(fd, "late");
    pump(0);
    assert_string_equal(raw_read, "early|late");
    assert_string_equal(log_lines, "/switch 101 0\n");
    struct sxe_http_defer_stats stats;
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 0);
    close(fd);
    pump(0);
    assert_int_equal(raw_closes, 1);
}

static void test_a_switched_connection_closed_at_once_is_the_new_protocols(void **state)
{
    char out[1024] = "";
    int fd = client();

    (void)state;
    close_at_switch = true;
    sxe_test_say(fd, switch_request);
    pump(0);
    pump(10 * SXE_NS_PER_MSEC);
    assert_int_equal(switch_rc, 0);
    assert_int_equal(raw_closes, 1); /* its on_close, though the module still had the bytes */
    assert_string_equal(raw_read, "");
    while (sxe_test_heard(fd, out, sizeof(out)) > 0) {
    }
    close(fd);
}

static void test_a_held_request_whose_client_left_cannot_switch(void **state)
{
    int fd = client();

    (void)state;
    sxe_test_say(fd, switch_request);
    pump(0);
    close(fd);
    pump(0);
    pump(10 * SXE_NS_PER_MSEC);
    assert_int_equal(switch_rc, -ECANCELED);
    assert_int_equal(raw_closes, 0);
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

static sxe_http_t *twice_first;

static void defer_twice(void *arg)
{
    sxe_http_t *http = arg;
    (void)sxe_http_defer(http, NULL, NULL);
}

static void set_drained_of_nothing(void *arg)
{
    (void)arg;
    (void)sxe_http_set_drained(NULL, NULL, NULL);
}

static void invalid(sxe_http_t *http, void *arg)
{
    (void)arg;
#ifndef SXE_DEBUG
    assert_int_equal(sxe_http_set_drained(http, NULL, NULL), -EINVAL); /* not held (yet) */
#endif
    twice_first = sxe_http_defer(http, NULL, NULL);
    assert_ptr_equal(twice_first, http); /* held in the slot it has had since its dispatch */
#ifdef SXE_DEBUG
    const char *const expected[] = {"!http->held", NULL};
    sxe_test_expect_abort(defer_twice, http, expected);
    const char *const no_handle[] = {"assertion failed: held != NULL", NULL};
    sxe_test_expect_abort(set_drained_of_nothing, NULL, no_handle);
#else
    (void)defer_twice;
    (void)set_drained_of_nothing;
    assert_null(sxe_http_defer(http, NULL, NULL));
    assert_int_equal(errno, EINVAL);
    assert_int_equal(sxe_http_set_drained(NULL, NULL, NULL), -EINVAL);
#endif
    assert_int_equal(sxe_http_set_drained(twice_first, NULL, NULL), 0);
    assert_int_equal(sxe_http_respond(twice_first, 204, NULL, NULL, 0), 0);
}

static void test_invalid_use(void **state)
{
    char out[1024] = "";
    int fd = client();

    (void)state;
    assert_int_equal(sxe_http_route(server, "GET", "/invalid", false, invalid, NULL), 0);
    sxe_test_say(fd, "GET /invalid HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "204 No Content"));
    close(fd);
}

static void test_fiber_routes_wait_as_sequential_code(void **state)
{
    char out[4096] = "";
    int fd = client();

    (void)state;
    sxe_test_say(fd, "GET /fiber HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_string_equal(out, "");
    int busy = client(); /* the only fiber sleeps: a second fiber request is refused */
    char busy_out[1024] = "";
    sxe_test_say(busy, "GET /fiber HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_heard(busy, busy_out, sizeof(busy_out));
    assert_non_null(strstr(busy_out, "503 Service Unavailable"));
    pump(5 * SXE_NS_PER_MSEC);
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    char *first = strstr(out, "from a fiber\n"), *second = strstr(out, "hello\n");
    assert_non_null(first);
    assert_non_null(second);
    assert_true(first < second);
    assert_int_equal(fiber_rc, 0);

    out[0] = '\0'; /* a fiber handler that does not answer gets 500 for it */
    sxe_test_say(fd, "GET /fiber/mute HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    pump(5 * SXE_NS_PER_MSEC);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "HTTP/1.1 500 Internal Server Error\r\n"));
    assert_string_equal(log_lines, "/fiber 503 24\n/fiber 200 13\n/ 200 6\n/fiber/mute 500 26\n");
    assert_non_null(strstr(out, "Content-Length: 26\r\n"));
    assert_non_null(strstr(out, "\r\n\r\n500 Internal Server Error\n")); /* its body, whole */
    close(fd);
    close(busy);
}

static void test_a_fiber_whose_client_left_is_told_at_its_next_call(void **state)
{
    struct sxe_http_defer_stats stats;
    int fd = client();

    (void)state;
    sxe_test_say(fd, "GET /fiber HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    close(fd);
    pump(0);
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.cancelled, 1);
    pump(5 * SXE_NS_PER_MSEC);
    assert_int_equal(fiber_rc, -ECANCELED);
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 0);
    /* Its fiber is free again. */
    fd = client();
    char out[1024] = "";
    sxe_test_say(fd, "GET /fiber HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    pump(5 * SXE_NS_PER_MSEC);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "from a fiber"));
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
    assert_int_equal(sxe_http_route(small, NULL, "/later", true, later, NULL), 0);
    assert_int_equal(sxe_http_listen(small, "127.0.0.1:0"), 0);
    server = small;
    port = sxe_http_port(small);
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
        cmocka_unit_test_setup_teardown(test_invalid_use, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_request_arriving_behind_a_held_one_waits, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_handler_that_closes_its_held_connection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_buffer_to_hold_a_request_in, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_started_stream_outlives_the_response_timeout, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_held_request_keeps_its_normal_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_held_request_switches_protocols_later, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_switched_connection_closed_at_once_is_the_new_protocols, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_held_request_whose_client_left_cannot_switch, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fiber_routes_wait_as_sequential_code, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_whose_client_left_is_told_at_its_next_call,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_slots_given_back_are_held_again, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
