/*
 * Pools: every operation and its error paths, timeouts under fake time, walks with moving
 * elements, shared pools across mappings and processes, recovery from a process that dies holding
 * the lock, and a bounded race of 8 processes and 8 threads on one shared pool.
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

enum { FREE, IDLE, BUSY, STATE_COUNT };
static const char *const state_names[] = {"FREE", "IDLE", "BUSY"};

struct conn {
    int fd;
    uint32_t owner;
    uint64_t uses;
};

static struct sxe_pool_options options(uint32_t count, unsigned flags)
{
    return (struct sxe_pool_options){.name = "conns",
                                     .count = count,
                                     .element_size = sizeof(struct conn),
                                     .state_count = STATE_COUNT,
                                     .state_names = state_names,
                                     .flags = flags};
}

static sxe_pool_t *make_pool(uint32_t count, unsigned flags)
{
    struct sxe_pool_options opts = options(count, flags);
    sxe_pool_t *pool = NULL;

    assert_int_equal(sxe_pool_create(&pool, &opts), 0);
    assert_int_equal(sxe__pool_validate(pool), 0);
    return pool;
}

static int reset(void **state)
{
    (void)state;
    sxe__sys_reset();
    sxe_log_set_sink(NULL, NULL);
    return 0;
}

static unsigned open_fds(void)
{
    unsigned count = 0;
    DIR *dir = opendir("/proc/self/fd");

    assert_non_null(dir);
    while (readdir(dir) != NULL) {
        count++;
    }
    closedir(dir);
    return count;
}

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

static void out_of_range_index(void *arg)
{
    (void)sxe_pool_state(arg, 2);
}

/* Arguments out of range: an assertion in debug, an error value in release. */
static void test_out_of_range_arguments(void **state)
{
    sxe_pool_t *pool = make_pool(2, 0);

    (void)state;
#ifdef SXE_DEBUG
    const char *const expected[] = {"assertion failed: index < pool->count", NULL};
    sxe_test_expect_abort(out_of_range_index, pool, expected);
#else
    (void)out_of_range_index;
    struct sxe_pool_walker walker = {.pool = pool, .state = STATE_COUNT};
    assert_int_equal(sxe_pool_state(pool, 2), -EINVAL);
    assert_int_equal(sxe_pool_set_state(pool, 2, FREE, BUSY, 0), -EINVAL);
    assert_int_equal(sxe_pool_set_state(pool, 0, STATE_COUNT, BUSY, 0), -EINVAL);
    assert_int_equal(sxe_pool_try_set_state(pool, 0, FREE, STATE_COUNT, 0), -EINVAL);
    assert_int_equal(sxe_pool_set_oldest_state(pool, STATE_COUNT, FREE, 0), SXE_POOL_NONE);
    assert_int_equal(sxe_pool_oldest(pool, STATE_COUNT, NULL), SXE_POOL_NONE);
    assert_int_equal(sxe_pool_count(pool, STATE_COUNT), 0);
    assert_int_equal(sxe_pool_time(pool, 2), 0);
    assert_int_equal(sxe_pool_touch(pool, 2, 0), -EINVAL);
    assert_int_equal(sxe_pool_set_timeout(pool, STATE_COUNT, 1), -EINVAL);
    assert_int_equal(sxe_pool_walker_next(&walker), SXE_POOL_NONE);
#endif
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

static char *temp_path(const char *tag)
{
    static char path[128];
    snprintf(path, sizeof(path), "/dev/shm/sxe-test-pool-%d-%s", (int)getpid(), tag);
    unlink(path);
    return path;
}

/* Two mappings of one shared pool, at different addresses, see the same pool. */
static void test_attach_twice_at_different_addresses(void **state)
{
    struct sxe_pool_options opts = options(8, 0);
    char *path = temp_path("twice");
    sxe_pool_t *first;
    sxe_pool_t *second;

    (void)state;
    assert_int_equal(sxe_pool_attach(&first, path, &opts, SXE_POOL_CREATE), 0);
    assert_int_equal(sxe_pool_attach(&second, path, &opts, 0), 0);
    assert_ptr_not_equal(first, second);
    assert_int_equal(sxe_pool_set_state(first, 3, FREE, BUSY, 77), 0);
    ((struct conn *)sxe_pool_array(first))[3].fd = 33;
    assert_int_equal(sxe_pool_state(second, 3), BUSY);
    assert_int_equal(sxe_pool_time(second, 3), 77);
    assert_int_equal(((struct conn *)sxe_pool_array(second))[3].fd, 33);
    assert_int_equal(sxe_pool_oldest(second, BUSY, NULL), 3);
    assert_int_equal(sxe_pool_set_oldest_state(second, BUSY, IDLE, 78), 3);
    assert_int_equal(sxe_pool_count(first, IDLE), 1);
    assert_int_equal(sxe__pool_validate(first), 0);
    assert_int_equal(sxe__pool_validate(second), 0);
    sxe_pool_detach(first);
    sxe_pool_detach(second);
    sxe_pool_detach(NULL);
    unlink(path);
}

static void write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

/* Every way attaching can fail is a clear error, logged, with nothing left open or mapped. */
static void test_attach_errors(void **state)
{
    struct sxe_pool_options opts = options(8, 0);
    struct sxe_pool_options other = options(9, 0);
    struct sxe_test_capture capture;
    char *path = temp_path("errors");
    unsigned fds = open_fds();
    sxe_pool_t *pool = NULL;
    char junk[8192];

    (void)state;
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -ENOENT);
    assert_non_null(strstr(capture.text, "cannot open it: No such file or directory"));

    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), 0);
    sxe_pool_detach(pool);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), -EEXIST);
    assert_int_equal(sxe_pool_attach(&pool, path, &other, 0), -EMSGSIZE);
    assert_non_null(strstr(capture.text, "holds 8 elements of 16 bytes in 3 states"));

    /* A pool of another format version. */
    int fd = open(path, O_RDWR);
    uint32_t version = 999;
    assert_int_equal(pwrite(fd, &version, sizeof(version), 8), sizeof(version));
    close(fd);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -EPROTO);
    assert_non_null(strstr(capture.text, "has format version 999"));

    /* Not a pool at all, too small, empty, or not finished by its creator. */
    memset(junk, 'x', sizeof(junk));
    write_file(path, junk, sizeof(junk));
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -EPROTO);
    assert_non_null(strstr(capture.text, "is not an sxe pool"));
    write_file(path, junk, 10);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -EPROTO);
    write_file(path, junk, 0);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -EAGAIN);
    memset(junk, 0, sizeof(junk));
    write_file(path, junk, sizeof(junk));
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -EAGAIN);
    assert_non_null(strstr(capture.text, "is still being made by its creator"));
    unlink(path);

    /* The system says no at each step: a full disk, no memory, an I/O error. */
    sxe__sys_fail(SXE_SYS_open, 1, 1, EMFILE);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), -EMFILE);
    sxe__sys_fail(SXE_SYS_ftruncate, 1, 1, ENOSPC);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), -ENOSPC);
    assert_non_null(strstr(capture.text, "cannot size it"));
    unlink(path);
    sxe__sys_fail(SXE_SYS_mmap, 1, 1, ENOMEM);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), -ENOMEM);
    unlink(path);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), 0);
    sxe_pool_detach(pool);
    sxe__sys_fail(SXE_SYS_fstat, 1, 1, EIO);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, 0), -EIO);
    assert_non_null(strstr(capture.text, "cannot stat it: Input/output error"));
    sxe_test_capture_stop();
    unlink(path);
    assert_int_equal(open_fds(), fds);
}

