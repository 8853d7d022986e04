/*
 * SXE_MAP_IN_PLACE maps (docs/map.md, "In place"): a put that replaces a value writes over it in
 * its slot after keeping the old one in the log, and readers copy values out, following the log
 * back to their snapshot's version. Checked here: the slot stays put and old snapshots keep their
 * values; sxe_map_get_many() on both kinds of map; abort and a dead writer's rollback put values
 * back (and the UNDONE mark keeps the chain whole); a full log is -ENOBUFS and then wraps; deletes
 * and re-inserts; a reused slot carries no history; a copy torn by a put is taken again; records
 * that are not the slot's are refused. The log's validator and invalid use:
 * test_map_in_place_checks.c.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "map_test.h"
#include "map_trap.h"

static uint64_t undo_of(sxe_map_t *map, uint64_t key)
{
    return *sxe__map_slot_undo(sxe__map_slot(map, slot_of(map, key)));
}

/* Replacing a value leaves the entry in its slot; each snapshot keeps the value it saw. */
static void test_a_put_replaces_in_its_slot(void **state)
{
    sxe_map_t *map = map_with(in_place_options(16), 2);
    uint64_t index = slot_of(map, 1);
    struct sxe_map_reader first, second;

    (void)state;
    read_begin(map, &first);
    begin(map);
    assert_int_equal(put(map, 1, 11), 1);
    assert_int_equal(slot_of(map, 1), index);
    assert_int_equal(sxe__map_slot(map, index)->created, 2);
    assert_int_equal(read_number(&first, 1), 10); /* from the log, mid-transaction */
    assert_int_equal(put(map, 1, 111), 1);        /* its own version: no second record */
    assert_int_equal(stats_of(map).pending, 1);
    commit(map);
    read_begin(map, &second);
    begin(map);
    assert_int_equal(put(map, 1, 12), 1);
    commit(map);

    assert_int_equal(read_number(&first, 1), 10); /* two records back */
    assert_int_equal(read_number(&second, 1), 111);
    assert_int_equal(read_now(map, 1), 12);
    assert_int_equal(read_number(&first, 2), 20);
    assert_int_equal(slot_of(map, 1), index);
    struct sxe_map_stats stats = stats_of(map);
    assert_int_equal(stats.pending, 2);
    assert_int_equal(stats.moved_home, 0);
    assert_int_equal(stats.tombstones, 0);

    /* The second reader holds only the newer record back. */
    sxe_map_read_end(&first);
    begin(map);
    assert_int_equal(stats_of(map).pending, 1);
    sxe_map_abort(map);
    sxe_map_read_end(&second);
    begin(map);
    stats = stats_of(map);
    assert_int_equal(stats.pending, 0);
    assert_int_equal(stats.held_back, 0);
    assert_int_equal(stats.reclaimed, 2);
    commit(map);
    sxe_map_destroy(map);
}

/*
 * Checks get_many's answers for keys 1 to 6, 99 (absent) and a key of the wrong size: key k holds
 * 10 * k, or 1000 + k for the even keys when replaced.
 */
static void check_get_many(const struct sxe_map_reader *reader, bool replaced)
{
    uint64_t keys[8] = {1, 2, 3, 4, 5, 6, 99, 7};
    const void *pointers[8];
    size_t key_sizes[8];
    struct value values[8];
    int64_t sizes[8];

    for (unsigned i = 0; i < 8; i++) {
        pointers[i] = &keys[i];
        key_sizes[i] = i == 7 ? 4 : sizeof(uint64_t);
    }
    memset(values, 0xee, sizeof(values));
    assert_int_equal(sxe_map_get_many(reader, 7, pointers, NULL, values, sizeof(values[0]), sizes),
                     6);
    for (unsigned i = 0; i < 6; i++) {
        uint64_t expected = replaced && keys[i] % 2 == 0 ? 1000 + keys[i] : 10 * keys[i];
        assert_int_equal(sizes[i], sizeof(struct value));
        struct value want = value_of(expected);
        assert_memory_equal(&values[i], &want, sizeof(want));
    }
    assert_int_equal(sizes[6], -ENOENT);
    assert_int_equal(values[6].a, 0xeeeeeeeeeeeeeeeeULL); /* nothing copied for a miss */

    /* Key sizes given, one invalid; a capacity that takes a part of each value. */
    uint64_t parts[8];
    assert_int_equal(
        sxe_map_get_many(reader, 8, pointers, key_sizes, parts, sizeof(parts[0]), sizes), 6);
    assert_int_equal(sizes[7], -EINVAL);
    assert_int_equal(sizes[0], sizeof(struct value));
    assert_int_equal(parts[1], replaced ? 1002 : 20);
    assert_int_equal(sxe_map_get_many(reader, 7, pointers, NULL, NULL, 0, NULL), 6);
}

