/*
 * sxe_map's point reads against LMDB's, like for like, and what a writer costs sxe_map's readers.
 *
 * Both stores get the same N keys (8 bytes, big-endian 0..N-1, so LMDB can bulk-load them in
 * order with MDB_APPEND) and 24-byte values, each in a file in the same directory: the map as
 * processes share it (sxe_map_attach), LMDB with MDB_NOSYNC|MDB_WRITEMAP. Both files are written
 * through mappings that ask for huge pages (the map asks itself; LMDB's map is advised after
 * mdb_env_open(), before the load) and then synced. Then:
 *   1. the comparison (map_rounds.c), in rounds: every row once a round, odd rounds in the order
 *      below and even ones in reverse, so drift hits both sides alike. Each row reads the same
 *      random key sequence, a snapshot (an sxe_map reader; an LMDB read txn, reset and renewed)
 *      per -b reads, with its side's data mapped in 4 KB pages ("no huge pages") or asked for in
 *      2 MB ones ("huge pages"), page tables made before the timing (map_pages.h), and what the
 *      kernel gave counted from /proc/self/smaps after it:
 *        sxe_map_find() and mdb_get(), one key at a time, without and with huge pages: the
 *        headline is the pair with huge pages where both sides got them, otherwise the pair
 *        without; sxe_map_find_many(), 64 keys a call, without and with (batched: LMDB has no
 *        such call, so it is not the comparison); the floor, random reads of one line each of
 *        the map's file mapped again, without and with; and each pair's ratio, round by round;
 *   2. unless --reads-only, the writer's phases, each once (map_writer.c): the map read batched
 *      in private memory and in anonymous shared memory (as forked processes share it), with
 *      their floors; the reader's latency per lookup over batches of 64 lookups while the map is
 *      idle, under a plain writer (map_floor.h: the same updates' memory traffic and nothing
 *      else), while a writer process commits 1% updates back to back, idle again, and under the
 *      plain writer at the map writer's pace, with the writers' times, in anonymous shared
 *      memory (zero-copy and SXE_MAP_IN_PLACE) and in the map's file; an SXE_MAP_IN_PLACE map's
 *      1% updates with no reader against the floor of an update in place, in anonymous shared
 *      and private memory;
 *   3. the peak RSS.
 * The reader runs on CPU 0 and writers on CPU 1. Progress lines go to stderr, one a row, a phase,
 * or two seconds of a load.
 *
 * Usage: map [-n keys] [-r reads per row] [-b reads per snapshot] [-R rounds]
 *            [-s seconds per latency phase] [-u update percent] [-L sxe_map's load percent]
 *            [-d directory] [--quick] [--json] [--reads-only]
 *   -n  keys, default 20 million: the map is then 2 GB (slots of 64 bytes at its 80% load, with
 *       room for its old versions) and LMDB 0.8 GB of pages, far beyond this box's caches (4 MB of
 *       L2 a core, 260 MB of L3) and beyond what 4 KB pages' TLB entries reach, as a store big
 *       enough to need either would be; and small enough that the whole run takes 3-6 minutes.
 *   -r  random reads a row and round, default 4 million (a row of mdb_get() takes seconds).
 *   -b  reads per snapshot, default 1000.   -R  rounds, default 5.
 *   -s  seconds a latency phase, default 2.   -u  update percent, default 1.
 *   -d  where the two files go, default /tmp (a file system that keeps large folios gives both
 *       files huge pages; tmpfs under shmem_enabled "never" gives neither).
 *   --quick: defaults of 4 million keys, 1 million reads and 0.5 s phases, for a run of a minute
 *       or two (-n and the others still apply).
 *   --reads-only: the comparison's rounds alone, without the writer's phases.
 *   --json: stdout carries one JSON document, written at the end; the human-readable lines go to
 *       stderr with the progress lines. Its schema:
 *         {"keys": N, "reads_per_row": R, "snapshot_reads": B, "rounds": K,
 *          "rows": [{"name": "sxe_map_find, huge pages", "unit": "lookups/s" | "reads/s" | "x",
 *                    "better": "higher", "rounds": [v1, ..., vK], "note": "..."}, ...],
 *          "once": [{the same fields, "rounds": [v]} for each figure of the writer's phases,
 *                   measured once: units "lookups/s", "reads/s", "ns", "ms", "us"],
 *          "headline": {"sxe": row name, "lmdb": row name, "ratio": row name, "why": "..."},
 *          "huge_pages": {"thp_enabled": "...", "shmem_enabled": "...",
 *                         "lmdb_got_huge_pages": bool, "sxe_got_huge_pages": bool,
 *                         "by_row": {row name: {"resident_mb": [per round],
 *                                               "huge_mb": [per round]}, ...}},
 *          "peak_rss_mb": M}
 *       "rows" holds every row of the rounds, the ratio rows ("ratio: ...", derived round by
 *       round from two rows of the same round) among them; a side "got huge pages" when at least
 *       90% of what its huge-pages row had resident was in huge pages, in every round.
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
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
#include "map_report.h"

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

static void usage(void)
{
    fprintf(stderr, "usage: map [-n keys] [-r reads per row] [-b reads per snapshot] [-R rounds] "
                    "[-s seconds per latency phase] [-u update percent] [-L load percent] "
                    "[-d directory] [--quick] [--json] [--reads-only]\n");
    exit(2);
}

/* Options left at 0 take their defaults, --quick's smaller ones where it is given. */
static void parse(int argc, char **argv, struct config *config)
{
    static const struct option long_options[] = {{"json", no_argument, NULL, 'j'},
                                                 {"quick", no_argument, NULL, 'q'},
                                                 {"reads-only", no_argument, NULL, 'o'},
                                                 {"rounds", required_argument, NULL, 'R'},
                                                 {NULL, 0, NULL, 0}};
    int option;

    while ((option = getopt_long(argc, argv, "n:r:b:R:s:u:L:d:", long_options, NULL)) != -1) {
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
        case 'R':
            config->rounds = (unsigned)strtoul(optarg, NULL, 10);
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
        case 'd':
            config->dir = optarg;
            break;
        case 'j':
            config->json = true;
            break;
        case 'q':
            config->quick = true;
            break;
        case 'o':
            config->reads_only = true;
            break;
        default:
            usage();
        }
    }
    if (optind != argc) {
        usage();
    }
    config->keys = config->keys != 0 ? config->keys : config->quick ? 4000000 : 20000000;
    config->reads = config->reads != 0 ? config->reads : config->quick ? 1000000 : 4000000;
    config->seconds = config->seconds > 0 ? config->seconds : config->quick ? 0.5 : 2;
    config->rounds = config->rounds != 0 ? config->rounds : 5;
    if (config->snapshot_reads == 0 || config->rounds > REPORT_ROUNDS_MAX) {
        fprintf(stderr, "map: -b must be positive and -R at most %d\n", REPORT_ROUNDS_MAX);
        exit(2);
    }
}