/* Takes element index out of its queue, as an operation interrupted half-way would leave it. */
static void unlink_node(sxe_pool_t *pool, uint32_t index)
{
    struct sxe__pool_node *nodes = sxe__pool_nodes(pool);

    nodes[nodes[index].prev].next = nodes[index].next;
    nodes[nodes[index].next].prev = nodes[index].prev;
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

static void die_holding_the_lock(void *arg)
{
    sxe_pool_t *pool = arg;

    sxe__pool_lock(pool);
    /* Half of a move: the element is out of its queue, and its state still says FREE. */
    unlink_node(pool, 2);
    raise(SIGKILL);
}

/* A process killed while it holds the pool, mid-operation: the next locker rebuilds. */
static void test_recovery_after_death_holding_lock(void **state)
{
    sxe_pool_t *pool = make_pool(6, SXE_POOL_SHARED);
    struct sxe_test_capture capture;
    int status;

    (void)state;
    assert_int_equal(sxe_pool_set_state(pool, 4, FREE, BUSY, 10), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        die_holding_the_lock(pool);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_pool_set_oldest_state(pool, FREE, IDLE, 20), 0);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "a process died holding the lock; queues rebuilt"));
    assert_int_equal(pool->recoveries, 1);
    assert_int_equal(sxe__pool_validate(pool), 0);
    assert_int_equal(
        sxe_pool_count(pool, FREE) + sxe_pool_count(pool, IDLE) + sxe_pool_count(pool, BUSY), 6);
    assert_int_equal(sxe_pool_count(pool, FREE), 4);
    assert_int_equal(sxe_pool_state(pool, 2), FREE);
    assert_int_equal(sxe_pool_state(pool, 4), BUSY);

    /* Age order survives the rebuild: FREE is 1, 2, 3, 5 oldest first. */
    uint32_t expected_order[] = {1, 2, 3, 5};
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(sxe_pool_set_oldest_state(pool, FREE, IDLE, 30), expected_order[i]);
    }
    assert_int_equal(sxe__pool_validate(pool), 0);
    sxe_pool_destroy(pool);
}

