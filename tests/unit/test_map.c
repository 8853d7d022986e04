/*
 * Maps: puts, gets and deletes with fixed and variable sizes, the arena's reuse, splits and
 * rebuild, full tables and arenas, put_many, invalid use and impossible shapes, and attaching: its
 * errors (the seam's failures among them), damaged headers, a durable commit that cannot be
 * written, and two mappings of one file. The validator runs after every mutation. Versions,
 * readers and recovery are tested in test_map_versions.c; the validator's reports and the
 * reader's defences in test_map_validate.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "map_test.h"

static void test_put_get_delete_fixed(void **state)
{
    sxe_map_t *map = make_map(fixed_options(100));
    struct sxe_map_reader reader;
    struct sxe_map_stats stats;
    struct value copy;

    (void)state;
    assert_int_equal(sxe_map_version(map), 0);
    assert_int_equal(read_now(map, 1), -1);

    assert_int_equal(sxe_map_write_begin(map), 0);
    for (uint64_t key = 1; key <= 50; key++) {
        assert_int_equal(put(map, key, key * 10), 0);
    }
    /* A reader sees nothing of an open transaction. */
    assert_int_equal(read_now(map, 7), -1);
    commit(map);
    assert_int_equal(sxe_map_version(map), 1);

    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    assert_int_equal(reader.version, 1);
    for (uint64_t key = 1; key <= 50; key++) {
        assert_int_equal(read_number(&reader, key), key * 10);
    }
    assert_int_equal(read_number(&reader, 51), -1);
    uint64_t key = 9;
    assert_int_equal(sxe_map_get(&reader, &key, sizeof(key), &copy, sizeof(copy)), sizeof(copy));
    assert_int_equal(copy.a, 90);
    assert_int_equal(sxe_map_get(&reader, &key, sizeof(key), &copy, 8), sizeof(copy));
    key = 99;
    assert_int_equal(sxe_map_get(&reader, &key, sizeof(key), &copy, sizeof(copy)), -ENOENT);
    sxe_map_read_end(&reader);

    /* Replace, delete, and replace a key twice in one transaction. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put(map, 3, 333), 1);
    assert_int_equal(put(map, 3, 3333), 1);
    assert_int_equal(delete (map, 4), 0);
    assert_int_equal(delete (map, 4), -ENOENT);
    assert_int_equal(delete (map, 77), -ENOENT);
    assert_int_equal(put(map, 60, 600), 0);
    assert_int_equal(delete (map, 60), 0);
    commit(map);
    assert_int_equal(read_now(map, 3), 3333);
    assert_int_equal(read_now(map, 4), -1);
    assert_int_equal(read_now(map, 60), -1);

    sxe_map_stats(map, &stats);
    assert_int_equal(stats.version, 2);
    assert_int_equal(stats.count, 49);
    assert_int_equal(stats.capacity, 100);
    assert_int_equal(stats.old_versions, 25);
    assert_true(stats.slots >= 125 * 100 / 80);
    assert_int_equal(stats.pending, 2); /* 3's and 4's old versions, until the next begin */
    assert_int_equal(stats.commits, 2);
    assert_int_equal(stats.readers, 0);
    assert_int_equal(stats.readers_max, 256);

    /* With no reader, the next transaction reclaims them; 3's new version may move back into its
     * old slot, leaving an old version of its own. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    sxe_map_stats(map, &stats);
    assert_true(stats.moved_home <= 1);
    assert_int_equal(stats.pending, stats.moved_home);
    assert_int_equal(stats.reclaimed, 2);
    assert_int_equal(stats.held_back, 0);
    commit(map);
    sxe_map_destroy(map);
    sxe_map_destroy(NULL);
}

/* put_many: puts in order, reports how many, and stops at the first failure. */
static void test_put_many(void **state)
{
    struct sxe_map_options options = fixed_options(40);
    uint64_t keys[50];
    struct value values[50];
    const void *key_pointers[50], *value_pointers[50];
    size_t done = 99;
    sxe_map_t *map;

    (void)state;
    options.old_versions = 5;
    map = make_map(options);
    for (unsigned i = 0; i < 50; i++) {
        keys[i] = i % 45; /* keys 0..4 come twice */
        values[i] = value_of(i);
        key_pointers[i] = &keys[i];
        value_pointers[i] = &values[i];
    }
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(sxe_map_put_many(map, 0, NULL, NULL, NULL, NULL, &done), 0);
    assert_int_equal(done, 0);
    assert_int_equal(sxe_map_put_many(map, 30, key_pointers, NULL, value_pointers, NULL, &done), 0);
    assert_int_equal(done, 30);
    assert_int_equal(sxe__map_validate(map), 0);
    commit(map);

    /* 10 new keys fit, then the capacity of 40 stops the 11th; the first 10 stay put. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(
        sxe_map_put_many(map, 20, key_pointers + 30, NULL, value_pointers + 30, NULL, &done),
        -ENOBUFS);
    assert_int_equal(done, 10);
    assert_int_equal(sxe__map_validate(map), 0);
    commit(map);
    assert_int_equal(read_now(map, 39), 39);
    assert_int_equal(read_now(map, 40), -1);

    /* Replacements: 5 old versions may wait. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(
        sxe_map_put_many(map, 5, key_pointers + 45, NULL, value_pointers + 45, NULL, &done), 0);
    commit(map);
    assert_int_equal(read_now(map, 4), 49);

    /* Variable sizes, with each key's and value's size. */
    sxe_map_destroy(map);
    map = make_map(variable_options(10, 4096));
    const void *words[] = {"one", "three", "five"};
    const void *meanings[] = {"1", "3", ""};
    size_t word_sizes[] = {3, 5, 4}, meaning_sizes[] = {1, 1, 0};
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(sxe_map_put_many(map, 3, words, word_sizes, meanings, meaning_sizes, &done),
                     0);
    commit(map);
    struct sxe_map_reader reader;
    size_t size;
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    assert_memory_equal(sxe_map_find(&reader, "three", 5, &size), "3", 1);
    assert_non_null(sxe_map_find(&reader, "five", 4, &size));
    assert_int_equal(size, 0);
    sxe_map_read_end(&reader);
#ifndef SXE_DEBUG
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(sxe_map_put_many(map, 3, words, NULL, meanings, meaning_sizes, &done),
                     -EINVAL);
    word_sizes[1] = 0;
    assert_int_equal(sxe_map_put_many(map, 3, words, word_sizes, meanings, meaning_sizes, &done),
                     -EINVAL);
    assert_int_equal(done, 1);
    sxe_map_abort(map);

    /* An invalid put in a later pass than the first stops the batch there; those before stay. */
    sxe_map_destroy(map);
    map = make_map(fixed_options(40));
    key_pointers[17] = NULL;
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(sxe_map_put_many(map, 30, key_pointers, NULL, value_pointers, NULL, &done),
                     -EINVAL);
    assert_int_equal(done, 17);
    commit(map);
    assert_int_equal(read_now(map, 16), 16);
    assert_int_equal(read_now(map, 18), -1);
#endif
    sxe_map_destroy(map);
}

