/*
 * Attaching to a map file (sxe_map_attach) when the file is not the map the caller means: each
 * option that differs from the file's, a header of another size, and a header whose recorded shape
 * is damaged one field at a time. Each is refused with its own error and a log line, and the file
 * still attaches afterwards with the right options. Also two mappings of one file, a map without a
 * name, and the fewest old versions a small map keeps. The seam's failures and a file cut short are
 * tested in test_map.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "map_test.h"

/* A field of the file's header to overwrite: where it is, its width and the value to put. */
struct field {
    const char *what;
    size_t offset;
    size_t size;
    uint64_t value;
};

/* The header field name, to be set to value. */
#define WIDTH(name)        sizeof(((struct sxe__map_header *)0)->name)
#define AT(name)           offsetof(struct sxe__map_header, name)
#define FIELD(name, value) ((struct field){#name, AT(name), WIDTH(name), (value)})

/* Reads or writes one header field of the file (4 or 8 bytes wide). */
static uint64_t field_get(int fd, const struct field *field)
{
    uint64_t wide = 0;
    uint32_t narrow = 0;

    assert_int_equal(pread(fd, field->size == 4 ? (void *)&narrow : (void *)&wide, field->size,
                           (off_t)field->offset),
                     (ssize_t)field->size);
    return field->size == 4 ? narrow : wide;
}

static void field_put(int fd, const struct field *field, uint64_t value)
{
    uint32_t narrow = (uint32_t)value;

    assert_int_equal(pwrite(fd, field->size == 4 ? (void *)&narrow : (void *)&value, field->size,
                            (off_t)field->offset),
                     (ssize_t)field->size);
}

/* Makes the map file at path with options, and leaves it detached. */
static void make_file(const char *path, struct sxe_map_options options)
{
    sxe_map_t *map = NULL;

    assert_int_equal(sxe_map_attach(&map, path, &options, SXE_MAP_CREATE), 0);
    sxe_map_detach(map);
}

/*
 * Options that describe another map than the file's are refused with -EMSGSIZE, one difference at
 * a time: each is the only field of the shape that tells them apart. Options left to their
 * defaults match a file made with the same defaults spelled out.
 */
static void test_each_option_that_differs_is_refused(void **state)
{
    struct sxe_map_options options = fixed_options(8);
    struct sxe_map_options differs[8];
    struct sxe_test_capture capture;
    char *path = temp_path("options");
    sxe_map_t *map = NULL;

    (void)state;
    for (unsigned i = 0; i < sizeof(differs) / sizeof(differs[0]); i++) {
        differs[i] = options;
    }
    differs[0].capacity = 9;
    differs[1].old_versions = 3;  /* the file has the default, 8 / 4 */
    differs[2].load_percent = 60; /* more slots for the same entries */
    differs[3].value_size = 40;   /* a slot of two cache lines */
    differs[4].key_size = 9;      /* the same slot size */
    differs[5].value_size = 23;   /* the same slot size */
    differs[6].readers_max = 10;  /* the file has the default, 256 */
    differs[7].seed = 42;         /* the same sizes, hashed differently */
    make_file(path, options);
    for (unsigned i = 0; i < sizeof(differs) / sizeof(differs[0]); i++) {
        sxe_test_capture_start(&capture);
        int rc = sxe_map_attach(&map, path, &differs[i], 0);
        sxe_test_capture_stop();
        if (rc != -EMSGSIZE) {
            fail_msg("options %u: attach returned %d, not -EMSGSIZE", i, rc);
        }
        assert_non_null(strstr(capture.text, "holds 8 entries of 8 + 24 bytes (2 old versions, "
                                             "arena 0, 256 readers); the options differ"));
    }
    options.old_versions = 2;
    options.load_percent = 80;
    options.readers_max = 256;
    assert_int_equal(sxe_map_attach(&map, path, &options, 0), 0);
    sxe_map_detach(map);
    unlink(path);

    /* Variable sizes: the arena's size tells two maps apart. */
    options = variable_options(8, 8192);
    make_file(path, options);
    options.arena_bytes = 16384;
    assert_int_equal(sxe_map_attach(&map, path, &options, 0), -EMSGSIZE);
    options.arena_bytes = 8192 + SXE__MAP_GRANULE - 1; /* whole granules: the same arena */
    assert_int_equal(sxe_map_attach(&map, path, &options, 0), 0);
    sxe_map_detach(map);
    unlink(path);
    /* A granule more or less, where every offset is the same (the bitmap's words, and the log
     * after the arena at the same 64-byte line): another arena still, either way. */
    options = variable_options(8, 8192 + 2 * SXE__MAP_GRANULE);
    make_file(path, options);
    for (int granules = 1; granules <= 3; granules += 2) {
        options.arena_bytes = 8192 + (uint64_t)granules * SXE__MAP_GRANULE;
        assert_int_equal(sxe_map_attach(&map, path, &options, 0), -EMSGSIZE);
    }
    unlink(path);
}

