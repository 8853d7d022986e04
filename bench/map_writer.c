/*
 * bench/map's writer side: the readers' latency while a writer process updates a map (and while a
 * plain writer does the same memory traffic), the in-place updates against their floor, and the
 * maps in anonymous memory whose writers these are.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sxe/sxe.h>

#include "map_bench.h"
#include "map_floor.h"
#include "map_report.h"

#define LATENCY_SAMPLES (1u << 22)
#define WRITER_SAMPLES  4096
#define PUT_CHUNK       256
#define ALONE_ROUNDS    15

/* What the writer process reports back, in memory shared with it. */
struct writer_report {
    uint64_t stop;
    uint64_t batches;
    uint64_t failures;
    uint64_t apply_ns[WRITER_SAMPLES];
    uint64_t begin_ns[WRITER_SAMPLES];
    uint64_t publish_ns[WRITER_SAMPLES];
};
/* The puts of one update: config's percent of the keys. */
static uint64_t updates_of(const struct config *config)
{
    return (uint64_t)((double)config->keys * config->update_percent / 100.0);
}
/* The value at fraction of the sorted samples. */
static uint64_t percentile(uint64_t *samples, uint64_t count, double fraction)
{
    if (count == 0) {
        return 0;
    }
    uint64_t at = (uint64_t)(fraction * (double)(count - 1));
    return samples[at];
}

/*
 * Per-lookup latency for seconds: batches of 64 random lookups, each timed and divided by 64;
 * every 16th batch also ends and begins the snapshot, inside its timing. Prints and reports
 * p50/p99/p99.9 as "latency pN, where, label".
 */
static void measure_latency(sxe_map_t *map, const struct config *config, const char *where,
                            const char *label, uint64_t *samples)
{
    struct sxe_map_reader reader;
    uint64_t state = 0x9e3779b97f4a7c15ULL, count = 0;
    uint64_t end = sxe_clock_mono_ns() + (uint64_t)(config->seconds * 1e9);

    progress("%s: latency %s (%.1f s)", where, label, config->seconds);
    if (sxe_map_read_begin(map, &reader) < 0) {
        die("sxe_map_read_begin", -ENOBUFS);
    }
    while (count < LATENCY_SAMPLES) {
        uint64_t start = sxe_clock_mono_ns();
        if (count % 16 == 15) {
            sxe_map_read_end(&reader);
            if (sxe_map_read_begin(map, &reader) < 0) {
                die("sxe_map_read_begin", -ENOBUFS);
            }
        }
        size_t found = find_random(&reader, config, &state, LATENCY_BATCH);
        uint64_t stop = sxe_clock_mono_ns();
        if (found != LATENCY_BATCH) {
            fprintf(stderr, "map: a lookup missed under %s\n", label);
            exit(1);
        }
        samples[count++] = (stop - start) / LATENCY_BATCH;
        if (stop >= end) {
            break;
        }
    }
    sxe_map_read_end(&reader);
    qsort(samples, count, sizeof(*samples), floor_compare_u64);
    char labelled[64], name[112];
    snprintf(labelled, sizeof(labelled), "%s:", label);
    printf("latency %-28s p50 %4llu ns  p99 %4llu ns  p99.9 %5llu ns  (%llu batches of %d)\n",
           labelled, (unsigned long long)percentile(samples, count, 0.50),
           (unsigned long long)percentile(samples, count, 0.99),
           (unsigned long long)percentile(samples, count, 0.999), (unsigned long long)count,
           LATENCY_BATCH);
    static const struct {
        const char *name;
        double fraction;
    } percentiles[] = {{"p50", 0.50}, {"p99", 0.99}, {"p99.9", 0.999}};
    for (size_t i = 0; i < sizeof(percentiles) / sizeof(percentiles[0]); i++) {
        snprintf(name, sizeof(name), "latency %s, %s, %s", percentiles[i].name, where, label);
        report_once(name, "ns", false, (double)percentile(samples, count, percentiles[i].fraction),
                    "per lookup, over %llu batches of %d (batch time / %d), measured once",
                    (unsigned long long)count, LATENCY_BATCH, LATENCY_BATCH);
    }
}