static void test_variable_sizes(void **state)
{
    sxe_map_t *map = make_map(variable_options(100, 64 * 1024));
    struct sxe_map_reader reader;
    struct sxe_map_stats stats;
    char big[9000];

    (void)state;
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "apple", "a fruit"), 0);
    assert_int_equal(put_text(map, "a", ""), 0);
    assert_int_equal(put_text(map, "sesquipedalian", "given to using long words"), 0);
    assert_int_equal(put_text(map, "big", big), 0); /* a power-of-two block: 16 KiB */
    assert_int_equal(put_text(map, "apple", "a pome"), 1);
    commit(map);

    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    assert_string_equal(read_text(&reader, "apple"), "a pome");
    assert_string_equal(read_text(&reader, "a"), "");
    assert_string_equal(read_text(&reader, "big"), big);
    assert_null(read_text(&reader, "appl"));
    assert_null(read_text(&reader, "apples"));
    sxe_map_read_end(&reader);

    /* Values change size; deleted blocks return to the arena once reclaimed. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put_text(map, "apple", "a fruit of the rose family, with a core"), 1);
    assert_int_equal(put_text(map, "big", "small now"), 1);
    assert_int_equal(sxe_map_delete(map, "a", 1), 0);
    assert_int_equal(sxe__map_validate(map), 0);
    commit(map);
    assert_int_equal(sxe_map_write_begin(map), 0);
    commit(map);
    assert_int_equal(sxe_map_write_begin(map), 0); /* and what the moves home left */
    commit(map);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.count, 3);
    assert_int_equal(stats.pending, 0);
    assert_int_equal(stats.arena_bytes, 64 * 1024);
    assert_true(stats.arena_used > 0 && stats.arena_used < 1024);

    /* find_many with each key's size, some absent. */
    const char *const words[] = {"apple", "nope", "sesquipedalian", "big"};
    const void *keys[4];
    size_t key_sizes[4], value_sizes[4];
    const void *values[4];
    for (unsigned i = 0; i < 4; i++) {
        keys[i] = words[i];
        key_sizes[i] = strlen(words[i]);
        value_sizes[i] = 12345; /* an absent key's is left as it was */
    }
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    assert_int_equal(sxe_map_find_many(&reader, 4, keys, key_sizes, values, value_sizes), 3);
    assert_null(values[1]);
    assert_int_equal(value_sizes[1], 12345);
    assert_int_equal(value_sizes[3], strlen("small now"));
    assert_memory_equal(values[3], "small now", value_sizes[3]);

    /* A walk sees each entry of the snapshot once. */
    uint64_t cursor = 0;
    const void *key, *value;
    size_t key_size, value_size;
    unsigned seen = 0;
    while (sxe_map_next(&reader, &cursor, &key, &key_size, &value, &value_size) == 1) {
        seen++;
        assert_true(key_size >= 3);
    }
    assert_int_equal(seen, 3);
    /* And without asking for the values' sizes. */
    for (cursor = 0; sxe_map_next(&reader, &cursor, &key, &key_size, &value, NULL) == 1;) {
        seen--;
    }
    assert_int_equal(seen, 0);
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);
}

