/*
 * The loop itself: creation and its failures, options, stop, now, and signal setup failures.
 * Connections are tested in test_conn*.c, timers in test_timer.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop.h"
#include "sxe/clock.h"
#include "sxe_test.h"
#include "sys.h"

static int reset(void **state)
{
    (void)state;
    sxe__sys_reset();
    sxe_log_set_sink(NULL, NULL);
    return 0;
}

static void test_defaults(void **state)
{
    sxe_loop_t *loop;
    struct sxe_loop_stats stats;

    (void)state;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(loop->options.connections, 1024);
    assert_int_equal(loop->options.buffers, 1024 / 4 + 16);
    assert_int_equal(loop->options.buffer_size, 16384);
    assert_int_equal(loop->options.write_limit, 4 * 16384);
    assert_int_equal(loop->options.high_water, 2 * 16384);
    assert_int_equal(loop->options.timers, 64);
    assert_int_equal(loop->options.events, 256);
    assert_int_equal(loop->options.handshake_timeout, 10 * SXE_NS_PER_SEC);
    assert_int_equal(loop->options.large_buffers, 0);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.open, 0);
    assert_int_equal(stats.buffers_in_use, 0);
    sxe_loop_destroy(loop);
    sxe_loop_destroy(NULL);

    /* Each default that follows another follows the value given, not its default. */
    assert_int_equal(sxe_loop_create(&loop, &(struct sxe_loop_options){.connections = 4000}), 0);
    assert_int_equal(loop->options.buffers, 4000 / 4 + 16);
    sxe_loop_destroy(loop);
    assert_int_equal(sxe_loop_create(&loop, &(struct sxe_loop_options){.buffer_size = 4096}), 0);
    assert_int_equal(loop->options.write_limit, 4 * 4096);
    assert_int_equal(loop->options.high_water, 2 * 4096);
    sxe_loop_destroy(loop);
    assert_int_equal(sxe_loop_create(&loop, &(struct sxe_loop_options){.write_limit = 1000}), 0);
    assert_int_equal(loop->options.high_water, 500);
    sxe_loop_destroy(loop);
}

/* The loop reads the clock once per turn and hands out that value. */
static void test_now_is_cached_per_turn(void **state)
{
    sxe_loop_t *loop;

    (void)state;
    sxe__sys_clock_fake(5 * SXE_NS_PER_SEC, 0);
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_loop_now(loop), 5 * SXE_NS_PER_SEC);
    sxe__sys_clock_advance(7);
    assert_int_equal(sxe_loop_now(loop), 5 * SXE_NS_PER_SEC);
    assert_int_equal(sxe_loop_run_once(loop, 0), 0);
    assert_int_equal(sxe_loop_now(loop), 5 * SXE_NS_PER_SEC + 7);
    sxe_loop_destroy(loop);
}

static void stop_from_timer(sxe_timer_t *timer, void *arg)
{
    (void)timer;
    sxe_loop_stop(arg);
}

/* sxe_loop_run returns after sxe_loop_stop, here from a timer 20 ms in. */
static void test_run_until_stopped(void **state)
{
    sxe_loop_t *loop;
    sxe_timer_t timer;

    (void)state;
    uint64_t start = sxe_clock_mono_ns(); /* the timer counts from the loop's "now", not later */
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    sxe_timer_init(&timer, stop_from_timer, loop);
    assert_int_equal(sxe_timer_start(loop, &timer, 20 * SXE_NS_PER_MSEC, 0), 0);
    assert_int_equal(sxe_loop_run(loop), 0);
    uint64_t took = sxe_clock_mono_ns() - start;
    assert_true(took >= 20 * SXE_NS_PER_MSEC);
    assert_true(took < SXE_NS_PER_SEC);
    sxe_loop_destroy(loop);
}

static void *run_loop(void *loop)
{
    return (void *)(intptr_t)sxe_loop_run(loop);
}

