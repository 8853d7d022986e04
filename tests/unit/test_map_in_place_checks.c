/*
 * SXE_MAP_IN_PLACE maps, checked from outside: each corruption of the undo log (its tail, a
 * record's position, order, slot and undo field, a link, an old creation, the UNDONE mark) and
 * the validator's report of it; and invalid use of the in-place reads (a find or a copy without
 * the copies the map keeps, a map attached elsewhere).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "map_test.h"

/* Each corruption of the log, and the validator's report of it. */
static void corrupt_the_tail(sxe_map_t *map, struct sxe__map_slot *slot)
{
    (void)slot;
    map->header->log_tail = map->header->log_head + map->old_versions + 1;
}

static void corrupt_a_position(sxe_map_t *map, struct sxe__map_slot *slot)
{
    (void)slot;
    sxe__map_record(map, 1)->position = 99;
}

static void corrupt_the_order(sxe_map_t *map, struct sxe__map_slot *slot)
{
    (void)slot;
    sxe__map_record(map, 1)->version = 1;
}

static void corrupt_a_record_slot(sxe_map_t *map, struct sxe__map_slot *slot)
{
    (void)slot;
    sxe__map_record(map, 1)->slot = map->slot_count;
}

static void corrupt_the_undo_field(sxe_map_t *map, struct sxe__map_slot *slot)
{
    *sxe__map_slot_undo(slot) = map->header->log_tail + 5;
}

static void corrupt_a_link(sxe_map_t *map, struct sxe__map_slot *slot)
{
    (void)slot;
    sxe__map_record(map, 1)->prev = 1;
}

static void corrupt_old_created(sxe_map_t *map, struct sxe__map_slot *slot)
{
    (void)slot;
    sxe__map_record(map, 0)->old_created = 5;
}

static void corrupt_the_undone_mark(sxe_map_t *map, struct sxe__map_slot *slot)
{
    (void)map;
    *sxe__map_slot_undo(slot) |= SXE__MAP_UNDONE;
}

/*
 * The validator checks the log: its positions, each record's place, and each entry's chain of
 * records. The map: key 1 replaced twice while a reader holds version 1, so the log holds its
 * records 0 (version 2, keeping version 1's value) and 1 (version 3, keeping version 2's, prev 0).
 */
static void test_the_validator_checks_the_log(void **state)
{
    static const struct {
        void (*corrupt)(sxe_map_t *map, struct sxe__map_slot *slot);
        const char *reason;
    } cases[] = {
        {corrupt_the_tail, "log positions out of order"},
        {corrupt_a_position, "log record 1 (position 99, version 3"},
        {corrupt_the_order, "log record 1 (position 1, version 1"},
        {corrupt_a_record_slot, "is out of place"},
        {corrupt_the_undo_field, "does not follow version 3"},
        {corrupt_a_link, "does not follow version 2"},
        {corrupt_old_created, "versions 5 -> 2) does not follow version 2"},
        {corrupt_the_undone_mark, "versions 2 -> 3, undone) does not follow version 3"},
    };
    struct sxe_test_capture capture;
    struct sxe_map_reader reader;

    (void)state;
    sxe_log_set_module_level("MAP", SXE_LOG_LEVEL_ERROR); /* earlier tests quieten it */
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sxe_map_t *map = map_with(in_place_options(8), 2);
        read_begin(map, &reader);
        for (uint64_t number = 11; number <= 12; number++) {
            begin(map);
            assert_int_equal(put(map, 1, number), 1);
            commit(map);
        }
        cases[i].corrupt(map, sxe__map_slot(map, slot_of(map, 1)));
        sxe_test_capture_start(&capture);
        assert_int_equal(sxe__map_validate(map), -EUCLEAN);
        sxe_test_capture_stop();
        if (strstr(capture.text, cases[i].reason) == NULL) {
            fail_msg("case %zu: expected \"%s\" in: %s", i, cases[i].reason, capture.text);
        }
        sxe_map_read_end(&reader);
        sxe_map_destroy(map);
    }
}

static void find_in_place(void *arg)
{
    struct sxe_map_reader *reader = arg;

    (void)!sxe_map_find(reader, &(uint64_t){1}, 8, NULL);
}

