/*
 * "Cache lines decide": random lookups of N records (30 million by default, 32 bytes each: an
 * 8-byte key and a 24-byte value, about 1 GB) by binary search over the records sorted by key,
 * against sxe_hash holding the same records, one lookup at a time and in batches.
 *
 * Configurations, interleaved over rounds, medians reported (with --json, every round's rate:
 * bench/bench_json.h):
 *   bsearch (key order)  lookups in ascending key order: each search reuses the last one's lines
 *   bsearch              lookups in random order: about log2(N) cache misses each
 *   sxe_hash find        one sxe_hash_find() per lookup: about one miss each
 *   sxe_hash find_many   sxe_hash_find_many() over batches of 64 keys: the misses overlap
 * Each lookup's value is checked, so a wrong answer stops the run.
 *
 * 5 million random lookups a round by default: the records and the table (2.5 GB together) stay
 * far beyond the caches, and the whole run, half of it making them, stays under a minute on a
 * shared 2-core machine, where 30 million (the run on record in docs/benchmarks.md, -l 30000000)
 * took two and a half, a random bsearch being a microsecond or more. --quick, for a check that
 * it works rather than a figure, makes the records and the lookups 1 million unless they are given.
 *
 * Usage: hash [--json] [--quick] [-n records (30000000)] [-l lookups (5000000)]
 *             [-r rounds (3)] [-c cpu (0)] [-L load-percent (80)]
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sxe/sxe.h>

#include "bench_json.h"
#include "bench_progress.h"

#define ROUNDS_MAX 15
#define BATCH      64
#define CHUNK      (1u << 20) /* lookups between progress reports; a multiple of BATCH */

struct record {
    uint64_t key;
    uint64_t value[3];
};

/* Keys ascend with the index and are spread over the 64-bit space unevenly: i * 64 plus 0..63. */
static uint64_t key_of(uint64_t i)
{
    uint64_t mixed = i * 0x9e3779b97f4a7c15ULL;
    return i * 64 + (mixed >> 58);
}

static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static int compare_key(const void *key, const void *element)
{
    uint64_t left = *(const uint64_t *)key, right = ((const struct record *)element)->key;
    return left < right ? -1 : left > right;
}

static void *map_huge(size_t size)
{
    void *memory = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(memory, size, MADV_HUGEPAGE);
    return memory;
}

static void check(const struct record *found, uint64_t key)
{
    if (found == NULL || found->value[0] != ~key) {
        fprintf(stderr, "wrong answer for key %llu\n", (unsigned long long)key);
        exit(1);
    }
}

static void check_value(const uint64_t *value, uint64_t key)
{
    if (value == NULL || value[0] != ~key) {
        fprintf(stderr, "wrong answer for key %llu\n", (unsigned long long)key);
        exit(1);
    }
}

enum method { SORTED_ORDER, BSEARCH, FIND, FIND_MANY, METHODS };
static const char *const method_names[] = {"bsearch (key order)", "bsearch", "sxe_hash find",
                                           "sxe_hash find_many"};

/* What the lookups are made in, and with. */
struct tables {
    const struct record *records; /* sorted by key */
    uint64_t count;
    sxe_hash_t *hash; /* the same records */
    const uint64_t *keys;
    uint64_t lookups;
};

/* Looks up keys first to end - 1 by method, checking every answer. */
static void lookup(enum method method, const struct tables *tables, uint64_t first, uint64_t end)
{
    const struct record *records = tables->records;
    const uint64_t *keys = tables->keys;
    uint64_t count = tables->count;

    if (method == SORTED_ORDER || method == BSEARCH) {
        for (uint64_t i = first; i < end; i++) {
            uint64_t key = method == SORTED_ORDER ? key_of(i % count) : keys[i];
            check(bsearch(&key, records, count, sizeof(*records), compare_key), key);
        }
    } else if (method == FIND) {
        for (uint64_t i = first; i < end; i++) {
            check_value(sxe_hash_find(tables->hash, &keys[i], 8, NULL), keys[i]);
        }
    } else {
        const void *pointers[BATCH], *values[BATCH];
        for (uint64_t batch_first = first; batch_first < end; batch_first += BATCH) {
            size_t batch = end - batch_first < BATCH ? end - batch_first : BATCH;
            for (size_t i = 0; i < batch; i++) {
                pointers[i] = &keys[batch_first + i];
            }
            sxe_hash_find_many(tables->hash, batch, pointers, NULL, values, NULL);
            for (size_t i = 0; i < batch; i++) {
                check_value(values[i], keys[batch_first + i]);
            }
        }
    }
}

