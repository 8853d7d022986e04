/**
 * @file sxe/json.h
 * @brief A JSON string, escaped, for responses: not a JSON library, one function.
 */
#ifndef SXE_JSON_H
#define SXE_JSON_H

#include <stddef.h>
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

#ifdef __cplusplus
}
#endif

#endif
