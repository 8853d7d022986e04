/*
 * Streamed request bodies (SXE_HTTP_ROUTE_STREAM), through real sockets under fake time: bodies
 * many times the connection's buffer, by length and chunked, by callback and from a fiber; the
 * client held back while the reader pauses; pipelined requests behind a body; an answer before
 * the body (the connection closes); 100 Continue only when the body is wanted; malformed and
 * oversized bodies; a client that leaves mid-body; a body that stops coming; invalid use.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe/fiber.h"
#include "sxe/http.h"
#include "http_test.h"

#define BODY_LIMIT   1024u               /* whole bodies: the buffer is about 18 KB */
#define STREAM_LIMIT (64u * 1024 * 1024) /* streamed bodies */

/* What a reader of a body saw. */
static struct upload {
    sxe_http_t *held;
    size_t bytes;
    uint64_t sum;
    unsigned pieces;
    size_t biggest;
    bool done;
    unsigned cancels;
    ssize_t read_rc; /* a fiber reader's last error */
} up;

static unsigned char pattern(size_t at)
{
    return (unsigned char)(at * 7 % 251);
}

static uint64_t pattern_sum(size_t len)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < len; i++) {
        sum += pattern(i) * (uint64_t)(i % 13 + 1);
    }
    return sum;
}

static void count(const char *data, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        up.sum += (unsigned char)data[i] * (uint64_t)((up.bytes + i) % 13 + 1);
    }
    up.bytes += len;
    up.pieces++;
    up.biggest = len > up.biggest ? len : up.biggest;
}

static void answer_count(sxe_http_t *http, const char *who)
{
    char text[128];
    int len = snprintf(text, sizeof(text), "%s got %zu sum %llu\n", who, up.bytes,
                       (unsigned long long)up.sum);
    assert_int_equal(sxe_http_respond(http, 200, "text/plain", text, (size_t)len), 0);
}

static void on_piece(sxe_http_t *held, const char *data, size_t len, bool done, void *arg)
{
    (void)arg;
    assert_true(held == up.held);
    assert_false(up.done);
    count(data, len);
    if (strstr(sxe_http_request_head(held)->target, "pause") != NULL && up.pieces == 1) {
        assert_int_equal(sxe_http_body_pause(held), 0);
    }
    if (done) {
        up.done = true;
        answer_count(held, "callback");
    }
}

static void on_cancel(sxe_http_t *held, void *arg)
{
    (void)held;
    (void)arg;
    up.cancels++;
    up.held = NULL;
}

/* Holds the request and reads its body by callback; /up/later starts reading from the test. */
static void upload(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_http_defer(http, on_cancel, NULL), 0);
    up.held = http;
    if (strstr(sxe_http_request_head(http)->target, "later") == NULL) {
        assert_int_equal(sxe_http_body_stream(up.held, on_piece, NULL), 0);
    }
}

/* Answers at once, without reading the body. */
static void deny(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_http_respond(http, 401, "text/plain", "no\n", 3), 0);
}

/* A whole body, on a server that also streams. */
static void whole(sxe_http_t *http, void *arg)
{
    size_t len;
    char text[64];

    (void)arg;
    (void)sxe_http_body(http, &len);
    int n = snprintf(text, sizeof(text), "whole %zu\n", len);
    sxe_http_respond(http, 200, "text/plain", text, (size_t)n);
}

/* Reads the body from a fiber, 1000 bytes at a time, as sequential code. */
static void fiber_upload(sxe_http_t *http, void *arg)
{
    char buf[1000];
    ssize_t got;

    (void)arg;
    /* A read of nothing is 0 and takes nothing; "bytewise" reads a byte at a time. */
    assert_int_equal(sxe_http_body_read(http, buf, 0), 0);
    size_t room = strstr(sxe_http_request_head(http)->target, "bytewise") != NULL ? 1 : sizeof(buf);
    while ((got = sxe_http_body_read(http, buf, room)) > 0) {
        assert_true(got <= (ssize_t)room);
        count(buf, (size_t)got);
        if (strstr(sxe_http_request_head(http)->target, "slow") != NULL) {
            assert_int_equal(sxe_fiber_sleep(SXE_NS_PER_MSEC), 0);
        }
    }
    up.read_rc = got;
    if (got == 0) {
        up.done = true;
        answer_count(http, "fiber");
    } else {
        assert_int_equal(sxe_http_respond(http, 200, "text/plain", "x\n", 2), -ECANCELED);
    }
}

