/*
 * Invalid use of the map's reads and writes, one argument wrong at a time, as in
 * test_invalid_use.c: each case is an assertion that names the check in debug builds and the
 * documented refusal in release builds. Each runs against a map that holds the key it asks for,
 * so that a refusal (NULL, 0, -EINVAL) differs from what the valid call answers; the valid
 * neighbours, at the edges of each check, are in test_the_valid_neighbours.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "map_test.h"

static const uint64_t one = 1;
static const void *const one_key[] = {&one};
static const size_t one_size[] = {sizeof(one)};

/* A map that holds key 1, and a snapshot of it. */
struct fixture {
    sxe_map_t *map;
    struct sxe_map_reader reader;
};

static struct fixture open_fixture(struct sxe_map_options options)
{
    struct fixture fixture = {.map = map_with(options, 1)};

    read_begin(fixture.map, &fixture.reader);
    return fixture;
}

static void close_fixture(struct fixture *fixture)
{
    sxe_map_read_end(&fixture->reader);
    assert_int_equal(sxe__map_validate(fixture->map), 0);
    sxe_map_destroy(fixture->map);
}

static void read_begin_into_nothing(void)
{
    sxe_map_t *map = map_with(fixed_options(4), 1);
    assert_int_equal(sxe_map_read_begin(map, NULL), -EINVAL);
    sxe_map_destroy(map);
}

static void read_end_of_nothing(void)
{
    sxe_map_read_end(NULL);
}

/* Ending a snapshot twice: the second end finds no map and leaves the slot alone. */
static void read_end_twice(void)
{
    struct fixture fixture = open_fixture(fixed_options(4));
    struct sxe_map_reader copy = fixture.reader;
    sxe_map_read_end(&copy);
    assert_null(copy.map);
    sxe_map_read_end(&copy);
    assert_int_equal(stats_of(fixture.map).readers, 0);
    sxe_map_destroy(fixture.map);
}

static void read_end_of_a_slot_past_the_table(void)
{
    struct fixture fixture = open_fixture(fixed_options(4));
    struct sxe_map_reader wrong = fixture.reader;
    wrong.index = fixture.map->readers_max;
    sxe_map_read_end(&wrong);
    assert_int_equal(stats_of(fixture.map).readers, 1);
    wrong.index = UINT32_MAX;
    sxe_map_read_end(&wrong);
    assert_int_equal(stats_of(fixture.map).readers, 1);
    close_fixture(&fixture);
}

static void find_of_no_reader(void)
{
    assert_null(sxe_map_find(NULL, &one, sizeof(one), NULL));
}

static void find_of_no_key(void)
{
    struct fixture fixture = open_fixture(fixed_options(4));
    assert_null(sxe_map_find(&fixture.reader, NULL, sizeof(one), NULL));
    close_fixture(&fixture);
}

static void get_of_no_reader(void)
{
    struct value value;
    assert_int_equal(sxe_map_get(NULL, &one, sizeof(one), &value, sizeof(value)), -EINVAL);
}

static void get_of_an_ended_reader(void)
{
    struct sxe_map_reader ended = {0};
    struct value value;
    assert_int_equal(sxe_map_get(&ended, &one, sizeof(one), &value, sizeof(value)), -EINVAL);
}

static void get_of_no_key(void)
{
    struct fixture fixture = open_fixture(fixed_options(4));
    struct value value;
    assert_int_equal(sxe_map_get(&fixture.reader, NULL, sizeof(one), &value, sizeof(value)),
                     -EINVAL);
    close_fixture(&fixture);
}

/* Refused, not missed: a key of the wrong size is -EINVAL where an absent key is -ENOENT. */
static void get_of_a_key_of_the_wrong_size(void)
{
    struct fixture fixture = open_fixture(fixed_options(4));
    struct value value;
    assert_int_equal(sxe_map_get(&fixture.reader, &one, 4, &value, sizeof(value)), -EINVAL);
    close_fixture(&fixture);
}

static void get_into_nothing(void)
{
    struct fixture fixture = open_fixture(fixed_options(4));
    assert_int_equal(sxe_map_get(&fixture.reader, &one, sizeof(one), NULL, 8), -EINVAL);
    close_fixture(&fixture);
}

static void find_many_of_no_reader(void)
{
    const void *values[1];
    assert_int_equal(sxe_map_find_many(NULL, 1, one_key, one_size, values, NULL), 0);
}

