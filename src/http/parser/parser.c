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
 * of ordinary characters 16 bytes at a time with SSE2, which every x86-64 CPU has; token
 * characters (methods, header names) with SSSE3's byte shuffle where the CPU has it, chosen once at
 * start-up; a table lookup per byte elsewhere. A header line whole in the buffer falls through
 * its name, value and CRLF states without going back to the dispatch between them.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <tmmintrin.h>
#endif

#include "parser.h"
#include "sxe/http_parser.h"

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

unsigned char sxe__http_classes[256];
#if defined(__x86_64__)
static unsigned char
    tchar_by_low[16]; /* for skip_tchar_ssse3: bit h set if (h << 4 | low) is a tchar */
#endif

static void __attribute__((constructor)) init_classes(void)
{
    static const char tchar_extra[] = "!#$%&'*+-.^_`|~";
    static const char host_extra[] = "-._~!$&'()*+;=";

    for (unsigned c = 0; c < 256; c++) {
        unsigned class = 0;
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c != 0 && strchr(tchar_extra, (int)c) != NULL)) {
            class |= TCHAR;
        }
        if ((c >= 0x21 && c <= 0x7e) || c >= 0x80 || c == ' ' || c == '\t') {
            class |= VALUE;
        }
        if (c >= 0x21 && c <= 0x7e && c != '#') { /* a fragment is never sent (RFC 9112 §3.2) */
            class |= TARGET;
        }
        if ((class & VALUE) && c != '"' && c != '\\') {
            class |= QDTEXT;
        }
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c != 0 && strchr(host_extra, (int)c) != NULL)) {
            class |= HOST;
        }
        sxe__http_classes[c] = (unsigned char)class;
#if defined(__x86_64__)
        if ((class & TCHAR) && c < 0x80) {
            tchar_by_low[c & 0x0f] |= (unsigned char)(1u << (c >> 4));
        }
#endif
    }
    sxe__http_parser_use_ssse3(true);
}

/* Returns the index of the first byte at or after from that is not in class, or len. */
static inline size_t skip_scalar(const char *data, size_t from, size_t len, unsigned class)
{
    while (from < len && (sxe__http_classes[(unsigned char)data[from]] & class)) {
        from++;
    }
    return from;
}

#if defined(__SSE2__)
/*
 * For the classes with the longest runs, field values and request targets: a mask, one bit per
 * byte of the 16 at data, of the bytes that end a run. Bytes are compared unsigned by flipping
 * their top bit and comparing signed. A value run ends at a control byte other than HTAB, or DEL
 * (obs-text, 0x80 and up, is allowed); a target run at anything outside 0x21..0x7e, or '#'.
 */
