/*
 * The HTTP/1.1 request parser: a byte-at-a-time state machine that keeps its place between calls.
 *
 * Every byte of a head is classified once, as it arrives, so a bad byte is refused at once and
 * a request split over many reads costs no more than one read. Meaning is taken a line at a time:
 * when a header line's LF arrives, the whole line is in the caller's buffer (sxe keeps unconsumed
 * input contiguous), so the framing headers (Content-Length, Transfer-Encoding, Connection, Host,
 * Upgrade, Expect) are checked then, against each other, and a conflict is refused on the line
 * that causes it. When the blank line ends the head, one pass over the already-validated lines
 * fills in the request's pointers. The state kept per connection is the sxe_http_parser struct:
 * offsets and a few flags, never pointers, because the bytes may move between calls.
 *
 * The inner loops of the states that see most bytes (target, header name, header value) skip runs
 * of ordinary characters with a table lookup per byte, and with SSE4.2 where the compiler may use
 * it, 16 bytes at a time.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

#include "sxe/http.h"

const struct sxe_http_limits sxe_http_default_limits = {
    .request_line = 8192, .header_bytes = 16384, .header_count = 100, .body_bytes = 1 << 20};

enum head_state {
    S_METHOD,
    S_EMPTY_LINE_LF, /* a CR before any request line: an empty line, ignored */
    S_TARGET_START,
    S_TARGET,
    S_VERSION,
    S_LINE_LF,
    S_FIELD_START,
    S_NAME,
    S_VALUE,
    S_VALUE_LF,
    S_END_LF,
};

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

static unsigned char classes[256];

static void __attribute__((constructor)) init_classes(void)
{
    static const char tchar_extra[] = "!#$%&'*+-.^_`|~";

    for (unsigned c = 0; c < 256; c++) {
        unsigned class = 0;
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c != 0 && strchr(tchar_extra, (int)c) != NULL)) {
            class |= TCHAR;
        }
        if ((c >= 0x21 && c <= 0x7e) || c >= 0x80 || c == ' ' || c == '\t') {
            class |= VALUE;
        }
        if (c >= 0x21 && c <= 0x7e) {
            class |= TARGET;
        }
        if ((class & VALUE) && c != '"' && c != '\\') {
            class |= QDTEXT;
        }
        classes[c] = (unsigned char)class;
    }
}

/*
 * Returns the index of the first byte at or after from that is not in class, or len. Where SSE4.2
 * is available, field values (the longest runs) are skipped 16 bytes at a time: the ranges of
 * bytes that may NOT appear are the controls other than HTAB, and DEL.
 */
static size_t skip(const char *data, size_t from, size_t len, unsigned class)
{
#if defined(__SSE4_2__)
    if (class == VALUE) {
        static const char stop_ranges[16] = "\x00\x08\x0a\x1f\x7f\x7f";
        const __m128i ranges = _mm_loadu_si128((const __m128i *)stop_ranges);
        while (from + 16 <= len) {
            __m128i block = _mm_loadu_si128((const __m128i *)(data + from));
            int index = _mm_cmpestri(ranges, 6, block, 16,
                                     _SIDD_LEAST_SIGNIFICANT | _SIDD_CMP_RANGES | _SIDD_UBYTE_OPS);
            if (index != 16) {
                return from + (size_t)index;
            }
            from += 16;
        }
    }
#endif
    while (from < len && (classes[(unsigned char)data[from]] & class)) {
        from++;
    }
    return from;
}

void sxe_http_parser_init(struct sxe_http_parser *parser)
{
    memset(parser, 0, sizeof(*parser));
}

bool sxe_http_parser_busy(const struct sxe_http_parser *parser)
{
    return parser->scanned > parser->start || parser->state > S_EMPTY_LINE_LF ||
           parser->body_state != B_LENGTH || parser->body_left > 0;
}

