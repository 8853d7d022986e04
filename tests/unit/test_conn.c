/*
 * Connections over real loopback sockets: serving keep-alive and pipelined requests, partial
 * input, messages larger than the buffer, backpressure and the write limit, the full table,
 * timeouts under fake time, and connecting out. The harness is in conn_test.h; faults through
 * the system call seam are in test_conn_faults.c, other kinds of socket in test_conn_kinds.c, and
 * output, pausing and closing with output queued in test_conn_output.c.
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

#include "conn_test.h"

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

/*
 * A connection the program opened itself is never evicted, though it is the oldest idle one: an
 * upstream waiting for its answer looks idle, and is the program's work, not a client's idleness.
 */
static void test_the_programs_own_connections_are_not_evicted(void **state)
{
    struct sxe_loop_options options = {.connections = 3};
    struct sxe_listen_options listen_options = {.flags = SXE_LISTEN_EVICT_IDLE};
    struct sockaddr_in elsewhere = {.sin_family = AF_INET,
                                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(elsewhere);
    sxe_conn_t *outbound;

    (void)state;
    start_server(&options, &listen_options, &server_handlers);
    int upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(bind(upstream, (struct sockaddr *)&elsewhere, sizeof(elsewhere)), 0);
    assert_int_equal(listen(upstream, 4), 0);
    assert_int_equal(getsockname(upstream, (struct sockaddr *)&elsewhere, &len), 0);
    assert_int_equal(sxe_conn_connect(loop, &outbound, (struct sockaddr *)&elsewhere,
                                      sizeof(elsewhere), NULL, &server_handlers, NULL),
                     0);
    uint64_t outbound_id = sxe_conn_id(outbound);
    want_connects = 1;
    pump_until(connects_reached); /* the oldest idle connection, and the program's */
    int peer = client();
    want_connects = 2;
    pump_until(connects_reached); /* the table is full */
    int third = client();
    want_connects = 3;
    pump_until(connects_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_EVICTED);
    expect_closed(peer); /* the client's, younger, went */
    assert_non_null(sxe_conn_from_id(loop, outbound_id));
    send_all(third, request, sizeof(request) - 1);
    expect_reply(third, 1);
    close(peer);
    close(third);
    close(upstream);
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
    assert_int_equal(
        sxe_conn_connect(loop, &conn, (struct sockaddr *)&server_address, sizeof(server_address),
                         &(struct sxe_connect_options){.source = (struct sockaddr *)&source,
                                                       .source_len = sizeof(source)},
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
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&nobody, sizeof(nobody), NULL,
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
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&server_address,
                                      sizeof(server_address), NULL, &handlers, NULL),
                     0);
    pump();
    assert_int_equal(seen.closes, 0);
    sxe__sys_clock_advance(3 * SXE_NS_PER_SEC + 1);
    pump();
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.last_reason, SXE_CLOSE_TIMEOUT);
    assert_int_equal(seen.connects, 0);
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
        cmocka_unit_test_teardown(test_the_programs_own_connections_are_not_evicted, teardown),
        cmocka_unit_test_teardown(test_timeouts_under_fake_time, teardown),
        cmocka_unit_test_teardown(test_connect, teardown),
        cmocka_unit_test_teardown(test_connect_timeout, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
