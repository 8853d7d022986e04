/*
 * Hash tables: the hash function, fixed and variable entries checked against a model with the
 * validator after every change, a full table and a full arena, batched lookups, walks, invalid
 * use, and tables in caller memory and in files (and the system saying no). Validation damage,
 * repair and writers in several processes: test_hash_repair.c.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hash_inline.h"
#include "hash_test.h"

/* Flipping any one input bit flips about half of the output bits, and the seed matters. */
static void test_hash_bytes_mixes(void **state)
{
    unsigned char data[64];
    uint64_t flipped_bits = 0, trials = 0;

    (void)state;
    for (size_t i = 0; i < sizeof(data); i++) {
        data[i] = (unsigned char)(i * 37 + 11);
    }
    for (size_t size = 0; size <= sizeof(data); size++) {
        uint64_t base = sxe_hash_bytes(data, size, 7);
        assert_int_equal(base, sxe_hash_bytes(data, size, 7));
        assert_int_not_equal(base, sxe_hash_bytes(data, size, 8));
        if (size > 0) {
            assert_int_not_equal(base, sxe_hash_bytes(data, size - 1, 7));
        }
        for (size_t bit = 0; bit < size * 8; bit++) {
            data[bit / 8] ^= (unsigned char)(1u << (bit % 8));
            flipped_bits += (uint64_t)__builtin_popcountll(base ^ sxe_hash_bytes(data, size, 7));
            data[bit / 8] ^= (unsigned char)(1u << (bit % 8));
            trials++;
        }
    }
    for (uint64_t word = 1; word < (1ULL << 60); word *= 3) {
        assert_int_equal(sxe__hash_word(word, 7), sxe_hash_bytes(&word, 8, 7));
    }
    double mean = (double)flipped_bits / (double)trials;
    print_message("a flipped input bit flips %.2f of 64 output bits on average\n", mean);
    assert_true(mean > 31.0 && mean < 33.0);
}

static void test_fixed_entries(void **state)
{
    sxe_hash_t *hash = make_fixed(100, 0, 0);
    struct value got;
    size_t size = 0;
    uint64_t key = 5;

    (void)state;
    assert_null(sxe_hash_find(hash, &key, 8, NULL));
    assert_int_equal(sxe_hash_get(hash, &key, 8, &got, sizeof(got)), -ENOENT);
    assert_int_equal(sxe_hash_delete(hash, &key, 8), -ENOENT);
    put_fixed(hash, 5, 50, 0);
    put_fixed(hash, 6, 60, 0);
    put_fixed(hash, 5, 55, 1);
    const struct value *found = sxe_hash_find(hash, &key, 8, &size);
    assert_non_null(found);
    assert_int_equal(size, sizeof(struct value));
    assert_int_equal(found->a, 55);
    assert_int_equal(found->b, ~55ULL);
    assert_int_equal(sxe_hash_get(hash, &key, 8, &got, 8), sizeof(struct value)); /* cut short */
    assert_int_equal(got.a, 55);
    assert_int_equal(sxe_hash_count(hash), 2);
    assert_int_equal(sxe_hash_delete(hash, &key, 8), 0);
    assert_int_equal(sxe__hash_validate(hash), 0);
    assert_null(sxe_hash_find(hash, &key, 8, NULL));
    assert_int_equal(sxe_hash_count(hash), 1);
    sxe_hash_destroy(hash);
}

/* A table holds exactly its capacity; the next put is refused and counted, and nothing is lost;
 * a delete makes room again. */