/*
 * A loop made on one thread runs on another (a server makes its workers' loops, then starts their
 * threads): io_uring's single issuer is the thread that first waits, not the one that made it.
 */
static void test_run_on_another_thread(void **state)
{
    sxe_loop_t *loop;
    sxe_timer_t timer;
    pthread_t thread;
    void *rc;

    (void)state;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    sxe_timer_init(&timer, stop_from_timer, loop);
    assert_int_equal(sxe_timer_start(loop, &timer, 10 * SXE_NS_PER_MSEC, 0), 0);
    assert_int_equal(pthread_create(&thread, NULL, run_loop, loop), 0);
    assert_int_equal(pthread_join(thread, &rc), 0);
    assert_int_equal((intptr_t)rc, 0);
    sxe_loop_destroy(loop);
}

/* Every resource creation can fail; each failure is reported and nothing leaks. */
static void test_creation_failures(void **state)
{
    struct sxe_test_capture capture;
    sxe_loop_t *loop = NULL;

    (void)state;
    sxe_test_capture_start(&capture);
    for (unsigned nth = 1; nth <= 3; nth++) {
        sxe__sys_fail(SXE_SYS_mmap, nth, 1, ENOMEM);
        assert_int_equal(sxe_loop_create(&loop, NULL), -ENOMEM);
    }
    assert_non_null(strstr(capture.text, "cannot allocate a loop for 1024 connections"));
    /* With large buffers, one mapping more: theirs, after the ordinary buffers and the scratch. */
    for (unsigned nth = 1; nth <= 4; nth++) {
        sxe__sys_fail(SXE_SYS_mmap, nth, 1, ENOMEM);
        assert_int_equal(
            sxe_loop_create(&loop, &(struct sxe_loop_options){.large_buffers = 2,
                                                              .large_buffer_size = 1 << 20}),
            -ENOMEM);
    }
    sxe__sys_reset();
    sxe__sys_fail(sxe_test_uring() ? SXE_SYS_io_uring_setup : SXE_SYS_epoll_create1, 1, 1, EMFILE);
    assert_int_equal(sxe_loop_create(&loop, NULL), -EMFILE);
    assert_non_null(strstr(capture.text, sxe_test_uring() ? "io_uring backend was asked for"
                                                          : "cannot create an epoll instance"));
    sxe_test_capture_stop();
    assert_null(loop);
}

/*
 * The backend: the program's choice wins over SXE_BACKEND; automatic falls back to epoll when
 * io_uring cannot be set up, and says so; an explicit io_uring that cannot be set up is an error;
 * an unknown SXE_BACKEND is refused.
 */
static void test_backend_choice(void **state)
{
    struct sxe_test_capture capture;
    const char *was = getenv("SXE_BACKEND");
    char saved[32] = "";
    sxe_loop_t *loop = NULL;

    (void)state;
    if (was != NULL) {
        snprintf(saved, sizeof(saved), "%s", was);
    }
    sxe_test_capture_start(&capture);
    setenv("SXE_BACKEND", "io_uring", 1);
    assert_int_equal(
        sxe_loop_create(&loop, &(struct sxe_loop_options){.backend = SXE_BACKEND_EPOLL}), 0);
    assert_string_equal(sxe_loop_backend(loop), "epoll");
    sxe_loop_destroy(loop);

    setenv("SXE_BACKEND", "kqueue", 1);
    assert_int_equal(sxe_loop_create(&loop, NULL), -EINVAL);
    assert_non_null(strstr(capture.text, "SXE_BACKEND=kqueue: expected epoll, io_uring or auto"));

    setenv("SXE_BACKEND", "auto", 1);
    sxe__sys_fail(SXE_SYS_io_uring_setup, 1, 1, ENOSYS);
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_string_equal(sxe_loop_backend(loop), "epoll");
    assert_non_null(strstr(capture.text, "io_uring cannot be set up"));
    sxe_loop_destroy(loop);

    sxe__sys_fail(SXE_SYS_io_uring_setup, 1, 1, EPERM);
    assert_int_equal(
        sxe_loop_create(&loop, &(struct sxe_loop_options){.backend = SXE_BACKEND_IO_URING}),
        -EPERM);
    assert_non_null(
        strstr(capture.text, "the io_uring backend was asked for and cannot be set up"));
    sxe_test_capture_stop();

    unsetenv("SXE_BACKEND");
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_string_equal(sxe_loop_backend(loop), "epoll"); /* the default */
    assert_int_equal(sxe_loop_options(loop)->connections, 1024);
    sxe_loop_destroy(loop);
    if (was != NULL) {
        setenv("SXE_BACKEND", saved, 1);
    }
}

