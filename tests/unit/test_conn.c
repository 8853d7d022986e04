/*
 * Connections over real loopback sockets: serving, partial and pipelined input, backpressure,
 * the full table, timeouts under fake time, faults injected through the system call seam, UDP,
 * Unix sockets, fd passing, sendfile, half-close, signals, and 10,000 connections at once.
 *
 * The server side runs in the test's loop; clients are plain blocking sockets (or a second
 * process), and pump() turns the loop until what the test waits for has happened.
 */
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

static void on_connect(sxe_conn_t *conn)
{
    seen.connects++;
    seen.last_conn = conn;
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    (void)conn;
    seen.closes++;
    seen.last_reason = reason;
    seen.last_err = err;
}

/* One reply per complete request ("\r\n\r\n"); a partial request stays unconsumed. */
static size_t serve_requests(sxe_conn_t *conn, const char *data, size_t len)
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
static size_t record_input(sxe_conn_t *conn, const char *data, size_t len)
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

static void start_server(const struct sxe_loop_options *options,
                         const struct sxe_listen_options *listen_options,
                         const struct sxe_conn_handlers *handlers)
{
    socklen_t len = sizeof(server_address);

    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, options), 0);
    server_address =
        (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(sxe_listen(loop, &listener, (struct sockaddr *)&server_address,
                                sizeof(server_address), listen_options, handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&server_address, &len), 0);
    assert_int_equal(sxe__conn_validate(loop), 0);
}

static int teardown(void **state)
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

/* Turns the loop until done() holds, for two seconds at most. */
static void pump_until(int (*done)(void))
{
    uint64_t give_up = sxe_clock_mono_ns() + 2 * SXE_NS_PER_SEC;

    while (!done()) {
        if (sxe_clock_mono_ns() > give_up) {
            fail_msg("the loop did not get there in 2 s");
        }
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
        assert_int_equal(sxe__conn_validate(loop), 0);
    }
}

/* Turns the loop a few times without waiting long. */
static void pump(void)
{
    for (int i = 0; i < 5; i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
        assert_int_equal(sxe__conn_validate(loop), 0);
    }
}

static unsigned want_connects, want_closes, want_requests;
static int connects_reached(void)
{
    return seen.connects >= want_connects;
}
static int closes_reached(void)
{
    return seen.closes >= want_closes;
}
static int requests_reached(void)
{
    return seen.requests >= want_requests;
}

/* A client whose receive window is fixed at window bytes (0: the kernel's default). */
static int client_with_window(int window)
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

static int client(void)
{
    return client_with_window(0);
}

static void send_all(int fd, const char *data, size_t len)
{
    assert_int_equal(send(fd, data, len, MSG_NOSIGNAL), (ssize_t)len);
}

/*
 * Waits, for two seconds at most, until the server's socket has acknowledged every byte a client
 * sent: over loopback that means all of it is in the server's socket, ready to be read. SIOCOUTQ
 * counts the bytes sent and not yet acknowledged.
 */
static void wait_until_acknowledged(int fd)
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
static void expect_bytes(int fd, const char *expected, size_t len)
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

static void expect_reply(int fd, unsigned count)
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
static void expect_closed(int fd)
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

static const char request[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";

static void test_serves_keep_alive_requests(void **state)
{
    struct sockaddr_in peer;
    socklen_t peer_len = sizeof(peer);

    (void)state;
    start_server(NULL, NULL, &server_handlers);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);
    for (int i = 0; i < 3; i++) {
        send_all(fd, request, sizeof(request) - 1);
        expect_reply(fd, 1);
    }
    assert_int_equal(seen.requests, 3);
    assert_int_equal(sxe_conn_peer(seen.last_conn, (struct sockaddr *)&peer, &peer_len), 0);
    assert_int_equal(peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    assert_ptr_equal(sxe_conn_from_id(loop, sxe_conn_id(seen.last_conn)), seen.last_conn);
    assert_ptr_equal(sxe_conn_loop(seen.last_conn), loop);
    assert_true(sxe_conn_fd(seen.last_conn) >= 0);
    uint64_t id = sxe_conn_id(seen.last_conn);

    close(fd);
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_PEER);
    assert_null(sxe_conn_from_id(loop, id));
    assert_null(sxe_conn_from_id(loop, UINT32_MAX));

    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.accepted, 1);
    assert_int_equal(stats.closed, 1);
    assert_int_equal(stats.open, 1); /* the listener */
    assert_int_equal(stats.buffers_in_use, 0);
}

/* Pipelined requests split at every byte boundary: every reply arrives, in order, once. */
static void test_pipelined_requests_split_at_every_byte(void **state)
{
    char two[2 * sizeof(request)];
    size_t total = 2 * (sizeof(request) - 1);

    (void)state;
    memcpy(two, request, sizeof(request) - 1);
    memcpy(two + sizeof(request) - 1, request, sizeof(request) - 1);
    start_server(NULL, NULL, &server_handlers);
    int fd = client();
    int one = 1;
    assert_int_equal(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
    for (size_t split = 1; split < total; split++) {
        unsigned before = seen.requests;
        send_all(fd, two, split);
        pump();
        send_all(fd, two + split, total - split);
        expect_reply(fd, 2);
        assert_int_equal(seen.requests, before + 2);
    }
    /* Input split into single bytes. */
    for (size_t i = 0; i < sizeof(request) - 1; i++) {
        send_all(fd, request + i, 1);
        pump();
    }
    expect_reply(fd, 1);
    /* Sixteen at once come back together. */
    char many[16 * sizeof(request)];
    for (int i = 0; i < 16; i++) {
        memcpy(many + i * (sizeof(request) - 1), request, sizeof(request) - 1);
    }
    send_all(fd, many, 16 * (sizeof(request) - 1));
    expect_reply(fd, 16);
    close(fd);
}

/* Unconsumed input is kept and offered again with what follows, and buffers go back after. */
static size_t consume_in_threes(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)conn;
    record_input(conn, data, len - len % 3);
    return len - len % 3;
}

static void test_partial_consumption_keeps_the_rest(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_read = consume_in_threes,
                                                      .on_close = on_close};
    struct sxe_loop_stats stats;

    (void)state;
    start_server(NULL, NULL, &handlers);
    int fd = client();
    send_all(fd, "abcde", 5);
    pump();
    assert_int_equal(seen.input_len, 3);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.buffers_in_use, 1);
    assert_int_equal(sxe_pool_count(loop->conn_pool, SXE__CONN_READING), 1);
    send_all(fd, "f", 1);
    pump();
    assert_int_equal(seen.input_len, 6);
    assert_memory_equal(seen.input, "abcdef", 6);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.buffers_in_use, 0);
    assert_int_equal(sxe_pool_count(loop->conn_pool, SXE__CONN_IDLE), 1);
    close(fd);
}

/* A message that never completes cannot grow past buffer_size. */
static size_t consume_nothing(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)conn;
    (void)data;
    (void)len;
    return 0;
}

static void test_message_larger_than_buffer_closes(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_read = consume_nothing,
                                                      .on_close = on_close};
    struct sxe_loop_options options = {.buffer_size = 1024};
    char big[3000];

    (void)state;
    start_server(&options, NULL, &handlers);
    int fd = client();
    memset(big, 'x', sizeof(big));
    send_all(fd, big, sizeof(big));
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_OVERFLOW);
    close(fd);
}

/* With on_overflow the program answers a message too large, and the answer arrives whole. */
static unsigned overflows;

static void answer_overflow(sxe_conn_t *conn)
{
    overflows++;
    assert_int_equal(sxe_conn_write(conn, "ERR line too long\n", 18), 0);
}

static void test_message_larger_than_buffer_can_be_answered(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_read = consume_nothing, .on_close = on_close, .on_overflow = answer_overflow};
    struct sxe_loop_options options = {.buffer_size = 1024};
    struct sxe_loop_stats stats;
    char big[3000], answer[64];

    (void)state;
    overflows = 0;
    start_server(&options, NULL, &handlers);
    int fd = client();
    memset(big, 'x', sizeof(big));
    send_all(fd, big, sizeof(big));
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(overflows, 1);
    assert_int_equal(seen.last_reason, SXE_CLOSE_LOCAL);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.buffers_in_use, 0);
    ssize_t got = recv(fd, answer, sizeof(answer), 0);
    assert_int_equal(got, 18);
    assert_memory_equal(answer, "ERR line too long\n", 18);
    close(fd);
}

/* The peer closes in the middle of a message: the part stays accounted, the close is clean. */
static void test_peer_closes_mid_message(void **state)
{
    (void)state;
    start_server(NULL, NULL, &server_handlers);
    int fd = client();
    send_all(fd, request, 10);
    pump();
    assert_int_equal(sxe_pool_count(loop->conn_pool, SXE__CONN_READING), 1);
    close(fd);
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_PEER);
    assert_int_equal(seen.requests, 0);
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.buffers_in_use, 0);
}

/* Backpressure: 1 MB to a reader that reads slowly never queues more than the limit. */
static struct {
    size_t sent;
    size_t total;
    size_t max_queued;
    unsigned fulls;
} stream;

static void write_more(sxe_conn_t *conn)
{
    char chunk[4096];

    while (stream.sent < stream.total) {
        size_t len =
            stream.total - stream.sent < sizeof(chunk) ? stream.total - stream.sent : sizeof(chunk);
        for (size_t i = 0; i < len; i++) {
            chunk[i] = (char)((stream.sent + i) % 251);
        }
        int rc = sxe_conn_write(conn, chunk, len);
        assert_true(rc >= 0);
        stream.sent += len;
        if (sxe_conn_queued(conn) > stream.max_queued) {
            stream.max_queued = sxe_conn_queued(conn);
        }
        if (rc == SXE_CONN_FULL) {
            stream.fulls++;
            return; /* wait for on_drained */
        }
    }
}

static void on_drained(sxe_conn_t *conn)
{
    seen.drains++;
    write_more(conn);
}

/* A small socket buffer, so the queue, not the kernel, absorbs what the reader does not take. */
static void start_stream(sxe_conn_t *conn)
{
    int small = 16384;

    seen.connects++;
    assert_int_equal(setsockopt(sxe_conn_fd(conn), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
                     0);
    write_more(conn);
}

static void test_slow_reader_and_high_water_mark(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = start_stream, .on_drained = on_drained, .on_close = on_close};
    struct sxe_loop_options options = {
        .buffer_size = 4096, .write_limit = 65536, .high_water = 32768};
    static char got[1 << 20];
    size_t have = 0;

    (void)state;
    stream = (typeof(stream)){.total = sizeof(got)};
    start_server(&options, NULL, &handlers);
    int fd = client();
    /* A fixed, modest window: big enough to avoid TCP's zero-window probing, small enough
     * that the kernel cannot absorb the megabyte and sxe's queue has to. */
    int window = 65536;
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &window, sizeof(window)), 0);
    uint64_t give_up = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;
    while (have < sizeof(got)) {
        pump();
        ssize_t n = recv(fd, got + have, 8192 < sizeof(got) - have ? 8192 : sizeof(got) - have,
                         MSG_DONTWAIT);
        if (n > 0) {
            have += (size_t)n;
        }
        assert_true(sxe_clock_mono_ns() < give_up);
    }
    for (size_t i = 0; i < sizeof(got); i++) {
        if (got[i] != (char)(i % 251)) {
            fail_msg("byte %zu is wrong", i);
        }
    }
    assert_true(stream.fulls > 0);
    assert_true(seen.drains > 0);
    assert_true(stream.max_queued <= 65536);
    assert_true(stream.max_queued >= 32768);
    close(fd);
}