static void print_config(const struct config *config, const char *dir, const char *thp,
                         const char *shmem)
{
    printf("config: %llu keys of 8 bytes, values of 24; %u rounds, each of every read row once "
           "(odd rounds in order, even ones in reverse); %llu random reads a row, the same key "
           "sequence for every row, a snapshot (an sxe_map reader, an lmdb read txn reset and "
           "renewed) per %llu; each side's data mapped in 4 KB pages for the rows \"no huge "
           "pages\" and asked for 2 MB ones (MADV_HUGEPAGE) for the rows \"huge pages\", page "
           "tables made before the timing; sxe_map load %u%%, old_versions capacity/4, in a file "
           "beside lmdb's in %s; lmdb MDB_NOSYNC|MDB_WRITEMAP, MDB_APPEND load; reader on CPU 0; "
           "transparent huge pages: anonymous \"%s\", shared memory \"%s\"\n",
           (unsigned long long)config->keys, config->rounds, (unsigned long long)config->reads,
           (unsigned long long)config->snapshot_reads,
           config->load_percent != 0 ? config->load_percent : 80, dir, thp, shmem);
    if (!config->reads_only) {
        printf("config, the writer's phases (after the rounds, each once): latency per lookup "
               "over batches of %d, %.1f s a phase; a writer process on CPU 1 committing %.3g%% "
               "updates; the map in its file, in anonymous shared memory (zero-copy and in "
               "place), and private\n",
               LATENCY_BATCH, config->seconds, config->update_percent);
    }
    fflush(stdout);
}

