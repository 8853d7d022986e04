/*
 * Pool state changes per second, against the classic alternative: a malloc'd, timestamped node per
 * element on a doubly linked list of pointers per state, freed and allocated again on every change.
 *
 * Two workloads over N elements (10,000 by default) spread over 4 states, each operation one state
 * change stamped with a time:
 *   fifo    move the oldest element of state s to state s+1 (s cycles through the 4 states)
 *   random  move a random element from its state to the next one
 * Configurations, interleaved over rounds, medians reported (with --json, every round's rate:
 * bench/bench_json.h):
 *   pool            private, unlocked (one event loop)
 *   baseline        malloc/free + doubly linked list of pointers, the same job
 *   shared          a shared pool with its robust process-shared lock, one process
 *   shared x2       the same pool, 2 processes changing states at once (total rate)
 *
 * --quick makes the operations 200,000 a run unless they are given.
 *
 * Usage: pool [--json] [--quick] [operations-per-run (5000000)] [rounds (5)] [elements (10000)]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sxe/sxe.h>

#include "bench_json.h"
#include "bench_progress.h"

#define STATES     4u
#define ROUNDS_MAX 31

struct element {
    uint64_t payload[2];
};

/* The baseline: what people write without pools. */
struct bnode {
    struct bnode *prev;
    struct bnode *next;
    uint64_t time;
    uint32_t index;
    unsigned state;
};

static uint32_t elements = 10000;

struct baseline {
    struct bnode heads[STATES]; /* circular lists through these heads */
    uint32_t counts[STATES];
    struct bnode **nodes; /* element -> its node */
};

static void baseline_append(struct baseline *b, uint32_t index, unsigned state, uint64_t now)
{
    struct bnode *node = malloc(sizeof(*node));
    struct bnode *head = &b->heads[state];

    if (node == NULL) {
        abort();
    }
    node->time = now;
    node->index = index;
    node->state = state;
    node->prev = head->prev;
    node->next = head;
    head->prev->next = node;
    head->prev = node;
    b->counts[state]++;
    b->nodes[index] = node;
}

static void baseline_move(struct baseline *b, uint32_t index, unsigned to, uint64_t now)
{
    struct bnode *node = b->nodes[index];

    node->prev->next = node->next;
    node->next->prev = node->prev;
    b->counts[node->state]--;
    free(node);
    baseline_append(b, index, to, now);
}

static struct baseline *baseline_create(void)
{
    struct baseline *b = calloc(1, sizeof(*b));

    b->nodes = calloc(elements, sizeof(*b->nodes));
    for (unsigned s = 0; s < STATES; s++) {
        b->heads[s].prev = b->heads[s].next = &b->heads[s];
    }
    for (uint32_t i = 0; i < elements; i++) {
        baseline_append(b, i, i % STATES, 0);
    }
    return b;
}

static void baseline_destroy(struct baseline *b)
{
    for (uint32_t i = 0; i < elements; i++) {
        free(b->nodes[i]);
    }
    free(b->nodes);
    free(b);
}

/* The element the random workload moves at operation op: a multiplicative hash, spread evenly. */
static uint32_t random_index(unsigned op)
{
    return (uint32_t)((op * 2654435761u) % elements);
}

static double baseline_run(int random, unsigned operations)
{
    struct baseline *b = baseline_create();
    uint64_t start = sxe_clock_mono_ns();

    for (unsigned op = 0; op < operations; op++) {
        if (random) {
            uint32_t index = random_index(op);
            baseline_move(b, index, (b->nodes[index]->state + 1) % STATES, op);
        } else {
            unsigned from = op % STATES;
            baseline_move(b, b->heads[from].next->index, (from + 1) % STATES, op);
        }
    }
    double seconds = (double)(sxe_clock_mono_ns() - start) / 1e9;
    baseline_destroy(b);
    return operations / seconds;
}

static sxe_pool_t *pool_make(unsigned flags)
{
    struct sxe_pool_options options = {.name = "bench",
                                       .count = elements,
                                       .element_size = sizeof(struct element),
                                       .state_count = STATES,
                                       .flags = flags};
    sxe_pool_t *pool;

    if (sxe_pool_create(&pool, &options) != 0) {
        abort();
    }
    for (uint32_t i = 0; i < elements; i++) {
        if (i % STATES != 0 && sxe_pool_set_state(pool, i, 0, i % STATES, 0) != 0) {
            abort();
        }
    }
    return pool;
}

static void pool_work(sxe_pool_t *pool, int random, unsigned operations, unsigned seed)
{
    for (unsigned op = 0; op < operations; op++) {
        if (random) {
            uint32_t index = random_index(op + seed);
            unsigned from = (unsigned)sxe_pool_state(pool, index);
            sxe_pool_try_set_state(pool, index, from, (from + 1) % STATES, op);
        } else {
            unsigned from = op % STATES;
            sxe_pool_set_oldest_state(pool, from, (from + 1) % STATES, op);
        }
    }
}

static double pool_run(unsigned flags, int random, unsigned operations)
{
    sxe_pool_t *pool = pool_make(flags);
    uint64_t start = sxe_clock_mono_ns();

    pool_work(pool, random, operations, 0);
    double seconds = (double)(sxe_clock_mono_ns() - start) / 1e9;
    sxe_pool_destroy(pool);
    return operations / seconds;
}