/*
 * The race: workers claim elements FREE -> BUSY, check that nobody else owns them, mark them, and
 * give them back, mixing in tries on random elements, touches and walks. Any element handed to
 * two workers at once, or lost, shows up.
 */
struct race {
    sxe_pool_t *pool;
    const char *path; /* processes attach here, each at its own address */
    uint64_t deadline_ns;
    unsigned worker;
    unsigned long operations;
    unsigned long conflicts;
};

static void race_run(struct race *race)
{
    sxe_pool_t *pool = race->pool;
    struct conn *conns = sxe_pool_array(pool);
    unsigned seed = race->worker * 7919u + 1;

    while (sxe_clock_mono_ns() < race->deadline_ns) {
        for (int batch = 0; batch < 64; batch++) {
            uint64_t now = sxe_clock_mono_ns();
            uint32_t index = sxe_pool_set_oldest_state(pool, FREE, BUSY, now);
            if (index == SXE_POOL_NONE) {
                continue;
            }
            if (__atomic_exchange_n(&conns[index].owner, race->worker, __ATOMIC_ACQ_REL) != 0) {
                race->conflicts++;
            }
            conns[index].uses++;
            sxe_pool_touch(pool, index, now);
            uint32_t other = (uint32_t)rand_r(&seed) % sxe_pool_capacity(pool);
            if (sxe_pool_try_set_state(pool, other, IDLE, FREE, now) == IDLE) {
                race->operations++;
            }
            if (__atomic_exchange_n(&conns[index].owner, 0, __ATOMIC_ACQ_REL) != race->worker) {
                race->conflicts++;
            }
            unsigned to = rand_r(&seed) % 2 ? FREE : IDLE;
            if (sxe_pool_set_state(pool, index, BUSY, to, now) != 0) {
                race->conflicts++;
            }
            race->operations += 4;
        }
    }
}

static void *race_thread(void *arg)
{
    race_run(arg);
    return NULL;
}

#define RACE_WORKERS 8