/* Walks reader's snapshot with sxe_map_next_copy(): numbers[key] = its value's. @return entries. */
static unsigned walk(const struct sxe_map_reader *reader, int64_t numbers[8])
{
    uint64_t cursor = 0, key;
    struct value value;
    unsigned entries = 0;
    int rc;

    for (unsigned key_number = 0; key_number < 8; key_number++) {
        numbers[key_number] = -1;
    }
    while ((rc = sxe_map_next_copy(reader, &cursor, &key, &value, sizeof(value))) == 1) {
        assert_true(key < 8 && numbers[key] == -1); /* each key once */
        assert_true(value.b == value.a && value.c == ~value.a);
        numbers[key] = (int64_t)value.a;
        entries++;
    }
    assert_int_equal(rc, 0);
    return entries;
}

/*
 * sxe_map_next_copy() walks a snapshot of an in-place map: an old snapshot sees a replaced key's
 * old value (from the log) and a key deleted since, not a key inserted since; a new one the
 * reverse. A map that hands out pointers is walked with sxe_map_next() instead.
 */
static void test_next_copy(void **state)
{
    sxe_map_t *map = map_with(in_place_options(16), 5);
    struct sxe_map_reader old, now;
    int64_t numbers[8];

    (void)state;
    read_begin(map, &old);
    begin(map);
    assert_int_equal(put(map, 1, 11), 1);
    assert_int_equal(put(map, 1, 12), 1);
    assert_int_equal(delete (map, 2), 0);
    assert_int_equal(put(map, 6, 60), 0);
    commit(map);
    read_begin(map, &now);
    assert_int_equal(walk(&old, numbers), 5);
    assert_int_equal(numbers[1], 10);
    assert_int_equal(numbers[2], 20);
    assert_int_equal(numbers[5], 50);
    assert_int_equal(numbers[6], -1);
    assert_int_equal(walk(&now, numbers), 5);
    assert_int_equal(numbers[1], 12);
    assert_int_equal(numbers[2], -1);
    assert_int_equal(numbers[6], 60);
    sxe_map_read_end(&now);
    sxe_map_read_end(&old);
    sxe_map_destroy(map);
}

/* sxe_map_get_many() copies each key's value in the snapshot, in an in-place map or not. */
static void test_get_many(void **state)
{
    (void)state;
    for (unsigned in_place = 0; in_place <= 1; in_place++) {
        struct sxe_map_options options = in_place ? in_place_options(64) : fixed_options(64);
        options.old_versions = 64;
        sxe_map_t *map = map_with(options, 40);
        struct sxe_map_reader old, now;

        read_begin(map, &old);
        begin(map);
        for (uint64_t key = 2; key <= 40; key += 2) {
            assert_int_equal(put(map, key, 1000 + key), 1);
        }
        commit(map);
        read_begin(map, &now);
        check_get_many(&old, false);
        for (uint64_t key = 2; key <= 6; key += 2) {
            assert_int_equal(read_number(&old, key), 10 * key);
        }
        check_get_many(&now, true);
        struct value one;
        assert_int_equal(sxe_map_get(&now, &(uint64_t){2}, 8, &one, 8), sizeof(one));
        assert_int_equal(one.a, 1002);
        sxe_map_read_end(&old);
        sxe_map_read_end(&now);
        sxe_map_destroy(map);
    }
}

