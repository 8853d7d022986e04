/*
 * libuv's side of bench/work: empty jobs through uv_queue_work on its pool of 4 threads (libuv's
 * default, UV_THREADPOOL_SIZE), 1,024 kept in flight (each after_work queues the next), and one at
 * a time; jobs a second, the process's CPU per job, a round trip's time. Written as a libuv user
 * would: a uv_work_t per job in flight, reused. Prints what bench/work --json prints.
 * Usage: libuv-work [--json] [--quick] [JOBS (5000000)] [ROUNDS (1)]
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#define IN_FLIGHT 1024
#define TRIPS     10000

static uv_loop_t *loop;
static uv_work_t requests[IN_FLIGHT];
static uint64_t submitted, finished, wanted;
static volatile uint64_t ran;

static void empty(uv_work_t *request)
{
    (void)request;
    __atomic_fetch_add(&ran, 1, __ATOMIC_RELAXED);
}

static void again(uv_work_t *request, int status)
{
    if (status != 0) {
        fprintf(stderr, "libuv-work: a job said %d\n", status);
        exit(1);
    }
    ++finished;
    if (submitted < wanted) {
        submitted++;
        if (uv_queue_work(loop, request, empty, again) != 0) {
            exit(1);
        }
    }
}

static double cpu_us(void)
{
    struct rusage usage;

    getrusage(RUSAGE_SELF, &usage);
    return (double)usage.ru_utime.tv_sec * 1e6 + (double)usage.ru_utime.tv_usec +
           (double)usage.ru_stime.tv_sec * 1e6 + (double)usage.ru_stime.tv_usec;
}

/* Runs count jobs with up to in_flight at once; returns the wall time in ns (uv_run ends when
 * no job is left). */
static uint64_t run(uint64_t count, uint64_t in_flight)
{
    uint64_t start = uv_hrtime();

    submitted = finished = 0;
    wanted = count;
    while (submitted < in_flight && submitted < count) {
        if (uv_queue_work(loop, &requests[submitted++], empty, again) != 0) {
            exit(1);
        }
    }
    uv_run(loop, UV_RUN_DEFAULT);
    if (finished != count) {
        exit(1);
    }
    return uv_hrtime() - start;
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void row(const char *name, const char *unit, const char *better, const double *values,
                unsigned count, bool first)
{
    printf("%s\n  {\"name\": \"%s\", \"unit\": \"%s\", \"better\": \"%s\", \"rounds\": [",
           first ? "" : ",", name, unit, better);
    for (unsigned i = 0; i < count; i++) {
        printf("%s%.10g", i > 0 ? ", " : "", values[i]);
    }
    printf("]}");
}

int main(int argc, char **argv)
{
    bool json = false, quick = false;
    int positional = 0;
    uint64_t jobs = 0;
    unsigned rounds = 1;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else if (positional++ == 0) {
            jobs = strtoull(argv[i], NULL, 10);
        } else {
            rounds = (unsigned)atoi(argv[i]);
        }
    }
    jobs = jobs != 0 ? jobs : quick ? 200000 : 5000000;
    double *rate = calloc(rounds, sizeof(double)), *cpu = calloc(rounds, sizeof(double));
    double *trip = calloc(rounds, sizeof(double)), *trips = calloc(TRIPS, sizeof(double));
    loop = uv_default_loop();
    if (rounds == 0 || rate == NULL || cpu == NULL || trip == NULL || trips == NULL) {
        return 1;
    }
    for (unsigned r = 0; r < rounds; r++) {
        fprintf(stderr, "libuv-work: round %u of %u: %llu jobs, %u in flight\n", r + 1, rounds,
                (unsigned long long)jobs, IN_FLIGHT);
        double before = cpu_us();
        uint64_t ns = run(jobs, IN_FLIGHT);
        cpu[r] = (cpu_us() - before) / (double)jobs;
        rate[r] = (double)jobs * 1e9 / (double)ns;
        for (unsigned t = 0; t < TRIPS; t++) {
            trips[t] = (double)run(1, 1) / 1e3;
        }
        qsort(trips, TRIPS, sizeof(double), compare);
        trip[r] = trips[TRIPS / 2];
    }
    if (ran != rounds * (jobs + TRIPS)) {
        return 1;
    }
    if (!json) {
        for (unsigned r = 0; r < rounds; r++) {
            printf("round %u: %.0f jobs/s, %.2f us CPU a job, round trip %.1f us\n", r + 1, rate[r],
                   cpu[r], trip[r]);
        }
        return 0;
    }
    printf("{\"bench\": \"work\", \"params\": {\"pool\": \"libuv %s\", \"threads\": 4, \"jobs\": "
           "%llu, \"in_flight\": %u},\n \"rows\": [",
           uv_version_string(), (unsigned long long)jobs, IN_FLIGHT);
    row("empty jobs, 1024 in flight", "jobs/s", "higher", rate, rounds, true);
    row("CPU per job, 1024 in flight", "us", "lower", cpu, rounds, false);
    row("a job's round trip, one at a time", "us", "lower", trip, rounds, false);
    printf("\n ], \"once\": []}\n");
    return 0;
}
