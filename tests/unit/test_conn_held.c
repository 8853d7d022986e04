/*
 * Input a connection cannot take yet, because it is paused or its output is backed up: nothing is
 * lost or reordered, a flood waits in the socket, and on io_uring what a turn brought anyway is
 * held (inq.c) within bounds that one connection, or many holding a little each, cannot break for
 * the others. Harness: conn_test.h.
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
#include <sys/epoll.h>
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

/* epoll: what a paused connection asks for. It wants no input, so a peer that sends to it does
 * not wake the loop; resumed, it wants input again. */
static int watched_fd = -1;
static uint32_t watched_events;

static int epoll_ctl_recording(int epfd, int op, int fd, struct epoll_event *event)
{
    if (op == EPOLL_CTL_MOD && fd == watched_fd) {
        watched_events = event->events;
    }
    return epoll_ctl(epfd, op, fd, event);
}

static void test_a_paused_connection_asks_epoll_for_no_input(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = record_and_pause, .on_close = on_close};

    (void)state;
    sxe_test_skip_on_uring("epoll_ctl (io_uring stops receiving instead)");
    start_server(NULL, NULL, &handlers);
    sxe__sys.epoll_ctl = epoll_ctl_recording;
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);
    watched_fd = sxe_conn_fd(seen.last_conn);
    send_all(fd, "x", 1);
    for (int i = 0; i < 20 && seen.input_len < 1; i++) {
        pump();
    }
    assert_int_equal(seen.input_len, 1); /* read, and paused in its on_read */
    assert_int_equal(watched_events & (EPOLLIN | EPOLLRDHUP), 0);
    assert_true(watched_events & EPOLLOUT); /* its output still drains */
    assert_int_equal(sxe_conn_resume(seen.last_conn), 0);
    assert_int_equal(watched_events & (EPOLLIN | EPOLLRDHUP), EPOLLIN | EPOLLRDHUP);
    watched_fd = -1;
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
 * io_uring: what arrived in the same turn as a pause is held, up to a bound: half the backend's
 * buffers, then copies into the loop's I/O buffers. Past both the connection is closed
 * (SXE_CLOSE_NO_BUFFER, counted), so one connection cannot leave the others without buffers.
 * Here the ring has 8 buffers of 64 bytes, which a turn can fill, and the loop 1 of 64: 4 pieces
 * can be kept and one more copied.
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
    start_server(&(struct sxe_loop_options){.buffers = 1, .buffer_size = 64}, NULL, &handlers);
    sxe__io_uring_set_buffers(0, 0);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);
    send_all(fd, burst, sizeof(burst)); /* many pieces in one turn; the first one pauses */
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_NO_BUFFER);
    assert_int_equal(seen.last_err, 0); /* err is for SXE_CLOSE_ERROR only */
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
 * io_uring: six paused connections hold a few bytes each, more pieces than the backend can spare
 * (4 of its 8 buffers), then a seventh is sent a burst: nobody is closed (the pieces past the
 * backend's share are copied into the loop's I/O buffers, the small ones into one), and every
 * connection gets all its bytes, in order, once resumed. Before, the fifth holder and the burst's
 * connection were closed: the backend's buffers were the only place to hold input.
 */
#define HOLDERS 7

static size_t holder_got[HOLDERS];
static char holder_bytes[HOLDERS][2048];
static sxe_conn_t *holders[HOLDERS];

static size_t record_per_holder_and_pause(sxe_conn_t *conn, const char *data, size_t len)
{
    for (unsigned i = 0; i < HOLDERS; i++) {
        if (holders[i] == conn) {
            assert_true(holder_got[i] + len <= sizeof(holder_bytes[i]));
            memcpy(holder_bytes[i] + holder_got[i], data, len);
            holder_got[i] += len;
        }
    }
    assert_int_equal(sxe_conn_pause(conn), 0);
    return len;
}

static void test_many_holding_a_little_leave_room_for_others(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = record_per_holder_and_pause, .on_close = on_close};
    static char burst[2000];
    int fds[HOLDERS];

    (void)state;
    if (!sxe_test_uring()) {
        print_message("skipped on epoll: it holds nothing, its bytes wait in the socket\n");
        skip();
    }
    for (size_t i = 0; i < sizeof(burst); i++) {
        burst[i] = (char)('A' + i % 26);
    }
    memset(holder_got, 0, sizeof(holder_got));
    sxe__io_uring_set_buffers(8, 64);
    start_server(NULL, NULL, &handlers);
    sxe__io_uring_set_buffers(0, 0);
    for (unsigned i = 0; i < HOLDERS; i++) {
        fds[i] = client();
        want_connects = i + 1;
        pump_until(connects_reached);
        holders[i] = seen.last_conn;
        send_all(fds[i], "a", 1); /* taken, and the connection pauses */
        for (int turn = 0; turn < 20 && holder_got[i] == 0; turn++) {
            pump();
        }
        assert_int_equal(holder_got[i], 1);
    }
    for (unsigned i = 0; i + 1 < HOLDERS; i++) {
        send_all(fds[i], "bc", 2); /* held */
        pump();
    }
    send_all(fds[HOLDERS - 1], burst, sizeof(burst));
    pump();
    pump();
    assert_int_equal(seen.closes, 0);
    for (int turn = 0; turn < 200; turn++) {
        for (unsigned i = 0; i < HOLDERS; i++) {
            assert_int_equal(sxe_conn_resume(holders[i]), 0);
        }
        pump();
    }
    for (unsigned i = 0; i + 1 < HOLDERS; i++) {
        assert_int_equal(holder_got[i], 3);
        assert_memory_equal(holder_bytes[i], "abc", 3);
    }
    assert_int_equal(holder_got[HOLDERS - 1], 1 + sizeof(burst));
    assert_memory_equal(holder_bytes[HOLDERS - 1] + 1, burst, sizeof(burst));
    assert_int_equal(seen.closes, 0);
    for (unsigned i = 0; i < HOLDERS; i++) {
        close(fds[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_burst_while_output_is_backed_up, teardown),
        cmocka_unit_test_teardown(test_paused_connection_loses_nothing, teardown),
        cmocka_unit_test_teardown(test_a_paused_connection_asks_epoll_for_no_input, teardown),
        cmocka_unit_test_teardown(test_a_flood_to_a_paused_connection_waits_in_the_socket,
                                  teardown),
        cmocka_unit_test_teardown(test_held_input_is_bounded, teardown),
        cmocka_unit_test_teardown(test_many_holding_a_little_leave_room_for_others, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
