/*
 * Fibers: running to the end or to the first wait; sleeping and yielding while the loop runs,
 * under fake time; waking with a value; fibers starting fibers; a full pool; deep stacks; a stack
 * overflow stopped by the guard page, with its message; the pool's system calls failing; invalid
 * use.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe/fiber.h"
#include "sxe/timer.h"
#include "sxe_test.h"
#include "sys.h"

/* A string as a fiber's argument (string literals are const here). */
#define TEXT(s) ((void *)(uintptr_t)(s))

static sxe_loop_t *loop;
static sxe_fibers_t *fibers;
static char trace[256]; /* what the fibers did, in order */

static void note(const char *what)
{
    strncat(trace, what, sizeof(trace) - strlen(trace) - 1);
}

static int setup(void **state)
{
    struct sxe_loop_options options = {.connections = 4, .timers = 16};
    struct sxe_fibers_options fiber_options = {.count = 4, .stack_size = 32768};

    (void)state;
    trace[0] = '\0';
    sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, 0);
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    assert_int_equal(sxe_fibers_create(&fibers, loop, &fiber_options), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_fibers_destroy(fibers);
    sxe_loop_destroy(loop);
    sxe__sys_reset();
    return 0;
}

/* Advances fake time by ns and runs one turn without waiting. */
static void advance(uint64_t ns)
{
    sxe__sys_clock_advance(ns);
    assert_true(sxe_loop_run_once(loop, 0) >= 0);
}

static void straight(void *arg)
{
    assert_ptr_not_equal(sxe_fiber_self(), NULL);
    note(arg);
}

static void test_a_fiber_runs_at_once_to_its_end(void **state)
{
    struct sxe_fibers_stats stats;
    sxe_fiber_t *fiber = NULL;

    (void)state;
    assert_ptr_equal(sxe_fiber_self(), NULL);
    for (int i = 0; i < 10; i++) { /* more than the pool holds: each ends and frees its fiber */
        assert_int_equal(sxe_fiber_start(fibers, straight, TEXT("a"), &fiber), 0);
    }
    assert_ptr_not_equal(fiber, NULL);
    assert_ptr_equal(sxe_fiber_self(), NULL);
    assert_string_equal(trace, "aaaaaaaaaa");
    sxe_fibers_stats(fibers, &stats);
    assert_int_equal(stats.started, 10);
    assert_int_equal(stats.finished, 10);
    assert_int_equal(stats.live, 0);
    assert_int_equal(stats.most_live, 1);
    assert_int_equal(stats.switches, 20);
}

static void sleeper(void *arg)
{
    const char *name = arg;
    uint64_t ms = (uint64_t)(name[0] - '0');

    for (int i = 0; i < 3; i++) {
        note(name);
        assert_int_equal(sxe_fiber_sleep(ms * SXE_NS_PER_MSEC), 0);
    }
    note("!");
}

static void test_sleeping_fibers_interleave_while_the_loop_runs(void **state)
{
    (void)state;
    assert_int_equal(sxe_fiber_start(fibers, sleeper, TEXT("2"), NULL), 0);
    assert_int_equal(sxe_fiber_start(fibers, sleeper, TEXT("3"), NULL), 0);
    assert_string_equal(trace, "23");
    advance(1 * SXE_NS_PER_MSEC); /* 1 ms: neither is due */
    assert_string_equal(trace, "23");
    advance(1 * SXE_NS_PER_MSEC); /* 2 ms: the first wakes */
    assert_string_equal(trace, "232");
    advance(1 * SXE_NS_PER_MSEC); /* 3 ms */
    assert_string_equal(trace, "2323");
    advance(1 * SXE_NS_PER_MSEC); /* 4 ms */
    assert_string_equal(trace, "23232");
    advance(2 * SXE_NS_PER_MSEC); /* 6 ms: the first ends, the second's third sleep starts */
    assert_int_equal(strlen(trace), 7);
    assert_non_null(strchr(trace + 5, '3'));
    assert_non_null(strchr(trace + 5, '!'));
    advance(2 * SXE_NS_PER_MSEC); /* 8 ms */
    assert_int_equal(strlen(trace), 7);
    advance(1 * SXE_NS_PER_MSEC); /* 9 ms: the second ends */
    assert_string_equal(trace + 7, "!");
    struct sxe_fibers_stats stats;
    sxe_fibers_stats(fibers, &stats);
    assert_int_equal(stats.live, 0);
    assert_int_equal(stats.most_live, 2);
}

