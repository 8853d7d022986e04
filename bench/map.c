/*
 * sxe_map point reads against LMDB's, on the same keys, and what a writer costs the readers.
 *
 * Both stores get the same N keys (8 bytes, big-endian 0..N-1, so LMDB can bulk-load them in
 * order with MDB_APPEND) and 24-byte values, LMDB in a file and the map in a file beside it, as
 * processes share a map (sxe_map_attach); a private map and one in anonymous shared memory (as
 * forked processes share it) are read too, for what huge pages change. Then:
 *   1. random point reads of the same key sequence, a read snapshot (an sxe_map reader, an LMDB
 *      read transaction) held for each batch of reads: sxe_map_find() one key at a time,
 *      sxe_map_find_many() (the ratio line), mdb_get(); and the floors, random reads of one line
 *      each, of the map's file and of anonymous memory;
 *   2. the reader's latency per lookup, measured over batches of 64 lookups (batch time / 64),
 *      while the map is idle, under a plain writer (map_floor.h: the same updates' memory traffic
 *      and nothing else, back to back), while a writer process commits 1% updates back to back,
 *      idle again (what layout the updates left), and under the plain writer at the map writer's
 *      pace; the writer's time to apply and publish each update (write_begin, sxe_map_put_many()
 *      of 256 keys at a time, commit) and to publish it alone (commit), and the plain writer's;
 *      for the two maps in anonymous shared memory, the default and an SXE_MAP_IN_PLACE one;
 *   3. an SXE_MAP_IN_PLACE map's 1% updates with no reader, interleaved with the floor of an
 *      update in place (map_floor.h), in anonymous shared memory and in private memory (which
 *      gets huge pages);
 *   4. the peak RSS.
 * The reader runs on CPU 0 and the writer on CPU 1.
 *
 * Usage: map [-n keys] [-r reads] [-b reads per snapshot] [-s seconds per latency phase]
 *            [-u update percent] [-L sxe_map's load percent]
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdbool.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sxe/sxe.h>

#include "map_bench.h"
#include "map_floor.h"

void die(const char *what, int rc)
{
    fprintf(stderr, "map: %s: %s\n", what, rc < 0 ? sxe_strerror(rc) : mdb_strerror(rc));
    exit(1);
}

void pin_to_cpu(int cpu)
{
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0) {
        fprintf(stderr, "map: cannot pin to CPU %d: %s (running unpinned)\n", cpu, strerror(errno));
    }
}

static void parse(int argc, char **argv, struct config *config)
{
    int option;

    while ((option = getopt(argc, argv, "n:r:b:s:u:L:")) != -1) {
        switch (option) {
        case 'n':
            config->keys = strtoull(optarg, NULL, 10);
            break;
        case 'r':
            config->reads = strtoull(optarg, NULL, 10);
            break;
        case 'b':
            config->snapshot_reads = strtoull(optarg, NULL, 10);
            break;
        case 's':
            config->seconds = strtod(optarg, NULL);
            break;
        case 'u':
            config->update_percent = strtod(optarg, NULL);
            break;
        case 'L':
            config->load_percent = (unsigned)strtoul(optarg, NULL, 10);
            break;
        default:
            fprintf(stderr,
                    "usage: map [-n keys] [-r reads] [-b reads per snapshot] "
                    "[-s seconds per latency phase] [-u update percent] [-L load percent]\n");
            exit(2);
        }
    }
    if (config->reads == 0) {
        config->reads = config->keys;
    }
    if (config->keys == 0 || config->snapshot_reads == 0) {
        fprintf(stderr, "map: -n and -b must be positive\n");
        exit(2);
    }
}

/* The first line of a sysfs file, or "?". */
static const char *sysfs_line(const char *path, char *line, size_t size)
{
    FILE *file = fopen(path, "r");

    snprintf(line, size, "?");
    if (file != NULL) {
        if (fgets(line, (int)size, file) != NULL) {
            line[strcspn(line, "\n")] = '\0';
        }
        fclose(file);
    }
    return line;
}