/* Options that break each clause of the loop's validity check, one at a time. */
static const struct sxe_loop_options invalid_options[] = {
    {.buffer_size = 63},
    {.buffer_size = (1u << 30) + 1},
    {.write_limit = 100, .high_water = 200},
    {.buffers = 1u << 31, .buffer_size = 1024}, /* 2 TiB of buffers */
    {.events = (1u << 20) + 1},
    {.backend = (enum sxe_backend)(SXE_BACKEND_AUTO + 1)},
    {.large_buffers = 1, .buffer_size = 4096, .large_buffer_size = 4096},
    {.large_buffers = 1, .large_buffer_size = (1u << 30) + 1},
    {.large_buffers = 1u << 21, .large_buffer_size = 1u << 20}, /* 2 TiB of large buffers */
    /* More buffers in all than a buffer index can name, each kind within its byte limit. */
    {.buffers = 3000000000u,
     .buffer_size = 64,
     .large_buffers = 2000000000u,
     .large_buffer_size = 128},
};

/* Options exactly at each clause's edge, on its valid side. */
static const struct sxe_loop_options edge_options[] = {
    {.buffer_size = 64},
    {.buffer_size = 1u << 30},
    {.write_limit = 200, .high_water = 200},
    {.buffers = 1u << 30, .buffer_size = 1024}, /* 1 TiB of buffers */
    {.events = 1u << 20},
    {.large_buffers = 1, .buffer_size = 4096, .large_buffer_size = 4097},
    {.large_buffers = 1, .large_buffer_size = 1u << 30},
    {.large_buffers = 1u << 20, .large_buffer_size = 1u << 20}, /* 1 TiB of large buffers */
    {.buffers = 3000000000u,
     .buffer_size = 64,
     .large_buffers = UINT32_MAX - 3000000001u, /* in all, the most a buffer index names */
     .large_buffer_size = 128},
};

/*
 * Makes a loop with options at or past an edge. Every mmap fails meanwhile: a check that let
 * invalid options through would then fail on its buffers (-ENOMEM, no abort), before it could
 * touch gigabytes of free lists. @return what sxe_loop_create() said.
 */
static int create_unmapped(const struct sxe_loop_options *options)
{
    sxe_loop_t *loop = NULL;

    sxe__sys_fail(SXE_SYS_mmap, 1, 0, ENOMEM);
    int rc = sxe_loop_create(&loop, options);
    sxe__sys_reset();
    return rc;
}

#ifdef SXE_DEBUG
static void create_unmapped_in_child(void *arg)
{
    (void)!create_unmapped(arg);
}
#endif

/* Each invalid option is an assertion in debug builds (a death test each) and -EINVAL in release;
 * options at the edge are valid. */
static void test_invalid_options(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(invalid_options) / sizeof(invalid_options[0]); i++) {
#ifdef SXE_DEBUG
        const char *const expected[] = {"assertion failed: options_are_valid", NULL};
        sxe_test_expect_abort(create_unmapped_in_child, (void *)&invalid_options[i], expected);
#else
        assert_int_equal(create_unmapped(&invalid_options[i]), -EINVAL);
#endif
    }
    /* At each edge the options pass the check, and the loop goes on to map its buffers. */
    for (size_t i = 0; i < sizeof(edge_options) / sizeof(edge_options[0]); i++) {
        assert_int_equal(create_unmapped(&edge_options[i]), -ENOMEM);
    }
}