static void test_full_table_loses_nothing(void **state)
{
    sxe_hash_t *hash = make_fixed(64, 95, 0), *locked = make_fixed(2, 0, SXE_HASH_LOCKED);
    struct sxe_test_capture capture;
    struct sxe_hash_stats stats;

    (void)state;
    for (uint64_t key = 0; key < 64; key++) {
        put_fixed(hash, key, key, 0);
    }
    sxe_test_capture_start(&capture);
    put_fixed(hash, 1000, 1, -ENOBUFS);
    put_fixed(hash, 1001, 1, -ENOBUFS);
    sxe_test_capture_stop();
    assert_int_equal(capture.lines, 1); /* logged once */
    assert_non_null(strstr(capture.text, "hash fixed is full: 64 entries of 64"));
    put_fixed(hash, 3, 33, 1); /* a replace needs no room */
    sxe_hash_stats(hash, &stats);
    assert_int_equal(stats.count, 64);
    assert_int_equal(stats.full, 2);
    for (uint64_t key = 0; key < 64; key++) {
        const struct value *found = sxe_hash_find(hash, &key, 8, NULL);
        assert_non_null(found);
        assert_int_equal(found->a, key == 3 ? 33 : key);
    }
    uint64_t key = 10;
    assert_int_equal(sxe_hash_delete(hash, &key, 8), 0);
    put_fixed(hash, 1000, 1, 0);
    sxe_hash_destroy(hash);

    /* A locked table counts its capacity atomically; one put too many is taken back. */
    put_fixed(locked, 1, 1, 0);
    put_fixed(locked, 2, 2, 0);
    sxe_test_capture_start(&capture);
    put_fixed(locked, 3, 3, -ENOBUFS);
    sxe_test_capture_stop();
    assert_int_equal(sxe_hash_count(locked), 2);
    sxe_hash_destroy(locked);
}

/*
 * Random puts and deletes on a small, nearly full table, so chains are long and wrap past the
 * last slot, checked against an array after every change.
 */
static void run_against_model(sxe_hash_t *hash, uint64_t keys, unsigned operations)
{
    uint64_t *model = calloc(keys, sizeof(*model)); /* 0: absent, else the value's a */
    uint64_t present = 0;
    struct sxe_hash_stats stats;

    sxe_hash_stats(hash, &stats);
    uint64_t capacity = stats.capacity;
    srandom(1234);
    for (unsigned op = 0; op < operations; op++) {
        uint64_t key = (uint64_t)random() % keys, a = (uint64_t)random() | 1;
        if (random() % 3 == 0) {
            int rc = sxe_hash_delete(hash, &key, 8);
            assert_int_equal(rc, model[key] != 0 ? 0 : -ENOENT);
            present -= model[key] != 0;
            model[key] = 0;
        } else {
            int expected = model[key] != 0 ? 1 : present < capacity ? 0 : -ENOBUFS;
            struct value value = {a, ~a};
            assert_int_equal(sxe_hash_put(hash, &key, 8, &value, sizeof(value)), expected);
            if (expected >= 0) {
                present += expected == 0;
                model[key] = a;
            }
        }
        assert_int_equal(sxe__hash_validate(hash), 0);
    }
    for (uint64_t key = 0; key < keys; key++) {
        const struct value *found = sxe_hash_find(hash, &key, 8, NULL);
        if (model[key] == 0) {
            assert_null(found);
        } else {
            assert_non_null(found);
            assert_int_equal(found->a, model[key]);
        }
    }
    assert_int_equal(sxe_hash_count(hash), present);
    free(model);
}

static void test_random_operations_against_a_model(void **state)
{
    (void)state;
    sxe_hash_t *hash = make_fixed(40, 95, 0);
    run_against_model(hash, 60, 20000);
    sxe_hash_destroy(hash);

    struct sxe_hash_options options = {.name = "striped",
                                       .capacity = 500,
                                       .key_size = 8,
                                       .value_size = sizeof(struct value),
                                       .stripes = 4,
                                       .flags = SXE_HASH_LOCKED};
    assert_int_equal(sxe_hash_create(&hash, &options), 0);
    run_against_model(hash, 700, 5000);
    sxe_hash_destroy(hash);
}