static void put_sized(sxe_map_t *map, const char *key, size_t value_size)
{
    static char value[16384];

    memset(value, key[0], sizeof(value));
    assert_true(sxe_map_put(map, key, strlen(key), value, value_size) >= 0);
    assert_int_equal(sxe__map_validate(map), 0);
}

/* Deletes key in a transaction of its own, and reclaims it in the next. */
static void delete_and_reclaim(sxe_map_t *map, const char *key)
{
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(sxe_map_delete(map, key, strlen(key)), 0);
    commit(map);
    assert_int_equal(sxe_map_write_begin(map), 0);
    commit(map);
}

/*
 * Blocks past 4 KiB come in powers of two: a freed 16 KiB block, split for an 8 KiB one when the
 * top is used up, leaves an 8 KiB block on its free list, which the next 8 KiB put takes.
 */
static void test_arena_splits_a_large_block(void **state)
{
    sxe_map_t *map = make_map(variable_options(16, 32 * 1024));
    struct sxe_map_stats stats;

    (void)state;
    assert_int_equal(sxe_map_write_begin(map), 0);
    put_sized(map, "h", 10000); /* a 16 KiB block */
    put_sized(map, "f1", 5000); /* 8 KiB each: the arena is full */
    put_sized(map, "f2", 5000);
    commit(map);
    delete_and_reclaim(map, "h");
    assert_int_equal(sxe_map_write_begin(map), 0);
    put_sized(map, "g1", 5000);
    put_sized(map, "g2", 5000); /* the arena is full again (its -ENOBUFS is logged once a process,
                                   and test_full_table_old_versions_and_arena checks that line) */
    commit(map);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.arena_used, 4 * 8192);
    struct sxe_map_reader reader;
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    const char *const present[] = {"f1", "f2", "g1", "g2"};
    for (unsigned i = 0; i < 4; i++) {
        size_t size;
        const char *value = sxe_map_find(&reader, present[i], 2, &size);
        assert_non_null(value);
        assert_int_equal(size, 5000);
        assert_int_equal(value[0], present[i][0]);
        assert_int_equal(value[size - 1], present[i][0]);
    }
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);
}