/*
 * Abort puts the old values back from the log, and marks the undo fields UNDONE; a later put
 * chains through the undone record, and old snapshots still find their values.
 */
static void test_abort_puts_values_back(void **state)
{
    sxe_map_t *map = map_with(in_place_options(16), 3);
    struct sxe_map_reader reader;

    (void)state;
    read_begin(map, &reader);
    begin(map);
    assert_int_equal(put(map, 1, 11), 1);
    assert_int_equal(put(map, 1, 12), 1);
    assert_int_equal(put(map, 2, 21), 1);
    assert_int_equal(put(map, 9, 90), 0);
    uint64_t record = undo_of(map, 1);
    sxe_map_abort(map);
    assert_int_equal(sxe__map_validate(map), 0);
    assert_int_equal(read_now(map, 1), 10);
    assert_int_equal(read_now(map, 2), 20);
    assert_int_equal(read_now(map, 9), -1);
    assert_int_equal(read_number(&reader, 1), 10);
    assert_int_equal(undo_of(map, 1), record | SXE__MAP_UNDONE);
    assert_int_equal(sxe__map_slot(map, slot_of(map, 1))->created, 1);

    begin(map);
    assert_int_equal(put(map, 1, 13), 1);
    commit(map);
    assert_int_equal(read_number(&reader, 1), 10);
    assert_int_equal(read_now(map, 1), 13);
    assert_int_equal(read_now(map, 2), 20);
    sxe_map_read_end(&reader);
    begin(map);
    assert_int_equal(stats_of(map).pending, 0); /* the undone records too */
    commit(map);
    sxe_map_destroy(map);
}

/* A full log refuses the put with -ENOBUFS and changes nothing; reclaimed, the log wraps. */
static void test_a_full_log(void **state)
{
    struct sxe_map_options options = in_place_options(8);
    struct sxe_test_capture capture;
    struct sxe_map_reader reader;
    sxe_map_t *map;

    (void)state;
    options.old_versions = 2;
    map = map_with(options, 3);
    read_begin(map, &reader);
    begin(map);
    assert_int_equal(put(map, 1, 11), 1);
    assert_int_equal(put(map, 2, 21), 1);
    sxe_log_set_module_level("MAP", SXE_LOG_LEVEL_FATAL);
    assert_int_equal(put(map, 3, 31), -ENOBUFS);
    assert_int_equal(stats_of(map).full, 1);
    assert_int_equal(read_number(&reader, 3), 30);
    commit(map);
    assert_int_equal(read_now(map, 3), 30);
    assert_int_equal(read_now(map, 1), 11);
    sxe_map_read_end(&reader);

    /* Each round holds a reader across one commit; positions run past the log's size. */
    for (uint64_t round = 1; round <= 10; round++) {
        read_begin(map, &reader);
        begin(map);
        assert_int_equal(put(map, 3, 100 + round), 1);
        assert_int_equal(put(map, 1, 200 + round), 1);
        commit(map);
        assert_int_equal(read_number(&reader, 3), round == 1 ? 30 : 100 + round - 1);
        assert_int_equal(read_now(map, 1), 200 + round);
        sxe_map_read_end(&reader);
    }
    assert_int_equal(map->header->log_tail, 22);

    /* The error counts the records that wait, from the log's head on, not from position 0. */
    read_begin(map, &reader);
    begin(map);
    assert_int_equal(put(map, 3, 300), 1);
    assert_int_equal(put(map, 1, 301), 1);
    sxe_log_set_module_level("MAP", SXE_LOG_LEVEL_ERROR);
    sxe_test_capture_start(&capture);
    assert_int_equal(put(map, 2, 302), -ENOBUFS);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "2 old versions of 2 wait"));
    commit(map);
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);
}