static void test_variable_entries(void **state)
{
    sxe_hash_t *hash = make_variable(100, 4096);
    struct sxe_hash_stats stats;
    char big[5000];

    (void)state;
    put_text(hash, "apple", "a fruit", 0);
    put_text(hash, "a", "", 0);
    put_text(hash, "apple", "a fruit that grows on trees, red or green", 1); /* a larger block */
    put_text(hash, "apple", "pome", 1);                                      /* a smaller one */
    put_text(hash, "apple", "pomes", 1);                                     /* the same block */
    expect_text(hash, "apple", "pomes");
    expect_text(hash, "a", "");
    assert_null(sxe_hash_find(hash, "appl", 4, NULL));
    sxe_hash_stats(hash, &stats);
    assert_int_equal(stats.arena_used, 16 + 16);
    assert_int_equal(stats.arena_bytes, 4096);

    /* An entry larger than the arena is refused; nothing changes. */
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    put_text(hash, "big", big, -ENOBUFS);
    put_text(hash, "apple", big, -ENOBUFS);
    expect_text(hash, "apple", "pomes");

    /* Fill the arena with 48-byte blocks, then free one and reuse it. */
    char key[16];
    int added = 0;
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof(key), "k%03d", i);
        int rc =
            sxe_hash_put(hash, key, strlen(key), "0123456789012345678901234567890123456789", 40);
        if (rc == -ENOBUFS) {
            break;
        }
        assert_int_equal(rc, 0);
        added++;
    }
    assert_int_equal(added, (4096 - 32) / 48);
    assert_int_equal(sxe__hash_validate(hash), 0);
    assert_int_equal(sxe_hash_delete(hash, "k007", 4), 0);
    put_text(hash, "k999", "0123456789012345678901234567890123456789", 0);
    assert_int_equal(sxe__hash_validate(hash), 0);
    sxe_hash_destroy(hash);
}

/* A striped table's counts are summed over every stripe: the arena's bytes in use, and the puts
 * refused for a full stripe, wherever their keys fall. */
static void test_stats_of_every_stripe(void **state)
{
    struct sxe_hash_options options = {.name = "striped",
                                       .capacity = 64,
                                       .key_size = SXE_HASH_VARIABLE,
                                       .value_size = SXE_HASH_VARIABLE,
                                       .arena_bytes = 4 * 1024,
                                       .stripes = 4,
                                       .flags = SXE_HASH_LOCKED};
    struct sxe_hash_stats stats;
    struct sxe_test_capture capture;
    static char big[2000];
    sxe_hash_t *hash;
    char key[16];

    (void)state;
    assert_int_equal(sxe_hash_create(&hash, &options), 0);
    for (int i = 0; i < 32; i++) {
        snprintf(key, sizeof(key), "k%02d", i);
        put_text(hash, key, "v", 0); /* a 16-byte block each */
    }
    sxe_hash_stats(hash, &stats);
    assert_int_equal(stats.count, 32);
    assert_int_equal(stats.arena_used, 32 * 16);
    memset(big, 'x', sizeof(big) - 1); /* more than a stripe's 1 KB of arena */
    sxe_test_capture_start(&capture);
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "big%d", i);
        put_text(hash, key, big, -ENOBUFS);
    }
    sxe_test_capture_stop();
    sxe_hash_stats(hash, &stats);
    assert_int_equal(stats.full, 8);
    assert_int_equal(stats.arena_used, 32 * 16);
    sxe_hash_destroy(hash);
}

/* An entry over 4 KB takes a block of the next power of two (8 KB for 5,000 bytes), and its
 * bytes read back. */
static void test_an_entry_over_4_kb(void **state)
{
    sxe_hash_t *hash = make_variable(8, 64 * 1024);
    struct sxe_hash_stats stats;
    static char big[5000];

    (void)state;
    memset(big, 'b', sizeof(big) - 1);
    put_text(hash, "big", big, 0);
    expect_text(hash, "big", big);
    sxe_hash_stats(hash, &stats);
    assert_int_equal(stats.arena_used, 8192);
    sxe_hash_destroy(hash);
}

