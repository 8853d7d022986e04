/*
 * Maps' versions: snapshots that outlive commits, the reader table, reclamation that waits for
 * readers, tombstones trimmed, dead readers, abort, writers that die mid-transaction, the dirty
 * marker, files that outlive their processes, an unrecoverable lock, and a bounded stress of
 * reader processes against a writer that is killed at random instants. The validator runs after
 * every mutation.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "map_test.h"

static void test_reader_table_full(void **state)
{
    struct sxe_map_options options = fixed_options(4);
    struct sxe_map_reader readers[3];
    struct sxe_test_capture capture;
    struct sxe_map_stats stats;
    sxe_map_t *map;

    (void)state;
    options.readers_max = 2;
    map = make_map(options);
    assert_int_equal(sxe_map_read_begin(map, &readers[0]), 0);
    assert_int_equal(sxe_map_read_begin(map, &readers[1]), 0);
    assert_int_not_equal(readers[0].index, readers[1].index);
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_map_read_begin(map, &readers[2]), -ENOBUFS);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "all 2 reader slots are held"));
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.readers, 2);
    assert_int_equal(stats.readers_full, 1);
    sxe_map_read_end(&readers[0]);
    assert_int_equal(sxe_map_read_begin(map, &readers[2]), 0);
    sxe_map_read_end(&readers[1]);
    sxe_map_read_end(&readers[2]);
    sxe_map_destroy(map);
}

/*
 * A snapshot keeps seeing its version for every key while the writer commits several more; a
 * new snapshot sees the newest; old versions are reclaimed only after the old reader ends.
 */
static void test_snapshot_outlives_commits(void **state)
{
    struct sxe_map_options options = fixed_options(100);
    struct sxe_map_reader old_reader, new_reader;
    struct sxe_map_stats stats;
    sxe_map_t *map;

    (void)state;
    options.old_versions = 64;
    map = make_map(options);
    assert_int_equal(sxe_map_write_begin(map), 0);
    for (uint64_t key = 0; key < 20; key++) {
        assert_int_equal(put(map, key, 1000 + key), 0);
    }
    commit(map);
    assert_int_equal(sxe_map_read_begin(map, &old_reader), 0);

    for (uint64_t round = 1; round <= 3; round++) {
        assert_int_equal(sxe_map_write_begin(map), 0);
        for (uint64_t key = 0; key < 20; key += 2) {
            assert_int_equal(put(map, key, round * 1000 + key), 1);
        }
        assert_int_equal(delete (map, 1 + 2 * round), 0);
        assert_int_equal(put(map, 100 + round, round), 0);
        commit(map);
        for (uint64_t key = 0; key < 20; key++) {
            assert_int_equal(read_number(&old_reader, key), 1000 + key);
        }
        assert_int_equal(read_number(&old_reader, 100 + round), -1);
    }
    assert_int_equal(sxe_map_read_begin(map, &new_reader), 0);
    assert_int_equal(new_reader.version, 4);
    assert_int_equal(read_number(&new_reader, 0), 3000);
    assert_int_equal(read_number(&new_reader, 1), 1001);
    assert_int_equal(read_number(&new_reader, 3), -1);
    assert_int_equal(read_number(&new_reader, 101), 1);

    /* The old reader holds every old version back. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.pending, 33);
    assert_int_equal(stats.held_back, 33);
    assert_int_equal(stats.reclaimed, 0);
    assert_int_equal(stats.oldest_reader_version, 1);
    assert_int_equal(stats.oldest_reader_pid, getpid());
    commit(map);

    sxe_map_read_end(&old_reader);
    uint64_t moved_before = stats.moved_home;
    assert_int_equal(sxe_map_write_begin(map), 0);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.pending, stats.moved_home - moved_before); /* what the moves left */
    assert_int_equal(stats.reclaimed, 33);
    assert_int_equal(stats.oldest_reader_version, 4); /* the newer reader, holding nothing */
    commit(map);
    /* The newer reader still reads its version, whose entries were never reclaimed. */
    assert_int_equal(read_number(&new_reader, 0), 3000);
    assert_int_equal(read_number(&new_reader, 19), 1019);
    sxe_map_read_end(&new_reader);
    /* With no reader behind the published version, none is named. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.oldest_reader_pid, 0);
    assert_int_equal(stats.oldest_reader_version, 0);
    commit(map);
    assert_int_equal(sxe__map_validate(map), 0);
    sxe_map_destroy(map);
}

/* Deleting everything leaves no tombstones once reclaimed: runs ending at an empty slot empty. */
static void test_tombstones_are_trimmed(void **state)
{
    sxe_map_t *map = make_map(fixed_options(64));
    struct sxe_map_stats stats;

    (void)state;
    assert_int_equal(sxe_map_write_begin(map), 0);
    for (uint64_t key = 0; key < 40; key++) {
        assert_int_equal(put(map, key, key), 0);
    }
    commit(map);
    for (uint64_t key = 0; key < 40; key += 8) {
        assert_int_equal(sxe_map_write_begin(map), 0);
        for (uint64_t i = key; i < key + 8; i++) {
            assert_int_equal(delete (map, i), 0);
        }
        commit(map);
    }
    assert_int_equal(sxe_map_write_begin(map), 0);
    commit(map);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.count, 0);
    assert_int_equal(stats.pending, 0);
    assert_int_equal(stats.tombstones, 0);
    for (uint64_t index = 0; index < stats.slots; index++) {
        assert_int_equal(sxe__map_slot(map, index)->tag, SXE__MAP_EMPTY);
    }
    sxe_map_destroy(map);
}