/* A key replaced in place, deleted, then put again in another slot: each snapshot sees its own. */
static void test_deletes_and_puts_again(void **state)
{
    sxe_map_t *map = map_with(in_place_options(16), 1);
    struct sxe_map_reader readers[4];

    (void)state;
    read_begin(map, &readers[0]);
    begin(map);
    assert_int_equal(put(map, 1, 11), 1);
    commit(map);
    read_begin(map, &readers[1]);
    begin(map);
    assert_int_equal(delete (map, 1), 0);
    commit(map);
    read_begin(map, &readers[2]);
    begin(map);
    assert_int_equal(put(map, 1, 14), 0);
    commit(map);
    read_begin(map, &readers[3]);
    int64_t expected[4] = {10, 11, -1, 14};
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(read_number(&readers[i], 1), expected[i]);
        sxe_map_read_end(&readers[i]);
    }
    begin(map);
    assert_int_equal(stats_of(map).pending, 0);
    commit(map);
    sxe_map_destroy(map);
}

/*
 * A slot filled anew has no history: its undo field names no record, even where the slot's last
 * occupant left one that is still in the log's memory. A snapshot from before the new entry must
 * not find the old occupant's value through it.
 */
static void test_a_reused_slot_has_no_history(void **state)
{
    sxe_map_t *map = map_with(in_place_options(4), 1);
    struct sxe_map_reader reader;

    (void)state;
    uint64_t home = slot_of(map, 1);
    begin(map);
    assert_int_equal(put(map, 1, 11), 1); /* record at position 0 */
    commit(map);
    begin(map);
    assert_int_equal(delete (map, 1), 0);
    commit(map);
    read_begin(map, &reader); /* at version 3: key 1 is deleted */
    begin(map);               /* reclaims the deleted entry and the record */
    assert_int_equal(map->header->log_head, 1);
    assert_int_equal(put(map, 1, 14), 0);
    assert_int_equal(slot_of(map, 1), home);
    assert_int_equal(undo_of(map, 1), SXE__MAP_NO_RECORD);
    commit(map);
    assert_int_equal(read_number(&reader, 1), -1);
    assert_int_equal(read_now(map, 1), 14);
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);
}

/* A writer process that dies mid-transaction, after puts in place and an insert. */
static void test_a_dead_writer_is_rolled_back(void **state)
{
    struct sxe_map_options options = in_place_options(32);
    struct sxe_map_reader reader;
    int status;

    (void)state;
    options.flags |= SXE_MAP_SHARED;
    sxe_map_t *map = map_with(options, 8);
    read_begin(map, &reader);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        sxe_log_set_module_level("MAP", SXE_LOG_LEVEL_FATAL);
        if (sxe_map_write_begin(map) == 0) {
            for (uint64_t key = 1; key <= 4; key++) {
                struct value value = value_of(500 + key);
                (void)!sxe_map_put(map, &key, sizeof(key), &value, sizeof(value));
            }
            (void)!sxe_map_put(map, &(uint64_t){20}, 8, &(struct value){0}, sizeof(struct value));
        }
        raise(SIGKILL);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_int_equal(read_number(&reader, 2), 20); /* before the rollback: from the log */
    assert_int_equal(read_now(map, 3), 30);

    sxe_log_set_module_level("MAP", SXE_LOG_LEVEL_FATAL);
    begin(map);
    assert_int_equal(stats_of(map).recoveries, 1);
    for (uint64_t key = 1; key <= 8; key++) {
        assert_int_equal(read_now(map, key), 10 * key);
    }
    assert_int_equal(read_now(map, 20), -1);
    assert_int_equal(undo_of(map, 4) & SXE__MAP_UNDONE, SXE__MAP_UNDONE);
    assert_int_equal(put(map, 4, 44), 1);
    commit(map);
    assert_int_equal(read_number(&reader, 4), 40);
    assert_int_equal(read_now(map, 4), 44);
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);
}

