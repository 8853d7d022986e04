/*
 * libFuzzer harness for reading JSON (src/base/json_parse.c: yyjson, and sxe's limits and rules on
 * its tree). Each input's first byte picks the limits (a small depth or the default, a small
 * count of values or the default, keys named twice taken or not); the rest is the text. It checks,
 * beyond not crashing:
 * - a refusal is one of the documented errors, placed inside the text (line and column from 1);
 * - a tree keeps the limits: no deeper than the depth, no more values than allowed, no key named
 *   twice in an object unless that was taken;
 * - the accessors agree: walking a container with sxe_json_next() gives sxe_json_size() values,
 *   each the one sxe_json_at() gives for an array, and for an object the one sxe_json_get() finds
 *   by its key (the last of that name); a string's length is its size; an integer reads as one.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/json.h"

struct seen {
    uint32_t values, deepest;
    bool nul_keys; /* a key may hold \u0000: the accessors give it as a C string, cut there */
};

static void check(bool ok)
{
    if (!ok) {
        abort();
    }
}

/* Whether the key of object's member after is named again by a later member. */
static bool named_later(const sxe_json_t *object, size_t after)
{
    const char *key, *first = NULL;
    sxe_json_t *value;
    size_t cursor = 0, at = 0;

    while (sxe_json_next(object, &cursor, &key, &value)) {
        if (at == after) {
            first = key;
        } else if (at > after && first != NULL && strcmp(first, key) == 0) {
            return true;
        }
        at++;
    }
    return false;
}

static void walk(const sxe_json_t *value, uint32_t depth, const struct sxe_json_limits *limits,
                 struct seen *seen)
{
    enum sxe_json_type type = sxe_json_type(value);
    int64_t integer;
    double number;
    size_t len;

    seen->values++;
    check(type != SXE_JSON_NONE);
    if (type == SXE_JSON_STRING) {
        check(sxe_json_text(value, &len) != NULL && len == sxe_json_size(value));
    }
    check((sxe_json_integer(value, &integer) == 0) == (type == SXE_JSON_INTEGER));
    check((sxe_json_number(value, &number) == 0) ==
          (type == SXE_JSON_INTEGER || type == SXE_JSON_REAL));
    if (type != SXE_JSON_ARRAY && type != SXE_JSON_OBJECT) {
        return;
    }
    depth++;
    seen->deepest = depth > seen->deepest ? depth : seen->deepest;
    const char *key;
    sxe_json_t *member;
    size_t cursor = 0, count = 0;
    while (sxe_json_next(value, &cursor, &key, &member)) {
        if (type == SXE_JSON_ARRAY) {
            check(key == NULL && sxe_json_at(value, count) == member);
        } else if (!seen->nul_keys) {
            bool again = named_later(value, count);
            check(limits->allow_duplicates || !again);
            check(again || sxe_json_get(value, key) == member); /* get finds the last */
        }
        walk(member, depth, limits, seen);
        count++;
    }
    check(count == sxe_json_size(value));
    check(type != SXE_JSON_ARRAY || sxe_json_at(value, count) == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    struct sxe_json_limits limits = {.depth = data[0] & 1 ? 1 + (data[0] >> 5) : 0,
                                     .values = data[0] & 2 ? 1 + (data[0] >> 4) : 0,
                                     .allow_duplicates = data[0] & 4};
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    struct sxe_json_error error;
    sxe_json_t *root;
    int rc = sxe_json_parse(&root, text, len, &limits, &error);

    if (rc < 0) {
        check(root == NULL);
        check(rc == -EINVAL || rc == -ELOOP || rc == -E2BIG || rc == -ENOMEM);
        check(error.position <= len && error.line >= 1 && error.column >= 1 &&
              error.column <= error.position + 1 && memchr(error.text, '\0', sizeof(error.text)));
        return 0;
    }
    struct seen seen = {.nul_keys = memmem(text, len, "\\u0000", 6) != NULL};
    walk(root, 0, &limits, &seen);
    check(seen.deepest <= (limits.depth != 0 ? limits.depth : 64));
    check(seen.values <= (limits.values != 0 ? limits.values : 100000));
    sxe_json_free(root);
    return 0;
}
