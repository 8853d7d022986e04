/*
 * sxe_map_find_many() and sxe_hash_find_many() against their one-at-a-time finds, key by key: both
 * pipeline their lookups (they start a group while they finish the one before, and a lookup whose
 * probe runs long waits for a later pass), so every batch size around their group sizes, long
 * probes in crowded tables (chains that wrap around a hash stripe's end), keys replaced or deleted
 * after an old snapshot, and keys of invalid sizes are checked against find's answer. And
 * sxe_map_put_many(), which prefetches the probes of a pass of puts while it applies the pass
 * before, in order, against sxe_map_put() one at a time. And sxe_map_next(), the other reader of
 * many entries, which must stop at the last slot.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "map_test.h"
#include "sxe/hash.h"

#define KEYS   600
#define ABSENT 1000000

static const size_t batch_sizes[] = {0, 1, 2, 15, 16, 17, 31, 32, 33, 47, 64, 100, KEYS + 64};

/* Checks find_many over keys[0..count) against find, key by key. */
static void check_batch(const struct sxe_map_reader *reader, const uint64_t *keys, size_t count)
{
    const void *key_pointers[KEYS + 64] = {NULL}, *values[KEYS + 64];
    size_t value_sizes[KEYS + 64], expected = 0;

    for (size_t i = 0; i < count; i++) {
        key_pointers[i] = &keys[i];
        values[i] = &values; /* must be overwritten, found or not */
    }
    for (size_t i = 0; i < count; i++) {
        expected += sxe_map_find(reader, &keys[i], sizeof(keys[i]), NULL) != NULL;
    }
    assert_int_equal(sxe_map_find_many(reader, count, key_pointers, NULL, values, value_sizes),
                     expected);
    for (size_t i = 0; i < count; i++) {
        size_t size = 0;
        const void *value = sxe_map_find(reader, &keys[i], sizeof(keys[i]), &size);
        assert_ptr_equal(values[i], value);
        if (value != NULL) {
            assert_int_equal(value_sizes[i], size);
        }
    }
    /* The same without the sizes, which a caller may skip. */
    const void *again[KEYS + 64];
    assert_int_equal(sxe_map_find_many(reader, count, key_pointers, NULL, again, NULL), expected);
    assert_memory_equal(again, values, count * sizeof(values[0]));
}

/* Keys 0..KEYS-1 in a random order, with absent keys mixed in. */
static void shuffled_keys(uint64_t *keys, size_t count, unsigned seed)
{
    srandom(seed);
    for (size_t i = 0; i < count; i++) {
        keys[i] = i % 7 == 3 ? ABSENT + i : i % KEYS;
    }
    for (size_t i = count; i > 1; i--) {
        size_t j = (size_t)random() % i;
        uint64_t swap = keys[i - 1];
        keys[i - 1] = keys[j];
        keys[j] = swap;
    }
}

static void test_find_many_agrees_with_find(void **state)
{
    struct sxe_map_options options = fixed_options(KEYS);
    struct sxe_map_reader old, now;
    uint64_t keys[KEYS + 64];
    sxe_map_t *map;

    (void)state;
    options.load_percent = 95; /* long clusters: probes that run past their first lines */
    map = make_map(options);
    assert_int_equal(sxe_map_write_begin(map), 0);
    for (uint64_t key = 0; key < KEYS; key++) {
        assert_int_equal(sxe_map_put(map, &key, sizeof(key), &(struct value){key, key, ~key},
                                     sizeof(struct value)),
                         0);
    }
    commit(map);
    assert_int_equal(sxe_map_read_begin(map, &old), 0);

    /* A tenth replaced and a tenth deleted after the old snapshot was taken. */
    assert_int_equal(sxe_map_write_begin(map), 0);
    for (uint64_t key = 0; key < KEYS; key += 10) {
        assert_int_equal(put(map, key, key + 1), 1);
        assert_int_equal(delete (map, key + 5), 0);
    }
    commit(map);
    assert_int_equal(sxe_map_read_begin(map, &now), 0);

    for (unsigned s = 0; s < sizeof(batch_sizes) / sizeof(batch_sizes[0]); s++) {
        shuffled_keys(keys, batch_sizes[s], s);
        check_batch(&old, keys, batch_sizes[s]);
        check_batch(&now, keys, batch_sizes[s]);
    }
    struct sxe_map_stats stats;
    sxe_map_stats(map, &stats);
    assert_true(stats.slots < KEYS * 2); /* crowded enough for clusters */
    sxe_map_read_end(&old);
    sxe_map_read_end(&now);
    sxe_map_destroy(map);
}

