/*
 * What fibers cost: 10,000 fibers created and run to completion, one after another and all alive
 * at once; a switch; and, in the same run, 10,000 threads created and joined, the alternative a
 * blocking-style program would otherwise use. Medians over rounds. Usage:
 *
 *     taskset -c 0 bench/fiber [COUNT (10000)] [ROUNDS (21)]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "sxe/clock.h"
#include "sxe/fiber.h"
#include "sxe/loop.h"

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

int main(int argc, char **argv)
{
    unsigned count = argc > 1 ? (unsigned)atoi(argv[1]) : 10000;
    unsigned rounds = argc > 2 ? (unsigned)atoi(argv[2]) : 21;
    struct sxe_loop_options loop_options = {.connections = 16, .timers = 16};
    struct sxe_fibers_options options = {.count = count, .stack_size = 16384};
    sxe_fiber_t **held = calloc(count, sizeof(*held)), *pinger;
    double *one_by_one = calloc(rounds, sizeof(double)),
           *all_at_once = calloc(rounds, sizeof(double));
    double *switch_ns = calloc(rounds, sizeof(double)), *threads = calloc(rounds, sizeof(double));
    sxe_loop_t *loop;
    sxe_fibers_t *fibers;

    if (count == 0 || rounds == 0 || held == NULL || sxe_loop_create(&loop, &loop_options) < 0) {
        return 1;
    }
    uint64_t start = sxe_clock_mono_ns();
    if (sxe_fibers_create(&fibers, loop, &options) < 0) {
        fprintf(stderr, "fiber: cannot make %u stacks\n", count);
        return 1;
    }
    printf("a pool of %u stacks of %u bytes, mapped and faulted in: %.1f ms (once, at start-up)\n",
           count, options.stack_size, ms_since(start));
    for (unsigned round = 0; round < rounds; round++) {
        start = sxe_clock_mono_ns();
        for (unsigned i = 0; i < count; i++) {
            if (sxe_fiber_start(fibers, body, NULL, NULL) < 0) {
                return 1;
            }
        }
        one_by_one[round] = ms_since(start);

        start = sxe_clock_mono_ns();
        for (unsigned i = 0; i < count; i++) {
            if (sxe_fiber_start(fibers, waits_once, NULL, &held[i]) < 0) {
                return 1;
            }
        }
        for (unsigned i = 0; i < count; i++) {
            (void)sxe_fiber_wake(held[i], 0);
        }
        all_at_once[round] = ms_since(start);

        if (sxe_fiber_start(fibers, ping, NULL, &pinger) < 0) {
            return 1;
        }
        start = sxe_clock_mono_ns();
        for (unsigned i = 0; i < SWITCHES / 2; i++) {
            (void)sxe_fiber_wake(pinger, 0); /* two switches: in, and back out */
        }
        switch_ns[round] = (double)(sxe_clock_mono_ns() - start) / SWITCHES;
        sxe_fibers_destroy(fibers); /* the pinger never ends: abandon it with its pool */
        if (sxe_fibers_create(&fibers, loop, &options) < 0) {
            return 1;
        }

        start = sxe_clock_mono_ns();
        for (unsigned i = 0; i < count; i++) {
            pthread_t thread;
            if (pthread_create(&thread, NULL, thread_body, NULL) == 0) {
                pthread_join(thread, NULL);
            }
        }
        threads[round] = ms_since(start);
    }
    if (ran != rounds * count * 3) {
        fprintf(stderr, "fiber: %u of %u bodies ran\n", ran, rounds * count * 3);
        return 1;
    }
    printf("%u fibers created and run: %.2f ms (one after another)\n", count,
           median(one_by_one, rounds));
    printf("%u fibers created and run: %.2f ms (all alive at once, each waiting once)\n", count,
           median(all_at_once, rounds));
    printf("a switch: %.1f ns\n", median(switch_ns, rounds));
    printf("%u threads created and joined: %.1f ms\n", count, median(threads, rounds));
    printf("medians of %u rounds\n", rounds);
    sxe_fibers_destroy(fibers);
    sxe_loop_destroy(loop);
    return 0;
}
