/*
 * Reading JSON (sxe/json.h) with yyjson, and the rules yyjson does not keep checked on its tree.
 *
 * yyjson (third_party/yyjson, MIT) is compiled into this file, its functions static, so the
 * library exports none of its names and a program may link its own yyjson beside ours. It parses
 * without recursion into one block of 16-byte values laid out in the text's order (a container,
 * then what it holds; a key, then its value), with strings in a second block, so a document's
 * depth cannot take the stack and its memory is bounded by its size before a byte is read.
 *
 * Passes over that block (each value is the one after the last, in the text's order) then check
 * what yyjson does not: the depth, the count of values, keys named twice, and integers past
 * int64_t (yyjson takes up to uint64_t, and gives numbers past both as raw text). A tight one,
 * may_break(), says whether any rule may be broken; only then does walk() find the first value in
 * the text that breaks one, which is the error. Its place is found only then: for a limit by the
 * scan below, which finds the byte past it; for any other, by counting the text's tokens up to
 * the value's index in the block.
 *
 * The scan also runs, up to the error, when yyjson refuses a text, so a limit broken before it is
 * the first thing wrong; and a raw NUL byte where yyjson stopped is named as one.
 *
 * sxe_json_t is yyjson's yyjson_val, cast. A tree's root is the document's first value, right
 * after the document's header in the same block (checked when parsed), which is how
 * sxe_json_free() finds the document from the root.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/json.h"
#include "sxe/log.h"

/* yyjson, whole, its functions static; its warnings are upstream's, not ours */
#define yyjson_api                  static
#define YYJSON_DISABLE_WRITER       1
#define YYJSON_DISABLE_INCR_READER  1
#define YYJSON_DISABLE_FILE         1
#define YYJSON_DISABLE_UTILS        1
#define YYJSON_DISABLE_NON_STANDARD 1
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wmissing-declarations"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wundef"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include "../../third_party/yyjson/yyjson.c"
#pragma GCC diagnostic pop

#define DEFAULT_SIZE   (1u << 20)
#define DEFAULT_DEPTH  64
#define DEFAULT_VALUES 100000
#define DEPTH_MAX      2047

/* The document's header, in values: the root follows it. */
#define HEADER ((sizeof(yyjson_doc) + sizeof(yyjson_val) - 1) / sizeof(yyjson_val))

/* JSON has none, raw: the error for one */
static const char NUL_BYTE[] = "a NUL byte (in a string, write \\u0000)";

/* Objects of up to this many members are checked for keys named twice pair by pair. */
#define FEW_MEMBERS 8

static const yyjson_val *tree(const sxe_json_t *value)
{
    return (const yyjson_val *)(const void *)value;
}

