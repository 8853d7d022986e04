/*
 * Reading JSON: every type through the accessors, NULL along a chain, members in the text's order,
 * strings holding NULs; errors with their line, column and byte; the limits (size, depth, values)
 * at and one past each, placed at the byte past each (10,000 nested arrays); keys named twice,
 * in few members and many; numbers past a double and an int64_t, placed by their token; invalid
 * UTF-8; every parsing case of JSONTestSuite (tests/data/JSONTestSuite); invalid use.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/json.h"
#include "sxe_test.h"

static sxe_json_t *parse(const char *text)
{
    sxe_json_t *root;
    struct sxe_json_error error;

    int rc = sxe_json_parse(&root, text, strlen(text), NULL, &error);
    if (rc != 0) {
        fail_msg("%s: %d at line %u column %u: %s", text, rc, error.line, error.column, error.text);
    }
    return root;
}

/* Parses text expecting rc, and returns the error. */
static struct sxe_json_error refused(const char *text, size_t len,
                                     const struct sxe_json_limits *limits, int rc)
{
    sxe_json_t *root = (sxe_json_t *)&root;
    struct sxe_json_error error;

    assert_int_equal(sxe_json_parse(&root, text, len, limits, &error), rc);
    assert_null(root);
    return error;
}

static void test_every_type_through_the_accessors(void **state)
{
    sxe_json_t *root =
        parse(" {\"s\": \"h\\u00e9llo\", \"i\": -42, \"r\": 2.5e3, \"t\": true, "
              "\"f\": false, \"n\": null, \"a\": [1, [2], {}], \"o\": {\"k\": \"v\"}} ");
    int64_t integer;
    double number;
    size_t len;

    (void)state;
    assert_int_equal(sxe_json_type(root), SXE_JSON_OBJECT);
    assert_int_equal(sxe_json_size(root), 8);
    assert_string_equal(sxe_json_text(sxe_json_get(root, "s"), &len), "h\xc3\xa9llo");
    assert_int_equal(len, 6);
    assert_int_equal(sxe_json_size(sxe_json_get(root, "s")), 6);
    assert_int_equal(sxe_json_integer(sxe_json_get(root, "i"), &integer), 0);
    assert_int_equal(integer, -42);
    assert_int_equal(sxe_json_number(sxe_json_get(root, "i"), &number), 0);
    assert_true(number == -42.0);
    assert_int_equal(sxe_json_type(sxe_json_get(root, "r")), SXE_JSON_REAL);
    assert_int_equal(sxe_json_integer(sxe_json_get(root, "r"), &integer), -EINVAL);
    assert_int_equal(sxe_json_number(sxe_json_get(root, "r"), &number), 0);
    assert_true(number == 2500.0);
    assert_true(sxe_json_true(sxe_json_get(root, "t")));
    assert_false(sxe_json_true(sxe_json_get(root, "f")));
    assert_int_equal(sxe_json_type(sxe_json_get(root, "t")), SXE_JSON_TRUE);
    assert_int_equal(sxe_json_type(sxe_json_get(root, "f")), SXE_JSON_FALSE);
    assert_int_equal(sxe_json_type(sxe_json_get(root, "n")), SXE_JSON_NULL);
    sxe_json_t *array = sxe_json_get(root, "a");
    assert_int_equal(sxe_json_type(array), SXE_JSON_ARRAY);
    assert_int_equal(sxe_json_size(array), 3);
    assert_int_equal(sxe_json_integer(sxe_json_at(sxe_json_at(array, 1), 0), &integer), 0);
    assert_int_equal(integer, 2);
    assert_int_equal(sxe_json_size(sxe_json_at(array, 2)), 0);
    assert_null(sxe_json_at(array, 3));
    assert_string_equal(sxe_json_text(sxe_json_get(sxe_json_get(root, "o"), "k"), NULL), "v");

    /* NULL along a chain, and values of another type, answer as nothing */
    sxe_json_t *missing = sxe_json_get(sxe_json_get(root, "nope"), "k");
    assert_null(missing);
    assert_int_equal(sxe_json_type(missing), SXE_JSON_NONE);
    assert_null(sxe_json_get(array, "k"));
    assert_null(sxe_json_get(root, NULL));
    sxe_json_t *pair = parse("[\"k\", 1]"); /* an element after a string is no member */
    assert_null(sxe_json_get(pair, "k"));
    sxe_json_free(pair);
    assert_null(sxe_json_at(root, 0));
    assert_null(sxe_json_at(NULL, 0));
    assert_null(sxe_json_text(sxe_json_get(root, "i"), &len));
    assert_int_equal(sxe_json_size(sxe_json_get(root, "i")), 0);
    assert_int_equal(sxe_json_integer(NULL, &integer), -EINVAL);
    assert_int_equal(sxe_json_number(sxe_json_get(root, "s"), &number), -EINVAL);
    assert_false(sxe_json_true(NULL));
    sxe_json_free(root);
    sxe_json_free(NULL);
}

