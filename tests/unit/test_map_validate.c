/*
 * Maps' self-checks and the reader's defences: the validator's report of each broken invariant,
 * readers that bounds-check a slot's block, a rollback that survives a damaged block, and readers
 * that race a writer (made deterministic by a page trap).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "map_test.h"
#include "map_trap.h"

/* Validates the map, which must be invalid with reason in the log. @return the log. */
static const char *expect_report(sxe_map_t *map, const char *reason)
{
    static struct sxe_test_capture capture;

    sxe_test_capture_start(&capture);
    int rc = sxe__map_validate(map);
    sxe_test_capture_stop();
    assert_int_equal(rc, -EUCLEAN);
    if (strstr(capture.text, reason) == NULL) {
        fail_msg("expected \"%s\" in: %s", reason, capture.text);
    }
    return capture.text;
}

/* A corruption that knows which slot or offset it broke writes the whole report here. */
static char expected_detail[160];

/*
 * Corrupts a small committed map and checks the validator's report. The map: "a", "b" and "c"
 * at version 1, "a" replaced at version 2, so its old version waits on the ring.
 */
static void expect_invalid(void (*corrupt)(sxe_map_t *map), const char *reason)
{
    sxe_map_t *map = make_map(variable_options(16, 4096));

    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "a", "1"), 0);
    assert_int_equal(put_text(map, "b", "2"), 0);
    assert_int_equal(put_text(map, "c", "3"), 0);
    commit(map);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "a", "one"), 1);
    commit(map);
    expected_detail[0] = '\0';
    corrupt(map);
    const char *report = expect_report(map, reason);
    if (strstr(report, expected_detail) == NULL) {
        fail_msg("expected \"%s\" in: %s", expected_detail, report);
    }
    sxe_map_destroy(map);
}

/* The slot of the current version of key, a string. */
static uint64_t current_slot(sxe_map_t *map, const char *key)
{
    uint64_t tag = sxe__map_hash(map, key, strlen(key)) | 1;

    for (uint64_t index = 0; index < map->slot_count; index++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        if (slot->tag == tag && slot->deleted == 0) {
            return index;
        }
    }
    fail_msg("no current version of \"%s\"", key);
    return 0;
}

/* The arena block of the entry in the slot at index. */
static unsigned char *block_of(sxe_map_t *map, uint64_t index)
{
    return map->arena + *sxe__map_slot_block(sxe__map_slot(map, index));
}

/* The first empty slot. */
static uint64_t first_empty(sxe_map_t *map)
{
    uint64_t index = 0;

    while (sxe__map_slot(map, index)->tag != SXE__MAP_EMPTY) {
        index++;
    }
    return index;
}

/* The index of the first slot holding an entry (current when want_current). */
static uint64_t some_entry(sxe_map_t *map, bool want_current)
{
    for (uint64_t index = 0;; index++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        if (sxe__map_is_entry(slot->tag) && (slot->deleted == 0) == want_current) {
            return index;
        }
    }
}

static void corrupt_tag(sxe_map_t *map)
{
    sxe__map_slot(map, some_entry(map, true))->tag ^= 0x10;
}

static void corrupt_future(sxe_map_t *map)
{
    sxe__map_slot(map, some_entry(map, true))->created = 99;
}

static void corrupt_undeleted(sxe_map_t *map)
{
    sxe__map_slot(map, some_entry(map, false))->deleted = 0;
}

static void corrupt_block(sxe_map_t *map)
{
    *sxe__map_slot_block(sxe__map_slot(map, some_entry(map, true))) = 1 << 20;
}

/* The old version of "a" takes the current version's block: same key, so only the arena shows. */
static void corrupt_shared_block(sxe_map_t *map)
{
    struct sxe__map_slot *old = sxe__map_slot(map, some_entry(map, false));

    for (uint64_t index = 0;; index++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        if (slot->tag == old->tag && slot->deleted == 0) {
            *sxe__map_slot_block(old) = *sxe__map_slot_block(slot);
            return;
        }
    }
}