static unsigned ticks;

static void tick(sxe_timer_t *timer, void *arg)
{
    (void)timer;
    (void)arg;
    ticks++;
}

static void yielder(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++) {
        note("y");
        assert_int_equal(sxe_fiber_yield(), 0);
    }
}

static void test_a_yield_lets_one_turn_run(void **state)
{
    sxe_timer_t timer;

    (void)state;
    ticks = 0;
    sxe_timer_init(&timer, tick, NULL);
    assert_int_equal(sxe_timer_start(loop, &timer, 1, 1), 0);
    assert_int_equal(sxe_fiber_start(fibers, yielder, NULL, NULL), 0);
    assert_string_equal(trace, "y");
    for (int turn = 1; turn <= 3; turn++) {
        advance(1);
        assert_int_equal(ticks, turn);
        assert_int_equal(strlen(trace), turn < 3 ? turn + 1 : 3);
    }
    sxe_timer_stop(loop, &timer);
    struct sxe_fibers_stats stats;
    sxe_fibers_stats(fibers, &stats);
    assert_int_equal(stats.finished, 1);
}

static void waiter(void *arg)
{
    int *got = arg;

    note("w");
    *got = sxe_fiber_wait();
    note("W");
    *got += sxe_fiber_wait();
    note("E");
}

static void test_wait_returns_what_wake_gives(void **state)
{
    sxe_fiber_t *fiber;
    int got = 0;

    (void)state;
    assert_int_equal(sxe_fiber_start(fibers, waiter, &got, &fiber), 0);
    assert_string_equal(trace, "w");
    assert_int_equal(sxe_fiber_wake(fiber, 40), 0);
    assert_int_equal(got, 40);
    assert_string_equal(trace, "wW");
    assert_int_equal(sxe_fiber_wake(fiber, 2), 0);
    assert_int_equal(got, 42);
    assert_string_equal(trace, "wWE");
}

static sxe_fiber_t *inner;

static void inner_body(void *arg)
{
    (void)arg;
    note("i");
    (void)sxe_fiber_wait();
    note("I");
}

static void outer_body(void *arg)
{
    (void)arg;
    note("o");
    sxe_fiber_t *self = sxe_fiber_self();
    assert_int_equal(sxe_fiber_start(fibers, inner_body, NULL, &inner), 0);
    assert_ptr_equal(sxe_fiber_self(), self); /* back in the outer fiber once the inner waits */
    note("O");
    assert_int_equal(sxe_fiber_wake(inner, 0), 0); /* a fiber wakes a fiber */
    note("x");
}

static void test_fibers_start_and_wake_fibers(void **state)
{
    (void)state;
    assert_int_equal(sxe_fiber_start(fibers, outer_body, NULL, NULL), 0);
    assert_string_equal(trace, "oiOIx");
    assert_ptr_equal(sxe_fiber_self(), NULL);
}