/*
 * A writer that dies in sxe_map_write_begin(), its dirty marker set: the log's records from where
 * the last transaction began are all published, and the rollback leaves their values alone.
 */
static void test_the_dirty_marker_after_a_commit(void **state)
{
    sxe_map_t *map = map_with(in_place_options(8), 2);

    (void)state;
    begin(map);
    assert_int_equal(put(map, 1, 11), 1);
    commit(map);
    assert_true(map->header->txn_log_tail < map->header->log_tail);
    map->header->writing = 1;
    sxe_log_set_module_level("MAP", SXE_LOG_LEVEL_FATAL);
    begin(map);
    assert_int_equal(stats_of(map).recoveries, 1);
    assert_int_equal(read_now(map, 1), 11);
    assert_int_equal(undo_of(map, 1) & SXE__MAP_UNDONE, 0);
    commit(map);
    sxe_map_destroy(map);
}

/* An abort whose journal overflowed rolls back by a scan, and puts values back from the log. */
static void test_a_scanning_abort(void **state)
{
    struct sxe_map_options options = in_place_options(16);
    sxe_map_t *map;

    (void)state;
    options.old_versions = 2;
    map = map_with(options, 4);
    begin(map);
    assert_int_equal(put(map, 1, 11), 1);
    assert_int_equal(put(map, 2, 21), 1);
    for (uint64_t key = 5; key <= 8; key++) {
        assert_int_equal(put(map, key, 10 * key), 0);
    }
    assert_true(map->header->journal_count > map->old_versions);
    sxe_map_abort(map);
    assert_int_equal(sxe__map_validate(map), 0);
    assert_int_equal(read_now(map, 1), 10);
    assert_int_equal(read_now(map, 2), 20);
    assert_int_equal(read_now(map, 5), -1);
    assert_int_equal(stats_of(map).count, 4);
    sxe_map_destroy(map);
}

/* Whether every page of map's log is in memory. */
static bool log_is_resident(sxe_map_t *map)
{
    uintptr_t page = 4096;
    uintptr_t from = (uintptr_t)map->log & ~(page - 1);
    uintptr_t to = (uintptr_t)map->log + map->old_versions * map->record_size;
    unsigned char pages[64];

    assert_true((to - from + page - 1) / page <= sizeof(pages));
    assert_int_equal(mincore((void *)from, to - from, pages), 0);
    for (uintptr_t at = 0; at < (to - from + page - 1) / page; at++) {
        if ((pages[at] & 1) == 0) {
            return false;
        }
    }
    return true;
}

/*
 * An in-place map's log is faulted in when the map is made, not record by record while the writer
 * puts: with MADV_POPULATE_WRITE, or where the kernel lacks it (EINVAL), by touching its pages. A
 * refusal for want of memory fails sxe_map_create() with -ENOMEM and a clear error. A default map
 * has no log to fault in.
 */
static void test_the_log_is_faulted_in_at_create(void **state)
{
    struct sxe_map_options options = in_place_options(256);
    struct sxe_test_capture capture;
    sxe_map_t *map = NULL;

    (void)state;
    options.old_versions = 1000; /* 64,000 bytes of records: 16 pages */
    sxe__sys_count(SXE_SYS_madvise);
    errno = ENOENT; /* a success leaves errno as it was: only the result says it failed */
    map = make_map(options);
    assert_int_equal(sxe__sys_calls(SXE_SYS_madvise), 1);
    assert_true(log_is_resident(map));
    sxe_map_destroy(map);

    sxe__sys_fail(SXE_SYS_madvise, 1, 1, EINVAL);
    map = make_map(options);
    assert_true(log_is_resident(map));
    begin(map);
    assert_int_equal(put(map, 1, 10), 0);
    commit(map);
    assert_int_equal(read_now(map, 1), 10);
    sxe_map_destroy(map);

    sxe__sys_fail(SXE_SYS_madvise, 1, 1, ENOMEM);
    sxe_log_set_module_level("MAP", SXE_LOG_LEVEL_ERROR); /* earlier tests quieten it */
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_map_create(&map, &options), -ENOMEM);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "cannot fault in the"));

    sxe__sys_count(SXE_SYS_madvise);
    sxe_map_destroy(make_map(fixed_options(256)));
    assert_int_equal(sxe__sys_calls(SXE_SYS_madvise), 0);
}

