/*
 * Pools: every operation and its error paths, timeouts under fake time, walks with moving
 * elements, pools in the caller's memory, and the validator. Pools shared across mappings and
 * processes are in test_pool_shared.c; the harness is in pool_test.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool.h"
#include "sxe/clock.h"
#include "sxe_test.h"
#include "sys.h"

#include "pool_test.h"

static void test_create_and_initial_state(void **state)
{
    sxe_pool_t *pool = make_pool(5, 0);
    struct conn *conns = sxe_pool_array(pool);
    uint64_t time = 99;

    (void)state;
    assert_int_equal((uintptr_t)conns % 64, 0);
    assert_int_equal(sxe_pool_capacity(pool), 5);
    assert_string_equal(sxe_pool_name(pool), "conns");
    assert_string_equal(sxe_pool_state_name(pool, BUSY), "BUSY");
    assert_string_equal(sxe_pool_state_name(pool, STATE_COUNT), "?");
    assert_int_equal(sxe_pool_count(pool, FREE), 5);
    assert_int_equal(sxe_pool_count(pool, IDLE), 0);
    assert_int_equal(sxe_pool_oldest(pool, FREE, &time), 0);
    assert_int_equal(time, 0);
    assert_int_equal(sxe_pool_oldest(pool, BUSY, &time), SXE_POOL_NONE);
    for (uint32_t i = 0; i < 5; i++) {
        assert_int_equal(sxe_pool_state(pool, i), FREE);
        assert_int_equal(conns[i].fd, 0); /* elements start zeroed */
        assert_int_equal(sxe_pool_index(pool, &conns[i]), i);
    }
    assert_int_equal(sxe_pool_index(pool, &conns[5]), SXE_POOL_NONE);
    assert_int_equal(sxe_pool_index(pool, (char *)&conns[1] + 1), SXE_POOL_NONE);
    assert_int_equal(sxe_pool_index(pool, (char *)conns - 1), SXE_POOL_NONE);
    conns[4].fd = 7;
    assert_int_equal(conns[4].fd, 7);
    sxe_pool_destroy(pool);
    sxe_pool_destroy(NULL);
}

static void test_default_state_names_and_long_names(void **state)
{
    const char *const names[] = {"A_STATE_NAME_THAT_IS_MUCH_TOO_LONG_TO_KEEP", NULL};
    struct sxe_pool_options opts = {
        .name = NULL, .count = 1, .element_size = 1, .state_count = 3, .state_names = NULL};
    sxe_pool_t *pool;

    (void)state;
    assert_int_equal(sxe_pool_create(&pool, &opts), 0);
    assert_string_equal(sxe_pool_name(pool), "");
    assert_string_equal(sxe_pool_state_name(pool, 2), "2");
    sxe_pool_destroy(pool);

    opts.state_count = 2;
    opts.state_names = names;
    assert_int_equal(sxe_pool_create(&pool, &opts), 0);
    assert_int_equal(strlen(sxe_pool_state_name(pool, 0)), SXE_POOL_NAME_MAX);
    assert_string_equal(sxe_pool_state_name(pool, 1), "1");
    sxe_pool_destroy(pool);
}