/* Loads both sides, writes their files out (no writeback under the timed reads), maps the floor. */
static void load_sides(const struct config *config, const char *dir, const char *path,
                       struct read_sides *sides)
{
    double lmdb_load, map_load;

    progress("loading lmdb: %llu keys", (unsigned long long)config->keys);
    sides->env = load_lmdb(config, dir, &sides->dbi, &lmdb_load, &sides->lmdb_mapping);
    progress("loading sxe_map in its file: %llu keys", (unsigned long long)config->keys);
    sides->map = load_map(config, 0, path, &map_load);
    if (mapping_find(&sides->map_mapping, path, NULL) < 0) {
        die("no mapping of the map's file in /proc/self/maps", -ENOENT);
    }
    progress("writing both files out (sync)");
    sync();
    floor_map_file(&sides->floor, path, false);
    sides->floor_mapping =
        (struct bench_mapping){sides->floor.bytes, sides->floor.size, sides->floor.size};
    printf("loaded: lmdb in %.2f s (%.0f MB of its map in use), sxe_map in %.2f s (%.1f M puts/s "
           "in one transaction; a file of %.0f MB)\n",
           lmdb_load, (double)sides->lmdb_mapping.used / (1 << 20), map_load,
           (double)config->keys / map_load / 1e6, (double)sides->map_mapping.used / (1 << 20));
    fflush(stdout);
}