/* A reader whose process died is cleared by the writer, and stops holding versions back. */
static void test_dead_reader_is_cleared(void **state)
{
    struct sxe_map_options options = fixed_options(16);
    struct sxe_test_capture capture;
    struct sxe_map_stats stats;
    sxe_map_t *map;
    int status;

    (void)state;
    options.flags = SXE_MAP_SHARED;
    map = make_map(options);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put(map, 1, 1), 0);
    commit(map);

    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        struct sxe_map_reader reader;
        if (sxe_map_read_begin(map, &reader) != 0 || read_number(&reader, 1) != 1) {
            sxe_test_exit(2);
        }
        raise(SIGKILL);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.readers, 1);

    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put(map, 1, 2), 1);
    commit(map);
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_map_write_begin(map), 0);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "which died reading version 1, is free again"));
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.dead_readers, 1);
    assert_int_equal(stats.readers, 0);
    assert_int_equal(stats.pending, stats.moved_home); /* key 1 may have gone home */
    assert_int_equal(stats.reclaimed, 1);
    commit(map);
    sxe_map_destroy(map);
}

/* Abort undoes puts, replacements and deletes, from the journal or, past its end, by a scan. */
static void test_abort(void **state)
{
    struct sxe_map_options options = variable_options(32, 8192);
    struct sxe_map_stats stats;
    sxe_map_t *map;

    (void)state;
    options.old_versions = 4; /* so the journal holds 4 slots */
    map = make_map(options);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "one", "1"), 0);
    assert_int_equal(put_text(map, "two", "2"), 0);
    assert_int_equal(put_text(map, "three", "3"), 0);
    commit(map);
    sxe_map_stats(map, &stats);
    uint64_t used = stats.arena_used;

    for (unsigned inserts = 1; inserts <= 8; inserts += 7) {
        assert_int_equal(sxe_map_write_begin(map), 0);
        assert_int_equal(put_text(map, "one", "uno"), 1);
        assert_int_equal(put_text(map, "one", "eins"), 1);
        assert_int_equal(sxe_map_delete(map, "two", 3), 0);
        for (unsigned i = 0; i < inserts; i++) {
            char key[16];
            snprintf(key, sizeof(key), "new%u", i);
            assert_int_equal(put_text(map, key, "fresh"), 0);
        }
        assert_int_equal(sxe_map_delete(map, "new0", 4), 0);
        assert_int_equal(sxe__map_validate(map), 0);
        sxe_map_abort(map);
        assert_int_equal(sxe__map_validate(map), 0);

        struct sxe_map_reader reader;
        assert_int_equal(sxe_map_read_begin(map, &reader), 0);
        assert_string_equal(read_text(&reader, "one"), "1");
        assert_string_equal(read_text(&reader, "two"), "2");
        assert_null(read_text(&reader, "new1"));
        sxe_map_read_end(&reader);
        sxe_map_stats(map, &stats);
        assert_int_equal(stats.version, 1);
        assert_int_equal(stats.count, 3);
        assert_int_equal(stats.pending, 0);
        assert_int_equal(stats.arena_used, used);
    }
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.aborts, 2);
    sxe_map_destroy(map);
}

