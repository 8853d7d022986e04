/*
 * sxe_map_put_many() in an SXE_MAP_IN_PLACE map: a batch in order, its pass's shortcut (the key's
 * entry among the slots prefetched) and the puts that take the whole probe instead.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "map_test.h"

/* Puts keys[i] -> value_of(numbers[i]) with one sxe_map_put_many(). @return its result. */
static int put_many(sxe_map_t *map, size_t count, const uint64_t *keys, const uint64_t *numbers,
                    size_t *done)
{
    const void *key_pointers[64], *value_pointers[64];
    struct value values[64];

    assert_true(count <= 64);
    for (size_t i = 0; i < count; i++) {
        values[i] = value_of(numbers[i]);
        key_pointers[i] = &keys[i];
        value_pointers[i] = &values[i];
    }
    int rc = sxe_map_put_many(map, count, key_pointers, NULL, value_pointers, NULL, done);
    assert_int_equal(sxe__map_validate(map), 0);
    return rc;
}

/*
 * A batch in place: replaces (one key three times, passes apart, and one twice in a row) and
 * inserts, in order; an old snapshot keeps its values. A batch that fills the log stops at the put
 * that found it full: those before it are in, those after it are not.
 */
static void test_put_many_in_place(void **state)
{
    struct sxe_map_options options = in_place_options(128);
    struct sxe_map_reader reader;
    uint64_t keys[60], numbers[60];
    size_t done;

    (void)state;
    options.old_versions = 64;
    sxe_map_t *map = map_with(options, 100);
    read_begin(map, &reader);
    for (uint64_t i = 0; i < 60; i++) {
        keys[i] = i % 3 == 2 ? 200 + i : 1 + i; /* every third put inserts */
        numbers[i] = 5000 + i;
    }
    keys[20] = keys[40] = keys[0];
    keys[6] = keys[4];
    begin(map);
    assert_int_equal(put_many(map, 60, keys, numbers, &done), 0);
    assert_int_equal(done, 60);
    commit(map);
    assert_int_equal(read_now(map, 1), 5040); /* keys[0], keys[20], keys[40]: the last */
    assert_int_equal(read_now(map, 5), 5006); /* keys[4], then keys[6] */
    assert_int_equal(read_now(map, 4), 5003);
    assert_int_equal(read_now(map, 202), 5002);
    assert_int_equal(read_number(&reader, 1), 10);
    assert_int_equal(read_number(&reader, 202), -1);
    assert_int_equal(stats_of(map).count, 100 + 19); /* keys[20] was an insert */
    sxe_map_read_end(&reader);

    /* 64 records of room, a reader holding them: the batch stops at the 65th replace. */
    read_begin(map, &reader);
    begin(map);
    for (uint64_t i = 0; i < 40; i++) {
        keys[i] = 1 + i;
        numbers[i] = 7000 + i;
    }
    assert_int_equal(put_many(map, 30, keys, numbers, &done), 0);
    for (uint64_t i = 0; i < 40; i++) {
        keys[i] = 31 + i;
        numbers[i] = 7030 + i;
    }
    sxe_log_set_module_level("MAP", SXE_LOG_LEVEL_FATAL);
    assert_int_equal(put_many(map, 40, keys, numbers, &done), -ENOBUFS);
    assert_int_equal(done, 34);
    commit(map);
    assert_int_equal(read_now(map, 64), 7063);
    assert_int_equal(read_now(map, 65), 650);
    assert_int_equal(read_number(&reader, 64), 640);
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);
}

/* Where key's probe starts. */
static uint64_t home_of(sxe_map_t *map, uint64_t key)
{
    return sxe__map_home(map, sxe__map_hash(map, &key, sizeof(key)) | 1);
}

/* Replaces key's value with one sxe_map_put_many() in a transaction of its own. */
static void put_one_of_many(sxe_map_t *map, uint64_t key, uint64_t number)
{
    size_t done;

    begin(map);
    assert_int_equal(put_many(map, 1, &key, &number, &done), 0);
    commit(map);
    assert_int_equal(read_now(map, key), (int64_t)number);
}

/*
 * Puts in place that the batch's shortcut (the first entry of the key's tag within the prefetched
 * window) must leave to the whole probe: a key past its window, in a nearly full table; a key whose
 * deleted version, which a reader still sees, comes before its current one; keys whose window would
 * wrap around the table's end. Each lands on the key's current entry.
 */