/*
 * The arena reuses freed blocks of a class, splits a larger free block when the top is used up,
 * and after a writer dies rebuilds its free lists from the entries, gaps and all.
 */
static void test_arena_reuse_split_and_rebuild(void **state)
{
    struct sxe_map_options options = variable_options(64, 4096);
    struct sxe_map_stats stats;
    sxe_map_t *map;

    (void)state;
    options.old_versions = 32;
    map = make_map(options);
    assert_int_equal(sxe_map_write_begin(map), 0);
    const char *const small[] = {"k0", "k1", "k2", "k3", "k4", "k5"};
    for (unsigned i = 0; i < 6; i++) {
        put_sized(map, small[i], 100); /* 8 + 2 + 100 bytes: a 112-byte block */
    }
    put_sized(map, "big", 3000); /* 3011 bytes: a 3024-byte block; 3696 of 4096 used */
    commit(map);
    delete_and_reclaim(map, "k1");
    delete_and_reclaim(map, "k3");
    delete_and_reclaim(map, "big");

    /* k1's and k3's blocks are reused, then big's is split: the top has 400 bytes left. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    put_sized(map, "y1", 100);
    put_sized(map, "y2", 100);
    put_sized(map, "y3", 500); /* 512 bytes: more than the top has; from big's block */
    put_sized(map, "y4", 100);
    commit(map);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.arena_used, 7 * 112 + 512);

    /* A writer vanishes mid-transaction: the rebuild finds every gap between blocks. */
    delete_and_reclaim(map, "k4");
    assert_int_equal(sxe_map_write_begin(map), 0);
    put_sized(map, "lost", 200);
    map->in_write = false;
    sxe__map_unlock(map);
    assert_int_equal(sxe__map_validate(map), 0);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.recoveries, 1);
    assert_int_equal(stats.arena_used, 6 * 112 + 512);

    /* The rebuilt free lists serve new blocks, and everything reads back. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    put_sized(map, "z1", 100);
    put_sized(map, "z2", 1000);
    commit(map);
    struct sxe_map_reader reader;
    const char *const present[] = {"k0", "k2", "k5", "y1", "y2", "y3", "y4", "z1", "z2"};
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    for (unsigned i = 0; i < 9; i++) {
        size_t size;
        const char *value = sxe_map_find(&reader, present[i], 2, &size);
        assert_non_null(value);
        assert_int_equal(value[0], present[i][0]);
        assert_int_equal(value[size - 1], present[i][0]);
    }
    assert_null(sxe_map_find(&reader, "lost", 4, NULL));
    assert_null(sxe_map_find(&reader, "k4", 2, NULL));
    sxe_map_read_end(&reader);

    /* Destroying a map with a transaction open aborts it first. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    put_sized(map, "gone", 10);
    sxe_map_destroy(map);
}

/* A variable key with a fixed value: the dictionary's shape (a word and an offset). */
static void test_variable_key_fixed_value(void **state)
{
    struct sxe_map_options options = variable_options(10, 4096);
    uint64_t offset = 12345;
    sxe_map_t *map;

    (void)state;
    options.value_size = sizeof(offset);
    map = make_map(options);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(sxe_map_put(map, "word", 4, &offset, sizeof(offset)), 0);
#ifndef SXE_DEBUG
    assert_int_equal(sxe_map_put(map, "word", 4, &offset, 4), -EINVAL);
#endif
    commit(map);

    struct sxe_map_reader reader;
    uint64_t found = 0;
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    assert_int_equal(sxe_map_get(&reader, "word", 4, &found, sizeof(found)), sizeof(found));
    assert_int_equal(found, 12345);
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);
}