static void test_members_come_in_the_texts_order(void **state)
{
    sxe_json_t *root = parse("{\"z\": 1, \"a\": 2, \"m\": 3, \"b\": 4}");
    const char *key, *expected[] = {"z", "a", "m", "b"};
    sxe_json_t *value;
    size_t cursor = 0;
    int64_t integer;
    int seen = 0;

    (void)state;
    while (sxe_json_next(root, &cursor, &key, &value)) {
        assert_true(seen < 4);
        assert_string_equal(key, expected[seen]);
        assert_int_equal(sxe_json_integer(value, &integer), 0);
        assert_int_equal(integer, ++seen);
    }
    assert_int_equal(seen, 4);
    assert_false(sxe_json_next(root, &cursor, &key, &value)); /* stays at its end */
    cursor = 0;
    assert_false(sxe_json_next(sxe_json_get(root, "z"), &cursor, &key, &value)); /* no object */
    sxe_json_free(root);
    root = parse("{}");
    cursor = 0;
    assert_false(sxe_json_next(root, &cursor, &key, &value));
    sxe_json_free(root);

    /* an array's elements, containers among them, without keys (key may be NULL) */
    root = parse("[{\"a\": [1, 2]}, [[3]], \"s\", 4]");
    enum sxe_json_type types[] = {SXE_JSON_OBJECT, SXE_JSON_ARRAY, SXE_JSON_STRING,
                                  SXE_JSON_INTEGER};
    cursor = 0;
    for (seen = 0; sxe_json_next(root, &cursor, seen % 2 ? NULL : &key, &value); seen++) {
        assert_true(seen < 4);
        assert_int_equal(sxe_json_type(value), types[seen]);
        assert_ptr_equal(value, sxe_json_at(root, (size_t)seen));
        assert_true(seen % 2 || key == NULL);
    }
    assert_int_equal(seen, 4);
    assert_null(sxe_json_at(root, 4));
    assert_int_equal(
        sxe_json_integer(sxe_json_at(sxe_json_at(sxe_json_at(root, 1), 0), 0), &integer), 0);
    assert_int_equal(integer, 3);
    sxe_json_free(root);
}

static void test_strings_hold_nuls_and_any_scalar_is_a_document(void **state)
{
    size_t len;

    (void)state;
    sxe_json_t *root = parse("\"a\\u0000b\"");
    assert_memory_equal(sxe_json_text(root, &len), "a\0b", 4);
    assert_int_equal(len, 3);
    sxe_json_free(root);
    root = parse("  7  ");
    assert_int_equal(sxe_json_type(root), SXE_JSON_INTEGER);
    sxe_json_free(root);
    root = parse("null");
    assert_int_equal(sxe_json_type(root), SXE_JSON_NULL);
    sxe_json_free(root);
}

