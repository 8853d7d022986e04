/*
 * Reading JSON (sxe/json.h) with jansson, inside limits checked first.
 *
 * jansson parses recursively, up to its own depth of 2048, and allocates each value on the heap,
 * so a hostile document could take a deep stack (a fiber's is 64 KB) or much memory before any
 * check of ours. A scan of the text runs before it: it counts the depth of brackets and the values
 * outside strings, and stops at the first byte past a limit, which is where the error says the
 * document went wrong. The scan trusts nothing: on text that is not JSON its counts mean little,
 * but they still bound what jansson is given, and jansson then names the real error.
 *
 * A raw NUL byte is refused here too: JSON has none outside strings, and none unescaped inside
 * one, but jansson would take the text before it as the whole document ("123\0" as 123).
 *
 * A value is counted where it begins: the document itself, each element and member after a comma,
 * and the first of each container that is not empty. Keys are not values.
 *
 * sxe_json_t is jansson's json_t, cast: the tree is jansson's, read through the accessors.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "sxe/json.h"
#include "sxe/log.h"

#define DEFAULT_SIZE   (1u << 20)
#define DEFAULT_DEPTH  64
#define DEFAULT_VALUES 100000

/* jansson counts the value inside the deepest container as a level too: ours stop one short. */
#define DEPTH_MAX (JSON_PARSER_MAX_DEPTH - 1)
_Static_assert(DEPTH_MAX >= 64, "jansson takes at least our default depth");

static const json_t *tree(const sxe_json_t *value)
{
    return (const json_t *)(const void *)value;
}

static sxe_json_t *ours(json_t *value)
{
    return (sxe_json_t *)(void *)value;
}

/* Says what is wrong at byte at of text (its line and column counted up to it). */
static int refuse(struct sxe_json_error *error, const char *text, size_t at, int rc,
                  const char *what)
{
    if (error == NULL) {
        return rc;
    }
    *error = (struct sxe_json_error){.line = 1, .column = 1, .position = at};
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '\n') {
            error->line++;
            error->column = 1;
        } else if (((unsigned char)text[i] & 0xC0) != 0x80) { /* not a continuation byte */
            error->column++;
        }
    }
    snprintf(error->text, sizeof(error->text), "%s", what);
    return rc;
}

/* The limits' scan: 0, or the error at the first byte past one. */
static int scan(const char *text, size_t len, const struct sxe_json_limits *limits,
                struct sxe_json_error *error)
{
    uint32_t depth = 0, values = 1;
    bool in_string = false, opened = false;

    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == '\0') { /* never JSON, raw; jansson's reader would end the text there */
            return refuse(error, text, i, -EINVAL, "a NUL byte (in a string, write \\u0000)");
        }
        if (in_string) {
            if (c == '\\') {
                i++; /* the escaped byte, whatever it is, ends nothing */
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            continue;
        }
        if (opened && c != ']' && c != '}') { /* the first value of a container */
            values++;
        }
        opened = false;
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > limits->depth) {
                char what[96];
                snprintf(what, sizeof(what), "nested deeper than %u arrays and objects",
                         limits->depth);
                return refuse(error, text, i, -ELOOP, what);
            }
            opened = true;
        } else if (c == ']' || c == '}') {
            depth -= depth > 0;
        } else if (c == ',') {
            values++;
        } else {
            continue;
        }
        if (values > limits->values) {
            char what[96];
            snprintf(what, sizeof(what), "more than %u values", limits->values);
            return refuse(error, text, i, -E2BIG, what);
        }
    }
    return 0;
}