/* Two processes on one shared pool; the rate is both processes' operations over the wall time. */
static double contended_run(int random, unsigned operations)
{
    sxe_pool_t *pool = pool_make(SXE_POOL_SHARED);
    pid_t children[2];
    uint64_t start = sxe_clock_mono_ns();

    for (unsigned i = 0; i < 2; i++) {
        if ((children[i] = fork()) == 0) {
            pool_work(pool, random, operations, i * 7777);
            _exit(0);
        }
    }
    for (unsigned i = 0; i < 2; i++) {
        waitpid(children[i], NULL, 0);
    }
    double seconds = (double)(sxe_clock_mono_ns() - start) / 1e9;
    sxe_pool_destroy(pool);
    return 2.0 * operations / seconds;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, unsigned count)
{
    qsort(values, count, sizeof(double), compare_doubles);
    return values[count / 2];
}

enum { POOL, BASELINE, SHARED, SHARED_X2, CONFIGS };
static const char *const config_names[] = {"pool (private, unlocked)", "baseline (malloc + list)",
                                           "shared pool, 1 process", "shared pool, 2 processes"};
static const char *const workload_names[] = {"fifo", "random"};

static double config_run(unsigned config, int random, unsigned operations)
{
    switch (config) {
    case POOL:
        return pool_run(0, random, operations);
    case BASELINE:
        return baseline_run(random, operations);
    case SHARED:
        return pool_run(SXE_POOL_SHARED, random, operations);
    default:
        return contended_run(random, operations);
    }
}

/* Each round's state changes a second, and pool / baseline within each round. */
static int print_json(double rates[2][CONFIGS][ROUNDS_MAX], unsigned operations, unsigned rounds)
{
    char count[BENCH_THOUSANDS_SIZE];
    double values[ROUNDS_MAX];
    struct bench_json json;

    bench_json_begin(&json, "pool");
    bench_json_param(&json, "elements", elements);
    bench_json_param(&json, "states", STATES);
    bench_json_param(&json, "operations", operations);
    bench_json_param(&json, "rounds", rounds);
    bench_thousands(count, elements);
    for (int random = 0; random < 2; random++) {
        for (unsigned config = 0; config < CONFIGS; config++) {
            bench_json_row(&json, "ops/s", BENCH_HIGHER, rates[random][config], rounds,
                           "%s state changes of %s elements: %s", workload_names[random], count,
                           config_names[config]);
        }
        for (unsigned round = 0; round < rounds; round++) {
            values[round] = rates[random][POOL][round] / rates[random][BASELINE][round];
        }
        bench_json_row(&json, "x", BENCH_HIGHER, values, rounds,
                       "%s state changes of %s elements: pool / baseline, per round",
                       workload_names[random], count);
    }
    return bench_json_end(&json);
}

static void print_human(double rates[2][CONFIGS][ROUNDS_MAX], unsigned operations, unsigned rounds)
{
    printf("pool: %u elements, %u states, %u state changes per run, median of %u rounds\n",
           elements, STATES, operations, rounds);
    printf("%-28s %16s %16s\n", "", "fifo (M/s)", "random (M/s)");
    double medians[2][CONFIGS];
    for (unsigned config = 0; config < CONFIGS; config++) {
        for (int random = 0; random < 2; random++) {
            medians[random][config] = median(rates[random][config], rounds);
        }
        printf("%-28s %16.2f %16.2f\n", config_names[config], medians[0][config] / 1e6,
               medians[1][config] / 1e6);
    }
    printf("%-28s %15.2fx %15.2fx\n", "pool / baseline", medians[0][POOL] / medians[0][BASELINE],
           medians[1][POOL] / medians[1][BASELINE]);
}

int main(int argc, char **argv)
{
    bool json = bench_option(&argc, argv, "--json");
    bool quick = bench_option(&argc, argv, "--quick");
    unsigned operations = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10)
                          : quick  ? 200000u
                                   : 5000000u;
    unsigned rounds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 5;
    double rates[2][CONFIGS][ROUNDS_MAX];
    struct bench_progress progress;

    elements = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : elements;
    if (operations == 0 || rounds == 0 || rounds > ROUNDS_MAX || elements < STATES) {
        fprintf(stderr,
                "usage: pool [--json] [--quick] [operations > 0] [rounds 1..%d] [elements >= %u]\n",
                ROUNDS_MAX, STATES);
        return 2;
    }
    sxe_log_set_level(SXE_LOG_LEVEL_WARN);

    bench_progress_begin(&progress, "pool");
    for (unsigned round = 0; round < rounds; round++) {
        for (int random = 0; random < 2; random++) {
            for (unsigned config = 0; config < CONFIGS; config++) {
                bench_progress(&progress, "round %u of %u: %s, %s", round + 1, rounds,
                               workload_names[random], config_names[config]);
                rates[random][config][round] = config_run(config, random, operations);
            }
        }
    }
    bench_progress_end(&progress);
    if (json) {
        return print_json(rates, operations, rounds);
    }
    print_human(rates, operations, rounds);
    return 0;
}