static void test_a_full_pool_refuses_and_recovers(void **state)
{
    sxe_fiber_t *held[4];
    int got[4] = {0};
    struct sxe_fibers_stats stats;

    (void)state;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sxe_fiber_start(fibers, waiter, &got[i], &held[i]), 0);
    }
    assert_int_equal(sxe_fiber_start(fibers, straight, TEXT("s"), NULL), -ENOBUFS);
    sxe_fibers_stats(fibers, &stats);
    assert_int_equal(stats.no_fiber, 1);
    assert_int_equal(stats.live, 4);
    assert_int_equal(sxe_fiber_wake(held[2], 1), 0);
    assert_int_equal(sxe_fiber_wake(held[2], 1), 0); /* ended: its fiber is free again */
    assert_int_equal(sxe_fiber_start(fibers, straight, TEXT("s"), NULL), 0);
    for (int i = 0; i < 4; i++) {
        if (i != 2) {
            assert_int_equal(sxe_fiber_wake(held[i], 0), 0);
            assert_int_equal(sxe_fiber_wake(held[i], 0), 0);
        }
    }
    sxe_fibers_stats(fibers, &stats);
    assert_int_equal(stats.live, 0);
}

/* Uses about depth KB of stack, and checks every byte of it on the way back. */
static unsigned deep(unsigned depth)
{
    volatile unsigned char frame[1000];
    unsigned sum = 0;

    for (unsigned i = 0; i < sizeof(frame); i++) {
        frame[i] = (unsigned char)(depth + i);
    }
    if (depth > 0) {
        sum = deep(depth - 1);
    }
    for (unsigned i = 0; i < sizeof(frame); i++) {
        assert_int_equal(frame[i], (unsigned char)(depth + i));
        sum += frame[i];
    }
    return sum;
}

static void deep_body(void *arg)
{
    unsigned *depth = arg;
    unsigned expected = deep(*depth);

    (void)sxe_fiber_yield(); /* the stack stays intact while the fiber is switched out */
    assert_int_equal(deep(*depth), expected);
    note("d");
}

static void test_a_fiber_may_use_most_of_its_stack(void **state)
{
    unsigned depth = 20; /* about 20 KB of a 32 KB stack, less under sanitizers' bigger frames */

    (void)state;
    assert_int_equal(sxe_fiber_start(fibers, deep_body, &depth, NULL), 0);
    assert_int_equal(sxe_fiber_start(fibers, deep_body, &depth, NULL), 0);
    advance(1);
    assert_string_equal(trace, "dd");
}

/* The defaults the header shows: 256 fibers at once, each with stack for about 40 KB of frames
 * (64 KB, less what sanitizers' bigger frames take). */
static void test_the_default_pool(void **state)
{
    enum { DEFAULT_COUNT = 256 };
    sxe_fibers_t *pool;
    sxe_fiber_t *held[DEFAULT_COUNT];
    int got[DEFAULT_COUNT] = {0};
    unsigned depth = 40;

    (void)state;
    assert_int_equal(sxe_fibers_create(&pool, loop, NULL), 0);
    for (int i = 0; i < DEFAULT_COUNT; i++) {
        assert_int_equal(sxe_fiber_start(pool, waiter, &got[i], &held[i]), 0);
    }
    assert_int_equal(sxe_fiber_start(pool, straight, TEXT("s"), NULL), -ENOBUFS);
    for (int i = 0; i < DEFAULT_COUNT; i++) {
        assert_int_equal(sxe_fiber_wake(held[i], 0), 0);
        assert_int_equal(sxe_fiber_wake(held[i], 0), 0);
    }
    assert_int_equal(got[DEFAULT_COUNT - 1], 0);
    trace[0] = '\0';
    assert_int_equal(sxe_fiber_start(pool, deep_body, &depth, NULL), 0);
    advance(1);
    assert_string_equal(trace, "d");
    sxe_fibers_destroy(pool);
}

static volatile unsigned endless_limit = UINT32_MAX;

static unsigned __attribute__((noinline)) endless(unsigned depth)
{
    volatile char frame[512];

    frame[0] = (char)depth;
    if (depth == endless_limit) { /* never: the stack overflows long before */
        return 0;
    }
    return endless(depth + 1) + (unsigned)frame[0];
}

static void overflow_body(void *arg)
{
    (void)arg;
    (void)endless(0);
}

