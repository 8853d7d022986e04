/*
 * The pool against a model: seeded random moves (set, try, oldest), touches and timeout checks over
 * a few elements and states, on a pool private, locked and shared. The model is each element's
 * state and time and each state's queue in order of entry; after every step the pool must say
 * what the model says (counts, states, times, the oldest of each state, a walk of each state in
 * order) and its validator must pass. The module tests check each rule once; this checks they hold
 * together, in orders no one wrote down.
 */
#include <errno.h>
#include <string.h>

#include "pool.h"
#include "sxe/pool.h"
#include "sxe_test.h"

#define ELEMENTS 12
#define STATES   4

static struct {
    unsigned state[ELEMENTS];
    uint64_t time[ELEMENTS];
    uint32_t queue[STATES][ELEMENTS]; /* oldest first */
    unsigned length[STATES];
} model;

static uint64_t random_state;

static uint64_t next_random(void)
{
    return sxe_test_random(&random_state);
}

static void model_remove(uint32_t index)
{
    unsigned state = model.state[index];
    unsigned at = 0;
    while (model.queue[state][at] != index) {
        at++;
    }
    memmove(&model.queue[state][at], &model.queue[state][at + 1],
            (model.length[state] - at - 1) * sizeof(uint32_t));
    model.length[state]--;
}

static void model_move(uint32_t index, unsigned to, uint64_t now)
{
    model_remove(index);
    model.state[index] = to;
    model.time[index] = now;
    model.queue[to][model.length[to]++] = index;
}

static void expect_pool(sxe_pool_t *pool)
{
    assert_int_equal(sxe__pool_validate(pool), 0);
    for (uint32_t i = 0; i < ELEMENTS; i++) {
        assert_int_equal(sxe_pool_state(pool, i), model.state[i]);
        assert_true(sxe_pool_time(pool, i) == model.time[i]);
    }
    for (unsigned s = 0; s < STATES; s++) {
        assert_int_equal(sxe_pool_count(pool, s), model.length[s]);
        uint64_t time = 7;
        uint32_t oldest = sxe_pool_oldest(pool, s, &time);
        if (model.length[s] == 0) {
            assert_int_equal(oldest, SXE_POOL_NONE);
        } else {
            assert_int_equal(oldest, model.queue[s][0]);
            assert_true(time == model.time[oldest]);
        }
        struct sxe_pool_walker walker;
        sxe_pool_walker_init(&walker, pool, s);
        for (unsigned at = 0; at < model.length[s]; at++) {
            assert_int_equal(sxe_pool_walker_next(&walker), model.queue[s][at]);
        }
        assert_int_equal(sxe_pool_walker_next(&walker), SXE_POOL_NONE);
    }
}

static uint64_t timeouts[STATES];
static unsigned expired_calls;
static uint64_t expired_now;

static void on_expired(sxe_pool_t *pool, uint32_t index, void *arg)
{
    unsigned *last_state = arg;
    unsigned state = model.state[index];
    /* Oldest first within a state, and only elements past their state's timeout. */
    assert_int_equal(model.queue[state][0], index);
    assert_true(timeouts[state] != 0 && expired_now - model.time[index] > timeouts[state]);
    (void)last_state;
    expired_calls++;
    unsigned to = (state + 1) % STATES;
    assert_int_equal(sxe_pool_set_state(pool, index, state, to, expired_now), 0);
    model_move(index, to, expired_now);
}