static bool is_method(const char *method, size_t len, unsigned *flags)
{
    static const char *const methods[] = {
        "ACL",        "BIND",       "CHECKOUT", "CONNECT",  "COPY",      "DELETE",
        "GET",        "HEAD",       "LINK",     "LOCK",     "M-SEARCH",  "MERGE",
        "MKACTIVITY", "MKCALENDAR", "MKCOL",    "MOVE",     "NOTIFY",    "OPTIONS",
        "PATCH",      "POST",       "PRI",      "PROPFIND", "PROPPATCH", "PURGE",
        "PUT",        "QUERY",      "REBIND",   "REPORT",   "SEARCH",    "SOURCE",
        "SUBSCRIBE",  "TRACE",      "UNBIND",   "UNLINK",   "UNLOCK",    "UNSUBSCRIBE"};

    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        if (strlen(methods[i]) == len && memcmp(methods[i], method, len) == 0) {
            if ((len == 7 && memcmp(method, "CONNECT", 7) == 0) ||
                (len == 3 && memcmp(method, "PRI", 3) == 0)) {
                *flags |= F_STOP_METHOD;
            }
            return true;
        }
    }
    return false;
}

static bool name_is(const char *name, size_t len, const char *lower)
{
    return strlen(lower) == len && strncasecmp(name, lower, len) == 0;
}

/* Trims optional whitespace from both ends of [*start, *end). */
static void trim(const char *data, size_t *start, size_t *end)
{
    while (*start < *end && (data[*start] == ' ' || data[*start] == '\t')) {
        (*start)++;
    }
    while (*end > *start && (data[*end - 1] == ' ' || data[*end - 1] == '\t')) {
        (*end)--;
    }
}

/* Parses a Content-Length value: digits only, no sign, no space, no list, no overflow. */
static int content_length(const char *value, size_t len, uint64_t *length)
{
    *length = 0;
    if (len == 0) {
        return -400;
    }
    for (size_t i = 0; i < len; i++) {
        if (value[i] < '0' || value[i] > '9') {
            return -400;
        }
        if (*length > (UINT64_MAX - 9) / 10) {
            return -400;
        }
        *length = *length * 10 + (uint64_t)(value[i] - '0');
    }
    return 0;
}

/* Reads the comma-separated tokens of a Connection field. */
static void connection_tokens(struct sxe_http_parser *parser, const char *value, size_t len)
{
    size_t at = 0;

    while (at < len) {
        size_t end = at;
        while (end < len && value[end] != ',') {
            end++;
        }
        size_t start = at;
        trim(value, &start, &end);
        if (name_is(value + start, end - start, "close")) {
            parser->connection |= C_CLOSE;
        } else if (name_is(value + start, end - start, "keep-alive")) {
            parser->connection |= C_KEEP_ALIVE;
        } else if (name_is(value + start, end - start, "upgrade")) {
            parser->connection |= C_UPGRADE;
        }
        while (at < len && value[at] != ',') {
            at++;
        }
        at++;
    }
}

/* Takes the meaning of one complete header line: [line_start, colon) name, then value to cr. */
static int field(struct sxe_http_parser *parser, const char *data, size_t cr,
                 const struct sxe_http_limits *limits)
{
    const char *name = data + parser->line_start;
    size_t name_len = parser->colon - parser->line_start;
    size_t start = parser->colon + 1;
    size_t end = cr;
    uint64_t length;

    if (++parser->headers > limits->header_count) {
        return -431;
    }
    trim(data, &start, &end);
    const char *value = data + start;
    size_t value_len = end - start;

    if (name_is(name, name_len, "content-length")) {
        if (content_length(value, value_len, &length) < 0 || (parser->flags & F_CHUNKED) ||
            ((parser->flags & F_CONTENT_LENGTH) && length != parser->content_length)) {
            return -400;
        }
        parser->flags |= F_CONTENT_LENGTH;
        parser->content_length = length;
    } else if (name_is(name, name_len, "transfer-encoding")) {
        if ((parser->flags & (F_CONTENT_LENGTH | F_CHUNKED)) != 0) {
            return -400; /* with Content-Length, or a coding after chunked */
        }
        if (!name_is(value, value_len, "chunked")) {
            return -501; /* a coding sxe does not implement, or chunked not alone and last */
        }
        parser->flags |= F_CHUNKED;
    } else if (name_is(name, name_len, "connection")) {
        connection_tokens(parser, value, value_len);
    } else if (name_is(name, name_len, "host")) {
        parser->host_count = parser->host_count < UINT8_MAX ? parser->host_count + 1 : UINT8_MAX;
    } else if (name_is(name, name_len, "upgrade")) {
        parser->flags |= F_UPGRADE_FIELD;
    } else if (name_is(name, name_len, "expect")) {
        if (name_is(value, value_len, "100-continue")) {
            parser->flags |= F_EXPECT;
        }
    }
    return 0;
}