static void test_set_state_moves_and_counts(void **state)
{
    sxe_pool_t *pool = make_pool(4, 0);
    uint64_t time;

    (void)state;
    assert_int_equal(sxe_pool_set_state(pool, 2, FREE, BUSY, 100), 0);
    assert_int_equal(sxe__pool_validate(pool), 0);
    assert_int_equal(sxe_pool_state(pool, 2), BUSY);
    assert_int_equal(sxe_pool_count(pool, FREE), 3);
    assert_int_equal(sxe_pool_count(pool, BUSY), 1);
    assert_int_equal(sxe_pool_time(pool, 2), 100);
    assert_int_equal(sxe_pool_oldest(pool, BUSY, &time), 2);
    assert_int_equal(time, 100);

    assert_int_equal(sxe_pool_set_state(pool, 0, FREE, BUSY, 200), 0);
    assert_int_equal(sxe__pool_validate(pool), 0);
    assert_int_equal(sxe_pool_oldest(pool, BUSY, NULL), 2);
    assert_int_equal(sxe_pool_oldest(pool, FREE, NULL), 1);

    /* try: moves only from the right state, and reports the state it found. */
    assert_int_equal(sxe_pool_try_set_state(pool, 2, FREE, IDLE, 300), BUSY);
    assert_int_equal(sxe_pool_state(pool, 2), BUSY);
    assert_int_equal(sxe_pool_try_set_state(pool, 2, BUSY, IDLE, 300), BUSY);
    assert_int_equal(sxe_pool_state(pool, 2), IDLE);
    assert_int_equal(sxe__pool_validate(pool), 0);

    /* Moving to the same state requeues at the tail. */
    assert_int_equal(sxe_pool_set_state(pool, 1, FREE, FREE, 400), 0);
    assert_int_equal(sxe_pool_oldest(pool, FREE, NULL), 3);
    assert_int_equal(sxe__pool_validate(pool), 0);
    sxe_pool_destroy(pool);
}

static void set_state_from_wrong_state(void *arg)
{
    sxe_pool_t *pool = arg;

    (void)sxe_pool_set_state(pool, 0, BUSY, IDLE, 1);
}

/* Moving an element from a state it is not in: an assertion in debug, -EINVAL in release. */
static void test_set_state_from_wrong_state(void **state)
{
    sxe_pool_t *pool = make_pool(2, 0);
    struct sxe_test_capture capture;

    (void)state;
#ifdef SXE_DEBUG
    const char *const expected[] = {"pool conns: element 0 is FREE, not BUSY; not moved to IDLE",
                                    "assertion failed: (unsigned)actual == from", NULL};
    sxe_test_expect_abort(set_state_from_wrong_state, pool, expected);
#else
    (void)set_state_from_wrong_state;
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_pool_set_state(pool, 0, BUSY, IDLE, 1), -EINVAL);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "element 0 is FREE, not BUSY; not moved to IDLE"));
#endif
    (void)capture;
    assert_int_equal(sxe_pool_state(pool, 0), FREE);
    assert_int_equal(sxe__pool_validate(pool), 0);
    sxe_pool_destroy(pool);
}

/* Calls one past the last element or the last state (or past that, by past more), each refused
 * by its own check. */
static unsigned past;

static void state_of_no_element(void *pool)
{
    (void)sxe_pool_state(pool, 2 + past);
}

static void count_of_no_state(void *pool)
{
    (void)sxe_pool_count(pool, STATE_COUNT + past);
}

static void move_from_no_state(void *pool)
{
    (void)sxe_pool_try_set_state(pool, 0, STATE_COUNT + past, BUSY, 0);
}

static void move_to_no_state(void *pool)
{
    (void)sxe_pool_try_set_state(pool, 0, FREE, STATE_COUNT + past, 0);
}

static void move_oldest_to_no_state(void *pool)
{
    (void)sxe_pool_set_oldest_state(pool, FREE, STATE_COUNT + past, 0);
}

static void walk_no_state(void *pool)
{
    struct sxe_pool_walker walker = {.pool = pool, .state = STATE_COUNT + past};
    (void)sxe_pool_walker_next(&walker);
}

static void start_a_walk_of_no_state(void *pool)
{
    struct sxe_pool_walker walker;
    sxe_pool_walker_init(&walker, pool, STATE_COUNT + past);
}