/* Puts count random keys, with the version in their values, with one sxe_map_put_many(). */
static int put_random(sxe_map_t *map, uint64_t keys_in_map, uint64_t *state, uint64_t version,
                      size_t count)
{
    uint64_t keys[PUT_CHUNK];
    struct value values[PUT_CHUNK];
    const void *key_pointers[PUT_CHUNK];
    const void *value_pointers[PUT_CHUNK];
    size_t done;

    for (size_t i = 0; i < count; i++) {
        uint64_t index = floor_random_next(state) % keys_in_map;
        keys[i] = key_of(index);
        values[i] = value_of(index, version);
        key_pointers[i] = &keys[i];
        value_pointers[i] = &values[i];
    }
    return sxe_map_put_many(map, count, key_pointers, NULL, value_pointers, NULL, &done);
}

/*
 * One update of config's percent of the keys: write_begin, sxe_map_put_many() of PUT_CHUNK keys at
 * a time, commit; *begun and *publish when the puts start and when the commit does. @return 0, or
 * -ENOBUFS after an abort (old versions wait for a reader).
 */
static int update(sxe_map_t *map, const struct config *config, uint64_t *state, uint64_t *begun,
                  uint64_t *publish)
{
    uint64_t updates = updates_of(config);
    int rc = sxe_map_write_begin(map);

    if (rc < 0) {
        die("sxe_map_write_begin", rc);
    }
    *begun = sxe_clock_mono_ns();
    uint64_t version = sxe_map_version(map) + 1;
    for (uint64_t i = 0; i < updates && rc >= 0; i += PUT_CHUNK) {
        rc = put_random(map, config->keys, state, version,
                        updates - i < PUT_CHUNK ? (size_t)(updates - i) : PUT_CHUNK);
    }
    if (rc < 0) {
        sxe_map_abort(map);
        return rc;
    }
    *publish = sxe_clock_mono_ns();
    if ((rc = sxe_map_commit(map)) < 0) {
        die("sxe_map_commit", rc);
    }
    return 0;
}

/* The writer process: 1% updates, back to back, each timed, until told to stop. */
static void run_writer(sxe_map_t *map, const struct config *config, struct writer_report *report)
{
    uint64_t state = 0x2545f4914f6cdd1dULL;

    pin_to_cpu(1);
    while (!__atomic_load_n(&report->stop, __ATOMIC_RELAXED)) {
        uint64_t start = sxe_clock_mono_ns();
        uint64_t begun, publish;
        if (update(map, config, &state, &begun, &publish) < 0) {
            report->failures++; /* go again */
            continue;
        }
        uint64_t stop = sxe_clock_mono_ns();
        uint64_t at = report->batches % WRITER_SAMPLES;
        report->apply_ns[at] = stop - start;
        report->begin_ns[at] = begun - start;
        report->publish_ns[at] = stop - publish;
        __atomic_store_n(&report->batches, report->batches + 1, __ATOMIC_RELEASE);
    }
    _exit(0);
}

/*
 * An SXE_MAP_IN_PLACE map's 1% updates with no reader, on CPU 1, interleaved round by round with
 * the floor of an update in place (floor_update_in_place()) in memory of the same kind and size,
 * after enough updates to go once around the log (its first lap faults its pages in); then as many
 * back to back, as a writer runs, where the floor's traffic does not evict the map's lines and
 * page-walk entries between them.
 */
