/*
 * The io_uring event backend on its own, over real sockets and pipes: receiving, end of stream,
 * accepting, forgetting, sending, and buffer exhaustion. Polls, deadlines and the failures of
 * setup, submission and completions are in test_io_uring_ring.c; the harness is in
 * io_uring_test.h. Each test makes a bare loop: only the fields the backend reads. Where the
 * kernel has no io_uring, the tests that need one are skipped.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io.h"
#include "io_uring.h"
#include "loop.h"
#include "sxe/clock.h"
#include "sxe_test.h"
#include "sys.h"

#include "io_uring_test.h"

static void test_receive_on_socketpair(void **state)
{
    sxe_loop_t *loop = open_loop();
    struct sxe__io_event events[EVENTS_MAX];
    int fds[2];

    (void)state;
    stream_pair(fds);
    assert_int_equal(sxe__io_uring.watch(loop, fds[0], 7, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(write(fds[1], "hello", 5), 5);
    assert_int_equal(wait_ms(loop, 1000, events, EVENTS_MAX), 1);
    assert_int_equal(events[0].tag, 7);
    assert_int_equal(events[0].events, SXE__IO_IN | SXE__IO_RECV);
    assert_int_equal(events[0].result, 5);
    assert_memory_equal(events[0].data, "hello", 5);
    assert_int_equal(write(fds[1], "again", 5), 5);
    assert_int_equal(wait_ms(loop, 1000, events, EVENTS_MAX), 1);
    assert_memory_equal(events[0].data, "again", 5);
    sxe__io_uring.forget(loop, fds[0], true);
    close(fds[1]);
    close_loop(loop);
}

static void test_receive_over_tcp(void **state)
{
    sxe_loop_t *loop = open_loop();
    struct sockaddr_in address;
    char sent[10000], got[10000];
    struct sink sink = {.tag = 11, .data = got, .cap = sizeof(got)};

    (void)state;
    int listener = tcp_listener(&address);
    int client = tcp_client(&address);
    int server = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    assert_true(server >= 0);
    for (size_t i = 0; i < sizeof(sent); i++) {
        sent[i] = (char)(i * 7 + i / 251);
    }
    assert_int_equal(sxe__io_uring.watch(loop, server, 11, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(write(client, sent, sizeof(sent)), sizeof(sent));
    pump_until(loop, &sink, sizeof(sent));
    assert_memory_equal(got, sent, sizeof(sent));
    sxe__io_uring.forget(loop, server, true);
    close(client);
    close(listener);
    close_loop(loop);
}

/* End of stream is one event, with no data, and the receive is not armed again. */
static void test_end_of_stream(void **state)
{
    sxe_loop_t *loop = open_loop();
    struct sxe__io_event events[EVENTS_MAX];
    int fds[2];

    (void)state;
    stream_pair(fds);
    assert_int_equal(sxe__io_uring.watch(loop, fds[0], 3, SXE__IO_IN | SXE__IO_RECV), 0);
    close(fds[1]);
    assert_int_equal(wait_ms(loop, 1000, events, EVENTS_MAX), 1);
    assert_int_equal(events[0].tag, 3);
    assert_int_equal(events[0].events, SXE__IO_IN | SXE__IO_HUP | SXE__IO_RECV);
    assert_int_equal(events[0].result, 0);
    assert_null(events[0].data);
    assert_int_equal(wait_ms(loop, 50, events, EVENTS_MAX), 0);
    sxe__io_uring.forget(loop, fds[0], true);
    close_loop(loop);
}