static void corrupt_tombstone(sxe_map_t *map)
{
    for (uint64_t index = 0;; index++) {
        if (sxe__map_slot(map, index)->tag == SXE__MAP_EMPTY &&
            sxe__map_slot(map, index + 1)->tag == SXE__MAP_EMPTY) {
            sxe__map_slot(map, index)->tag = SXE__MAP_TOMBSTONE;
            map->header->tombstones++;
            return;
        }
    }
}

static void corrupt_count(sxe_map_t *map)
{
    map->header->live++;
}

static void corrupt_ring(sxe_map_t *map)
{
    map->ring[map->header->ring_head % map->old_versions] = (uint32_t)some_entry(map, true);
}

static void corrupt_arena_used(sxe_map_t *map)
{
    map->header->arena_used -= 16;
}

static void corrupt_reader(sxe_map_t *map)
{
    map->readers[3].owner = 1;
    map->readers[3].snapshot = 7;
}

static void corrupt_magic(sxe_map_t *map)
{
    map->header->magic = 42;
}

/*
 * An entry moved to an empty slot that follows another empty slot, away from its home: its probe
 * ends before it. It is moved from the end of a run, so no other entry's probe crosses the slot
 * it leaves empty.
 */
static void corrupt_unreachable(sxe_map_t *map)
{
    uint64_t from = 0, to = 0;

    while (!sxe__map_is_entry(sxe__map_slot(map, from)->tag) ||
           sxe__map_slot(map, sxe__map_next(map, from))->tag != SXE__MAP_EMPTY) {
        from++;
    }
    uint64_t home = sxe__map_home(map, sxe__map_slot(map, from)->tag);
    while (sxe__map_slot(map, to)->tag != SXE__MAP_EMPTY ||
           sxe__map_slot(map, sxe__map_prev(map, to))->tag != SXE__MAP_EMPTY || to == home) {
        to++;
    }
    memcpy(sxe__map_slot(map, to), sxe__map_slot(map, from), map->slot_size);
    memset(sxe__map_slot(map, from), 0, map->slot_size);
    snprintf(expected_detail, sizeof(expected_detail),
             "slot %llu cannot be reached from its home slot %llu", (unsigned long long)to,
             (unsigned long long)home);
}

static void corrupt_key_size(sxe_map_t *map)
{
    uint64_t index = current_slot(map, "b");
    uint32_t key_size = 0;

    memcpy(block_of(map, index), &key_size, sizeof(key_size));
    snprintf(expected_detail, sizeof(expected_detail),
             "slot %llu holds a key of 0 bytes and a value of 1", (unsigned long long)index);
}

static void corrupt_empty_versions(sxe_map_t *map)
{
    uint64_t index = first_empty(map);

    sxe__map_slot(map, index)->created = 5;
    snprintf(expected_detail, sizeof(expected_detail), "empty slot %llu has versions 5 and 0",
             (unsigned long long)index);
}

static void corrupt_strange_tag(sxe_map_t *map)
{
    uint64_t index = first_empty(map);

    sxe__map_slot(map, index)->tag = 4; /* neither empty, a tombstone, nor an entry's (odd) */
    snprintf(expected_detail, sizeof(expected_detail), "slot %llu has tag 0000000000000004",
             (unsigned long long)index);
}

static void corrupt_ring_count(sxe_map_t *map)
{
    map->header->ring_head++;
}

static void corrupt_tombstone_count(sxe_map_t *map)
{
    map->header->tombstones++;
}

static void corrupt_published_count(sxe_map_t *map)
{
    map->header->published_count++;
}

/* "c"'s block, copied whole to the top of the arena, which was never handed out. */
static void corrupt_block_past_top(sxe_map_t *map)
{
    uint64_t index = current_slot(map, "c");
    uint64_t top = map->header->arena_bump;

    memcpy(map->arena + top, block_of(map, index), SXE__MAP_GRANULE);
    *sxe__map_slot_block(sxe__map_slot(map, index)) = top;
    snprintf(expected_detail, sizeof(expected_detail),
             "slot %llu's block at %llu is outside the arena's %llu bytes in use",
             (unsigned long long)index, (unsigned long long)top, (unsigned long long)top);
}