/* Variable keys: 32-byte slots (several per prefetch), and keys of invalid size answered NULL. */
static void test_find_many_variable_keys(void **state)
{
    sxe_map_t *map = make_map(variable_options(300, 64 * 1024));
    struct sxe_map_reader reader;
    char words[300][16];
    const void *keys[340], *values[340];
    size_t key_sizes[340], value_sizes[340];

    (void)state;
    assert_int_equal(sxe_map_write_begin(map), 0);
    for (unsigned i = 0; i < 300; i++) {
        snprintf(words[i], sizeof(words[i]), "word%u", i);
        if (i % 3 != 0) {
            assert_int_equal(put_text(map, words[i], words[i] + 4), 0);
        }
    }
    commit(map);
    for (unsigned i = 0; i < 340; i++) {
        keys[i] = words[i % 300];
        key_sizes[i] = i % 50 == 7 ? 0 : strlen(words[i % 300]); /* 0: invalid */
    }
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    size_t found = sxe_map_find_many(&reader, 340, keys, key_sizes, values, value_sizes);
    size_t expected = 0;
    for (unsigned i = 0; i < 340; i++) {
        if (key_sizes[i] == 0) {
            assert_null(values[i]);
            continue;
        }
        const char *value = read_text(&reader, words[i % 300]);
        expected += value != NULL;
        if (value == NULL) {
            assert_null(values[i]);
        } else {
            assert_int_equal(value_sizes[i], strlen(value));
            assert_memory_equal(values[i], value, value_sizes[i]);
        }
    }
    assert_int_equal(found, expected);
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);
}

/* A crowded hash in four stripes: chains run long and wrap around their stripe's end. */
static void test_hash_find_many_agrees_with_find(void **state)
{
    struct sxe_hash_options options = {.name = "crowded",
                                       .capacity = KEYS,
                                       .key_size = 8,
                                       .value_size = sizeof(struct value),
                                       .load_percent = 95,
                                       .stripes = 4,
                                       .seed = 7,
                                       .flags = SXE_HASH_LOCKED};
    uint64_t keys[KEYS + 64];
    const void *key_pointers[KEYS + 64] = {NULL}, *values[KEYS + 64];
    size_t value_sizes[KEYS + 64];
    sxe_hash_t *hash;

    (void)state;
    assert_int_equal(sxe_hash_create(&hash, &options), 0);
    for (uint64_t key = 0; key < KEYS; key++) {
        struct value value = value_of(key);
        assert_int_equal(sxe_hash_put(hash, &key, sizeof(key), &value, sizeof(value)), 0);
    }
    /* The last round: absent keys only, whose probes run to the end of their clusters. */
    for (unsigned s = 0; s <= sizeof(batch_sizes) / sizeof(batch_sizes[0]); s++) {
        size_t count = s < sizeof(batch_sizes) / sizeof(batch_sizes[0]) ? batch_sizes[s] : KEYS;
        size_t expected = 0;
        shuffled_keys(keys, count, s);
        for (size_t i = 0; i < count && s == sizeof(batch_sizes) / sizeof(batch_sizes[0]); i++) {
            keys[i] = ABSENT + i;
        }
        for (size_t i = 0; i < count; i++) {
            key_pointers[i] = &keys[i];
            values[i] = &values;
            expected += sxe_hash_find(hash, &keys[i], sizeof(keys[i]), NULL) != NULL;
        }
        assert_int_equal(sxe_hash_find_many(hash, count, key_pointers, NULL, values, value_sizes),
                         expected);
        for (size_t i = 0; i < count; i++) {
            const void *value = sxe_hash_find(hash, &keys[i], sizeof(keys[i]), NULL);
            assert_ptr_equal(values[i], value);
            assert_int_equal(value_sizes[i], value != NULL ? sizeof(struct value) : 0);
        }
    }
    sxe_hash_destroy(hash);
}