static void test_find_many(void **state)
{
    sxe_hash_t *hash = make_fixed(1000, 0, 0);
    uint64_t keys[100];
    const void *key_pointers[100], *values[100];
    size_t sizes[100];

    (void)state;
    for (uint64_t i = 0; i < 100; i++) {
        keys[i] = i * 7;
        key_pointers[i] = &keys[i];
        if (i % 3 != 0) {
            put_fixed(hash, keys[i], i, 0);
        }
    }
    assert_int_equal(sxe_hash_find_many(hash, 100, key_pointers, NULL, values, sizes), 66);
    for (uint64_t i = 0; i < 100; i++) {
        if (i % 3 == 0) {
            assert_null(values[i]);
            assert_int_equal(sizes[i], 0);
        } else {
            assert_non_null(values[i]);
            assert_int_equal(((const struct value *)values[i])->a, i);
            assert_int_equal(sizes[i], sizeof(struct value));
        }
    }
    sxe_hash_destroy(hash);

    hash = make_variable(10, 1024);
    const char *words[] = {"cat", "dog", "emu"};
    size_t word_sizes[] = {3, 3, 3};
    put_text(hash, "dog", "barks", 0);
    assert_int_equal(
        sxe_hash_find_many(hash, 3, (const void *const *)words, word_sizes, values, NULL), 1);
    assert_null(values[0]);
    assert_memory_equal(values[1], "barks", 5);
    assert_null(values[2]);
    sxe_hash_destroy(hash);
}

static void test_next_walks_every_entry(void **state)
{
    sxe_hash_t *hash = make_fixed(50, 0, 0);
    uint64_t cursor = 0, seen = 0, sum = 0;
    const void *key, *value;
    size_t key_size, value_size;

    (void)state;
    for (uint64_t key_number = 1; key_number <= 50; key_number++) {
        put_fixed(hash, key_number, key_number * 2, 0);
    }
    while (sxe_hash_next(hash, &cursor, &key, &key_size, &value, &value_size) == 1) {
        uint64_t k;
        memcpy(&k, key, 8);
        assert_int_equal(key_size, 8);
        assert_int_equal(value_size, sizeof(struct value));
        assert_int_equal(((const struct value *)value)->a, k * 2);
        seen |= 1ULL << (k - 1);
        sum += k;
    }
    assert_int_equal(seen, (1ULL << 50) - 1);
    assert_int_equal(sum, 50 * 51 / 2);
    assert_int_equal(sxe_hash_next(hash, &cursor, &key, &key_size, &value, NULL), 0);
    sxe_hash_destroy(hash);
}

#ifdef SXE_DEBUG
static void put_with_wrong_key_size(void *arg)
{
    uint64_t key = 1;
    struct value value = {0, 0};
    int rc = sxe_hash_put(arg, &key, 4, &value, sizeof(value));
    (void)rc;
}

static void put_without_a_value(void *arg)
{
    uint64_t key = 1;
    int rc = sxe_hash_put(arg, &key, 8, NULL, sizeof(struct value));
    (void)rc;
}
#endif