static void corrupt_free_list_bounds(sxe_map_t *map)
{
    map->header->free_heads[0] = map->header->arena_bump;
    snprintf(expected_detail, sizeof(expected_detail),
             "free list of 16-byte blocks holds offset %llu",
             (unsigned long long)map->header->arena_bump);
}

/* "b"'s block, still in use, listed free too. */
static void corrupt_free_list_overlap(sxe_map_t *map)
{
    uint64_t offset = *sxe__map_slot_block(sxe__map_slot(map, current_slot(map, "b")));

    map->header->free_heads[0] = offset;
    snprintf(expected_detail, sizeof(expected_detail),
             "free 16-byte block at %llu overlaps another", (unsigned long long)offset);
}

static void corrupt_arena_counts(sxe_map_t *map)
{
    map->header->arena_used = map->header->arena_bump + 16;
}

/* The validator finds each broken invariant and says which. */
static void test_validator_detects_corruption(void **state)
{
    (void)state;
    expect_invalid(corrupt_tag, "tag");
    expect_invalid(corrupt_future, "was created at version 99 and deleted at 0; the map is at 2");
    expect_invalid(corrupt_undeleted, "'s key has 2 versions visible at version 2");
    expect_invalid(corrupt_block, "is out of the arena");
    expect_invalid(corrupt_shared_block, "overlaps another block");
    expect_invalid(corrupt_tombstone, "sits before an empty slot");
    expect_invalid(corrupt_count, "current entries; live is 4");
    expect_invalid(corrupt_ring, "not an old version, or listed twice");
    expect_invalid(corrupt_arena_used, "but arena_used is");
    expect_invalid(corrupt_reader, "reader 3 reads version 7, above the published 2");
    expect_invalid(corrupt_magic, "bad magic 000000000000002a");
    expect_invalid(corrupt_unreachable, "cannot be reached from its home slot");
    expect_invalid(corrupt_key_size, "holds a key of 0 bytes");
    expect_invalid(corrupt_empty_versions, "has versions 5 and 0");
    expect_invalid(corrupt_strange_tag, "has tag 0000000000000004");
    expect_invalid(corrupt_ring_count, "slots hold 1 old versions; the ring 0, of 4");
    expect_invalid(corrupt_tombstone_count, "slots hold 0 tombstones, not 1");
    expect_invalid(corrupt_published_count, "4 entries published, 3 live");
    expect_invalid(corrupt_block_past_top, "bytes in use");
    expect_invalid(corrupt_free_list_bounds, "free list of 16-byte blocks holds offset");
    expect_invalid(corrupt_free_list_overlap, "overlaps another");
    expect_invalid(corrupt_arena_counts, "arena: 80 bytes used, 64 handed out, of 4096");
}

/*
 * The ring lists old versions oldest first, and this transaction's with its version; every entry
 * the transaction made is in its journal; a key has one current version. A reader at version 1
 * keeps every old version on the ring.
 */