static void on_pipe(int signal_number)
{
    (void)signal_number;
}

/* A vanished peer must not kill the process: SIGPIPE is ignored unless the program chose. */
static void test_sigpipe_is_ignored_unless_chosen(void **state)
{
    struct sigaction action = {.sa_handler = SIG_DFL};
    sxe_loop_t *loop;

    (void)state;
    sigaction(SIGPIPE, &action, NULL);
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    sigaction(SIGPIPE, NULL, &action);
    assert_ptr_equal(action.sa_handler, SIG_IGN);
    sxe_loop_destroy(loop);

    action.sa_handler = on_pipe;
    sigaction(SIGPIPE, &action, NULL);
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    sigaction(SIGPIPE, NULL, &action);
    assert_ptr_equal(action.sa_handler, on_pipe);
    sxe_loop_destroy(loop);
}

static void test_signal_setup_failures(void **state)
{
    struct sxe_test_capture capture;
    sxe_loop_t *loop;

    (void)state;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    sxe_test_capture_start(&capture);
    sxe__sys_fail(SXE_SYS_signalfd, 1, 1, EMFILE);
    assert_int_equal(sxe_loop_stop_on_signals(loop, 0), -EMFILE);
    if (!sxe_test_uring()) { /* io_uring's watch makes no system call */
        sxe__sys_fail(SXE_SYS_epoll_ctl, 1, 1, ENOMEM);
        assert_int_equal(sxe_loop_stop_on_signals(loop, 0), -ENOMEM);
        assert_non_null(strstr(capture.text, "cannot watch the signalfd"));
    }
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "cannot create a signalfd"));
    sxe_loop_destroy(loop);

    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &signals, NULL);
}

static unsigned hangups;

static void count_hangup(void *arg)
{
    assert_ptr_equal(arg, &hangups);
    hangups++;
}

/* SIGUSR1 and SIGUSR2 are read once hooked, before or after the signalfd is made; a hook removed
 * leaves the signal logged and ignored. */
static void test_user_signals_call_their_hooks(void **state)
{
    struct sxe_test_capture capture;
    sxe_loop_t *loop;

    (void)state;
    hangups = 0;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_loop_on_signal(loop, SIGUSR2, count_hangup, &hangups), 0);
    assert_int_equal(sxe_loop_stop_on_signals(loop, 0), 0);
    assert_int_equal(sxe_loop_on_signal(loop, SIGUSR1, count_hangup, &hangups), 0);
    assert_int_equal(raise(SIGUSR1), 0);
    assert_int_equal(raise(SIGUSR2), 0);
    assert_true(sxe_loop_run_once(loop, 100 * SXE_NS_PER_MSEC) >= 0);
    assert_int_equal(hangups, 2);
    assert_int_equal(sxe_loop_on_signal(loop, SIGUSR1, NULL, NULL), 0);
    sxe_test_capture_start(&capture);
    assert_int_equal(raise(SIGUSR1), 0);
    assert_true(sxe_loop_run_once(loop, 100 * SXE_NS_PER_MSEC) >= 0);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "SIGUSR1: nothing here reopens or reloads on it"));
    assert_int_equal(hangups, 2);
    assert_false(loop->stopping);
    sxe__sys_fail(SXE_SYS_signalfd, 1, 1, ENOMEM);
    assert_int_equal(sxe_loop_on_signal(loop, SIGUSR1, count_hangup, &hangups), -ENOMEM);
    sxe__sys_reset();
    sxe_loop_destroy(loop);

    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGUSR1);
    sigaddset(&signals, SIGUSR2);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_UNBLOCK, &signals, NULL);
}