static int setup(void **state)
{
    struct sxe_http_server_options options = {.loop = {.connections = 16},
                                              .limits = {.body_bytes = BODY_LIMIT},
                                              .stream_body_bytes = STREAM_LIMIT,
                                              .deferred = 4,
                                              .response_timeout = SXE_NS_PER_SEC,
                                              .fibers = 2,
                                              .fiber_stack_size = 32768};

    (void)state;
    http_test_fake_clock();
    memset(&up, 0, sizeof(up));
    assert_int_equal(sxe_http_server_create(&server, NULL, &options), 0);
    assert_int_equal(sxe_http_server_route(server, NULL, "/up",
                                           SXE_HTTP_ROUTE_PREFIX | SXE_HTTP_ROUTE_STREAM, upload,
                                           NULL),
                     0);
    assert_int_equal(
        sxe_http_server_route(server, "POST", "/deny", SXE_HTTP_ROUTE_STREAM, deny, NULL), 0);
    assert_int_equal(
        sxe_http_server_route(server, NULL, "/fiber",
                              SXE_HTTP_ROUTE_PREFIX | SXE_HTTP_ROUTE_FIBER | SXE_HTTP_ROUTE_STREAM,
                              fiber_upload, NULL),
        0);
    assert_int_equal(sxe_http_server_route(server, NULL, "/whole", 0, whole, NULL), 0);
    http_test_listen();
    return 0;
}

static void pump(uint64_t ns)
{
    http_test_turn(ns);
}

/* A client whose sends do not block. */
static int client(void)
{
    int fd = sxe_test_client(port);
    assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
    return fd;
}

/* Sends the pattern's bytes [from, to) as far as the socket takes them; returns where it stopped.
 */
static size_t send_body(int fd, size_t from, size_t to)
{
    unsigned char block[65536];

    while (from < to) {
        size_t len = to - from < sizeof(block) ? to - from : sizeof(block);
        for (size_t i = 0; i < len; i++) {
            block[i] = pattern(from + i);
        }
        ssize_t sent = send(fd, block, len, MSG_NOSIGNAL);
        if (sent <= 0) {
            break;
        }
        from += (size_t)sent;
    }
    return from;
}

/* Sends the rest of the body from at, turning the loop between sends. */
static void send_rest(int fd, size_t at, size_t len)
{
    for (int turns = 0; at < len && turns < 100000; turns++) {
        at = send_body(fd, at, len);
        pump(0);
    }
    assert_int_equal(at, len);
}

/* Turns the loop until the reader has the whole body: the kernel may still hold megabytes. */
static void until_done(void)
{
    for (int turns = 0; !up.done && turns < 10000; turns++) {
        pump(0);
    }
    pump(0); /* the answer goes out (a completion backend's send completes on a later turn) */
}

/* Turns the loop, the clock moving step_ns a turn, until out holds want or a bound passes: on a
 * busy machine the kernel may deliver loopback bytes several milliseconds late. */
static void until_heard(int fd, char *out, size_t size, const char *want, uint64_t step_ns)
{
    for (int turns = 0; strstr(out, want) == NULL && turns < 2000; turns++) {
        pump(step_ns);
        sxe_test_heard(fd, out, size);
    }
}

static void expect_count(const char *out, const char *who, size_t len)
{
    char want[128];
    snprintf(want, sizeof(want), "%s got %zu sum %llu\n", who, len,
             (unsigned long long)pattern_sum(len));
    if (strstr(out, want) == NULL) {
        fail_msg("expected \"%s\" in: %s (read %zu in %u pieces, done %d)", want, out, up.bytes,
                 up.pieces, up.done);
    }
}