static void test_a_stack_overflow_stops_the_process_with_a_message(void **state)
{
    int channel[2];
    char said[4096] = "";
    int status;

    (void)state;
    assert_int_equal(pipe(channel), 0);
    pid_t child = fork();
    if (child == 0) {
        /* Not cmocka's handler (it would go on with the next test in this child): the default,
         * under a new pool's. */
        sxe_fibers_t *own;
        signal(SIGSEGV, SIG_DFL);
        dup2(channel[1], STDERR_FILENO);
        if (sxe_fibers_create(&own, loop, NULL) == 0 &&
            sxe_fiber_start(own, overflow_body, NULL, NULL) == 0) {
            sxe_test_exit(0); /* not reached */
        }
        sxe_test_exit(3);
    }
    close(channel[1]);
    size_t len = 0;
    for (ssize_t got; (got = read(channel[0], said + len, sizeof(said) - 1 - len)) > 0;) {
        len += (size_t)got;
    }
    said[len] = '\0';
    close(channel[0]);
    assert_int_equal(waitpid(child, &status, 0), child);
    /* The default action (a core dump), or a sanitizer's report and exit. */
    assert_true((WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) ||
                (WIFEXITED(status) && WEXITSTATUS(status) != 0));
    assert_non_null(strstr(said, "sxe: a fiber overflowed its stack"));
}

static unsigned __attribute__((noinline)) descend(unsigned depth)
{
    volatile char frame[1024];

    frame[0] = (char)depth;
    return depth == 0 ? (unsigned)frame[0] : descend(depth - 1) + (unsigned)frame[0];
}

/* Closes a page of its own stack two pages below where it runs (not a guard page), then runs
 * into it. */
static void fault_in_the_stack_body(void *arg)
{
    volatile char here = 0;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t below = ((uintptr_t)&here & ~(page - 1)) - 2 * page;

    (void)arg;
    assert_int_equal(mprotect((void *)below, page, PROT_NONE), 0);
    (void)descend(16 + (unsigned)here);
}

/*
 * A fault in a fiber's stack that is not in its guard page is not called an overflow: the process
 * ends as it would without sxe, and says nothing of stacks.
 */
static void test_a_fault_outside_the_guard_pages_is_not_an_overflow(void **state)
{
    int channel[2];
    char said[4096] = "";
    int status;

    (void)state;
    assert_int_equal(pipe(channel), 0);
    pid_t child = fork();
    if (child == 0) {
        sxe_fibers_t *own;
        signal(SIGSEGV, SIG_DFL);
        dup2(channel[1], STDERR_FILENO);
        if (sxe_fibers_create(&own, loop, NULL) == 0 &&
            sxe_fiber_start(own, fault_in_the_stack_body, NULL, NULL) == 0) {
            sxe_test_exit(0); /* not reached */
        }
        sxe_test_exit(3);
    }
    close(channel[1]);
    size_t len = 0;
    for (ssize_t got; (got = read(channel[0], said + len, sizeof(said) - 1 - len)) > 0;) {
        len += (size_t)got;
    }
    said[len] = '\0';
    close(channel[0]);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true((WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) ||
                (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 3));
    assert_null(strstr(said, "overflowed its stack"));
}

/* madvise() through the seam, counting MADV_POPULATE_WRITE calls that failed for a reason other
 * than a kernel without it (EINVAL), and the bytes they were asked to fault in. */
static unsigned populate_failures;
static size_t populate_bytes;

static int madvise_counting_failures(void *addr, size_t len, int advice)
{
    int rc = madvise(addr, len, advice);
    if (rc < 0 && advice == MADV_POPULATE_WRITE && errno != EINVAL) {
        populate_failures++;
    }
    populate_bytes += advice == MADV_POPULATE_WRITE ? len : 0;
    return rc;
}