/* Writing past write_limit is refused with nothing accepted. */
static void write_too_much(sxe_conn_t *conn)
{
    static char big[70000];
    assert_int_equal(sxe_conn_write(conn, big, sizeof(big)), -ENOBUFS);
    seen.connects++;
}

static void test_write_limit(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = write_too_much};
    struct sxe_loop_options options = {.buffer_size = 4096, .write_limit = 65536};

    (void)state;
    start_server(&options, NULL, &handlers);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);
    close(fd);
}

/* A full table refuses new connections with a counter and a log line, and serves the rest. */
static void test_full_table(void **state)
{
    struct sxe_loop_options options = {.connections = 3};
    struct sxe_test_capture capture;
    struct sxe_loop_stats stats;

    (void)state;
    start_server(&options, NULL, &server_handlers);
    int a = client();
    int b = client();
    want_connects = 2;
    pump_until(connects_reached);
    sxe_test_capture_start(&capture);
    int c = client();
    expect_closed(c);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "connection table full (3)"));
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.table_full, 1);
    send_all(a, request, sizeof(request) - 1);
    expect_reply(a, 1);
    send_all(b, request, sizeof(request) - 1);
    expect_reply(b, 1);
    close(a);
    close(b);
    close(c);
}

/* With eviction, the oldest idle connection makes room for the new one. */
static void test_full_table_evicts_oldest_idle(void **state)
{
    struct sxe_loop_options options = {.connections = 3};
    struct sxe_listen_options listen_options = {.flags = SXE_LISTEN_EVICT_IDLE};
    struct sxe_loop_stats stats;

    (void)state;
    start_server(&options, &listen_options, &server_handlers);
    int oldest = client();
    want_connects = 1;
    pump_until(connects_reached);
    int newer = client();
    want_connects = 2;
    pump_until(connects_reached);
    send_all(newer, request, sizeof(request) - 1); /* newer is now the more recently active */
    expect_reply(newer, 1);
    int third = client();
    want_connects = 3;
    pump_until(connects_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_EVICTED);
    expect_closed(oldest);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.evicted, 1);
    send_all(third, request, sizeof(request) - 1);
    expect_reply(third, 1);
    send_all(newer, request, sizeof(request) - 1);
    expect_reply(newer, 1);
    close(oldest);
    close(newer);
    close(third);
}

/* Idle and read timeouts fire under fake time; nothing sleeps. */
static void test_timeouts_under_fake_time(void **state)
{
    struct sxe_loop_options options = {.idle_timeout = 30 * SXE_NS_PER_SEC,
                                       .read_timeout = 5 * SXE_NS_PER_SEC};

    (void)state;
    sxe__sys_clock_fake(100 * SXE_NS_PER_SEC, 0);
    start_server(&options, NULL, &server_handlers);
    int idle = client();
    int partial = client();
    want_connects = 2;
    pump_until(connects_reached);
    send_all(partial, request, 5);
    pump();
    assert_int_equal(sxe_pool_count(loop->conn_pool, SXE__CONN_READING), 1);

    sxe__sys_clock_advance(5 * SXE_NS_PER_SEC);
    pump();
    assert_int_equal(seen.closes, 0);
    sxe__sys_clock_advance(1);
    pump();
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.last_reason, SXE_CLOSE_TIMEOUT);
    expect_closed(partial);

    /* Bytes trickled in do not extend a partial message's time; consuming some does. */
    send_all(idle, request, sizeof(request) - 1);
    expect_reply(idle, 1);
    int trickle = client();
    want_connects = 3;
    pump_until(connects_reached);
    for (int i = 0; i < 4; i++) {
        send_all(trickle, request + i, 1);
        pump();
        sxe__sys_clock_advance(SXE_NS_PER_SEC);
        pump();
    }
    assert_int_equal(seen.closes, 1);
    sxe__sys_clock_advance(SXE_NS_PER_SEC + 1);
    pump();
    assert_int_equal(seen.closes, 2);
    expect_closed(trickle);
    close(trickle);

    /* Activity resets the idle clock. */
    sxe__sys_clock_advance(20 * SXE_NS_PER_SEC);
    send_all(idle, request, sizeof(request) - 1);
    expect_reply(idle, 1);
    sxe__sys_clock_advance(29 * SXE_NS_PER_SEC);
    pump();
    assert_int_equal(seen.closes, 2);
    sxe__sys_clock_advance(SXE_NS_PER_SEC + 1);
    pump();
    assert_int_equal(seen.closes, 3);
    expect_closed(idle);
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.timeouts, 3);
    close(idle);
    close(partial);
}

/* Outgoing connects: completed, refused, and timed out. */
static void test_connect(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = record_input, .on_close = on_close};
    struct sxe_loop_options options = {.connect_timeout = 3 * SXE_NS_PER_SEC};
    struct sockaddr_in source = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002)};
    struct sockaddr_in local;
    socklen_t local_len = sizeof(local);
    sxe_conn_t *conn;

    (void)state;
    start_server(&options, NULL, &server_handlers);

    /* From a chosen source address, to our own listener: a request gets its reply. */
    assert_int_equal(sxe_connect(loop, &conn, (struct sockaddr *)&server_address,
                                 sizeof(server_address), (struct sockaddr *)&source, sizeof(source),
                                 &handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_write(conn, "x", 1), -EPIPE); /* not connected yet */
    want_connects = 2;                                      /* ours, and the server's accept */
    pump_until(connects_reached);
    assert_int_equal(sxe_conn_local(conn, (struct sockaddr *)&local, &local_len), 0);
    assert_int_equal(local.sin_addr.s_addr, htonl(0x7f000002));
    assert_int_equal(sxe_conn_write(conn, request, sizeof(request) - 1), 0);
    want_requests = 1;
    pump_until(requests_reached);
    pump();
    assert_int_equal(seen.input_len, sizeof(reply) - 1);

    /* Refused: nobody listens there. */
    struct sockaddr_in nobody = server_address;
    int probe = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in probe_address = {.sin_family = AF_INET,
                                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t probe_len = sizeof(probe_address);
    assert_int_equal(bind(probe, (struct sockaddr *)&probe_address, sizeof(probe_address)), 0);
    assert_int_equal(getsockname(probe, (struct sockaddr *)&probe_address, &probe_len), 0);
    nobody.sin_port = probe_address.sin_port; /* bound but not listening */
    unsigned closes = seen.closes;
    assert_int_equal(sxe_connect(loop, &conn, (struct sockaddr *)&nobody, sizeof(nobody), NULL, 0,
                                 &handlers, NULL),
                     0);
    want_closes = closes + 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.last_err, ECONNREFUSED);
    close(probe);
}

static void test_connect_timeout(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = on_connect,
                                                      .on_close = on_close};
    struct sxe_loop_options options = {.connect_timeout = 3 * SXE_NS_PER_SEC};
    sxe_conn_t *conn;

    (void)state;
    sxe__sys_clock_fake(100 * SXE_NS_PER_SEC, 0);
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    /* A connect whose answer never arrives: every wait is interrupted, so the loop never sees
     * the kernel's reply, as if the peer never answered. */
    sxe__sys_fail(sxe_test_uring() ? SXE_SYS_io_uring_enter : SXE_SYS_epoll_pwait2, 1, 0, EINTR);
    server_address = (struct sockaddr_in){
        .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = htons(9)};
    assert_int_equal(sxe_connect(loop, &conn, (struct sockaddr *)&server_address,
                                 sizeof(server_address), NULL, 0, &handlers, NULL),
                     0);
    pump();
    assert_int_equal(seen.closes, 0);
    sxe__sys_clock_advance(3 * SXE_NS_PER_SEC + 1);
    pump();
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.last_reason, SXE_CLOSE_TIMEOUT);
    assert_int_equal(seen.connects, 0);
}

/* accept4 faults: each is survived, and the next client is served. */
static void test_accept_faults(void **state)
{
    static const int errors[] = {EMFILE, ENFILE, ENOBUFS, ECONNABORTED, EINTR, ENOMEM};
    struct sxe_test_capture capture;

    (void)state;
    sxe_test_skip_on_uring("it fails accept4, which the kernel does for io_uring");
    start_server(NULL, NULL, &server_handlers);
    sxe_test_capture_start(&capture);
    for (unsigned i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        unsigned before = seen.connects;
        sxe__sys_fail(SXE_SYS_accept4, 1, 1, errors[i]);
        int fd = client();
        if (errors[i] == EMFILE || errors[i] == ENFILE) {
            /* The pending connection is shed through the reserve fd. */
            expect_closed(fd);
            close(fd);
            fd = client();
        }
        want_connects = before + 1;
        pump_until(connects_reached);
        send_all(fd, request, sizeof(request) - 1);
        expect_reply(fd, 1);
        close(fd);
    }
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "accept failed"));
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.accept_errors, 5); /* EINTR is retried, not an error */
}

/* read faults: EINTR is retried; ECONNRESET closes that connection only. */
static void test_read_faults(void **state)
{
    (void)state;
    sxe_test_skip_on_uring("it fails recv, which the kernel does for io_uring");
    start_server(NULL, NULL, &server_handlers);
    int a = client();
    int b = client();
    want_connects = 2;
    pump_until(connects_reached);

    sxe__sys_fail(SXE_SYS_recv, 1, 1, EINTR);
    send_all(a, request, sizeof(request) - 1);
    expect_reply(a, 1);

    sxe__sys_fail(SXE_SYS_recv, 1, 1, ECONNRESET);
    send_all(a, request, sizeof(request) - 1);
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.last_err, ECONNRESET);
    expect_closed(a);

    send_all(b, request, sizeof(request) - 1);
    expect_reply(b, 1);
    close(a);
    close(b);
}

static unsigned short_write_calls;

static ssize_t send_five_bytes(int fd, const void *buf, size_t len, int flags)
{
    short_write_calls++;
    return send(fd, buf, len < 5 ? len : 5, flags);
}

static unsigned gathered_calls; /* sendmsg calls with more than one buffer */

static ssize_t sendmsg_five_bytes(int fd, const struct msghdr *message, int flags)
{
    short_write_calls++;
    gathered_calls += message->msg_iovlen > 1;
    size_t len = message->msg_iov[0].iov_len;
    return send(fd, message->msg_iov[0].iov_base, len < 5 ? len : 5, flags);
}

/*
 * Replies gathered inside on_read that span buffers go out in one sendmsg; sends that take five
 * bytes at a time still deliver them whole and in order.
 */
static void test_short_sends_across_buffers(void **state)
{
    struct sxe_loop_options options = {.buffer_size = 64}; /* a reply is 41 bytes */
    char requests[4 * sizeof(request)] = "";

    (void)state;
    sxe_test_skip_on_uring("it shortens sendmsg, which io_uring submits");
    start_server(&options, NULL, &server_handlers);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);
    sxe__sys.send = send_five_bytes;
    sxe__sys.sendmsg = sendmsg_five_bytes;
    for (int i = 0; i < 4; i++) {
        strcat(requests, request);
    }
    send_all(fd, requests, strlen(requests));
    expect_reply(fd, 4);
    assert_true(gathered_calls > 0);
    close(fd);
}

