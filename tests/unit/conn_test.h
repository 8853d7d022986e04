/*
 * The harness of the connection tests (test_conn*.c): a server in the test's loop on a loopback
 * port, what it saw, plain blocking clients, and pump(), which turns the loop until what a test
 * waits for has happened. Static inline, so a test program that does not use a helper is not
 * warned about it.
 */
#ifndef SXE_CONN_TEST_H
#define SXE_CONN_TEST_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io_uring.h"
#include "loop.h"
#include "pool.h"
#include "sxe/clock.h"
#include "sxe/udp.h"
#include "sxe_test.h"
#include "sys.h"

static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nhi\n";

/* What the server saw, per test. */
static struct {
    unsigned connects;
    unsigned closes;
    unsigned requests;
    unsigned eofs;
    unsigned drains;
    enum sxe_close_reason last_reason;
    int last_err;
    char input[8192];
    size_t input_len;
    sxe_conn_t *last_conn;
    sxe_conn_t *adopted;
} seen;

static sxe_loop_t *loop;
static sxe_conn_t *listener;
static struct sockaddr_in server_address;

static inline void on_connect(sxe_conn_t *conn)
{
    seen.connects++;
    seen.last_conn = conn;
}

static inline void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    (void)conn;
    /* The contract (sxe/conn.h): err is the errno of SXE_CLOSE_ERROR, and 0 for every other
     * reason. Checked at every close of every test that uses this harness. */
    if (reason == SXE_CLOSE_ERROR ? err <= 0 : err != 0) {
        fail_msg("closed for reason %d with err %d", (int)reason, err);
    }
    seen.closes++;
    seen.last_reason = reason;
    seen.last_err = err;
}

/* One reply per complete request ("\r\n\r\n"); a partial request stays unconsumed. */
static inline size_t serve_requests(sxe_conn_t *conn, const char *data, size_t len)
{
    size_t used = 0;
    for (const char *end; (end = memmem(data + used, len - used, "\r\n\r\n", 4)) != NULL;) {
        assert_true(sxe_conn_write(conn, reply, sizeof(reply) - 1) >= 0);
        seen.requests++;
        used = (size_t)(end - data) + 4;
    }
    return used;
}

/* Keeps a copy of everything, consumes everything. */
static inline size_t record_input(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)conn;
    if (seen.input_len + len < sizeof(seen.input)) {
        memcpy(seen.input + seen.input_len, data, len);
        seen.input_len += len;
    }
    return len;
}

static const struct sxe_conn_handlers server_handlers = {
    .on_connect = on_connect, .on_read = serve_requests, .on_close = on_close};

static inline void start_server(const struct sxe_loop_options *options,
                                const struct sxe_listen_options *listen_options,
                                const struct sxe_conn_handlers *handlers)
{
    socklen_t len = sizeof(server_address);

    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, options), 0);
    server_address =
        (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(sxe_conn_listen(loop, &listener, (struct sockaddr *)&server_address,
                                     sizeof(server_address), listen_options, handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&server_address, &len), 0);
    assert_int_equal(sxe__conn_validate(loop), 0);
}

static inline int teardown(void **state)
{
    (void)state;
    if (loop != NULL) {
        assert_int_equal(sxe__conn_validate(loop), 0);
        sxe_loop_destroy(loop);
        loop = NULL;
    }
    sxe__sys_reset();
    sxe_log_set_sink(NULL, NULL);
    return 0;
}

/*
 * Turns the loop until done() holds, for ten seconds at most: a check that it gets there, not of
 * how fast (10,000 connections, each turn's table checked, take near 2 s in the mutation runner's
 * build with AddressSanitizer and gcov's counters).
 */
static inline void pump_until(int (*done)(void))
{
    uint64_t give_up = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;

    while (!done()) {
        if (sxe_clock_mono_ns() > give_up) {
            fail_msg("the loop did not get there in 10 s");
        }
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
        assert_int_equal(sxe__conn_validate(loop), 0);
    }
}

/* Turns the loop a few times without waiting long. */
static inline void pump(void)
{
    for (int i = 0; i < 5; i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
        assert_int_equal(sxe__conn_validate(loop), 0);
    }
}

static unsigned want_connects, want_closes, want_requests;
static inline int connects_reached(void)
{
    return seen.connects >= want_connects;
}
static inline int closes_reached(void)
{
    return seen.closes >= want_closes;
}
static inline int requests_reached(void)
{
    return seen.requests >= want_requests;
}