/*
 * A writer that dies mid-transaction, one slot half written: readers keep the published
 * version, and the next writer (or the validator, which takes the lock) rolls back.
 */
static void die_mid_transaction(sxe_map_t *map)
{
    if (sxe_map_write_begin(map) != 0) {
        sxe_test_exit(2);
    }
    for (uint64_t key = 0; key < 10; key++) {
        struct value value = value_of(2000 + key);
        if (sxe_map_put(map, &key, sizeof(key), &value, sizeof(value)) < 0) {
            sxe_test_exit(3);
        }
    }
    uint64_t gone = 11;
    uint64_t fresh = 500;
    struct value value = value_of(500);
    if (sxe_map_delete(map, &gone, sizeof(gone)) != 0 ||
        sxe_map_put(map, &fresh, sizeof(fresh), &value, sizeof(value)) != 0) {
        sxe_test_exit(4);
    }
    /* The next put, cut short: an empty slot whose created says WRITING, its tag not yet set. */
    for (uint64_t index = 0;; index++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        if (slot->tag == SXE__MAP_EMPTY) {
            slot->created = SXE__MAP_WRITING;
            break;
        }
    }
    raise(SIGKILL);
}

/* A writer dies mid-transaction; the next to take the lock (a writer, or a validation first when
 * validated_first) rolls back, once. */
static void writer_dies_then(bool validated_first)
{
    struct sxe_map_options options = fixed_options(64);
    struct sxe_test_capture capture;
    struct sxe_map_reader reader;
    struct sxe_map_stats stats;
    sxe_map_t *map;
    int status;

    options.flags = SXE_MAP_SHARED;
    map = make_map(options);
    assert_int_equal(sxe_map_write_begin(map), 0);
    for (uint64_t key = 0; key < 20; key++) {
        assert_int_equal(put(map, key, 1000 + key), 0);
    }
    commit(map);
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);

    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        die_mid_transaction(map);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    /* Readers, old and new, see only the published version, before any recovery. */
    for (uint64_t key = 0; key < 20; key++) {
        assert_int_equal(read_number(&reader, key), 1000 + key);
        assert_int_equal(read_now(map, key), 1000 + key);
    }
    assert_int_equal(read_now(map, 500), -1);

    sxe_test_capture_start(&capture);
    if (validated_first) {
        assert_int_equal(sxe__map_validate(map), 0);
    }
    assert_int_equal(sxe_map_write_begin(map), 0);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "a writer died holding the lock"));
    assert_non_null(strstr(capture.text, "rolling back to version 1"));
    assert_null(strstr(capture.text, "left a transaction unfinished")); /* recovered once */
    assert_int_equal(sxe__map_validate(map), 0);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.recoveries, 1);
    assert_int_equal(stats.count, 20);
    assert_int_equal(stats.pending, 0);
    assert_int_equal(put(map, 5, 5555), 1);
    commit(map);
    assert_int_equal(read_number(&reader, 5), 1005);
    assert_int_equal(read_now(map, 5), 5555);
    assert_int_equal(read_now(map, 11), 1011);
    assert_int_equal(read_now(map, 500), -1);
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);
}