static void test_errors_say_where(void **state)
{
    const char *text = "{\"a\": 1,\n \"b\": }";
    struct sxe_json_error error = refused(text, strlen(text), NULL, -EINVAL);

    (void)state;
    assert_int_equal(error.line, 2);
    assert_int_equal(error.column, 7);
    assert_int_equal(error.position, 15); /* at the brace where a value should be */
    assert_non_null(strstr(error.text, "expected a JSON value"));

    error = refused("", 0, NULL, -EINVAL);
    assert_int_equal(error.line, 1); /* columns start at 1 */
    assert_int_equal(error.column, 1);
    error = refused("  \n ", 4, NULL, -EINVAL);
    assert_int_equal(error.position, 4); /* nothing: the error is at the end */
    assert_int_equal(error.line, 2);
    error = refused("[1] x", 5, NULL, -EINVAL);
    assert_non_null(strstr(error.text, "unexpected content after document"));
    assert_int_equal(error.position, 4);
    error = refused("[1,]", 4, NULL, -EINVAL);
    error = refused("\"\xff\"", 3, NULL, -EINVAL); /* not UTF-8 */
    assert_non_null(strstr(error.text, "invalid UTF-8"));
    error = refused("123\0", 4, NULL, -EINVAL); /* what follows a NUL is text too */
    assert_int_equal(error.position, 3);
    assert_string_equal(error.text, "a NUL byte (in a string, write \\u0000)");
    error = refused("\"a\0\"", 4, NULL, -EINVAL);
    assert_int_equal(error.position, 2);
    error = refused("\"\\ud800\"", 8, NULL, -EINVAL); /* a lone surrogate */
    error = refused("[NaN]", 5, NULL, -EINVAL);
    error = refused("[1e400]", 7, NULL, -EINVAL); /* past a double */
    assert_non_null(strstr(error.text, "overflow"));
    error = refused("[-9223372036854775809]", 22, NULL, -EINVAL); /* one past an int64_t */
    assert_non_null(strstr(error.text, "too big"));
    error = refused("[9223372036854775808]", 21, NULL, -EINVAL); /* one past, a uint64_t */
    assert_non_null(strstr(error.text, "too big"));
    error = refused("[99999999999999999999]", 22, NULL, -EINVAL); /* past a uint64_t too */
    assert_non_null(strstr(error.text, "too big"));
    /* found on the tree, and placed in the text by counting its tokens up to the value */
    text = "{\"k\": \"[1,\\\" {\", \"n\":\n\t[true, -0.5e1, null,\t1e999]}";
    error = refused(text, strlen(text), NULL, -EINVAL);
    assert_int_equal(error.position, 44);
    assert_int_equal(error.line, 2);
    assert_int_equal(error.column, 23);
    assert_non_null(strstr(error.text, "overflow"));
    sxe_json_t *root = parse("[\"d\\u00e9j\\u00e0\", 9223372036854775807, -9223372036854775808]");
    int64_t integer;
    assert_int_equal(sxe_json_integer(sxe_json_at(root, 2), &integer), 0);
    assert_true(integer == INT64_MIN);
    sxe_json_free(root);
    assert_int_equal(sxe_json_parse(&root, "[1]", 3, NULL, NULL), 0); /* no error wanted */
    sxe_json_free(root);
    assert_int_equal(sxe_json_parse(&root, "[", 1, NULL, NULL), -EINVAL);
}