/* write faults: partial writes and EAGAIN queue the rest; EPIPE closes after the callback. */
static void test_write_faults(void **state)
{
    (void)state;
    sxe_test_skip_on_uring("it fails and shortens send, which io_uring submits");
    start_server(NULL, NULL, &server_handlers);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);

    /* Every send sends five bytes at most: the reply still arrives whole. */
    sxe__sys.send = send_five_bytes;
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    assert_true(short_write_calls >= (sizeof(reply) - 1) / 5);
    sxe__sys_reset();

    /* EAGAIN at once: queued, then sent. */
    sxe__sys_fail(SXE_SYS_send, 1, 1, EAGAIN);
    send_all(fd, request, sizeof(request) - 1);
    pump();
    send_all(fd, request, sizeof(request) - 1); /* the next input retries the flush */
    expect_reply(fd, 2);

    /* EPIPE: the connection closes once on_read has returned, with the error. */
    sxe__sys_fail(SXE_SYS_send, 1, 1, EPIPE);
    send_all(fd, request, sizeof(request) - 1);
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.last_err, EPIPE);
    close(fd);
}

/* Consumes everything; a connection whose input starts with 'A' answers, through a failing send. */
static int failing_fd = -1;

static ssize_t send_fails_on_a(int fd, const void *buf, size_t len, int flags)
{
    if (fd == failing_fd) {
        errno = EPIPE;
        return -1;
    }
    return send(fd, buf, len, flags);
}

static size_t consume_and_answer_a(sxe_conn_t *conn, const char *data, size_t len)
{
    if (data[0] == 'A' && failing_fd < 0) {
        failing_fd = sxe_conn_fd(conn);
        assert_true(sxe_conn_write(conn, reply, sizeof(reply) - 1) >= 0);
    }
    seen.input_len += len;
    return len;
}

/*
 * Two busy connections in one turn, both left on the ready list (more input than a turn reads);
 * the second one's write fails. Only it closes, and the first is read to the end: a slot on the
 * ready and the failed lists at once once linked both through one field, so closing the failed
 * one went on to close the other and dropped it from the ready list.
 */
static void test_failed_write_on_a_ready_connection_spares_the_others(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = consume_and_answer_a, .on_close = on_close};
    struct sxe_loop_options options = {.buffer_size = 1024};
    static char input[16 * 1024];

    (void)state;
    sxe_test_skip_on_uring("it fails send, which io_uring submits");
    start_server(&options, NULL, &handlers);
    int b = client();
    int a = client();
    want_connects = 2;
    pump_until(connects_reached);
    sxe__sys.send = send_fails_on_a;
    memset(input, 'B', sizeof(input));
    send_all(b, input, sizeof(input));
    memset(input, 'A', sizeof(input));
    send_all(a, input, sizeof(input));
    for (int i = 0; i < 50 && (seen.closes == 0 || seen.input_len < sizeof(input)); i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
    }
    pump();
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.last_err, EPIPE);
    /* All of b's input arrived, whatever a's failure cut short. */
    assert_true(seen.input_len >= sizeof(input));
    char byte;
    assert_int_equal(recv(b, &byte, 1, MSG_DONTWAIT), -1); /* b is still open, nothing sent */
    assert_int_equal(errno, EAGAIN);
    failing_fd = -1;
    close(a);
    close(b);
}

/* An outgoing connection's on_connect: was the socket really connected? */
static unsigned early_connects, real_connects;

static void check_connected(sxe_conn_t *conn)
{
    struct sockaddr_in peer;
    socklen_t len = sizeof(peer);

    if (getpeername(sxe_conn_fd(conn), (struct sockaddr *)&peer, &len) == 0) {
        real_connects++;
    } else {
        early_connects++;
    }
}

/* 'A' input: remembered. 'B' input: closes A and connects out, which takes A's slot. */
static sxe_conn_t *conn_a;
static struct sockaddr_in stuck_address; /* a listener whose accept queue is full */

static size_t close_a_and_connect(sxe_conn_t *conn, const char *data, size_t len)
{
    static const struct sxe_conn_handlers outgoing = {.on_connect = check_connected};

    if (data[0] == 'A') {
        conn_a = conn;
    } else if (data[0] == 'B' && conn_a != NULL) {
        sxe_conn_close(conn_a);
        conn_a = NULL;
        assert_int_equal(sxe_connect(sxe_conn_loop(conn), &seen.adopted,
                                     (struct sockaddr *)&stuck_address, sizeof(stuck_address), NULL,
                                     0, &outgoing, NULL),
                         0);
    }
    return len;
}

/*
 * A connection left on the ready list closes, and a new one takes its slot in the same turn: the
 * new one is not read on the old one's behalf. Here it is a connect still under way (its SYN
 * waits on a full accept queue), which a read event would have declared connected.
 */
static void test_a_reused_slot_is_not_read_for_its_old_connection(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = close_a_and_connect, .on_close = on_close};
    struct sxe_loop_options options = {.connections = 3, .buffer_size = 1024};
    static char input[16 * 1024];
    socklen_t len = sizeof(stuck_address);

    (void)state;
    int stuck = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    stuck_address =
        (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(stuck, (struct sockaddr *)&stuck_address, sizeof(stuck_address)), 0);
    assert_int_equal(listen(stuck, 0), 0);
    assert_int_equal(getsockname(stuck, (struct sockaddr *)&stuck_address, &len), 0);
    int filler = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(filler, (struct sockaddr *)&stuck_address, sizeof(stuck_address)), 0);

    start_server(&options, NULL, &handlers);
    int a = client();
    int b = client();
    want_connects = 2;
    pump_until(connects_reached);
    memset(input, 'A', sizeof(input)); /* more than a turn reads: a stays on the ready list */
    send_all(a, input, sizeof(input));
    send_all(b, "B", 1);
    /* All of it in the server's sockets before the turn: it reads a 4 times, then b. */
    wait_until_acknowledged(a);
    wait_until_acknowledged(b);
    for (int i = 0; i < 50 && seen.adopted == NULL; i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
    }
    assert_non_null(seen.adopted);
    pump();
    assert_int_equal(early_connects, 0);
    assert_int_equal(seen.closes, 1);
    sxe_conn_close(seen.adopted);
    close(filler);
    close(stuck);
    close(a);
    close(b);
}

/* The wait is interrupted (EINTR): the turn is empty and the loop goes on. */
static void test_epoll_wait_eintr(void **state)
{
    (void)state;
    sxe_test_skip_on_uring("epoll_pwait2 (io_uring_enter faults: test_io_uring)");
    start_server(NULL, NULL, &server_handlers);
    sxe__sys_fail(SXE_SYS_epoll_pwait2, 1, 2, EINTR);
    assert_int_equal(sxe_loop_run_once(loop, 0), 0);
    assert_int_equal(sxe_loop_run_once(loop, 0), 0);
    int fd = client();
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    sxe__sys_fail(SXE_SYS_epoll_pwait2, 1, 1, EBADF);
    assert_int_equal(sxe_loop_run_once(loop, 0), -EBADF);
    close(fd);
}

/* A timer's wait as epoll_pwait2 sees it: whole nanoseconds, not rounded to milliseconds. */
static struct timespec last_timeout;
static int last_timeout_null;

static int epoll_pwait2_recording(int epfd, struct epoll_event *events, int max,
                                  const struct timespec *timeout, const sigset_t *mask)
{
    last_timeout_null = timeout == NULL;
    if (timeout != NULL) {
        last_timeout = *timeout;
    }
    return epoll_pwait2(epfd, events, max, timeout, mask);
}

static int last_timeout_ms;

static int epoll_wait_recording(int epfd, struct epoll_event *events, int max, int timeout)
{
    last_timeout_ms = timeout;
    return epoll_wait(epfd, events, max, timeout);
}

static void fire(sxe_timer_t *timer, void *arg)
{
    (void)timer;
    (*(int *)arg)++;
}

static void test_epoll_waits_to_the_nanosecond(void **state)
{
    sxe_timer_t timer;
    int fired = 0;

    (void)state;
    sxe_test_skip_on_uring("epoll_pwait2 (io_uring waits with its own timespec)");
    sxe__sys_clock_fake(SXE_NS_PER_SEC, SXE_NS_PER_SEC);
    start_server(NULL, NULL, &server_handlers);
    assert_true(sxe_loop_run_once(loop, 0) >= 0); /* the loop's now is the fake clock's */
    sxe__sys.epoll_pwait2 = epoll_pwait2_recording;
    sxe_timer_init(&timer, fire, &fired);
    assert_int_equal(sxe_timer_start(loop, &timer, 250 * SXE_NS_PER_USEC, 0), 0);
    assert_true(sxe_loop_run_once(loop, SXE_NS_PER_SEC) >= 0);
    assert_false(last_timeout_null);
    assert_int_equal(last_timeout.tv_sec, 0);
    assert_int_equal(last_timeout.tv_nsec, 250000); /* exactly, not rounded up to 1 ms */
    assert_int_equal(fired, 0);                     /* the fake clock has not moved */
    sxe__sys_clock_advance(250 * SXE_NS_PER_USEC - 1);
    assert_true(sxe_loop_run_once(loop, SXE_NS_PER_SEC) >= 0);
    assert_int_equal(last_timeout.tv_nsec, 1);
    sxe__sys_clock_advance(1);
    assert_true(sxe_loop_run_once(loop, SXE_NS_PER_SEC) >= 0);
    assert_int_equal(last_timeout.tv_nsec, 0); /* due: a poll */
    assert_int_equal(fired, 1);
    assert_true(sxe_loop_run_once(loop, 2 * SXE_NS_PER_SEC + 5) >= 0);
    assert_int_equal(last_timeout.tv_sec, 2);
    assert_int_equal(last_timeout.tv_nsec, 5);

    /* No epoll_pwait2 (a kernel before 5.11): epoll_wait in milliseconds, from then on. */
    sxe__sys_fail(SXE_SYS_epoll_pwait2, 1, 1, ENOSYS);
    sxe__sys.epoll_wait = epoll_wait_recording;
    assert_int_equal(sxe_timer_start(loop, &timer, 250 * SXE_NS_PER_USEC, 0), 0);
    assert_true(sxe_loop_run_once(loop, SXE_NS_PER_SEC) >= 0);
    assert_int_equal(last_timeout_ms, 1); /* 250 us, rounded up to 1 ms */
    assert_int_equal(fired, 1);
    sxe__sys_clock_advance(250 * SXE_NS_PER_USEC);
    last_timeout_null = -1;
    assert_true(sxe_loop_run_once(loop, SXE_NS_PER_SEC) >= 0);
    assert_int_equal(fired, 2);
    assert_int_equal(last_timeout_null, -1); /* epoll_pwait2 not asked again */
    assert_int_equal(last_timeout_ms, 0);    /* the timer was due: a poll */
    /* 1 ms and 1 ns is waited as 2 ms: rounded up, so a timer never wakes the loop early. */
    assert_int_equal(sxe_timer_start(loop, &timer, SXE_NS_PER_MSEC + 1, 0), 0);
    assert_true(sxe_loop_run_once(loop, SXE_NS_PER_SEC) >= 0);
    assert_int_equal(last_timeout_ms, 2);
    assert_int_equal(fired, 2);
}

/* An event for a slot that closed and was reused is dropped, not delivered to the new user. */
static struct epoll_event stale_event;

static int epoll_wait_stale(int epfd, struct epoll_event *events, int max,
                            const struct timespec *timeout, const sigset_t *mask)
{
    (void)epfd;
    (void)max;
    (void)timeout;
    (void)mask;
    events[0] = stale_event;
    return 1;
}