/* Arguments out of range: an assertion in debug, an error value in release. */
static void test_out_of_range_arguments(void **state)
{
    sxe_pool_t *pool = make_pool(2, 0);

    (void)state;
#ifdef SXE_DEBUG
    const struct {
        void (*call)(void *pool);
        const char *check;
    } calls[] = {
        {state_of_no_element, "index < pool->count"},
        {count_of_no_state, "state < pool->state_count"},
        {move_from_no_state, "from < pool->state_count"},
        {move_to_no_state, "to < pool->state_count"},
        {move_oldest_to_no_state, "to < pool->state_count"},
        {walk_no_state, "walker->state < pool->state_count"},
        {start_a_walk_of_no_state, "state < pool->state_count"},
    };
    for (past = 0; past < 2; past++) { /* the first value out of range, and the next */
        for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
            const char *const expected[] = {"assertion failed: ", calls[i].check, NULL};
            sxe_test_expect_abort(calls[i].call, pool, expected);
        }
    }
#else
    (void)state_of_no_element;
    (void)count_of_no_state;
    (void)move_from_no_state;
    (void)move_to_no_state;
    (void)move_oldest_to_no_state;
    (void)walk_no_state;
    (void)start_a_walk_of_no_state;
    for (past = 0; past < 2; past++) { /* the first value out of range, and the next */
        struct sxe_pool_walker walker = {.pool = pool, .state = STATE_COUNT + past};
        assert_int_equal(sxe_pool_state(pool, 2 + past), -EINVAL);
        assert_int_equal(sxe_pool_set_state(pool, 2 + past, FREE, BUSY, 0), -EINVAL);
        assert_int_equal(sxe_pool_set_state(pool, 0, STATE_COUNT + past, BUSY, 0), -EINVAL);
        assert_int_equal(sxe_pool_try_set_state(pool, 0, FREE, STATE_COUNT + past, 0), -EINVAL);
        assert_int_equal(sxe_pool_set_oldest_state(pool, STATE_COUNT + past, FREE, 0),
                         SXE_POOL_NONE);
        assert_int_equal(sxe_pool_set_oldest_state(pool, FREE, STATE_COUNT + past, 0),
                         SXE_POOL_NONE);
        assert_int_equal(sxe_pool_oldest(pool, STATE_COUNT + past, NULL), SXE_POOL_NONE);
        assert_int_equal(sxe_pool_count(pool, STATE_COUNT + past), 0);
        assert_int_equal(sxe_pool_time(pool, 2 + past), 0);
        assert_int_equal(sxe_pool_touch(pool, 2 + past, 0), -EINVAL);
        assert_int_equal(sxe_pool_set_timeout(pool, STATE_COUNT + past, 1), -EINVAL);
        assert_int_equal(sxe_pool_walker_next(&walker), SXE_POOL_NONE);
    }

    /* What lies one past the end is refused, not read: the unused state slot after the last
     * state and the first state's sentinel node after the last element, each given a value. */
    pool->states[STATE_COUNT].count = 7;
    assert_int_equal(sxe_pool_count(pool, STATE_COUNT), 0);
    pool->states[STATE_COUNT].count = 0;
    sxe__pool_nodes(pool)[2].time = 77;
    assert_int_equal(sxe_pool_time(pool, 2), 0);
    sxe__pool_nodes(pool)[2].time = 0;
#endif
    assert_int_equal(sxe_pool_count(pool, FREE), 2);
    assert_int_equal(sxe__pool_validate(pool), 0);

    /* The last element and the last state are in range. */
    assert_int_equal(sxe_pool_set_timeout(pool, BUSY, 0), 0);
    assert_int_equal(sxe_pool_try_set_state(pool, 1, FREE, BUSY, 5), FREE);
    assert_int_equal(sxe_pool_state(pool, 1), BUSY);
    assert_int_equal(sxe_pool_time(pool, 1), 5);
    assert_int_equal(sxe_pool_touch(pool, 1, 6), 0);
    assert_int_equal(sxe_pool_count(pool, BUSY), 1);
    assert_int_equal(sxe_pool_oldest(pool, BUSY, NULL), 1);
    assert_int_equal(sxe_pool_set_oldest_state(pool, BUSY, BUSY, 7), 1);
    assert_int_equal(sxe_pool_try_set_state(pool, 1, BUSY, FREE, 8), BUSY);
    assert_int_equal(sxe__pool_validate(pool), 0);
    sxe_pool_destroy(pool);
}