/* The same batch, with keys that come twice and replacements, through put_many and put. */
static void test_put_many_agrees_with_put(void **state)
{
    struct sxe_map_options options = fixed_options(KEYS);
    uint64_t keys[KEYS];
    struct value values[KEYS];
    const void *key_pointers[KEYS], *value_pointers[KEYS];
    size_t done;

    (void)state;
    options.load_percent = 95;
    options.old_versions = KEYS;
    sxe_map_t *many = make_map(options), *one = make_map(options);
    for (unsigned round = 0; round < 3; round++) {
        shuffled_keys(keys, KEYS, round + 100);
        assert_int_equal(sxe_map_write_begin(many), 0);
        assert_int_equal(sxe_map_write_begin(one), 0);
        for (size_t i = 0; i < KEYS; i++) {
            keys[i] %= KEYS * 3 / 4; /* a quarter come twice, in order */
            values[i] = value_of(round * KEYS + i);
            key_pointers[i] = &keys[i];
            value_pointers[i] = &values[i];
            assert_true(
                sxe_map_put(one, &keys[i], sizeof(keys[i]), &values[i], sizeof(values[i])) >= 0);
        }
        assert_int_equal(
            sxe_map_put_many(many, KEYS, key_pointers, NULL, value_pointers, NULL, &done), 0);
        assert_int_equal(done, KEYS);
        commit(many);
        commit(one);
        for (uint64_t key = 0; key < KEYS; key++) {
            assert_int_equal(read_now(many, key), read_now(one, key));
        }
    }
    sxe_map_destroy(many);
    sxe_map_destroy(one);
}

/*
 * A walk of a snapshot returns each entry once and stops at the last slot: what lies just past it
 * (the ring of old versions) is made to look like a current entry, and is not returned.
 */
static void test_walk_stops_at_the_last_slot(void **state)
{
    sxe_map_t *map = make_map(fixed_options(64));
    struct sxe_map_reader reader;
    uint64_t cursor = 0, seen = 0;
    const void *key, *value;
    size_t key_size, value_size;

    (void)state;
    assert_int_equal(sxe_map_write_begin(map), 0);
    for (uint64_t number = 0; number < 40; number++) {
        assert_int_equal(put(map, number, number), 0);
    }
    commit(map);
    struct sxe__map_slot *past = sxe__map_slot(map, map->slot_count);
    assert_ptr_equal((void *)past, (void *)map->ring); /* the decoy lies in the ring */
    assert_true(map->slot_size <= map->old_versions * sizeof(*map->ring));
    *past = (struct sxe__map_slot){.tag = 0x1235, .created = 1, .deleted = 0};
    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    while (sxe_map_next(&reader, &cursor, &key, &key_size, &value, &value_size) == 1) {
        uint64_t number;
        memcpy(&number, key, sizeof(number));
        assert_true(number < 40);
        seen++;
    }
    assert_int_equal(seen, 40);
    assert_int_equal(cursor, map->slot_count);
    sxe_map_read_end(&reader);
    memset(past, 0, sizeof(*past));
    sxe_map_destroy(map);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_find_many_agrees_with_find, reset),
        cmocka_unit_test_teardown(test_find_many_variable_keys, reset),
        cmocka_unit_test_teardown(test_hash_find_many_agrees_with_find, reset),
        cmocka_unit_test_teardown(test_put_many_agrees_with_put, reset),
        cmocka_unit_test_teardown(test_walk_stops_at_the_last_slot, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