static void update_alone(sxe_map_t *map, const struct config *config, bool shared,
                         const char *where)
{
    uint64_t updates = updates_of(config);
    uint64_t state = 0x9e3779b97f4a7c15ULL, floor_state = 0x2545f4914f6cdd1dULL;
    uint64_t map_ns[ALONE_ROUNDS], floor_ns[ALONE_ROUNDS], back_to_back_ns[ALONE_ROUNDS];
    uint64_t begun, publish;
    struct floor_memory memory;
    struct sxe_map_stats stats;

    if (updates == 0) {
        return; /* -u 0: nothing to time */
    }
    progress("%s: updates in place alone, against their floor", where);
    sxe_map_stats(map, &stats);
    uint64_t log_bytes = stats.old_versions * 64;
    floor_map_anonymous(&memory, stats.slots * 64 + log_bytes, shared);
    pin_to_cpu(1);
    for (uint64_t lap = 0; lap <= stats.old_versions / updates; lap++) {
        if (update(map, config, &state, &begun, &publish) < 0) {
            die("an update with no reader", -ENOBUFS);
        }
        floor_update_in_place(&memory, log_bytes, updates, &floor_state);
    }
    for (unsigned round = 0; round < ALONE_ROUNDS; round++) {
        uint64_t start = sxe_clock_mono_ns();
        if (update(map, config, &state, &begun, &publish) < 0) {
            die("an update with no reader", -ENOBUFS);
        }
        map_ns[round] = sxe_clock_mono_ns() - start;
        floor_ns[round] = floor_update_in_place(&memory, log_bytes, updates, &floor_state);
    }
    floor_unmap(&memory);
    for (unsigned round = 0; round < ALONE_ROUNDS; round++) { /* as a writer runs: no floor */
        uint64_t start = sxe_clock_mono_ns();
        if (update(map, config, &state, &begun, &publish) < 0) {
            die("an update with no reader", -ENOBUFS);
        }
        back_to_back_ns[round] = sxe_clock_mono_ns() - start;
    }
    pin_to_cpu(0);
    qsort(back_to_back_ns, ALONE_ROUNDS, sizeof(uint64_t), floor_compare_u64);
    qsort(map_ns, ALONE_ROUNDS, sizeof(uint64_t), floor_compare_u64);
    qsort(floor_ns, ALONE_ROUNDS, sizeof(uint64_t), floor_compare_u64);
    double map_ms = (double)map_ns[ALONE_ROUNDS / 2] / 1e6;
    double floor_ms = (double)floor_ns[ALONE_ROUNDS / 2] / 1e6;
    printf("update alone, in place, %s (no reader; writer on CPU 1; %d rounds interleaved with "
           "the floor): median %.3f ms (min %.3f); floor, an update in place's own memory traffic "
           "(each put's line read and written back with the 3 after it prefetched, 16 in flight, "
           "a 64-byte record appended): median %.3f ms (min %.3f); %.2fx the floor; then %d "
           "updates back to back, no floor between: median %.3f ms (min %.3f)\n",
           where, ALONE_ROUNDS, map_ms, (double)map_ns[0] / 1e6, floor_ms,
           (double)floor_ns[0] / 1e6, map_ms / floor_ms, ALONE_ROUNDS,
           (double)back_to_back_ns[ALONE_ROUNDS / 2] / 1e6, (double)back_to_back_ns[0] / 1e6);
    fflush(stdout);
    char name[112];
    snprintf(name, sizeof(name), "update alone, in place, %s", where);
    report_once(name, "ms", false, map_ms,
                "median of %d updates of %llu puts, each followed by the floor's; no reader",
                ALONE_ROUNDS, (unsigned long long)updates);
    snprintf(name, sizeof(name), "floor: an update in place's memory traffic, %s", where);
    report_once(name, "ms", false, floor_ms, "median of %d, interleaved with the map's updates",
                ALONE_ROUNDS);
    snprintf(name, sizeof(name), "update alone, in place, back to back, %s", where);
    report_once(name, "ms", false, (double)back_to_back_ns[ALONE_ROUNDS / 2] / 1e6,
                "median of %d updates back to back, no floor between", ALONE_ROUNDS);
}

/* Prints and reports the writer's figures. @return its median update time in ns. */
static uint64_t report_writer(struct writer_report *report, const struct config *config,
                              const char *where)
{
    uint64_t count = report->batches < WRITER_SAMPLES ? report->batches : WRITER_SAMPLES;
    uint64_t updates = updates_of(config);

    qsort(report->apply_ns, count, sizeof(uint64_t), floor_compare_u64);
    qsort(report->begin_ns, count, sizeof(uint64_t), floor_compare_u64);
    qsort(report->publish_ns, count, sizeof(uint64_t), floor_compare_u64);
    printf(
        "writer: %llu commits of %llu puts (%.3g%%), %llu retried for lack of old-version room\n",
        (unsigned long long)report->batches, (unsigned long long)updates, config->update_percent,
        (unsigned long long)report->failures);
    printf("update applied and published (begin -> commit): median %.3f ms, p99 %.3f ms, max "
           "%.3f ms\n",
           (double)percentile(report->apply_ns, count, 0.5) / 1e6,
           (double)percentile(report->apply_ns, count, 0.99) / 1e6,
           (double)percentile(report->apply_ns, count, 1.0) / 1e6);
    printf("of which write_begin (reclaiming the previous update's old versions): median %.3f ms\n",
           (double)percentile(report->begin_ns, count, 0.5) / 1e6);
    printf("publish alone (commit): median %.3f us, max %.3f us\n",
           (double)percentile(report->publish_ns, count, 0.5) / 1e3,
           (double)percentile(report->publish_ns, count, 1.0) / 1e3);
    char name[112];
    snprintf(name, sizeof(name), "writer: update applied and published, %s", where);
    report_once(name, "ms", false, (double)percentile(report->apply_ns, count, 0.5) / 1e6,
                "median of %llu commits of %llu puts (begin -> commit), with a reader",
                (unsigned long long)report->batches, (unsigned long long)updates);
    snprintf(name, sizeof(name), "writer: of which write_begin, %s", where);
    report_once(name, "ms", false, (double)percentile(report->begin_ns, count, 0.5) / 1e6,
                "median: reclaiming the previous update's old versions");
    snprintf(name, sizeof(name), "writer: publish alone (commit), %s", where);
    report_once(name, "us", false, (double)percentile(report->publish_ns, count, 0.5) / 1e3,
                "median");
    return percentile(report->apply_ns, count, 0.5);
}

