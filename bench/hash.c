/*
 * "Cache lines decide": random lookups of N records (30 million by default, 32 bytes each: an
 * 8-byte key and a 24-byte value, about 1 GB) by binary search over the records sorted by key,
 * against sxe_hash holding the same records, one lookup at a time and in batches.
 *
 * Configurations, interleaved over rounds, medians reported:
 *   bsearch (key order)  lookups in ascending key order: each search reuses the last one's lines
 *   bsearch              lookups in random order: about log2(N) cache misses each
 *   sxe_hash find        one sxe_hash_find() per lookup: about one miss each
 *   sxe_hash find_many   sxe_hash_find_many() over batches of 64 keys: the misses overlap
 * Each lookup's value is checked, so a wrong answer stops the run.
 *
 * Usage: hash [-n records] [-l lookups] [-r rounds] [-c cpu] [-L load-percent]
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sxe/sxe.h>

#define ROUNDS_MAX 15
#define BATCH      64

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

/* Runs lookups of method over the keys in order, and returns the seconds it took. */
static double run(enum method method, const struct record *records, uint64_t count,
                  sxe_hash_t *hash, const uint64_t *keys, uint64_t lookups)
{
    uint64_t start = sxe_clock_mono_ns();

    if (method == SORTED_ORDER || method == BSEARCH) {
        for (uint64_t i = 0; i < lookups; i++) {
            uint64_t key = method == SORTED_ORDER ? key_of(i % count) : keys[i];
            check(bsearch(&key, records, count, sizeof(*records), compare_key), key);
        }
    } else if (method == FIND) {
        for (uint64_t i = 0; i < lookups; i++) {
            check_value(sxe_hash_find(hash, &keys[i], 8, NULL), keys[i]);
        }
    } else {
        const void *pointers[BATCH], *values[BATCH];
        for (uint64_t first = 0; first < lookups; first += BATCH) {
            size_t batch = lookups - first < BATCH ? lookups - first : BATCH;
            for (size_t i = 0; i < batch; i++) {
                pointers[i] = &keys[first + i];
            }
            sxe_hash_find_many(hash, batch, pointers, NULL, values, NULL);
            for (size_t i = 0; i < batch; i++) {
                check_value(values[i], keys[first + i]);
            }
        }
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
            fprintf(stderr, "usage: hash [-n records] [-l lookups] [-r rounds] [-c cpu] "
                            "[-L load-percent]\n");
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

int main(int argc, char **argv)
{
    struct config config = {.count = 30000000, .lookups = 30000000, .rounds = 3};

    parse(argc, argv, &config);
    uint64_t count = config.count, lookups = config.lookups;
    unsigned rounds = config.rounds, load = config.load;
    int cpu = config.cpu;
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(cpu, &cpus);
    sched_setaffinity(0, sizeof(cpus), &cpus);

    struct record *records = map_huge(count * sizeof(*records));
    struct sxe_hash_options options = {.name = "bench",
                                       .capacity = count,
                                       .key_size = 8,
                                       .value_size = 24,
                                       .load_percent = load,
                                       .seed = 0x5eed};
    sxe_hash_t *hash;
    if (sxe_hash_create(&hash, &options) < 0) {
        fprintf(stderr, "hash: cannot make the table\n");
        return 1;
    }
    for (uint64_t i = 0; i < count; i++) {
        records[i].key = key_of(i);
        records[i].value[0] = ~records[i].key;
        records[i].value[1] = records[i].value[2] = i;
        if (sxe_hash_put(hash, &records[i].key, 8, records[i].value, 24) != 0) {
            fprintf(stderr, "hash: put %llu failed\n", (unsigned long long)i);
            return 1;
        }
    }
    uint64_t *keys = map_huge(lookups * sizeof(*keys)), state = 88172645463325252ULL;
    for (uint64_t i = 0; i < lookups; i++) {
        keys[i] = key_of(next_random(&state) % count);
    }
    struct sxe_hash_stats stats;
    sxe_hash_stats(hash, &stats);
    printf("hash: %llu records of 32 bytes (%.0f MB sorted; the table %.0f MB, %llu slots of 40 "
           "bytes), %llu random lookups, %u rounds, CPU %d\n",
           (unsigned long long)count, count * 32.0 / 1e6, sxe_hash_size(&options) / 1e6,
           (unsigned long long)stats.slots, (unsigned long long)lookups, rounds, cpu);

    double seconds[METHODS][ROUNDS_MAX];
    for (unsigned round = 0; round < rounds; round++) {
        for (unsigned m = 0; m < METHODS; m++) {
            seconds[m][round] = run((enum method)m, records, count, hash, keys, lookups);
        }
    }
    double median[METHODS];
    for (unsigned m = 0; m < METHODS; m++) {
        qsort(seconds[m], rounds, sizeof(double), by_double);
        median[m] = seconds[m][rounds / 2];
    }
    for (unsigned m = 0; m < METHODS; m++) {
        double rate = (double)lookups / median[m];
        printf("%-20s %8.2f s %7.1f ns/lookup %8.2fM lookups/s", method_names[m], median[m],
               median[m] * 1e9 / (double)lookups, rate / 1e6);
        if (m >= FIND) {
            printf("  %.1fx bsearch", median[BSEARCH] / median[m]);
        }
        printf("\n");
    }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("peak RSS %.0f MB\n", usage.ru_maxrss / 1024.0);
    return 0;
}