static void test_invalid_options(void **state)
{
    struct sxe_pool_options opts = options(4, 0);
    sxe_pool_t *pool = NULL;

    (void)state;
    assert_int_equal(sxe_pool_size(NULL), 0);
    opts.count = 0;
    assert_int_equal(sxe_pool_size(&opts), 0);
    opts = options(4, 0);
    opts.state_count = SXE_POOL_STATES_MAX + 1;
    assert_int_equal(sxe_pool_size(&opts), 0);
    opts = options(4, 0);
    opts.element_size = 0;
    assert_int_equal(sxe_pool_size(&opts), 0);
    opts = options(4, 0x80);
    assert_int_equal(sxe_pool_size(&opts), 0);
    opts = options(4, 0);
    assert_true(sxe_pool_size(&opts) >= 4 * sizeof(struct conn));

    /* Each bound at its edge is accepted, one past it refused. */
    opts = options(UINT32_MAX - 1 - SXE_POOL_STATES_MAX, 0);
    assert_int_not_equal(sxe_pool_size(&opts), 0);
    opts.count++;
    assert_int_equal(sxe_pool_size(&opts), 0);
    opts = options(1, 0);
    opts.element_size = 1;
    assert_int_not_equal(sxe_pool_size(&opts), 0);
    opts.element_size = 1ULL << 32;
    assert_int_not_equal(sxe_pool_size(&opts), 0);
    opts.element_size++;
    assert_int_equal(sxe_pool_size(&opts), 0);
    opts = options(1, 0);
    opts.state_count = 1;
    assert_int_not_equal(sxe_pool_size(&opts), 0);
    opts.state_count = SXE_POOL_STATES_MAX;
    opts.state_names = NULL;
    assert_int_not_equal(sxe_pool_size(&opts), 0);
    opts = options(1, SXE_POOL_LOCKED | SXE_POOL_SHARED);
    assert_int_not_equal(sxe_pool_size(&opts), 0);
    opts = options(4, 0);
#ifndef SXE_DEBUG
    opts.count = 0;
    assert_int_equal(sxe_pool_create(&pool, &opts), -EINVAL);
    assert_int_equal(sxe_pool_attach(&pool, "/nonexistent", &opts, 0), -EINVAL);
    opts = options(4, 0);
    assert_int_equal(sxe_pool_attach(&pool, "/nonexistent", &opts, 0x80), -EINVAL);
#endif
    assert_null(pool);
}

static void test_set_oldest_state_is_fifo(void **state)
{
    sxe_pool_t *pool = make_pool(3, 0);

    (void)state;
    assert_int_equal(sxe_pool_set_oldest_state(pool, FREE, BUSY, 10), 0);
    assert_int_equal(sxe_pool_set_oldest_state(pool, FREE, BUSY, 20), 1);
    assert_int_equal(sxe_pool_set_oldest_state(pool, FREE, BUSY, 30), 2);
    assert_int_equal(sxe_pool_set_oldest_state(pool, FREE, BUSY, 40), SXE_POOL_NONE);
    assert_int_equal(sxe__pool_validate(pool), 0);
    assert_int_equal(sxe_pool_set_oldest_state(pool, BUSY, FREE, 50), 0);
    assert_int_equal(sxe_pool_set_oldest_state(pool, BUSY, IDLE, 60), 1);
    assert_int_equal(sxe_pool_count(pool, FREE), 1);
    assert_int_equal(sxe_pool_count(pool, IDLE), 1);
    assert_int_equal(sxe_pool_count(pool, BUSY), 1);
    assert_int_equal(sxe__pool_validate(pool), 0);
    sxe_pool_destroy(pool);
}