/* Every limit is -ENOBUFS, counted, and leaves the map as it was. */
static void test_full_table_old_versions_and_arena(void **state)
{
    struct sxe_map_options options = fixed_options(8);
    struct sxe_test_capture capture;
    struct sxe_map_stats stats;
    sxe_map_t *map;

    (void)state;
    options.old_versions = 2;
    map = make_map(options);
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_map_write_begin(map), 0);
    for (uint64_t key = 0; key < 8; key++) {
        assert_int_equal(put(map, key, key), 0);
    }
    assert_int_equal(put(map, 8, 8), -ENOBUFS);
    assert_int_equal(put(map, 7, 70), 1); /* made in this transaction: replaced in place */
    commit(map);
    assert_non_null(strstr(capture.text, "map test: capacity is used up"));

    /* Two old versions may wait; a reader holds them. */
    struct sxe_map_reader reader;
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put(map, 0, 100), 1);
    assert_int_equal(delete (map, 1), 0);
    assert_int_equal(put(map, 2, 200), -ENOBUFS);
    assert_int_equal(delete (map, 3), -ENOBUFS);
    assert_int_equal(put(map, 8, 8), 0); /* 1's slot of capacity is free */
    commit(map);
    assert_int_equal(sxe_map_write_begin(map), 0);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.held_back, 2);
    assert_int_equal(stats.oldest_reader_pid, getpid());
    assert_int_equal(stats.oldest_reader_version, 1);
    assert_int_equal(put(map, 2, 200), -ENOBUFS);
    sxe_map_abort(map);
    for (uint64_t key = 0; key < 8; key++) {
        assert_int_equal(read_number(&reader, key), key == 7 ? 70 : (int64_t)key);
    }
    sxe_map_read_end(&reader);

    /* Once the reader is gone, the next transaction reclaims and can replace again. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(put(map, 2, 200), 1);
    commit(map);
    assert_int_equal(read_now(map, 0), 100);
    assert_int_equal(read_now(map, 1), -1);
    assert_int_equal(read_now(map, 2), 200);
    assert_int_equal(read_now(map, 8), 8);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.full, 4);
    sxe_map_destroy(map);

    /* The arena: a value that does not fit, then one that fits after a reclaim. */
    char value[600];
    memset(value, 'v', sizeof(value));
    map = make_map(variable_options(10, 1024));
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(sxe_map_put(map, "k1", 2, value, 500), 0);
    assert_int_equal(sxe_map_put(map, "k2", 2, value, 500), 0);
    assert_int_equal(sxe_map_put(map, "k3", 2, value, 500), -ENOBUFS);
    assert_int_equal(sxe_map_put(map, "k1", 2, value, 600), -ENOBUFS);
    assert_int_equal(sxe_map_put(map, "k4", 2, value, 2000), -ENOBUFS);
    assert_int_equal(sxe__map_validate(map), 0);
    commit(map);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(sxe_map_delete(map, "k2", 2), 0);
    commit(map);
    assert_int_equal(sxe_map_write_begin(map), 0); /* reclaims k2's block */
    assert_int_equal(sxe_map_put(map, "k3", 2, value, 500), 0);
    commit(map);
    sxe_test_capture_stop();
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.full, 3);
    assert_int_equal(stats.count, 2);
    sxe_map_destroy(map);
}

static void put_without_transaction(void *arg)
{
    uint64_t key = 1;
    struct value value = value_of(1);

    if (sxe_map_put(arg, &key, sizeof(key), &value, sizeof(value)) == 0) {
        sxe_test_exit(1); /* not reached: the put asserts */
    }
}