static void test_stale_events_are_dropped(void **state)
{
    struct sxe_loop_options options = {.connections = 3};

    (void)state;
    sxe_test_skip_on_uring("it forges an epoll event (io_uring stale completions: test_io_uring)");
    start_server(&options, NULL, &server_handlers);
    int a = client();
    want_connects = 1;
    pump_until(connects_reached);
    sxe_conn_t *first = seen.last_conn;
    stale_event = (struct epoll_event){.events = EPOLLIN, .data.u64 = sxe_conn_id(first)};
    sxe_conn_close(first);
    /* Free slots are reused oldest first: the third connection gets the first one's slot. */
    int other = client();
    int b = client();
    want_connects = 3;
    pump_until(connects_reached);
    assert_ptr_equal(seen.last_conn, first); /* the same slot, a new generation */

    sxe__sys.epoll_pwait2 = epoll_wait_stale;
    assert_int_equal(sxe_loop_run_once(loop, 0), 1);
    sxe__sys_reset();
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.stale_events, 1);
    send_all(b, request, sizeof(request) - 1);
    expect_reply(b, 1);
    close(a);
    close(b);
    close(other);
}

/* UDP: a batch of datagrams is echoed; one too large for a buffer is dropped and counted. */
static void echo_datagram(sxe_conn_t *socket, const char *data, size_t len,
                          const struct sockaddr *from, socklen_t from_len)
{
    seen.requests++;
    assert_int_equal(sxe_udp_send(socket, data, len, from, from_len), 0);
}

static void test_udp(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_datagram = echo_datagram};
    struct sxe_loop_options options = {.buffer_size = 1024};
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(address);
    sxe_conn_t *udp;
    char big[2000] = {0};

    (void)state;
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    assert_int_equal(
        sxe_udp_bind(loop, &udp, (struct sockaddr *)&address, sizeof(address), &handlers, NULL), 0);
    assert_int_equal(sxe_conn_local(udp, (struct sockaddr *)&address, &len), 0);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof(address)), 0);
    for (int i = 0; i < 20; i++) {
        char text[16];
        int n = snprintf(text, sizeof(text), "dgram %d", i);
        assert_int_equal(send(fd, text, (size_t)n, 0), n);
    }
    assert_int_equal(send(fd, big, sizeof(big), 0), (ssize_t)sizeof(big));
    want_requests = 20;
    pump_until(requests_reached);
    for (int i = 0; i < 20; i++) {
        char text[16], got[64];
        int n = snprintf(text, sizeof(text), "dgram %d", i);
        assert_int_equal(recv(fd, got, sizeof(got), 0), n);
        assert_memory_equal(got, text, (size_t)n);
    }
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.datagrams_dropped, 1);
    assert_int_equal(sxe_conn_write(udp, "x", 1), -EPIPE);
    close(fd);
}

/* Unix stream sockets: the same API as TCP. */
static void test_unix_stream(void **state)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    sxe_conn_t *unix_listener;

    (void)state;
    snprintf(address.sun_path, sizeof(address.sun_path), "/tmp/sxe-test-%d.sock", (int)getpid());
    unlink(address.sun_path);
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_listen(loop, &unix_listener, (struct sockaddr *)&address, sizeof(address),
                                NULL, &server_handlers, NULL),
                     0);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof(address)), 0);
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    close(fd);
    unlink(address.sun_path);
}

/* A socketpair in one loop; half-close with on_eof; shutdown after queued output. */
/* The first side to see the end replies and shuts down in turn. */
static void reply_at_eof(sxe_conn_t *conn)
{
    if (++seen.eofs == 1) {
        assert_int_equal(sxe_conn_write(conn, "bye", 3), 0);
        assert_int_equal(sxe_conn_shutdown(conn), 0);
    }
}

static void test_pair_and_half_close(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = on_connect,
                                                      .on_read = record_input,
                                                      .on_eof = reply_at_eof,
                                                      .on_close = on_close};
    sxe_conn_t *a, *b;

    (void)state;
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_conn_pair(loop, &a, &b, 0, &handlers, NULL), 0);
    want_connects = 2;
    pump_until(connects_reached);
    assert_int_equal(sxe_conn_write(a, "hello", 5), 0);
    assert_int_equal(sxe_conn_shutdown(a), 0); /* a is done sending */
    pump();
    /* b saw the bytes, then the end: it replied "bye" and shut down too. */
    assert_int_equal(seen.eofs, 2);
    assert_memory_equal(seen.input, "hellobye", 8);
    assert_int_equal(sxe_conn_shutdown(a), 0);
    sxe_conn_close(a);
    sxe_conn_close(a); /* idempotent */
    sxe_conn_close(b);
    assert_int_equal(seen.closes, 2);
    assert_int_equal(sxe_conn_write(a, "x", 1), -EPIPE);
}

/*
 * A connection on descriptor 0, as an inetd-style program gets it on its standard input, is
 * adopted and served like any other.
 */
static void test_adopt_descriptor_zero(void **state)
{
    int pair[2], saved_stdin = dup(0);

    (void)state;
    assert_true(saved_stdin > 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    assert_int_equal(dup2(pair[0], 0), 0);
    close(pair[0]);
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_conn_adopt(loop, &seen.adopted, 0, &server_handlers, NULL), 0);
    send_all(pair[1], request, sizeof(request) - 1);
    expect_reply(pair[1], 1);
    sxe_conn_close(seen.adopted);
    close(pair[1]);
    assert_int_equal(dup2(saved_stdin, 0), 0);
    close(saved_stdin);
}

/* Handing a live TCP connection over a Unix socket pair, and serving it on the other side. */
static sxe_conn_t *receiver;

static void adopt_fd(sxe_conn_t *conn, int fd)
{
    (void)conn;
    assert_int_equal(sxe_conn_adopt(loop, &seen.adopted, fd, &server_handlers, NULL), 0);
}

static void test_hand_off(void **state)
{
    static const struct sxe_conn_handlers channel = {.on_fd = adopt_fd};
    sxe_conn_t *sender;

    (void)state;
    start_server(NULL, NULL, &server_handlers);
    assert_int_equal(
        sxe_conn_pair(loop, &sender, &receiver, SXE_LISTEN_RECEIVE_FDS, &channel, NULL), 0);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);
    sxe_conn_t *accepted = seen.last_conn;
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    pump();
    pump();
    assert_int_equal(sxe_conn_hand_off(accepted, sender), 0);
    assert_int_equal(seen.last_reason, SXE_CLOSE_HANDED_OFF);
    pump();
    assert_non_null(seen.adopted);
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    assert_int_equal(seen.requests, 2);
    close(fd);
}

/* sendfile: a file range goes out after queued bytes. */
static int file_fd;

static void send_file(sxe_conn_t *conn)
{
    assert_int_equal(sxe_conn_sendfile(conn, file_fd, 0, 0), 0); /* nothing: not an EOF error */
    assert_int_equal(sxe_conn_write(conn, "head:", 5), 0);
    assert_true(sxe_conn_sendfile(conn, file_fd, 2, 100000) >= 0);
    assert_true(sxe_conn_write(conn, ":tail", 5) >= 0);
}

static void test_sendfile(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = send_file};
    static char content[100002];
    static char expected[100010];
    char path[] = "/tmp/sxe-test-sendfile-XXXXXX";

    (void)state;
    for (size_t i = 0; i < sizeof(content); i++) {
        content[i] = (char)('a' + i % 26);
    }
    file_fd = mkstemp(path);
    assert_true(file_fd >= 0);
    unlink(path);
    assert_int_equal(write(file_fd, content, sizeof(content)), (ssize_t)sizeof(content));
    memcpy(expected, "head:", 5);
    memcpy(expected + 5, content + 2, 100000);
    memcpy(expected + 100005, ":tail", 5);
    start_server(NULL, NULL, &handlers);
    int fd = client();
    char got[sizeof(expected)];
    size_t have = 0;
    uint64_t give_up = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;
    while (have < sizeof(expected)) {
        pump();
        ssize_t n = recv(fd, got + have, sizeof(got) - have, MSG_DONTWAIT);
        if (n > 0) {
            have += (size_t)n;
        }
        assert_true(sxe_clock_mono_ns() < give_up);
    }
    assert_memory_equal(got, expected, sizeof(expected));
    close(fd);
    close(file_fd);
}

/*
 * Owned files: several queued behind a small socket buffer at once, each closed by sxe when its
 * bytes are sent; the rest closed with the connection; one not queued closed at once.
 */
static int owned[3];

static bool is_closed(int fd)
{
    return fcntl(fd, F_GETFD) < 0 && errno == EBADF;
}

static void send_owned_files(sxe_conn_t *conn)
{
    int small = 4096;

    seen.connects++;
    seen.last_conn = conn;
    assert_int_equal(setsockopt(sxe_conn_fd(conn), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
                     0);
    for (int i = 0; i < 3; i++) {
        owned[i] = dup(file_fd);
        assert_true(sxe_conn_sendfile_and_close(conn, owned[i], 0, 100000) >= 0);
    }
    assert_false(is_closed(owned[2])); /* queued behind a full socket */
    int unqueued = dup(file_fd);
    assert_int_equal(sxe_conn_sendfile_and_close(conn, unqueued, 0, 0), 0); /* nothing to send */
    assert_true(is_closed(unqueued));
}

static void test_sendfile_and_close(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = send_owned_files,
                                                      .on_close = on_close};
    struct sxe_loop_options options = {.buffer_size = 16384, .write_limit = 1 << 20};
    char path[] = "/tmp/sxe-test-owned-XXXXXX";
    static char block[100000];

    (void)state;
    file_fd = mkstemp(path);
    assert_true(file_fd >= 0);
    unlink(path);
    assert_int_equal(write(file_fd, block, sizeof(block)), (ssize_t)sizeof(block));
    start_server(&options, NULL, &handlers);

    /* Read the first file's bytes and a little more: the first is closed, the last is not. */
    int fd = client_with_window(8192);
    size_t have = 0;
    uint64_t give_up = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;
    while (have < 110000) {
        pump();
        ssize_t n = recv(fd, block, sizeof(block), MSG_DONTWAIT);
        have += n > 0 ? (size_t)n : 0;
        assert_true(sxe_clock_mono_ns() < give_up);
    }
    assert_true(is_closed(owned[0]));
    assert_false(is_closed(owned[2]));

    /* The peer goes: the connection closes, and with it the files still queued. */
    close(fd);
    want_closes = 1;
    pump_until(closes_reached);
    assert_true(is_closed(owned[1]) && is_closed(owned[2]));

    /* On a closed connection nothing is queued, and the file is closed at once. */
    int late = dup(file_fd);
    assert_int_equal(sxe_conn_sendfile_and_close(seen.last_conn, late, 0, 10), -EPIPE);
    assert_true(is_closed(late));
    close(file_fd);
}

/* IPv6 on ::1. */
static void test_ipv6(void **state)
{
    struct sockaddr_in6 address = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    struct sxe_listen_options options = {.flags = SXE_LISTEN_V6ONLY | SXE_LISTEN_REUSEPORT |
                                                  SXE_LISTEN_DEFER_ACCEPT | SXE_LISTEN_FASTOPEN,
                                         .backlog = 16};
    socklen_t len = sizeof(address);
    sxe_conn_t *v6;

    (void)state;
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_listen(loop, &v6, (struct sockaddr *)&address, sizeof(address), &options,
                                &server_handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(v6, (struct sockaddr *)&address, &len), 0);
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof(address)), 0);
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    close(fd);
}