int sxe_json_parse(sxe_json_t **root, const char *text, size_t len,
                   const struct sxe_json_limits *limits, struct sxe_json_error *error)
{
    struct sxe_json_limits l = limits != NULL ? *limits : (struct sxe_json_limits){0};
    json_error_t failed;
    int rc;

    l.size = l.size != 0 ? l.size : DEFAULT_SIZE;
    l.depth = l.depth != 0 ? l.depth : DEFAULT_DEPTH;
    l.values = l.values != 0 ? l.values : DEFAULT_VALUES;
    if (!SXE_CHECK(root != NULL && (text != NULL || len == 0) && l.depth <= DEPTH_MAX)) {
        return -EINVAL;
    }
    *root = NULL;
    if (len > l.size) {
        if (error != NULL) { /* not at a place: line and column 0 */
            *error = (struct sxe_json_error){.position = l.size};
            snprintf(error->text, sizeof(error->text), "%zu bytes, more than %zu", len, l.size);
        }
        return -EMSGSIZE;
    }
    if ((rc = scan(text, len, &l, error)) < 0) {
        return rc;
    }
    size_t flags =
        JSON_DECODE_ANY | JSON_ALLOW_NUL | (l.allow_duplicates ? 0 : JSON_REJECT_DUPLICATES);
    json_t *parsed = json_loadb(len > 0 ? text : "", len, flags, &failed);
    if (parsed == NULL) {
        rc = json_error_code(&failed) == json_error_out_of_memory ? -ENOMEM : -EINVAL;
        if (error != NULL) {
            *error =
                (struct sxe_json_error){.line = failed.line > 0 ? (unsigned)failed.line : 1,
                                        .column = failed.column > 0 ? (unsigned)failed.column : 1,
                                        .position = (size_t)failed.position};
            snprintf(error->text, sizeof(error->text), "%s", failed.text);
        }
        return rc;
    }
    *root = ours(parsed);
    return 0;
}

void sxe_json_free(sxe_json_t *root)
{
    json_decref((json_t *)(void *)root);
}

enum sxe_json_type sxe_json_type(const sxe_json_t *value)
{
    if (value == NULL) {
        return SXE_JSON_NONE;
    }
    switch (json_typeof(tree(value))) {
    case JSON_OBJECT:
        return SXE_JSON_OBJECT;
    case JSON_ARRAY:
        return SXE_JSON_ARRAY;
    case JSON_STRING:
        return SXE_JSON_STRING;
    case JSON_INTEGER:
        return SXE_JSON_INTEGER;
    case JSON_REAL:
        return SXE_JSON_REAL;
    case JSON_TRUE:
        return SXE_JSON_TRUE;
    case JSON_FALSE:
        return SXE_JSON_FALSE;
    default:
        return SXE_JSON_NULL;
    }
}

sxe_json_t *sxe_json_get(const sxe_json_t *object, const char *key)
{
    return object != NULL && key != NULL ? ours(json_object_get(tree(object), key)) : NULL;
}

sxe_json_t *sxe_json_at(const sxe_json_t *array, size_t index)
{
    return array != NULL ? ours(json_array_get(tree(array), index)) : NULL;
}

size_t sxe_json_size(const sxe_json_t *value)
{
    switch (sxe_json_type(value)) {
    case SXE_JSON_OBJECT:
        return json_object_size(tree(value));
    case SXE_JSON_ARRAY:
        return json_array_size(tree(value));
    case SXE_JSON_STRING:
        return json_string_length(tree(value));
    default:
        return 0;
    }
}

const char *sxe_json_text(const sxe_json_t *value, size_t *len)
{
    if (sxe_json_type(value) != SXE_JSON_STRING) {
        return NULL;
    }
    if (len != NULL) {
        *len = json_string_length(tree(value));
    }
    return json_string_value(tree(value));
}

int sxe_json_integer(const sxe_json_t *value, int64_t *integer)
{
    if (!SXE_CHECK(integer != NULL) || sxe_json_type(value) != SXE_JSON_INTEGER) {
        return -EINVAL;
    }
    *integer = (int64_t)json_integer_value(tree(value));
    return 0;
}

int sxe_json_number(const sxe_json_t *value, double *number)
{
    enum sxe_json_type type = sxe_json_type(value);

    if (!SXE_CHECK(number != NULL) || (type != SXE_JSON_INTEGER && type != SXE_JSON_REAL)) {
        return -EINVAL;
    }
    *number = json_number_value(tree(value));
    return 0;
}

bool sxe_json_true(const sxe_json_t *value)
{
    return sxe_json_type(value) == SXE_JSON_TRUE;
}

bool sxe_json_next(const sxe_json_t *object, size_t *cursor, const char **key, sxe_json_t **value)
{
    if (!SXE_CHECK(cursor != NULL && key != NULL && value != NULL) ||
        sxe_json_type(object) != SXE_JSON_OBJECT || *cursor == SIZE_MAX) {
        return false;
    }
    json_t *members = (json_t *)(uintptr_t)tree(object); /* jansson's iterators take no const */
    void *at = *cursor == 0 ? json_object_iter(members)
                            : json_object_iter_next(members, (void *)(uintptr_t)*cursor);
    if (at == NULL) {
        *cursor = SIZE_MAX;
        return false;
    }
    *cursor = (size_t)(uintptr_t)at;
    *key = json_object_iter_key(at);
    *value = ours(json_object_iter_value(at));
    return true;
}