/* Touch requeues at the tail; a time earlier than the tail's is raised to it. */
static void test_touch_and_time_order(void **state)
{
    sxe_pool_t *pool = make_pool(3, 0);

    (void)state;
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(sxe_pool_set_state(pool, i, FREE, IDLE, 1000 + i), 0);
    }
    assert_int_equal(sxe_pool_touch(pool, 0, 2000), 0);
    assert_int_equal(sxe__pool_validate(pool), 0);
    assert_int_equal(sxe_pool_oldest(pool, IDLE, NULL), 1);
    assert_int_equal(sxe_pool_time(pool, 0), 2000);

    /* A caller whose clock lags gets the tail's time, so the queue stays in order. */
    assert_int_equal(sxe_pool_touch(pool, 1, 1500), 0);
    assert_int_equal(sxe_pool_time(pool, 1), 2000);
    assert_int_equal(sxe__pool_validate(pool), 0);
    sxe_pool_destroy(pool);
}

struct expiry_log {
    uint32_t indices[16];
    unsigned count;
    unsigned to;
};

static void expire_to_state(sxe_pool_t *pool, uint32_t index, void *arg)
{
    struct expiry_log *log = arg;

    log->indices[log->count++] = index;
    assert_int_equal(sxe_pool_set_state(pool, index, (unsigned)sxe_pool_state(pool, index), log->to,
                                        sxe_pool_time(pool, index)),
                     0);
}

/* Timeouts under fake time: nothing sleeps. */
static void test_timeouts(void **state)
{
    sxe_pool_t *pool = make_pool(4, 0);
    struct expiry_log log = {.to = FREE};
    uint64_t now;

    (void)state;
    sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, 0);
    now = sxe_clock_mono_ns();
    assert_int_equal(sxe_pool_set_timeout(pool, IDLE, 10 * SXE_NS_PER_SEC), 0);

    assert_int_equal(sxe_pool_set_state(pool, 0, FREE, IDLE, now), 0);
    sxe__sys_clock_advance(5 * SXE_NS_PER_SEC);
    assert_int_equal(sxe_pool_set_state(pool, 1, FREE, IDLE, sxe_clock_mono_ns()), 0);
    assert_int_equal(sxe_pool_set_state(pool, 2, FREE, BUSY, sxe_clock_mono_ns()), 0);

    /* At exactly the timeout nothing has been idle for longer. */
    sxe__sys_clock_advance(5 * SXE_NS_PER_SEC);
    assert_int_equal(sxe_pool_check_timeouts(pool, sxe_clock_mono_ns(), expire_to_state, &log), 0);

    sxe__sys_clock_advance(1);
    assert_int_equal(sxe_pool_check_timeouts(pool, sxe_clock_mono_ns(), expire_to_state, &log), 1);
    assert_int_equal(log.indices[0], 0);
    assert_int_equal(sxe_pool_state(pool, 0), FREE);

    /* An hour later, the other idle element goes; BUSY has no timeout, so element 2 stays. */
    sxe__sys_clock_advance(3600 * SXE_NS_PER_SEC);
    assert_int_equal(sxe_pool_check_timeouts(pool, sxe_clock_mono_ns(), expire_to_state, &log), 1);
    assert_int_equal(log.indices[1], 1);
    assert_int_equal(sxe_pool_state(pool, 2), BUSY);
    assert_int_equal(sxe__pool_validate(pool), 0);

    /* Oldest first, across several expired elements; a timeout of 0 switches it off. */
    assert_int_equal(sxe_pool_set_timeout(pool, BUSY, 1), 0);
    assert_int_equal(sxe_pool_set_state(pool, 3, FREE, BUSY, sxe_clock_mono_ns()), 0);
    log.count = 0;
    assert_int_equal(sxe_pool_check_timeouts(pool, sxe_clock_mono_ns() + 2, expire_to_state, &log),
                     2);
    assert_int_equal(log.indices[0], 2);
    assert_int_equal(log.indices[1], 3);
    assert_int_equal(sxe_pool_set_timeout(pool, BUSY, 0), 0);
    assert_int_equal(sxe_pool_set_state(pool, 3, FREE, BUSY, 0), 0);
    assert_int_equal(sxe_pool_check_timeouts(pool, UINT64_MAX, expire_to_state, &log), 0);

    /* An element stamped later than the check's now (another clock) has not expired. */
    assert_int_equal(sxe_pool_set_state(pool, 3, BUSY, IDLE, 5000 * SXE_NS_PER_SEC), 0);
    assert_int_equal(sxe_pool_check_timeouts(pool, 10, expire_to_state, &log), 0);
    assert_int_equal(sxe__pool_validate(pool), 0);
    sxe_pool_destroy(pool);
}