static sxe_json_t *ours(const yyjson_val *value)
{
    return (sxe_json_t *)(uintptr_t)value;
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

/*
 * The limits' scan: 0, or the error at the first byte past one. A value is
 * counted where it begins: the document, each element and member after a comma, and the first of
 * each container that is not empty; keys are not values. On text that is not JSON its counts mean
 * little; it runs on text yyjson took, or up to where yyjson found it wrong.
 */
static int scan(const char *text, size_t len, const struct sxe_json_limits *limits,
                struct sxe_json_error *error)
{
    uint32_t depth = 0, values = 1;
    bool in_string = false, opened = false;

    for (size_t i = 0; i < len; i++) {
        char c = text[i];
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

/*
 * The byte where text's nth token begins, from 0: each string (a key too), number and literal,
 * and each opening bracket; the index of a value in yyjson's block. For text yyjson took.
 */
static size_t place(const char *text, size_t len, size_t nth)
{
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (memchr(" \t\n\r,:]}", c, 8) != NULL) {
            continue;
        }
        if (nth-- == 0) {
            return i;
        }
        if (c == '"') {
            for (i++; text[i] != '"'; i++) {
                i += text[i] == '\\';
            }
        } else if (c != '[' && c != '{') {
            while (i + 1 < len && memchr(" \t\n\r,:]}", text[i + 1], 8) == NULL) {
                i++;
            }
        }
    }
    return len; /* GCOVR_EXCL_LINE: a value's index is a token of the text yyjson took */
}

/* Orders keys by length, then bytes, then place in the text. */
static int by_key(const void *a, const void *b)
{
    const yyjson_val *x = *(const yyjson_val *const *)a, *y = *(const yyjson_val *const *)b;
    size_t xlen = unsafe_yyjson_get_len(x), ylen = unsafe_yyjson_get_len(y);

    if (xlen != ylen) {
        return xlen < ylen ? -1 : 1;
    }
    int order = memcmp(unsafe_yyjson_get_str(x), unsafe_yyjson_get_str(y), xlen);
    return order != 0 ? order : x < y ? -1 : 1;
}

static bool same_key(const yyjson_val *x, const yyjson_val *y)
{
    const char *a = unsafe_yyjson_get_str(x), *b = unsafe_yyjson_get_str(y);
    size_t len = unsafe_yyjson_get_len(x);

    /* the first bytes first (a string has its NUL): most keys differ there, without a call */
    return len == unsafe_yyjson_get_len(y) && a[0] == b[0] && memcmp(a, b, len) == 0;
}

/*
 * The first key of object, in the text's order, that an earlier key of it names too (NULL if
 * none): pair by pair for a few members, else sorted (no input makes that slower than n log n).
 */
static int named_twice(const yyjson_val *object, const yyjson_val **twice)
{
    size_t n = unsafe_yyjson_get_len(object);
    const yyjson_val *few[FEW_MEMBERS], **keys = n <= FEW_MEMBERS ? few : malloc(n * sizeof(*keys));
    const yyjson_val *key = object + 1;

    *twice = NULL;
    if (keys == NULL) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: out of memory */
    }
    for (size_t i = 0; i < n; i++, key = unsafe_yyjson_get_next(key + 1)) {
        keys[i] = key;
        for (size_t j = 0; n <= FEW_MEMBERS && j < i && *twice == NULL; j++) {
            *twice = same_key(keys[j], key) ? key : NULL;
        }
    }
    if (n > FEW_MEMBERS) {
        qsort(keys, n, sizeof(*keys), by_key);
        for (size_t i = 1; i < n; i++) { /* the second of a run is its first key named again */
            if (same_key(keys[i - 1], keys[i]) && (i < 2 || !same_key(keys[i - 2], keys[i])) &&
                (*twice == NULL || keys[i] < *twice)) {
                *twice = keys[i];
            }
        }
        free(keys);
    }
    return 0;
}

/* The error of a number that no type of ours holds: NULL if value is not one. */
static const char *too_big(const yyjson_val *value)
{
    if (unsafe_yyjson_is_raw(value)) { /* yyjson's big numbers: past uint64_t, or a double */
        return strpbrk(unsafe_yyjson_get_raw(value), ".eE") != NULL
                   ? "a number that would overflow a double"
                   : "an integer too big for int64_t";
    }
    return unsafe_yyjson_get_type(value) == YYJSON_TYPE_NUM &&
                   unsafe_yyjson_get_subtype(value) == YYJSON_SUBTYPE_UINT &&
                   unsafe_yyjson_get_uint(value) > INT64_MAX
               ? "an integer too big for int64_t"
               : NULL;
}

/*
 * Whether the tree may break a rule: false if it surely keeps them all. One tight pass over the
 * block that needs no telling keys from values (keys are strings, and the values are the block's
 * length less the objects' members); walk() then finds the value that breaks one. A tree deeper
 * than the default depth goes to walk() too, which takes whatever depth the limits allow.
 */
static bool may_break(const yyjson_val *root, const struct sxe_json_limits *limits)
{
    const yyjson_val *ends[DEFAULT_DEPTH];
    const yyjson_val *end = unsafe_yyjson_get_next(root), *closes = end;
    const yyjson_val *twice;
    uint32_t top = 0;
    size_t keys = 0;

    for (const yyjson_val *value = root; value < end; value++) {
        while (value >= closes) { /* past the innermost open container */
            closes = ends[--top];
        }
        uint8_t tag = (uint8_t)value->tag;
        if (unsafe_yyjson_is_ctn(value)) {
            if (top == limits->depth || top == DEFAULT_DEPTH) {
                return true;
            }
            ends[top++] = closes;
            closes = unsafe_yyjson_get_next(value);
            if (tag == YYJSON_TYPE_OBJ) {
                keys += unsafe_yyjson_get_len(value);
                if (!limits->allow_duplicates &&
                    (named_twice(value, &twice) < 0 || twice != NULL)) {
                    return true;
                }
            }
        } else if (tag == YYJSON_TYPE_RAW ||
                   (tag == (YYJSON_TYPE_NUM | YYJSON_SUBTYPE_UINT) && value->uni.u64 > INT64_MAX)) {
            return true;
        }
    }
    return (size_t)(end - root) - keys > limits->values;
}

struct level {
    const yyjson_val *end;   /* past the container's last value */
    const yyjson_val *twice; /* its first key named again, if an object's */
    bool object, key_next;
};

/*
 * The rules on the tree, value by value in the text's order: 0, or the error of the first value
 * that breaks one.
 */
static int walk(const yyjson_val *root, const char *text, size_t len,
                const struct sxe_json_limits *limits, struct sxe_json_error *error)
{
    struct level few[DEFAULT_DEPTH + 1];
    struct level *levels =
        limits->depth <= DEFAULT_DEPTH ? few : malloc((limits->depth + 1) * sizeof(*levels));
    const yyjson_val *end = unsafe_yyjson_get_next(root), *value = root;
    const char *what = NULL;
    uint32_t top = 0, values = 0;
    int rc = levels != NULL ? 0 : -ENOMEM;

    for (; value < end && rc == 0 && what == NULL; value++) { /* the next in the text's order */
        while (top > 0 && value >= levels[top - 1].end) {
            top--;
        }
        struct level *in = top > 0 ? &levels[top - 1] : NULL;
        bool key = in != NULL && in->object && in->key_next; /* an object's children alternate */
        if (in != NULL && in->object) {
            in->key_next = !key;
        }
        if (key) {
            what = value == in->twice ? "duplicate object key" : NULL;
        } else if (++values > limits->values ||
                   (unsafe_yyjson_is_ctn(value) && top == limits->depth)) {
            rc = scan(text, len, limits, error); /* the byte past the limit, and its error */
            rc = SXE_NEVER(rc == 0) ? refuse(error, text, 0, -EINVAL, "a limit") : rc;
        } else if ((what = too_big(value)) == NULL && unsafe_yyjson_is_ctn(value)) {
            struct level *next = &levels[top++];
            *next = (struct level){.end = unsafe_yyjson_get_next(value),
                                   .object = unsafe_yyjson_is_obj(value),
                                   .key_next = true};
            rc = next->object && !limits->allow_duplicates ? named_twice(value, &next->twice) : 0;
        }
    }
    if (what != NULL) {
        rc = refuse(error, text, place(text, len, (size_t)(value - 1 - root)), -EINVAL, what);
    } else if (rc == -ENOMEM) { /* the levels, or an object's keys to sort */
        rc = refuse(error, text, 0, -ENOMEM, "out of memory"); /* GCOVR_EXCL_LINE */
    }
    if (levels != few) {
        free(levels);
    }
    return rc;
}

int sxe_json_parse(sxe_json_t **root, const char *text, size_t len,
                   const struct sxe_json_limits *limits, struct sxe_json_error *error)
{
    struct sxe_json_limits l = limits != NULL ? *limits : (struct sxe_json_limits){0};
    yyjson_read_err failed;
    int rc;

    l.size = l.size != 0 ? l.size : DEFAULT_SIZE;
    l.depth = l.depth != 0 ? l.depth : DEFAULT_DEPTH;
    l.values = l.values != 0 ? l.values : DEFAULT_VALUES;
    if (!SXE_CHECK(root != NULL && (text != NULL || len == 0) && l.depth <= DEPTH_MAX)) {
        return refuse(error, NULL, 0, -EINVAL, "invalid arguments");
    }
    *root = NULL;
    if (len > l.size) {
        if (error != NULL) { /* not at a place: line and column 0 */
            *error = (struct sxe_json_error){.position = l.size};
            snprintf(error->text, sizeof(error->text), "%zu bytes, more than %zu", len, l.size);
        }
        return -EMSGSIZE;
    }
    /* without YYJSON_READ_INSITU yyjson only reads the text */
    yyjson_doc *doc = yyjson_read_opts((char *)(uintptr_t)(len > 0 ? text : ""), len,
                                       YYJSON_READ_BIGNUM_AS_RAW, NULL, &failed);
    if (doc == NULL) {
        if (failed.code == YYJSON_READ_ERROR_MEMORY_ALLOCATION) {
            return refuse(error, text, 0, -ENOMEM, "out of memory"); /* GCOVR_EXCL_LINE */
        }
        /* a limit broken before yyjson's error, or a raw NUL at it, is the first thing wrong */
        size_t at = failed.code == YYJSON_READ_ERROR_EMPTY_CONTENT ? len : failed.pos;
        rc = scan(text, at < len ? at : len, &l, error);
        rc = rc == 0 && at < len && text[at] == '\0' ? refuse(error, text, at, -EINVAL, NUL_BYTE)
                                                     : rc;
        return rc < 0 ? rc : refuse(error, text, at, -EINVAL, failed.msg);
    }
    const yyjson_val *top = yyjson_doc_get_root(doc);
    if (SXE_NEVER(top != (const yyjson_val *)(void *)doc + HEADER)) { /* yyjson's layout changed */
        yyjson_doc_free(doc); /* GCOVR_EXCL_LINE: test_json_parse would have failed */
        return refuse(error, text, 0, -ENOTSUP, "yyjson's layout changed"); /* GCOVR_EXCL_LINE */
    }
    if (may_break(top, &l) && (rc = walk(top, text, len, &l, error)) < 0) {
        yyjson_doc_free(doc);
        return rc;
    }
    *root = ours(top);
    return 0;
}

void sxe_json_free(sxe_json_t *root)
{
    if (root != NULL) {
        yyjson_doc_free((yyjson_doc *)(void *)((yyjson_val *)(void *)root - HEADER));
    }
}

enum sxe_json_type sxe_json_type(const sxe_json_t *value)
{
    if (value == NULL) {
        return SXE_JSON_NONE;
    }
    switch (unsafe_yyjson_get_type(tree(value))) {
    case YYJSON_TYPE_OBJ:
        return SXE_JSON_OBJECT;
    case YYJSON_TYPE_ARR:
        return SXE_JSON_ARRAY;
    case YYJSON_TYPE_STR:
        return SXE_JSON_STRING;
    case YYJSON_TYPE_NUM:
        return unsafe_yyjson_get_subtype(tree(value)) == YYJSON_SUBTYPE_REAL ? SXE_JSON_REAL
                                                                             : SXE_JSON_INTEGER;
    case YYJSON_TYPE_BOOL:
        return unsafe_yyjson_get_bool(tree(value)) ? SXE_JSON_TRUE : SXE_JSON_FALSE;
    default: /* no raw value outlives the walk */
        return SXE_JSON_NULL;
    }
}

sxe_json_t *sxe_json_get(const sxe_json_t *object, const char *key)
{
    const yyjson_val *found = NULL;
    const char *name;
    sxe_json_t *value;
    size_t cursor = 0;

    if (key == NULL || sxe_json_type(object) != SXE_JSON_OBJECT) {
        return NULL;
    }
    size_t len = strlen(key);
    while (sxe_json_next(object, &cursor, &name, &value)) { /* the last of a key named twice */
        found = unsafe_yyjson_equals_strn(tree(value) - 1, key, len) ? tree(value) : found;
    }
    return ours(found);
}

sxe_json_t *sxe_json_at(const sxe_json_t *array, size_t index)
{
    return array != NULL ? ours(yyjson_arr_get((yyjson_val *)(uintptr_t)tree(array), index)) : NULL;
}

size_t sxe_json_size(const sxe_json_t *value)
{
    switch (sxe_json_type(value)) {
    case SXE_JSON_OBJECT:
    case SXE_JSON_ARRAY:
    case SXE_JSON_STRING:
        return unsafe_yyjson_get_len(tree(value));
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
        *len = unsafe_yyjson_get_len(tree(value));
    }
    return unsafe_yyjson_get_str(tree(value));
}

int sxe_json_integer(const sxe_json_t *value, int64_t *integer)
{
    if (!SXE_CHECK(integer != NULL) || sxe_json_type(value) != SXE_JSON_INTEGER) {
        return -EINVAL;
    }
    *integer = unsafe_yyjson_get_sint(tree(value)); /* a uint past INT64_MAX was refused */
    return 0;
}

int sxe_json_number(const sxe_json_t *value, double *number)
{
    enum sxe_json_type type = sxe_json_type(value);

    if (!SXE_CHECK(number != NULL) || (type != SXE_JSON_INTEGER && type != SXE_JSON_REAL)) {
        return -EINVAL;
    }
    *number = unsafe_yyjson_get_num(tree(value));
    return 0;
}

bool sxe_json_true(const sxe_json_t *value)
{
    return sxe_json_type(value) == SXE_JSON_TRUE;
}

/* The cursor is the byte offset, from the container, of the next member's key or element. */
bool sxe_json_next(const sxe_json_t *container, size_t *cursor, const char **key,
                   sxe_json_t **value)
{
    enum sxe_json_type type = sxe_json_type(container);

    if (!SXE_CHECK(cursor != NULL && value != NULL && (key != NULL || type != SXE_JSON_OBJECT)) ||
        (type != SXE_JSON_OBJECT && type != SXE_JSON_ARRAY)) {
        return false;
    }
    const uint8_t *at =
        (const uint8_t *)tree(container) + (*cursor != 0 ? *cursor : sizeof(yyjson_val));
    const uint8_t *end = (const uint8_t *)unsafe_yyjson_get_next(tree(container));
    if (at >= end) {
        return false;
    }
    const yyjson_val *next = (const yyjson_val *)(const void *)at;
    if (type == SXE_JSON_OBJECT) {
        *key = unsafe_yyjson_get_str(next);
        next++;
    } else if (key != NULL) {
        *key = NULL;
    }
    *value = ours(next);
    *cursor =
        (size_t)((const uint8_t *)unsafe_yyjson_get_next(next) - (const uint8_t *)tree(container));
    return true;
}