static void find_many_of_an_ended_reader(void)
{
    struct sxe_map_reader ended = {0};
    const void *values[1];
    assert_int_equal(sxe_map_find_many(&ended, 1, one_key, one_size, values, NULL), 0);
}

static void find_many_without_keys(void)
{
    struct fixture fixture = open_fixture(fixed_options(4));
    const void *values[1];
    assert_int_equal(sxe_map_find_many(&fixture.reader, 1, NULL, one_size, values, NULL), 0);
    close_fixture(&fixture);
}

static void find_many_without_values(void)
{
    struct fixture fixture = open_fixture(fixed_options(4));
    assert_int_equal(sxe_map_find_many(&fixture.reader, 1, one_key, one_size, NULL, NULL), 0);
    close_fixture(&fixture);
}

static void get_many_of_no_reader(void)
{
    struct value values[1];
    assert_int_equal(sxe_map_get_many(NULL, 1, one_key, one_size, values, sizeof(values[0]), NULL),
                     0);
}

static void get_many_of_an_ended_reader(void)
{
    struct sxe_map_reader ended = {0};
    struct value values[1];
    assert_int_equal(
        sxe_map_get_many(&ended, 1, one_key, one_size, values, sizeof(values[0]), NULL), 0);
}

static void get_many_without_keys(void)
{
    struct fixture fixture = open_fixture(fixed_options(4));
    struct value values[1];
    assert_int_equal(
        sxe_map_get_many(&fixture.reader, 1, NULL, one_size, values, sizeof(values[0]), NULL), 0);
    close_fixture(&fixture);
}

static void get_many_into_nothing(void)
{
    struct fixture fixture = open_fixture(fixed_options(4));
    assert_int_equal(sxe_map_get_many(&fixture.reader, 1, one_key, one_size, NULL, 8, NULL), 0);
    close_fixture(&fixture);
}

/* sxe_map_next() with one of its outputs missing: nothing is walked or written. */
static void next_without(int missing)
{
    struct fixture fixture = open_fixture(fixed_options(4));
    uint64_t cursor = 0;
    const void *key, *value;
    size_t key_size;
    assert_int_equal(sxe_map_next(&fixture.reader, missing == 0 ? NULL : &cursor,
                                  missing == 1 ? NULL : &key, missing == 2 ? NULL : &key_size,
                                  missing == 3 ? NULL : &value, NULL),
                     0);
    assert_int_equal(cursor, 0);
    close_fixture(&fixture);
}

static void next_of_no_reader(void)
{
    uint64_t cursor = 0;
    const void *key, *value;
    size_t key_size;
    assert_int_equal(sxe_map_next(NULL, &cursor, &key, &key_size, &value, NULL), 0);
}

static void next_without_a_cursor(void)
{
    next_without(0);
}

static void next_without_a_key(void)
{
    next_without(1);
}

static void next_without_a_key_size(void)
{
    next_without(2);
}

static void next_without_a_value(void)
{
    next_without(3);
}

static void next_copy_without(int missing)
{
    struct fixture fixture = open_fixture(in_place_options(4));
    uint64_t cursor = 0, key;
    struct value value;
    assert_int_equal(sxe_map_next_copy(&fixture.reader, missing == 0 ? NULL : &cursor,
                                       missing == 1 ? NULL : &key, &value, sizeof(value)),
                     -EINVAL);
    assert_int_equal(cursor, 0);
    close_fixture(&fixture);
}

static void next_copy_without_a_cursor(void)
{
    next_copy_without(0);
}

static void next_copy_without_a_key(void)
{
    next_copy_without(1);
}

static void write_begin_of_no_map(void)
{
    assert_int_equal(sxe_map_write_begin(NULL), -EINVAL);
}

static void put_in_no_map(void)
{
    struct value value = value_of(2);
    assert_int_equal(sxe_map_put(NULL, &one, sizeof(one), &value, sizeof(value)), -EINVAL);
}

/* A put of a fixed-size value with no value: refused, and key 1 keeps its value. */
static void put_of_no_value(void)
{
    sxe_map_t *map = map_with(fixed_options(4), 1);
    begin(map);
    assert_int_equal(sxe_map_put(map, &one, sizeof(one), NULL, sizeof(struct value)), -EINVAL);
    commit(map);
    assert_int_equal(read_now(map, 1), 10);
    sxe_map_destroy(map);
}

