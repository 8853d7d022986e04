/*
 * Helpers shared by the hash table's unit tests (test_hash.c, test_hash_repair.c): the teardown
 * that puts the seam and the log back, a fixed-size value, checked creates of a fixed and a
 * variable table, and puts that validate the table after each. Static inline, so that a test
 * program that does not use one is not warned about it.
 */
#ifndef SXE_HASH_TEST_H
#define SXE_HASH_TEST_H

#include <stdint.h>
#include <string.h>

#include "hash.h"
#include "sxe_test.h"
#include "sys.h"

static inline int reset(void **state)
{
    (void)state;
    sxe__sys_reset();
    sxe_log_set_sink(NULL, NULL);
    return 0;
}

struct value {
    uint64_t a, b;
};

static inline sxe_hash_t *make_fixed(uint64_t capacity, unsigned load, unsigned flags)
{
    struct sxe_hash_options options = {.name = "fixed",
                                       .capacity = capacity,
                                       .key_size = 8,
                                       .value_size = sizeof(struct value),
                                       .load_percent = load,
                                       .seed = 42,
                                       .flags = flags};
    sxe_hash_t *hash = NULL;

    assert_int_equal(sxe_hash_create(&hash, &options), 0);
    assert_int_equal(sxe__hash_validate(hash), 0);
    return hash;
}

static inline void put_fixed(sxe_hash_t *hash, uint64_t key, uint64_t a, int expected)
{
    struct value value = {a, ~a};
    assert_int_equal(sxe_hash_put(hash, &key, 8, &value, sizeof(value)), expected);
    assert_int_equal(sxe__hash_validate(hash), 0);
}

static inline sxe_hash_t *make_variable(uint64_t capacity, uint64_t arena_bytes)
{
    struct sxe_hash_options options = {.name = "words",
                                       .capacity = capacity,
                                       .key_size = SXE_HASH_VARIABLE,
                                       .value_size = SXE_HASH_VARIABLE,
                                       .arena_bytes = arena_bytes};
    sxe_hash_t *hash = NULL;

    assert_int_equal(sxe_hash_create(&hash, &options), 0);
    return hash;
}

static inline void put_text(sxe_hash_t *hash, const char *key, const char *value, int expected)
{
    assert_int_equal(sxe_hash_put(hash, key, strlen(key), value, strlen(value)), expected);
    assert_int_equal(sxe__hash_validate(hash), 0);
}

static inline void expect_text(sxe_hash_t *hash, const char *key, const char *value)
{
    size_t size = 0;
    const char *found = sxe_hash_find(hash, key, strlen(key), &size);
    assert_non_null(found);
    assert_int_equal(size, strlen(value));
    assert_memory_equal(found, value, size);
}

#endif