static void test_invalid_use(void **state)
{
    struct sxe_hash_options options = {.name = "bad", .capacity = 10, .key_size = 8};
    sxe_hash_t *hash = make_fixed(10, 0, 0);
    uint64_t key = 1;

    (void)state;
    assert_int_equal(sxe_hash_size(NULL), 0);
    options.load_percent = 99;
    assert_int_equal(sxe_hash_size(&options), 0);
    options.load_percent = 0;
    options.key_size = 0;
    assert_int_equal(sxe_hash_size(&options), 0);
    options.key_size = SXE_HASH_VARIABLE; /* variable needs an arena */
    assert_int_equal(sxe_hash_size(&options), 0);
    options.key_size = 8;
    options.stripes = 3;
    options.flags = SXE_HASH_LOCKED;
    assert_int_equal(sxe_hash_size(&options), 0);
    options.stripes = 4;
    assert_int_not_equal(sxe_hash_size(&options), 0);
    options.key_size = SXE_HASH_VARIABLE; /* an arena of 16 bytes a stripe at least */
    options.arena_bytes = 16 * 4;
    assert_int_not_equal(sxe_hash_size(&options), 0);
    options.arena_bytes = 16 * 4 - 1;
    assert_int_equal(sxe_hash_size(&options), 0);
    options.key_size = 8;
    options.arena_bytes = 0;
#ifdef SXE_DEBUG
    static const char *const expected[] = {"sxe_hash_put", NULL};
    sxe_test_expect_abort(put_with_wrong_key_size, hash, expected);
    static const char *const no_value[] = {"value != NULL || value_size == 0", NULL};
    sxe_test_expect_abort(put_without_a_value, hash, no_value);
#else
    assert_int_equal(sxe_hash_put(hash, &key, 8, NULL, sizeof(struct value)), -EINVAL);
    struct value value = {0, 0};
    assert_int_equal(sxe_hash_put(hash, &key, 4, &value, sizeof(value)), -EINVAL);
    assert_int_equal(sxe_hash_put(hash, &key, 8, &value, 4), -EINVAL);
    assert_int_equal(sxe_hash_get(hash, &key, 9, &value, sizeof(value)), -EINVAL);
    assert_null(sxe_hash_find(hash, &key, 2, NULL));
    assert_int_equal(sxe_hash_delete(hash, &key, 0), -EINVAL);
#endif
    (void)key;
    sxe_hash_destroy(make_fixed(1, 0, 0));
    sxe_hash_destroy(hash);

    /* A table's shape is told at the HASH module's DEBUG level. */
    struct sxe_test_capture capture;
    enum sxe_log_level was = sxe_log_get_module_level("HASH");
    assert_int_equal(sxe_log_set_module_level("HASH", SXE_LOG_LEVEL_DEBUG), 0);
    sxe_test_capture_start(&capture);
    hash = make_fixed(30, 95, 0);
    sxe_test_capture_stop();
    assert_int_equal(sxe_log_set_module_level("HASH", was), 0);
    assert_non_null(strstr(capture.text, "hash fixed: 30 entries in 1 stripes of "));
    sxe_hash_destroy(hash);
}

/* A table in the caller's memory, which need not be zeroed. */
static void test_init_in_caller_memory(void **state)
{
    struct sxe_hash_options options = {
        .name = "mine", .capacity = 30, .key_size = 8, .value_size = sizeof(struct value)};
    size_t size = sxe_hash_size(&options);
    void *memory = aligned_alloc(64, size);
    sxe_hash_t *hash = NULL;

    (void)state;
    memset(memory, 0xa5, size);
#ifndef SXE_DEBUG /* a short or misaligned buffer is a programmer error: debug builds assert */
    assert_int_equal(sxe_hash_init(&hash, memory, size - 64, &options), -EINVAL);
    assert_int_equal(sxe_hash_init(&hash, (char *)memory + 8, size, &options), -EINVAL);
#endif
    assert_int_equal(sxe_hash_init(&hash, memory, size, &options), 0);
    assert_int_equal(sxe__hash_validate(hash), 0);
    run_against_model(hash, 40, 2000);
    sxe_hash_fini(hash);
    free(memory);
}

static char *temp_path(const char *tag)
{
    static char path[128];
    snprintf(path, sizeof(path), "/dev/shm/sxe-test-hash-%d-%s", (int)getpid(), tag);
    unlink(path);
    return path;
}

/* A file keeps the table across detach and attach; a file of another shape or kind is refused;
 * and each system call that can fail is made to. */