static void test_put_many_in_place_probes(void **state)
{
    struct sxe_map_options options = in_place_options(64);
    struct sxe_map_reader reader;
    uint64_t far = 0;

    (void)state;
    options.old_versions = 4;
    options.load_percent = 95;
    sxe_map_t *map = map_with(options, 60);
    for (uint64_t key = 1; key <= 60 && far == 0; key++) {
        uint64_t distance =
            (slot_of(map, key) + map->slot_count - home_of(map, key)) % map->slot_count;
        far = distance >= 4 ? key : 0;
    }
    assert_int_not_equal(far, 0);
    put_one_of_many(map, far, 77);

    /* Key 5's deleted version stays while the reader sees it; its new one goes further on. */
    uint64_t deleted_at = slot_of(map, 5);
    read_begin(map, &reader);
    begin(map);
    assert_int_equal(delete (map, 5), 0);
    commit(map);
    begin(map);
    assert_int_equal(put(map, 5, 51), 0);
    commit(map);
    uint64_t home = home_of(map, 5);
    assert_true((deleted_at + map->slot_count - home) % map->slot_count <
                (slot_of(map, 5) + map->slot_count - home) % map->slot_count);
    put_one_of_many(map, 5, 52);
    assert_int_equal(read_number(&reader, 5), 50);
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);

    /* Keys whose probes start in the table's last three slots. */
    map = make_map(in_place_options(64));
    uint64_t ends[3], found = 0;
    begin(map);
    for (uint64_t key = 1000; found < 3; key++) {
        if (home_of(map, key) + 3 >= map->slot_count) {
            ends[found++] = key;
            assert_int_equal(put(map, key, key), 0);
        }
    }
    commit(map);
    for (uint64_t i = 0; i < 3; i++) {
        put_one_of_many(map, ends[i], 90 + i);
    }
    sxe_map_destroy(map);
}

/* How far key's current entry is from its home. */
static uint64_t distance_of(sxe_map_t *map, uint64_t key)
{
    return (slot_of(map, key) + map->slot_count - home_of(map, key)) % map->slot_count;
}

/*
 * Batches in a table at 95% of its slots, checked against a model after each: keys whose window
 * is full of other keys (their entries in the next two windows, which the batch looks at a pass
 * later, or further, which take the whole probe, or near the table's end), inserts into the free
 * slots that deletes left (tombstones inside such windows), and the same key several times in a
 * batch, passes apart or in a row.
 */
static void test_put_many_in_place_beyond(void **state)
{
    struct sxe_map_options options = in_place_options(1000);
    int64_t model[1001];
    uint64_t keys[64], numbers[64], state_of_rng = 0x9e3779b97f4a7c15ULL;
    unsigned near = 0, further = 0, at_end = 0;
    size_t done;

    (void)state;
    options.old_versions = 256;
    options.load_percent = 95;
    sxe_map_t *map = map_with(options, 900);
    for (uint64_t key = 0; key <= 1000; key++) {
        model[key] = key >= 1 && key <= 900 ? (int64_t)(10 * key) : -1;
    }
    for (uint64_t key = 1; key <= 900; key++) {
        uint64_t distance = distance_of(map, key);
        near += distance >= 4 && distance < 12;
        further += distance >= 12;
        at_end += distance >= 4 && home_of(map, key) + 12 > map->slot_count;
    }
    assert_true(near > 0 && further > 0 && at_end > 0); /* each path is taken below */
    for (unsigned round = 0; round < 40; round++) {
        begin(map);
        for (unsigned i = 0; i < 64; i++) {
            state_of_rng = state_of_rng * 6364136223846793005ULL + 1442695040888963407ULL;
            keys[i] = i > 0 && (state_of_rng >> 60) == 0    ? keys[i - 1]  /* the same again */
                      : i > 20 && (state_of_rng >> 59) == 1 ? keys[i - 17] /* a pass apart */
                                                            : 1 + (state_of_rng >> 33) % 1000;
            numbers[i] = 100000 * round + i;
        }
        assert_int_equal(put_many(map, 64, keys, numbers, &done), 0);
        assert_int_equal(done, 64);
        commit(map);
        for (unsigned i = 0; i < 64; i++) {
            model[keys[i]] = (int64_t)numbers[i];
        }
        begin(map); /* deletes leave tombstones for the next round's inserts */
        for (uint64_t key = 1 + round % 7; key <= 1000; key += 37) {
            if (model[key] >= 0) {
                assert_int_equal(delete (map, key), 0);
                model[key] = -1;
            }
        }
        commit(map);
        for (uint64_t key = 1; key <= 1000; key++) {
            assert_int_equal(read_now(map, key), model[key]);
        }
    }
    sxe_map_destroy(map);
}