/* A header of another size is another format, even at this version. */
static void test_a_header_of_another_size_is_refused(void **state)
{
    struct field header_size = FIELD(header_size, 0);
    struct sxe_test_capture capture;
    char *path = temp_path("header");
    sxe_map_t *map = NULL;

    (void)state;
    make_file(path, fixed_options(8));
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint64_t size = field_get(fd, &header_size);
    field_put(fd, &header_size, size + 8);
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_map_attach(&map, path, NULL, 0), -EPROTO);
    sxe_test_capture_stop();
    char expected[160];
    snprintf(expected, sizeof(expected), "has format version 3 (header %llu bytes)",
             (unsigned long long)size + 8);
    assert_non_null(strstr(capture.text, expected));
    field_put(fd, &header_size, size);
    close(fd);
    assert_int_equal(sxe_map_attach(&map, path, NULL, 0), 0);
    sxe_map_detach(map);
    unlink(path);
}

/* Damages each field of path's header in turn, checks attach refuses it, and puts it back. */
static void refuse_each(const char *path, const struct field *damages, size_t count)
{
    struct sxe_test_capture capture;
    sxe_map_t *map = NULL;
    int fd = open(path, O_RDWR);

    assert_true(fd >= 0);
    for (size_t i = 0; i < count; i++) {
        uint64_t original = field_get(fd, &damages[i]);
        field_put(fd, &damages[i], damages[i].value);
        sxe_test_capture_start(&capture);
        int rc = sxe_map_attach(&map, path, NULL, 0);
        sxe_test_capture_stop();
        if (rc != -EPROTO ||
            strstr(capture.text, "is damaged: its shape does not add up") == NULL) {
            fail_msg("%s %llu: attach returned %d, logged \"%s\"", damages[i].what,
                     (unsigned long long)damages[i].value, rc, capture.text);
        }
        field_put(fd, &damages[i], original);
    }
    close(fd);
    assert_int_equal(sxe_map_attach(&map, path, NULL, 0), 0);
    sxe_map_detach(map);
}

/*
 * A header whose recorded shape is impossible, or whose sizes and offsets do not follow from it,
 * is damaged: attach refuses it before it computes an address from it. Each field is the only
 * damage in its turn.
 */
static void test_each_damaged_field_is_refused(void **state)
{
    struct sxe_map_options options = fixed_options(8);
    const struct field fixed[] = {
        FIELD(key_size, 0),
        FIELD(load_percent, 49),
        FIELD(load_percent, 96),
        FIELD(readers_max, SXE_MAP_READERS_MAX + 1),
        FIELD(readers_max, 10), /* a possible shape, but not where the parts are */
        FIELD(capacity, UINT32_MAX),
        FIELD(old_versions, UINT32_MAX - 2), /* with the 8 entries, past 32-bit indices */
        FIELD(slot_count, 11),
        FIELD(slot_size, 128),
        FIELD(slots_offset, 64),
        FIELD(arena_offset, 64),
        FIELD(region_size, 1 << 20),
    };
    const struct field variable[] = {
        FIELD(arena_bytes, 0), FIELD(arena_bytes, 1ULL << 62),
        FIELD(arena_bytes, 16384), /* a possible arena, but not the file's */
    };
    char *path = temp_path("damaged");

    (void)state;
    make_file(path, options);
    refuse_each(path, fixed, sizeof(fixed) / sizeof(fixed[0]));
    unlink(path);
    make_file(path, variable_options(8, 8192));
    refuse_each(path, variable, sizeof(variable) / sizeof(variable[0]));
    unlink(path);
}

/*
 * A map without a name is named "", and a map of fewer than four entries keeps one old version
 * (a quarter of its capacity would be none).
 */
static void test_no_name_and_the_fewest_old_versions(void **state)
{
    struct sxe_map_options options = fixed_options(3);
    struct sxe_map_stats stats;

    (void)state;
    options.name = NULL;
    sxe_map_t *map = make_map(options);
    assert_string_equal(map->header->name, "");
    sxe_map_stats(map, &stats);
    assert_int_equal(stats.capacity, 3);
    assert_int_equal(stats.old_versions, 1);
    assert_int_equal(sxe_map_write_begin(map), 0);
    for (uint64_t key = 1; key <= 3; key++) {
        assert_int_equal(put(map, key, key), 0);
    }
    commit(map);
    assert_int_equal(read_now(map, 3), 3);
    sxe_map_destroy(map);
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

/* The file of a map with twice the arena is larger by the arena's bytes and the bitmap of its
 * 16-byte granules (a bit each), give or take alignment: nothing else grows with it. */
static void test_the_arena_costs_its_bytes_and_a_bit_a_granule(void **state)
{
    char *path = temp_path("arena");
    off_t sizes[2];
    struct stat st;

    (void)state;
    for (int i = 0; i < 2; i++) {
        make_file(path, variable_options(8, (uint64_t)(i + 1) << 20));
        assert_int_equal(stat(path, &st), 0);
        sizes[i] = st.st_size;
        unlink(path);
    }
    uint64_t grown = (uint64_t)(sizes[1] - sizes[0]), bitmap = (1u << 20) / 16 / 8;
    assert_true(grown >= (1u << 20) + bitmap && grown <= (1u << 20) + bitmap + 4096);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_attach_twice, reset),
        cmocka_unit_test_teardown(test_each_option_that_differs_is_refused, reset),
        cmocka_unit_test_teardown(test_a_header_of_another_size_is_refused, reset),
        cmocka_unit_test_teardown(test_each_damaged_field_is_refused, reset),
        cmocka_unit_test_teardown(test_no_name_and_the_fewest_old_versions, reset),
        cmocka_unit_test_teardown(test_the_arena_costs_its_bytes_and_a_bit_a_granule, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
