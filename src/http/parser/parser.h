/* The HTTP parser's internals, shared by parser.c (heads) and body.c (bodies), and with tests. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sxe/http_parser.h"

enum body_state {
    B_LENGTH,
    B_SIZE_START,
    B_SIZE,
    B_SIZE_BWS, /* whitespace after the size: only ";" may follow */
    B_EXT_NAME_START,
    B_EXT_NAME,
    B_EXT_AFTER_NAME,
    B_EXT_VALUE_START,
    B_EXT_VALUE,
    B_EXT_QUOTED,
    B_EXT_ESCAPE,
    B_EXT_AFTER_VALUE,
    B_SIZE_LF,
    B_DATA,
    B_DATA_CR,
    B_DATA_LF,
    B_TRAILER_START,
    B_TRAILER_NAME,
    B_TRAILER_VALUE,
    B_TRAILER_LF,
    B_END_LF,
};

/* Parser flags. */
#define F_CONTENT_LENGTH 0x01u
#define F_CHUNKED        0x02u
#define F_UPGRADE_FIELD  0x04u
#define F_EXPECT         0x08u
#define F_STOP_METHOD    0x10u /* CONNECT or PRI: the bytes after the head are not HTTP */

/* Connection tokens. */
#define C_CLOSE      0x01u
#define C_KEEP_ALIVE 0x02u
#define C_UPGRADE    0x04u

/* Character classes. */
#define TCHAR  0x01u /* token characters: methods, field names, chunk extensions */
#define VALUE  0x02u /* field-value: VCHAR, obs-text, SP, HTAB */
#define TARGET 0x04u /* request-target: visible ASCII */
#define QDTEXT 0x08u /* quoted-string text: HTAB, SP, visible ASCII but " and \, obs-text */
#define HOST   0x10u /* a reg-name or IPv4 host: unreserved and sub-delims, but ',' (RFC 3986) */

struct sxe_http_header;

/* The first of count headers called name (case-insensitive), or NULL. */
const struct sxe_http_header *sxe__http_find(const struct sxe_http_header *headers, unsigned count,
                                             const char *name);

/* The value of a hex digit, or -1: the one hex decoder of the HTTP module. */
static inline int sxe__http_hex(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/*
 * Whether name (len bytes, any case) is lower, a lower-case literal of letters, digits and '-':
 * all bytes whose 0x20 bit is set, so OR-ing it in folds case. Eight bytes at a time.
 */
static inline bool sxe__http_name_is(const char *name, size_t len, const char *lower)
{
    size_t lower_len = strlen(lower);
    size_t i = 0;

    if (len != lower_len) {
        return false;
    }
    for (; i + 8 <= len; i += 8) {
        uint64_t got, want;
        memcpy(&got, name + i, 8);
        memcpy(&want, lower + i, 8);
        if ((got | 0x2020202020202020ULL) != want) {
            return false;
        }
    }
    for (; i < len; i++) {
        if ((name[i] | 0x20) != lower[i]) {
            return false;
        }
    }
    return true;
}

/* Trims optional whitespace from both ends of [*start, *end). */
static inline void sxe__http_trim(const char *data, size_t *start, size_t *end)
{
    size_t from = *start, to = *end;

    while (from < to && (data[from] == ' ' || data[from] == '\t')) {
        from++;
    }
    while (to > from && (data[to - 1] == ' ' || data[to - 1] == '\t')) {
        to--;
    }
    *start = from;
    *end = to;
}

/* Whether a Host value (or an absolute-form authority) is uri-host [":" port]. */
bool sxe__http_valid_host(const char *host, size_t len);

/* Reads a Transfer-Encoding field's value into the parser's flags. @return 0 or -400/-501. */
int sxe__http_transfer_codings(struct sxe_http_parser *parser, const char *value, size_t len);

/* Sorts a complete head's target by its form and finds its host. @return 0 or -400. */
int sxe__http_target_form(const struct sxe_http_parser *parser, const char *data,
                          struct sxe_http_request_head *request);

/* Records a refusal's HTTP status (negative, as the parser's steps return it): -EPROTO. */
static inline int sxe__http_refuse_status(struct sxe_http_parser *parser, int status)
{
    parser->refused = (uint8_t)(-status - 399);
    return -EPROTO;
}

/* Each byte's classes, filled at start-up. */
extern unsigned char sxe__http_classes[256];

/*
 * Chooses how token characters are scanned: SSSE3 when use is true and the CPU has it (the
 * default, chosen at start-up), else SSE2. Tests run the parser both ways.
 */
void sxe__http_parser_use_ssse3(bool use);