static void print_comparison(const struct read_outcome *outcome)
{
    const struct report_row *sxe = report_get(outcome->headline_sxe);
    const struct report_row *lmdb = report_get(outcome->headline_lmdb);
    double sxe_rate = report_median(outcome->headline_sxe);
    double lmdb_rate = report_median(outcome->headline_lmdb);

    printf("each row: median [least-most], then round by round; pages as counted after the last "
           "round's reads (the JSON has every round's)\n");
    report_print_rounds(stdout);
    printf("headline, single-key lookups: %s against %s: %.2fx, the median of the rounds' "
           "ratios [%.2fx-%.2fx] (medians: %.0f and %.0f lookups/s)\n  why this pair: %s\n",
           sxe->name, lmdb->name, report_median(outcome->headline_ratio),
           report_min(outcome->headline_ratio), report_max(outcome->headline_ratio), sxe_rate,
           lmdb_rate, outcome->why);
    if (!outcome->lmdb_huge || !outcome->sxe_huge) {
        printf("  so the rows \"huge pages\" are not like for like here, and the pair without "
               "huge pages is the headline\n");
    }
    fflush(stdout);
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

/* MB of LMDB's pages, and its tree's depth. */
static double lmdb_pages_mb(MDB_env *env, MDB_dbi dbi, unsigned *depth)
{
    MDB_stat stats = {0};
    MDB_txn *txn;
    double bytes = 0;

    if (mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == 0) {
        if (mdb_stat(txn, dbi, &stats) == 0) {
            bytes = (double)stats.ms_psize *
                    (double)(stats.ms_branch_pages + stats.ms_leaf_pages + stats.ms_overflow_pages);
        }
        mdb_txn_abort(txn);
    }
    *depth = stats.ms_depth;
    return bytes / (1 << 20);
}

/*
 * With --json, stdout carries the JSON document alone: the human-readable lines go to stderr,
 * beside the progress lines, by pointing stdout's descriptor there. @return where the JSON goes.
 */
static FILE *json_output(void)
{
    int fd = dup(STDOUT_FILENO);
    FILE *json = fd >= 0 ? fdopen(fd, "w") : NULL;

    fflush(stdout);
    if (json == NULL || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        die("cannot keep stdout for the JSON", -errno);
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* its lines in order with the progress lines */
    return json;
}

/*
 * The writer's phases, each once, after the rounds: the other kinds of memory (private, anonymous
 * shared, in place), then readers of the map in its file under its writer.
 */
static void writer_phases(const struct config *config, struct read_sides *sides, const char *path)
{
    struct floor_memory memory;

    read_private_map(config);
    read_anonymous_shared_map(config, false);
    read_anonymous_shared_map(config, true);
    update_private_in_place(config);
    mapping_prepare(&sides->map_mapping, true); /* as sxe_map maps it */
    floor_map_file(&memory, path, true);        /* plain updates write back what they read */
    latency_phases(sides->map, config, "its file", &memory);
    floor_unmap(&memory);
}

int main(int argc, char **argv)
{
    struct config config = {.snapshot_reads = 1000, .update_percent = 1, .dir = "/tmp"};
    struct read_sides sides;
    struct read_outcome outcome;
    struct rusage usage;
    char thp[128], shmem[128], dir[PATH_MAX], path[PATH_MAX + 8];
    unsigned depth;

    parse(argc, argv, &config);
    FILE *json = config.json ? json_output() : NULL;
    snprintf(dir, sizeof(dir), "%s/sxe-bench-map-XXXXXX", config.dir);
    if (mkdtemp(dir) == NULL) {
        die("mkdtemp", -errno);
    }
    snprintf(path, sizeof(path), "%s/map", dir);
    pin_to_cpu(0);
    sysfs_line("/sys/kernel/mm/transparent_hugepage/enabled", thp, sizeof(thp));
    sysfs_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled", shmem, sizeof(shmem));
    print_config(&config, dir, thp, shmem);
    load_sides(&config, dir, path, &sides);
    read_rounds(&config, &sides, &outcome);
    print_comparison(&outcome);
    floor_unmap(&sides.floor);
    double lmdb_mb = lmdb_pages_mb(sides.env, sides.dbi, &depth);
    mdb_env_close(sides.env);
    remove_lmdb(dir);
    if (!config.reads_only) {
        writer_phases(&config, &sides, path);
    }
    struct sxe_map_stats stats;
    sxe_map_stats(sides.map, &stats);
    getrusage(RUSAGE_SELF, &usage);
    printf("peak RSS: %.0f MB (sxe_map: %llu slots of 64 bytes; lmdb: %.0f MB of pages, depth "
           "%u)\n",
           (double)usage.ru_maxrss / 1024, (unsigned long long)stats.slots, lmdb_mb, depth);
    fflush(stdout);
    sxe_map_detach(sides.map);
    unlink(path);
    rmdir(dir);
    if (json != NULL) {
        struct report_summary summary = {.keys = config.keys,
                                         .reads = config.reads,
                                         .snapshot_reads = config.snapshot_reads,
                                         .rounds = config.rounds,
                                         .thp_enabled = thp,
                                         .shmem_enabled = shmem,
                                         .lmdb_huge = outcome.lmdb_huge,
                                         .sxe_huge = outcome.sxe_huge,
                                         .headline_sxe = outcome.headline_sxe,
                                         .headline_lmdb = outcome.headline_lmdb,
                                         .headline_ratio = outcome.headline_ratio,
                                         .headline_why = outcome.why,
                                         .peak_rss_mb = (double)usage.ru_maxrss / 1024};
        report_json(json, &summary);
    }
    progress("done");
    return 0;
}
