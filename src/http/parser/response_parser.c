/*
 * HTTP/1.1 response heads, for the client (sxe/http_client.h): strict RFC 9112 framing.
 *
 * A response head is read once per response and is short, so it is found first (each LF must
 * follow a CR; the blank line ends it) and then checked in one pass, line by line, with the same
 * character classes as the request parser. What a proxy or client could be tricked by is refused:
 * Content-Length with Transfer-Encoding, differing or malformed Content-Length values, any
 * Transfer-Encoding but a single "chunked" (and chunked in HTTP/1.0), obsolete line folding,
 * whitespace before a colon, NUL or other control bytes in values, bare LF line ends. Bodies are
 * read with sxe_http_parse_body(), which the head leaves ready.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "parser.h"
#include "sxe/http_parser.h"

/* Whether the len bytes at s are the lower-case word, in any case. */
static bool word_is(const char *s, size_t len, const char *word)
{
    return strlen(word) == len && strncasecmp(s, word, len) == 0;
}

static bool all_of(const char *s, size_t len, unsigned class)
{
    for (size_t i = 0; i < len; i++) {
        if ((sxe__http_classes[(unsigned char)s[i]] & class) == 0) {
            return false;
        }
    }
    return true;
}

/* "HTTP/1.x NNN reason": the reason and the space before it may be missing. */
static int status_line(const char *line, size_t len, struct sxe_http_response_head *response)
{
    if (len < 12 || memcmp(line, "HTTP/1.", 7) != 0 || (line[7] != '0' && line[7] != '1') ||
        line[8] != ' ') {
        return -EPROTO;
    }
    for (int i = 9; i < 12; i++) {
        if (line[i] < '0' || line[i] > '9') {
            return -EPROTO;
        }
    }
    response->minor_version = line[7] - '0';
    response->status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
    if (response->status < 100) {
        return -EPROTO;
    }
    response->reason = line + (len > 12 ? 13 : 12);
    response->reason_len = len > 12 ? len - 13 : 0;
    if (len > 12 && (line[12] != ' ' || !all_of(response->reason, response->reason_len, VALUE))) {
        return -EPROTO;
    }
    return 0;
}

struct framing {
    bool has_length;
    bool chunked;
    bool close;
    bool keep_alive;
    uint64_t length;
};

/* Checks one header field line and takes its meaning for the framing. */
static int field(const char *line, size_t len, struct sxe_http_header *header,
                 struct framing *framing)
{
    const char *colon = memchr(line, ':', len);

    if (colon == NULL || colon == line || !all_of(line, (size_t)(colon - line), TCHAR)) {
        return -EPROTO; /* no name, whitespace before the colon, folding, or a bad name byte */
    }
    const char *value = colon + 1, *end = line + len;
    if (!all_of(value, (size_t)(end - value), VALUE)) {
        return -EPROTO;
    }
    while (value < end && (*value == ' ' || *value == '\t')) {
        value++;
    }
    while (end > value && (end[-1] == ' ' || end[-1] == '\t')) {
        end--;
    }
    *header = (struct sxe_http_header){.name = line,
                                       .name_len = (size_t)(colon - line),
                                       .value = value,
                                       .value_len = (size_t)(end - value)};
    if (word_is(line, header->name_len, "content-length")) {
        uint64_t length = 0;
        if (header->value_len == 0 || header->value_len > 19) {
            return -EPROTO;
        }
        for (size_t i = 0; i < header->value_len; i++) {
            if (value[i] < '0' || value[i] > '9') {
                return -EPROTO;
            }
            length = length * 10 + (uint64_t)(value[i] - '0');
        }
        if (framing->has_length && length != framing->length) {
            return -EPROTO;
        }
        framing->has_length = true;
        framing->length = length;
    } else if (word_is(line, header->name_len, "transfer-encoding")) {
        if (framing->chunked || !word_is(value, header->value_len, "chunked")) {
            return -EPROTO; /* chunked twice, or a coding sxe does not decode */
        }
        framing->chunked = true;
    } else if (word_is(line, header->name_len, "connection")) {
        for (const char *token = value; token < end;) {
            const char *comma = memchr(token, ',', (size_t)(end - token));
            const char *stop = comma != NULL ? comma : end, *from = token;
            while (from < stop && (*from == ' ' || *from == '\t')) {
                from++;
            }
            while (stop > from && (stop[-1] == ' ' || stop[-1] == '\t')) {
                stop--;
            }
            framing->close |= word_is(from, (size_t)(stop - from), "close");
            framing->keep_alive |= word_is(from, (size_t)(stop - from), "keep-alive");
            token = comma != NULL ? comma + 1 : end;
        }
    }
    return 0;
}