/*
 * Slots of 128 bytes (values of 88): windows of two slots, the next two windows four, through the
 * shape find_in_window() is not specialised for. Two rounds of every key at 95% load, a reader
 * holding the snapshot before them; each value is whole, old and new.
 */
static void test_put_many_in_place_other_slots(void **state)
{
    struct sxe_map_options options = in_place_options(200);
    unsigned char values[200][88], read[88];
    uint64_t keys[200];
    const void *key_pointers[200], *value_pointers[200];
    struct sxe_map_reader reader;
    size_t done;

    (void)state;
    options.value_size = sizeof(values[0]);
    options.load_percent = 95;
    options.old_versions = 512;
    sxe_map_t *map = make_map(options);
    assert_int_equal(map->slot_size, 128);
    for (unsigned round = 0; round < 3; round++) {
        for (uint64_t i = 0; i < 200; i++) {
            keys[i] = 7 * i + 1;
            memset(values[i], (int)(round * 50 + i % 50), sizeof(values[i]));
            key_pointers[i] = &keys[i];
            value_pointers[i] = values[i];
        }
        if (round == 2) {
            read_begin(map, &reader);
        }
        begin(map);
        assert_int_equal(
            sxe_map_put_many(map, 200, key_pointers, NULL, value_pointers, NULL, &done), 0);
        assert_int_equal(sxe__map_validate(map), 0);
        commit(map);
    }
    for (uint64_t i = 0; i < 200; i++) {
        unsigned char now[88];
        assert_int_equal(sxe_map_get(&reader, &keys[i], 8, read, sizeof(read)), 88);
        memset(now, (int)(50 + i % 50), sizeof(now));
        assert_memory_equal(read, now, sizeof(now)); /* round 1's, from the log */
    }
    sxe_map_read_end(&reader);
    read_begin(map, &reader);
    for (uint64_t i = 0; i < 200; i++) {
        assert_int_equal(sxe_map_get(&reader, &keys[i], 8, read, sizeof(read)), 88);
        assert_memory_equal(read, values[i], sizeof(read));
    }
    sxe_map_read_end(&reader);
    sxe_map_destroy(map);
}

/*
 * Values of each size the copies treat their own way (sxe__map_copy(): one, two and four words as
 * constant copies, five words word by word, 12 bytes by memcpy), put in place twice: the log keeps
 * the first, an old snapshot reads it, a new one the second.
 */
static void test_put_many_in_place_value_sizes(void **state)
{
    static const size_t sizes[] = {8, 16, 32, 40, 12};

    (void)state;
    for (size_t which = 0; which < sizeof(sizes) / sizeof(sizes[0]); which++) {
        struct sxe_map_options options = in_place_options(64);
        unsigned char values[2][10][40], read[40];
        uint64_t keys[10];
        const void *key_pointers[10], *value_pointers[10];
        struct sxe_map_reader old;
        size_t done, size = sizes[which];

        options.value_size = size;
        sxe_map_t *map = make_map(options);
        for (unsigned round = 0; round < 2; round++) {
            for (unsigned i = 0; i < 10; i++) {
                keys[i] = 100 + i;
                memset(values[round][i], (int)(1 + round * 10 + i), size);
                key_pointers[i] = &keys[i];
                value_pointers[i] = values[round][i];
            }
            if (round == 1) {
                read_begin(map, &old);
            }
            begin(map);
            assert_int_equal(
                sxe_map_put_many(map, 10, key_pointers, NULL, value_pointers, NULL, &done), 0);
            commit(map);
        }
        struct sxe_map_reader now;
        read_begin(map, &now);
        for (unsigned i = 0; i < 10; i++) {
            assert_int_equal(sxe_map_get(&old, &keys[i], 8, read, size), (int64_t)size);
            assert_memory_equal(read, values[0][i], size);
            assert_int_equal(sxe_map_get(&now, &keys[i], 8, read, size), (int64_t)size);
            assert_memory_equal(read, values[1][i], size);
        }
        sxe_map_read_end(&old);
        sxe_map_read_end(&now);
        sxe_map_destroy(map);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_put_many_in_place, reset),
        cmocka_unit_test_teardown(test_put_many_in_place_probes, reset),
        cmocka_unit_test_teardown(test_put_many_in_place_beyond, reset),
        cmocka_unit_test_teardown(test_put_many_in_place_other_slots, reset),
        cmocka_unit_test_teardown(test_put_many_in_place_value_sizes, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