static void print_config(const struct config *config, const char *dir)
{
    char anonymous[128], shmem[128];

    printf("config: %llu keys of 8 bytes, values of 24; %llu random reads in snapshots of %llu; "
           "latency per lookup over batches of %d, %.1f s idle and %.1f s under a writer "
           "process committing %.3g%% updates; reader on CPU 0, writer on CPU 1; sxe_map load "
           "%u%%, old_versions capacity/4, in a file beside lmdb's (and anonymous, shared and "
           "private); lmdb in %s, MDB_NOSYNC|MDB_WRITEMAP, MDB_APPEND load, one read txn "
           "(reset/renew) per snapshot; transparent huge pages: anonymous \"%s\", shared "
           "memory \"%s\"\n",
           (unsigned long long)config->keys, (unsigned long long)config->reads,
           (unsigned long long)config->snapshot_reads, LATENCY_BATCH, config->seconds,
           config->seconds, config->update_percent,
           config->load_percent != 0 ? config->load_percent : 80, dir,
           sysfs_line("/sys/kernel/mm/transparent_hugepage/enabled", anonymous, sizeof(anonymous)),
           sysfs_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled", shmem, sizeof(shmem)));
    fflush(stdout);
}

/* How many MB of this process's file mappings are mapped as huge pages (FilePmdMapped). */
static double file_huge_mb(void)
{
    FILE *rollup = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    double kb = 0;

    while (rollup != NULL && fgets(line, sizeof(line), rollup) != NULL) {
        if (sscanf(line, "FilePmdMapped: %lf kB", &kb) == 1) {
            break;
        }
    }
    if (rollup != NULL) {
        fclose(rollup);
    }
    return kb / 1024;
}

/* Random reads of memory of the map's size: anonymous, shared or private. */
static double anonymous_floor(uint64_t bytes, uint64_t reads, bool shared)
{
    struct floor_memory memory;

    floor_map_anonymous(&memory, bytes, shared);
    double rate = floor_random_reads(&memory, reads);
    floor_unmap(&memory);
    return rate;
}

static void print_floors(const struct config *config, sxe_map_t *map, const char *path,
                         double lmdb_rate, double map_rate)
{
    struct sxe_map_stats stats;
    struct floor_memory file_memory;
    sxe_map_stats(map, &stats);
    uint64_t bytes = stats.slots * 64;
    double huge_before = file_huge_mb();
    floor_map_file(&file_memory, path, false);
    double file = floor_random_reads(&file_memory, config->reads);
    double file_huge = file_huge_mb() - huge_before;
    floor_unmap(&file_memory);
    double shared = anonymous_floor(bytes, config->reads, true);
    double private = anonymous_floor(bytes, config->reads, false);

    printf(
        "floor, random 64-byte reads, 32 in flight: the map's file mapped again (%.0f MB, %.0f MB "
        "of it in huge pages) %.0f reads/s (%.1fx lmdb; sxe_map reaches %.0f%% of it); "
        "anonymous memory of %.0f MB: shared %.0f reads/s (%.1fx lmdb), private with huge "
        "pages %.0f reads/s (%.1fx lmdb)\n",
        (double)file_memory.size / (1 << 20), file_huge, file, file / lmdb_rate,
        100 * map_rate / file, (double)bytes / (1 << 20), shared, shared / lmdb_rate, private,
        private / lmdb_rate);
    fflush(stdout);
}

static void print_memory(sxe_map_t *map, MDB_env *env, MDB_dbi dbi)
{
    struct sxe_map_stats stats;
    struct rusage usage;
    MDB_stat lmdb_stats = {0};
    MDB_txn *txn;
    double lmdb_bytes = 0;

    sxe_map_stats(map, &stats);
    if (mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == 0) {
        if (mdb_stat(txn, dbi, &lmdb_stats) == 0) {
            lmdb_bytes = (double)lmdb_stats.ms_psize *
                         (double)(lmdb_stats.ms_branch_pages + lmdb_stats.ms_leaf_pages +
                                  lmdb_stats.ms_overflow_pages);
        }
        mdb_txn_abort(txn);
    }
    getrusage(RUSAGE_SELF, &usage);
    printf("peak RSS: %.0f MB (sxe_map: %llu slots of 64 bytes; lmdb: %.0f MB of pages, depth "
           "%u)\n",
           (double)usage.ru_maxrss / 1024, (unsigned long long)stats.slots, lmdb_bytes / (1 << 20),
           lmdb_stats.ms_depth);
}

int main(int argc, char **argv)
{
    struct config config = {
        .keys = 30000000, .snapshot_reads = 1000, .seconds = 3, .update_percent = 1};
    char dir[] = "/tmp/sxe-bench-map-XXXXXX";
    double map_load, lmdb_load;
    MDB_dbi dbi;

    parse(argc, argv, &config);
    if (mkdtemp(dir) == NULL) {
        die("mkdtemp", -errno);
    }
    pin_to_cpu(0);
    print_config(&config, dir);

    /* Each file's dirty pages are written out before its reads are timed: no writeback under them.
     */
    MDB_env *env = load_lmdb(&config, dir, &dbi, &lmdb_load);
    sync();
    double lmdb_rate = read_lmdb(env, dbi, &config);
    printf("lmdb: %.0f lookups/s (loaded in %.2f s)\n", lmdb_rate, lmdb_load);
    fflush(stdout);
    read_private_map(&config, lmdb_rate);
    read_anonymous_shared_map(&config, lmdb_rate, false);
    read_anonymous_shared_map(&config, lmdb_rate, true);
    update_private_in_place(&config);

    char path[sizeof(dir) + 8];
    snprintf(path, sizeof(path), "%s/map", dir);
    double huge_before = file_huge_mb();
    sxe_map_t *map = load_map(&config, 0, path, &map_load);
    double huge = file_huge_mb() - huge_before;
    sync();
    double one_rate = read_map_one_by_one(map, &config);
    double many_rate = read_map_batched(map, &config);
    printf("sxe_map file, sxe_map_find one key at a time: %.0f lookups/s, %.1fx lmdb\n", one_rate,
           one_rate / lmdb_rate);
    printf("sxe_map: %.0f lookups/s, %.1fx lmdb (a file beside lmdb's, attached as other "
           "processes attach it, %.0f MB of it mapped in huge pages; sxe_map_find_many, 64 keys a "
           "call; loaded in %.2f s, %.1f M puts/s in one transaction)\n",
           many_rate, many_rate / lmdb_rate, huge, map_load, (double)config.keys / map_load / 1e6);
    fflush(stdout);
    print_floors(&config, map, path, lmdb_rate, many_rate);

    struct floor_memory memory;
    floor_map_file(&memory, path, true); /* plain updates write back what they read */
    latency_phases(map, &config, "its file", &memory);
    floor_unmap(&memory);
    print_memory(map, env, dbi);
    mdb_env_close(env);
    sxe_map_detach(map);
    unlink(path);
    remove_lmdb(dir);
    return 0;
}