/* SIGHUP calls the program's hook, or is logged; either way the loop runs on. */
static void test_sighup_calls_the_hook_and_stops_nothing(void **state)
{
    struct sxe_test_capture capture;
    sxe_loop_t *loop;

    (void)state;
    hangups = 0;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_loop_stop_on_signals(loop, 0), 0);
    sxe_loop_on_hangup(loop, count_hangup, &hangups);
    assert_int_equal(raise(SIGHUP), 0); /* blocked: pending until the signalfd is read */
    assert_true(sxe_loop_run_once(loop, 100 * SXE_NS_PER_MSEC) >= 0);
    assert_int_equal(hangups, 1);
    assert_false(loop->stopping);
    sxe_loop_on_hangup(loop, NULL, NULL);
    sxe_test_capture_start(&capture);
    assert_int_equal(raise(SIGHUP), 0);
    assert_true(sxe_loop_run_once(loop, 100 * SXE_NS_PER_MSEC) >= 0);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "SIGHUP: nothing here reopens or reloads on it; ignored"));
    assert_int_equal(hangups, 1);
    assert_false(loop->stopping);
    assert_int_equal(raise(SIGTERM), 0); /* beside a stop signal, it is still a stop */
    assert_int_equal(raise(SIGHUP), 0);
    sxe_loop_on_hangup(loop, count_hangup, &hangups);
    assert_true(sxe_loop_run_once(loop, 100 * SXE_NS_PER_MSEC) >= 0);
    assert_int_equal(hangups, 2);
    assert_true(loop->stopping || loop->stop); /* no output to drain: stopped in the turn */
    sxe_loop_destroy(loop);

    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_UNBLOCK, &signals, NULL);
}

static unsigned hook_calls[SXE__AT_STOP_MAX + 1];

static void count_stop(void *arg)
{
    hook_calls[(uintptr_t)arg]++;
}

/*
 * Stop hooks: eight fit and a ninth is refused; removing one that was never added says so; a
 * removed hook's place takes a new one. Stopping calls each hook once, and stopping again (while
 * the loop stops, or after) calls none of them again.
 */
static void test_stop_hooks(void **state)
{
    sxe_loop_t *loop;

    (void)state;
    memset(hook_calls, 0, sizeof(hook_calls));
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    for (uintptr_t i = 0; i < SXE__AT_STOP_MAX; i++) {
        assert_int_equal(sxe_loop_at_stop(loop, count_stop, (void *)i), 0);
    }
    assert_int_equal(sxe_loop_at_stop(loop, count_stop, (void *)SXE__AT_STOP_MAX), -ENOBUFS);
    assert_int_equal(sxe_loop_at_stop(loop, NULL, (void *)SXE__AT_STOP_MAX), -ENOENT);
    assert_int_equal(sxe_loop_at_stop(loop, NULL, (void *)3), 0);
    assert_int_equal(sxe_loop_at_stop(loop, NULL, (void *)3), -ENOENT);
    assert_int_equal(sxe_loop_at_stop(loop, count_stop, (void *)SXE__AT_STOP_MAX), 0);

    sxe_loop_shutdown(loop, 0);
    sxe_loop_shutdown(loop, 0);
    assert_int_equal(sxe_loop_run(loop), 0);
    sxe_loop_shutdown(loop, 0);
    for (unsigned i = 0; i <= SXE__AT_STOP_MAX; i++) {
        assert_int_equal(hook_calls[i], i == 3 ? 0 : 1);
    }
    sxe_loop_destroy(loop);
}

/*
 * A wait that fails for good ends sxe_loop_run() with its error, and says so; on io_uring, a
 * kernel short of memory for the submission (EBUSY) is waited out, with one warning. A timer
 * stops the run 200 ms in, so a run that took the error for an interruption ends too, with 0.
 */
