/**
 * @file sxe/utf8.h
 * @brief UTF-8 checks (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
 */
#ifndef SXE_UTF8_H
#define SXE_UTF8_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Whether the len bytes at data are valid UTF-8. */
bool sxe_utf8_valid(const void *data, size_t len);

/**
 * Checks text that may still be coming (a message in fragments): how many bytes from the start
 * are whole valid sequences. @return that length, with *bad false when the rest (at most three
 * bytes) is a valid beginning of a sequence that needs more bytes; or, with *bad true, the offset
 * of the first byte that makes the text invalid, however many more bytes come.
 */
size_t sxe_utf8_check(const void *data, size_t len, bool *bad);

#ifdef __cplusplus
}
#endif

#endif
