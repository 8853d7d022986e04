/*
 * What the work pool costs (sxe/work.h): empty jobs through 4 threads, as many as the queue holds
 * kept in flight (each done callback submits the next), and one job at a time (submit, wait for
 * its callback, again): jobs a second, the process's CPU per job, and a round trip's time.
 * bench/peers/libuv-work.c measures libuv's uv_queue_work the same way; bench/all's "work" suite
 * runs the two in turn. One round a run unless ROUNDS is given. Usage:
 *
 *     taskset -c 0,1 bench/work [--json] [--quick] [JOBS (5000000)] [ROUNDS (1)]
 */
#include <stdio.h>
#include <stdlib.h>

#include "sxe/clock.h"
#include "sxe/loop.h"
#include "sxe/work.h"

#include "bench_json.h"
#include "bench_progress.h"

#define THREADS   4
#define IN_FLIGHT 1024
#define TRIPS     10000

static sxe_loop_t *loop;
static sxe_work_pool_t *pool;
static uint64_t submitted, finished, wanted;
static volatile uint64_t ran;

static void empty(void *arg)
{
    (void)arg;
    __atomic_fetch_add(&ran, 1, __ATOMIC_RELAXED);
}

static void again(void *arg, int status)
{
    (void)arg;
    if (status != 0) {
        fprintf(stderr, "work: a job said %d\n", status);
        exit(1);
    }
    if (++finished == wanted) {
        sxe_loop_stop(loop);
    } else if (submitted < wanted) {
        submitted++;
        if (sxe_work_submit(pool, empty, again, NULL, NULL) < 0) {
            exit(1);
        }
    }
}

/* Runs count jobs with up to in_flight at once; returns the wall time in ns. */
static uint64_t run(uint64_t count, uint64_t in_flight)
{
    uint64_t start = sxe_clock_mono_ns();

    submitted = finished = 0;
    wanted = count;
    while (submitted < in_flight && submitted < count) {
        submitted++;
        if (sxe_work_submit(pool, empty, again, NULL, NULL) < 0) {
            exit(1);
        }
    }
    if (sxe_loop_run(loop) < 0) {
        exit(1);
    }
    return sxe_clock_mono_ns() - start;
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int report(const double *rate, const double *cpu, const double *trip, unsigned rounds,
                  uint64_t jobs);

int main(int argc, char **argv)
{
    bool json = bench_option(&argc, argv, "--json");
    bool quick = bench_option(&argc, argv, "--quick");
    uint64_t jobs = argc > 1 ? strtoull(argv[1], NULL, 10) : quick ? 200000 : 5000000;
    unsigned rounds = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
    double *rate = calloc(rounds, sizeof(double)), *cpu = calloc(rounds, sizeof(double));
    double *trip = calloc(rounds, sizeof(double)), *trips = calloc(TRIPS, sizeof(double));
    struct bench_progress progress;

    if (jobs == 0 || rounds == 0 || rate == NULL || cpu == NULL || trip == NULL || trips == NULL ||
        sxe_loop_create(&loop, NULL) < 0 ||
        sxe_work_pool_create(
            &pool, loop, &(struct sxe_work_options){.threads = THREADS, .queue = IN_FLIGHT}) < 0) {
        fprintf(stderr, "usage: work [--json] [--quick] [JOBS] [ROUNDS]\n");
        return 1;
    }
    bench_progress_begin(&progress, "work");
    for (unsigned r = 0; r < rounds; r++) {
        bench_progress(&progress, "round %u of %u: %llu jobs, %u in flight", r + 1, rounds,
                       (unsigned long long)jobs, IN_FLIGHT);
        double before = bench_cpu_us();
        uint64_t ns = run(jobs, IN_FLIGHT);
        cpu[r] = (bench_cpu_us() - before) / (double)jobs;
        rate[r] = (double)jobs * 1e9 / (double)ns;
        bench_progress(&progress, "round %u of %u: %u round trips", r + 1, rounds, TRIPS);
        for (unsigned t = 0; t < TRIPS; t++) {
            trips[t] = (double)run(1, 1) / 1e3;
        }
        qsort(trips, TRIPS, sizeof(double), compare);
        trip[r] = trips[TRIPS / 2];
    }
    if (ran != rounds * (jobs + TRIPS)) {
        fprintf(stderr, "work: %llu jobs ran, not %llu\n", (unsigned long long)ran,
                (unsigned long long)(rounds * (jobs + TRIPS)));
        return 1;
    }
    sxe_work_pool_destroy(pool);
    sxe_loop_destroy(loop);
    free(trips);
    int rc = 0;
    if (!json) {
        for (unsigned r = 0; r < rounds; r++) {
            printf("round %u: %.0f jobs/s, %.2f us CPU a job, round trip %.1f us\n", r + 1, rate[r],
                   cpu[r], trip[r]);
        }
    } else {
        rc = report(rate, cpu, trip, rounds, jobs);
    }
    free(rate);
    free(cpu);
    free(trip);
    return rc;
}

/* The figures as bench/bench_json.h's document. */
static int report(const double *rate, const double *cpu, const double *trip, unsigned rounds,
                  uint64_t jobs)
{
    struct bench_json out;
    bench_json_begin(&out, "work");
    bench_json_param_text(&out, "pool", "sxe_work");
    bench_json_param(&out, "threads", THREADS);
    bench_json_param(&out, "jobs", jobs);
    bench_json_param(&out, "in_flight", IN_FLIGHT);
    bench_json_row(&out, "jobs/s", BENCH_HIGHER, rate, rounds, "empty jobs, %u in flight",
                   IN_FLIGHT);
    bench_json_row(&out, "us", BENCH_LOWER, cpu, rounds, "CPU per job, %u in flight", IN_FLIGHT);
    bench_json_row(&out, "us", BENCH_LOWER, trip, rounds, "a job's round trip, one at a time");
    return bench_json_end(&out);
}