static void test_writer_dies_mid_transaction(void **state)
{
    (void)state;
    writer_dies_then(false);
    writer_dies_then(true);
}

/* The dirty marker alone (a lock that was not held, say) also makes the next writer roll back. */
static void test_dirty_marker_rolls_back(void **state)
{
    sxe_map_t *map = make_map(variable_options(16, 4096));
    struct sxe_map_stats stats;

    (void)state;
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "kept", "yes"), 0);
    commit(map);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "lost", "no"), 0);
    assert_int_equal(put_text(map, "kept", "changed"), 1);
    /* Pretend the writer vanished without a trace: its handle forgets, the lock is released. */
    map->in_write = false;
    sxe__map_unlock(map);
    assert_int_equal(sxe_map_write_begin(map), 0);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.recoveries, 1);
    assert_int_equal(sxe__map_validate(map), 0);
    commit(map);
    struct sxe_map_reader reader;
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    assert_string_equal(read_text(&reader, "kept"), "yes");
    assert_null(read_text(&reader, "lost"));
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);
}

/* A file keeps the last published version across detach and attach, and a dead writer. */
static void test_file_persistence(void **state)
{
    struct sxe_map_options options = fixed_options(1000);
    char *path = temp_path("persist");
    sxe_map_t *map;
    int status;

    (void)state;
    options.flags = SXE_MAP_DURABLE;
    assert_int_equal(sxe_map_attach(&map, path, &options, SXE_MAP_CREATE), 0);
    assert_int_equal(sxe_map_write_begin(map), 0);
    for (uint64_t key = 0; key < 500; key++) {
        assert_int_equal(sxe_map_put(map, &key, sizeof(key), &(struct value){key, key, ~key},
                                     sizeof(struct value)),
                         0);
    }
    commit(map);
    sxe_map_detach(map);

    /* A process attaches (by the file's own shape), writes half a transaction and is killed. */
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        sxe_map_t *attached;
        if (sxe_map_attach(&attached, path, NULL, 0) != 0 || sxe_map_write_begin(attached) != 0) {
            sxe_test_exit(2);
        }
        for (uint64_t key = 0; key < 250; key++) {
            struct value value = value_of(9);
            if (sxe_map_put(attached, &key, sizeof(key), &value, sizeof(value)) != 1) {
                sxe_test_exit(3);
            }
        }
        raise(SIGKILL);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status));

    assert_int_equal(sxe_map_attach(&map, path, &options, 0), 0);
    assert_int_equal(sxe_map_version(map), 1);
    for (uint64_t key = 0; key < 500; key += 7) {
        assert_int_equal(read_now(map, key), key);
    }
    assert_int_equal(sxe__map_validate(map), 0);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put(map, 1, 11), 1);
    commit(map);
    sxe_map_detach(map);

    /* After a crash of the machine: a lock left held, which SXE_MAP_RECOVER resets. */
    assert_int_equal(sxe_map_attach(&map, path, NULL, 0), 0);
    int stale_owner = 0x3ffffff0; /* a thread id that does not exist */
    memcpy(&map->header->lock, &stale_owner, sizeof(stale_owner));
    sxe_map_detach(map);
    assert_int_equal(sxe_map_attach(&map, path, NULL, SXE_MAP_RECOVER), 0);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put(map, 2, 22), 1);
    commit(map);
    assert_int_equal(read_now(map, 1), 11);
    assert_int_equal(read_now(map, 2), 22);
    sxe_map_detach(map);
    sxe_map_detach(NULL);
    unlink(path);
}

/*
 * A writer lock left unrecoverable (a process took it from a dead writer and released it without
 * pthread_mutex_consistent) fails write_begin and the validator with -ENOTRECOVERABLE, logged,
 * rather than hanging; readers read on, and SXE_MAP_RECOVER makes a new lock.
 */