static void test_validator_checks_ring_and_journal(void **state)
{
    sxe_map_t *map = make_map(variable_options(16, 4096));
    struct sxe_map_reader reader;
    char reason[160];

    (void)state;
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "a", "1"), 0);
    assert_int_equal(put_text(map, "b", "2"), 0);
    assert_int_equal(put_text(map, "c", "3"), 0);
    commit(map);
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "a", "one"), 1);
    commit(map);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "b", "two"), 1);
    commit(map);

    /* "a"'s old version (deleted at 2) listed after "b"'s (deleted at 3). */
    uint32_t old_a = map->ring[0], old_b = map->ring[1];
    map->ring[0] = old_b;
    map->ring[1] = old_a;
    snprintf(reason, sizeof(reason), "ring position 1: slot %u deleted at version 2 out of order",
             old_a);
    expect_report(map, reason);
    map->ring[0] = old_a;
    map->ring[1] = old_b;
    assert_int_equal(sxe__map_validate(map), 0);

    /* Version 4, open: "c" replaced, "d" added. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "c", "three"), 1);
    assert_int_equal(put_text(map, "d", "4"), 0);
    uint32_t old_c = map->ring[2];
    uint64_t new_c = current_slot(map, "c"), new_d = current_slot(map, "d");
    struct sxe__map_slot *old_c_slot = sxe__map_slot(map, old_c);
    assert_int_equal(old_c_slot->deleted, 4);

    /* This transaction's old version, marked with an earlier version. */
    old_c_slot->deleted = 3;
    snprintf(reason, sizeof(reason), "ring position 2: slot %u deleted at version 3 out of order",
             old_c);
    expect_report(map, reason);

    /* "c"'s old version current again: one version visible at 3, but two current. */
    old_c_slot->deleted = 0;
    snprintf(reason, sizeof(reason), "slot %llu's key has 2 current versions",
             (unsigned long long)(old_c < new_c ? old_c : new_c));
    expect_report(map, reason);
    old_c_slot->deleted = 4;

    /* A journal entry past the last slot. */
    uint32_t journaled = map->journal[0];
    map->journal[0] = (uint32_t)map->slot_count + 5;
    snprintf(reason, sizeof(reason), "journal entry 0 is slot %llu",
             (unsigned long long)map->slot_count + 5);
    expect_report(map, reason);
    map->journal[0] = journaled;

    /* "d", the last entry journaled, left out of the journal. */
    map->header->journal_count--;
    snprintf(reason, sizeof(reason),
             "slot %llu was made by this transaction but is not in its journal",
             (unsigned long long)new_d);
    expect_report(map, reason);
    map->header->journal_count++;

    assert_int_equal(sxe__map_validate(map), 0);
    sxe_map_abort(map);
    assert_int_equal(sxe__map_validate(map), 0);
    assert_string_equal(read_text(&reader, "a"), "1");
    assert_string_equal(read_text(&reader, "c"), "3");
    assert_null(read_text(&reader, "d"));
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);
}

/* The journal check covers the first slot too: a key put there by the open transaction, left out
 * of its journal, is found. */
static void test_the_journal_check_covers_slot_0(void **state)
{
    sxe_map_t *map = make_map(variable_options(16, 4096));
    char key[16];

    (void)state;
    for (int i = 0; i < 10000; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(sxe_map_write_begin(map), 0);
        assert_int_equal(put_text(map, key, "v"), 0);
        if (current_slot(map, key) == 0) {
            map->header->journal_count--;
            expect_report(map, "slot 0 was made by this transaction but is not in its journal");
            map->header->journal_count++;
            sxe_map_abort(map);
            sxe_map_destroy(map);
            return;
        }
        sxe_map_abort(map);
    }
    fail_msg("no key of the 10,000 tried lands in slot 0");
}

/* What a walk of a snapshot shows: how many entries, and the value of one key (a string). */
struct walked {
    unsigned entries;
    unsigned matches;
    char value[16];
};

static struct walked walk(const struct sxe_map_reader *reader, const char *key)
{
    struct walked walked = {0};
    uint64_t cursor = 0;
    const void *entry_key, *value;
    size_t key_size, value_size;

    while (sxe_map_next(reader, &cursor, &entry_key, &key_size, &value, &value_size) == 1) {
        walked.entries++;
        if (key_size == strlen(key) && memcmp(entry_key, key, key_size) == 0) {
            walked.matches++;
            assert_true(value_size < sizeof(walked.value));
            memcpy(walked.value, value, value_size);
            walked.value[value_size] = '\0';
        }
    }
    return walked;
}

/*
 * A slot read while the writer rewrites it may show any block offset and sizes: the reader checks
 * them against the arena and skips the slot rather than read outside it. Here the garbage stays,
 * so find and the walk skip the slot for good.
 */