static void put_of_an_empty_variable_key(void)
{
    sxe_map_t *map = make_map(variable_options(4, 4096));
    begin(map);
    assert_int_equal(sxe_map_put(map, "", 0, "v", 1), -EINVAL);
    commit(map);
    assert_int_equal(stats_of(map).count, 0);
    sxe_map_destroy(map);
}

static void put_of_a_value_past_4_gb(void)
{
    sxe_map_t *map = make_map(variable_options(4, 4096));
    begin(map);
    assert_int_equal(sxe_map_put(map, "k", 1, "v", (size_t)UINT32_MAX + 1), -EINVAL);
    commit(map);
    assert_int_equal(stats_of(map).count, 0);
    sxe_map_destroy(map);
}

static void delete_in_no_map(void)
{
    assert_int_equal(sxe_map_delete(NULL, &one, sizeof(one)), -EINVAL);
}

/* A delete of no key, or of a key of the wrong size: refused, and key 1 stays. */
static void delete_with_a_bad_key(const void *key, size_t key_size)
{
    sxe_map_t *map = map_with(fixed_options(4), 1);
    begin(map);
    assert_int_equal(sxe_map_delete(map, key, key_size), -EINVAL);
    commit(map);
    assert_int_equal(read_now(map, 1), 10);
    sxe_map_destroy(map);
}

static void delete_of_no_key(void)
{
    delete_with_a_bad_key(NULL, sizeof(one));
}

static void delete_of_a_key_of_the_wrong_size(void)
{
    delete_with_a_bad_key(&one, 4);
}

static void delete_of_an_empty_variable_key(void)
{
    sxe_map_t *map = make_map(variable_options(4, 4096));
    begin(map);
    assert_int_equal(sxe_map_delete(map, "", 0), -EINVAL);
    sxe_map_abort(map);
    sxe_map_destroy(map);
}

static void commit_of_no_map(void)
{
    assert_int_equal(sxe_map_commit(NULL), -EINVAL);
}

static void abort_of_no_map(void)
{
    sxe_map_abort(NULL);
}

static const struct sxe_test_invalid_use cases[] = {
    {"sxe_map_read_begin() into no reader", read_begin_into_nothing, "reader != NULL"},
    {"sxe_map_read_end() of no reader", read_end_of_nothing, "reader != NULL"},
    {"sxe_map_read_end() twice", read_end_twice, "reader->map != NULL"},
    {"sxe_map_read_end() of a slot past the table", read_end_of_a_slot_past_the_table,
     "reader->index < reader->map->readers_max"},
    {"sxe_map_find() of no reader", find_of_no_reader, "reader != NULL"},
    {"sxe_map_find() of no key", find_of_no_key, "key != NULL"},
    {"sxe_map_get() of no reader", get_of_no_reader, "reader != NULL"},
    {"sxe_map_get() of an ended reader", get_of_an_ended_reader, "reader->map != NULL"},
    {"sxe_map_get() of no key", get_of_no_key, "key != NULL"},
    {"sxe_map_get() of a 4-byte key", get_of_a_key_of_the_wrong_size, "key_size_is_valid("},
    {"sxe_map_get() into nothing", get_into_nothing, "value != NULL || value_capacity == 0"},
    {"sxe_map_find_many() of no reader", find_many_of_no_reader, "reader != NULL"},
    {"sxe_map_find_many() of an ended reader", find_many_of_an_ended_reader,
     "hands_out_pointers(reader)"},
    {"sxe_map_find_many() without keys", find_many_without_keys, "count == 0 || keys != NULL"},
    {"sxe_map_find_many() without values", find_many_without_values,
     "count == 0 || values != NULL"},
    {"sxe_map_get_many() of no reader", get_many_of_no_reader, "reader != NULL"},
    {"sxe_map_get_many() of an ended reader", get_many_of_an_ended_reader, "reader->map != NULL"},
    {"sxe_map_get_many() without keys", get_many_without_keys, "count == 0 || keys != NULL"},
    {"sxe_map_get_many() into nothing", get_many_into_nothing,
     "count == 0 || values != NULL || value_capacity == 0"},
    {"sxe_map_next() of no reader", next_of_no_reader, "reader != NULL"},
    {"sxe_map_next() without a cursor", next_without_a_cursor, "cursor != NULL"},
    {"sxe_map_next() without a key", next_without_a_key, "key != NULL"},
    {"sxe_map_next() without a key size", next_without_a_key_size, "key_size != NULL"},
    {"sxe_map_next() without a value", next_without_a_value, "value != NULL"},
    {"sxe_map_next_copy() without a cursor", next_copy_without_a_cursor, "cursor != NULL"},
    {"sxe_map_next_copy() without a key", next_copy_without_a_key, "key != NULL"},
    {"sxe_map_write_begin() of no map", write_begin_of_no_map, "map != NULL"},
    {"sxe_map_put() in no map", put_in_no_map, "map != NULL"},
    {"sxe_map_put() of no value", put_of_no_value, "(value != NULL || value_size == 0)"},
    {"sxe_map_put() of an empty key", put_of_an_empty_variable_key, "sxe__map_sizes_are_valid"},
    {"sxe_map_put() of a value past 4 GB", put_of_a_value_past_4_gb, "sxe__map_sizes_are_valid"},
    {"sxe_map_delete() in no map", delete_in_no_map, "map != NULL"},
    {"sxe_map_delete() of no key", delete_of_no_key, "key != NULL"},
    {"sxe_map_delete() of a 4-byte key", delete_of_a_key_of_the_wrong_size,
     "sxe__map_sizes_are_valid"},
    {"sxe_map_delete() of an empty key", delete_of_an_empty_variable_key,
     "sxe__map_sizes_are_valid"},
    {"sxe_map_commit() of no map", commit_of_no_map, "map != NULL"},
    {"sxe_map_abort() of no map", abort_of_no_map, "map != NULL"},
};