static void run_model(unsigned flags, uint64_t seed, unsigned steps, void *memory)
{
    struct sxe_pool_options options = {.name = "model",
                                       .count = ELEMENTS,
                                       .element_size = 24,
                                       .state_count = STATES,
                                       .flags = flags};
    sxe_pool_t *pool;
    uint64_t now = 1000;

    random_state = seed;
    memset(&model, 0, sizeof(model));
    if (memory != NULL) { /* the caller's memory, not zeroed */
        assert_int_equal(sxe_pool_init(&pool, memory, sxe_pool_size(&options), &options), 0);
    } else {
        assert_int_equal(sxe_pool_create(&pool, &options), 0);
    }
    for (uint32_t i = 0; i < ELEMENTS; i++) { /* all start in state 0, in index order, at 0 */
        model.queue[0][model.length[0]++] = i;
    }
    expect_pool(pool);
    memset(timeouts, 0, sizeof(timeouts));
    for (unsigned step = 0; step < steps; step++) {
        now += next_random() % 4; /* times repeat now and then */
        uint32_t index = (uint32_t)(next_random() % ELEMENTS);
        unsigned from = (unsigned)(next_random() % STATES), to = (unsigned)(next_random() % STATES);
        switch (next_random() % 6) {
        case 0: /* a move from the state it is in */
            from = model.state[index];
            assert_int_equal(sxe_pool_set_state(pool, index, from, to, now), 0);
            model_move(index, to, now);
            break;
        case 1: { /* a move that may find it elsewhere */
            int was = sxe_pool_try_set_state(pool, index, from, to, now);
            assert_int_equal(was, model.state[index]);
            if ((unsigned)was == from) {
                model_move(index, to, now);
            }
            break;
        }
        case 2: { /* the oldest of a state */
            uint32_t moved = sxe_pool_set_oldest_state(pool, from, to, now);
            if (model.length[from] == 0) {
                assert_int_equal(moved, SXE_POOL_NONE);
            } else {
                assert_int_equal(moved, model.queue[from][0]);
                model_move(moved, to, now);
            }
            break;
        }
        case 3: /* a touch: to the tail of its state */
            assert_int_equal(sxe_pool_touch(pool, index, now), 0);
            model_move(index, model.state[index], now);
            break;
        case 4: /* a state's timeout changes */
            timeouts[from] = next_random() % 3 == 0 ? 0 : 1 + next_random() % 20;
            assert_int_equal(sxe_pool_set_timeout(pool, from, timeouts[from]), 0);
            break;
        default: { /* the timeouts are checked */
            unsigned expected = 0;
            for (unsigned s = 0; s < STATES; s++) { /* how many are past it now, by the model */
                for (unsigned at = 0; at < model.length[s]; at++) {
                    expected +=
                        timeouts[s] != 0 && now - model.time[model.queue[s][at]] > timeouts[s];
                }
            }
            expired_calls = 0;
            expired_now = now;
            unsigned calls = sxe_pool_check_timeouts(pool, now, on_expired, NULL);
            assert_int_equal(calls, expired_calls);
            assert_true(calls >= expected); /* moved ones may expire again in their new state */
            break;
        }
        }
        expect_pool(pool);
    }
    if (memory != NULL) {
        sxe_pool_fini(pool);
    } else {
        sxe_pool_destroy(pool);
    }
}

static void test_a_private_pool_against_the_model(void **state)
{
    (void)state;
    run_model(0, 1, 5000, NULL);
}

static void test_a_locked_pool_against_the_model(void **state)
{
    (void)state;
    run_model(SXE_POOL_LOCKED, 2, 5000, NULL);
}

static void test_a_shared_pool_against_the_model(void **state)
{
    (void)state;
    run_model(SXE_POOL_SHARED, 3, 5000, NULL);
}

/* In the caller's memory, left as it was (every byte 0xa5): only what the pool sets is read. */
static void test_a_pool_in_memory_not_zeroed_against_the_model(void **state)
{
    static unsigned char memory[1 << 16] __attribute__((aligned(64)));

    (void)state;
    memset(memory, 0xa5, sizeof(memory));
    run_model(0, 4, 2000, memory);
    memset(memory, 0xa5, sizeof(memory));
    run_model(SXE_POOL_LOCKED, 5, 2000, memory);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_private_pool_against_the_model),
        cmocka_unit_test(test_a_locked_pool_against_the_model),
        cmocka_unit_test(test_a_shared_pool_against_the_model),
        cmocka_unit_test(test_a_pool_in_memory_not_zeroed_against_the_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
