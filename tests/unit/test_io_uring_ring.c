/*
 * The io_uring backend's polls and ring: level and edge polls, modifying them, descriptors past
 * the table, deadlines as the wait's timeout, and the failures of setup, submission (EAGAIN) and
 * completions. Harness: io_uring_test.h; where the kernel has no io_uring, the tests are skipped.
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

/* Level-triggered: an unread pipe is reported at every wait, and no more once read. */
static void test_level_in(void **state)
{
    sxe_loop_t *loop = open_loop();
    struct sxe__io_event events[EVENTS_MAX];
    char byte;
    int pipe_fds[2];

    (void)state;
    assert_int_equal(pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC), 0);
    assert_int_equal(sxe__io_uring.watch(loop, pipe_fds[0], 4, SXE__IO_IN), 0);
    assert_int_equal(wait_ms(loop, 0, events, EVENTS_MAX), 0);
    assert_int_equal(write(pipe_fds[1], "!", 1), 1);
    for (int turn = 0; turn < 3; turn++) {
        assert_int_equal(wait_ms(loop, 1000, events, EVENTS_MAX), 1);
        assert_int_equal(events[0].tag, 4);
        assert_int_equal(events[0].events, SXE__IO_IN);
        assert_int_equal(events[0].result, 0);
    }
    assert_int_equal(read(pipe_fds[0], &byte, 1), 1);
    assert_int_equal(wait_ms(loop, 20, events, EVENTS_MAX), 0);
    sxe__io_uring.forget(loop, pipe_fds[0], true);
    close(pipe_fds[1]);
    close_loop(loop);
}

/* Edge-triggered output: reported when armed on a writable socket, then only when room returns. */
static void test_edge_out(void **state)
{
    sxe_loop_t *loop = open_loop();
    struct sxe__io_event events[EVENTS_MAX];
    static char chunk[65536];
    int fds[2];

    (void)state;
    stream_pair(fds);
    assert_int_equal(sxe__io_uring.watch(loop, fds[0], 8, SXE__IO_OUT | SXE__IO_EDGE), 0);
    assert_int_equal(wait_ms(loop, 1000, events, EVENTS_MAX), 1);
    assert_int_equal(events[0].tag, 8);
    assert_int_equal(events[0].events, SXE__IO_OUT);
    assert_int_equal(wait_ms(loop, 20, events, EVENTS_MAX), 0);
    while (write(fds[0], chunk, sizeof(chunk)) > 0) {
    }
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(wait_ms(loop, 20, events, EVENTS_MAX), 0);
    while (read(fds[1], chunk, sizeof(chunk)) > 0) {
    }
    int filled = wait_ms(loop, 1000, events, EVENTS_MAX);
    assert_true(filled >= 1);
    for (int i = 0; i < filled; i++) {
        assert_int_equal(events[i].events, SXE__IO_OUT);
    }
    assert_int_equal(wait_ms(loop, 20, events, EVENTS_MAX), 0);
    sxe__io_uring.forget(loop, fds[0], true);
    close(fds[1]);
    close_loop(loop);
}