/* A client whose receive window is fixed at window bytes (0: the kernel's default). */
static inline int client_with_window(int window)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval two_seconds = {.tv_sec = 2};

    assert_true(fd >= 0);
    if (window > 0) {
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &window, sizeof(window)), 0);
    }
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &two_seconds, sizeof(two_seconds)), 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&server_address, sizeof(server_address)), 0);
    return fd;
}

static inline int client(void)
{
    return client_with_window(0);
}

static inline void send_all(int fd, const char *data, size_t len)
{
    assert_int_equal(send(fd, data, len, MSG_NOSIGNAL), (ssize_t)len);
}

/*
 * Waits, for two seconds at most, until the server's socket has acknowledged every byte a client
 * sent: over loopback that means all of it is in the server's socket, ready to be read. SIOCOUTQ
 * counts the bytes sent and not yet acknowledged.
 */
static inline void wait_until_acknowledged(int fd)
{
    uint64_t give_up = sxe_clock_mono_ns() + 2 * SXE_NS_PER_SEC;
    int unacknowledged;

    for (;;) {
        assert_int_equal(ioctl(fd, SIOCOUTQ, &unacknowledged), 0);
        if (unacknowledged == 0) {
            return;
        }
        if (sxe_clock_mono_ns() > give_up) {
            fail_msg("%d bytes still not acknowledged after 2 s", unacknowledged);
        }
        assert_int_equal(poll(NULL, 0, 1), 0);
    }
}

/* Reads exactly len bytes from a blocking client, turning the server loop meanwhile. */
static inline void expect_bytes(int fd, const char *expected, size_t len)
{
    char got[65536];
    size_t have = 0;
    uint64_t give_up = sxe_clock_mono_ns() + 2 * SXE_NS_PER_SEC;

    assert_true(len <= sizeof(got));
    while (have < len) {
        pump();
        ssize_t n = recv(fd, got + have, len - have, MSG_DONTWAIT);
        if (n > 0) {
            have += (size_t)n;
        } else if (n == 0) {
            fail_msg("the server closed after %zu of %zu bytes", have, len);
        } else if (sxe_clock_mono_ns() > give_up) {
            fail_msg("only %zu of %zu bytes arrived", have, len);
        }
    }
    assert_memory_equal(got, expected, len);
}

static inline void expect_reply(int fd, unsigned count)
{
    char expected[sizeof(reply) * 32];
    size_t len = 0;

    for (unsigned i = 0; i < count; i++) {
        memcpy(expected + len, reply, sizeof(reply) - 1);
        len += sizeof(reply) - 1;
    }
    expect_bytes(fd, expected, len);
}

/* The peer sees the server close: recv returns 0 (or a reset). */
static inline void expect_closed(int fd)
{
    char byte;
    uint64_t give_up = sxe_clock_mono_ns() + 2 * SXE_NS_PER_SEC;

    for (;;) {
        pump();
        ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            return;
        }
        if (sxe_clock_mono_ns() > give_up) {
            fail_msg("the server did not close the connection");
        }
    }
}

static const char request[] __attribute__((unused)) = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";

/* A stream of stream.total bytes written as fast as the connection takes them (backpressure). */
static struct {
    size_t sent;
    size_t total;
    size_t max_queued;
    unsigned fulls;
} stream;

static inline void write_more(sxe_conn_t *conn)
{
    char chunk[4096];

    while (stream.sent < stream.total) {
        size_t len =
            stream.total - stream.sent < sizeof(chunk) ? stream.total - stream.sent : sizeof(chunk);
        for (size_t i = 0; i < len; i++) {
            chunk[i] = (char)((stream.sent + i) % 251);
        }
        assert_int_equal(sxe_conn_write(conn, chunk, len), 0);
        stream.sent += len;
        if (sxe_conn_queued(conn) > stream.max_queued) {
            stream.max_queued = sxe_conn_queued(conn);
        }
        if (sxe_conn_backed_up(conn)) {
            stream.fulls++;
            return; /* wait for on_drained */
        }
    }
}

static inline void on_drained(sxe_conn_t *conn)
{
    seen.drains++;
    assert_false(sxe_conn_backed_up(conn));
    write_more(conn);
}

/* A small socket buffer, so the queue, not the kernel, absorbs what the reader does not take. */
static inline void start_stream(sxe_conn_t *conn)
{
    int small = 16384;

    seen.connects++;
    assert_int_equal(setsockopt(sxe_conn_fd(conn), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
                     0);
    write_more(conn);
}

/* Consumes input in multiples of 3 bytes, recording it: the rest waits for more. */
static inline size_t consume_in_threes(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)conn;
    record_input(conn, data, len - len % 3);
    return len - len % 3;
}

/* The file a sendfile test sends. */
static int file_fd __attribute__((unused));

#endif