/* Listening on a port in use fails with -EADDRINUSE; the table slot is not lost. */
static void test_listen_errors(void **state)
{
    sxe_conn_t *second;

    (void)state;
    start_server(NULL, NULL, &server_handlers);
    assert_int_equal(sxe_listen(loop, &second, (struct sockaddr *)&server_address,
                                sizeof(server_address), NULL, &server_handlers, NULL),
                     -EADDRINUSE);
    sxe__sys_fail(SXE_SYS_socket, 1, 1, EMFILE);
    assert_int_equal(sxe_listen(loop, &second, (struct sockaddr *)&server_address,
                                sizeof(server_address), NULL, &server_handlers, NULL),
                     -EMFILE);
    if (!sxe_test_uring()) { /* io_uring's watch makes no system call */
        sxe__sys_fail(SXE_SYS_epoll_ctl, 1, 1, ENOMEM);
        struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(sxe_listen(loop, &second, (struct sockaddr *)&any, sizeof(any), NULL,
                                    &server_handlers, NULL),
                         -ENOMEM);
    }
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.open, 1);
}

/* SIGTERM: listeners close, queued output gets its drain time, then everything closes. */
static void test_stop_on_signal(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = start_stream, .on_drained = on_drained, .on_close = on_close};
    struct sxe_loop_options options = {.buffer_size = 4096, .write_limit = 65536};

    (void)state;
    stream = (typeof(stream)){.total = 1 << 20};
    start_server(&options, NULL, &handlers);
    assert_int_equal(sxe_loop_stop_on_signals(loop, 200 * SXE_NS_PER_MSEC), 0);
    assert_int_equal(sxe_loop_stop_on_signals(loop, 200 * SXE_NS_PER_MSEC), 0);
    int fd = client(); /* never reads: its output stays queued */
    want_connects = 1;
    pump_until(connects_reached);
    assert_int_equal(sxe_pool_count(loop->conn_pool, SXE__CONN_WRITING), 1);
    kill(getpid(), SIGTERM);
    uint64_t start = sxe_clock_mono_ns();
    assert_int_equal(sxe_loop_run(loop), 0);
    uint64_t took = sxe_clock_mono_ns() - start;
    assert_true(took >= 150 * SXE_NS_PER_MSEC);
    assert_true(took < 2 * SXE_NS_PER_SEC);
    assert_int_equal(seen.last_reason, SXE_CLOSE_SHUTDOWN);
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.open, 0);
    close(fd);
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &signals, NULL);
}

/* 10,000 connections held open at once, each served, from a child process of clients. */
static void test_ten_thousand_connections(void **state)
{
    enum { CLIENTS = 10000 };
    struct sxe_loop_options options = {.connections = CLIENTS + 8, .buffers = 256};
    struct rlimit limit;
    int status;

    (void)state;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &limit), 0);
    if (limit.rlim_max < CLIENTS + 100) {
        sxe_test_skip_or_fail_in_ci("the open-file hard limit is below 10,100");
    }
    limit.rlim_cur = limit.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &limit), 0);
    start_server(&options, NULL, &server_handlers);

    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        static int fds[CLIENTS];
        char got[sizeof(reply)];
        for (int i = 0; i < CLIENTS; i++) {
            fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fds[i] < 0 ||
                connect(fds[i], (struct sockaddr *)&server_address, sizeof(server_address)) < 0) {
                _exit(2);
            }
        }
        for (int i = 0; i < CLIENTS; i++) {
            if (send(fds[i], request, sizeof(request) - 1, 0) != sizeof(request) - 1) {
                _exit(3);
            }
        }
        for (int i = 0; i < CLIENTS; i++) {
            size_t have = 0;
            while (have < sizeof(reply) - 1) {
                ssize_t n = recv(fds[i], got + have, sizeof(reply) - 1 - have, 0);
                if (n <= 0) {
                    _exit(4);
                }
                have += (size_t)n;
            }
            if (memcmp(got, reply, sizeof(reply) - 1) != 0) {
                _exit(5);
            }
        }
        _exit(0); /* all 10,000 stay open until here */
    }
    uint64_t give_up = sxe_clock_mono_ns() + 60 * SXE_NS_PER_SEC;
    while (waitpid(child, &status, WNOHANG) == 0) {
        assert_true(sxe_loop_run_once(loop, 5 * SXE_NS_PER_MSEC) >= 0);
        assert_true(sxe_clock_mono_ns() < give_up);
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(seen.requests, CLIENTS);
    want_closes = CLIENTS;
    pump_until(closes_reached);
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.accepted, CLIENTS);
    assert_int_equal(stats.table_full, 0);
}

/* No free buffer for partial input: that connection closes, the others go on. */
static void test_no_buffer_for_input(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = consume_in_threes, .on_close = on_close};
    struct sxe_loop_options options = {.buffers = 1, .buffer_size = 1024};
    struct sxe_test_capture capture;

    (void)state;
    start_server(&options, NULL, &handlers);
    int a = client();
    int b = client();
    want_connects = 2;
    pump_until(connects_reached);
    send_all(a, "xx", 2); /* a keeps 2 bytes: the only buffer */
    pump();
    sxe_test_capture_start(&capture);
    send_all(b, "yy", 2);
    want_closes = 1;
    pump_until(closes_reached);
    sxe_test_capture_stop();
    assert_int_equal(seen.last_reason, SXE_CLOSE_NO_BUFFER);
    assert_non_null(strstr(capture.text, "no free buffer to keep partial input"));
    send_all(a, "x", 1); /* a completes its three and goes on */
    pump();
    assert_memory_equal(seen.input, "xxx", 3);
    close(a);
    close(b);
}

/* No free buffer for what the socket did not take: the connection closes after the callback. */
static void flood(sxe_conn_t *conn)
{
    static char big[200000];
    int small = 4096;

    seen.connects++;
    assert_int_equal(setsockopt(sxe_conn_fd(conn), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
                     0);
    /* The loop's only buffer is taken, so the remainder cannot be queued. */
    conn->loop->buffers_free = 0;
    assert_int_equal(sxe_conn_write(conn, big, sizeof(big)), -ENOBUFS);
    conn->loop->buffers_free = 1;
}

static void test_no_buffer_for_output(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = flood, .on_close = on_close};
    struct sxe_loop_options options = {.buffers = 1, .buffer_size = 65536};

    (void)state;
    start_server(&options, NULL, &handlers);
    int fd = client_with_window(4096);
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_NO_BUFFER);
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.no_buffer, 1);
    close(fd);
}

/* A burst larger than READS_PER_TURN buffers is read over several turns, in order, whole. */
static void test_large_burst_is_read_over_turns(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_read = record_input};
    struct sxe_loop_options options = {.buffer_size = 256};
    char burst[4000];

    (void)state;
    start_server(&options, NULL, &handlers);
    int fd = client();
    for (size_t i = 0; i < sizeof(burst); i++) {
        burst[i] = (char)('A' + i % 26);
    }
    send_all(fd, burst, sizeof(burst));
    uint64_t give_up = sxe_clock_mono_ns() + 2 * SXE_NS_PER_SEC;
    while (seen.input_len < sizeof(burst)) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
        assert_true(sxe_clock_mono_ns() < give_up);
    }
    assert_memory_equal(seen.input, burst, sizeof(burst));
    close(fd);
}

/* Reads until the server ends the stream, turning its loop, for 5 s at most; returns the count. */
static size_t receive_to_end(int fd)
{
    static char got[250000];
    size_t have = 0;
    uint64_t give_up = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;

    for (;;) {
        pump();
        ssize_t n = recv(fd, got + have, sizeof(got) - have, MSG_DONTWAIT);
        if (n == 0) {
            return have;
        }
        if (n > 0) {
            have += (size_t)n;
        }
        assert_true(sxe_clock_mono_ns() < give_up);
    }
}

/* Shutdown with output queued: the peer gets all of it, then the end of the stream. */
/* Queues 200,000 bytes of fill behind a 4 KB socket buffer, and asks for a half-close after. */
static void queue_block_then_shutdown(sxe_conn_t *conn, char fill)
{
    static char block[200000];
    int small = 4096;

    memset(block, fill, sizeof(block));
    assert_int_equal(setsockopt(sxe_conn_fd(conn), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
                     0);
    assert_true(sxe_conn_write(conn, block, sizeof(block)) >= 0);
    assert_true(sxe_conn_queued(conn) > 0);
    assert_int_equal(sxe_conn_shutdown(conn), 0);
}

static void write_then_shutdown(sxe_conn_t *conn)
{
    seen.connects++;
    queue_block_then_shutdown(conn, 'z');
}

static void test_shutdown_after_queued_output(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = write_then_shutdown};
    struct sxe_loop_options options = {.buffer_size = 16384, .write_limit = 262144};

    (void)state;
    start_server(&options, NULL, &handlers);
    int fd = client_with_window(8192);
    assert_int_equal(receive_to_end(fd), 200000);
    close(fd);
}

/* Close once sent, from on_read: the peer gets the reply, then the end of the stream, without
 * the server half-closing or reading again; later writes are refused. */
static size_t reply_and_close(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)data;
    assert_true(sxe_conn_write(conn, reply, sizeof(reply) - 1) >= 0);
    assert_int_equal(sxe_conn_close_when_sent(conn), 0);
    assert_int_equal(seen.closes, 0); /* inside on_read: after it returns */
    assert_int_equal(sxe_conn_write(conn, "x", 1), -EPIPE);
    assert_int_equal(sxe_conn_close_when_sent(conn), -EPIPE);
    seen.requests++;
    return len;
}

static void test_close_when_sent_from_on_read(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_read = reply_and_close,
                                                      .on_close = on_close};

    (void)state;
    start_server(NULL, NULL, &handlers);
    sxe__sys_count(SXE_SYS_shutdown);
    sxe__sys_count(SXE_SYS_recv);
    int fd = client();
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    expect_closed(fd);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.last_reason, SXE_CLOSE_LOCAL);
    assert_int_equal(sxe__sys_calls(SXE_SYS_shutdown), 0);
    if (!sxe_test_uring()) {                               /* io_uring receives in the kernel */
        assert_int_equal(sxe__sys_calls(SXE_SYS_recv), 1); /* no second read for the peer's end */
    }
    close(fd);
}

/* Outside on_read with nothing queued, the close is at once; with a queue, and a pending shutdown
 * it supersedes, the close waits for the queue to drain and the peer gets every byte. */
static void close_now_or_when_drained(sxe_conn_t *conn)
{
    seen.connects++;
    if (seen.connects == 1) {
        assert_int_equal(sxe_conn_close_when_sent(conn), 0);
        assert_int_equal(seen.closes, 1);
        return;
    }
    queue_block_then_shutdown(conn, 'q');
    assert_int_equal(sxe_conn_close_when_sent(conn), 0);
    assert_int_equal(seen.closes, 1); /* still open: output is queued */
}

static void test_close_when_sent_outside_on_read(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = close_now_or_when_drained,
                                                      .on_close = on_close};
    struct sxe_loop_options options = {.buffer_size = 16384, .write_limit = 262144};

    (void)state;
    start_server(&options, NULL, &handlers);
    sxe__sys_count(SXE_SYS_shutdown);
    int first = client();
    want_connects = 1;
    pump_until(connects_reached);
    expect_closed(first);
    close(first);

    int fd = client_with_window(8192);
    assert_int_equal(receive_to_end(fd), 200000);
    assert_int_equal(seen.closes, 2);
    assert_int_equal(seen.last_reason, SXE_CLOSE_LOCAL);
    assert_int_equal(sxe__sys_calls(SXE_SYS_shutdown), 0);
    close(fd);
}

