/*
 * Request bodies: by Content-Length, or chunked (sizes, extensions, data, trailers), a few bytes at
 * a time or all at once, with the same verdict either way; and looking up a header.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "parser.h"
#include "sxe/http_parser.h"

/* Takes up to len bytes of data, starting at at, for the body piece; returns bytes taken. */
static size_t take(struct sxe_http_parser *parser, const char *data, size_t at, size_t len,
                   struct sxe_http_body *body)
{
    size_t part = len - at < parser->body_left ? len - at : (size_t)parser->body_left;

    body->data = data + at;
    body->len = part;
    parser->body_left -= part;
    return part;
}

/* The request ended: ready for the next head. */
static long body_done(struct sxe_http_parser *parser, size_t consumed, struct sxe_http_body *body)
{
    uint8_t minor_version = parser->minor_version;

    sxe_http_parser_init(parser);
    parser->minor_version = minor_version;
    body->done = true;
    return (long)consumed;
}

/*
 * Longer than 80 lines on purpose: the body's state machine is one loop over the bytes with one
 * switch, so a piece that ends anywhere resumes where it stopped and each byte is looked at once;
 * split into functions, every state would pass the loop's position and state back and forth.
 */
static long parse_body(struct sxe_http_parser *parser, const char *data, size_t len,
                       const struct sxe_http_limits *limits, struct sxe_http_body *body)
{
    size_t at = 0;
    int digit;

    *body = (struct sxe_http_body){.data = data};
    if (parser->body_state == B_LENGTH) {
        at = take(parser, data, 0, len, body);
        return parser->body_left == 0 ? body_done(parser, at, body) : (long)at;
    }
    while (at < len) {
        unsigned char c = (unsigned char)data[at];

        switch (parser->body_state) {
        case B_SIZE_START:
        case B_SIZE:
            if ((digit = sxe__http_hex(c)) >= 0) {
                if (parser->body_left > (UINT64_MAX >> 4)) {
                    return -400;
                }
                parser->body_left = parser->body_left << 4 | (uint64_t)digit;
                if (parser->body_total + parser->body_left > limits->body_bytes) {
                    return -413;
                }
                parser->body_state = B_SIZE;
            } else if (parser->body_state == B_SIZE_START) {
                return -400;
            } else if (c == ';') {
                parser->body_state = B_EXT_NAME_START;
            } else if (c == ' ' || c == '\t') {
                parser->body_state = B_SIZE_BWS;
            } else if (c == '\r') {
                parser->body_state = B_SIZE_LF;
            } else {
                return -400;
            }
            break;
        case B_SIZE_BWS:
        case B_EXT_AFTER_NAME:
        case B_EXT_AFTER_VALUE:
            if (c == ';') {
                parser->body_state = B_EXT_NAME_START;
            } else if (c == '=' && parser->body_state == B_EXT_AFTER_NAME) {
                parser->body_state = B_EXT_VALUE_START;
            } else if (c == '\r' && parser->body_state != B_SIZE_BWS) {
                parser->body_state = B_SIZE_LF;
            } else if (c != ' ' && c != '\t') {
                return -400; /* after the size only ";" extensions may follow */
            }
            break;
        case B_EXT_NAME_START:
        case B_EXT_VALUE_START:
            if (sxe__http_classes[c] & TCHAR) {
                parser->body_state =
                    parser->body_state == B_EXT_NAME_START ? B_EXT_NAME : B_EXT_VALUE;
            } else if (c == '"' && parser->body_state == B_EXT_VALUE_START) {
                parser->body_state = B_EXT_QUOTED;
            } else if (c != ' ' && c != '\t') {
                return -400; /* ";" with no extension after it */
            }
            break;
        case B_EXT_NAME:
        case B_EXT_VALUE:
            if ((sxe__http_classes[c] & TCHAR) == 0) {
                parser->body_state =
                    parser->body_state == B_EXT_NAME ? B_EXT_AFTER_NAME : B_EXT_AFTER_VALUE;
                continue; /* look at this byte again in the new state */
            }
            break;
        case B_EXT_QUOTED:
            if (c == '"') {
                parser->body_state = B_EXT_AFTER_VALUE;
            } else if (c == '\\') {
                parser->body_state = B_EXT_ESCAPE;
            } else if ((sxe__http_classes[c] & QDTEXT) == 0) {
                return -400;
            }
            break;
        case B_EXT_ESCAPE:
            if ((sxe__http_classes[c] & VALUE) == 0) {
                return -400;
            }
            parser->body_state = B_EXT_QUOTED;
            break;
        case B_SIZE_LF:
            if (c != '\n') {
                return -400;
            }
            parser->body_state = parser->body_left == 0 ? B_TRAILER_START : B_DATA;
            break;
        case B_DATA:
            at += take(parser, data, at, len, body);
            parser->body_total += body->len;
            if (parser->body_left == 0) {
                parser->body_state = B_DATA_CR;
            }
            return (long)at; /* one piece per call, contiguous in the caller's bytes */
        case B_DATA_CR:
            if (c != '\r') {
                return -400;
            }
            parser->body_state = B_DATA_LF;
            break;
        case B_DATA_LF:
        case B_TRAILER_LF:
            if (c != '\n') {
                return -400;
            }
            parser->body_state = parser->body_state == B_DATA_LF ? B_SIZE_START : B_TRAILER_START;
            break;
        case B_TRAILER_START:
            if (c == '\r') {
                parser->body_state = B_END_LF;
            } else if (sxe__http_classes[c] & TCHAR) {
                parser->body_state = B_TRAILER_NAME;
            } else {
                return -400;
            }
            break;
        case B_TRAILER_NAME:
            if (c == ':') {
                parser->body_state = B_TRAILER_VALUE;
            } else if ((sxe__http_classes[c] & TCHAR) == 0) {
                return -400;
            }
            break;
        case B_TRAILER_VALUE:
            if (c == '\r') {
                parser->body_state = B_TRAILER_LF;
            } else if ((sxe__http_classes[c] & VALUE) == 0) {
                return -400;
            }
            break;
        default: /* B_END_LF */
            if (c != '\n') {
                return -400;
            }
            return body_done(parser, at + 1, body);
        }
        at++;
    }
    return (long)at;
}

long sxe_http_parse_body(struct sxe_http_parser *parser, const char *data, size_t len,
                         const struct sxe_http_limits *limits, struct sxe_http_body *body)
{
    long rc = parse_body(parser, data, len, limits, body);

    return rc < 0 ? sxe__http_refuse_status(parser, (int)rc) : rc;
}

const struct sxe_http_header *sxe__http_find(const struct sxe_http_header *headers, unsigned count,
                                             const char *name)
{
    size_t len = strlen(name);

    for (unsigned i = 0; i < count; i++) {
        if (headers[i].name_len == len && strncasecmp(headers[i].name, name, len) == 0) {
            return &headers[i];
        }
    }
    return NULL;
}

const struct sxe_http_header *sxe_http_request_header(const struct sxe_http_request_head *request,
                                                      const char *name)
{
    return sxe__http_find(request->headers, request->header_count, name);
}