/*
 * The floor of both: the reader's latency while a plain writer (map_floor.h) does the least any
 * update of as many random keys must do, in memory of the same kind: back to back (period_ns 0) or
 * at the map writer's pace.
 */
static void plain_writer_phase(sxe_map_t *map, const struct config *config, const char *where,
                               const struct floor_memory *memory, uint64_t period_ns,
                               uint64_t *samples)
{
    uint64_t updates = updates_of(config);
    struct floor_writer *plain =
        mmap(NULL, sizeof(*plain), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (plain == MAP_FAILED) {
        die("no memory for the plain writer's samples", -ENOMEM);
    }
    int pid = floor_writer_start(plain, memory, updates, period_ns);
    measure_latency(map, config, where,
                    period_ns == 0 ? "under a plain writer" : "under a paced plain writer",
                    samples);
    uint64_t count = floor_writer_stop(plain, pid);
    char pace[64] = "back to back";
    if (period_ns != 0) {
        snprintf(pace, sizeof(pace), "one per %.3f ms, the map writer's pace",
                 (double)period_ns / 1e6);
    }
    printf("plain writer (the floor): %llu updates of %llu random lines, each line read and "
           "written back twice (put, reclaim), %s: median %.3f ms (the puts' pass alone %.3f ms), "
           "p99 %.3f ms\n",
           (unsigned long long)plain->updates, (unsigned long long)updates, pace,
           (double)percentile(plain->update_ns, count, 0.5) / 1e6,
           (double)percentile(plain->put_ns, count, 0.5) / 1e6,
           (double)percentile(plain->update_ns, count, 0.99) / 1e6);
    fflush(stdout);
    char name[112];
    snprintf(name, sizeof(name), "plain writer (the floor), %s, %s", where,
             period_ns == 0 ? "back to back" : "paced");
    report_once(name, "ms", false, (double)percentile(plain->update_ns, count, 0.5) / 1e6,
                "median of %llu updates of %llu random lines, each read and written back twice, "
                "%s",
                (unsigned long long)plain->updates, (unsigned long long)updates, pace);
    munmap(plain, sizeof(*plain));
}

/*
 * The reader's latency idle, under a writer process, idle again, and under a plain writer in
 * memory (the floor); the writers' updates.
 */
void latency_phases(sxe_map_t *map, const struct config *config, const char *where,
                    const struct floor_memory *memory)
{
    uint64_t *samples = malloc(LATENCY_SAMPLES * sizeof(uint64_t));
    struct writer_report *report =
        mmap(NULL, sizeof(*report), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int status;

    if (samples == NULL || report == MAP_FAILED) {
        die("no memory for samples", -ENOMEM);
    }
    memset(report, 0, sizeof(*report));
    printf("the map in %s, read while a writer process updates it:\n", where);
    measure_latency(map, config, where, "idle", samples);
    plain_writer_phase(map, config, where, memory, 0, samples);
    pid_t writer = fork();
    if (writer < 0) {
        die("fork", -errno);
    }
    if (writer == 0) {
        run_writer(map, config, report);
    }
    /* Let the writer get going before the reader measures. */
    while (__atomic_load_n(&report->batches, __ATOMIC_ACQUIRE) == 0) {
        usleep(1000);
    }
    measure_latency(map, config, where, "under a 1% writer", samples);
    __atomic_store_n(&report->stop, 1, __ATOMIC_RELAXED);
    waitpid(writer, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "map: the writer failed (status 0x%x)\n", status);
        exit(1);
    }
    uint64_t period_ns = report_writer(report, config, where);
    /* The same reads on the table as the updates left it: what changed is its layout. */
    measure_latency(map, config, where, "idle, after the updates", samples);
    plain_writer_phase(map, config, where, memory, period_ns, samples);
    free(samples);
    munmap(report, sizeof(*report));
}
/*
 * Random 64-byte reads of anonymous memory of a map's size (shared, or private with huge pages
 * where the system gives them): the floor the map is read against, printed and reported.
 */
static void anonymous_floor(const struct config *config, sxe_map_t *map, bool shared,
                            const char *where)
{
    struct sxe_map_stats stats;
    struct floor_memory memory;
    char name[112];

    sxe_map_stats(map, &stats);
    floor_map_anonymous(&memory, stats.slots * 64, shared);
    double rate = floor_random_reads(&memory, config->reads);
    floor_unmap(&memory);
    printf("floor: random 64-byte reads, 32 in flight, of anonymous %s memory of the map's size "
           "(%.0f MB): %.0f reads/s\n",
           shared ? "shared" : "private", (double)memory.size / (1 << 20), rate);
    snprintf(name, sizeof(name), "floor: random 64-byte reads, %s", where);
    report_once(name, "reads/s", true, rate,
                "anonymous memory of the map's size, 32 reads in flight, measured once");
}

/* Reads a map batched (find_random()), prints and reports the rate. */
static void read_batched_once(sxe_map_t *map, const struct config *config, const char *where,
                              double load)
{
    char name[112];

    progress("%s: %llu reads, batched", where, (unsigned long long)config->reads);
    double rate = read_map_batched(map, config);
    printf("sxe_map %s: %.0f lookups/s (batched: %s, %d keys a call; loaded in %.2f s)\n", where,
           rate, config->in_place ? "sxe_map_get_many, copying values out" : "sxe_map_find_many",
           LATENCY_BATCH, load);
    fflush(stdout);
    snprintf(name, sizeof(name), "sxe_map %s, batched", where);
    report_once(name, "lookups/s", true, rate,
                "%s, %d keys a call, a reader per %llu lookups, measured once",
                config->in_place ? "sxe_map_get_many" : "sxe_map_find_many", LATENCY_BATCH,
                (unsigned long long)config->snapshot_reads);
}

void read_private_map(const struct config *config)
{
    const char *where = "private memory (huge pages where the system gives them)";
    double load;

    progress("loading sxe_map in %s: %llu keys", where, (unsigned long long)config->keys);
    sxe_map_t *map = load_map(config, 0, NULL, &load);
    read_batched_once(map, config, where, load);
    anonymous_floor(config, map, false, where);
    sxe_map_destroy(map);
}

/*
 * Updates a private SXE_MAP_IN_PLACE map, whose readers would be threads of one process: it gets
 * transparent huge pages where the system allows.
 */
void update_private_in_place(const struct config *config)
{
    const char *where = "private memory (huge pages where the system gives them)";
    double load;

    progress("loading sxe_map in place in %s: %llu keys", where, (unsigned long long)config->keys);
    sxe_map_t *map = load_map(config, SXE_MAP_IN_PLACE, NULL, &load);
    update_alone(map, config, false, where);
    sxe_map_destroy(map);
}

/*
 * Reads a map in anonymous shared memory, as forked processes share it (SXE_MAP_SHARED), with and
 * without a writer, then frees it: it gets huge pages where shmem_enabled allows them or
 * MADV_COLLAPSE makes them (src/base/region.c). With in_place, the map is SXE_MAP_IN_PLACE, read
 * with sxe_map_get_many(), and also updated alone.
 */
void read_anonymous_shared_map(const struct config *shared_config, bool in_place)
{
    const char *where = in_place ? "anonymous shared memory, in place" : "anonymous shared memory";
    struct config config = *shared_config;
    struct sxe_map_stats stats;
    struct floor_memory memory;
    double load;

    config.in_place = in_place;
    progress("loading sxe_map in %s: %llu keys", where, (unsigned long long)config.keys);
    sxe_map_t *map =
        load_map(&config, SXE_MAP_SHARED | (in_place ? SXE_MAP_IN_PLACE : 0), NULL, &load);
    read_batched_once(map, &config, where, load);
    if (!in_place) {
        anonymous_floor(&config, map, true, where);
    }
    sxe_map_stats(map, &stats);
    floor_map_anonymous(&memory, stats.slots * 64, true);
    latency_phases(map, &config, where, &memory);
    floor_unmap(&memory);
    if (in_place) {
        update_alone(map, &config, true, "anonymous shared memory");
    }
    sxe_map_destroy(map);
}