static void test_unrecoverable_lock(void **state)
{
    struct sxe_map_options options = fixed_options(16);
    struct sxe_test_capture capture;
    char *path = temp_path("lock");
    struct sxe_map_stats stats;
    sxe_map_t *map;
    int status;

    (void)state;
    assert_int_equal(sxe_map_attach(&map, path, &options, SXE_MAP_CREATE), 0);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put(map, 1, 1), 0);
    commit(map);

    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        if (sxe_map_write_begin(map) != 0) {
            sxe_test_exit(2);
        }
        raise(SIGKILL);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_int_equal(pthread_mutex_lock(&map->header->lock), EOWNERDEAD);
    assert_int_equal(pthread_mutex_unlock(&map->header->lock), 0);

    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_map_write_begin(map), -ENOTRECOVERABLE);
    assert_int_equal(sxe__map_validate(map), -ENOTRECOVERABLE);
    sxe_test_capture_stop();
    assert_non_null(
        strstr(capture.text, "map test: cannot take the writer lock: State not recoverable"));
    assert_false(map->in_write);
    assert_int_equal(read_now(map, 1), 1);
    sxe_map_detach(map);

    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_map_attach(&map, path, NULL, SXE_MAP_RECOVER), 0);
    assert_int_equal(sxe_map_write_begin(map), 0);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "the last writer left a transaction unfinished"));
    assert_int_equal(put(map, 1, 2), 1);
    commit(map);
    assert_int_equal(read_now(map, 1), 2);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.recoveries, 1);
    sxe_map_detach(map);
    unlink(path);
}

/*
 * The stress: reader processes read every group of keys in each snapshot while writer processes
 * commit batches, each setting every key of one group to the batch's version (or deleting the
 * whole group), and are killed with SIGKILL at random instants. A reader that ever sees a group
 * whose keys disagree has seen a half-applied batch.
 */
#define STRESS_GROUPS  8
#define STRESS_KEYS    32
#define STRESS_READERS 3

struct stress {
    uint64_t stop;
    uint64_t batches;
    uint64_t reads[STRESS_READERS];
    uint64_t mixed[STRESS_READERS];
    char detail[STRESS_READERS][160];
};

static uint64_t stress_key(unsigned group, unsigned i)
{
    return group * 1000 + i;
}

/* One batch; a writer that is told to die does so half-way through its first. */
static int stress_batch(sxe_map_t *map, unsigned *seed, bool die_half_way)
{
    unsigned group = (unsigned)rand_r(seed) % STRESS_GROUPS;
    bool remove = rand_r(seed) % 8 == 0;
    int rc = sxe_map_write_begin(map);
    if (rc < 0) {
        return rc;
    }
    uint64_t version = sxe_map_version(map) + 1;

    for (unsigned i = 0; i < STRESS_KEYS && rc >= 0; i++) {
        uint64_t key = stress_key(group, i);
        struct value value = value_of(version);
        if (die_half_way && i == STRESS_KEYS / 2) {
            raise(SIGKILL);
        }
        if (remove) {
            rc = sxe_map_delete(map, &key, sizeof(key));
            rc = rc == -ENOENT ? 0 : rc;
            continue;
        }
        rc = sxe_map_put(map, &key, sizeof(key), &value, sizeof(value));
        if (rc >= 0 && rand_r(seed) % 4 == 0) {
            rc = sxe_map_put(map, &key, sizeof(key), &value, sizeof(value)); /* in place */
        }
    }
    if (rc < 0) {
        sxe_map_abort(map); /* -ENOBUFS: readers hold old versions; try again */
        return rc;
    }
    return sxe_map_commit(map);
}

