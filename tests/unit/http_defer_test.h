/*
 * The harness of the held-request tests (test_http_defer*.c): a server on a loopback port under
 * fake time, whose routes hold their requests and answer them from timers, fibers and upgrades,
 * with a log hook; and a client. Each test program uses all of it (its setup routes to every
 * handler).
 */
#ifndef SXE_HTTP_DEFER_TEST_H
#define SXE_HTTP_DEFER_TEST_H

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
#include "http_test.h"

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
    const struct sxe_http_request_head *request = sxe_http_request_head(held);
    const struct sxe_http_header *tag = sxe_http_request_header(request, "X-Tag");
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

    int rc = sxe_http_defer(http, with_cancel ? on_cancel : NULL, pending);
    if (rc < 0) {
        assert_int_equal(rc, -ENOBUFS);
        sxe_http_respond(http, 503, "text/plain", "busy\n", 5);
        return;
    }
    pending->held = http;
    pending_count++;
    static char user[] = "u1";
    sxe_http_set_user(pending->held, user);
    sxe_timer_init(&pending->timer, answer, pending);
    if (strncmp(sxe_http_request_head(http)->target, "/never", 6) != 0) {
        assert_int_equal(
            sxe_timer_start(sxe_http_server_loop(server), &pending->timer, 10 * SXE_NS_PER_MSEC, 0),
            0);
    }
}

/* Holds the request and answers it at once, before returning. */
static void at_once(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_http_defer(http, NULL, NULL), 0);
    assert_int_equal(sxe_http_respond(http, 200, "text/plain", "now\n", 4), 0);
}

static int fiber_rc; /* what the fiber handler's answer returned */

/* A fiber handler: waits 5 ms as sequential code, then answers, or (/fiber/mute) does not. */
static void fiber_handler(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_non_null(sxe_fiber_self());
    assert_int_equal(sxe_fiber_sleep(5 * SXE_NS_PER_MSEC), 0);
    if (strncmp(sxe_http_request_head(http)->target, "/fiber/mute", 11) != 0) {
        fiber_rc = sxe_http_respond(http, 200, "text/plain", "from a fiber\n", 13);
    }
}

static sxe_http_t *stream_held;

/* Holds the request and starts a chunked response at once: a stream, finished by the test. */
static void stream(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_http_defer(http, NULL, NULL), 0);
    stream_held = http;
    assert_int_equal(sxe_http_start(stream_held, 200, "Content-Type: text/event-stream\r\n", -1),
                     0);
}

/* Holds the request, then closes its connection: the hold is cancelled with it. */
static void hold_and_close(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_http_defer(http, NULL, NULL), 0);
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
    assert_int_equal(sxe_http_defer(http, NULL, NULL), 0);
    switching = http;
    sxe_timer_init(&switch_timer, switch_later, NULL);
    assert_int_equal(
        sxe_timer_start(sxe_http_server_loop(server), &switch_timer, 10 * SXE_NS_PER_MSEC, 0), 0);
}

/* What the log hook saw: "target status body-bytes" per request. */
static char log_lines[2048];
static size_t log_used;

static void record_log(const sxe_http_t *http, void *arg)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(http);

    (void)arg;
    int len = snprintf(log_lines + log_used, sizeof(log_lines) - log_used, "%.*s %d %llu\n",
                       (int)request->target_len, request->target, sxe_http_status(http),
                       (unsigned long long)sxe_http_body_sent(http));
    log_used += (size_t)len < sizeof(log_lines) - log_used ? (size_t)len : 0;
}

/* A fiber that waits between reads of a streamed body (PUT /slow): the body's bytes pile up
 * meanwhile, and each read finds some at once. Answers how many it read. */
static void slow_reader(sxe_http_t *http, void *arg)
{
    char buf[1000], text[32];
    size_t total = 0;
    ssize_t got;

    (void)arg;
    while (sxe_fiber_sleep(5 * SXE_NS_PER_MSEC) == 0 &&
           (got = sxe_http_body_read(http, buf, sizeof(buf))) > 0) {
        total += (size_t)got;
    }
    int len = snprintf(text, sizeof(text), "read %zu\n", total);
    fiber_rc = sxe_http_respond(http, 200, "text/plain", text, (size_t)len);
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
    http_test_fake_clock();
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
    assert_int_equal(
        sxe_http_server_route(server, NULL, "/later", SXE_HTTP_ROUTE_PREFIX, later, NULL), 0);
    assert_int_equal(
        sxe_http_server_route(server, NULL, "/never", SXE_HTTP_ROUTE_PREFIX, later, &cancels), 0);
    assert_int_equal(
        sxe_http_server_route(server, NULL, "/cancel", SXE_HTTP_ROUTE_PREFIX, later, &cancels), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/now", 0, at_once, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/", 0, hello, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/stream", 0, stream, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/close", 0, hold_and_close, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/fiber",
                                           SXE_HTTP_ROUTE_FIBER | SXE_HTTP_ROUTE_PREFIX,
                                           fiber_handler, NULL),
                     0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/switch", 0, upgrade_later, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "PUT", "/slow",
                                           SXE_HTTP_ROUTE_FIBER | SXE_HTTP_ROUTE_STREAM,
                                           slow_reader, NULL),
                     0);
    http_test_listen();
    return 0;
}

/* Turns the loop a few times, after moving fake time on by ns. */
static void pump(uint64_t ns)
{
    http_test_turn(ns);
}

static int client(void)
{
    return sxe_test_client(port);
}

#endif