static void test_accept_three(void **state)
{
    sxe_loop_t *loop = open_loop();
    struct sxe__io_event events[EVENTS_MAX];
    struct sockaddr_in address;
    int clients[3], accepted[3];
    int count = 0;

    (void)state;
    int listener = tcp_listener(&address);
    assert_int_equal(sxe__io_uring.watch(loop, listener, 9, SXE__IO_IN | SXE__IO_ACCEPT), 0);
    for (int i = 0; i < 3; i++) {
        clients[i] = tcp_client(&address);
    }
    for (int turn = 0; turn < 20 && count < 3; turn++) {
        int filled = wait_ms(loop, 100, events, EVENTS_MAX);
        for (int i = 0; i < filled; i++) {
            assert_int_equal(events[i].tag, 9);
            assert_int_equal(events[i].events, SXE__IO_IN | SXE__IO_ACCEPT);
            assert_true(count < 3);
            accepted[count++] = events[i].result;
        }
    }
    assert_int_equal(count, 3);
    for (int i = 0; i < 3; i++) {
        assert_true(accepted[i] >= 0);
        assert_true(fcntl(accepted[i], F_GETFL) & O_NONBLOCK);
        assert_true(fcntl(accepted[i], F_GETFD) & FD_CLOEXEC);
        assert_int_equal(close(accepted[i]), 0);
        close(clients[i]);
    }
    sxe__io_uring.forget(loop, listener, true);
    close_loop(loop);
}

/*
 * Bytes the kernel received for an fd that is forgotten before they are reaped are dropped, and
 * their buffer comes back: with a ring of two, the next receive fills both in one wait. The
 * forgotten socket closes.
 */
