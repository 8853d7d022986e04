/**
 * @file sxe/json.h
 * @brief JSON: a string escaped for responses, and documents read within limits.
 *
 * Reading: sxe_json_parse() takes text (a request's body, say) and gives a tree of values, read
 * with the accessors below; sxe_http_json() (sxe/http.h) does it for a request and answers 400
 * itself when the body is not what it should be. The parsing is yyjson's (third_party/yyjson,
 * compiled in; RFC 8259, strict: invalid UTF-8, lone surrogates, trailing commas, NaN and the like
 * are errors, each with its line, column and byte position; no recursion, and memory bounded by
 * the text's size). Around it sxe puts limits: the size, checked before a byte is read, then the
 * depth and the number of values; and it refuses an object that names a key twice unless asked
 * not to, and an integer past int64_t. Built with -DSXE_JSON=OFF, sxe_json_parse() says -ENOTSUP.
 *
 *     sxe_json_t *order;
 *     struct sxe_json_error error;
 *     if (sxe_json_parse(&order, body, len, NULL, &error) < 0) {
 *         printf("line %u, column %u: %s\n", error.line, error.column, error.text);
 *     } else {
 *         int64_t quantity;
 *         const char *sku = sxe_json_text(sxe_json_get(order, "sku"), NULL);
 *         if (sku != NULL && sxe_json_integer(sxe_json_get(order, "quantity"), &quantity) == 0)
 *             ship(sku, quantity);
 *         sxe_json_free(order);
 *     }
 *
 * Every accessor takes NULL (a member that was not there) and answers as for a value of another
 * type, so a chain of them needs one check at its end.
 */
#ifndef SXE_JSON_H
#define SXE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Writes len bytes of text as one JSON string (RFC 8259 §7), quotes included, NUL-terminated, into
 * out: '"', '\\' and control bytes are escaped (\n, \t, ... or \u00XX), and bytes that are not
 * valid UTF-8 (overlong forms, surrogates, stray continuation bytes) become U+FFFD, so the result
 * is always valid JSON whatever text holds.
 * @return the length written (without the NUL), or -ENOBUFS when it does not fit in size bytes
 *         (out then holds an empty string, if size allows).
 */
ssize_t sxe_json_string(char *out, size_t size, const char *text, size_t len);

typedef struct sxe_json sxe_json_t; /**< A value in a parsed document; freed with its root. */

/** The type of a value. */
enum sxe_json_type {
    SXE_JSON_NONE, /**< No value: NULL given. */
    SXE_JSON_NULL,
    SXE_JSON_FALSE,
    SXE_JSON_TRUE,
    SXE_JSON_INTEGER, /**< A number without fraction or exponent (past int64_t is refused). */
    SXE_JSON_REAL,    /**< Any other number (one past a double is refused). */
    SXE_JSON_STRING,
    SXE_JSON_ARRAY,
    SXE_JSON_OBJECT,
};

/** What a document may hold; zero fields take the defaults shown. */
struct sxe_json_limits {
    size_t size;           /**< Bytes of text (1 MiB); more is -EMSGSIZE. */
    uint32_t depth;        /**< Arrays and objects inside each other (64; at most 2047). */
    uint32_t values;       /**< Values in all, each member's and element's (100,000). A value
                                takes 16 bytes (a key too, a string its bytes) while the tree
                                lives. */
    bool allow_duplicates; /**< Take an object that names a key twice: its size and
                                sxe_json_next() see each member as written, sxe_json_get() the
                                last. */
};

/** Why a document was refused, and where. */
struct sxe_json_error {
    unsigned line;   /**< From 1; 0 when the error is not at a place (the size). */
    unsigned column; /**< From 1, in characters (a UTF-8 sequence counts one), near the error. */
    size_t position; /**< Bytes from the start of the text to where it went wrong (at it, or just
                        past the token that is). */
    char text[160];  /**< What is wrong, in English, NUL-terminated. */
};

/**
 * Parses len bytes of text (no NUL needed) as one JSON value of any type, with whitespace around
 * it and nothing else. The tree is the caller's until sxe_json_free(root).
 * @param limits  NULL for the defaults.
 * @param error   Filled on failure (NULL if not wanted).
 * @return 0; -EINVAL for text that is not JSON (or a key named twice); -EMSGSIZE past
 *         limits->size; -ELOOP past limits->depth; -E2BIG past limits->values; -ENOMEM;
 *         -ENOTSUP in a build without JSON reading; -EINVAL for invalid arguments (asserts in
 *         debug builds).
 */
int sxe_json_parse(sxe_json_t **root, const char *text, size_t len,
                   const struct sxe_json_limits *limits, struct sxe_json_error *error);

/** Frees a tree from sxe_json_parse() (NULL does nothing). Its values go with it. */
void sxe_json_free(sxe_json_t *root);

/** value's type; SXE_JSON_NONE for NULL. */
enum sxe_json_type sxe_json_type(const sxe_json_t *value);

/**
 * The member named key (NUL-terminated) of an object; NULL if none, or not an object. It looks at
 * each member in turn: to read every member, walk with sxe_json_next().
 */
sxe_json_t *sxe_json_get(const sxe_json_t *object, const char *key);

/**
 * An array's element at index; NULL past its end, or not an array. At once in an array of
 * scalars; in one that holds arrays or objects it walks the elements before index: to read every
 * element, walk with sxe_json_next().
 */
sxe_json_t *sxe_json_at(const sxe_json_t *array, size_t index);

/** An array's elements, an object's members, a string's bytes; 0 for anything else. */
size_t sxe_json_size(const sxe_json_t *value);

/**
 * A string's UTF-8 bytes, NUL-terminated (a string may also hold NULs: len says how long it is);
 * NULL if value is not a string.
 */
const char *sxe_json_text(const sxe_json_t *value, size_t *len);

/** @return 0 with *integer set; -EINVAL if value is not an integer (or integer is NULL). */
int sxe_json_integer(const sxe_json_t *value, int64_t *integer);

/** @return 0 with *number set (an integer as a double too); -EINVAL if value is not a number. */
int sxe_json_number(const sxe_json_t *value, double *number);

/** @return true for true, false for anything else. */
bool sxe_json_true(const sxe_json_t *value);

/**
 * Walks an object's members or an array's elements in the order of the text: start with *cursor
 * 0; each call sets *value, and *key (NUL-terminated; NULL for an array's element, and key may
 * be NULL for an array), and returns true, until there are none (false, for anything else too).
 * A cursor is good only for the container it started on, while its tree lives (not checked).
 */
bool sxe_json_next(const sxe_json_t *container, size_t *cursor, const char **key,
                   sxe_json_t **value);

#ifdef __cplusplus
}
#endif

#endif