static void leave_in_place(sxe_pool_t *pool, uint32_t index, void *arg)
{
    (void)pool;
    (void)index;
    (*(unsigned *)arg)++;
}

static void check_with_lazy_callback(void *arg)
{
    unsigned calls = 0;

    (void)sxe_pool_check_timeouts(arg, 100, leave_in_place, &calls);
}

/* A callback that leaves its element in place: assert in debug; touch it and log in release. */
static void test_timeout_callback_must_move(void **state)
{
    sxe_pool_t *pool = make_pool(2, 0);

    (void)state;
    assert_int_equal(sxe_pool_set_timeout(pool, IDLE, 10), 0);
    assert_int_equal(sxe_pool_set_state(pool, 0, FREE, IDLE, 50), 0);
#ifdef SXE_DEBUG
    const char *const expected[] = {"timeout callback left element 0 in IDLE",
                                    "assertion failed: callback_moved_element", NULL};
    sxe_test_expect_abort(check_with_lazy_callback, pool, expected);
#else
    struct sxe_test_capture capture;
    unsigned calls = 0;
    (void)check_with_lazy_callback;
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_pool_check_timeouts(pool, 100, leave_in_place, &calls), 1);
    sxe_test_capture_stop();
    assert_int_equal(calls, 1);
    assert_int_equal(sxe_pool_time(pool, 0), 100);
    assert_non_null(strstr(capture.text, "timeout callback left element 0 in IDLE; touched it"));
#endif
    assert_int_equal(sxe__pool_validate(pool), 0);
    sxe_pool_destroy(pool);
}

static void test_walker(void **state)
{
    sxe_pool_t *pool = make_pool(6, 0);
    struct sxe_pool_walker walker;
    uint32_t seen[16];
    unsigned count = 0;
    uint32_t index;

    (void)state;
    sxe_pool_walker_init(&walker, pool, FREE);
    while ((index = sxe_pool_walker_next(&walker)) != SXE_POOL_NONE) {
        seen[count++] = index;
    }
    assert_int_equal(count, 6);
    for (uint32_t i = 0; i < 6; i++) {
        assert_int_equal(seen[i], i);
    }
    assert_int_equal(sxe_pool_walker_next(&walker), SXE_POOL_NONE);

    /* Elements move while the walk goes on. */
    count = 0;
    sxe_pool_walker_init(&walker, pool, FREE);
    assert_int_equal(sxe_pool_walker_next(&walker), 0);
    assert_int_equal(sxe_pool_walker_next(&walker), 1);
    /* The current element leaves: the walk carries on after it. */
    assert_int_equal(sxe_pool_set_state(pool, 1, FREE, BUSY, 1), 0);
    assert_int_equal(sxe_pool_walker_next(&walker), 2);
    /* An element ahead leaves: it is not visited. */
    assert_int_equal(sxe_pool_set_state(pool, 3, FREE, BUSY, 1), 0);
    /* The current element is touched to the tail, and a visited one comes back: the walk carries
     * on from where it was and then meets both again once, at the tail. */
    assert_int_equal(sxe_pool_touch(pool, 2, 2), 0);
    assert_int_equal(sxe_pool_set_state(pool, 1, BUSY, FREE, 3), 0);
    assert_int_equal(sxe_pool_walker_next(&walker), 4);
    assert_int_equal(sxe_pool_walker_next(&walker), 5);
    assert_int_equal(sxe_pool_walker_next(&walker), 2);
    assert_int_equal(sxe_pool_walker_next(&walker), 1);
    assert_int_equal(sxe_pool_walker_next(&walker), SXE_POOL_NONE);

    /* A walk of an empty state ends at once. */
    sxe_pool_walker_init(&walker, pool, IDLE);
    assert_int_equal(sxe_pool_walker_next(&walker), SXE_POOL_NONE);
    assert_int_equal(sxe__pool_validate(pool), 0);
    sxe_pool_destroy(pool);
}

