/*
 * The map against a model: thousands of seeded random transactions of puts, put_many batches and
 * deletes over a small set of keys, in a map kept nearly full and short of old versions, each
 * committed or aborted, on each kind of map (entries in the slots or in place; fixed or variable
 * sizes). After every transaction the map is validated and a new snapshot must hold exactly what
 * the model holds, read every way (get, find, get_many, find_many, next, next_copy); snapshots
 * taken earlier must still hold what they saw. Each result is the model's too: added or replaced,
 * -ENOENT, -ENOBUFS (then the map is unchanged). The module tests check each rule once; this checks
 * that they hold together, in orders no one wrote down.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "map_test.h"

#define KEYS      40 /* keys 1..KEYS */
#define VALUE_MAX 48 /* bytes of a variable value at most */
#define OLD_KEPT  3  /* snapshots held at once */

struct entry {
    bool present;
    size_t len;
    unsigned char bytes[VALUE_MAX];
};

struct model {
    struct entry entries[KEYS + 1];
};

static uint64_t random_state;

static uint64_t next_random(void)
{
    return sxe_test_random(&random_state);
}

static bool variable;
static char key_texts[KEYS + 1][8];
static uint64_t key_numbers[KEYS + 1];

static const void *key_of(unsigned k)
{
    return variable ? (const void *)key_texts[k] : (const void *)&key_numbers[k];
}

static size_t key_size_of(unsigned k)
{
    return variable ? strlen(key_texts[k]) : sizeof(uint64_t);
}

/* A value no other put gives: its size (fixed, or 1 to VALUE_MAX) and bytes from a counter. */
static void value_for(uint64_t serial, struct entry *entry)
{
    entry->present = true;
    entry->len = variable ? 1 + (size_t)(serial % VALUE_MAX) : sizeof(struct value);
    for (size_t i = 0; i < entry->len; i++) {
        entry->bytes[i] = (unsigned char)(serial * 31 + i * 7 + (serial >> 8));
    }
    if (!variable) {
        struct value value = value_of(serial);
        memcpy(entry->bytes, &value, sizeof(value));
    }
}

/* Checks a snapshot against the model, every way there is to read it. */
static void expect_snapshot(const struct sxe_map_reader *reader, const struct model *model,
                            bool in_place)
{
    static unsigned char values[KEYS][VALUE_MAX];
    const void *keys[KEYS];
    size_t key_sizes[KEYS];
    int64_t sizes[KEYS];
    unsigned present = 0;

    for (unsigned k = 1; k <= KEYS; k++) {
        const struct entry *entry = &model->entries[k];
        unsigned char out[VALUE_MAX];
        int64_t got = sxe_map_get(reader, key_of(k), key_size_of(k), out, sizeof(out));
        if (!entry->present) {
            if (got != -ENOENT) {
                fail_msg("key %u: %lld, want -ENOENT", k, (long long)got);
            }
        } else if (got != (int64_t)entry->len || memcmp(out, entry->bytes, entry->len) != 0) {
            fail_msg("key %u: %lld bytes, want %zu", k, (long long)got, entry->len);
        }
        if (!in_place) {
            size_t size = 0;
            const void *found = sxe_map_find(reader, key_of(k), key_size_of(k), &size);
            assert_true((found != NULL) == entry->present);
            if (found != NULL) {
                assert_int_equal(size, entry->len);
                assert_memory_equal(found, entry->bytes, entry->len);
            }
        }
        keys[k - 1] = key_of(k);
        key_sizes[k - 1] = key_size_of(k);
        present += entry->present;
    }
    size_t found =
        sxe_map_get_many(reader, KEYS, keys, variable ? key_sizes : NULL, values, VALUE_MAX, sizes);
    assert_int_equal(found, present);
    for (unsigned k = 1; k <= KEYS; k++) {
        const struct entry *entry = &model->entries[k];
        assert_int_equal(sizes[k - 1], entry->present ? (int64_t)entry->len : -ENOENT);
        if (entry->present) {
            assert_memory_equal(values[k - 1], entry->bytes, entry->len);
        }
    }
    if (!in_place) {
        const void *found_values[KEYS];
        size_t found_sizes[KEYS];
        assert_int_equal(sxe_map_find_many(reader, KEYS, keys, variable ? key_sizes : NULL,
                                           found_values, found_sizes),
                         present);
        for (unsigned k = 1; k <= KEYS; k++) {
            assert_true((found_values[k - 1] != NULL) == model->entries[k].present);
        }
    }
    /* The walk: every entry once, none other. */
    bool walked[KEYS + 1] = {false};
    unsigned count = 0;
    uint64_t cursor = 0;
    for (;;) {
        unsigned char key[8], value[VALUE_MAX];
        const void *key_at, *value_at;
        size_t key_len = 0, value_len = 0;
        int rc;
        if (in_place) {
            rc = sxe_map_next_copy(reader, &cursor, key, value, sizeof(value));
            key_at = key;
            key_len = 8;
            value_at = value;
        } else {
            rc = sxe_map_next(reader, &cursor, &key_at, &key_len, &value_at, &value_len);
        }
        if (rc == 0) {
            break;
        }
        assert_int_equal(rc, 1);
        unsigned k = 0;
        if (variable) {
            char text[8] = "";
            memcpy(text, key_at, key_len < 7 ? key_len : 7);
            k = (unsigned)atoi(text);
        } else {
            uint64_t number;
            memcpy(&number, key_at, 8);
            k = (unsigned)number;
        }
        assert_true(k >= 1 && k <= KEYS);
        assert_false(walked[k]);
        walked[k] = true;
        assert_true(model->entries[k].present);
        if (!in_place) {
            assert_int_equal(value_len, model->entries[k].len);
        }
        assert_memory_equal(value_at, model->entries[k].bytes, model->entries[k].len);
        count++;
    }
    assert_int_equal(count, present);
}

