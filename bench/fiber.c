/*
 * What fibers cost: 10,000 fibers created and run to completion, one after another and all alive
 * at once; a switch; and, in the same run, 10,000 threads created and joined, the alternative a
 * blocking-style program would otherwise use. Medians over rounds, or with --json every round's
 * value (bench/bench_json.h); --quick makes COUNT 1000 unless it is given. Usage:
 *
 *     taskset -c 0 bench/fiber [--json] [--quick] [COUNT (10000)] [ROUNDS (21)]
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "sxe/clock.h"
#include "sxe/fiber.h"
#include "sxe/loop.h"

#include "bench_json.h"
#include "bench_progress.h"

#define SWITCHES 1000000

static unsigned ran;

static void body(void *arg)
{
    (void)arg;
    ran++;
}

static void waits_once(void *arg)
{
    (void)arg;
    (void)sxe_fiber_wait();
    ran++;
}

static void ping(void *arg)
{
    (void)arg;
    for (;;) {
        (void)sxe_fiber_wait();
    }
}

static void *thread_body(void *arg)
{
    ran++;
    return arg;
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *values, unsigned count)
{
    qsort(values, count, sizeof(*values), compare);
    return values[count / 2];
}

static double ms_since(uint64_t start)
{
    return (double)(sxe_clock_mono_ns() - start) / 1e6;
}

/* Each figure's value in every round; pool_ms has one more, the pool made once at start-up. */
struct figures {
    double *pool_ms, *one_by_one, *all_at_once, *switch_ns, *threads;
};

/* One round of every figure, with the same pool of fibers in and out (made again in the round). */
static int round_run(sxe_loop_t *loop, const struct sxe_fibers_options *options,
                     sxe_fibers_t **fibers, sxe_fiber_t **held, struct figures *figures,
                     unsigned round)
{
    unsigned count = options->count;
    sxe_fiber_t *pinger;
    uint64_t start = sxe_clock_mono_ns();

    for (unsigned i = 0; i < count; i++) {
        if (sxe_fiber_start(*fibers, body, NULL, NULL) < 0) {
            return -1;
        }
    }
    figures->one_by_one[round] = ms_since(start);

    start = sxe_clock_mono_ns();
    for (unsigned i = 0; i < count; i++) {
        if (sxe_fiber_start(*fibers, waits_once, NULL, &held[i]) < 0) {
            return -1;
        }
    }
    for (unsigned i = 0; i < count; i++) {
        (void)sxe_fiber_wake(held[i], 0);
    }
    figures->all_at_once[round] = ms_since(start);

    if (sxe_fiber_start(*fibers, ping, NULL, &pinger) < 0) {
        return -1;
    }
    start = sxe_clock_mono_ns();
    for (unsigned i = 0; i < SWITCHES / 2; i++) {
        (void)sxe_fiber_wake(pinger, 0); /* two switches: in, and back out */
    }
    figures->switch_ns[round] = (double)(sxe_clock_mono_ns() - start) / SWITCHES;
    sxe_fibers_destroy(*fibers); /* the pinger never ends: abandon it with its pool */
    start = sxe_clock_mono_ns();
    if (sxe_fibers_create(fibers, loop, options) < 0) {
        return -1;
    }
    figures->pool_ms[round + 1] = ms_since(start);

    start = sxe_clock_mono_ns();
    for (unsigned i = 0; i < count; i++) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, thread_body, NULL) == 0) {
            pthread_join(thread, NULL);
        }
    }
    figures->threads[round] = ms_since(start);
    return 0;
}