static void test_attach_file(void **state)
{
    struct sxe_hash_options options = {.name = "filed",
                                       .capacity = 100,
                                       .key_size = 8,
                                       .value_size = sizeof(struct value),
                                       .stripes = 2};
    struct sxe_test_capture capture;
    sxe_hash_t *hash = NULL, *again = NULL;
    char *path = temp_path("attach");
    unsigned fds = sxe_test_open_fds();
    uint64_t key = 9;

    (void)state;
    assert_int_equal(sxe_hash_attach(&hash, path, &options, SXE_HASH_CREATE), 0);
    put_fixed(hash, 9, 90, 0);
    assert_int_equal(sxe_hash_attach(&again, path, &options, 0), 0); /* a second mapping */
    assert_int_equal(((const struct value *)sxe_hash_find(again, &key, 8, NULL))->a, 90);
    sxe_hash_detach(again);
    sxe_hash_detach(hash);
    assert_int_equal(sxe_hash_attach(&hash, path, &options, 0), 0);
    assert_int_equal(((const struct value *)sxe_hash_find(hash, &key, 8, NULL))->a, 90);
    assert_int_equal(sxe__hash_validate(hash), 0);
    sxe_hash_detach(hash);

    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_hash_attach(&hash, path, &options, SXE_HASH_CREATE), -EEXIST);
    options.capacity = 101;
    assert_int_equal(sxe_hash_attach(&hash, path, &options, 0), -EMSGSIZE);
    options.capacity = 100;
    assert_int_equal(truncate(path, 4096), 0);
    assert_int_equal(sxe_hash_attach(&hash, path, &options, 0), -EMSGSIZE);
    FILE *file = fopen(path, "w");
    for (int i = 0; i < 100; i++) {
        fputs("not a hash table, but long enough to look like the header of one\n", file);
    }
    fclose(file);
    assert_int_equal(sxe_hash_attach(&hash, path, &options, 0), -EPROTO);
    assert_int_equal(truncate(path, 0), 0);
    assert_int_equal(sxe_hash_attach(&hash, path, &options, 0), -EAGAIN);
    unlink(path);
    assert_int_equal(sxe_hash_attach(&hash, path, &options, 0), -ENOENT);
    sxe__sys_fail(SXE_SYS_ftruncate, 1, 1, ENOSPC);
    assert_int_equal(sxe_hash_attach(&hash, path, &options, SXE_HASH_CREATE), -ENOSPC);
    unlink(path);
    sxe__sys_fail(SXE_SYS_mmap, 1, 1, ENOMEM);
    assert_int_equal(sxe_hash_attach(&hash, path, &options, SXE_HASH_CREATE), -ENOMEM);
    unlink(path);
    sxe__sys_fail(SXE_SYS_mmap, 1, 1, ENOMEM);
    assert_int_equal(sxe_hash_create(&hash, &options), -ENOMEM);
    /* A file of the right size whose creator has not finished it. */
    assert_int_equal(sxe_hash_attach(&hash, path, &options, SXE_HASH_CREATE), 0);
    sxe__sys_fail(SXE_SYS_fstat, 1, 1, EIO);
    assert_int_equal(sxe_hash_attach(&again, path, &options, 0), -EIO);
    hash->magic = 0;
    sxe_hash_detach(hash);
    assert_int_equal(sxe_hash_attach(&hash, path, &options, 0), -EAGAIN);
    unlink(path);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "cannot size it"));
    assert_non_null(strstr(capture.text, "hash filed: cannot map"));
    assert_non_null(strstr(capture.text, "is not an sxe hash table"));
    assert_non_null(strstr(capture.text, "cannot stat it: Input/output error"));
    assert_non_null(strstr(capture.text, "is still being made by its creator"));
    sxe_hash_detach(NULL);
    sxe_hash_destroy(NULL);
    sxe_hash_fini(NULL);
    assert_int_equal(sxe_test_open_fds(), fds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_hash_bytes_mixes, reset),
        cmocka_unit_test_teardown(test_fixed_entries, reset),
        cmocka_unit_test_teardown(test_full_table_loses_nothing, reset),
        cmocka_unit_test_teardown(test_random_operations_against_a_model, reset),
        cmocka_unit_test_teardown(test_variable_entries, reset),
        cmocka_unit_test_teardown(test_stats_of_every_stripe, reset),
        cmocka_unit_test_teardown(test_an_entry_over_4_kb, reset),
        cmocka_unit_test_teardown(test_find_many, reset),
        cmocka_unit_test_teardown(test_next_walks_every_entry, reset),
        cmocka_unit_test_teardown(test_invalid_use, reset),
        cmocka_unit_test_teardown(test_init_in_caller_memory, reset),
        cmocka_unit_test_teardown(test_attach_file, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