static void test_reader_bounds_checks_blocks(void **state)
{
    sxe_map_t *map = make_map(variable_options(16, 4096));
    struct sxe_map_reader reader;

    (void)state;
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "a", "1"), 0);
    assert_int_equal(put_text(map, "b", "2"), 0);
    assert_int_equal(put_text(map, "c", "3"), 0);
    commit(map);
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);

    /* An offset far past the arena. */
    uint64_t *b_offset = sxe__map_slot_block(sxe__map_slot(map, current_slot(map, "b")));
    uint64_t saved_offset = *b_offset;
    *b_offset = 1ULL << 40;
    assert_null(read_text(&reader, "b"));
    assert_int_equal(walk(&reader, "b").entries, 2);
    assert_int_equal(walk(&reader, "b").matches, 0);
    *b_offset = saved_offset;

    /* Sizes that run past the arena's end. */
    unsigned char *c_block = block_of(map, current_slot(map, "c"));
    uint32_t sizes[2], damaged[2] = {1, 4096};
    memcpy(sizes, c_block, sizeof(sizes));
    memcpy(c_block, damaged, sizeof(damaged));
    assert_null(read_text(&reader, "c"));
    assert_int_equal(walk(&reader, "c").entries, 2);
    assert_int_equal(walk(&reader, "c").matches, 0);
    memcpy(c_block, sizes, sizeof(sizes));

    assert_string_equal(read_text(&reader, "b"), "2");
    assert_string_equal(read_text(&reader, "c"), "3");
    assert_int_equal(walk(&reader, "c").entries, 3);
    sxe_map_read_end(&reader);
    assert_int_equal(sxe__map_validate(map), 0);
    sxe_map_destroy(map);
}

/*
 * A rollback rebuilds the arena from the entries' blocks and trusts none blindly: an entry whose
 * block is out of bounds (a damaged file) is logged and left out, and the other entries keep
 * theirs, readers skip it, and the validator names it.
 */
static void test_rollback_survives_a_damaged_block(void **state)
{
    sxe_map_t *map = make_map(variable_options(16, 4096));
    struct sxe_test_capture capture;
    struct sxe_map_reader reader;
    struct sxe_map_stats stats;
    char reason[128];

    (void)state;
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "a", "1"), 0);
    assert_int_equal(put_text(map, "b", "2"), 0);
    assert_int_equal(put_text(map, "c", "3"), 0);
    commit(map);

    /* A writer vanishes mid-transaction; meanwhile "b"'s block offset is damaged. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "lost", "no"), 0);
    map->in_write = false;
    sxe__map_unlock(map);
    uint64_t b = current_slot(map, "b");
    *sxe__map_slot_block(sxe__map_slot(map, b)) = 1 << 20;

    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_map_write_begin(map), 0);
    sxe_test_capture_stop();
    snprintf(reason, sizeof(reason), "slot %llu's arena block at %u is out of bounds or shared",
             (unsigned long long)b, 1u << 20);
    assert_non_null(strstr(capture.text, reason));
    assert_int_equal(sxe_map_put(map, "d", 1, "4", 1), 0);
    assert_int_equal(sxe_map_commit(map), 0);

    sxe_map_stats(map, &stats);
    assert_int_equal(stats.recoveries, 1);
    assert_int_equal(stats.arena_used, 3 * SXE__MAP_GRANULE); /* "a", "c" and "d" */
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    assert_string_equal(read_text(&reader, "a"), "1");
    assert_null(read_text(&reader, "b"));
    assert_string_equal(read_text(&reader, "c"), "3");
    assert_string_equal(read_text(&reader, "d"), "4");
    assert_null(read_text(&reader, "lost"));
    sxe_map_read_end(&reader);
    expect_report(map, "'s block at 1048576 is out of the arena");
    sxe_map_destroy(map);
}

/* The writer that a trap's action plays, and what its calls returned. */
static struct trapped_writer {
    sxe_map_t *map;
    const char *key;
    bool delete_first;
    int begin_rc, put_rc, commit_rc;
} trapped_writer;