static inline unsigned stops16(const char *data, unsigned class)
{
    const __m128i block = _mm_loadu_si128((const __m128i *)data);
    const __m128i flipped = _mm_xor_si128(block, _mm_set1_epi8((char)0x80));
    __m128i stop;

    if (class == VALUE) {
        __m128i control = _mm_cmplt_epi8(flipped, _mm_set1_epi8((char)(0x20 ^ 0x80)));
        control = _mm_andnot_si128(_mm_cmpeq_epi8(block, _mm_set1_epi8('\t')), control);
        stop = _mm_or_si128(control, _mm_cmpeq_epi8(block, _mm_set1_epi8(0x7f)));
    } else if (class == TCHAR) {
        /* Outside 0x21..0x7e, or one of the delimiters "(),/:;<=>?@[\]{} */
        stop = _mm_or_si128(_mm_cmplt_epi8(flipped, _mm_set1_epi8((char)(0x21 ^ 0x80))),
                            _mm_cmpgt_epi8(flipped, _mm_set1_epi8((char)(0x7e ^ 0x80))));
        stop = _mm_or_si128(stop, _mm_cmpeq_epi8(block, _mm_set1_epi8('"')));
        stop = _mm_or_si128(stop, _mm_cmpeq_epi8(block, _mm_set1_epi8(',')));
        stop = _mm_or_si128(stop, _mm_cmpeq_epi8(block, _mm_set1_epi8('/')));
        stop = _mm_or_si128(stop, _mm_cmpeq_epi8(block, _mm_set1_epi8('{')));
        stop = _mm_or_si128(stop, _mm_cmpeq_epi8(block, _mm_set1_epi8('}')));
        /* The ranges ( ), : to @, and [ to ]: signed compares on the flipped bytes. */
        const __m128i all = _mm_set1_epi8((char)0xff);
#define IN_RANGE(lo, hi)                                                                           \
    _mm_andnot_si128(_mm_or_si128(_mm_cmplt_epi8(flipped, _mm_set1_epi8((char)((lo) ^ 0x80))),     \
                                  _mm_cmpgt_epi8(flipped, _mm_set1_epi8((char)((hi) ^ 0x80)))),    \
                     all)
        stop = _mm_or_si128(stop, IN_RANGE(0x28, 0x29));
        stop = _mm_or_si128(stop, IN_RANGE(0x3a, 0x40));
        stop = _mm_or_si128(stop, IN_RANGE(0x5b, 0x5d));
#undef IN_RANGE
    } else {
        stop = _mm_or_si128(_mm_cmplt_epi8(flipped, _mm_set1_epi8((char)(0x21 ^ 0x80))),
                            _mm_cmpgt_epi8(flipped, _mm_set1_epi8((char)(0x7e ^ 0x80))));
        stop = _mm_or_si128(stop, _mm_cmpeq_epi8(block, _mm_set1_epi8('#')));
    }
    return (unsigned)_mm_movemask_epi8(stop);
}
#endif

/*
 * The same, 16 bytes at a time with SSE2 (which every x86-64 CPU has). A
 * short tail is checked with one more block that ends at len, ignoring the bytes it re-reads, so
 * nothing past len is ever read.
 */
static inline size_t skip(const char *data, size_t from, size_t len, unsigned class)
{
#if defined(__SSE2__)
    if (len >= 16) {
        while (from + 16 <= len) {
            unsigned stops = stops16(data + from, class);
            if (stops != 0) {
                return from + (size_t)__builtin_ctz(stops);
            }
            from += 16;
        }
        if (from < len) {
            unsigned stops = stops16(data + len - 16, class) >> (16 - (len - from));
            return stops != 0 ? from + (size_t)__builtin_ctz(stops) : len;
        }
        return from;
    }
#endif
    return skip_scalar(data, from, len, class);
}

/* The first byte c at or after from, which the caller knows is there before len. */
static inline size_t find(const char *data, size_t from, size_t len, char c)
{
#if defined(__SSE2__)
    const __m128i wanted = _mm_set1_epi8(c);
    while (from + 16 <= len) {
        unsigned hits = (unsigned)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(data + from)), wanted));
        if (hits != 0) {
            return from + (size_t)__builtin_ctz(hits);
        }
        from += 16;
    }
#endif
    while (data[from] != c) {
        from++;
    }
    (void)len;
    return from;
}

#if defined(__x86_64__)
/*
 * Token characters with SSSE3: each byte's low nibble picks, from one table, a bit per high nibble
 * 0 to 7 whose pair is a tchar; its high nibble picks that bit from another. Eight instructions
 * per 16 bytes, where SSE2 needs about thirty for this class.
 */