/* The whole head, head_len bytes ending in the blank line, is here: check it and fill in. */
static int parse(struct sxe_http_parser *parser, const char *data, size_t head_len,
                 const struct sxe_http_limits *limits, bool head_request,
                 struct sxe_http_response_head *response)
{
    unsigned most =
        limits->header_count < SXE_HTTP_HEADERS_MAX ? limits->header_count : SXE_HTTP_HEADERS_MAX;
    struct framing framing = {0};
    const char *line = data, *end = data + head_len - 2;
    int rc;

    response->header_count = 0;
    for (bool first = true; line < end; first = false) {
        const char *cr = memchr(line, '\r', (size_t)(end - line));
        if (cr == NULL || cr[1] != '\n') {
            return -EPROTO; /* a CR inside a line */
        }
        if (first) {
            rc = status_line(line, (size_t)(cr - line), response);
        } else if (response->header_count == most) {
            rc = -EMSGSIZE;
        } else {
            rc = field(line, (size_t)(cr - line), &response->headers[response->header_count++],
                       &framing);
        }
        if (rc < 0) {
            return rc;
        }
        line = cr + 2;
    }
    if (framing.has_length && framing.chunked) {
        return -EPROTO; /* RFC 9112 §6.3: smuggling or response splitting */
    }
    if (framing.chunked && response->minor_version == 0) {
        return -EPROTO;
    }
    int status = response->status;
    bool bodiless = head_request || status < 200 || status == 204 || status == 304;
    response->chunked = !bodiless && framing.chunked;
    response->content_length = bodiless || framing.chunked ? 0 : framing.length;
    response->until_close = !bodiless && !framing.chunked && !framing.has_length;
    response->has_body = response->chunked || response->content_length > 0 || response->until_close;
    response->keep_alive = !response->until_close && !framing.close &&
                           (response->minor_version == 1 || framing.keep_alive);

    sxe_http_parser_init(parser);
    parser->minor_version = (uint8_t)response->minor_version;
    parser->body_state = response->chunked ? B_SIZE_START : B_LENGTH;
    parser->body_left = response->content_length;
    return (int)head_len;
}

int sxe_http_parse_response_head(struct sxe_http_parser *parser, const char *data, size_t len,
                                 const struct sxe_http_limits *limits, bool head_request,
                                 struct sxe_http_response_head *response)
{
    size_t stop = len < limits->header_bytes ? len : limits->header_bytes;
    size_t at = parser->scanned;

    while (at < stop) {
        const char *lf = memchr(data + at, '\n', stop - at);
        if (lf == NULL) {
            break;
        }
        size_t i = (size_t)(lf - data);
        if (i == 0 || data[i - 1] != '\r') {
            return -EPROTO; /* a bare LF */
        }
        if (i - 1 == parser->line_start) { /* an empty line */
            if (i == 1) {
                return -EPROTO; /* before the status line */
            }
            return parse(parser, data, i + 1, limits, head_request, response);
        }
        parser->line_start = (uint32_t)(i + 1);
        at = i + 1;
    }
    parser->scanned = (uint32_t)stop;
    return len >= limits->header_bytes ? -EMSGSIZE : 0;
}

const struct sxe_http_header *
sxe_http_response_header(const struct sxe_http_response_head *response, const char *name)
{
    return sxe__http_find(response->headers, response->header_count, name);
}