static void test_keys_named_twice(void **state)
{
    const char *text = "{\"a\": 1, \"a\": 2}";
    struct sxe_json_limits allow = {.allow_duplicates = true};
    sxe_json_t *root;
    int64_t integer;

    (void)state;
    struct sxe_json_error error = refused(text, strlen(text), NULL, -EINVAL);
    assert_non_null(strstr(error.text, "duplicate object key"));
    assert_int_equal(error.position, 9); /* the second */
    assert_int_equal(sxe_json_parse(&root, text, strlen(text), &allow, NULL), 0);
    assert_int_equal(sxe_json_size(root), 2); /* both, as written */
    assert_int_equal(sxe_json_integer(sxe_json_get(root, "a"), &integer), 0);
    assert_int_equal(integer, 2); /* the last wins */
    sxe_json_free(root);

    /* the first key named again, in the text's order, in a few members and in many (sorted) */
    text = "{\"x\": [1, {\"q\": 2, \"r\": {\"q\": 0}}], \"b\": 1, \"c\": {\"q\": 1, \"q\": 2}, "
           "\"b\": 2}";
    error = refused(text, strlen(text), NULL, -EINVAL);
    assert_int_equal(error.position, 58); /* c's q, before the second b */
    char many[400];
    int n = snprintf(many, sizeof(many), "{");
    for (int i = 0; i < 20; i++) { /* k0 to k12, then k0 again at the 14th member */
        n += snprintf(many + n, sizeof(many) - (size_t)n, "\"k%d\": [%d], ", i % 13, i);
    }
    snprintf(many + n - 2, sizeof(many) - (size_t)n + 2, "}");
    error = refused(many, strlen(many), NULL, -EINVAL);
    assert_int_equal(error.position, (size_t)(strstr(many, "[13]") - many) - 6);
    assert_int_equal(sxe_json_parse(&root, many, strlen(many), &allow, NULL), 0);
    assert_int_equal(sxe_json_size(root), 20);
    assert_int_equal(sxe_json_integer(sxe_json_at(sxe_json_get(root, "k6"), 0), &integer), 0);
    assert_int_equal(integer, 19);
    sxe_json_free(root);
    many[strlen(many) - 1] = ' '; /* not JSON any more: yyjson's error, not a key named twice */
    error = refused(many, strlen(many), NULL, -EINVAL);
    assert_non_null(strstr(error.text, "end of data"));
}

/* n opening brackets, then n closing ones. */
static char *nested(size_t n)
{
    char *text = malloc(2 * n + 1);
    memset(text, '[', n);
    memset(text + n, ']', n);
    text[2 * n] = '\0';
    return text;
}

static void test_depth(void **state)
{
    struct sxe_json_limits three = {.depth = 3};
    sxe_json_t *root;

    (void)state;
    char *deep = nested(10000);
    struct sxe_json_error error = refused(deep, strlen(deep), NULL, -ELOOP);
    assert_int_equal(error.position, 64); /* the 65th bracket */
    assert_int_equal(error.line, 1);
    assert_int_equal(error.column, 65);
    assert_string_equal(error.text, "nested deeper than 64 arrays and objects");
    free(deep);
    deep = nested(64);
    assert_int_equal(sxe_json_parse(&root, deep, strlen(deep), NULL, NULL), 0);
    sxe_json_free(root);
    free(deep);
    /* the most: 2047 around a value */
    deep = malloc(2 * 2047 + 2);
    memset(deep, '[', 2047);
    deep[2047] = '1';
    memset(deep + 2048, ']', 2047);
    deep[2 * 2047 + 1] = '\0';
    struct sxe_json_limits most = {.depth = 2047};
    assert_int_equal(sxe_json_parse(&root, deep, strlen(deep), &most, NULL), 0);
    sxe_json_free(root);
    deep[0] = ' '; /* and one fewer, of course */
    assert_int_equal(sxe_json_parse(&root, deep, strlen(deep) - 1, &most, NULL), 0);
    sxe_json_free(root);
    free(deep);

    const char *text = "{\"a\": [{\"b\": 1}], \"c\": \"[[[[\"}"; /* brackets in strings: none */
    assert_int_equal(sxe_json_parse(&root, text, strlen(text), &three, NULL), 0);
    sxe_json_free(root);
    text = "{\"a\": [{\"b\": [1]}]}";
    error = refused(text, strlen(text), &three, -ELOOP);
    assert_int_equal(error.position, 13);
    text = "{\"a\":\n  [1,\n   {\"\u00e9\": [1]}]}"; /* lines, and characters of 2 bytes */
    error = refused(text, strlen(text), &three, -ELOOP);
    assert_int_equal(error.line, 3);
    assert_int_equal(error.column, 10);
    assert_int_equal(error.position, 22);
    text = "[[1], [2], [[3]]]"; /* closed brackets give their depth back */
    error = refused(text, strlen(text), &(struct sxe_json_limits){.depth = 2}, -ELOOP);
    assert_int_equal(error.position, 12);
    text = "[\"\\\"[[[[\", [[1]]]"; /* an escaped quote does not end the string */
    assert_int_equal(sxe_json_parse(&root, text, strlen(text), &three, NULL), 0);
    sxe_json_free(root);
}