__attribute__((target("ssse3"))) static size_t skip_tchar_ssse3(const char *data, size_t from,
                                                                size_t len)
{
    const __m128i by_low = _mm_loadu_si128((const __m128i *)tchar_by_low);
    const __m128i by_high =
        _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, (char)128, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m128i nibble = _mm_set1_epi8(0x0f);

    if (len < 16) {
        return skip_scalar(data, from, len, TCHAR);
    }
    for (;;) {
        size_t at = from + 16 <= len ? from : len - 16; /* the tail: a block that ends at len */
        __m128i block = _mm_loadu_si128((const __m128i *)(data + at));
        __m128i low = _mm_shuffle_epi8(by_low, _mm_and_si128(block, nibble));
        __m128i high = _mm_shuffle_epi8(by_high, _mm_and_si128(_mm_srli_epi16(block, 4), nibble));
        unsigned stops = (unsigned)_mm_movemask_epi8(
                             _mm_cmpeq_epi8(_mm_and_si128(low, high), _mm_setzero_si128())) >>
                         (from - at);
        if (stops != 0) {
            return from + (size_t)__builtin_ctz(stops);
        }
        if (at + 16 >= len) {
            return len;
        }
        from += 16;
    }
}
#endif

static size_t skip_tchar_sse2(const char *data, size_t from, size_t len)
{
    return skip(data, from, len, TCHAR);
}

static size_t (*skip_tchar)(const char *data, size_t from, size_t len) = skip_tchar_sse2;

void sxe__http_parser_use_ssse3(bool use)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    skip_tchar = use && __builtin_cpu_supports("ssse3") ? skip_tchar_ssse3 : skip_tchar_sse2;
#else
    (void)use;
#endif
}

int sxe_http_parser_status(const struct sxe_http_parser *parser)
{
    return parser->refused != 0 ? 399 + parser->refused : 0;
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
    /* The common methods first; the rest are WebDAV and friends, as llhttp knows them. */
    static const struct {
        const char *name;
        size_t len;
    } methods[] = {
#define METHOD(name) {name, sizeof(name) - 1}
        METHOD("GET"),       METHOD("POST"),       METHOD("HEAD"),       METHOD("PUT"),
        METHOD("DELETE"),    METHOD("OPTIONS"),    METHOD("PATCH"),      METHOD("CONNECT"),
        METHOD("TRACE"),     METHOD("ACL"),        METHOD("BIND"),       METHOD("CHECKOUT"),
        METHOD("COPY"),      METHOD("LINK"),       METHOD("LOCK"),       METHOD("M-SEARCH"),
        METHOD("MERGE"),     METHOD("MKACTIVITY"), METHOD("MKCALENDAR"), METHOD("MKCOL"),
        METHOD("MOVE"),      METHOD("NOTIFY"),     METHOD("PRI"),        METHOD("PROPFIND"),
        METHOD("PROPPATCH"), METHOD("PURGE"),      METHOD("QUERY"),      METHOD("REBIND"),
        METHOD("REPORT"),    METHOD("SEARCH"),     METHOD("SOURCE"),     METHOD("SUBSCRIBE"),
        METHOD("UNBIND"),    METHOD("UNLINK"),     METHOD("UNLOCK"),     METHOD("UNSUBSCRIBE"),
#undef METHOD
    };

    if (len == 3 && memcmp(method, "GET", 3) == 0) { /* most requests: a compare of constants */
        return true;
    }
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        if (methods[i].len == len && memcmp(methods[i].name, method, len) == 0) {
            if ((len == 7 && memcmp(method, "CONNECT", 7) == 0) ||
                (len == 3 && memcmp(method, "PRI", 3) == 0)) {
                *flags |= F_STOP_METHOD;
            }
            return true;
        }
    }
    return false;
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

    if (len == 10 && sxe__http_name_is(value, len, "keep-alive")) { /* the usual value, alone */
        parser->connection |= C_KEEP_ALIVE;
        return;
    }

    while (at < len) {
        size_t end = at;
        while (end < len && value[end] != ',') {
            end++;
        }
        size_t start = at;
        sxe__http_trim(value, &start, &end);
        if (sxe__http_name_is(value + start, end - start, "close")) {
            parser->connection |= C_CLOSE;
        } else if (sxe__http_name_is(value + start, end - start, "keep-alive")) {
            parser->connection |= C_KEEP_ALIVE;
        } else if (sxe__http_name_is(value + start, end - start, "upgrade")) {
            parser->connection |= C_UPGRADE;
        }
        while (at < len && value[at] != ',') {
            at++;
        }
        at++;
    }
}