/*
 * Commits key -> "six" (a fixed map: key 1 -> value_of(2)) in a transaction of its own; if
 * delete_first, deletes key first, so the put makes a new entry in the first free slot.
 */
static void trapped_commit(void)
{
    sxe_map_t *map = trapped_writer.map;
    uint64_t number_key = 1;
    struct value value = value_of(2);

    trapped_writer.begin_rc = sxe_map_write_begin(map);
    if (trapped_writer.begin_rc == 0) {
        if (trapped_writer.delete_first) {
            assert_int_equal(sxe_map_delete(map, trapped_writer.key, strlen(trapped_writer.key)),
                             0);
        }
        trapped_writer.put_rc =
            trapped_writer.key != NULL
                ? sxe_map_put(map, trapped_writer.key, strlen(trapped_writer.key), "six", 3)
                : sxe_map_put(map, &number_key, sizeof(number_key), &value, sizeof(value));
        trapped_writer.commit_rc = sxe_map_commit(map);
    }
}

/*
 * A variable map at version 2 in which key's old version, which no snapshot from version 2 on
 * sees, sits in key's home slot (*old_slot), just before its current version, "two". The next put
 * of key reclaims the old version and reuses its slot and, the sizes being the same, its arena
 * block. A big first entry fills the arena's first pages, so key's blocks lie on a page apart
 * from every slot and from the big entry's head.
 */
static sxe_map_t *map_with_old_version(char *key, size_t key_capacity, uint64_t *old_slot)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t pad_size = 2 * page - 64; /* a block of two pages */
    char *pad = calloc(1, pad_size);
    sxe_map_t *map = make_map(variable_options(16, 4 * page));
    uint64_t home = 0;

    assert_non_null(pad);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(sxe_map_put(map, "pad", 3, pad, pad_size), 0);
    free(pad);
    for (unsigned i = 0;; i++) {
        snprintf(key, key_capacity, "key%u", i);
        home = sxe__map_home(map, sxe__map_hash(map, key, strlen(key)) | 1);
        if (home + 1 < map->slot_count && sxe__map_slot(map, home)->tag == SXE__MAP_EMPTY &&
            sxe__map_slot(map, home + 1)->tag == SXE__MAP_EMPTY) {
            break;
        }
    }
    assert_int_equal(put_text(map, key, "one"), 0);
    commit(map);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, key, "two"), 1);
    commit(map);
    assert_int_equal(current_slot(map, key), home + 1);
    assert_int_equal(sxe__map_slot(map, home)->deleted, 2);
    assert_true(page_of(block_of(map, home)) > page_of(sxe__map_slot(map, map->slot_count)));
    assert_true(page_of(block_of(map, home)) > page_of(map->arena));
    *old_slot = home;
    return map;
}

/*
 * The reader's seqlock: the writer reclaims an old version and reuses its slot for a newer one
 * while a reader at version 2 looks at it, between its first read of created and its recheck
 * (the trap fires when the reader reads the slot's arena block). The reclaim moves "two" back
 * into the slot; the writer then deletes the key and puts it again, as "six", which lands in
 * that slot and its old block. Without the recheck, the reader would take "six", which its
 * snapshot must not see; with it, it looks again, skips the slot, and finds "two" further on.
 * The walk likewise shows the key once, as "two".
 */