static void stress_writer(const char *path, struct stress *shared, unsigned seed, bool die_half_way)
{
    sxe_map_t *map;

    /* Each writer rolls back its killed predecessor's batch, and would say so at WARN. */
    sxe_log_set_module_level("MAP", SXE_LOG_LEVEL_ERROR);
    if (sxe_map_attach(&map, path, NULL, 0) != 0) {
        sxe_test_exit(2);
    }
    for (;;) {
        if (stress_batch(map, &seed, die_half_way) == 0) {
            __atomic_fetch_add(&shared->batches, 1, __ATOMIC_RELAXED);
        }
    }
}

/* Checks one snapshot: every group's keys all absent, or all present with one version. */
static bool stress_check(const struct sxe_map_reader *reader, char *detail, size_t size)
{
    for (unsigned group = 0; group < STRESS_GROUPS; group++) {
        int64_t first = 0;
        for (unsigned i = 0; i < STRESS_KEYS; i++) {
            uint64_t key = stress_key(group, i);
            struct value copy;
            const struct value *value =
                !reader->map->in_place ? sxe_map_find(reader, &key, sizeof(key), NULL)
                : sxe_map_get(reader, &key, sizeof(key), &copy, sizeof(copy)) < 0 ? NULL
                                                                                  : &copy;
            int64_t seen = value == NULL ? -1 : (int64_t)value->a;
            if (value != NULL && (value->b != value->a || value->c != ~value->a)) {
                snprintf(detail, size, "torn value under key %llu", (unsigned long long)key);
                return false;
            }
            if (i == 0) {
                first = seen;
            } else if (seen != first) {
                snprintf(detail, size, "snapshot %llu: group %u key 0 at %lld, key %u at %lld",
                         (unsigned long long)reader->version, group, (long long)first, i,
                         (long long)seen);
                return false;
            }
        }
    }
    return true;
}

static void stress_reader(const char *path, struct stress *shared, unsigned number)
{
    struct sxe_map_reader reader;
    uint64_t last_version = 0;
    sxe_map_t *map;

    if (sxe_map_attach(&map, path, NULL, 0) != 0) {
        sxe_test_exit(2);
    }
    while (!__atomic_load_n(&shared->stop, __ATOMIC_RELAXED)) {
        if (sxe_map_read_begin(map, &reader) != 0) {
            sxe_test_exit(3);
        }
        if (reader.version < last_version) {
            shared->mixed[number]++;
            snprintf(shared->detail[number], sizeof(shared->detail[number]),
                     "version went back from %llu to %llu", (unsigned long long)last_version,
                     (unsigned long long)reader.version);
        }
        last_version = reader.version;
        if (!stress_check(&reader, shared->detail[number], sizeof(shared->detail[number]))) {
            shared->mixed[number]++;
        }
        sxe_map_read_end(&reader);
        __atomic_fetch_add(&shared->reads[number], 1, __ATOMIC_RELAXED);
    }
    sxe_map_detach(map);
    sxe_test_exit(0);
}

static pid_t start_writer(const char *path, struct stress *shared, unsigned seed, bool die)
{
    pid_t child = fork();

    assert_true(child >= 0);
    if (child == 0) {
        stress_writer(path, shared, seed, die);
    }
    return child;
}