/* sendfile failures: the file ends early (EIO), or sendfile itself fails. */
static void send_short_file(sxe_conn_t *conn)
{
    seen.connects++;
    assert_true(sxe_conn_sendfile(conn, file_fd, 0, 1000) < 0);
}

static void test_sendfile_errors(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = send_short_file,
                                                      .on_close = on_close};
    char path[] = "/tmp/sxe-test-short-XXXXXX";

    (void)state;
    file_fd = mkstemp(path);
    assert_true(file_fd >= 0);
    unlink(path);
    assert_int_equal(write(file_fd, "short", 5), 5);
    start_server(NULL, NULL, &handlers);
    int fd = client();
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.last_err, EIO);
    close(fd);

    sxe__sys_fail(SXE_SYS_sendfile, 1, 1, EBADF);
    fd = client();
    want_closes = 2;
    pump_until(closes_reached);
    assert_int_equal(seen.last_err, EBADF);
    close(fd);
    close(file_fd);
}

/*
 * Referenced output (sxe_conn_write_ref, sxe_conn_sendfile_ref): the caller's bytes go without a
 * copy, gathered with the replies around them inside on_read, and each release comes exactly
 * once: at once when nothing stays queued, else when the bytes are sent or the connection closes.
 */
static unsigned released;
static unsigned max_iov; /* the most buffers one sendmsg carried */
static char referenced[1 << 20];
static void (*connect_action)(sxe_conn_t *conn);

static void count_release(void *arg)
{
    (*(unsigned *)arg)++;
}

static ssize_t sendmsg_counting(int fd, const struct msghdr *message, int flags)
{
    max_iov = message->msg_iovlen > max_iov ? (unsigned)message->msg_iovlen : max_iov;
    return sendmsg(fd, message, flags);
}

static void act_on_connect(sxe_conn_t *conn)
{
    seen.connects++;
    seen.last_conn = conn;
    if (connect_action != NULL) {
        connect_action(conn);
    }
}

static size_t answer_with_a_reference(sxe_conn_t *conn, const char *data, size_t len)
{
    uint32_t buffers_free = loop->buffers_free;

    (void)data;
    assert_int_equal(sxe_conn_write(conn, "head:", 5), 0);
    assert_int_equal(sxe_conn_write_ref(conn, referenced, 2000, count_release, &released), 0);
    assert_int_equal(released, 0); /* queued, to leave with the replies around it */
    assert_int_equal(sxe_conn_write(conn, ":mid:", 5), 0);
    assert_int_equal(sxe_conn_write_ref(conn, referenced, 2000, count_release, &released), 0);
    assert_int_equal(sxe_conn_write(conn, ":tail", 5), 0);
    /* The copies around the references share one buffer, as they would without them. */
    assert_int_equal(loop->buffers_free, buffers_free - 1);
    /* A short reference is copied, and released at once. */
    assert_int_equal(sxe_conn_write_ref(conn, "!", 1, count_release, &released), 0);
    assert_int_equal(released, 1);
    return len;
}

static void write_now(sxe_conn_t *conn)
{
    assert_int_equal(sxe_conn_write_ref(conn, "now", 3, count_release, &released), 0);
    assert_int_equal(released, 1); /* all sent: released before the call returned */
}

static void write_a_megabyte(sxe_conn_t *conn)
{
    int small = 4096;
    assert_int_equal(setsockopt(sxe_conn_fd(conn), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
                     0);
    assert_true(
        sxe_conn_write_ref(conn, referenced, sizeof(referenced), count_release, &released) >= 0);
    assert_int_equal(released, 0);
    assert_true(sxe_conn_queued(conn) > 0);
    /* Copies after it meet write_limit, which counts all that is queued. */
    assert_int_equal(sxe_conn_write(conn, "end", 3), -ENOBUFS);
}

static void send_file_by_ref(sxe_conn_t *conn)
{
    assert_true(sxe_conn_sendfile_ref(conn, file_fd, 0, 5, count_release, &released) >= 0);
}

/* A send fails with EPERM (a firewall's answer, and errno 1): the write says so, and so does the
 * next one, with nothing queued. */
static void write_through_a_failing_send(sxe_conn_t *conn)
{
    sxe__sys_fail(SXE_SYS_send, 1, 1, EPERM);
    assert_int_equal(sxe_conn_write_ref(conn, "lost", 4, count_release, &released), -EPERM);
    assert_int_equal(released, 1);
    assert_int_equal(sxe_conn_write(conn, "more", 4), -EPERM);
    assert_int_equal(sxe_conn_queued(conn), 0);
}

/* Reads len bytes into got, turning the server loop meanwhile. */
static void receive_exactly(int fd, char *got, size_t len)
{
    size_t have = 0;
    uint64_t give_up = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;

    while (have < len) {
        pump();
        ssize_t n = recv(fd, got + have, len - have, MSG_DONTWAIT);
        assert_true(n != 0);
        have += n > 0 ? (size_t)n : 0;
        assert_true(sxe_clock_mono_ns() < give_up);
    }
}

static void test_write_ref(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = act_on_connect, .on_read = answer_with_a_reference, .on_close = on_close};
    static char got[sizeof(referenced)];
    char path[] = "/tmp/sxe-test-ref-XXXXXX";

    (void)state;
    for (size_t i = 0; i < sizeof(referenced); i++) {
        referenced[i] = (char)('a' + i % 26);
    }
    start_server(NULL, NULL, &handlers);

    /* Inside on_read: one sendmsg carries the copies and the referenced bodies between them. */
    sxe__sys.sendmsg = sendmsg_counting;
    int fd = client();
    static char expected[4016];
    memcpy(expected, "head:", 5);
    memcpy(expected + 5, referenced, 2000);
    memcpy(expected + 2005, ":mid:", 5);
    memcpy(expected + 2010, referenced, 2000);
    memcpy(expected + 4010, ":tail!", 6);
    send_all(fd, request, sizeof(request) - 1);
    expect_bytes(fd, expected, 4016);
    assert_int_equal(released, 3);
    if (!sxe_test_uring()) { /* io_uring submits the sendmsg itself */
        assert_int_equal(max_iov, 5);
    }
    close(fd);

    /* Outside on_read, when the socket takes it all. */
    released = 0;
    connect_action = write_now;
    fd = client();
    expect_bytes(fd, "now", 3);
    close(fd);

    /* A megabyte behind a small socket buffer: released once the peer has read it all. */
    released = 0;
    connect_action = write_a_megabyte;
    fd = client_with_window(8192);
    want_connects = seen.connects + 1;
    pump_until(connects_reached);
    assert_int_equal(released, 0);
    receive_exactly(fd, got, sizeof(got));
    assert_memory_equal(got, referenced, sizeof(referenced));
    assert_int_equal(released, 1);
    close(fd);

    /* The peer goes with the megabyte still queued: released with the connection. */
    released = 0;
    fd = client_with_window(8192);
    want_connects = seen.connects + 1;
    pump_until(connects_reached);
    struct linger reset = {.l_onoff = 1, .l_linger = 0};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)), 0);
    close(fd);
    want_closes = seen.closes + 1;
    pump_until(closes_reached);
    assert_int_equal(released, 1);

    /* On a closed connection, or with nothing to send: refused or done, and released at once. */
    released = 0;
    assert_int_equal(sxe_conn_write_ref(seen.last_conn, "x", 1, count_release, &released), -EPIPE);
    assert_int_equal(sxe_conn_sendfile_ref(seen.last_conn, 0, 0, 1, count_release, &released),
                     -EPIPE);
    assert_int_equal(released, 2);

    /* A send that fails: the error, and released. */
    released = 0;
    connect_action = write_through_a_failing_send;
    fd = client();
    want_closes = seen.closes + 1;
    pump_until(closes_reached);
    assert_int_equal(released, 1);
    assert_int_equal(seen.last_err, EPERM);
    close(fd);
    sxe__sys_reset();

    /* A file range: released once sent; an empty one at once. */
    file_fd = mkstemp(path);
    assert_true(file_fd >= 0);
    unlink(path);
    assert_int_equal(write(file_fd, "file!", 5), 5);
    released = 0;
    connect_action = send_file_by_ref;
    fd = client();
    expect_bytes(fd, "file!", 5);
    assert_int_equal(released, 1);
    assert_int_equal(sxe_conn_sendfile_ref(seen.last_conn, file_fd, 0, 0, count_release, &released),
                     0);
    assert_int_equal(sxe_conn_write_ref(seen.last_conn, "", 0, count_release, &released), 0);
    assert_int_equal(sxe_conn_write_ref(seen.last_conn, "y", 1, NULL, NULL), 0); /* no release */
    assert_int_equal(released, 3);
    expect_bytes(fd, "y", 1);
    close(fd);
    close(file_fd);
    connect_action = NULL;
}

/* Connect failures reported at once: no socket, no source address, no route. */
static void test_connect_errors(void **state)
{
    struct sockaddr_in source = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002)};
    sxe_conn_t *conn;

    (void)state;
    start_server(NULL, NULL, &server_handlers);
    sxe__sys_fail(SXE_SYS_socket, 1, 1, EMFILE);
    assert_int_equal(sxe_connect(loop, &conn, (struct sockaddr *)&server_address,
                                 sizeof(server_address), NULL, 0, &server_handlers, NULL),
                     -EMFILE);
    sxe__sys_fail(SXE_SYS_bind, 1, 1, EADDRNOTAVAIL);
    assert_int_equal(sxe_connect(loop, &conn, (struct sockaddr *)&server_address,
                                 sizeof(server_address), (struct sockaddr *)&source, sizeof(source),
                                 &server_handlers, NULL),
                     -EADDRNOTAVAIL);
    sxe__sys_fail(SXE_SYS_connect, 1, 1, ENETUNREACH);
    assert_int_equal(sxe_connect(loop, &conn, (struct sockaddr *)&server_address,
                                 sizeof(server_address), NULL, 0, &server_handlers, NULL),
                     -ENETUNREACH);
    /* getsockopt failing when the connect completes: reported as the connect's error. */
    sxe__sys_fail(SXE_SYS_getsockopt, 1, 1, ENOTSOCK);
    assert_int_equal(sxe_connect(loop, &conn, (struct sockaddr *)&server_address,
                                 sizeof(server_address), NULL, 0, &server_handlers, NULL),
                     0);
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_err, ENOTSOCK);
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.open, 2); /* the listener, and the server side of the last connect */
}

/* Answers one request per call, then pauses: the rest waits for sxe_conn_resume(). */
static size_t serve_one_and_pause(sxe_conn_t *conn, const char *data, size_t len)
{
    const char *end = memmem(data, len, "\r\n\r\n", 4);

    if (end == NULL) {
        return 0;
    }
    assert_true(sxe_conn_write(conn, reply, sizeof(reply) - 1) >= 0);
    seen.requests++;
    assert_int_equal(sxe_conn_pause(conn), 0);
    return (size_t)(end - data) + 4;
}

static void count_eof(sxe_conn_t *conn)
{
    seen.eofs++;
    sxe_conn_close(conn);
}

static void count_drain(sxe_conn_t *conn)
{
    (void)conn;
    seen.drains++;
}