static void test_a_body_many_times_the_buffer_streams_through(void **state)
{
    char out[4096] = "", head[128];
    size_t len = 1024 * 1024;
    int fd = client();

    (void)state;
    snprintf(head, sizeof(head), "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
             len);
    sxe_test_say(fd, head);
    send_rest(fd, 0, len);
    until_done();
    sxe_test_heard(fd, out, sizeof(out));
    expect_count(out, "callback", len);
    assert_true(up.done);
    assert_true(up.pieces > 1);
    assert_true(up.biggest < 20000); /* through the connection's one buffer, piece by piece */
    assert_null(strstr(out, "Connection: close"));

    out[0] = '\0'; /* kept alive: the next request on it is read as usual */
    sxe_test_say(fd, "POST /whole HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "whole 3\n"));
    struct sxe_http_defer_stats stats;
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 0);
    close(fd);
}

static void test_a_chunked_body_with_a_request_behind_it(void **state)
{
    char out[4096] = "", chunks[8192];
    int fd = client(), at = 0;

    (void)state;
    sxe_test_say(fd, "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    pump(0);
    size_t sent = 0;
    for (int c = 1; c <= 40; c++) { /* chunks of every size from 1 to 40, some with extensions */
        at += snprintf(chunks + at, sizeof(chunks) - (size_t)at, "%x%s\r\n", c,
                       c % 7 == 0 ? ";ext=\"v\"" : "");
        for (int i = 0; i < c; i++) {
            chunks[at++] = (char)pattern(sent++);
        }
        at += snprintf(chunks + at, sizeof(chunks) - (size_t)at, "\r\n");
    }
    at += snprintf(chunks + at, sizeof(chunks) - (size_t)at,
                   "0\r\nX-Trailer: t\r\n\r\nGET /whole HTTP/1.1\r\nHost: x\r\n\r\n");
    for (int i = 0; i < at; i += 97) { /* in pieces that cut the framing anywhere */
        assert_int_equal(send(fd, chunks + i, (size_t)(at - i < 97 ? at - i : 97), 0),
                         at - i < 97 ? at - i : 97);
        pump(0);
    }
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    expect_count(out, "callback", sent);
    char *first = strstr(out, "callback got"), *second = strstr(out, "whole 0\n");
    assert_non_null(second);
    assert_true(first < second);
    close(fd);
}

static void test_a_paused_reader_holds_the_client_back(void **state)
{
    char out[4096] = "", head[128];
    size_t len = 32u * 1024 * 1024, at; /* more than the kernel buffers on the way */
    int fd = client();

    (void)state;
    snprintf(head, sizeof(head),
             "POST /up/pause HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n", len);
    sxe_test_say(fd, head);
    at = 0;
    for (int i = 0; i < 50; i++) {
        at = send_body(fd, at, len);
        pump(0);
    }
    assert_true(at < len); /* the socket filled: the server does not read */
    assert_int_equal(up.pieces, 1);
    assert_true(up.bytes < 20000);
    assert_non_null(up.held);

    assert_int_equal(sxe_http_body_resume(up.held), 0);
    send_rest(fd, at, len);
    until_done();
    sxe_test_heard(fd, out, sizeof(out));
    expect_count(out, "callback", len);
    close(fd);
}

static void test_reading_starts_when_the_holder_asks(void **state)
{
    char out[4096] = "";
    int fd = client();

    (void)state;
    sxe_test_say(fd, "POST /up/later HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n");
    assert_int_equal(send(fd, "\x00\x07\x0e\x15\x1c", 5, 0), 5);
    pump(0);
    assert_int_equal(up.pieces, 0);
    assert_int_equal(sxe_http_body_stream(up.held, on_piece, NULL), 0);
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    expect_count(out, "callback", 5);
    close(fd);
}

static void test_answered_before_the_body_closes_the_connection(void **state)
{
    char out[4096] = "";
    int fd = client();

    (void)state;
    sxe_test_say(
        fd, "POST /deny HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 100000\r\n"
            "\r\n");
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_null(strstr(out, "100 Continue")); /* not wanted: the client need not send it */
    assert_non_null(strstr(out, "401 Unauthorized"));
    assert_non_null(strstr(out, "Connection: close"));
    send_rest(fd, 0, 100000); /* sent anyway: read and dropped, not taken for requests */
    pump(0);
    out[0] = '\0';
    sxe_test_heard(fd, out, sizeof(out));
    assert_string_equal(out, "");
    shutdown(fd, SHUT_WR);
    pump(0);
    ssize_t end = 0;
    for (int i = 0; i < 10 && end != -1; i++) {
        end = sxe_test_heard(fd, out, sizeof(out));
        pump(0);
    }
    assert_int_equal(end, -1);
    close(fd);
}

static void test_100_continue_when_the_body_is_wanted(void **state)
{
    char out[4096] = "";
    int fd = client();

    (void)state;
    sxe_test_say(
        fd, "POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_string_equal(out, "HTTP/1.1 100 Continue\r\n\r\n");
    assert_int_equal(send(fd, "\x00\x07\x0e\x15", 4, 0), 4);
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    expect_count(out, "callback", 4);
    close(fd);
}

/* Sends a request on a new connection and checks the 400 its malformed body gets, whole (its Date
 * field, the server's, taken out), with its body or without it (HEAD). */
static void expect_400(const char *request, bool body)
{
    char out[4096] = "";
    int fd = client();

    sxe_test_say(fd, request);
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    char *date = strstr(out, "\r\nDate: ");
    char *end = date != NULL ? strstr(date + 2, "\r\n") : NULL;
    assert_non_null(end);
    memmove(date, end, strlen(end) + 1);
    assert_string_equal(out, body ? "HTTP/1.1 400 Bad Request\r\nServer: sxe\r\nContent-Length: "
                                    "16\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n"
                                    "400 Bad Request\n"
                                  : "HTTP/1.1 400 Bad Request\r\nServer: sxe\r\nContent-Length: "
                                    "16\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n");
    close(fd);
}

static void test_a_malformed_body_is_refused_and_its_holder_told(void **state)
{
    (void)state;
    expect_400(
        "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nZZ\r\n",
        true);
    assert_int_equal(up.cancels, 1);
    assert_int_equal(up.bytes, 3);
    struct sxe_http_defer_stats stats;
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 0);
    /* The refusal of a HEAD request's body says its length, and sends none. */
    expect_400(
        "HEAD /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nZZ\r\n",
        false);
    assert_int_equal(up.cancels, 2);
}

static void test_bodies_past_their_limits_get_413(void **state)
{
    char out[4096] = "", head[160];
    int fd = client();

    (void)state;
    sxe_test_say(
        fd, "POST /whole HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n"); /* > BODY_LIMIT */
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "413 "));
    close(fd);

    out[0] = '\0';
    fd = client();
    snprintf(head, sizeof(head), "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %u\r\n\r\n",
             STREAM_LIMIT + 1);
    sxe_test_say(fd, head);
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "413 "));
    assert_int_equal(up.pieces, 0); /* refused at the head: the handler never ran */
    close(fd);

    out[0] = '\0'; /* chunked: refused where it passes the limit, and the holder told */
    fd = client();
    sxe_test_say(fd, "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    snprintf(head, sizeof(head), "%x\r\n", STREAM_LIMIT + 1);
    sxe_test_say(fd, head);
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "413 "));
    assert_int_equal(up.cancels, 1);
    close(fd);
}