/* Invalid use: an assertion in debug builds, -EINVAL or NULL in release builds. */
static void test_invalid_use(void **state)
{
    struct sxe_map_options options = fixed_options(4);
    sxe_map_t *map = make_map(options);
    sxe_map_t *other = NULL;

    (void)state;
#ifdef SXE_DEBUG
    const char *const expected[] = {"assertion failed: map != NULL && map->in_write", NULL};
    sxe_test_expect_abort(put_without_transaction, map, expected);
#else
    struct sxe_map_reader reader = {0};
    uint64_t key = 1;
    struct value value = value_of(1);
    (void)put_without_transaction;
    assert_int_equal(sxe_map_put(map, &key, sizeof(key), &value, sizeof(value)), -EINVAL);
    assert_int_equal(sxe_map_delete(map, &key, sizeof(key)), -EINVAL);
    assert_int_equal(sxe_map_commit(map), -EINVAL);
    sxe_map_abort(map);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(sxe_map_write_begin(map), -EINVAL);
    assert_int_equal(sxe_map_put(map, &key, 4, &value, sizeof(value)), -EINVAL);
    assert_int_equal(sxe_map_put(map, &key, sizeof(key), &value, 8), -EINVAL);
    assert_int_equal(sxe_map_put(map, NULL, sizeof(key), &value, sizeof(value)), -EINVAL);
    commit(map);
    assert_null(sxe_map_find(&reader, &key, sizeof(key), NULL));
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    assert_null(sxe_map_find(&reader, &key, 4, NULL));
    assert_int_equal(sxe_map_get(&reader, &key, 4, &value, sizeof(value)), -EINVAL);
    assert_int_equal(sxe_map_get(&reader, &key, sizeof(key), NULL, 8), -EINVAL);
    sxe_map_read_end(&reader);
    assert_int_equal(sxe_map_read_begin(NULL, &reader), -EINVAL);

    /* Invalid options. */
    options.capacity = 0;
    assert_int_equal(sxe_map_create(&other, &options), -EINVAL);
    options = fixed_options(4);
    options.load_percent = 40;
    assert_int_equal(sxe_map_create(&other, &options), -EINVAL);
    options = fixed_options(4);
    options.value_size = SXE_MAP_INLINE_MAX;
    assert_int_equal(sxe_map_create(&other, &options), -EINVAL);
    options = variable_options(4, 0);
    assert_int_equal(sxe_map_create(&other, &options), -EINVAL);
    options = fixed_options(4);
    options.flags = 0x80;
    assert_int_equal(sxe_map_create(&other, &options), -EINVAL);
    options = fixed_options(4);
    options.readers_max = SXE_MAP_READERS_MAX + 1;
    assert_int_equal(sxe_map_create(&other, &options), -EINVAL);
    assert_int_equal(sxe_map_attach(&other, "/nonexistent", NULL, SXE_MAP_CREATE), -EINVAL);
    assert_int_equal(sxe_map_attach(&other, "/nonexistent", NULL, 0x40), -EINVAL);
#endif
    assert_null(other);
    assert_int_equal(sxe__map_validate(map), 0);
    sxe_map_destroy(map);
}

static void write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

/* A durable commit whose pages cannot be written to the file publishes nothing. */
static void test_durable_commit_fails_cleanly(void **state)
{
    struct sxe_map_options options = fixed_options(100);
    struct sxe_test_capture capture;
    char *path = temp_path("durable");
    sxe_map_t *map;
    uint64_t key = 7;

    (void)state;
    options.flags = SXE_MAP_DURABLE;
    assert_int_equal(sxe_map_attach(&map, path, &options, SXE_MAP_CREATE), 0);
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(
        sxe_map_put(map, &key, sizeof(key), &(struct value){1, 1, ~1ULL}, sizeof(struct value)), 0);
    sxe_test_capture_start(&capture);
    sxe__sys_fail(SXE_SYS_msync, 1, 1, EIO);
    assert_int_equal(sxe_map_commit(map), -EIO);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "cannot write"));
    assert_int_equal(sxe_map_version(map), 0);
    assert_int_equal(read_now(map, key), -1); /* absent */
    assert_int_equal(sxe__map_validate(map), 0);
    assert_int_equal(sxe_map_write_begin(map), 0); /* the lock was released */
    commit(map);
    sxe_map_detach(map);
    unlink(path);
}