/*
 * A paused connection is not read: its bytes wait in the socket, and on_drained says when its
 * queued output has gone. Resuming offers the kept input first, with no new bytes needed, then
 * reads the socket to the end, an end of stream that came while paused included.
 */
static void test_pause_and_resume(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = on_connect,
                                                      .on_read = serve_one_and_pause,
                                                      .on_eof = count_eof,
                                                      .on_drained = count_drain,
                                                      .on_close = on_close};
    static const char three[] =
        "GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n";
    char replies[4 * sizeof(reply)];

    (void)state;
    start_server(NULL, NULL, &handlers);
    int fd = client();
    send_all(fd, three, sizeof(three) - 1);
    want_requests = 1;
    pump_until(requests_reached);
    sxe_conn_t *conn = seen.last_conn;
    pump(); /* a completion backend says the reply has gone a turn later */
    assert_int_equal(seen.drains, 1); /* paused with a reply queued: told when it has gone */

    /* Paused with two requests kept: more bytes and an end of stream are left in the socket. */
    send_all(fd, request, sizeof(request) - 1);
    shutdown(fd, SHUT_WR);
    sxe__sys_count(SXE_SYS_recv);
    pump();
    assert_int_equal(seen.requests, 1);
    assert_int_equal(sxe__sys_calls(SXE_SYS_recv), 0);

    /* Each resume answers one more: the two kept ones without a read, then the one that waited. */
    assert_int_equal(sxe_conn_resume(conn), 0);
    pump();
    assert_int_equal(seen.requests, 2);
    assert_int_equal(sxe__sys_calls(SXE_SYS_recv), 0);
    assert_int_equal(sxe_conn_resume(conn), 0);
    assert_int_equal(sxe_conn_resume(conn), 0); /* twice: the same as once */
    pump();
    assert_int_equal(seen.requests, 3);
    assert_int_equal(sxe__sys_calls(SXE_SYS_recv), 0);
    assert_int_equal(seen.eofs, 0);
    assert_int_equal(sxe_conn_resume(conn), 0);
    pump();
    assert_int_equal(seen.requests, 4);
    assert_int_equal(seen.eofs, 0);

    /* The last resume finds the end of stream, though no edge came for it after the pause. */
    assert_int_equal(sxe_conn_resume(conn), 0);
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.eofs, 1);
    size_t got = 0;
    for (ssize_t n = 1; n != 0;) { /* a completion backend sends in the loop's turns */
        pump();
        n = recv(fd, replies + got, sizeof(replies) - got, MSG_DONTWAIT);
        got += n > 0 ? (size_t)n : 0;
        assert_true(n >= 0 || errno == EAGAIN);
    }
    assert_int_equal(got, 4 * (sizeof(reply) - 1));
    close(fd);
}

/* Calls on closed or unsuitable connections fail cleanly. */
static void test_misuse_of_closed_connections(void **state)
{
    struct sockaddr_in address;
    socklen_t len = sizeof(address);

    (void)state;
    start_server(NULL, NULL, &server_handlers);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);
    sxe_conn_t *conn = seen.last_conn;
    sxe_conn_set_user(conn, &seen);
    assert_ptr_equal(sxe_conn_user(conn), &seen);
    assert_int_equal(sxe_conn_index(conn), (uint32_t)sxe_conn_id(conn));
    sxe_conn_close(conn);
    assert_int_equal(sxe_conn_peer(conn, (struct sockaddr *)&address, &len), -EBADF);
    assert_int_equal(sxe_conn_local(conn, (struct sockaddr *)&address, &len), -EBADF);
    assert_int_equal(sxe_conn_sendfile(conn, 0, 0, 1), -EPIPE);
    assert_int_equal(sxe_conn_shutdown(conn), -EPIPE);
    assert_int_equal(sxe_conn_send_fd(conn, 0), -EPIPE);
    assert_int_equal(
        sxe_udp_send(conn, "x", 1, (struct sockaddr *)&server_address, sizeof(server_address)),
        -EBADF);
    assert_int_equal(sxe_conn_hand_off(listener, conn), -EPIPE);
    assert_int_equal(sxe_conn_pause(conn), -EPIPE);
    assert_int_equal(sxe_conn_resume(conn), -EPIPE);
    assert_int_equal(sxe_conn_pause(listener), -EPIPE);
    close(fd);

    sxe__sys_fail(SXE_SYS_fcntl, 1, 1, EBADF);
    int spare = dup(0);
    assert_int_equal(sxe_conn_adopt(loop, &conn, spare, &server_handlers, NULL), -EBADF);
    assert_int_equal(fcntl(spare, F_GETFD), -1); /* adopt closed it */
    sxe__sys_fail(SXE_SYS_socketpair, 1, 1, EMFILE);
    sxe_conn_t *a, *b;
    assert_int_equal(sxe_conn_pair(loop, &a, &b, 0, &server_handlers, NULL), -EMFILE);
}

/* UDP errors: binding a port in use, send failures, receive failures. */
static void test_udp_errors(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_datagram = echo_datagram};
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(address);
    sxe_conn_t *udp, *second;

    (void)state;
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(
        sxe_udp_bind(loop, &udp, (struct sockaddr *)&address, sizeof(address), &handlers, NULL), 0);
    assert_int_equal(sxe_conn_local(udp, (struct sockaddr *)&address, &len), 0);
    assert_int_equal(
        sxe_udp_bind(loop, &second, (struct sockaddr *)&address, sizeof(address), &handlers, NULL),
        -EADDRINUSE);
    sxe__sys_fail(SXE_SYS_socket, 1, 1, EMFILE);
    assert_int_equal(
        sxe_udp_bind(loop, &second, (struct sockaddr *)&address, sizeof(address), &handlers, NULL),
        -EMFILE);
    sxe__sys_fail(SXE_SYS_sendto, 1, 1, EINTR);
    assert_int_equal(sxe_udp_send(udp, "x", 1, (struct sockaddr *)&address, sizeof(address)), 0);
    sxe__sys_fail(SXE_SYS_sendto, 1, 1, EAGAIN);
    assert_int_equal(sxe_udp_send(udp, "x", 1, (struct sockaddr *)&address, sizeof(address)),
                     -EAGAIN);
    /* Receiving: an interrupted call is retried, a failed one gives up until the next edge. */
    sxe__sys_fail(SXE_SYS_recvmmsg, 1, 1, EINTR);
    want_requests = 1;
    pump_until(requests_reached); /* our own "x" came back to us */
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sxe__sys_fail(SXE_SYS_recvmmsg, 1, 1, ENOMEM);
    assert_int_equal(sendto(fd, "y", 1, 0, (struct sockaddr *)&address, sizeof(address)), 1);
    pump();
    close(fd);
}
static void test_close_reason_names(void **state)
{
    (void)state;
    assert_string_equal(sxe_close_reason_name(SXE_CLOSE_PEER), "peer");
    assert_string_equal(sxe_close_reason_name(SXE_CLOSE_HANDED_OFF), "handed off");
    assert_string_equal(sxe_close_reason_name((enum sxe_close_reason)99), "?");
}

/* io_uring: the next completion of one kernel opcode fails with an errno; the rest pass. */
static unsigned failing_opcode;
static int failing_errno;
static int (*real_result)(unsigned op, int res);

static int result_failing_once(unsigned op, int res)
{
    if (failing_errno != 0 && op == failing_opcode) {
        errno = failing_errno;
        failing_errno = 0;
        return -1;
    }
    return real_result(op, res);
}

static void fail_next_completion(unsigned opcode, int err)
{
    real_result = real_result != NULL ? real_result : sxe__sys.io_uring_result;
    failing_opcode = opcode;
    failing_errno = err;
    sxe__sys.io_uring_result = result_failing_once;
}

/*
 * io_uring: a receive, a send or an accept that the kernel completes with an error. A failed
 * receive or send closes its connection alone, with the error; a failed accept (out of files)
 * is counted, and the listener goes on accepting.
 */
static void test_uring_completion_faults(void **state)
{
    (void)state;
    if (!sxe_test_uring()) {
        print_message("skipped on epoll: io_uring completions (epoll: test_read_faults)\n");
        skip();
    }
    start_server(NULL, NULL, &server_handlers);
    int a = client();
    int b = client();
    want_connects = 2;
    pump_until(connects_reached);

    fail_next_completion(IORING_OP_RECV, ECONNRESET);
    send_all(a, request, sizeof(request) - 1);
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.last_err, ECONNRESET);
    send_all(b, request, sizeof(request) - 1);
    expect_reply(b, 1);

    fail_next_completion(IORING_OP_SEND, EPIPE);
    send_all(b, request, sizeof(request) - 1);
    want_closes = 2;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.last_err, EPIPE);
    close(a);
    close(b);

    struct sxe_loop_stats stats;
    fail_next_completion(IORING_OP_ACCEPT, EMFILE);
    int c = client();
    int d = client();
    want_connects = 3;
    pump_until(connects_reached);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.accept_errors, 1);
    send_all(d, request, sizeof(request) - 1);
    expect_reply(d, 1);
    close(c);
    close(d);
}

/*
 * A connection closed while the kernel still sends from its queue (io_uring) is closed for the
 * program at once (on_close, its id no longer found). The bytes the kernel holds still go out, as
 * a readiness backend's sent bytes would; the slot and its buffers come back when that send ends,
 * or, for a peer that never reads, when the CLOSING timeout shuts the socket. The table is sound
 * at every turn. On epoll the close is immediate and the same checks hold.
 */
static size_t reply_big(sxe_conn_t *conn, const char *data, size_t len)
{
    static char big[60000];

    (void)data;
    memset(big, 'x', sizeof(big));
    for (int i = 0; i < 16; i++) {
        assert_true(sxe_conn_write(conn, big, sizeof(big)) >= 0);
    }
    seen.last_conn = conn;
    return len;
}

static void close_with_output_queued(int fd)
{
    struct sxe_loop_stats stats;

    seen.last_conn = NULL;
    send_all(fd, request, sizeof(request) - 1);
    for (int i = 0; i < 20 && seen.last_conn == NULL; i++) {
        pump();
    }
    sxe_conn_t *conn = seen.last_conn;
    assert_non_null(conn);
    uint64_t id = sxe_conn_id(conn);
    assert_true(sxe_conn_queued(conn) > 0);
    unsigned closes = seen.closes;
    sxe_conn_close(conn);
    assert_int_equal(seen.closes, closes + 1);
    assert_null(sxe_conn_from_id(loop, id));
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.open, 1); /* the listener */
    assert_int_equal(sxe__conn_validate(loop), 0);
}

/* A small send buffer, so that the kernel cannot take all of reply_big at once. */
static void connect_small_send_buffer(sxe_conn_t *conn)
{
    int size = 4096;

    assert_int_equal(setsockopt(sxe_conn_fd(conn), SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)), 0);
    on_connect(conn);
}

