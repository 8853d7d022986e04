/*
 * The hash table against a model: tens of thousands of seeded random puts and deletes over a small
 * set of keys in a table kept nearly full (probes long, chains crossing the table's end, the arena
 * short of room), on each kind of table (fixed or variable sizes, locked or not, one stripe or
 * several). After each operation its result is the model's (added, replaced, -ENOENT, -ENOBUFS
 * and then nothing changed); every so often the table is validated, its count checked, and every
 * key read every way there is (get, a get cut short, find, find_many, the walk). The module tests
 * check each rule once; this checks they hold together, in orders no one wrote down.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hash.h"
#include "sxe/hash.h"
#include "sxe_test.h"

#define KEYS      64
#define VALUE_MAX 40

struct entry {
    bool present;
    size_t len;
    unsigned char bytes[VALUE_MAX];
};

static struct entry model[KEYS + 1];
static uint64_t random_state;
static bool variable;
static char key_texts[KEYS + 1][8];
static uint64_t key_numbers[KEYS + 1];

static uint64_t next_random(void)
{
    return sxe_test_random(&random_state);
}

static const void *key_of(unsigned k)
{
    return variable ? (const void *)key_texts[k] : (const void *)&key_numbers[k];
}

static size_t key_size_of(unsigned k)
{
    return variable ? strlen(key_texts[k]) : sizeof(uint64_t);
}

static void value_for(uint64_t serial, struct entry *entry)
{
    entry->present = true;
    entry->len = variable ? (size_t)(serial % (VALUE_MAX + 1)) : 16; /* variable: 0 bytes too */
    for (size_t i = 0; i < entry->len; i++) {
        entry->bytes[i] = (unsigned char)(serial * 13 + i * 5 + (serial >> 8));
    }
}

static void expect_table(sxe_hash_t *hash)
{
    const void *keys[KEYS], *values[KEYS];
    size_t key_sizes[KEYS], value_sizes[KEYS];
    unsigned present = 0;

    assert_int_equal(sxe__hash_validate(hash), 0);
    for (unsigned k = 1; k <= KEYS; k++) {
        const struct entry *entry = &model[k];
        unsigned char out[VALUE_MAX + 1];
        int64_t got = sxe_hash_get(hash, key_of(k), key_size_of(k), out, sizeof(out));
        if (!entry->present) {
            if (got != -ENOENT) {
                fail_msg("key %u: %lld, want -ENOENT", k, (long long)got);
            }
        } else if (got != (int64_t)entry->len || memcmp(out, entry->bytes, entry->len) != 0) {
            fail_msg("key %u: %lld bytes, want %zu", k, (long long)got, entry->len);
        }
        if (entry->present && entry->len > 1) { /* a copy cut short says the whole size */
            memset(out, 0, sizeof(out));
            assert_int_equal(sxe_hash_get(hash, key_of(k), key_size_of(k), out, 1),
                             (int64_t)entry->len);
            assert_int_equal(out[0], entry->bytes[0]);
            assert_int_equal(out[1], 0);
        }
        size_t size = 99;
        const void *found = sxe_hash_find(hash, key_of(k), key_size_of(k), &size);
        assert_true((found != NULL) == entry->present);
        if (found != NULL) {
            assert_int_equal(size, entry->len);
            assert_memory_equal(found, entry->bytes, entry->len);
        }
        keys[k - 1] = key_of(k);
        key_sizes[k - 1] = key_size_of(k);
        present += entry->present;
    }
    assert_int_equal(sxe_hash_count(hash), present);
    assert_int_equal(
        sxe_hash_find_many(hash, KEYS, keys, variable ? key_sizes : NULL, values, value_sizes),
        present);
    for (unsigned k = 1; k <= KEYS; k++) {
        assert_true((values[k - 1] != NULL) == model[k].present);
        if (model[k].present) {
            assert_int_equal(value_sizes[k - 1], model[k].len);
            assert_memory_equal(values[k - 1], model[k].bytes, model[k].len);
        }
    }
    bool walked[KEYS + 1] = {false};
    unsigned count = 0;
    uint64_t cursor = 0;
    const void *key, *value;
    size_t key_len, value_len;
    while (sxe_hash_next(hash, &cursor, &key, &key_len, &value, &value_len) == 1) {
        unsigned k;
        for (k = 1; k <= KEYS; k++) {
            if (key_len == key_size_of(k) && memcmp(key, key_of(k), key_len) == 0) {
                break;
            }
        }
        assert_true(k >= 1 && k <= KEYS && !walked[k] && model[k].present);
        walked[k] = true;
        assert_int_equal(value_len, model[k].len);
        assert_memory_equal(value, model[k].bytes, value_len);
        count++;
    }
    assert_int_equal(count, present);
}

static void run_model(struct sxe_hash_options options, uint64_t seed, unsigned operations)
{
    uint64_t serial = 0;
    sxe_hash_t *hash;

    random_state = seed;
    variable = options.key_size == SXE_HASH_VARIABLE;
    memset(model, 0, sizeof(model));
    for (unsigned k = 0; k <= KEYS; k++) {
        snprintf(key_texts[k], sizeof(key_texts[k]), "%u", k * 37 % 1000);
        key_numbers[k] = k * 0x100000001ULL;
    }
    assert_int_equal(sxe_hash_create(&hash, &options), 0);
    for (unsigned op = 0; op < operations; op++) {
        unsigned k = 1 + (unsigned)(next_random() % KEYS);
        if (next_random() % 3 != 0) {
            struct entry entry;
            value_for(++serial, &entry);
            int rc = sxe_hash_put(hash, key_of(k), key_size_of(k), entry.bytes, entry.len);
            if (rc != -ENOBUFS) {
                if (rc != (model[k].present ? 1 : 0)) {
                    fail_msg("put %u: %d, present %d", k, rc, model[k].present);
                }
                model[k] = entry;
            }
        } else {
            int rc = sxe_hash_delete(hash, key_of(k), key_size_of(k));
            assert_int_equal(rc, model[k].present ? 0 : -ENOENT);
            model[k].present = false;
        }
        if (op % 97 == 0) {
            expect_table(hash);
        }
    }
    expect_table(hash);
    sxe_hash_destroy(hash);
}

static void test_fixed_sizes_against_the_model(void **state)
{
    struct sxe_hash_options options = {
        .name = "model", .capacity = 56, .key_size = 8, .value_size = 16, .load_percent = 95};
    (void)state;
    run_model(options, 1, 20000);
    options.flags = SXE_HASH_LOCKED;
    options.stripes = 4;
    run_model(options, 2, 20000);
}

static void test_variable_sizes_against_the_model(void **state)
{
    struct sxe_hash_options options = {.name = "model",
                                       .capacity = 56,
                                       .key_size = SXE_HASH_VARIABLE,
                                       .value_size = SXE_HASH_VARIABLE,
                                       .arena_bytes = 2048,
                                       .load_percent = 95};
    (void)state;
    run_model(options, 3, 20000);
    options.flags = SXE_HASH_LOCKED;
    options.stripes = 2;
    run_model(options, 4, 20000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_sizes_against_the_model),
        cmocka_unit_test(test_variable_sizes_against_the_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