/* The value of the header line being finished: from after its colon to cr, trimmed. */
static inline const char *field_value(const struct sxe_http_parser *parser, const char *data,
                                      size_t cr, size_t *value_len)
{
    size_t start = parser->colon + 1;
    size_t end = cr;

    sxe__http_trim(data, &start, &end);
    *value_len = end - start;
    return data + start;
}

/*
 * Takes the meaning of one complete header line: [line_start, colon) is its name, and its value
 * runs to cr. Only the framing fields matter here; the length of the name picks the one name to
 * compare, so other fields cost a switch.
 */
static int field(struct sxe_http_parser *parser, const char *data, size_t cr,
                 const struct sxe_http_limits *limits)
{
    const char *name = data + parser->line_start;
    size_t name_len = parser->colon - parser->line_start;
    const char *value;
    size_t value_len;
    uint64_t length;

    if (++parser->headers > limits->header_count || parser->headers > SXE_HTTP_HEADERS_MAX) {
        return -431;
    }
    switch (name_len) {
    case 14:
        if (!sxe__http_name_is(name, name_len, "content-length")) {
            break;
        }
        value = field_value(parser, data, cr, &value_len);
        if (content_length(value, value_len, &length) < 0 || (parser->flags & F_CHUNKED) ||
            ((parser->flags & F_CONTENT_LENGTH) && length != parser->content_length)) {
            return -400;
        }
        parser->flags |= F_CONTENT_LENGTH;
        parser->content_length = length;
        break;
    case 17:
        if (!sxe__http_name_is(name, name_len, "transfer-encoding")) {
            break;
        }
        if (parser->flags & F_CONTENT_LENGTH) {
            return -400;
        }
        value = field_value(parser, data, cr, &value_len);
        return sxe__http_transfer_codings(parser, value, value_len);
    case 10:
        if (sxe__http_name_is(name, name_len, "connection")) {
            value = field_value(parser, data, cr, &value_len);
            connection_tokens(parser, value, value_len);
        }
        break;
    case 4:
        if (sxe__http_name_is(name, name_len, "host")) {
            value = field_value(parser, data, cr, &value_len);
            if (parser->host_count != 0 || !sxe__http_valid_host(value, value_len)) {
                return -400;
            }
            parser->host_count = 1;
            parser->host_at = (uint32_t)(value - data);
            parser->host_len = (uint32_t)value_len;
        }
        break;
    case 7:
        if (sxe__http_name_is(name, name_len, "upgrade")) {
            parser->flags |= F_UPGRADE_FIELD;
        }
        break;
    case 6:
        if (sxe__http_name_is(name, name_len, "expect")) {
            value = field_value(parser, data, cr, &value_len);
            if (sxe__http_name_is(value, value_len, "100-continue")) {
                parser->flags |= F_EXPECT;
            }
        }
        break;
    default:
        break;
    }
    return 0;
}

/* A header line is complete, its CR at cr: take its meaning, and record it when request is given.
 */
static inline int end_line(struct sxe_http_parser *parser, const char *data, size_t cr,
                           const struct sxe_http_limits *limits,
                           struct sxe_http_request_head *request)
{
    int rc;

    if ((rc = field(parser, data, cr, limits)) < 0) {
        return rc;
    }
    if (request != NULL) {
        struct sxe_http_header *header = &request->headers[parser->headers - 1];
        header->name = data + parser->line_start;
        header->name_len = parser->colon - parser->line_start;
        header->value = field_value(parser, data, cr, &header->value_len);
    }
    return 0;
}

