/*
 * Maps: puts, gets and deletes with fixed and variable sizes, full tables and arenas, invalid use,
 * the seam's failures, snapshots that outlive commits, reclamation that waits for readers, dead
 * readers, abort, writers that die mid-transaction, files that outlive their processes, damaged
 * files, locks and blocks, the validator's report of each broken invariant, readers that race a
 * writer (made deterministic by a page trap), and a bounded stress of reader processes against a
 * writer that is killed at random instants. The validator runs after every mutation.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "map.h"
#include "sxe/clock.h"
#include "sxe_test.h"
#include "sys.h"

/* A fixed-size value: three copies of one number, so a torn read shows. */
struct value {
    uint64_t a, b, c;
};

static struct value value_of(uint64_t number)
{
    return (struct value){number, number, ~number};
}

static struct sxe_map_options fixed_options(uint64_t capacity)
{
    return (struct sxe_map_options){.name = "test",
                                    .capacity = capacity,
                                    .key_size = sizeof(uint64_t),
                                    .value_size = sizeof(struct value)};
}

static struct sxe_map_options variable_options(uint64_t capacity, uint64_t arena_bytes)
{
    return (struct sxe_map_options){.name = "words",
                                    .capacity = capacity,
                                    .key_size = SXE_MAP_VARIABLE,
                                    .value_size = SXE_MAP_VARIABLE,
                                    .arena_bytes = arena_bytes};
}

static sxe_map_t *make_map(struct sxe_map_options options)
{
    sxe_map_t *map = NULL;

    assert_int_equal(sxe_map_create(&map, &options), 0);
    assert_int_equal(sxe__map_validate(map), 0);
    return map;
}

static int reset(void **state)
{
    (void)state;
    sxe__sys_reset();
    sxe_log_set_sink(NULL, NULL);
    return 0;
}

static char *temp_path(const char *tag)
{
    static char path[128];
    snprintf(path, sizeof(path), "/dev/shm/sxe-test-map-%d-%s", (int)getpid(), tag);
    unlink(path);
    return path;
}

/* Puts key -> value_of(number) in the open transaction and validates. @return put's result. */
static int put(sxe_map_t *map, uint64_t key, uint64_t number)
{
    struct value value = value_of(number);
    int rc = sxe_map_put(map, &key, sizeof(key), &value, sizeof(value));

    assert_int_equal(sxe__map_validate(map), 0);
    return rc;
}

static int delete (sxe_map_t *map, uint64_t key)
{
    int rc = sxe_map_delete(map, &key, sizeof(key));

    assert_int_equal(sxe__map_validate(map), 0);
    return rc;
}

static void commit(sxe_map_t *map)
{
    assert_int_equal(sxe_map_commit(map), 0);
    assert_int_equal(sxe__map_validate(map), 0);
}

/* The number stored under key in the reader's snapshot, or -1 if it is absent. */
static int64_t read_number(const struct sxe_map_reader *reader, uint64_t key)
{
    size_t size = 0;
    const struct value *value = sxe_map_find(reader, &key, sizeof(key), &size);

    if (value == NULL) {
        return -1;
    }
    assert_int_equal(size, sizeof(struct value));
    assert_int_equal(value->a, value->b);
    assert_int_equal(value->c, ~value->a);
    return (int64_t)value->a;
}

/* Reads key in a fresh snapshot. */
static int64_t read_now(sxe_map_t *map, uint64_t key)
{
    struct sxe_map_reader reader;

    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    int64_t number = read_number(&reader, key);
    sxe_map_read_end(&reader);
    return number;
}

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

    /* With no reader, the next transaction reclaims them. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.pending, 0);
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
#endif
    sxe_map_destroy(map);
}

static int put_text(sxe_map_t *map, const char *key, const char *value)
{
    int rc = sxe_map_put(map, key, strlen(key), value, strlen(value));

    assert_int_equal(sxe__map_validate(map), 0);
    return rc;
}

/* The value of key in the snapshot as a string (in a static buffer), or NULL. */
static const char *read_text(const struct sxe_map_reader *reader, const char *key)
{
    static char text[16384];
    size_t size;
    const char *value = sxe_map_find(reader, key, strlen(key), &size);

    if (value == NULL) {
        return NULL;
    }
    assert_true(size < sizeof(text));
    memcpy(text, value, size);
    text[size] = '\0';
    return text;
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
    }
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    assert_int_equal(sxe_map_find_many(&reader, 4, keys, key_sizes, values, value_sizes), 3);
    assert_null(values[1]);
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
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);
}