static void test_a_client_that_leaves_mid_body(void **state)
{
    struct sxe_http_defer_stats stats;
    int fd = client();

    (void)state;
    sxe_test_say(fd, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
    assert_int_equal(send_body(fd, 0, 5000), 5000);
    pump(0);
    assert_int_equal(up.bytes, 5000);
    close(fd);
    pump(0);
    assert_int_equal(up.cancels, 1);
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 0);

    /* 100 KB and the end, all in the socket at once: read over several turns (READS_PER_TURN),
     * and the end, reported by one edge in the first, is still seen after the last. */
    memset(&up, 0, sizeof(up));
    fd = client();
    sxe_test_say(fd, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n");
    size_t sent = send_body(fd, 0, 100000);
    close(fd);
    for (int i = 0; i < 200 && up.cancels == 0; i++) {
        pump(0);
    }
    assert_int_equal(up.bytes, sent);
    assert_int_equal(up.cancels, 1);
}

static void test_a_body_that_stops_coming_times_out(void **state)
{
    char out[4096] = "";
    int fd = client();

    (void)state;
    sxe_test_say(fd, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
    pump(0);
    pump(SXE_NS_PER_SEC / 2);
    assert_int_equal(send_body(fd, 0, 5000), 5000);
    pump(0);
    pump(SXE_NS_PER_SEC * 3 / 4); /* the piece restarted the deadline: not yet */
    sxe_test_heard(fd, out, sizeof(out));
    assert_string_equal(out, "");
    pump(SXE_NS_PER_SEC / 2);
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "503 Service Unavailable"));
    assert_int_equal(up.cancels, 1);
    close(fd);
}