static void kill_and_reap(pid_t child)
{
    int status;

    kill(child, SIGKILL);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/*
 * Over 80 lines on purpose: setup, forks, kills, reaps and checks run in the one order the test is
 * about, and helpers would scatter the children's pids and the shared counters between them.
 */
static void stress(unsigned flags)
{
    struct sxe_map_options options = fixed_options(STRESS_GROUPS * STRESS_KEYS);
    char *path = temp_path("stress");
    pid_t readers[STRESS_READERS];
    struct sxe_map_stats stats;
    unsigned seed = 4242;
    unsigned kills = 0;
    sxe_map_t *map;
    int status;

    options.flags = flags;
    options.old_versions = 8 * STRESS_GROUPS * STRESS_KEYS;
    struct stress *shared =
        mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(shared != MAP_FAILED);
    memset(shared, 0, sizeof(*shared));
    assert_int_equal(sxe_map_attach(&map, path, &options, SXE_MAP_CREATE), 0);
    assert_int_equal(sxe_map_write_begin(map), 0);
    for (unsigned group = 0; group < STRESS_GROUPS; group++) {
        for (unsigned i = 0; i < STRESS_KEYS; i++) {
            assert_int_equal(put(map, stress_key(group, i), 1), 0);
        }
    }
    commit(map);

    for (unsigned i = 0; i < STRESS_READERS; i++) {
        readers[i] = fork();
        assert_true(readers[i] >= 0);
        if (readers[i] == 0) {
            stress_reader(path, shared, i);
        }
    }
    /* One writer dies half-way through a batch on purpose, so at least one rollback happens. */
    pid_t writer = start_writer(path, shared, 1, true);
    assert_int_equal(waitpid(writer, &status, 0), writer);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    kills++;

    uint64_t end = sxe_clock_mono_ns() + 2500 * SXE_NS_PER_MSEC;
    writer = start_writer(path, shared, 2, false);
    while (sxe_clock_mono_ns() < end) {
        /* The random instants of the kills are the test, so this sleep stays. */
        usleep(2000 + rand_r(&seed) % 20000);
        kill_and_reap(writer);
        kills++;
        writer = start_writer(path, shared, rand_r(&seed), false);
    }
    kill_and_reap(writer);
    kills++;
    __atomic_store_n(&shared->stop, 1, __ATOMIC_RELAXED);

    uint64_t reads = 0, mixed = 0;
    for (unsigned i = 0; i < STRESS_READERS; i++) {
        assert_int_equal(waitpid(readers[i], &status, 0), readers[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        reads += shared->reads[i];
        mixed += shared->mixed[i];
        if (shared->mixed[i] != 0) {
            print_message("reader %u: %s\n", i, shared->detail[i]);
        }
    }
    assert_int_equal(mixed, 0);
    assert_int_equal(sxe__map_validate(map), 0);
    struct sxe_map_reader reader;
    char detail[160];
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    assert_true(stress_check(&reader, detail, sizeof(detail)));
    sxe_map_read_end(&reader);
    sxe_map_stats(map, &stats);
    assert_true(stats.recoveries >= 1);
    assert_true(reads > 100);
    assert_true(shared->batches > 10);
    print_message(
        "stress%s: %llu snapshots checked by %u readers, %llu batches committed, %u writers "
        "killed, %llu rollbacks, 0 mixed snapshots\n",
        flags & SXE_MAP_IN_PLACE ? " (in place)" : "", (unsigned long long)reads, STRESS_READERS,
        (unsigned long long)shared->batches, kills, (unsigned long long)stats.recoveries);
    sxe_map_detach(map);
    munmap(shared, sizeof(*shared));
    unlink(path);
}

static void test_stress_readers_and_killed_writers(void **state)
{
    (void)state;
    stress(0);
}

/* The same in an SXE_MAP_IN_PLACE map: readers copy values out, following the log. */
static void test_stress_in_place(void **state)
{
    (void)state;
    stress(SXE_MAP_IN_PLACE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_reader_table_full, reset),
        cmocka_unit_test_teardown(test_snapshot_outlives_commits, reset),
        cmocka_unit_test_teardown(test_tombstones_are_trimmed, reset),
        cmocka_unit_test_teardown(test_dead_reader_is_cleared, reset),
        cmocka_unit_test_teardown(test_abort, reset),
        cmocka_unit_test_teardown(test_writer_dies_mid_transaction, reset),
        cmocka_unit_test_teardown(test_dirty_marker_rolls_back, reset),
        cmocka_unit_test_teardown(test_file_persistence, reset),
        cmocka_unit_test_teardown(test_unrecoverable_lock, reset),
        cmocka_unit_test_teardown(test_stress_readers_and_killed_writers, reset),
        cmocka_unit_test_teardown(test_stress_in_place, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