/* The head is complete and valid: fill in the request's pointers with one pass over its lines. */
static int finish_head(struct sxe_http_parser *parser, const char *data, size_t head_len,
                       const struct sxe_http_limits *limits, struct sxe_http_request *request)
{
    const char *end = data + head_len;
    const char *method = data + parser->start;
    const char *space = memchr(method, ' ', (size_t)(end - method));
    const char *target = space + 1;
    const char *target_end = memchr(target, ' ', (size_t)(end - target));

    if ((parser->flags & F_CHUNKED) && parser->minor_version == 0) {
        return -400; /* HTTP/1.0 has no chunked framing: smuggling bait */
    }
    if ((parser->flags & F_CONTENT_LENGTH) && parser->content_length > limits->body_bytes) {
        return -413;
    }
    request->method = method;
    request->method_len = (size_t)(space - method);
    request->target = target;
    request->target_len = (size_t)(target_end - target);
    request->minor_version = parser->minor_version;
    request->chunked = (parser->flags & F_CHUNKED) != 0;
    request->content_length = request->chunked ? 0 : parser->content_length;
    request->has_body = request->chunked || request->content_length > 0;
    request->keep_alive = (parser->connection & C_CLOSE) == 0 &&
                          (parser->minor_version == 1 || (parser->connection & C_KEEP_ALIVE));
    request->upgrade = (parser->flags & F_STOP_METHOD) ||
                       ((parser->connection & C_UPGRADE) && (parser->flags & F_UPGRADE_FIELD));
    request->expect_continue = (parser->flags & F_EXPECT) != 0;
    request->host_count = parser->host_count;

    request->header_count = 0;
    const char *line = (const char *)memchr(method, '\n', (size_t)(end - method)) + 1;
    while (line < end - 2) {
        const char *colon = memchr(line, ':', (size_t)(end - line));
        const char *cr = memchr(colon, '\r', (size_t)(end - colon));
        size_t start = (size_t)(colon + 1 - data);
        size_t stop = (size_t)(cr - data);
        trim(data, &start, &stop);
        request->headers[request->header_count++] =
            (struct sxe_http_header){.name = line,
                                     .name_len = (size_t)(colon - line),
                                     .value = data + start,
                                     .value_len = stop - start};
        line = cr + 2;
    }

    /* Ready for the body, then the next request. */
    uint8_t minor_version = parser->minor_version;
    uint64_t length = request->content_length;
    sxe_http_parser_init(parser);
    parser->minor_version = minor_version;
    parser->body_state = request->chunked ? B_SIZE_START : B_LENGTH;
    parser->body_left = length;
    return (int)head_len;
}