/* A body that trickles, 10 bytes every half second: each piece restarts the deadline, but past
 * three seconds under the least rate (4096 bytes a second) it is answered 408. */
static void test_a_body_that_trickles_is_too_slow(void **state)
{
    char out[4096] = "";
    int fd = client();
    size_t at = 0;

    (void)state;
    sxe_test_say(fd, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
    pump(0);
    for (int i = 0; i < 6; i++) { /* 2.5 s: judged only over three seconds or more */
        at = send_body(fd, at, at + 10);
        pump(0);
        pump(SXE_NS_PER_SEC / 2);
    }
    sxe_test_heard(fd, out, sizeof(out));
    assert_string_equal(out, "");
    for (int i = 0; i < 3 && out[0] == '\0'; i++) {
        at = send_body(fd, at, at + 10);
        pump(0);
        pump(SXE_NS_PER_SEC / 2);
        sxe_test_heard(fd, out, sizeof(out));
    }
    assert_non_null(strstr(out, "HTTP/1.1 408 Request Timeout"));
    assert_int_equal(up.cancels, 1);
    close(fd);
}

/* A body that comes at exactly the least rate is not too slow, only one under it: six pieces of
 * 2048 bytes 0.6 s apart, 12288 bytes in the three seconds from the first (4096 a second). Each
 * piece comes before the held request's deadline (1 s), which it restarts. */
static void test_a_body_at_exactly_the_least_rate_is_not_too_slow(void **state)
{
    char out[4096] = "";
    int fd = client();
    size_t at = 0, len = 8 * 2048;

    (void)state;
    sxe_test_say(fd, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 16384\r\n\r\n");
    pump(0);
    at = send_body(fd, at, at + 2048); /* its rate is judged from here */
    pump(0);
    for (int i = 0; i < 5; i++) {
        pump(600 * SXE_NS_PER_MSEC);
        at = send_body(fd, at, at + 2048);
        pump(0);
    }
    sxe_test_heard(fd, out, sizeof(out));
    assert_string_equal(out, "");
    at = send_body(fd, at, len);
    until_done();
    sxe_test_heard(fd, out, sizeof(out));
    expect_count(out, "callback", len);
    assert_int_equal(up.cancels, 0);
    close(fd);
}

static void test_a_fiber_reads_a_body_as_sequential_code(void **state)
{
    char out[4096] = "", head[128];
    size_t len = 200 * 1000 + 7;
    int fd = client();

    (void)state;
    snprintf(head, sizeof(head), "POST /fiber HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
             len);
    sxe_test_say(fd, head);
    send_rest(fd, 0, len);
    until_done();
    sxe_test_heard(fd, out, sizeof(out));
    expect_count(out, "fiber", len);
    assert_int_equal(up.biggest, 1000);

    out[0] = '\0'; /* a slow fiber reader, chunked, with the next request behind it */
    memset(&up, 0, sizeof(up));
    sxe_test_say(fd, "POST /fiber/slow HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "5dc\r\n");
    send_rest(fd, 0, 1500);
    sxe_test_say(fd, "\r\n0\r\n\r\nGET /whole HTTP/1.1\r\nHost: x\r\n\r\n");
    until_heard(fd, out, sizeof(out), "whole 0\n", SXE_NS_PER_MSEC);
    expect_count(out, "fiber", 1500);
    assert_non_null(strstr(out, "whole 0\n"));

    out[0] = '\0'; /* a reader with room for one byte at a time */
    memset(&up, 0, sizeof(up));
    sxe_test_say(fd, "POST /fiber/bytewise HTTP/1.1\r\nHost: x\r\nContent-Length: 300\r\n\r\n");
    send_rest(fd, 0, 300);
    until_heard(fd, out, sizeof(out), "fiber got", 0);
    expect_count(out, "fiber", 300);
    assert_int_equal(up.biggest, 1);

    out[0] = '\0'; /* no body: the first read says so */
    memset(&up, 0, sizeof(up));
    sxe_test_say(fd, "GET /fiber HTTP/1.1\r\nHost: x\r\n\r\n");
    until_heard(fd, out, sizeof(out), "fiber got", 0);
    expect_count(out, "fiber", 0);
    close(fd);
}

static void test_a_fiber_reading_a_body_hears_its_client_leave(void **state)
{
    int fd = client();

    (void)state;
    sxe_test_say(fd, "POST /fiber HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
    assert_int_equal(send_body(fd, 0, 3000), 3000);
    pump(0);
    assert_int_equal(up.bytes, 3000);
    close(fd);
    pump(0);
    assert_int_equal(up.read_rc, -ECANCELED);
    struct sxe_http_defer_stats stats;
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 0);
}

#ifdef SXE_DEBUG
static void stream_unheld(void *http)
{
    (void)!sxe_http_body_stream(http, on_piece, NULL);
}
#endif

static void misuse(sxe_http_t *http, void *arg)
{
    char buf[8];

    (void)arg;
    assert_int_equal(sxe_http_body_read(http, buf, sizeof(buf)), -EPERM); /* not in a fiber */
#ifndef SXE_DEBUG
    assert_int_equal(sxe_http_body_stream(http, on_piece, NULL), -EINVAL); /* not held */
    sxe_http_t *held = http;
    assert_int_equal(sxe_http_defer(http, NULL, NULL), 0);
    assert_int_equal(sxe_http_body_stream(held, on_piece, NULL), -EINVAL); /* not streamed */
    assert_int_equal(sxe_http_body_pause(held), -EINVAL);
    assert_int_equal(sxe_http_respond(held, 204, NULL, NULL, 0), 0);
#else
    const char *const expected[] = {"assertion failed:", "sxe__http_is_held(http) && http->stream",
                                    NULL};
    sxe_test_expect_abort(stream_unheld, http, expected); /* not held */
    assert_int_equal(sxe_http_respond(http, 204, NULL, NULL, 0), 0);
#endif
}

static void no_body(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_http_defer(http, NULL, NULL), 0);
    up.held = http;
    assert_int_equal(sxe_http_body_stream(up.held, on_piece, NULL), 0); /* done at once */
    assert_true(up.done);
#ifndef SXE_DEBUG
    assert_int_equal(sxe_http_body_stream(up.held, on_piece, NULL), -EINVAL); /* read already */
#endif
}

static void test_invalid_use(void **state)
{
    char out[4096] = "";
    int fd = client();

    (void)state;
#ifndef SXE_DEBUG
    assert_int_equal(sxe_http_server_route(server, NULL, "/bad", 0x80, misuse, NULL), -EINVAL);
#endif
    assert_int_equal(sxe_http_server_route(server, NULL, "/misuse", 0, misuse, NULL), 0);
    assert_int_equal(
        sxe_http_server_route(server, "GET", "/nobody", SXE_HTTP_ROUTE_STREAM, no_body, NULL), 0);
    sxe_test_say(fd,
                 "GET /misuse HTTP/1.1\r\nHost: x\r\n\r\nGET /nobody HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "204 No Content"));
    expect_count(out, "callback", 0);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_body_many_times_the_buffer_streams_through, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_chunked_body_with_a_request_behind_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_paused_reader_holds_the_client_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reading_starts_when_the_holder_asks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answered_before_the_body_closes_the_connection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_100_continue_when_the_body_is_wanted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_malformed_body_is_refused_and_its_holder_told, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bodies_past_their_limits_get_413, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_client_that_leaves_mid_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_body_that_stops_coming_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_body_that_trickles_is_too_slow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_body_at_exactly_the_least_rate_is_not_too_slow,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_reads_a_body_as_sequential_code, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_reading_a_body_hears_its_client_leave, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_invalid_use, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