/* sxe_pool_init() with options no pool can have (no states), in memory enough for a valid pool. */
static void init_with_invalid_options(void *memory)
{
    struct sxe_pool_options opts = options(10, 0);
    sxe_pool_t *pool;

    opts.state_count = 0;
    (void)!sxe_pool_init(&pool, memory, 1 << 16, &opts);
}

/* A pool in memory the caller owns, made twice in the same memory. */
static void test_init_in_caller_memory(void **state)
{
    struct sxe_pool_options opts = options(10, SXE_POOL_LOCKED);
    size_t size = sxe_pool_size(&opts);
    void *memory = aligned_alloc(64, size + 64);
    sxe_pool_t *pool;

    (void)state;
    memset(memory, 0xa5, size + 64);
    assert_int_equal(sxe_pool_init(&pool, memory, size, &opts), 0);
    assert_ptr_equal(pool, memory);
    assert_int_equal(sxe__pool_validate(pool), 0);
    assert_int_equal(sxe_pool_set_oldest_state(pool, FREE, IDLE, 5), 0);
    assert_int_equal(sxe_pool_count(pool, FREE), 9);
    sxe_pool_fini(pool);
    sxe_pool_fini(NULL);
    assert_int_equal(sxe_pool_init(&pool, memory, size, &opts), 0);
    assert_int_equal(sxe_pool_count(pool, FREE), 10);
    sxe_pool_fini(pool);
    /* Invalid use: assertions in debug builds, -EINVAL in release. */
    void *roomy = aligned_alloc(64, 1 << 16);
#ifdef SXE_DEBUG
    const char *const expected[] = {"assertion failed:", "options_are_valid(options)", NULL};
    sxe_test_expect_abort(init_with_invalid_options, roomy, expected);
#else
    assert_int_equal(sxe_pool_init(NULL, memory, size, &opts), -EINVAL);
    assert_int_equal(sxe_pool_init(&pool, NULL, size, &opts), -EINVAL);
    assert_int_equal(sxe_pool_init(&pool, memory, size - 1, &opts), -EINVAL);
    assert_int_equal(sxe_pool_init(&pool, (char *)memory + 8, size, &opts), -EINVAL);
    opts.state_count = 0;
    assert_int_equal(sxe_pool_init(&pool, roomy, 1 << 16, &opts), -EINVAL);
    (void)init_with_invalid_options;
#endif
    free(roomy);
    free(memory);
}

static void test_create_fails_cleanly_without_memory(void **state)
{
    struct sxe_pool_options opts = options(10, 0);
    struct sxe_test_capture capture;
    sxe_pool_t *pool = NULL;

    (void)state;
    sxe_test_capture_start(&capture);
    sxe__sys_fail(SXE_SYS_mmap, 1, 1, ENOMEM);
    assert_int_equal(sxe_pool_create(&pool, &opts), -ENOMEM);
    sxe_test_capture_stop();
    assert_null(pool);
    assert_non_null(strstr(capture.text, "pool conns: cannot map"));
    assert_non_null(strstr(capture.text, "Cannot allocate memory"));
}