static void test_pool_creation_faults(void **state)
{
    sxe_fibers_t *other = NULL;
    struct sxe_fibers_options options = {.count = 8, .stack_size = 5000};

    (void)state;
    /* Each stack is faulted in with one call, on its own pages. */
    sxe__sys.madvise = madvise_counting_failures;
    assert_int_equal(sxe_fibers_create(&other, loop, &options), 0);
    assert_int_equal(populate_failures, 0);
    assert_int_equal(populate_bytes, 8 * 8192); /* every stack whole (5000 bytes: two pages) */
    sxe_fibers_destroy(other);
    sxe__sys_reset();
    sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, 0);

    sxe__sys_fail(SXE_SYS_mmap, 1, 1, ENOMEM);
    assert_int_equal(sxe_fibers_create(&other, loop, &options), -ENOMEM);
    sxe__sys_fail(SXE_SYS_mprotect, 3, 1, ENOMEM); /* past vm.max_map_count */
    assert_int_equal(sxe_fibers_create(&other, loop, &options), -ENOMEM);
    sxe__sys_fail(SXE_SYS_sigaction, 1, 1, EINVAL);
    assert_int_equal(sxe_fibers_create(&other, loop, &options), -EINVAL);
    sxe__sys_reset();
    sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, 0);

    /* A kernel without MADV_POPULATE_WRITE: the stacks are touched instead, and work. */
    sxe__sys_fail(SXE_SYS_madvise, 1, 0, EINVAL);
    assert_int_equal(sxe_fibers_create(&other, loop, &options), 0);
    assert_int_equal(sxe__sys_calls(SXE_SYS_madvise), 8);
    unsigned depth = 3; /* 8 KB: the stack size was rounded up to whole pages */
    assert_int_equal(sxe_fiber_start(other, deep_body, &depth, NULL), 0);
    advance(1);
    assert_string_equal(trace, "d");
    sxe_fibers_destroy(other);
    sxe_fibers_destroy(NULL);
}

static void test_destroy_abandons_sleeping_fibers(void **state)
{
    sxe_fibers_t *other;

    (void)state;
    assert_int_equal(sxe_fibers_create(&other, loop, NULL), 0);
    assert_int_equal(sxe_fiber_start(other, sleeper, TEXT("5"), NULL), 0);
    assert_string_equal(trace, "5");
    sxe_fibers_destroy(other); /* its timer stops with it */
    advance(10 * SXE_NS_PER_MSEC);
    assert_string_equal(trace, "5");
}

static void full_timers(void *arg)
{
    (void)arg;
    assert_int_equal(sxe_fiber_sleep(SXE_NS_PER_MSEC), -ENOBUFS);
    note("f");
}

static void test_sleep_without_a_free_timer_fails(void **state)
{
    sxe_timer_t timers[16];

    (void)state;
    for (int i = 0; i < 16; i++) {
        sxe_timer_init(&timers[i], tick, NULL);
        assert_int_equal(sxe_timer_start(loop, &timers[i], SXE_NS_PER_SEC, 0), 0);
    }
    assert_int_equal(sxe_fiber_start(fibers, full_timers, NULL, NULL), 0);
    assert_string_equal(trace, "f");
    for (int i = 0; i < 16; i++) {
        sxe_timer_stop(loop, &timers[i]);
    }
}

static void wake_a_running_fiber(void *arg)
{
    (void)arg;
    (void)sxe_fiber_wake(sxe_fiber_self(), 0);
}

static void sleep_outside_a_fiber(void *arg)
{
    (void)arg;
    (void)sxe_fiber_sleep(1);
}