/* Every way attaching can fail is a clear error, logged, with nothing left open or mapped. */
static void test_attach_errors(void **state)
{
    struct sxe_map_options options = fixed_options(8);
    struct sxe_map_options other = fixed_options(9);
    struct sxe_test_capture capture;
    char *path = temp_path("errors");
    unsigned fds = sxe_test_open_fds();
    sxe_map_t *map = NULL;
    char junk[8192];

    (void)state;
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_map_attach(&map, path, &options, 0), -ENOENT);
    assert_non_null(strstr(capture.text, "cannot open it: No such file or directory"));
    assert_int_equal(sxe_map_attach(&map, path, &options, SXE_MAP_CREATE), 0);
    sxe_map_detach(map);
    assert_int_equal(sxe_map_attach(&map, path, &options, SXE_MAP_CREATE), -EEXIST);
    assert_int_equal(sxe_map_attach(&map, path, &other, 0), -EMSGSIZE);
    assert_non_null(strstr(capture.text, "holds 8 entries of 8 + 24 bytes"));
    other = options;
    other.seed = 1;
    assert_int_equal(sxe_map_attach(&map, path, &other, 0), -EMSGSIZE);

    int fd = open(path, O_RDWR);
    uint32_t version = 999;
    assert_int_equal(pwrite(fd, &version, sizeof(version), 8), sizeof(version));
    close(fd);
    assert_int_equal(sxe_map_attach(&map, path, &options, 0), -EPROTO);
    assert_non_null(strstr(capture.text, "has format version 999"));

    memset(junk, 'x', sizeof(junk));
    write_file(path, junk, sizeof(junk));
    assert_int_equal(sxe_map_attach(&map, path, &options, 0), -EPROTO);
    assert_non_null(strstr(capture.text, "is not an sxe map"));
    write_file(path, junk, 10);
    assert_int_equal(sxe_map_attach(&map, path, &options, 0), -EPROTO);
    write_file(path, junk, 0);
    assert_int_equal(sxe_map_attach(&map, path, &options, 0), -EAGAIN);
    memset(junk, 0, sizeof(junk));
    write_file(path, junk, sizeof(junk));
    assert_int_equal(sxe_map_attach(&map, path, &options, 0), -EAGAIN);
    assert_non_null(strstr(capture.text, "is still being made by its creator"));
    unlink(path);

    /* A map file cut short is damaged, not trusted. */
    assert_int_equal(sxe_map_attach(&map, path, &options, SXE_MAP_CREATE), 0);
    sxe_map_detach(map);
    assert_int_equal(truncate(path, 8192), 0);
    assert_int_equal(sxe_map_attach(&map, path, NULL, 0), -EPROTO);
    assert_non_null(strstr(capture.text, "is damaged"));
    unlink(path);

    /* The system says no at each step. */
    sxe__sys_fail(SXE_SYS_open, 1, 1, EMFILE);
    assert_int_equal(sxe_map_attach(&map, path, &options, SXE_MAP_CREATE), -EMFILE);
    sxe__sys_fail(SXE_SYS_ftruncate, 1, 1, ENOSPC);
    assert_int_equal(sxe_map_attach(&map, path, &options, SXE_MAP_CREATE), -ENOSPC);
    assert_non_null(strstr(capture.text, "cannot size it"));
    unlink(path);
    sxe__sys_fail(SXE_SYS_mmap, 1, 1, ENOMEM);
    assert_int_equal(sxe_map_attach(&map, path, &options, SXE_MAP_CREATE), -ENOMEM);
    unlink(path);
    assert_int_equal(sxe_map_attach(&map, path, &options, SXE_MAP_CREATE), 0);
    sxe_map_detach(map);
    sxe__sys_fail(SXE_SYS_fstat, 1, 1, EIO);
    assert_int_equal(sxe_map_attach(&map, path, &options, 0), -EIO);
    sxe__sys_fail(SXE_SYS_mmap, 1, 1, ENOMEM);
    assert_int_equal(sxe_map_create(&map, &options), -ENOMEM);
    assert_non_null(strstr(capture.text, "map test: cannot map"));
    sxe_test_capture_stop();
    unlink(path);
    assert_int_equal(sxe_test_open_fds(), fds);
}

/*
 * A header whose recorded shape is impossible (no capacity, entries too big to keep in a slot, more
 * old versions or slots than 32-bit indices reach) is damaged: attach refuses it before it computes
 * an address from it.
 */