static void test_values(void **state)
{
    struct sxe_json_limits four = {.values = 4};
    sxe_json_t *root;

    (void)state;
    const char *text = "[1, 2, 3]"; /* the array and three */
    assert_int_equal(sxe_json_parse(&root, text, strlen(text), &four, NULL), 0);
    sxe_json_free(root);
    text = "[1, 2, 3, 4]";
    struct sxe_json_error error = refused(text, strlen(text), &four, -E2BIG);
    assert_int_equal(error.position, 8); /* the comma before the fifth */
    assert_string_equal(error.text, "more than 4 values");
    text = "{\"a\": [], \"b\": {\"c\": 1}}"; /* object, [], {}, 1: keys are not values */
    assert_int_equal(sxe_json_parse(&root, text, strlen(text), &four, NULL), 0);
    sxe_json_free(root);
    text = "[[[[[]]]]]"; /* five arrays */
    error = refused(text, strlen(text), &four, -E2BIG);
    assert_int_equal(error.position, 4);
    text = "[1, 2, 3,]"; /* a trailing comma is yyjson's error, not one value too many */
    error = refused(text, strlen(text), &(struct sxe_json_limits){.values = 4}, -EINVAL);
    assert_int_equal(error.position, 8);
    assert_non_null(strstr(error.text, "trailing comma"));
    error = refused("{[", 2, &(struct sxe_json_limits){.depth = 1}, -EINVAL); /* no key */
    assert_int_equal(error.position, 1);
    text = "[\",,,,,,\"]"; /* commas in a string */
    assert_int_equal(sxe_json_parse(&root, text, strlen(text), &four, NULL), 0);
    sxe_json_free(root);
}

static void test_size(void **state)
{
    struct sxe_json_limits small = {.size = 8};
    sxe_json_t *root;

    (void)state;
    assert_int_equal(sxe_json_parse(&root, "[1,2,34]", 8, &small, NULL), 0);
    sxe_json_free(root);
    struct sxe_json_error error = refused("[1,2,345]", 9, &small, -EMSGSIZE);
    assert_int_equal(error.line, 0);
    assert_int_equal(error.position, 8);
    assert_string_equal(error.text, "9 bytes, more than 8");
    /* 100 MB is refused by its length: not a byte is read (this one is never mapped) */
    error = refused((const char *)&small, (size_t)100 << 20, NULL, -EMSGSIZE);
    assert_string_equal(error.text, "104857600 bytes, more than 1048576");
}

/* Reads a file of the suite. */
static char *slurp(const char *path, size_t *len)
{
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    fseek(file, 0, SEEK_END);
    *len = (size_t)ftell(file);
    rewind(file);
    char *text = malloc(*len + 1);
    assert_int_equal(fread(text, 1, *len, file), *len);
    fclose(file);
    return text;
}

/*
 * y_ must parse, n_ must not, i_ either (without a crash, under ASan in the asan preset). Two y_
 * cases are refused by choice, and listed: a key named twice (refused unless allow_duplicates;
 * then taken).
 */