static void test_invalid_use(void **state)
{
    (void)state;
#ifdef SXE_DEBUG
    const char *const not_waiting[] = {"fiber->state == FIBER_WAITING", NULL};
    sxe_test_expect_abort(wake_a_running_fiber, NULL, not_waiting);
    const char *const outside[] = {"assertion failed: fiber != NULL", NULL};
    sxe_test_expect_abort(sleep_outside_a_fiber, NULL, outside);
#else
    (void)wake_a_running_fiber;
    (void)sleep_outside_a_fiber;
    sxe_fiber_t *fiber;
    int got;
    assert_int_equal(sxe_fiber_sleep(1), -EPERM);
    assert_int_equal(sxe_fiber_yield(), -EPERM);
    assert_int_equal(sxe_fiber_wait(), -EPERM);
    assert_int_equal(sxe_fiber_start(fibers, waiter, &got, &fiber), 0);
    assert_int_equal(sxe_fiber_wake(fiber, 1), 0);
    assert_int_equal(sxe_fiber_start(fibers, sleeper, TEXT("1"), NULL), 0);
    assert_int_equal(sxe_fiber_wake(NULL, 0), -EINVAL);
    assert_int_equal(sxe_fiber_start(NULL, straight, TEXT(""), NULL), -EINVAL);
    assert_int_equal(sxe_fiber_start(fibers, NULL, NULL, NULL), -EINVAL);
    assert_int_equal(sxe_fibers_create(NULL, loop, NULL), -EINVAL);
    sxe_fiber_t *sleeping = NULL;
    assert_int_equal(sxe_fiber_start(fibers, sleeper, TEXT("1"), &sleeping), 0);
    assert_int_equal(sxe_fiber_wake(sleeping, 0), -EINVAL); /* asleep, not waiting */
    assert_int_equal(sxe_fiber_wake(fiber, 1), 0);
#endif
}

/*
 * A thread's first pool gives it an alternate signal stack (a stack overflow's SIGSEGV needs one
 * to run on), and its last pool's end takes it away again; a thread that had one of its own (a
 * sanitizer's) keeps it, untouched.
 */
static void *pools_in_a_new_thread(void *arg)
{
    struct sxe_fibers_options options = {.count = 2, .stack_size = 32768};
    sxe_fibers_t *first, *second;
    stack_t now;

    (void)arg;
    assert_int_equal(sigaltstack(NULL, &now), 0);
    bool had_one = (now.ss_flags & SS_DISABLE) == 0;
    void *own = now.ss_sp;
    assert_int_equal(sxe_fibers_create(&first, loop, &options), 0);
    assert_int_equal(sigaltstack(NULL, &now), 0);
    assert_true((now.ss_flags & SS_DISABLE) == 0);
    assert_true(had_one ? now.ss_sp == own : now.ss_size >= (size_t)MINSIGSTKSZ);
    assert_int_equal(sxe_fibers_create(&second, loop, &options), 0);
    sxe_fibers_destroy(first);
    assert_int_equal(sigaltstack(NULL, &now), 0);
    assert_true((now.ss_flags & SS_DISABLE) == 0); /* the second pool still needs it */
    sxe_fibers_destroy(second);
    assert_int_equal(sigaltstack(NULL, &now), 0);
    assert_int_equal((now.ss_flags & SS_DISABLE) != 0, !had_one);
    return NULL;
}

static void test_the_alternate_signal_stack_lives_as_long_as_the_pools(void **state)
{
    pthread_t thread;

    (void)state;
    assert_int_equal(pthread_create(&thread, NULL, pools_in_a_new_thread, NULL), 0);
    assert_int_equal(pthread_join(thread, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_fiber_runs_at_once_to_its_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sleeping_fibers_interleave_while_the_loop_runs, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_yield_lets_one_turn_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_returns_what_wake_gives, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fibers_start_and_wake_fibers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_full_pool_refuses_and_recovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_may_use_most_of_its_stack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_default_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_stack_overflow_stops_the_process_with_a_message,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_creation_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_abandons_sleeping_fibers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sleep_without_a_free_timer_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_use, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_alternate_signal_stack_lives_as_long_as_the_pools,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_fault_outside_the_guard_pages_is_not_an_overflow,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