static void test_a_failed_wait_ends_the_run(void **state)
{
    struct sxe_test_capture capture;
    sxe_loop_t *loop;
    sxe_timer_t stop;

    (void)state;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    sxe_timer_init(&stop, stop_from_timer, loop);
    assert_int_equal(sxe_timer_start(loop, &stop, 200 * SXE_NS_PER_MSEC, 0), 0);
    sxe_test_capture_start(&capture);
    if (sxe_test_uring()) {
        sxe__sys_fail(SXE_SYS_io_uring_enter, 1, 1, EBUSY);
        assert_int_equal(sxe_loop_run_once(loop, 0), 0);
        assert_non_null(strstr(capture.text, "submitting next turn"));
        sxe__sys_fail(SXE_SYS_io_uring_enter, 1, 1, EBADF);
    } else {
        sxe__sys_fail(SXE_SYS_epoll_pwait2, 1, 1, EBADF);
        sxe__sys_fail(SXE_SYS_epoll_wait, 1, 1, EBADF);
    }
    assert_int_equal(sxe_loop_run(loop), -EBADF);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, sxe_test_uring() ? "io_uring_enter: Bad file descriptor"
                                                          : "waiting for events failed"));
    sxe_loop_destroy(loop);
}

/*
 * Each error of the wait, one at a time: on io_uring a submission the kernel cannot take now
 * (EAGAIN, EBUSY, ENOMEM) waits for the next turn, and an interruption or the timeout (EINTR,
 * ETIME) is a turn with nothing to do; on epoll only EINTR is. Anything else (EPERM, below them
 * all, included) ends the turn with that error.
 */
static void test_each_wait_error_is_waited_out_or_ends_the_turn(void **state)
{
    static const int transient_uring[] = {EAGAIN, EBUSY, ENOMEM, EINTR, ETIME};
    static const int fatal[] = {EPERM, EBADF, EINVAL, EFAULT};
    struct sxe_test_capture capture;
    sxe_loop_t *loop;

    (void)state;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    enum sxe__sys_call wait = sxe_test_uring() ? SXE_SYS_io_uring_enter : SXE_SYS_epoll_pwait2;
    sxe_test_capture_start(&capture);
    for (size_t i = 0; i < sizeof(transient_uring) / sizeof(transient_uring[0]); i++) {
        int err = transient_uring[i];
        if (!sxe_test_uring() && err != EINTR) {
            continue;
        }
        sxe__sys_fail(wait, 1, 1, err);
        assert_int_equal(sxe_loop_run_once(loop, 0), 0);
    }
    for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++) {
        sxe__sys_fail(wait, 1, 1, fatal[i]);
        if (!sxe_test_uring()) {
            sxe__sys_fail(SXE_SYS_epoll_wait, 1, 1, fatal[i]); /* where pwait2 is missing */
        }
        int rc = sxe_loop_run_once(loop, 0);
        if (rc != -fatal[i]) {
            fail_msg("errno %d: the turn returned %d", fatal[i], rc);
        }
    }
    sxe_test_capture_stop();
    sxe__sys_reset();
    sxe_loop_destroy(loop);
}

/* What ready() saw: calls, and the last fd and what. */
static struct {
    int calls, fd;
    unsigned what;
} seen;

static void fd_ready(void *arg, int fd, unsigned what)
{
    (void)arg;
    seen.calls++;
    seen.fd = fd;
    seen.what = what;
}

static int turn_and_count(sxe_loop_t *loop)
{
    seen.calls = 0;
    (void)sxe_loop_run_once(loop, 0);
    return seen.calls;
}