/* sxe_map_next_copy() on a map that hands out pointers. */
static void next_copy_without_copies(void *arg)
{
    uint64_t cursor = 0, key;
    struct value value;

    (void)!sxe_map_next_copy(arg, &cursor, &key, &value, sizeof(value));
}

/* A map both in place and durable (a machine crash could lose a log page): refused. */
static void create_durable_in_place(void *arg)
{
    struct sxe_map_options options = in_place_options(4);
    sxe_map_t *made;

    (void)arg;
    options.flags |= SXE_MAP_DURABLE;
    (void)!sxe_map_create(&made, &options);
}

/* Invalid use: pointers into an in-place map, copies out of one that is not, and options an
 * in-place map cannot have. */
static void test_invalid_use_in_place(void **state)
{
    struct sxe_map_options options = in_place_options(4);
    sxe_map_t *map = map_with(options, 1), *other = NULL, *plain = map_with(fixed_options(4), 1);
    struct sxe_map_reader reader, plain_reader;
    char *path = temp_path("in-place");

    (void)state;
    read_begin(map, &reader);
    read_begin(plain, &plain_reader);
#ifdef SXE_DEBUG
    const char *const expected[] = {"assertion failed:", "hands_out_pointers(reader)", NULL};
    sxe_test_expect_abort(find_in_place, &reader, expected);
    const char *const expected_copy[] = {"assertion failed:", "!hands_out_pointers(reader)", NULL};
    sxe_test_expect_abort(next_copy_without_copies, &plain_reader, expected_copy);
    const char *const expected_shape[] = {"assertion failed:", "shape_of(options, &shape)", NULL};
    sxe_test_expect_abort(create_durable_in_place, NULL, expected_shape);
#else
    const void *key = &(uint64_t){1}, *value;
    const void *found[1];
    uint64_t cursor = 0;
    size_t size;
    (void)find_in_place;
    (void)next_copy_without_copies;
    (void)create_durable_in_place;
    assert_null(sxe_map_find(&reader, key, 8, NULL));
    assert_int_equal(sxe_map_find_many(&reader, 1, &key, NULL, found, NULL), 0);
    assert_int_equal(sxe_map_next(&reader, &cursor, &key, &size, &value, NULL), 0);
    assert_int_equal(sxe_map_get_many(NULL, 1, &key, NULL, found, 8, NULL), 0);
    uint64_t copied_key;
    struct value copied;
    assert_int_equal(sxe_map_next_copy(&reader, &cursor, &copied_key, NULL, 0), -EINVAL);
    assert_int_equal(sxe_map_next_copy(NULL, &cursor, &copied_key, &copied, 8), -EINVAL);
    assert_int_equal(sxe_map_next_copy(&plain_reader, &cursor, &copied_key, &copied, 8), -EINVAL);
    options.key_size = SXE_MAP_VARIABLE;
    options.arena_bytes = 1024;
    assert_int_equal(sxe_map_create(&other, &options), -EINVAL);
    options = in_place_options(4);
    options.flags |= SXE_MAP_DURABLE;
    assert_int_equal(sxe_map_create(&other, &options), -EINVAL);
#endif
    sxe_map_read_end(&reader);
    sxe_map_read_end(&plain_reader);
    sxe_map_destroy(plain);

    /* A file made in place opens in place, by its own shape, and not with other options. */
    options = in_place_options(4);
    assert_int_equal(sxe_map_attach(&other, path, &options, SXE_MAP_CREATE), 0);
    sxe_map_detach(other);
    options.flags = 0;
    sxe_log_set_module_level("MAP", SXE_LOG_LEVEL_FATAL);
    assert_int_equal(sxe_map_attach(&other, path, &options, 0), -EMSGSIZE);
    assert_int_equal(sxe_map_attach(&other, path, NULL, 0), 0);
    assert_true(other->in_place);
    sxe_map_detach(other);
    unlink(path);
    sxe_map_destroy(map);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_the_validator_checks_the_log, reset),
        cmocka_unit_test_teardown(test_invalid_use_in_place, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