/* The head is complete and valid: fill in the request's pointers with one pass over its lines. */
static int finish_head(struct sxe_http_parser *parser, const char *data, size_t head_len,
                       const struct sxe_http_limits *limits, struct sxe_http_request_head *request,
                       bool recorded)
{
    const char *end = data + head_len;

    if ((parser->flags & F_CHUNKED) && parser->minor_version == 0) {
        return -400; /* HTTP/1.0 has no chunked framing: smuggling bait */
    }
    if ((parser->flags & F_CONTENT_LENGTH) && parser->content_length > limits->body_bytes) {
        return -413;
    }
    if (!recorded) { /* the head began in an earlier call: find the request line's parts */
        const char *method = data + parser->start;
        const char *space = memchr(method, ' ', (size_t)(end - method));
        const char *target_end = memchr(space + 1, ' ', (size_t)(end - space - 1));
        request->method = method;
        request->method_len = (size_t)(space - method);
        request->target = space + 1;
        request->target_len = (size_t)(target_end - space - 1);
    }
    int rc = sxe__http_target_form(parser, data, request);
    if (rc < 0) {
        return rc;
    }
    request->minor_version = parser->minor_version;
    request->chunked = (parser->flags & F_CHUNKED) != 0;
    request->content_length = request->chunked ? 0 : parser->content_length;
    request->has_body = request->chunked || request->content_length > 0;
    request->keep_alive = (parser->connection & C_CLOSE) == 0 &&
                          (parser->minor_version == 1 || (parser->connection & C_KEEP_ALIVE));
    request->upgrade = (parser->connection & C_UPGRADE) && (parser->flags & F_UPGRADE_FIELD);
    request->tunnel = (parser->flags & F_STOP_METHOD) != 0;
    request->expect_continue = (parser->flags & F_EXPECT) != 0;
    request->host_count = parser->host_count;

    request->header_count = parser->headers;
    /* The lines are valid: a name runs to its colon, a value to its CR. */
    const char *line =
        recorded ? end
                 : (const char *)memchr(request->method, '\n', (size_t)(end - request->method)) + 1;
    for (unsigned index = 0; !recorded && line < end - 2; index++) {
        size_t colon = find(data, (size_t)(line - data), head_len, ':');
        size_t start = colon + 1;
        size_t stop = skip(data, start, head_len, VALUE);
        const char *cr = data + stop;
        sxe__http_trim(data, &start, &stop);
        request->headers[index] =
            (struct sxe_http_header){.name = line,
                                     .name_len = (size_t)(data + colon - line),
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

/*
 * Longer than 80 lines on purpose: the head's state machine is one loop with one switch, whose
 * states fall through into each other on the fast path (docs/http.md), so that a partial line is
 * never scanned twice; split into functions, that fall-through would be lost.
 */
static int parse_head(struct sxe_http_parser *parser, const char *data, size_t len,
                      const struct sxe_http_limits *limits, struct sxe_http_request_head *request)
{
    size_t at = parser->scanned;
    int rc;

    /*
     * A head that starts in this call can be recorded as its lines complete, since the bytes
     * cannot move before the call returns. One that started in an earlier call is recorded by a
     * second pass once it is complete.
     */
    bool whole = at == parser->start;

    /*
     * Bytes are scanned up to the limit that applies, never past it: the request line's limit
     * until its LF, the header section's after. Running into the limit is the refusal.
     */
    size_t limit = parser->start +
                   (parser->state < S_FIELD_START ? limits->request_line : limits->header_bytes);
    size_t stop = len < limit ? len : limit;

    while (at < stop) {
        unsigned char c = (unsigned char)data[at];

        switch (parser->state) {
        case S_METHOD:
            if (c == '\r' && at == parser->start) {
                parser->state = S_EMPTY_LINE_LF;
                at++;
                break;
            }
            if ((at = skip_tchar(data, at, stop)) == stop) {
                break;
            }
            c = (unsigned char)data[at];
            if (c == ' ') {
                unsigned flags = parser->flags;
                if (at == parser->start) {
                    return -400;
                }
                if (!is_method(data + parser->start, at - parser->start, &flags)) {
                    return -501;
                }
                if (whole) { /* finish_head need not find it again */
                    request->method = data + parser->start;
                    request->method_len = at - parser->start;
                }
                parser->flags = (uint8_t)flags;
                parser->state = S_TARGET_START;
            } else if ((sxe__http_classes[c] & TCHAR) == 0) {
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
            /* The request line's limit counts from its own start, wherever the call began. */
            limit = parser->start + limits->request_line;
            stop = len < limit ? len : limit;
            at++;
            break;
        case S_TARGET_START:
            if ((sxe__http_classes[c] & TARGET) == 0) {
                return -400;
            }
            parser->state = S_TARGET;
            at++;
            break;
        case S_TARGET:
            at = skip(data, at, stop, TARGET);
            if (at == stop) {
                break;
            }
            if (data[at] != ' ') {
                return -400;
            }
            if (whole) {
                request->target = request->method + request->method_len + 1;
                request->target_len = (size_t)(data + at - request->target);
            }
            parser->state = S_VERSION;
            parser->colon = (uint32_t)++at; /* where the version starts */
            break;
        case S_VERSION: {
            static const char version[] = "HTTP/1.";
            size_t index = at - parser->colon;
            /* The usual case, all eight bytes at hand: compare them at once. */
            if (index == 0 && stop - at >= 9 && memcmp(data + at, "HTTP/1.", 7) == 0 &&
                (data[at + 7] == '0' || data[at + 7] == '1') && data[at + 8] == '\r') {
                parser->minor_version = (uint8_t)(data[at + 7] - '0');
                parser->state = S_LINE_LF;
                at += 9;
                break;
            }
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
            if (c != '\n') {
                return -400;
            }
            parser->state = S_FIELD_START;
            limit = parser->start + limits->header_bytes;
            stop = len < limit ? len : limit;
            at++;
            break;
        case S_VALUE_LF:
            if (c != '\n') {
                return -400;
            }
            if ((rc = end_line(parser, data, at - 1, limits, whole ? request : NULL)) < 0) {
                return rc;
            }
            parser->state = S_FIELD_START;
            at++;
            break;
        case S_FIELD_START:
            if (c == '\r') {
                parser->state = S_END_LF;
                at++;
                break;
            }
            if ((sxe__http_classes[c] & TCHAR) == 0) {
                return -400; /* obsolete line folding, whitespace, or a bad name byte */
            }
            parser->line_start = (uint32_t)at++;
            parser->state = S_NAME;
            /* A whole line at hand goes through name, value and CRLF without leaving the case. */
            __attribute__((fallthrough));
        case S_NAME:
            at = skip_tchar(data, at, stop);
            if (at == stop) {
                break;
            }
            if (data[at] != ':') {
                return -400; /* whitespace before the colon, or a byte that is not a tchar */
            }
            parser->colon = (uint32_t)at++;
            parser->state = S_VALUE;
            __attribute__((fallthrough));
        case S_VALUE:
            at = skip(data, at, stop, VALUE);
            if (at == stop) {
                break;
            }
            if (data[at] != '\r') {
                return -400; /* NUL, a bare LF, or another control byte */
            }
            if (at + 1 < stop && data[at + 1] == '\n') { /* the LF is here too: the line is done */
                if ((rc = end_line(parser, data, at, limits, whole ? request : NULL)) < 0) {
                    return rc;
                }
                parser->state = S_FIELD_START;
                at += 2;
                break;
            }
            parser->state = S_VALUE_LF;
            at++;
            break;
        default: /* S_END_LF */
            if (c != '\n') {
                return -400;
            }
            return finish_head(parser, data, at + 1, limits, request, whole);
        }
    }
    if (at >= limit) {
        return parser->state < S_FIELD_START ? -414 : -431;
    }
    parser->scanned = (uint32_t)at;
    return 0;
}

int sxe_http_parse_request_head(struct sxe_http_parser *parser, const char *data, size_t len,
                                const struct sxe_http_limits *limits,
                                struct sxe_http_request_head *request)
{
    int rc = parse_head(parser, data, len, limits, request);

    return rc < 0 ? sxe__http_refuse_status(parser, rc) : rc;
}