static void test_reader_looks_again_at_a_rewritten_slot(void **state)
{
    struct sxe_map_reader reader;
    char key[16];
    uint64_t old_slot;

    (void)state;
    for (unsigned use_walk = 0; use_walk <= 1; use_walk++) {
        sxe_map_t *map = map_with_old_version(key, sizeof(key), &old_slot);
        unsigned char *old_block = block_of(map, old_slot);
        const void *steps[] = {old_block};

        assert_int_equal(sxe_map_read_begin(map, &reader), 0);
        trapped_writer = (struct trapped_writer){.map = map, .key = key, .delete_first = true};
        trap_arm(steps, 1, trapped_commit);
        if (use_walk) {
            struct walked walked = walk(&reader, key);
            assert_int_equal(trap_disarm(), 1);
            assert_int_equal(walked.entries, 2); /* "pad" and key */
            assert_int_equal(walked.matches, 1);
            assert_string_equal(walked.value, "two");
        } else {
            const char *value = read_text(&reader, key);
            assert_int_equal(trap_disarm(), 1);
            assert_string_equal(value, "two");
        }
        assert_int_equal(trapped_writer.begin_rc, 0);
        assert_int_equal(trapped_writer.put_rc, 0); /* deleted first: a new entry */
        assert_int_equal(trapped_writer.commit_rc, 0);

        /* The slot and its block were indeed rewritten under the reader. */
        assert_int_equal(sxe__map_slot(map, old_slot)->created, 3);
        assert_int_equal(sxe__map_slot(map, old_slot)->deleted, 0);
        assert_ptr_equal(block_of(map, old_slot), old_block);
        sxe_map_read_end(&reader);
        assert_int_equal(sxe_map_read_begin(map, &reader), 0);
        assert_string_equal(read_text(&reader, key), "six");
        sxe_map_read_end(&reader);
        assert_int_equal(sxe__map_validate(map), 0);
        sxe_map_destroy(map);
    }
}

/*
 * Claims reader slots until one lies on a page apart from the published version, then frees them
 * all: the thread's next reader starts its search there, and takes that slot. @return its index.
 */
static uint32_t reader_slot_apart(sxe_map_t *map)
{
    struct sxe_map_reader held[64];
    unsigned count = 0;

    do {
        assert_true(count < 64);
        assert_int_equal(sxe_map_read_begin(map, &held[count]), 0);
    } while (page_of(&map->readers[held[count++].index]) == page_of(&map->header->published));
    for (unsigned i = 0; i < count; i++) {
        sxe_map_read_end(&held[i]);
    }
    return held[count - 1].index;
}

/*
 * The reader's registration: a writer publishes version 2 after the reader read version 1 and
 * before its store of that snapshot is seen (the trap follows the reader's claim of its slot, its
 * read of published, and fires at its store). The reader's second read of published sees 2, and
 * it moves its snapshot there.
 */
static void test_reader_moves_to_a_version_published_under_it(void **state)
{
    sxe_map_t *map = make_map(fixed_options(16));
    struct sxe_map_reader reader;

    (void)state;
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put(map, 1, 1), 0);
    commit(map);
    uint32_t index = reader_slot_apart(map);
    const void *steps[] = {&map->readers[index], &map->header->published, &map->readers[index]};

    trapped_writer = (struct trapped_writer){.map = map};
    trap_arm(steps, 3, trapped_commit);
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    assert_int_equal(trap_disarm(), 3);
    assert_int_equal(trapped_writer.begin_rc, 0);
    assert_int_equal(trapped_writer.put_rc, 1);
    assert_int_equal(trapped_writer.commit_rc, 0);
    assert_int_equal(reader.index, index);
    assert_int_equal(reader.version, 2);
    assert_int_equal(map->readers[index].snapshot, 2);
    assert_int_equal(read_number(&reader, 1), 2);
    sxe_map_read_end(&reader);
    assert_int_equal(sxe__map_validate(map), 0);
    sxe_map_destroy(map);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_validator_detects_corruption, reset),
        cmocka_unit_test_teardown(test_validator_checks_ring_and_journal, reset),
        cmocka_unit_test_teardown(test_the_journal_check_covers_slot_0, reset),
        cmocka_unit_test_teardown(test_reader_bounds_checks_blocks, reset),
        cmocka_unit_test_teardown(test_rollback_survives_a_damaged_block, reset),
        cmocka_unit_test_teardown(test_reader_looks_again_at_a_rewritten_slot, reset),
        cmocka_unit_test_teardown(test_reader_moves_to_a_version_published_under_it, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