static void test_attach_refuses_impossible_shapes(void **state)
{
    struct sxe_map_options options = fixed_options(8);
    struct sxe_test_capture capture;
    char *path = temp_path("shape");
    struct damage {
        size_t offset;
        size_t size;
        uint64_t value;
    } damages[] = {
        {offsetof(struct sxe__map_header, capacity), 8, 0},
        {offsetof(struct sxe__map_header, value_size), 4, SXE_MAP_INLINE_MAX},
        {offsetof(struct sxe__map_header, old_versions), 8, 1ULL << 62},
        {offsetof(struct sxe__map_header, capacity), 8, 4000000000ULL}, /* 5e9 slots at 80% */
    };
    sxe_map_t *map;

    (void)state;
    assert_int_equal(sxe_map_attach(&map, path, &options, SXE_MAP_CREATE), 0);
    sxe_map_detach(map);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    for (unsigned i = 0; i < sizeof(damages) / sizeof(damages[0]); i++) {
        unsigned char original[8], damaged[8];
        uint32_t narrow = (uint32_t)damages[i].value;
        memcpy(damaged, damages[i].size == 4 ? (void *)&narrow : (void *)&damages[i].value,
               damages[i].size);
        assert_int_equal(pread(fd, original, damages[i].size, (off_t)damages[i].offset),
                         (ssize_t)damages[i].size);
        assert_int_equal(pwrite(fd, damaged, damages[i].size, (off_t)damages[i].offset),
                         (ssize_t)damages[i].size);
        sxe_test_capture_start(&capture);
        assert_int_equal(sxe_map_attach(&map, path, NULL, 0), -EPROTO);
        sxe_test_capture_stop();
        assert_non_null(strstr(capture.text, "is damaged: its shape does not add up"));
        assert_int_equal(pwrite(fd, original, damages[i].size, (off_t)damages[i].offset),
                         (ssize_t)damages[i].size);
    }
    close(fd);
    assert_int_equal(sxe_map_attach(&map, path, &options, 0), 0);
    sxe_map_detach(map);
    unlink(path);
}

#ifdef SXE_DEBUG
static void create_with(void *options)
{
    sxe_map_t *map = NULL;

    if (sxe_map_create(&map, options) == 0) {
        sxe_map_destroy(map); /* not reached: the create asserts */
    }
}
#endif

/*
 * Options that make no map, each the only check that stops it: no capacity, entries too big for a
 * slot, an arena too small for a block, more old versions or slots than 32-bit indices reach. An
 * assertion in debug builds, -EINVAL in release builds.
 */
static void test_impossible_shapes_are_invalid(void **state)
{
    struct sxe_map_options invalid[5];

    (void)state;
    invalid[0] = fixed_options(8);
    invalid[0].capacity = 0;
    invalid[1] = fixed_options(8);
    invalid[1].value_size = SXE_MAP_INLINE_MAX; /* with the 8-byte key, 8 bytes too many */
    invalid[2] = variable_options(8, SXE__MAP_GRANULE - 1);
    invalid[3] = fixed_options(8);
    invalid[3].old_versions = 1ULL << 62; /* entries * 100 would wrap to a small slot count */
    invalid[4] = fixed_options(4000000000ULL);
    invalid[4].old_versions = 1; /* 4e9 entries fit 32-bit indices; their 5e9 slots at 80% do not */
    for (unsigned i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
#ifdef SXE_DEBUG
        const char *const expected[] = {
            "assertion failed: map != NULL && shape_of(options, &shape)", NULL};
        sxe_test_expect_abort(create_with, &invalid[i], expected);
#else
        sxe_map_t *map = NULL;
        assert_int_equal(sxe_map_create(&map, &invalid[i]), -EINVAL);
        assert_null(map);
#endif
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_put_get_delete_fixed, reset),
        cmocka_unit_test_teardown(test_variable_sizes, reset),
        cmocka_unit_test_teardown(test_variable_key_fixed_value, reset),
        cmocka_unit_test_teardown(test_arena_reuse_split_and_rebuild, reset),
        cmocka_unit_test_teardown(test_arena_splits_a_large_block, reset),
        /* First to fill a map: "used up" is logged once per process. */
        cmocka_unit_test_teardown(test_full_table_old_versions_and_arena, reset),
        cmocka_unit_test_teardown(test_put_many, reset),
        cmocka_unit_test_teardown(test_invalid_use, reset),
        cmocka_unit_test_teardown(test_durable_commit_fails_cleanly, reset),
        cmocka_unit_test_teardown(test_attach_errors, reset),
        cmocka_unit_test_teardown(test_attach_refuses_impossible_shapes, reset),
        cmocka_unit_test_teardown(test_impossible_shapes_are_invalid, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