/* Pausing cancels the receive, so bytes stay in the socket; a pause and resume in one turn too. */
static void test_modify(void **state)
{
    sxe_loop_t *loop = open_loop();
    char got[16];
    struct sink sink = {.tag = 2, .data = got, .cap = sizeof(got)};
    int fds[2];

    (void)state;
    stream_pair(fds);
    assert_int_equal(sxe__io_uring.watch(loop, fds[0], 1, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(pump(loop, &sink, 1, 0), 0);
    assert_int_equal(sxe__io_uring.watch(loop, fds[0], 1, SXE__IO_MODIFY), 0);
    assert_int_equal(pump(loop, &sink, 1, 0), 0);
    assert_int_equal(write(fds[1], "abc", 3), 3);
    assert_int_equal(pump(loop, &sink, 1, 50), 0);
    assert_int_equal(
        sxe__io_uring.watch(loop, fds[0], 2, SXE__IO_IN | SXE__IO_RECV | SXE__IO_MODIFY), 0);
    pump_until(loop, &sink, 3);
    assert_memory_equal(got, "abc", 3);

    assert_int_equal(sxe__io_uring.watch(loop, fds[0], 2, SXE__IO_MODIFY), 0);
    assert_int_equal(
        sxe__io_uring.watch(loop, fds[0], 2, SXE__IO_IN | SXE__IO_RECV | SXE__IO_MODIFY), 0);
    assert_int_equal(write(fds[1], "defg", 4), 4);
    pump_until(loop, &sink, 7);
    assert_memory_equal(got, "abcdefg", 7);
    assert_int_equal(write(fds[1], "h", 1), 1);
    pump_until(loop, &sink, 8);
    assert_int_equal(pump(loop, &sink, 1, 20), 0);
    assert_memory_equal(got, "abcdefgh", 8);
    sxe__io_uring.forget(loop, fds[0], true);
    close(fds[1]);
    close_loop(loop);
}

/* A poll cancelled because nothing is watched any more completes with -ECANCELED: that is no
 * event, and the poll armed again afterwards reports as any does. */
static void test_a_cancelled_poll_is_not_reported(void **state)
{
    sxe_loop_t *loop = open_loop();
    struct sxe__io_event events[EVENTS_MAX];
    int pipe_fds[2];

    (void)state;
    assert_int_equal(pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC), 0);
    assert_int_equal(sxe__io_uring.watch(loop, pipe_fds[0], 4, SXE__IO_IN), 0);
    assert_int_equal(wait_ms(loop, 0, events, EVENTS_MAX), 0); /* armed */
    assert_int_equal(sxe__io_uring.watch(loop, pipe_fds[0], 4, SXE__IO_MODIFY), 0);
    assert_int_equal(wait_ms(loop, 50, events, EVENTS_MAX), 0); /* its cancel completes */
    assert_int_equal(write(pipe_fds[1], "!", 1), 1);
    assert_int_equal(wait_ms(loop, 50, events, EVENTS_MAX), 0); /* not watched */
    assert_int_equal(sxe__io_uring.watch(loop, pipe_fds[0], 5, SXE__IO_IN | SXE__IO_MODIFY), 0);
    assert_int_equal(wait_ms(loop, 1000, events, EVENTS_MAX), 1);
    assert_int_equal(events[0].tag, 5);
    assert_int_equal(events[0].events, SXE__IO_IN);
    sxe__io_uring.forget(loop, pipe_fds[0], true);
    close(pipe_fds[1]);
    close_loop(loop);
}

/* Two sends on one fd at once: the second is invalid use (-EBUSY in release builds). */
static void send_twice_at_once(void *arg)
{
    sxe_loop_t *loop = arg;
    char x[] = "x";
    struct iovec one = {.iov_base = x, .iov_len = 1};
    int fds[2];

    stream_pair(fds);
    assert_int_equal(sxe__io_uring.send(loop, fds[0], 1, &one, 1, MSG_NOSIGNAL), SXE__IO_PENDING);
    assert_int_equal(sxe__io_uring.send(loop, fds[0], 1, &one, 1, MSG_NOSIGNAL), -EBUSY);
}

static void test_fd_past_table(void **state)
{
    sxe_loop_t *loop = open_loop();
    char x[] = "x";
    struct iovec one = {.iov_base = x, .iov_len = 1};

    (void)state;
    assert_int_equal(sxe__io_uring.watch(loop, 1 << 20, 1, SXE__IO_IN), -EMFILE);
    assert_int_equal(sxe__io_uring.watch(loop, -1, 1, SXE__IO_IN), -EBADF); /* before the table */
    assert_int_equal(sxe__io_uring.send(loop, 1 << 20, 1, &one, 1, 0), -EMFILE);
#ifdef SXE_DEBUG
    const char *const expected[] = {"OP_BIT(OP_SEND)) == 0", NULL};
    sxe_test_expect_abort(send_twice_at_once, loop, expected);
#else
    send_twice_at_once(loop);
#endif
    close_loop(loop);
}

/* What the last io_uring_enter was asked to wait for. */
static struct {
    unsigned min_complete;
    unsigned flags;
    bool has_timeout;
    struct __kernel_timespec timeout;
} entered;

static int (*real_enter)(int fd, unsigned to_submit, unsigned min_complete, unsigned flags,
                         void *arg, size_t size);

static int enter_recording(int fd, unsigned to_submit, unsigned min_complete, unsigned flags,
                           void *arg, size_t size)
{
    const struct io_uring_getevents_arg *getevents = arg;

    entered.min_complete = min_complete;
    entered.flags = flags;
    entered.has_timeout = getevents != NULL && getevents->ts != 0;
    if (entered.has_timeout) {
        entered.timeout = *(const struct __kernel_timespec *)(uintptr_t)getevents->ts;
    }
    return real_enter(fd, to_submit, min_complete, flags, arg, size);
}

/*
 * A deadline becomes the relative timeout of one io_uring_enter, to the nanosecond. The loop's now
 * is a made-up one: the backend takes time from the loop and never reads the clock itself.
 */
static void test_deadline_is_the_timeout(void **state)
{
    sxe_loop_t *loop = open_loop();
    struct sxe__io_event events[EVENTS_MAX];
    int fds[2];

    (void)state;
    real_enter = sxe__sys.io_uring_enter;
    sxe__sys.io_uring_enter = enter_recording;
    loop->now = 1000 * SXE_NS_PER_SEC;

    /* Due now or already past: no waiting, only the deferred work. */
    assert_int_equal(sxe__io_uring.wait(loop, loop->now, events, EVENTS_MAX), 0);
    assert_int_equal(entered.flags, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG);
    assert_int_equal(entered.min_complete, 0);
    assert_false(entered.has_timeout);
    assert_int_equal(sxe__io_uring.wait(loop, loop->now - 1, events, EVENTS_MAX), 0);
    assert_int_equal(entered.min_complete, 0);
    assert_false(entered.has_timeout);

    assert_int_equal(sxe__io_uring.wait(loop, loop->now + SXE_NS_PER_MSEC + 7, events, EVENTS_MAX),
                     0);
    assert_int_equal(entered.flags, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG);
    assert_int_equal(entered.min_complete, 1);
    assert_true(entered.has_timeout);
    assert_int_equal(entered.timeout.tv_sec, 0);
    assert_int_equal(entered.timeout.tv_nsec, SXE_NS_PER_MSEC + 7);

    /* No deadline: a wait without a timeout, which the bytes already sent end at once. */
    stream_pair(fds);
    assert_int_equal(sxe__io_uring.watch(loop, fds[0], 1, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(write(fds[1], "x", 1), 1);
    assert_int_equal(sxe__io_uring.wait(loop, UINT64_MAX, events, EVENTS_MAX), 1);
    assert_int_equal(entered.min_complete, 1);
    assert_false(entered.has_timeout);
    assert_int_equal(events[0].result, 1);
    sxe__io_uring.forget(loop, fds[0], true);
    close(fds[1]);
    close_loop(loop);
}

/*
 * The kernel keeps the timeout it is given. This one reads the real clock on purpose: what it
 * measures is how long io_uring_enter really blocked, which no fake clock can stand in for (the
 * arguments themselves are checked exactly, under a made-up now, by the test above).
 */
static void test_deadlines(void **state)
{
    sxe_loop_t *loop = open_loop();
    struct sxe__io_event events[EVENTS_MAX];

    (void)state;
    uint64_t start = loop->now = sxe_clock_mono_ns();
    assert_int_equal(sxe__io_uring.wait(loop, loop->now, events, EVENTS_MAX), 0);
    uint64_t took = sxe_clock_mono_ns() - start;
    assert_true(took < 10 * SXE_NS_PER_MSEC);

    start = loop->now = sxe_clock_mono_ns();
    assert_int_equal(sxe__io_uring.wait(loop, loop->now + 20 * SXE_NS_PER_MSEC, events, EVENTS_MAX),
                     0);
    took = sxe_clock_mono_ns() - start;
    assert_true(took >= 20 * SXE_NS_PER_MSEC);
    assert_true(took < 1000 * SXE_NS_PER_MSEC);
    close_loop(loop);
}

static void test_setup_fails(void **state)
{
    static const int errs[] = {ENOSYS, EPERM};

    (void)state;
    for (unsigned i = 0; i < 2; i++) {
        sxe_loop_t *loop = bare_loop();
        sxe__sys_fail(SXE_SYS_io_uring_setup, 1, 1, errs[i]);
        assert_int_equal(sxe__io_uring.open(loop), -errs[i]);
        assert_null(loop->io_state);
        sxe__io_uring.close(loop);
        free(loop);
    }
}

static int (*real_setup)(unsigned entries, struct io_uring_params *params);

static int setup_without_ext_arg(unsigned entries, struct io_uring_params *params)
{
    int fd = real_setup(entries, params);

    params->features &= ~IORING_FEAT_EXT_ARG;
    return fd;
}

/* The ring moved to descriptor 0, as it is in a program that closed its standard input. */
static int setup_on_descriptor_0(unsigned entries, struct io_uring_params *params)
{
    int fd = real_setup(entries, params);

    if (fd > 0) {
        assert_int_equal(dup2(fd, 0), 0);
        close(fd);
        fd = 0;
    }
    return fd;
}

/* A ring on descriptor 0 is a ring like any other: it opens, and a poll through it is reported. */
static void test_a_ring_on_descriptor_0(void **state)
{
    struct sxe__io_event events[EVENTS_MAX];
    int pipe_fds[2];
    int input = dup(0);

    (void)state;
    assert_true(input > 0);
    real_setup = sxe__sys.io_uring_setup;
    sxe__sys.io_uring_setup = setup_on_descriptor_0;
    sxe_loop_t *loop = open_loop();
    sxe__sys_reset();
    assert_int_equal(pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC), 0);
    assert_int_equal(sxe__io_uring.watch(loop, pipe_fds[0], 4, SXE__IO_IN), 0);
    assert_int_equal(write(pipe_fds[1], "!", 1), 1);
    assert_int_equal(wait_ms(loop, 1000, events, EVENTS_MAX), 1);
    assert_int_equal(events[0].tag, 4);
    sxe__io_uring.forget(loop, pipe_fds[0], true);
    close(pipe_fds[1]);
    close_loop(loop);
    assert_int_equal(dup2(input, 0), 0); /* standard input back */
    close(input);
}

/* Each failure after io_uring_setup is reported, leaves no fd open, and the next open works. */
static void test_later_setup_failures(void **state)
{
    (void)state;
    close_loop(open_loop());
    unsigned fds = sxe_test_open_fds();
    for (unsigned nth = 1; nth <= 5; nth++) {
        sxe_loop_t *loop = bare_loop();
        sxe__sys_fail(SXE_SYS_mmap, nth, 1, ENOMEM);
        assert_int_equal(sxe__io_uring.open(loop), -ENOMEM);
        assert_null(loop->io_state);
        assert_int_equal(sxe_test_open_fds(), fds);
        free(loop);
        sxe__sys_reset();
    }
    sxe_loop_t *loop = bare_loop();
    sxe__sys_fail(SXE_SYS_io_uring_register, 1, 1, EINVAL);
    assert_int_equal(sxe__io_uring.open(loop), -EINVAL);
    assert_int_equal(sxe_test_open_fds(), fds);
    sxe__sys_reset();
    real_setup = sxe__sys.io_uring_setup;
    sxe__sys.io_uring_setup = setup_without_ext_arg;
    assert_int_equal(sxe__io_uring.open(loop), -ENOSYS);
    assert_int_equal(sxe_test_open_fds(), fds);
    sxe__sys_reset();
    free(loop);
    close_loop(open_loop());
}

/* A submission the kernel refuses for now stays queued: the bytes come with the next wait. */
static void test_enter_eagain_loses_nothing(void **state)
{
    sxe_loop_t *loop = open_loop();
    struct sxe__io_event events[EVENTS_MAX];
    int fds[2];

    (void)state;
    stream_pair(fds);
    assert_int_equal(sxe__io_uring.watch(loop, fds[0], 1, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(write(fds[1], "data", 4), 4);
    sxe__sys_fail(SXE_SYS_io_uring_enter, 1, 1, EAGAIN);
    assert_int_equal(wait_ms(loop, 100, events, EVENTS_MAX), 0);
    assert_int_equal(sxe__sys_calls(SXE_SYS_io_uring_enter), 1);
    assert_int_equal(wait_ms(loop, 1000, events, EVENTS_MAX), 1);
    assert_int_equal(events[0].result, 4);
    assert_memory_equal(events[0].data, "data", 4);

    sxe__sys_fail(SXE_SYS_io_uring_enter, 1, 1, EBADF);
    assert_int_equal(wait_ms(loop, 0, events, EVENTS_MAX), -EBADF);
    sxe__io_uring.forget(loop, fds[0], true);
    close(fds[1]);
    close_loop(loop);
}

/* A completion failed by the seam carries its errno; the receive goes on. */
static void test_failed_completion(void **state)
{
    sxe_loop_t *loop = open_loop();
    struct sxe__io_event events[EVENTS_MAX];
    int fds[2];

    (void)state;
    stream_pair(fds);
    assert_int_equal(sxe__io_uring.watch(loop, fds[0], 1, SXE__IO_IN | SXE__IO_RECV), 0);
    assert_int_equal(write(fds[1], "x", 1), 1);
    sxe__sys_fail(SXE_SYS_io_uring_result, 1, 1, ECONNRESET);
    assert_int_equal(wait_ms(loop, 1000, events, EVENTS_MAX), 1);
    assert_int_equal(events[0].tag, 1);
    assert_int_equal(events[0].events, SXE__IO_IN | SXE__IO_RECV);
    assert_int_equal(events[0].result, -ECONNRESET);
    assert_null(events[0].data);
    assert_int_equal(write(fds[1], "y", 1), 1);
    assert_int_equal(wait_ms(loop, 1000, events, EVENTS_MAX), 1);
    assert_int_equal(events[0].result, 1);
    assert_memory_equal(events[0].data, "y", 1);
    sxe__io_uring.forget(loop, fds[0], true);
    close(fds[1]);
    close_loop(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_level_in, reset),
        cmocka_unit_test_teardown(test_edge_out, reset),
        cmocka_unit_test_teardown(test_modify, reset),
        cmocka_unit_test_teardown(test_a_cancelled_poll_is_not_reported, reset),
        cmocka_unit_test_teardown(test_fd_past_table, reset),
        cmocka_unit_test_teardown(test_deadline_is_the_timeout, reset),
        cmocka_unit_test_teardown(test_deadlines, reset),
        cmocka_unit_test_teardown(test_setup_fails, reset),
        cmocka_unit_test_teardown(test_a_ring_on_descriptor_0, reset),
        cmocka_unit_test_teardown(test_later_setup_failures, reset),
        cmocka_unit_test_teardown(test_enter_eagain_loses_nothing, reset),
        cmocka_unit_test_teardown(test_failed_completion, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