static void test_forget_drops_arrived_data(void **state)
{
    struct sxe__io_event events[EVENTS_MAX];
    char bytes[128];
    int a[2], b[2], c[2];

    (void)state;
    sxe__io_uring_set_buffers(2, 64);
    sxe_loop_t *loop = open_loop();
    memset(bytes, 'x', sizeof(bytes));
    stream_pair(a);
    stream_pair(b);
    stream_pair(c);
    assert_int_equal(sxe__io_uring.watch(loop, a[0], 1, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(sxe__io_uring.watch(loop, b[0], 2, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(write(a[1], bytes, 64), 64);
    assert_int_equal(write(b[1], bytes, 64), 64);
    /* Both receives hold a buffer; one is reported, the other stays in the CQ, then forgotten. */
    assert_int_equal(wait_ms(loop, 1000, events, 1), 1);
    assert_int_equal(events[0].result, 64);
    int *forgotten = events[0].tag == 1 ? b : a;
    sxe__io_uring.forget(loop, forgotten[0], true);
    assert_int_equal(wait_ms(loop, 0, events, EVENTS_MAX), 0);

    assert_int_equal(sxe__io_uring.watch(loop, c[0], 3, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(write(c[1], bytes, 128), 128);
    assert_int_equal(wait_ms(loop, 1000, events, EVENTS_MAX), 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(events[i].tag, 3);
        assert_int_equal(events[i].result, 64);
    }
    struct pollfd peer = {.fd = forgotten[1], .events = POLLIN};
    assert_int_equal(poll(&peer, 1, 1000), 1);
    assert_int_equal(read(forgotten[1], bytes, sizeof(bytes)), 0);
    int *kept = forgotten == a ? b : a;
    sxe__io_uring.forget(loop, kept[0], true);
    sxe__io_uring.forget(loop, c[0], true);
    close(a[1]);
    close(b[1]);
    close(c[1]);
    close_loop(loop);
}

/* An fd number reused after forget gets only its own events, even with the old one's bytes. */
static void test_fd_reuse_after_forget(void **state)
{
    sxe_loop_t *loop = open_loop();
    struct sxe__io_event events[EVENTS_MAX];
    char got[16];
    struct sink sink = {.tag = 2, .data = got, .cap = sizeof(got)};
    int old[2], new[2];

    (void)state;
    stream_pair(old);
    assert_int_equal(sxe__io_uring.watch(loop, old[0], 1, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(wait_ms(loop, 0, events, EVENTS_MAX), 0);
    assert_int_equal(write(old[1], "old", 3), 3);
    sxe__io_uring.forget(loop, old[0], true);
    stream_pair(new);
    assert_int_equal(new[0], old[0]);
    assert_int_equal(sxe__io_uring.watch(loop, new[0], 2, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(write(new[1], "new", 3), 3);
    pump_until(loop, &sink, 3);
    assert_memory_equal(got, "new", 3);
    assert_int_equal(pump(loop, &sink, 1, 50), 0);
    sxe__io_uring.forget(loop, new[0], true);
    close(old[1]);
    close(new[1]);
    close_loop(loop);
}

/* Waits for the one SENT event of a send; @return its result. */
static int32_t wait_sent(sxe_loop_t *loop, uint64_t tag)
{
    struct sxe__io_event events[EVENTS_MAX];

    assert_int_equal(wait_ms(loop, 1000, events, EVENTS_MAX), 1);
    assert_int_equal(events[0].tag, tag);
    assert_int_equal(events[0].events, SXE__IO_SENT);
    assert_null(events[0].data);
    return events[0].result;
}

static void test_send(void **state)
{
    sxe_loop_t *loop = open_loop();
    char hello[] = "hello", ab[] = "ab", cde[] = "cde", fgh[] = "fgh";
    struct iovec one = {.iov_base = hello, .iov_len = 5};
    struct iovec three[] = {{.iov_base = ab, .iov_len = 2},
                            {.iov_base = cde, .iov_len = 3},
                            {.iov_base = fgh, .iov_len = 3}};
    char got[16];
    int fds[2];

    (void)state;
    stream_pair(fds);
    assert_int_equal(sxe__io_uring.watch(loop, fds[0], 5, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(sxe__io_uring.send(loop, fds[0], 5, &one, 1, MSG_NOSIGNAL), SXE__IO_PENDING);
    assert_int_equal(wait_sent(loop, 5), 5);
    assert_int_equal(read(fds[1], got, sizeof(got)), 5);
    assert_memory_equal(got, "hello", 5);
    assert_int_equal(sxe__io_uring.send(loop, fds[0], 5, three, 3, MSG_NOSIGNAL), SXE__IO_PENDING);
    assert_int_equal(wait_sent(loop, 5), 8);
    assert_int_equal(read(fds[1], got, sizeof(got)), 8);
    assert_memory_equal(got, "abcdefgh", 8);
    sxe__io_uring.forget(loop, fds[0], true);
    close(fds[1]);
    close_loop(loop);
}

/*
 * More sends of several pieces in one turn than the arena that holds their headers: the queued
 * ones are submitted to make room, without waiting for any to complete. Here none could: every
 * socket's buffer is full and nobody reads, so a wait there would never end. Once the peers read,
 * every send completes.
 */
static void test_a_full_send_arena_is_submitted_without_waiting(void **state)
{
    enum { PAIRS = ARENA_MSGS + 8 };
    static int fds[PAIRS][2];
    static char junk[4096];
    char ab[] = "ab", cd[] = "cd";
    struct iovec two[] = {{.iov_base = ab, .iov_len = 2}, {.iov_base = cd, .iov_len = 2}};
    struct sxe__io_event events[EVENTS_MAX];
    int sndbuf = 4096;
    unsigned sent = 0;

    (void)state;
    sxe_loop_t *loop = open_loop();
    for (int i = 0; i < PAIRS; i++) {
        stream_pair(fds[i]);
        assert_int_equal(setsockopt(fds[i][0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
        while (send(fds[i][0], junk, sizeof(junk), MSG_DONTWAIT) > 0) {
        }
    }
    for (int i = 0; i < PAIRS; i++) {
        assert_int_equal(sxe__io_uring.send(loop, fds[i][0], (uint64_t)i + 1, two, 2, MSG_NOSIGNAL),
                         SXE__IO_PENDING);
    }
    uint64_t give_up = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;
    while (sent < PAIRS) {
        assert_true(sxe_clock_mono_ns() < give_up);
        for (int i = 0; i < PAIRS; i++) {
            while (recv(fds[i][1], junk, sizeof(junk), MSG_DONTWAIT) > 0) {
            }
        }
        int count = wait_ms(loop, 10, events, EVENTS_MAX);
        for (int e = 0; e < count; e++) {
            assert_int_equal(events[e].events, SXE__IO_SENT);
            assert_int_equal(events[e].result, 4);
            sent++;
        }
    }
    for (int i = 0; i < PAIRS; i++) {
        sxe__io_uring.forget(loop, fds[i][0], true);
        close(fds[i][1]);
    }
    close_loop(loop);
}

static int enter_taking_nothing(int fd, unsigned to_submit, unsigned min_complete, unsigned flags,
                                void *arg, size_t size)
{
    (void)fd, (void)to_submit, (void)min_complete, (void)flags, (void)arg, (void)size;
    return 0; /* the kernel took no SQE, for now */
}

/*
 * Waits until count sends on the pairs have completed, those tagged from one_from on with 1 byte
 * and the others with 4, then forgets both ends of every pair and closes the loop.
 */
static void all_sent(sxe_loop_t *loop, int (*fds)[2], int pairs, unsigned count, uint64_t one_from)
{
    struct sxe__io_event events[EVENTS_MAX];
    uint64_t give_up = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;
    unsigned sent = 0;

    while (sent < count) {
        assert_true(sxe_clock_mono_ns() < give_up);
        int got = wait_ms(loop, 10, events, EVENTS_MAX);
        for (int e = 0; e < got; e++) {
            assert_int_equal(events[e].events, SXE__IO_SENT);
            assert_int_equal(events[e].result, events[e].tag >= one_from ? 1 : 4);
            sent++;
        }
    }
    for (int i = 0; i < pairs; i++) {
        sxe__io_uring.forget(loop, fds[i][0], true);
        sxe__io_uring.forget(loop, fds[i][1], true);
    }
    close_loop(loop);
}

/*
 * A full SQ that the kernel takes none of: the next request is refused (a send's -ENOBUFS), not
 * written over one still queued. Once the kernel takes them, every queued send completes.
 */
static void test_a_full_sq_the_kernel_does_not_take_refuses_more(void **state)
{
    enum { PAIRS = SQ_ENTRIES / 2 + 1 };
    static int fds[PAIRS][2];
    char byte = 'x';
    struct iovec one = {.iov_base = &byte, .iov_len = 1};

    (void)state;
    sxe_loop_t *loop = open_loop();
    for (int i = 0; i < PAIRS; i++) {
        stream_pair(fds[i]);
    }
    for (unsigned i = 0; i < SQ_ENTRIES; i++) { /* both ends of each pair: one send per fd */
        assert_int_equal(sxe__io_uring.send(loop, fds[i / 2][i % 2], i + 1, &one, 1, MSG_NOSIGNAL),
                         SXE__IO_PENDING);
    }
    sxe__sys.io_uring_enter = enter_taking_nothing;
    assert_int_equal(
        sxe__io_uring.send(loop, fds[PAIRS - 1][0], SQ_ENTRIES + 1, &one, 1, MSG_NOSIGNAL),
        -ENOBUFS);
    sxe__sys_reset();
    all_sent(loop, fds, PAIRS, SQ_ENTRIES, 0);
}

/*
 * A send of one piece takes no room in the arena of sendmsg headers: with the arena full of
 * two-piece sends and a kernel that takes nothing, it is still queued, not refused.
 */
static void test_a_one_piece_send_needs_no_arena_room(void **state)
{
    enum { PAIRS = ARENA_MSGS / 2 + 1 };
    static int fds[PAIRS][2];
    char ab[] = "ab", cd[] = "cd", byte = 'x';
    struct iovec two[] = {{.iov_base = ab, .iov_len = 2}, {.iov_base = cd, .iov_len = 2}};
    struct iovec one = {.iov_base = &byte, .iov_len = 1};

    (void)state;
    sxe_loop_t *loop = open_loop();
    for (int i = 0; i < PAIRS; i++) {
        stream_pair(fds[i]);
    }
    for (unsigned i = 0; i < ARENA_MSGS; i++) { /* both ends of each pair: one send per fd */
        assert_int_equal(sxe__io_uring.send(loop, fds[i / 2][i % 2], i + 1, two, 2, MSG_NOSIGNAL),
                         SXE__IO_PENDING);
    }
    sxe__sys.io_uring_enter = enter_taking_nothing;
    assert_int_equal(
        sxe__io_uring.send(loop, fds[PAIRS - 1][0], ARENA_MSGS + 1, &one, 1, MSG_NOSIGNAL),
        SXE__IO_PENDING);
    sxe__sys_reset();
    all_sent(loop, fds, PAIRS, ARENA_MSGS + 1, ARENA_MSGS + 1);
}

static void test_send_to_closed_peer(void **state)
{
    sxe_loop_t *loop = open_loop();
    char lost[] = "lost";
    struct iovec one = {.iov_base = lost, .iov_len = 4};
    int fds[2];

    (void)state;
    stream_pair(fds);
    close(fds[1]);
    assert_int_equal(sxe__io_uring.send(loop, fds[0], 6, &one, 1, MSG_NOSIGNAL), SXE__IO_PENDING);
    assert_int_equal(wait_sent(loop, 6), -EPIPE);
    close(fds[0]);
    close_loop(loop);
}

/*
 * Four buffers of 64 bytes, one connection flooding 64 KB and another sending 10 bytes: the
 * receives that run dry are armed again without an event, and the small one is served while
 * the flood is still going on.
 */
static void test_tiny_ring_no_starvation(void **state)
{
    enum { FLOOD = 64 * 1024 };
    static char flood[FLOOD], got_flood[FLOOD];
    char got_small[16];
    struct sink sinks[] = {{.tag = 1, .data = got_flood, .cap = FLOOD},
                           {.tag = 2, .data = got_small, .cap = sizeof(got_small)}};
    size_t written = 0, flood_when_small_done = 0;
    int a[2], b[2];

    (void)state;
    sxe__io_uring_set_buffers(4, 64);
    sxe_loop_t *loop = open_loop();
    for (size_t i = 0; i < FLOOD; i++) {
        flood[i] = (char)(i * 13 + i / 509);
    }
    stream_pair(a);
    stream_pair(b);
    assert_int_equal(sxe__io_uring.watch(loop, a[0], 1, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(sxe__io_uring.watch(loop, b[0], 2, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(pump(loop, sinks, 2, 0), 0);
    for (unsigned turn = 0; turn < 100000 && (sinks[0].len < FLOOD || sinks[1].len < 10); turn++) {
        ssize_t put = written < FLOOD ? write(a[1], flood + written, FLOOD - written) : 0;
        written += put > 0 ? (size_t)put : 0;
        if (turn == 0) {
            assert_int_equal(write(b[1], "0123456789", 10), 10);
        }
        pump(loop, sinks, 2, 100);
        if (sinks[1].len == 10 && flood_when_small_done == 0) {
            flood_when_small_done = sinks[0].len;
        }
    }
    assert_true(flood_when_small_done < FLOOD);
    assert_int_equal(sinks[0].len, FLOOD);
    assert_memory_equal(got_flood, flood, FLOOD);
    assert_int_equal(sinks[1].len, 10);
    assert_memory_equal(got_small, "0123456789", 10);
    assert_int_equal(sinks[0].error, 0);
    assert_int_equal(sinks[1].error, 0);
    sxe__io_uring.forget(loop, a[0], true);
    sxe__io_uring.forget(loop, b[0], true);
    close(a[1]);
    close(b[1]);
    close_loop(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_receive_on_socketpair, reset),
        cmocka_unit_test_teardown(test_receive_over_tcp, reset),
        cmocka_unit_test_teardown(test_end_of_stream, reset),
        cmocka_unit_test_teardown(test_accept_three, reset),
        cmocka_unit_test_teardown(test_forget_drops_arrived_data, reset),
        cmocka_unit_test_teardown(test_fd_reuse_after_forget, reset),
        cmocka_unit_test_teardown(test_send, reset),
        cmocka_unit_test_teardown(test_a_full_send_arena_is_submitted_without_waiting, reset),
        cmocka_unit_test_teardown(test_a_one_piece_send_needs_no_arena_room, reset),
        cmocka_unit_test_teardown(test_a_full_sq_the_kernel_does_not_take_refuses_more, reset),
        cmocka_unit_test_teardown(test_send_to_closed_peer, reset),
        cmocka_unit_test_teardown(test_tiny_ring_no_starvation, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
