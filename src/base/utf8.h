/*
 * UTF-8 inside the library (utf8.c): one decoder for JSON strings and WebSocket text.
 */
#ifndef SXE_UTF8_INTERNAL_H
#define SXE_UTF8_INTERNAL_H

#include <stddef.h>

/*
 * The length of the valid UTF-8 sequence at text (1 to 4); 0 if the len bytes there are a valid
 * beginning of one that needs more; -1 if they are not UTF-8.
 */
int sxe__utf8_sequence(const unsigned char *text, size_t len);

#endif