/* Big values, so a copy takes more than one load and store: a put can tear it. */
#define BIG_VALUE 2000

static sxe_map_t *trapped_map;

static void trapped_put(void)
{
    static unsigned char value[BIG_VALUE];
    uint64_t key = 1;

    memset(value, 2, sizeof(value));
    assert_int_equal(sxe_map_write_begin(trapped_map), 0);
    assert_int_equal(sxe_map_put(trapped_map, &key, sizeof(key), value, sizeof(value)), 1);
    assert_int_equal(sxe_map_commit(trapped_map), 0);
}

/* A shared map is backed by huge pages at create, where the kernel makes them (not only where
 * shmem_enabled allows them): a put then walks no page table of 4 KB pages. */
static void test_a_shared_map_is_backed_by_huge_pages(void **state)
{
    struct sxe_map_options options = in_place_options(60000); /* slots of 6 MB */

    (void)state;
    options.flags |= SXE_MAP_SHARED;
    sxe_map_t *map = make_map(options);
    long huge = sxe_test_smaps_kb(map->header, "ShmemPmdMapped:");
    if (sxe_test_kernel_collapses()) {
        assert_int_equal(huge, (long)(map->region_size / (2u << 20)) * 2048);
    } else {
        assert_int_equal(huge, 0);
    }
    begin(map);
    assert_int_equal(put(map, 1, 10), 0);
    commit(map);
    assert_int_equal(read_now(map, 1), 10);
    sxe_map_destroy(map);
}

/*
 * A put lands while a reader copies the value out: the copy's first part is on one page, the rest
 * on a trapped one, so the put runs between the two. The copy is torn (old, then new bytes), and
 * the reader's sequence check takes it again, from the log: the snapshot's value, whole.
 */
static void test_a_torn_copy_is_taken_again(void **state)
{
    struct sxe_map_options options = {.name = "big",
                                      .capacity = 4,
                                      .key_size = 8,
                                      .value_size = BIG_VALUE,
                                      .flags = SXE_MAP_IN_PLACE};
    static unsigned char value[BIG_VALUE];
    struct sxe_map_reader reader;
    uint64_t key = 1;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    (void)state;
    trapped_map = make_map(options);
    memset(value, 1, sizeof(value));
    begin(trapped_map);
    assert_int_equal(sxe_map_put(trapped_map, &key, sizeof(key), value, sizeof(value)), 0);
    commit(trapped_map);
    unsigned char *pages =
        mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(pages != MAP_FAILED);
    unsigned char *out = pages + page - BIG_VALUE / 2;

    read_begin(trapped_map, &reader);
    const void *steps[] = {pages + page};
    trap_arm(steps, 1, trapped_put);
    assert_int_equal(sxe_map_get(&reader, &key, sizeof(key), out, BIG_VALUE), BIG_VALUE);
    assert_int_equal(trap_disarm(), 1);
    assert_memory_equal(out, value, BIG_VALUE);
    assert_int_equal(sxe__map_slot(trapped_map, slot_of(trapped_map, 1))->created, 2);
    sxe_map_read_end(&reader);
    munmap(pages, 2 * page);
    sxe_map_destroy(trapped_map);
}