static void test_close_while_a_send_is_pending(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = connect_small_send_buffer, .on_read = reply_big, .on_close = on_close};
    struct sxe_loop_stats stats;
    char got[65536];
    size_t total = 0;

    (void)state;
    sxe__sys_clock_fake(100 * SXE_NS_PER_SEC, 0);
    start_server(&(struct sxe_loop_options){.buffer_size = 65536, .write_limit = 1 << 20}, NULL,
                 &handlers);

    /* A reader: what the kernel took arrives, then the end of the stream. */
    int fd = client_with_window(4096);
    close_with_output_queued(fd);
    for (ssize_t n = 1; n > 0;) {
        pump();
        n = recv(fd, got, sizeof(got), 0);
        total += n > 0 ? (size_t)n : 0;
    }
    assert_true(total > 0);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.buffers_in_use, 0);
    close(fd);

    /* A peer that never reads: the CLOSING timeout ends the send. */
    fd = client_with_window(4096);
    close_with_output_queued(fd);
    sxe__sys_clock_advance(SXE__CLOSING_TIMEOUT + 1);
    sxe_loop_stats(loop, &stats);
    for (int i = 0; i < 20 && stats.buffers_in_use > 0; i++) {
        pump();
        sxe_loop_stats(loop, &stats);
    }
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.buffers_in_use, 0);
    assert_int_equal(seen.closes, 2);
    close(fd);
}

/*
 * A burst larger than the connection's buffer while its output is backed up, echoed: nothing is
 * lost or reordered. On io_uring a turn can bring the whole burst at once; what the connection
 * cannot take yet is held in the backend's buffers (inq.c) and offered as the output drains.
 */
static unsigned echo_failures;

static size_t echo_back(sxe_conn_t *conn, const char *data, size_t len)
{
    if (sxe_conn_write(conn, data, len) < 0) {
        echo_failures++;
    }
    return len;
}

static void test_burst_while_output_is_backed_up(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = echo_back, .on_close = on_close};
    static char out[256 * 1024], in[sizeof(out)];
    size_t sent = 0, got = 0;

    (void)state;
    echo_failures = 0;
    for (size_t i = 0; i < sizeof(out); i++) {
        out[i] = (char)(i * 7 + i / 251);
    }
    start_server(&(struct sxe_loop_options){.buffer_size = 4096}, NULL, &handlers);
    int fd = client();
    uint64_t give_up = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;
    while (got < sizeof(in)) {
        assert_true(sxe_clock_mono_ns() < give_up);
        ssize_t n = sent < sizeof(out) ? send(fd, out + sent, sizeof(out) - sent, MSG_DONTWAIT) : 0;
        sent += n > 0 ? (size_t)n : 0;
        pump();
        n = recv(fd, in + got, sizeof(in) - got, MSG_DONTWAIT);
        got += n > 0 ? (size_t)n : 0;
    }
    assert_memory_equal(in, out, sizeof(out));
    assert_int_equal(echo_failures, 0);
    assert_int_equal(seen.closes, 0);
    close(fd);
}

/* Paused, then sent far more than the buffer holds: it all comes, in order, after resuming. */
static size_t record_and_pause(sxe_conn_t *conn, const char *data, size_t len)
{
    record_input(conn, data, len);
    assert_int_equal(sxe_conn_pause(conn), 0);
    return len;
}

static void test_paused_connection_loses_nothing(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = record_and_pause, .on_close = on_close};
    char bytes[6000];

    (void)state;
    for (size_t i = 0; i < sizeof(bytes); i++) {
        bytes[i] = (char)('a' + i % 23);
    }
    start_server(&(struct sxe_loop_options){.buffer_size = 1024}, NULL, &handlers);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);
    send_all(fd, bytes, 10);
    for (int i = 0; i < 20 && seen.input_len < 10; i++) {
        pump();
    }
    assert_int_equal(seen.input_len, 10);
    send_all(fd, bytes + 10, sizeof(bytes) - 10); /* six times the buffer, while paused */
    pump();
    pump();
    assert_int_equal(seen.input_len, 10);
    for (int i = 0; i < 200 && seen.input_len < sizeof(bytes); i++) {
        assert_int_equal(sxe_conn_resume(seen.last_conn), 0);
        pump();
    }
    assert_int_equal(seen.input_len, sizeof(bytes));
    assert_memory_equal(seen.input, bytes, sizeof(bytes));
    assert_int_equal(seen.closes, 0);
    close(fd);
}

/*
 * A peer that floods a paused connection: the bytes wait in the socket on both backends (io_uring
 * stops receiving for it), nothing is held for it, and nothing closes.
 */
static void test_a_flood_to_a_paused_connection_waits_in_the_socket(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = record_and_pause, .on_close = on_close};
    static char flood[1 << 20];
    struct sxe_loop_stats stats;

    (void)state;
    start_server(NULL, NULL, &handlers);
    int fd = client();
    send_all(fd, "x", 1);
    for (int i = 0; i < 20 && seen.input_len < 1; i++) {
        pump();
    }
    for (int i = 0; i < 20; i++) {
        (void)!send(fd, flood, sizeof(flood), MSG_DONTWAIT | MSG_NOSIGNAL);
        pump();
    }
    sxe_loop_stats(loop, &stats);
    assert_int_equal(seen.closes, 0);
    assert_int_equal(seen.input_len, 1);
    assert_int_equal(stats.buffers_in_use, 0);
    close(fd);
}

/*
 * io_uring: what arrived in the same turn as a pause is held, up to a bound (at most half the
 * backend's buffers): past it the connection is closed (SXE_CLOSE_NO_BUFFER, counted), so one
 * connection cannot leave the others without buffers. Here the ring has 8 buffers of 64 bytes.
 */
static void test_held_input_is_bounded(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = record_and_pause, .on_close = on_close};
    static char burst[2000];
    struct sxe_loop_stats stats;

    (void)state;
    if (!sxe_test_uring()) {
        print_message("skipped on epoll: it holds nothing, its bytes wait in the socket\n");
        skip();
    }
    sxe__io_uring_set_buffers(8, 64);
    start_server(NULL, NULL, &handlers);
    sxe__io_uring_set_buffers(0, 0);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);
    send_all(fd, burst, sizeof(burst)); /* many pieces in one turn; the first one pauses */
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_NO_BUFFER);
    sxe_loop_stats(loop, &stats);
    assert_true(stats.no_buffer >= 1);
    assert_int_equal(stats.buffers_in_use, 0);
    int other = client();
    send_all(other, "y", 1);
    for (int i = 0; i < 20 && seen.input_len < 65; i++) {
        pump();
    }
    assert_true(seen.input_len > 64); /* the other connection is still read */
    close(fd);
    close(other);
}

/*
 * The peer's end of stream arrives while the connection's output is at high_water: on_eof still
 * comes (it used to wait, on io_uring, for an event that never came).
 */
static size_t reply_40k(sxe_conn_t *conn, const char *data, size_t len)
{
    static char big[40000];

    (void)data;
    assert_true(sxe_conn_write(conn, big, sizeof(big)) >= 0);
    return len;
}

static void test_end_of_stream_behind_a_full_queue(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = reply_40k, .on_eof = count_eof, .on_close = on_close};
    char got[65536];
    size_t total = 0;

    (void)state;
    start_server(NULL, NULL, &handlers);
    int fd = client();
    send_all(fd, request, sizeof(request) - 1);
    shutdown(fd, SHUT_WR);
    for (ssize_t n = 1; n != 0;) {
        pump();
        n = recv(fd, got, sizeof(got), MSG_DONTWAIT);
        total += n > 0 ? (size_t)n : 0;
        assert_true(n >= 0 || errno == EAGAIN);
    }
    assert_int_equal(total, 40000);
    assert_int_equal(seen.eofs, 1);
    assert_int_equal(seen.closes, 1);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_serves_keep_alive_requests, teardown),
        cmocka_unit_test_teardown(test_pipelined_requests_split_at_every_byte, teardown),
        cmocka_unit_test_teardown(test_partial_consumption_keeps_the_rest, teardown),
        cmocka_unit_test_teardown(test_message_larger_than_buffer_closes, teardown),
        cmocka_unit_test_teardown(test_message_larger_than_buffer_can_be_answered, teardown),
        cmocka_unit_test_teardown(test_peer_closes_mid_message, teardown),
        cmocka_unit_test_teardown(test_slow_reader_and_high_water_mark, teardown),
        cmocka_unit_test_teardown(test_write_limit, teardown),
        cmocka_unit_test_teardown(test_full_table, teardown),
        cmocka_unit_test_teardown(test_full_table_evicts_oldest_idle, teardown),
        cmocka_unit_test_teardown(test_timeouts_under_fake_time, teardown),
        cmocka_unit_test_teardown(test_connect, teardown),
        cmocka_unit_test_teardown(test_connect_timeout, teardown),
        cmocka_unit_test_teardown(test_accept_faults, teardown),
        cmocka_unit_test_teardown(test_read_faults, teardown),
        cmocka_unit_test_teardown(test_write_faults, teardown),
        cmocka_unit_test_teardown(test_epoll_wait_eintr, teardown),
        cmocka_unit_test_teardown(test_epoll_waits_to_the_nanosecond, teardown),
        cmocka_unit_test_teardown(test_stale_events_are_dropped, teardown),
        cmocka_unit_test_teardown(test_udp, teardown),
        cmocka_unit_test_teardown(test_unix_stream, teardown),
        cmocka_unit_test_teardown(test_pair_and_half_close, teardown),
        cmocka_unit_test_teardown(test_adopt_descriptor_zero, teardown),
        cmocka_unit_test_teardown(test_hand_off, teardown),
        cmocka_unit_test_teardown(test_sendfile, teardown),
        cmocka_unit_test_teardown(test_sendfile_and_close, teardown),
        cmocka_unit_test_teardown(test_ipv6, teardown),
        cmocka_unit_test_teardown(test_listen_errors, teardown),
        cmocka_unit_test_teardown(test_stop_on_signal, teardown),
        cmocka_unit_test_teardown(test_ten_thousand_connections, teardown),
        cmocka_unit_test_teardown(test_no_buffer_for_input, teardown),
        cmocka_unit_test_teardown(test_no_buffer_for_output, teardown),
        cmocka_unit_test_teardown(test_large_burst_is_read_over_turns, teardown),
        cmocka_unit_test_teardown(test_shutdown_after_queued_output, teardown),
        cmocka_unit_test_teardown(test_close_when_sent_from_on_read, teardown),
        cmocka_unit_test_teardown(test_close_when_sent_outside_on_read, teardown),
        cmocka_unit_test_teardown(test_sendfile_errors, teardown),
        cmocka_unit_test_teardown(test_write_ref, teardown),
        cmocka_unit_test_teardown(test_connect_errors, teardown),
        cmocka_unit_test_teardown(test_misuse_of_closed_connections, teardown),
        cmocka_unit_test_teardown(test_pause_and_resume, teardown),
        cmocka_unit_test_teardown(test_short_sends_across_buffers, teardown),
        cmocka_unit_test_teardown(test_a_reused_slot_is_not_read_for_its_old_connection, teardown),
        cmocka_unit_test_teardown(test_failed_write_on_a_ready_connection_spares_the_others,
                                  teardown),
        cmocka_unit_test_teardown(test_udp_errors, teardown),
        cmocka_unit_test_teardown(test_close_reason_names, teardown),
        cmocka_unit_test_teardown(test_uring_completion_faults, teardown),
        cmocka_unit_test_teardown(test_close_while_a_send_is_pending, teardown),
        cmocka_unit_test_teardown(test_burst_while_output_is_backed_up, teardown),
        cmocka_unit_test_teardown(test_paused_connection_loses_nothing, teardown),
        cmocka_unit_test_teardown(test_a_flood_to_a_paused_connection_waits_in_the_socket,
                                  teardown),
        cmocka_unit_test_teardown(test_held_input_is_bounded, teardown),
        cmocka_unit_test_teardown(test_end_of_stream_behind_a_full_queue, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