static void test_race_8_processes_8_threads(void **state)
{
    struct sxe_pool_options opts = options(64, 0);
    char *path = temp_path("race");
    struct race threads[RACE_WORKERS];
    pthread_t ids[RACE_WORKERS];
    pid_t children[RACE_WORKERS];
    int pipes[2];
    sxe_pool_t *pool;

    (void)state;
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), 0);
    assert_int_equal(pipe(pipes), 0);
    uint64_t deadline = sxe_clock_mono_ns() + 1500 * SXE_NS_PER_MSEC;

    for (unsigned i = 0; i < RACE_WORKERS; i++) {
        children[i] = fork();
        assert_true(children[i] >= 0);
        if (children[i] == 0) {
            struct race race = {.path = path, .deadline_ns = deadline, .worker = 100 + i};
            if (sxe_pool_attach(&race.pool, path, &opts, 0) != 0) {
                _exit(2);
            }
            race_run(&race);
            unsigned long result[2] = {race.operations, race.conflicts};
            _exit(write(pipes[1], result, sizeof(result)) == sizeof(result) ? 0 : 3);
        }
    }
    for (unsigned i = 0; i < RACE_WORKERS; i++) {
        threads[i] = (struct race){.pool = pool, .deadline_ns = deadline, .worker = 1 + i};
        assert_int_equal(pthread_create(&ids[i], NULL, race_thread, &threads[i]), 0);
    }

    unsigned long operations = 0;
    unsigned long conflicts = 0;
    for (unsigned i = 0; i < RACE_WORKERS; i++) {
        int status;
        unsigned long result[2];
        assert_int_equal(pthread_join(ids[i], NULL), 0);
        operations += threads[i].operations;
        conflicts += threads[i].conflicts;
        assert_int_equal(waitpid(children[i], &status, 0), children[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_int_equal(read(pipes[0], result, sizeof(result)), sizeof(result));
        operations += result[0];
        conflicts += result[1];
    }
    close(pipes[0]);
    close(pipes[1]);

    /* Every element is accounted for, none was handed out twice, and the queues are sound. */
    assert_int_equal(conflicts, 0);
    assert_true(operations > 1000);
    assert_int_equal(sxe__pool_validate(pool), 0);
    assert_int_equal(sxe_pool_count(pool, BUSY), 0);
    assert_int_equal(sxe_pool_count(pool, FREE) + sxe_pool_count(pool, IDLE), 64);
    uint64_t uses = 0;
    for (uint32_t i = 0; i < 64; i++) {
        uses += ((struct conn *)sxe_pool_array(pool))[i].uses;
        assert_int_equal(((struct conn *)sxe_pool_array(pool))[i].owner, 0);
    }
    assert_true(uses > 0);
    print_message("race: %lu operations by 8 processes and 8 threads, 0 conflicts\n", operations);
    sxe_pool_detach(pool);
    unlink(path);
}

/*
 * Dies holding the lock after scribbling over the links of every queue, as if at the worst instant
 * of some operation: every queue now looks empty, and only the elements' state fields are left to
 * rebuild from. Unlike a half move, nothing the racers do afterwards can mend this by chance.
 */
static void die_holding_the_lock_with_links_lost(sxe_pool_t *pool)
{
    struct sxe__pool_node *nodes = sxe__pool_nodes(pool);

    sxe__pool_lock(pool);
    for (uint32_t i = 0; i < sxe_pool_capacity(pool) + STATE_COUNT; i++) {
        nodes[i].prev = i;
        nodes[i].next = i;
    }
    raise(SIGKILL);
}

/* Kills a racer and takes it back, adding up what it counted before it died. */
static void kill_racer(pid_t child, const struct race *counted, unsigned long *operations,
                       unsigned long *conflicts)
{
    int status;

    kill(child, SIGKILL);
    assert_int_equal(waitpid(child, &status, 0), child);
    /* A racer ends only by SIGKILL: one that could not attach would have exited first. */
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    *operations += counted->operations;
    *conflicts += counted->conflicts;
}

/*
 * Processes racing on a shared pool are killed with SIGKILL at random instants, some of them
 * while holding the lock, and one more dies holding it on purpose, with the queues' links lost;
 * the survivors and their replacements carry on. At the end every element is in exactly one state,
 * no element was ever handed to two racers, and the pool recovered at least once (the death on
 * purpose) and at most once per death.
 */
static void test_random_kills_lose_nothing(void **state)
{
    struct sxe_pool_options opts = options(32, 0);
    char *path = temp_path("kills");
    pid_t children[4];
    sxe_pool_t *pool;
    unsigned kills = 0;
    unsigned seed = 12345;
    unsigned long operations = 0;
    unsigned long conflicts = 0;

    (void)state;
    /* Each racer counts into memory the parent shares, so its counts outlive its SIGKILL. */
    struct race *counted =
        mmap(NULL, 4 * sizeof(*counted), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(counted != MAP_FAILED);
    assert_int_equal(sxe_pool_attach(&pool, path, &opts, SXE_POOL_CREATE), 0);
    uint64_t end = sxe_clock_mono_ns() + 1500 * SXE_NS_PER_MSEC;

    for (unsigned i = 0; i < 4; i++) {
        children[i] = 0;
    }
    while (sxe_clock_mono_ns() < end) {
        for (unsigned i = 0; i < 4; i++) {
            if (children[i] != 0) {
                continue;
            }
            children[i] = fork();
            assert_true(children[i] >= 0);
            if (children[i] == 0) {
                struct race *race = &counted[i];
                *race = (struct race){.deadline_ns = end + 10 * SXE_NS_PER_SEC, .worker = 1 + i};
                if (sxe_pool_attach(&race->pool, path, &opts, 0) != 0) {
                    _exit(2);
                }
                race_run(race);
                _exit(0);
            }
        }
        /* The random instants of the kills are the test, so this sleep stays. */
        usleep(1000 + rand_r(&seed) % 20000);
        if (kills == 0) {
            pid_t dier = fork();
            assert_true(dier >= 0);
            if (dier == 0) {
                sxe_pool_t *attached;
                if (sxe_pool_attach(&attached, path, &opts, 0) != 0) {
                    _exit(2);
                }
                die_holding_the_lock_with_links_lost(attached);
            }
            int status;
            assert_int_equal(waitpid(dier, &status, 0), dier);
            assert_true(WIFSIGNALED(status));
            assert_int_equal(WTERMSIG(status), SIGKILL);
            kills++;
        }
        unsigned victim = rand_r(&seed) % 4;
        kill_racer(children[victim], &counted[victim], &operations, &conflicts);
        children[victim] = 0;
        kills++;
    }
    for (unsigned i = 0; i < 4; i++) {
        if (children[i] != 0) {
            kill_racer(children[i], &counted[i], &operations, &conflicts);
            kills++;
        }
    }

    /* The parent can still lock the pool (no deadlock), and nothing is lost. */
    assert_int_equal(sxe__pool_validate(pool), 0);
    assert_int_equal(
        sxe_pool_count(pool, FREE) + sxe_pool_count(pool, IDLE) + sxe_pool_count(pool, BUSY), 32);
    /* Only a BUSY element has an owner: a racer that died with it may have left its name. */
    struct conn *conns = sxe_pool_array(pool);
    for (uint32_t i = 0; i < 32; i++) {
        if (sxe_pool_state(pool, i) != BUSY) {
            assert_int_equal(conns[i].owner, 0);
        }
    }
    assert_int_equal(conflicts, 0);
    assert_true(operations > 1000);
    /* At least the death on purpose was recovered from, and no death more than once. */
    assert_in_range(pool->recoveries, 1, kills);
    print_message("kills: %u processes killed, one of them holding the lock on purpose; "
                  "%llu recoveries from a held lock, %lu operations, 0 conflicts\n",
                  kills, (unsigned long long)pool->recoveries, operations);
    sxe_pool_detach(pool);
    munmap(counted, 4 * sizeof(*counted));
    unlink(path);
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
        cmocka_unit_test_teardown(test_attach_twice_at_different_addresses, reset),
        cmocka_unit_test_teardown(test_attach_errors, reset),
        cmocka_unit_test_teardown(test_validator_detects_corruption, reset),
        cmocka_unit_test_teardown(test_recovery_after_death_holding_lock, reset),
        cmocka_unit_test_teardown(test_race_8_processes_8_threads, reset),
        cmocka_unit_test_teardown(test_random_kills_lose_nothing, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