static void run_model(struct sxe_map_options options, uint64_t seed, unsigned transactions)
{
    static struct model committed, pending, kept[OLD_KEPT];
    struct sxe_map_reader old[OLD_KEPT];
    bool holding[OLD_KEPT] = {false};
    bool in_place = (options.flags & SXE_MAP_IN_PLACE) != 0;
    uint64_t serial = 0;

    random_state = seed;
    variable = options.key_size == SXE_MAP_VARIABLE;
    for (unsigned k = 0; k <= KEYS; k++) {
        snprintf(key_texts[k], sizeof(key_texts[k]), "%u", k);
        key_numbers[k] = k;
    }
    memset(&committed, 0, sizeof(committed));
    sxe_map_t *map = make_map(options);
    for (unsigned t = 0; t < transactions; t++) {
        pending = committed;
        assert_int_equal(sxe_map_write_begin(map), 0);
        unsigned steps = 1 + (unsigned)(next_random() % 6);
        for (unsigned s = 0; s < steps; s++) {
            unsigned kind = (unsigned)(next_random() % 3);
            if (kind == 0) { /* a put */
                unsigned k = 1 + (unsigned)(next_random() % KEYS);
                struct entry entry;
                value_for(++serial, &entry);
                int rc = sxe_map_put(map, key_of(k), key_size_of(k), entry.bytes, entry.len);
                if (rc == -ENOBUFS) {
                    continue;
                }
                if (rc != (pending.entries[k].present ? 1 : 0)) {
                    fail_msg("put %u: %d, present %d", k, rc, pending.entries[k].present);
                }
                pending.entries[k] = entry;
            } else if (kind == 1) { /* a batch */
                const void *keys[8], *values[8];
                size_t key_sizes[8], value_sizes[8], done = 99;
                struct entry entries[8];
                unsigned ks[8], count = 1 + (unsigned)(next_random() % 8);
                for (unsigned i = 0; i < count; i++) {
                    ks[i] = 1 + (unsigned)(next_random() % KEYS);
                    value_for(++serial, &entries[i]);
                    keys[i] = key_of(ks[i]);
                    key_sizes[i] = key_size_of(ks[i]);
                    values[i] = entries[i].bytes;
                    value_sizes[i] = entries[i].len;
                }
                int rc = sxe_map_put_many(map, count, keys, variable ? key_sizes : NULL, values,
                                          variable ? value_sizes : NULL, &done);
                assert_true(rc == 0 || rc == -ENOBUFS);
                assert_int_equal(done == count, rc == 0);
                for (size_t i = 0; i < done; i++) {
                    pending.entries[ks[i]] = entries[i];
                }
            } else { /* a delete */
                unsigned k = 1 + (unsigned)(next_random() % KEYS);
                int rc = sxe_map_delete(map, key_of(k), key_size_of(k));
                if (rc == -ENOBUFS) {
                    continue;
                }
                assert_int_equal(rc, pending.entries[k].present ? 0 : -ENOENT);
                pending.entries[k].present = false;
            }
        }
        if (next_random() % 5 == 0) {
            sxe_map_abort(map);
        } else {
            assert_int_equal(sxe_map_commit(map), 0);
            committed = pending;
        }
        assert_int_equal(sxe__map_validate(map), 0);

        struct sxe_map_reader reader;
        assert_int_equal(sxe_map_read_begin(map, &reader), 0);
        expect_snapshot(&reader, &committed, in_place);
        sxe_map_read_end(&reader);
        /* Now and then a snapshot is kept over the next transactions, and checked each time. */
        unsigned slot = t % OLD_KEPT;
        if (holding[slot]) {
            expect_snapshot(&old[slot], &kept[slot], in_place);
            if (next_random() % 2 == 0) {
                sxe_map_read_end(&old[slot]);
                holding[slot] = false;
            }
        } else if (next_random() % 4 == 0) {
            assert_int_equal(sxe_map_read_begin(map, &old[slot]), 0);
            kept[slot] = committed;
            holding[slot] = true;
        }
    }
    for (unsigned slot = 0; slot < OLD_KEPT; slot++) {
        if (holding[slot]) {
            expect_snapshot(&old[slot], &kept[slot], in_place);
            sxe_map_read_end(&old[slot]);
        }
    }
    sxe_map_destroy(map);
}

static struct sxe_map_options small(struct sxe_map_options options, unsigned flags)
{
    options.capacity = KEYS;
    options.old_versions = 12;
    options.load_percent = 95;
    options.flags = flags;
    return options;
}

static void test_fixed_sizes_against_the_model(void **state)
{
    (void)state;
    run_model(small(fixed_options(KEYS), 0), 1, 3000);
}

static void test_fixed_sizes_in_place_against_the_model(void **state)
{
    (void)state;
    run_model(small(fixed_options(KEYS), SXE_MAP_IN_PLACE), 2, 3000);
}

static void test_variable_sizes_against_the_model(void **state)
{
    (void)state;
    run_model(small(variable_options(KEYS, 4096), 0), 3, 3000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_fixed_sizes_against_the_model, reset),
        cmocka_unit_test_teardown(test_fixed_sizes_in_place_against_the_model, reset),
        cmocka_unit_test_teardown(test_variable_sizes_against_the_model, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