/*
 * Runs all the lookups by method and returns the seconds they took. They go in chunks of a million
 * or so, between which the progress may be told: a random bsearch of 5 million takes five
 * seconds or more, and a clock read a million lookups costs nothing that shows.
 */
static double run(enum method method, const struct tables *tables, struct bench_progress *progress,
                  unsigned round, unsigned rounds)
{
    uint64_t start = sxe_clock_mono_ns();

    for (uint64_t first = 0; first < tables->lookups; first += CHUNK) {
        bench_progress(progress, "round %u of %u: %s, %llu of %llu lookups", round + 1, rounds,
                       method_names[method], (unsigned long long)first,
                       (unsigned long long)tables->lookups);
        uint64_t end = tables->lookups - first < CHUNK ? tables->lookups : first + CHUNK;
        lookup(method, tables, first, end);
    }
    return (double)(sxe_clock_mono_ns() - start) / 1e9;
}

static int by_double(const void *a, const void *b)
{
    double left = *(const double *)a, right = *(const double *)b;
    return left < right ? -1 : left > right;
}

struct config {
    uint64_t count, lookups;
    unsigned rounds, load;
    int cpu;
};

static void parse(int argc, char **argv, struct config *config)
{
    int option;

    while ((option = getopt(argc, argv, "n:l:r:c:L:")) != -1) {
        switch (option) {
        case 'n':
            config->count = strtoull(optarg, NULL, 10);
            break;
        case 'l':
            config->lookups = strtoull(optarg, NULL, 10);
            break;
        case 'r':
            config->rounds = (unsigned)atoi(optarg);
            break;
        case 'c':
            config->cpu = atoi(optarg);
            break;
        case 'L':
            config->load = (unsigned)atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: hash [--json] [--quick] [-n records] [-l lookups] [-r rounds] "
                            "[-c cpu] [-L load-percent]\n");
            exit(2);
        }
    }
    if (config->count == 0 || config->lookups == 0 || config->rounds == 0 ||
        config->rounds > ROUNDS_MAX) {
        fprintf(stderr, "hash: records and lookups must be at least 1, rounds 1 to %d\n",
                ROUNDS_MAX);
        exit(2);
    }
}

/* Makes the sorted records, the table holding them, and the random keys to look up. */
static int fill(struct tables *tables, const struct sxe_hash_options *options,
                struct bench_progress *progress)
{
    uint64_t count = tables->count, lookups = tables->lookups;
    struct record *records = map_huge(count * sizeof(*records));

    if (sxe_hash_create(&tables->hash, options) < 0) {
        fprintf(stderr, "hash: cannot make the table\n");
        return -1;
    }
    for (uint64_t i = 0; i < count; i++) {
        if (i % CHUNK == 0) {
            bench_progress(progress, "filling: %llu of %llu records", (unsigned long long)i,
                           (unsigned long long)count);
        }
        records[i].key = key_of(i);
        records[i].value[0] = ~records[i].key;
        records[i].value[1] = records[i].value[2] = i;
        if (sxe_hash_put(tables->hash, &records[i].key, 8, records[i].value, 24) != 0) {
            fprintf(stderr, "hash: put %llu failed\n", (unsigned long long)i);
            return -1;
        }
    }
    uint64_t *keys = map_huge(lookups * sizeof(*keys)), state = 88172645463325252ULL;
    for (uint64_t i = 0; i < lookups; i++) {
        keys[i] = key_of(next_random(&state) % count);
    }
    tables->records = records;
    tables->keys = keys;
    return 0;
}

/*
 * Lookups a second, and how many times as fast as a random bsearch each of sxe_hash's is within
 * each round; then the peak RSS, measured once.
 */