static void put_sized(sxe_map_t *map, const char *key, size_t value_size)
{
    static char value[4096];

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
        _exit(1); /* not reached: the put asserts */
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
    assert_int_equal(sxe_map_write_begin(map), 0);
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.pending, 0);
    assert_int_equal(stats.reclaimed, 33);
    assert_int_equal(stats.oldest_reader_version, 4); /* the newer reader, holding nothing */
    commit(map);
    /* The newer reader still reads its version, whose entries were never reclaimed. */
    assert_int_equal(read_number(&new_reader, 0), 3000);
    assert_int_equal(read_number(&new_reader, 19), 1019);
    sxe_map_read_end(&new_reader);
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
            _exit(2);
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
    assert_int_equal(stats.pending, 0);
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
        _exit(2);
    }
    for (uint64_t key = 0; key < 10; key++) {
        struct value value = value_of(2000 + key);
        if (sxe_map_put(map, &key, sizeof(key), &value, sizeof(value)) < 0) {
            _exit(3);
        }
    }
    uint64_t gone = 11;
    uint64_t fresh = 500;
    struct value value = value_of(500);
    if (sxe_map_delete(map, &gone, sizeof(gone)) != 0 ||
        sxe_map_put(map, &fresh, sizeof(fresh), &value, sizeof(value)) != 0) {
        _exit(4);
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

static void test_writer_dies_mid_transaction(void **state)
{
    struct sxe_map_options options = fixed_options(64);
    struct sxe_test_capture capture;
    struct sxe_map_reader reader;
    struct sxe_map_stats stats;
    sxe_map_t *map;
    int status;

    (void)state;
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
    assert_int_equal(sxe_map_write_begin(map), 0);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "a writer died holding the lock"));
    assert_non_null(strstr(capture.text, "rolling back to version 1"));
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
            _exit(2);
        }
        for (uint64_t key = 0; key < 250; key++) {
            struct value value = value_of(9);
            if (sxe_map_put(attached, &key, sizeof(key), &value, sizeof(value)) != 1) {
                _exit(3);
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

/* Two mappings of one file at different addresses see the same map. */
static void test_attach_twice(void **state)
{
    struct sxe_map_options options = variable_options(100, 8192);
    char *path = temp_path("twice");
    sxe_map_t *first, *second;
    struct sxe_map_reader reader;

    (void)state;
    assert_int_equal(sxe_map_attach(&first, path, &options, SXE_MAP_CREATE), 0);
    assert_int_equal(sxe_map_attach(&second, path, &options, 0), 0);
    assert_ptr_not_equal(first->header, second->header);
    assert_int_equal(sxe_map_write_begin(first), 0);
    assert_int_equal(put_text(first, "hello", "world"), 0);
    commit(first);
    assert_int_equal(sxe_map_read_begin(second, &reader), 0);
    assert_string_equal(read_text(&reader, "hello"), "world");
    sxe_map_read_end(&reader);
    assert_int_equal(sxe_map_write_begin(second), 0);
    assert_int_equal(put_text(second, "hello", "again"), 1);
    commit(second);
    assert_int_equal(sxe_map_read_begin(first, &reader), 0);
    assert_string_equal(read_text(&reader, "hello"), "again");
    sxe_map_read_end(&reader);
    sxe_map_detach(first);
    sxe_map_detach(second);
    unlink(path);
}

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
            _exit(2);
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
        {offsetof(struct sxe__map_header, old_versions), 8, 1ULL << 33},
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

/*
 * A page trap: a deterministic stand-in for another thread that acts between two of a reader's
 * memory accesses. The page of the first step is made inaccessible, so the reader's next access to
 * it faults; the SIGSEGV handler opens the page again and closes the next step's, or, after the
 * last step, runs the action (the other thread's work) before the faulting access resumes.
 */
#define TRAP_STEPS_MAX 3

static struct {
    uintptr_t pages[TRAP_STEPS_MAX];
    size_t page_size;
    unsigned steps;
    unsigned taken;
    void (*action)(void);
    struct sigaction previous;
} trap;

static uintptr_t page_of(const void *address)
{
    return (uintptr_t)address & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
}

static void on_trap(int signal_number, siginfo_t *info, void *context)
{
    (void)signal_number;
    (void)context;
    if (trap.taken == trap.steps ||
        (uintptr_t)info->si_addr - trap.pages[trap.taken] >= trap.page_size) {
        /* Not the trap's fault: the access faults again, with the handler that was there. */
        sigaction(SIGSEGV, &trap.previous, NULL);
        return;
    }
    mprotect((void *)trap.pages[trap.taken], trap.page_size, PROT_READ | PROT_WRITE);
    if (++trap.taken < trap.steps) {
        mprotect((void *)trap.pages[trap.taken], trap.page_size, PROT_NONE);
    } else {
        trap.action();
    }
}

static void trap_arm(const void *const *addresses, unsigned steps, void (*action)(void))
{
    struct sigaction on_fault = {.sa_sigaction = on_trap, .sa_flags = SA_SIGINFO};

    assert_true(steps >= 1 && steps <= TRAP_STEPS_MAX);
    trap.page_size = (size_t)sysconf(_SC_PAGESIZE);
    trap.steps = steps;
    trap.taken = 0;
    trap.action = action;
    for (unsigned i = 0; i < steps; i++) {
        trap.pages[i] = page_of(addresses[i]);
    }
    sigemptyset(&on_fault.sa_mask);
    assert_int_equal(sigaction(SIGSEGV, &on_fault, &trap.previous), 0);
    assert_int_equal(mprotect((void *)trap.pages[0], trap.page_size, PROT_NONE), 0);
}

/* Opens the trap's pages and puts the SIGSEGV handler back. @return the steps taken. */
static unsigned trap_disarm(void)
{
    for (unsigned i = 0; i < trap.steps; i++) {
        assert_int_equal(mprotect((void *)trap.pages[i], trap.page_size, PROT_READ | PROT_WRITE),
                         0);
    }
    assert_int_equal(sigaction(SIGSEGV, &trap.previous, NULL), 0);
    return trap.taken;
}

/* The writer that a trap's action plays, and what its calls returned. */
static struct trapped_writer {
    sxe_map_t *map;
    const char *key;
    int begin_rc, put_rc, commit_rc;
} trapped_writer;

/* Commits key -> "six" (a fixed map: key 1 -> value_of(2)) in a transaction of its own. */
static void trapped_commit(void)
{
    sxe_map_t *map = trapped_writer.map;
    uint64_t number_key = 1;
    struct value value = value_of(2);

    trapped_writer.begin_rc = sxe_map_write_begin(map);
    if (trapped_writer.begin_rc == 0) {
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
 * (the trap fires when the reader reads the slot's arena block). Without the recheck, the reader
 * would take the new version, "six", which its snapshot must not see; with it, it looks again,
 * skips the slot, and finds "two" further on. The walk likewise shows the key once, as "two".
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
        trapped_writer = (struct trapped_writer){.map = map, .key = key};
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
        assert_int_equal(trapped_writer.put_rc, 1);
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
        _exit(2);
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
            const struct value *value = sxe_map_find(reader, &key, sizeof(key), NULL);
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
        _exit(2);
    }
    while (!__atomic_load_n(&shared->stop, __ATOMIC_RELAXED)) {
        if (sxe_map_read_begin(map, &reader) != 0) {
            _exit(3);
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
    _exit(0);
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

static void test_stress_readers_and_killed_writers(void **state)
{
    struct sxe_map_options options = fixed_options(STRESS_GROUPS * STRESS_KEYS);
    char *path = temp_path("stress");
    pid_t readers[STRESS_READERS];
    struct sxe_map_stats stats;
    unsigned seed = 4242;
    unsigned kills = 0;
    sxe_map_t *map;
    int status;

    (void)state;
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
        "stress: %llu snapshots checked by %u readers, %llu batches committed, %u writers "
        "killed, %llu rollbacks, 0 mixed snapshots\n",
        (unsigned long long)reads, STRESS_READERS, (unsigned long long)shared->batches, kills,
        (unsigned long long)stats.recoveries);
    sxe_map_detach(map);
    munmap(shared, sizeof(*shared));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_put_get_delete_fixed, reset),
        cmocka_unit_test_teardown(test_variable_sizes, reset),
        cmocka_unit_test_teardown(test_variable_key_fixed_value, reset),
        cmocka_unit_test_teardown(test_arena_reuse_split_and_rebuild, reset),
        /* First to fill a map: "used up" is logged once per process. */
        cmocka_unit_test_teardown(test_full_table_old_versions_and_arena, reset),
        cmocka_unit_test_teardown(test_put_many, reset),
        cmocka_unit_test_teardown(test_invalid_use, reset),
        cmocka_unit_test_teardown(test_reader_table_full, reset),
        cmocka_unit_test_teardown(test_snapshot_outlives_commits, reset),
        cmocka_unit_test_teardown(test_tombstones_are_trimmed, reset),
        cmocka_unit_test_teardown(test_dead_reader_is_cleared, reset),
        cmocka_unit_test_teardown(test_abort, reset),
        cmocka_unit_test_teardown(test_writer_dies_mid_transaction, reset),
        cmocka_unit_test_teardown(test_dirty_marker_rolls_back, reset),
        cmocka_unit_test_teardown(test_file_persistence, reset),
        cmocka_unit_test_teardown(test_durable_commit_fails_cleanly, reset),
        cmocka_unit_test_teardown(test_attach_errors, reset),
        cmocka_unit_test_teardown(test_attach_twice, reset),
        cmocka_unit_test_teardown(test_validator_detects_corruption, reset),
        cmocka_unit_test_teardown(test_validator_checks_ring_and_journal, reset),
        cmocka_unit_test_teardown(test_unrecoverable_lock, reset),
        cmocka_unit_test_teardown(test_attach_refuses_impossible_shapes, reset),
        cmocka_unit_test_teardown(test_reader_bounds_checks_blocks, reset),
        cmocka_unit_test_teardown(test_rollback_survives_a_damaged_block, reset),
        cmocka_unit_test_teardown(test_reader_looks_again_at_a_rewritten_slot, reset),
        cmocka_unit_test_teardown(test_reader_moves_to_a_version_published_under_it, reset),
        cmocka_unit_test_teardown(test_stress_readers_and_killed_writers, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