static void test_every_case_of_json_test_suite(void **state)
{
    static const char *const refused_y[] = {"y_object_duplicated_key.json",
                                            "y_object_duplicated_key_and_value.json"};
    struct sxe_json_limits suite = {.depth = 2047, .size = 1 << 20};
    unsigned counts[3] = {0}, accepted_i = 0;
    char path[512];
    struct dirent *entry;

    (void)state;
    DIR *dir = opendir(SXE_JSON_TEST_SUITE);
    assert_non_null(dir);
    while ((entry = readdir(dir)) != NULL) {
        const char *name = entry->d_name;
        if (name[0] == '.' || strstr(name, ".json") == NULL) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", SXE_JSON_TEST_SUITE, name);
        size_t len;
        char *text = slurp(path, &len);
        sxe_json_t *root = NULL;
        struct sxe_json_error error;
        int rc = sxe_json_parse(&root, text, len, &suite, &error);
        if (rc < 0 && (error.column == 0 || error.line == 0 || error.position > len)) {
            fail_msg("%s: refused at line %u column %u position %zu", name, error.line,
                     error.column, error.position);
        }
        bool listed = false;
        for (size_t i = 0; i < sizeof(refused_y) / sizeof(refused_y[0]); i++) {
            listed |= strcmp(name, refused_y[i]) == 0;
        }
        if (name[0] == 'y' && !listed && rc != 0) {
            fail_msg("%s: refused (%d)", name, rc);
        }
        if (name[0] == 'y' && listed && rc == 0) {
            fail_msg("%s: listed as refused, but taken", name);
        }
        if (name[0] == 'n' && rc == 0) {
            fail_msg("%s: taken", name);
        }
        accepted_i += name[0] == 'i' && rc == 0;
        counts[name[0] == 'y' ? 0 : name[0] == 'n' ? 1 : 2]++;
        sxe_json_free(root);
        free(text);
    }
    closedir(dir);
    print_message("JSONTestSuite: %u y_, %u n_, %u i_ (%u of those taken)\n", counts[0], counts[1],
                  counts[2], accepted_i);
    assert_int_equal(counts[0], 95);
    assert_int_equal(counts[1], 188);
    assert_int_equal(counts[2], 35);

    sxe_json_t *root;
    const char *twice = "{\"a\":\"b\",\"a\":\"c\"}";
    assert_int_equal(sxe_json_parse(&root, twice, strlen(twice),
                                    &(struct sxe_json_limits){.allow_duplicates = true}, NULL),
                     0);
    sxe_json_free(root);
}

static void parse_into_nothing(void)
{
    assert_int_equal(sxe_json_parse(NULL, "1", 1, NULL, NULL), -EINVAL);
}

static void parse_too_deep_a_limit(void)
{
    sxe_json_t *root;
    struct sxe_json_error error;
    assert_int_equal(
        sxe_json_parse(&root, "1", 1, &(struct sxe_json_limits){.depth = 2049}, &error), -EINVAL);
    assert_string_equal(error.text, "invalid arguments"); /* (release builds: no assertion) */
}

static void parse_no_text(void)
{
    sxe_json_t *root;
    assert_int_equal(sxe_json_parse(&root, NULL, 1, NULL, NULL), -EINVAL);
}

static sxe_json_t *one(void)
{
    sxe_json_t *root;
    assert_int_equal(sxe_json_parse(&root, "{\"a\": 1}", 8, NULL, NULL), 0);
    return root;
}

static void integer_into_nothing(void)
{
    sxe_json_t *root = one();
    assert_int_equal(sxe_json_integer(sxe_json_get(root, "a"), NULL), -EINVAL);
    sxe_json_free(root);
}

static void number_into_nothing(void)
{
    sxe_json_t *root = one();
    assert_int_equal(sxe_json_number(sxe_json_get(root, "a"), NULL), -EINVAL);
    sxe_json_free(root);
}

static void walk_without_a_cursor(void)
{
    sxe_json_t *root = one(), *value;
    const char *key;
    assert_false(sxe_json_next(root, NULL, &key, &value));
    sxe_json_free(root);
}

static void test_invalid_use(void **state)
{
    static const struct sxe_test_invalid_use uses[] = {
        {"no root", parse_into_nothing, "root != NULL"},
        {"a depth past the most", parse_too_deep_a_limit, "DEPTH_MAX"},
        {"an integer into nothing", integer_into_nothing, "integer != NULL"},
        {"a number into nothing", number_into_nothing, "number != NULL"},
        {"a walk without a cursor", walk_without_a_cursor, "cursor != NULL"},
        {"no text, a length", parse_no_text, "text != NULL"},
    };

    (void)state;
    sxe_test_invalid_uses(uses, sizeof(uses) / sizeof(uses[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type_through_the_accessors),
        cmocka_unit_test(test_members_come_in_the_texts_order),
        cmocka_unit_test(test_strings_hold_nuls_and_any_scalar_is_a_document),
        cmocka_unit_test(test_errors_say_where),
        cmocka_unit_test(test_keys_named_twice),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_size),
        cmocka_unit_test(test_every_case_of_json_test_suite),
        cmocka_unit_test(test_invalid_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
