/*
 * Helpers shared by the map's unit tests (test_map.c, test_map_versions.c, test_map_validate.c):
 * options, a checked create, puts, deletes and commits that validate the map after each, reads
 * in a snapshot, and the teardown that puts the seam and the log back. They are static inline so
 * that a test program that does not use one is not warned about it.
 */
#ifndef SXE_MAP_TEST_H
#define SXE_MAP_TEST_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "map.h"
#include "sxe_test.h"
#include "sys.h"

/* A fixed-size value: three copies of one number, so a torn read shows. */
struct value {
    uint64_t a, b, c;
};

static inline struct value value_of(uint64_t number)
{
    return (struct value){number, number, ~number};
}

static inline struct sxe_map_options fixed_options(uint64_t capacity)
{
    return (struct sxe_map_options){.name = "test",
                                    .capacity = capacity,
                                    .key_size = sizeof(uint64_t),
                                    .value_size = sizeof(struct value)};
}

static inline struct sxe_map_options variable_options(uint64_t capacity, uint64_t arena_bytes)
{
    return (struct sxe_map_options){.name = "words",
                                    .capacity = capacity,
                                    .key_size = SXE_MAP_VARIABLE,
                                    .value_size = SXE_MAP_VARIABLE,
                                    .arena_bytes = arena_bytes};
}

static inline sxe_map_t *make_map(struct sxe_map_options options)
{
    sxe_map_t *map = NULL;

    assert_int_equal(sxe_map_create(&map, &options), 0);
    assert_int_equal(sxe__map_validate(map), 0);
    return map;
}

static inline int reset(void **state)
{
    (void)state;
    sxe__sys_reset();
    sxe_log_set_sink(NULL, NULL);
    return 0;
}

static inline char *temp_path(const char *tag)
{
    static char path[128];
    snprintf(path, sizeof(path), "/dev/shm/sxe-test-map-%d-%s", (int)getpid(), tag);
    unlink(path);
    return path;
}

/* Puts key -> value_of(number) in the open transaction and validates. @return put's result. */
static inline int put(sxe_map_t *map, uint64_t key, uint64_t number)
{
    struct value value = value_of(number);
    int rc = sxe_map_put(map, &key, sizeof(key), &value, sizeof(value));

    assert_int_equal(sxe__map_validate(map), 0);
    return rc;
}

static inline int delete (sxe_map_t *map, uint64_t key)
{
    int rc = sxe_map_delete(map, &key, sizeof(key));

    assert_int_equal(sxe__map_validate(map), 0);
    return rc;
}

static inline void commit(sxe_map_t *map)
{
    assert_int_equal(sxe_map_commit(map), 0);
    assert_int_equal(sxe__map_validate(map), 0);
}

/*
 * The number stored under key in the reader's snapshot, or -1 if it is absent: found in place, or
 * copied out of an SXE_MAP_IN_PLACE map.
 */
static inline int64_t read_number(const struct sxe_map_reader *reader, uint64_t key)
{
    size_t size = 0;
    struct value copy;
    const struct value *value = &copy;

    if (reader->map->in_place) {
        int64_t got = sxe_map_get(reader, &key, sizeof(key), &copy, sizeof(copy));
        if (got == -ENOENT) {
            return -1;
        }
        size = (size_t)got;
    } else if ((value = sxe_map_find(reader, &key, sizeof(key), &size)) == NULL) {
        return -1;
    }
    assert_int_equal(size, sizeof(struct value));
    assert_int_equal(value->a, value->b);
    assert_int_equal(value->c, ~value->a);
    return (int64_t)value->a;
}

/* Reads key in a fresh snapshot. */
static inline int64_t read_now(sxe_map_t *map, uint64_t key)
{
    struct sxe_map_reader reader;

    assert_int_equal(sxe_map_read_begin(map, &reader), 0);
    int64_t number = read_number(&reader, key);
    sxe_map_read_end(&reader);
    return number;
}

static inline int put_text(sxe_map_t *map, const char *key, const char *value)
{
    int rc = sxe_map_put(map, key, strlen(key), value, strlen(value));

    assert_int_equal(sxe__map_validate(map), 0);
    return rc;
}

/* The value of key in the snapshot as a string (in a static buffer), or NULL. */
static inline const char *read_text(const struct sxe_map_reader *reader, const char *key)
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

/* The slot of key's current version. */
static inline uint64_t slot_of(sxe_map_t *map, uint64_t key)
{
    uint64_t tag = sxe__map_hash(map, &key, sizeof(key)) | 1;

    for (uint64_t index = 0; index < map->slot_count; index++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        if (slot->tag == tag && slot->deleted == 0 &&
            memcmp(sxe__map_slot_key(map, slot), &key, sizeof(key)) == 0) {
            return index;
        }
    }
    fail_msg("no current version of key %llu", (unsigned long long)key);
    return 0;
}

static inline struct sxe_map_stats stats_of(sxe_map_t *map)
{
    struct sxe_map_stats stats;

    sxe_map_stats(map, &stats);
    return stats;
}

/* Begins a transaction and validates. */
static inline void begin(sxe_map_t *map)
{
    assert_int_equal(sxe_map_write_begin(map), 0);
    assert_int_equal(sxe__map_validate(map), 0);
}

static inline struct sxe_map_options in_place_options(uint64_t capacity)
{
    struct sxe_map_options options = fixed_options(capacity);

    options.flags = SXE_MAP_IN_PLACE;
    return options;
}

static inline void read_begin(sxe_map_t *map, struct sxe_map_reader *reader)
{
    assert_int_equal(sxe_map_read_begin(map, reader), 0);
}

/* Commits keys 1 to count, key k -> 10 * k, in a map of its own. */
static inline sxe_map_t *map_with(struct sxe_map_options options, uint64_t count)
{
    sxe_map_t *map = make_map(options);

    begin(map);
    for (uint64_t key = 1; key <= count; key++) {
        assert_int_equal(put(map, key, 10 * key), 0);
    }
    commit(map);
    return map;
}

#endif