int sxe_http_parse_head(struct sxe_http_parser *parser, const char *data, size_t len,
                        const struct sxe_http_limits *limits, struct sxe_http_request *request)
{
    size_t at = parser->scanned;
    int rc;

    while (at < len) {
        unsigned char c = (unsigned char)data[at];

        if (parser->state < S_FIELD_START && at - parser->start >= limits->request_line) {
            return -414;
        }
        if (at - parser->start >= limits->header_bytes) {
            return -431;
        }
        switch (parser->state) {
        case S_METHOD:
            if (c == '\r' && at == parser->start) {
                parser->state = S_EMPTY_LINE_LF;
            } else if (c == ' ') {
                unsigned flags = parser->flags;
                if (at == parser->start) {
                    return -400;
                }
                if (!is_method(data + parser->start, at - parser->start, &flags)) {
                    return -501;
                }
                parser->flags = (uint8_t)flags;
                parser->state = S_TARGET_START;
            } else if ((classes[c] & TCHAR) == 0) {
                return -400;
            }
            at++;
            break;
        case S_EMPTY_LINE_LF:
            if (c != '\n') {
                return -400;
            }
            parser->start = (uint32_t)(at + 1);
            parser->state = S_METHOD;
            at++;
            break;
        case S_TARGET_START:
            if ((classes[c] & TARGET) == 0) {
                return -400;
            }
            parser->state = S_TARGET;
            at++;
            break;
        case S_TARGET:
            at = skip(data, at, len, TARGET);
            if (at == len) {
                break;
            }
            if (data[at] != ' ') {
                return -400;
            }
            parser->state = S_VERSION;
            parser->colon = (uint32_t)++at; /* where the version starts */
            break;
        case S_VERSION: {
            static const char version[] = "HTTP/1.";
            size_t index = at - parser->colon;
            if (index < 5) {
                if (c != (unsigned char)version[index]) {
                    return -400;
                }
            } else if (index == 5) {
                if (c < '0' || c > '9') {
                    return -400;
                }
                if (c != '1') {
                    return -505;
                }
            } else if (index == 6) {
                if (c != '.') {
                    return -400;
                }
            } else if (index == 7) {
                if (c < '0' || c > '9') {
                    return -400;
                }
                if (c > '1') {
                    return -505;
                }
                parser->minor_version = (uint8_t)(c - '0');
            } else if (c == '\r') {
                parser->state = S_LINE_LF;
            } else {
                return -400;
            }
            at++;
            break;
        }
        case S_LINE_LF:
        case S_VALUE_LF:
            if (c != '\n') {
                return -400;
            }
            if (parser->state == S_VALUE_LF && (rc = field(parser, data, at - 1, limits)) < 0) {
                return rc;
            }
            parser->state = S_FIELD_START;
            at++;
            break;
        case S_FIELD_START:
            if (c == '\r') {
                parser->state = S_END_LF;
            } else if (classes[c] & TCHAR) {
                parser->line_start = (uint32_t)at;
                parser->state = S_NAME;
            } else {
                return -400; /* obsolete line folding, whitespace, or a bad name byte */
            }
            at++;
            break;
        case S_NAME:
            at = skip(data, at, len, TCHAR);
            if (at == len) {
                break;
            }
            if (data[at] != ':') {
                return -400; /* whitespace before the colon, or a byte that is not a tchar */
            }
            parser->colon = (uint32_t)at++;
            parser->state = S_VALUE;
            break;
        case S_VALUE:
            at = skip(data, at, len, VALUE);
            if (at == len) {
                break;
            }
            if (data[at] != '\r') {
                return -400; /* NUL, a bare LF, or another control byte */
            }
            parser->state = S_VALUE_LF;
            at++;
            break;
        default: /* S_END_LF */
            if (c != '\n') {
                return -400;
            }
            return finish_head(parser, data, at + 1, limits, request);
        }
    }
    /* The skipping loops may have run past a limit on the last bytes. */
    if (parser->state < S_FIELD_START && at - parser->start >= limits->request_line) {
        return -414;
    }
    if (at - parser->start >= limits->header_bytes) {
        return -431;
    }
    parser->scanned = (uint32_t)at;
    return 0;
}

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

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

long sxe_http_parse_body(struct sxe_http_parser *parser, const char *data, size_t len,
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
            if ((digit = hex_value(c)) >= 0) {
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
            if (classes[c] & TCHAR) {
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
            if ((classes[c] & TCHAR) == 0) {
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
            } else if ((classes[c] & QDTEXT) == 0) {
                return -400;
            }
            break;
        case B_EXT_ESCAPE:
            if ((classes[c] & VALUE) == 0) {
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
            } else if (classes[c] & TCHAR) {
                parser->body_state = B_TRAILER_NAME;
            } else {
                return -400;
            }
            break;
        case B_TRAILER_NAME:
            if (c == ':') {
                parser->body_state = B_TRAILER_VALUE;
            } else if ((classes[c] & TCHAR) == 0) {
                return -400;
            }
            break;
        case B_TRAILER_VALUE:
            if (c == '\r') {
                parser->body_state = B_TRAILER_LF;
            } else if ((classes[c] & VALUE) == 0) {
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

const struct sxe_http_header *sxe_http_find_header(const struct sxe_http_request *request,
                                                   const char *name)
{
    for (unsigned i = 0; i < request->header_count; i++) {
        if (name_is(request->headers[i].name, request->headers[i].name_len, name)) {
            return &request->headers[i];
        }
    }
    return NULL;
}