static void test_each_invalid_use(void **state)
{
    (void)state;
    sxe_test_invalid_uses(cases, sizeof(cases) / sizeof(cases[0]));
}

/*
 * A child of fork() that ends its parent's snapshot of a shared map is refused (an assertion in
 * debug builds), and the parent's reader slot stays held.
 */
static void test_a_child_cannot_end_its_parents_snapshot(void **state)
{
    struct sxe_map_options options = fixed_options(4);
    options.flags = SXE_MAP_SHARED;
    struct fixture fixture = open_fixture(options);
    int status;

    (void)state;
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        sxe_map_read_end(&fixture.reader);
        sxe_test_exit(0);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
#ifdef SXE_DEBUG
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
#else
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#endif
    assert_int_equal(stats_of(fixture.map).readers, 1);
    sxe_map_read_end(&fixture.reader);
    assert_int_equal(stats_of(fixture.map).readers, 0);
    sxe_map_destroy(fixture.map);
}

/* The valid calls beside each refusal, at the edges of their checks. */
static void test_the_valid_neighbours(void **state)
{
    struct fixture fixture = open_fixture(fixed_options(4));
    const void *values[1];
    int64_t sizes[1];
    uint64_t cursor = 0;
    const void *key, *value;
    size_t key_size;

    (void)state;
    assert_non_null(sxe_map_find(&fixture.reader, &one, sizeof(one), NULL));
    assert_int_equal(sxe_map_get(&fixture.reader, &one, sizeof(one), NULL, 0),
                     sizeof(struct value));
    assert_int_equal(sxe_map_find_many(&fixture.reader, 0, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(sxe_map_find_many(&fixture.reader, 1, one_key, NULL, values, NULL), 1);
    assert_int_equal(sxe_map_get_many(&fixture.reader, 0, NULL, NULL, NULL, 8, NULL), 0);
    assert_int_equal(sxe_map_get_many(&fixture.reader, 1, one_key, NULL, NULL, 0, sizes), 1);
    assert_int_equal(sizes[0], sizeof(struct value));
    assert_int_equal(sxe_map_next(&fixture.reader, &cursor, &key, &key_size, &value, NULL), 1);
    assert_int_equal(key_size, sizeof(one));
    close_fixture(&fixture);

    /* A variable map takes a key of one byte and an empty value. */
    sxe_map_t *map = make_map(variable_options(4, 4096));
    begin(map);
    assert_int_equal(sxe_map_put(map, "k", 1, NULL, 0), 0);
    assert_int_equal(sxe_map_delete(map, "k", 1), 0);
    commit(map);
    sxe_map_destroy(map);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_each_invalid_use, reset),
        cmocka_unit_test_teardown(test_a_child_cannot_end_its_parents_snapshot, reset),
        cmocka_unit_test_teardown(test_the_valid_neighbours, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