/* Corrupts a fresh 4-element pool (elements 0..3 FREE, in order) and checks the report. */
static void expect_invalid(void (*corrupt)(sxe_pool_t *pool, struct sxe__pool_node *nodes),
                           const char *reason)
{
    struct sxe_test_capture capture;
    sxe_pool_t *pool = make_pool(4, 0);

    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(sxe_pool_set_state(pool, i, FREE, FREE, 10 * (i + 1)), 0);
    }
    corrupt(pool, sxe__pool_nodes(pool));
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe__pool_validate(pool), -EUCLEAN);
    sxe_test_capture_stop();
    if (strstr(capture.text, reason) == NULL) {
        fail_msg("expected \"%s\" in: %s", reason, capture.text);
    }
    sxe_pool_destroy(pool);
}

static void corrupt_unlinked(sxe_pool_t *pool, struct sxe__pool_node *nodes)
{
    (void)nodes;
    unlink_node(pool, 1);
}

static void corrupt_prev(sxe_pool_t *pool, struct sxe__pool_node *nodes)
{
    (void)pool;
    nodes[2].prev = 0;
}

static void corrupt_state_field(sxe_pool_t *pool, struct sxe__pool_node *nodes)
{
    (void)pool;
    nodes[1].state = BUSY;
}

static void corrupt_time(sxe_pool_t *pool, struct sxe__pool_node *nodes)
{
    (void)pool;
    nodes[2].time = 1;
}

static void corrupt_sequence(sxe_pool_t *pool, struct sxe__pool_node *nodes)
{
    (void)pool;
    nodes[2].sequence = nodes[1].sequence;
}

static void corrupt_index(sxe_pool_t *pool, struct sxe__pool_node *nodes)
{
    (void)pool;
    nodes[0].next = 9999;
}

static void corrupt_tail(sxe_pool_t *pool, struct sxe__pool_node *nodes)
{
    nodes[pool->count + FREE].prev = 0;
}

static void corrupt_total(sxe_pool_t *pool, struct sxe__pool_node *nodes)
{
    (void)nodes;
    unlink_node(pool, 3);
    pool->states[FREE].count--;
}

static void corrupt_magic(sxe_pool_t *pool, struct sxe__pool_node *nodes)
{
    (void)nodes;
    pool->magic = 42;
}

/* The validator finds each broken invariant and says which. */
static void test_validator_detects_corruption(void **state)
{
    (void)state;
    expect_invalid(corrupt_unlinked, "pool conns is invalid: state FREE counts 4 but holds 3");
    expect_invalid(corrupt_prev, "element 2's prev is 0, not 1");
    expect_invalid(corrupt_state_field, "element 1 is queued in FREE but its state is 2");
    expect_invalid(corrupt_time, "element 2's time goes back in FREE");
    expect_invalid(corrupt_sequence, "element 2's sequence goes back in FREE");
    expect_invalid(corrupt_index, "state FREE links to index 9999");
    expect_invalid(corrupt_tail, "state FREE's tail is 0, not 3");
    expect_invalid(corrupt_total, "states hold 3 elements, not 4");
    expect_invalid(corrupt_magic, "bad magic 000000000000002a");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_create_and_initial_state, reset),
        cmocka_unit_test_teardown(test_default_state_names_and_long_names, reset),
        cmocka_unit_test_teardown(test_set_state_moves_and_counts, reset),
        cmocka_unit_test_teardown(test_set_state_from_wrong_state, reset),
        cmocka_unit_test_teardown(test_out_of_range_arguments, reset),
        cmocka_unit_test_teardown(test_invalid_options, reset),
        cmocka_unit_test_teardown(test_set_oldest_state_is_fifo, reset),
        cmocka_unit_test_teardown(test_touch_and_time_order, reset),
        cmocka_unit_test_teardown(test_timeouts, reset),
        cmocka_unit_test_teardown(test_timeout_callback_must_move, reset),
        cmocka_unit_test_teardown(test_walker, reset),
        cmocka_unit_test_teardown(test_init_in_caller_memory, reset),
        cmocka_unit_test_teardown(test_create_fails_cleanly_without_memory, reset),
        cmocka_unit_test_teardown(test_validator_detects_corruption, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