static int print_json(const struct config *config, const struct sxe_hash_options *options,
                      const struct sxe_hash_stats *stats, double seconds[METHODS][ROUNDS_MAX],
                      double peak_rss_mb)
{
    char records[BENCH_THOUSANDS_SIZE];
    double values[ROUNDS_MAX];
    unsigned rounds = config->rounds;
    struct bench_json json;

    bench_json_begin(&json, "hash");
    bench_json_param(&json, "records", config->count);
    bench_json_param(&json, "record_bytes", sizeof(struct record));
    bench_json_param(&json, "table_bytes", sxe_hash_size(options));
    bench_json_param(&json, "slots", stats->slots);
    bench_json_param(&json, "load_percent", config->load != 0 ? config->load : 80); /* hash.h */
    bench_json_param(&json, "lookups", config->lookups);
    bench_json_param(&json, "batch", BATCH);
    bench_json_param(&json, "rounds", rounds);
    bench_json_param(&json, "cpu", (uint64_t)config->cpu);
    bench_thousands(records, config->count);
    for (unsigned m = 0; m < METHODS; m++) {
        for (unsigned round = 0; round < rounds; round++) {
            values[round] = (double)config->lookups / seconds[m][round];
        }
        bench_json_row(&json, "lookups/s", BENCH_HIGHER, values, rounds,
                       "lookups in %s records: %s", records, method_names[m]);
    }
    for (unsigned m = FIND; m < METHODS; m++) {
        for (unsigned round = 0; round < rounds; round++) {
            values[round] = seconds[BSEARCH][round] / seconds[m][round];
        }
        bench_json_row(&json, "x", BENCH_HIGHER, values, rounds,
                       "lookups in %s records: %s against bsearch, per round", records,
                       method_names[m]);
    }
    bench_json_once(&json, "MB", BENCH_LOWER, peak_rss_mb, "peak RSS");
    return bench_json_end(&json);
}

static void print_human(const struct config *config, double seconds[METHODS][ROUNDS_MAX],
                        double peak_rss_mb)
{
    unsigned rounds = config->rounds;
    double lookups = (double)config->lookups;
    double median[METHODS];

    for (unsigned m = 0; m < METHODS; m++) {
        qsort(seconds[m], rounds, sizeof(double), by_double);
        median[m] = seconds[m][rounds / 2];
    }
    for (unsigned m = 0; m < METHODS; m++) {
        double rate = lookups / median[m];
        printf("%-20s %8.2f s %7.1f ns/lookup %8.2fM lookups/s", method_names[m], median[m],
               median[m] * 1e9 / lookups, rate / 1e6);
        if (m >= FIND) {
            printf("  %.1fx bsearch", median[BSEARCH] / median[m]);
        }
        printf("\n");
    }
    printf("peak RSS %.0f MB\n", peak_rss_mb);
}

int main(int argc, char **argv)
{
    bool json = bench_option(&argc, argv, "--json");
    bool quick = bench_option(&argc, argv, "--quick");
    struct config config = {
        .count = quick ? 1000000 : 30000000, .lookups = quick ? 1000000 : 5000000, .rounds = 3};
    struct bench_progress progress;

    parse(argc, argv, &config);
    uint64_t count = config.count, lookups = config.lookups;
    unsigned rounds = config.rounds;
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(config.cpu, &cpus);
    sched_setaffinity(0, sizeof(cpus), &cpus);

    struct sxe_hash_options options = {.name = "bench",
                                       .capacity = count,
                                       .key_size = 8,
                                       .value_size = 24,
                                       .load_percent = config.load,
                                       .seed = 0x5eed};
    struct tables tables = {.count = count, .lookups = lookups};
    bench_progress_begin(&progress, "hash");
    if (fill(&tables, &options, &progress) < 0) {
        return 1;
    }
    struct sxe_hash_stats stats;
    sxe_hash_stats(tables.hash, &stats);
    if (!json) {
        printf("hash: %llu records of 32 bytes (%.0f MB sorted; the table %.0f MB, %llu slots of "
               "40 bytes), %llu random lookups, %u rounds, CPU %d\n",
               (unsigned long long)count, count * 32.0 / 1e6, sxe_hash_size(&options) / 1e6,
               (unsigned long long)stats.slots, (unsigned long long)lookups, rounds, config.cpu);
    }

    double seconds[METHODS][ROUNDS_MAX];
    for (unsigned round = 0; round < rounds; round++) {
        for (unsigned m = 0; m < METHODS; m++) {
            seconds[m][round] = run((enum method)m, &tables, &progress, round, rounds);
        }
    }
    bench_progress_end(&progress);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double peak_rss_mb = usage.ru_maxrss / 1024.0;
    if (json) {
        return print_json(&config, &options, &stats, seconds, peak_rss_mb);
    }
    print_human(&config, seconds, peak_rss_mb);
    return 0;
}