static int print_json(const struct sxe_fibers_options *options, const struct figures *figures,
                      unsigned rounds)
{
    char count[BENCH_THOUSANDS_SIZE], stack_size[BENCH_THOUSANDS_SIZE];
    struct bench_json json;

    bench_thousands(count, options->count);
    bench_thousands(stack_size, options->stack_size);
    bench_json_begin(&json, "fiber");
    bench_json_param(&json, "count", options->count);
    bench_json_param(&json, "rounds", rounds);
    bench_json_param(&json, "stack_size", options->stack_size);
    bench_json_param(&json, "switches", SWITCHES);
    bench_json_row(&json, "ms", BENCH_LOWER, figures->pool_ms, rounds + 1,
                   "a pool of %s stacks of %s bytes, mapped and faulted in (at start-up, then "
                   "once a round)",
                   count, stack_size);
    bench_json_row(&json, "ms", BENCH_LOWER, figures->one_by_one, rounds,
                   "%s fibers created and run, one after another", count);
    bench_json_row(&json, "ms", BENCH_LOWER, figures->all_at_once, rounds,
                   "%s fibers created and run, all alive at once, each waiting once", count);
    bench_json_row(&json, "ns", BENCH_LOWER, figures->switch_ns, rounds, "a fiber switch");
    bench_json_row(&json, "ms", BENCH_LOWER, figures->threads, rounds,
                   "%s threads created and joined", count);
    return bench_json_end(&json);
}

static void print_human(const struct sxe_fibers_options *options, struct figures *figures,
                        unsigned rounds)
{
    unsigned count = options->count;

    printf("a pool of %u stacks of %u bytes, mapped and faulted in: %.1f ms (once, at start-up)\n",
           count, options->stack_size, figures->pool_ms[0]);
    printf("%u fibers created and run: %.2f ms (one after another)\n", count,
           median(figures->one_by_one, rounds));
    printf("%u fibers created and run: %.2f ms (all alive at once, each waiting once)\n", count,
           median(figures->all_at_once, rounds));
    printf("a switch: %.1f ns\n", median(figures->switch_ns, rounds));
    printf("%u threads created and joined: %.1f ms\n", count, median(figures->threads, rounds));
    printf("medians of %u rounds\n", rounds);
}

int main(int argc, char **argv)
{
    bool json = bench_option(&argc, argv, "--json");
    bool quick = bench_option(&argc, argv, "--quick");
    unsigned count = argc > 1 ? (unsigned)atoi(argv[1]) : quick ? 1000 : 10000;
    unsigned rounds = argc > 2 ? (unsigned)atoi(argv[2]) : 21;
    struct sxe_loop_options loop_options = {.connections = 16, .timers = 16};
    struct sxe_fibers_options options = {.count = count, .stack_size = 16384};
    sxe_fiber_t **held = calloc(count, sizeof(*held));
    struct figures figures = {.pool_ms = calloc(rounds + 1, sizeof(double)),
                              .one_by_one = calloc(rounds, sizeof(double)),
                              .all_at_once = calloc(rounds, sizeof(double)),
                              .switch_ns = calloc(rounds, sizeof(double)),
                              .threads = calloc(rounds, sizeof(double))};
    struct bench_progress progress;
    sxe_loop_t *loop;
    sxe_fibers_t *fibers;

    if (count == 0 || rounds == 0 || held == NULL || figures.pool_ms == NULL ||
        figures.one_by_one == NULL || figures.all_at_once == NULL || figures.switch_ns == NULL ||
        figures.threads == NULL || sxe_loop_create(&loop, &loop_options) < 0) {
        return 1;
    }
    bench_progress_begin(&progress, "fiber");
    bench_progress(&progress, "making a pool of %u stacks", count);
    uint64_t start = sxe_clock_mono_ns();
    if (sxe_fibers_create(&fibers, loop, &options) < 0) {
        fprintf(stderr, "fiber: cannot make %u stacks\n", count);
        return 1;
    }
    figures.pool_ms[0] = ms_since(start);
    for (unsigned round = 0; round < rounds; round++) {
        bench_progress(&progress, "round %u of %u (%u fibers, %u threads)", round + 1, rounds,
                       count, count);
        if (round_run(loop, &options, &fibers, held, &figures, round) < 0) {
            return 1;
        }
    }
    if (ran != rounds * count * 3) {
        fprintf(stderr, "fiber: %u of %u bodies ran\n", ran, rounds * count * 3);
        return 1;
    }
    bench_progress_end(&progress);
    int status = 0;
    if (json) {
        status = print_json(&options, &figures, rounds);
    } else {
        print_human(&options, &figures, rounds);
    }
    sxe_fibers_destroy(fibers);
    sxe_loop_destroy(loop);
    return status;
}