/* A reader that follows a record that is not its slot's, or was reused, takes nothing from it. */
static void test_a_foreign_record_is_refused(void **state)
{
    sxe_map_t *map = map_with(in_place_options(8), 2);
    struct value out;

    (void)state;
    begin(map);
    assert_int_equal(put(map, 1, 11), 1);
    commit(map);
    uint64_t index = slot_of(map, 1), position = undo_of(map, 1);
    assert_true(sxe__map_log_follow(map, index, position, 1, &out, sizeof(out)));
    assert_int_equal(out.a, 10);
    assert_false(sxe__map_log_follow(map, index, position, 0, &out, sizeof(out))); /* too old */
    assert_false(sxe__map_log_follow(map, slot_of(map, 2), position, 1, &out, sizeof(out)));
    sxe__map_record(map, position)->position = position + map->old_versions; /* reused */
    assert_false(sxe__map_log_follow(map, index, position, 1, &out, sizeof(out)));
    assert_false(sxe__map_log_follow(map, index, SXE__MAP_NO_RECORD, 1, &out, sizeof(out)));
    sxe__map_record(map, position)->position = position;
    sxe_map_destroy(map);
}

static struct sxe__map_record *moving_record;

/* The other thread's work, between the reader's copy of a record and its check that the record
 * is still the one it followed: a writer reuses the record for a later position. */
static void reuse_the_record(void)
{
    moving_record->position += trapped_map->old_versions;
}

/*
 * A record reused while a reader copies its value out (the copy's second half is on a trapped
 * page): the position it finds after the copy is another, later one, so the copy is refused,
 * not taken as the value it followed.
 */
static void test_a_record_reused_during_its_copy_is_refused(void **state)
{
    struct sxe_map_options options = {.name = "big",
                                      .capacity = 4,
                                      .key_size = 8,
                                      .value_size = BIG_VALUE,
                                      .flags = SXE_MAP_IN_PLACE};
    static unsigned char value[BIG_VALUE];
    uint64_t key = 1;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    (void)state;
    trapped_map = make_map(options);
    memset(value, 1, sizeof(value));
    begin(trapped_map);
    assert_int_equal(sxe_map_put(trapped_map, &key, sizeof(key), value, sizeof(value)), 0);
    commit(trapped_map);
    trapped_put(); /* the 1s go to the log, the 2s into the slot */
    uint64_t index = slot_of(trapped_map, 1), position = undo_of(trapped_map, 1);
    moving_record = sxe__map_record(trapped_map, position);
    unsigned char *pages =
        mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(pages != MAP_FAILED);
    unsigned char *out = pages + page - BIG_VALUE / 2;

    assert_true(sxe__map_log_follow(trapped_map, index, position, 1, out, BIG_VALUE));
    assert_memory_equal(out, value, BIG_VALUE); /* untouched, the record is the 1s */
    const void *steps[] = {pages + page};
    trap_arm(steps, 1, reuse_the_record);
    assert_false(sxe__map_log_follow(trapped_map, index, position, 1, out, BIG_VALUE));
    assert_int_equal(trap_disarm(), 1);
    moving_record->position = position;
    munmap(pages, 2 * page);
    sxe_map_destroy(trapped_map);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_a_put_replaces_in_its_slot, reset),
        cmocka_unit_test_teardown(test_get_many, reset),
        cmocka_unit_test_teardown(test_next_copy, reset),
        cmocka_unit_test_teardown(test_abort_puts_values_back, reset),
        cmocka_unit_test_teardown(test_a_full_log, reset),
        cmocka_unit_test_teardown(test_deletes_and_puts_again, reset),
        cmocka_unit_test_teardown(test_a_reused_slot_has_no_history, reset),
        cmocka_unit_test_teardown(test_a_dead_writer_is_rolled_back, reset),
        cmocka_unit_test_teardown(test_the_dirty_marker_after_a_commit, reset),
        cmocka_unit_test_teardown(test_a_scanning_abort, reset),
        cmocka_unit_test_teardown(test_the_log_is_faulted_in_at_create, reset),
        cmocka_unit_test_teardown(test_a_shared_map_is_backed_by_huge_pages, reset),
        cmocka_unit_test_teardown(test_a_torn_copy_is_taken_again, reset),
        cmocka_unit_test_teardown(test_a_foreign_record_is_refused, reset),
        cmocka_unit_test(test_a_record_reused_during_its_copy_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