static void test_watched_descriptors(void **state)
{
    sxe_loop_t *loop;
    int fds[2], more[8][2];
    char byte;

    (void)state;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    assert_int_equal(sxe_loop_watch_fd(loop, fds[0], SXE_LOOP_FD_READ, fd_ready, NULL), 0);
    assert_int_equal(turn_and_count(loop), 0);
    assert_int_equal(write(fds[1], "x", 1), 1);
    assert_int_equal(turn_and_count(loop), 1);
    assert_int_equal(seen.fd, fds[0]);
    assert_int_equal(seen.what, SXE_LOOP_FD_READ);
    assert_int_equal(turn_and_count(loop), 1); /* level: until it is read */
    assert_int_equal(read(fds[0], &byte, 1), 1);
    assert_int_equal(turn_and_count(loop), 0);
    assert_int_equal(sxe_loop_watch_fd(loop, fds[1], SXE_LOOP_FD_WRITE, fd_ready, NULL), 0);
    assert_int_equal(turn_and_count(loop), 1);
    assert_int_equal(seen.what, SXE_LOOP_FD_WRITE);
    assert_int_equal(sxe_loop_watch_fd(loop, fds[1], SXE_LOOP_FD_READ, fd_ready, NULL), 0);
    assert_int_equal(turn_and_count(loop), 0); /* changed: a pipe's write end is never readable */
    assert_int_equal(sxe_loop_watch_fd(loop, fds[1], 0, NULL, NULL), 0);
    assert_int_equal(sxe_loop_watch_fd(loop, fds[1], 0, NULL, NULL), -ENOENT);
    assert_int_equal(sxe_loop_watch_fd(loop, 1000, SXE_LOOP_FD_READ, fd_ready, NULL), -EBADF);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(pipe2(more[i], O_NONBLOCK | O_CLOEXEC), 0);
        for (int end = 0; end < 2; end++) {
            int rc = sxe_loop_watch_fd(loop, more[i][end], SXE_LOOP_FD_READ, fd_ready, NULL);
            assert_int_equal(rc, i == 7 && end == 1 ? -ENOBUFS : 0); /* 15 more, and fds[0] */
        }
    }
    close(fds[1]); /* a hang-up: reported as what it waits for */
    seen.calls = 0;
    for (int turn = 0; turn < 100 && seen.calls == 0; turn++) {
        (void)sxe_loop_run_once(loop, SXE_NS_PER_MSEC);
    }
    assert_true(seen.calls >= 1);
    assert_int_equal(seen.what, SXE_LOOP_FD_READ);
    struct sxe_test_capture capture;
    sxe_test_capture_start(&capture);
    sxe_loop_destroy(loop); /* the rest forgotten, not closed, and the owner told */
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "still watched"));
    assert_int_equal(write(more[0][1], "x", 1), 1); /* still open */
    close(fds[0]);
    for (int i = 0; i < 8; i++) {
        close(more[i][0]);
        close(more[i][1]);
    }
}

static void invalid_watch(void)
{
    sxe_loop_t *loop;

    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_loop_watch_fd(loop, 0, SXE_LOOP_FD_READ, NULL, NULL), -EINVAL);
    sxe_loop_destroy(loop);
}

static void test_invalid_watches(void **state)
{
    static const struct sxe_test_invalid_use uses[] = {
        {"a watch without ready", invalid_watch, "ready != NULL"},
    };

    (void)state;
    sxe_test_invalid_uses(uses, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_defaults, reset),
        cmocka_unit_test_teardown(test_now_is_cached_per_turn, reset),
        cmocka_unit_test_teardown(test_run_until_stopped, reset),
        cmocka_unit_test_teardown(test_creation_failures, reset),
        cmocka_unit_test_teardown(test_invalid_options, reset),
        cmocka_unit_test_teardown(test_backend_choice, reset),
        cmocka_unit_test_teardown(test_run_on_another_thread, reset),
        cmocka_unit_test_teardown(test_sigpipe_is_ignored_unless_chosen, reset),
        cmocka_unit_test_teardown(test_signal_setup_failures, reset),
        cmocka_unit_test_teardown(test_sighup_calls_the_hook_and_stops_nothing, reset),
        cmocka_unit_test_teardown(test_user_signals_call_their_hooks, reset),
        cmocka_unit_test_teardown(test_stop_hooks, reset),
        cmocka_unit_test_teardown(test_a_failed_wait_ends_the_run, reset),
        cmocka_unit_test_teardown(test_each_wait_error_is_waited_out_or_ends_the_turn, reset),
        cmocka_unit_test_teardown(test_watched_descriptors, reset),
        cmocka_unit_test_teardown(test_invalid_watches, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
