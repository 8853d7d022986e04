/*
 * RESP, the Redis protocol, versions 2 and 3: replies read, commands written.
 *
 * A reply is read in two passes over bytes that stay where they arrived (the connection's
 * buffer): the first checks that the whole reply is there and counts the replies it holds; the
 * second fills that many nodes, each aggregate's elements side by side, its strings pointing
 * into the bytes. Nothing is allocated but the nodes, and nothing is copied. A reply not yet
 * whole is looked at again from its start when more bytes come: replies are short, and the
 * bytes a reply may take are bounded by the connection's buffer.
 *
 * The reading trusts nothing: every length is checked against the bytes there, every line must
 * end in CRLF, integers must be digits that fit, and aggregates nest at most SXE__RESP_DEPTH deep.
 * An attribute (RESP3's |) is read and dropped; streamed strings and aggregates (RESP3's ?
 * lengths, which Redis never sends) are refused.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "redis.h"

#define ELEMENTS_MAX (1 << 28) /* more than any buffer can hold: refused at once */
#define LINE_MAX_LEN 64        /* a number's text, at most */

enum { WHOLE = 0, MORE = 1, BAD = 2 };

struct walk {
    const char *end;
    struct sxe_redis_reply *next; /* building: the next free node */
    size_t nodes;                 /* scanning: the nodes counted */
    int depth;
    int state; /* WHOLE, MORE or BAD */
};

/* The line after the kind byte at kind: its end (at its CR), or NULL with the walk's state set.
 * Only a status or an error is a line of any length; any other is short, and a long one is bad. */
static const char *line(struct walk *w, const char *kind)
{
    const char *p = kind + 1;
    const char *cr = memchr(p, '\r', (size_t)(w->end - p));

    if (cr == NULL || cr + 1 >= w->end) {
        bool long_line = cr == NULL && w->end - p > LINE_MAX_LEN;
        w->state = long_line && *kind != '+' && *kind != '-' ? BAD : MORE;
        return NULL;
    }
    if (cr[1] != '\n') {
        w->state = BAD;
        return NULL;
    }
    return cr;
}

/* A signed decimal from p to end, in *value; false for anything else. */
static bool decimal(const char *p, const char *end, int64_t *value)
{
    bool negative = p < end && *p == '-';
    uint64_t n = 0;

    p += negative;
    if (p == end) {
        return false;
    }
    for (; p < end; p++) {
        if (*p < '0' || *p > '9' || n > (UINT64_MAX - 9) / 10) {
            return false;
        }
        n = n * 10 + (uint64_t)(*p - '0');
    }
    if (n > (uint64_t)INT64_MAX + negative) {
        return false;
    }
    *value = negative ? (int64_t)(0 - n) : (int64_t)n;
    return true;
}

static const char *value(struct walk *w, const char *p, struct sxe_redis_reply *node);

/* An aggregate's n elements from p: counted, or built side by side. */
static const char *elements(struct walk *w, const char *p, int64_t n, struct sxe_redis_reply *node)
{
    struct sxe_redis_reply *first = NULL;

    if (n < 0 || n > ELEMENTS_MAX || ++w->depth > SXE__RESP_DEPTH) {
        w->state = BAD;
        return NULL;
    }
    if ((size_t)n * 3 > (size_t)(w->end - p)) { /* each takes 3 bytes at least */
        w->state = MORE;
        return NULL;
    }
    if (node != NULL) {
        first = w->next;
        w->next += n;
        node->element = first;
    } else {
        w->nodes += (size_t)n;
    }
    for (int64_t i = 0; i < n && p != NULL; i++) {
        p = value(w, p, first ? &first[i] : NULL);
    }
    w->depth--;
    return p;
}

/* A string of n bytes after its header line, ending in CRLF. */
static const char *bulk(struct walk *w, const char *p, int64_t n, struct sxe_redis_reply *out)
{
    if (n < 0 || n > INT32_MAX) {
        w->state = BAD;
        return NULL;
    }
    if ((size_t)(w->end - p) < (size_t)n + 2) {
        w->state = MORE;
        return NULL;
    }
    if (p[n] != '\r' || p[n + 1] != '\n') {
        w->state = BAD;
        return NULL;
    }
    out->str = p;
    out->len = (size_t)n;
    return p + n + 2;
}

static bool number(const char *p, const char *end, double *out)
{
    char text[LINE_MAX_LEN + 1], *stop;

    if (end - p > LINE_MAX_LEN || end == p) {
        return false;
    }
    memcpy(text, p, (size_t)(end - p));
    text[end - p] = '\0';
    *out = strtod(text, &stop);
    return *stop == '\0';
}

/* One reply at p (its kind's byte): the bytes past it, or NULL with w->state MORE or BAD. */
/* A string of a kind ($ bulk, ! error, = verbatim) of n bytes at p, past its header. */
static const char *string(struct walk *w, const char *p, char kind, int64_t n,
                          struct sxe_redis_reply *out)
{
    if (n == -1 && kind == '$') { /* RESP2's null string */
        *out = (struct sxe_redis_reply){.type = SXE_REDIS_NIL};
        return p;
    }
    out->type = kind == '$' ? SXE_REDIS_STRING : kind == '!' ? SXE_REDIS_ERROR : SXE_REDIS_VERBATIM;
    if ((p = bulk(w, p, n, out)) == NULL) {
        return NULL;
    }
    if (out->type == SXE_REDIS_VERBATIM) { /* "txt:" first */
        if (n < 4 || out->str[3] != ':') {
            w->state = BAD;
            return NULL;
        }
        out->str += 4, out->len -= 4;
    }
    return p;
}

/* An aggregate of a kind (* array, ~ set, > push, % map of n pairs) at p, past its header. */
static const char *aggregate(struct walk *w, const char *p, char kind, int64_t n,
                             struct sxe_redis_reply *out, bool building)
{
    if (n == -1 && kind == '*') { /* RESP2's null array */
        *out = (struct sxe_redis_reply){.type = SXE_REDIS_NIL};
        return p;
    }
    out->type = kind == '*'   ? SXE_REDIS_ARRAY
                : kind == '~' ? SXE_REDIS_SET
                : kind == '>' ? SXE_REDIS_PUSH
                              : SXE_REDIS_MAP;
    if (kind == '%') {
        n = n > ELEMENTS_MAX / 2 ? -1 : n * 2;
    }
    out->str = NULL;
    out->len = (size_t)(n < 0 ? 0 : n);
    return elements(w, p, n, building ? out : NULL);
}

/* An attribute of n pairs at p (a map about the reply that follows), read and dropped: then the
 * reply itself. Chained attributes count against the depth. */
static const char *attribute(struct walk *w, const char *p, int64_t n, struct sxe_redis_reply *node)
{
    struct sxe_redis_reply *map = node ? w->next++ : NULL;

    w->nodes += node == NULL;
    if (n > ELEMENTS_MAX / 2 || ++w->depth > SXE__RESP_DEPTH) {
        w->state = BAD;
        return NULL;
    }
    if (map != NULL) {
        *map = (struct sxe_redis_reply){.type = SXE_REDIS_MAP, .len = (size_t)n * 2};
    }
    if ((p = elements(w, p, n * 2, map)) == NULL) {
        return NULL;
    }
    p = value(w, p, node);
    w->depth--;
    return p;
}

/* One reply at p (its kind's byte): the bytes past it, or NULL with w->state MORE or BAD. */
static const char *value(struct walk *w, const char *p, struct sxe_redis_reply *node)
{
    struct sxe_redis_reply ignored, *out = node ? node : &ignored;
    const char *cr, *text;
    int64_t n = 0;

    if (p >= w->end) {
        w->state = MORE;
        return NULL;
    }
    if ((cr = line(w, p)) == NULL) {
        return NULL;
    }
    text = p + 1;
    *out = (struct sxe_redis_reply){.str = text, .len = (size_t)(cr - text)};
    if (*p != '\0' && strchr("$*%~>|!=:", *p) != NULL && !decimal(text, cr, &n)) {
        w->state = BAD; /* a count or a length that is not one: streamed ones (?) included */
        return NULL;
    }
    p = cr + 2;
    switch (text[-1]) {
    case '+':
        out->type = SXE_REDIS_STATUS;
        return p;
    case '-':
        out->type = SXE_REDIS_ERROR;
        return p;
    case ':':
        *out = (struct sxe_redis_reply){.type = SXE_REDIS_INTEGER, .integer = n};
        return p;
    case '_':
        *out = (struct sxe_redis_reply){.type = SXE_REDIS_NIL};
        return cr == text ? p : (w->state = BAD, NULL);
    case '#':
        *out = (struct sxe_redis_reply){.type = SXE_REDIS_BOOLEAN, .integer = *text == 't'};
        return cr == text + 1 && (*text == 't' || *text == 'f') ? p : (w->state = BAD, NULL);
    case ',':
        out->type = SXE_REDIS_DOUBLE;
        return number(text, cr, &out->number) ? p : (w->state = BAD, NULL);
    case '(':
        out->type = SXE_REDIS_BIGNUM;
        return cr > text && strspn(text + (*text == '-'), "0123456789") ==
                                (size_t)(cr - text) - (*text == '-')
                   ? p
                   : (w->state = BAD, NULL);
    case '$':
    case '!':
    case '=':
        return string(w, p, text[-1], n, out);
    case '*':
    case '~':
    case '>':
    case '%':
        return aggregate(w, p, text[-1], n, out, node != NULL);
    case '|':
        return attribute(w, p, n, node);
    default:
        w->state = BAD;
        return NULL;
    }
}

ssize_t sxe__resp_scan(const char *data, size_t len, size_t *nodes)
{
    struct walk w = {.end = data + len, .nodes = 1};
    const char *past = value(&w, data, NULL);

    if (past == NULL) {
        return w.state == BAD ? -EPROTO : 0;
    }
    *nodes = w.nodes;
    return past - data;
}

void sxe__resp_build(const char *data, size_t len, struct sxe_redis_reply *nodes)
{
    struct walk w = {.end = data + len, .next = nodes + 1};

    (void)value(&w, data, nodes);
}

/* The bytes of a header: its kind, n in decimal, CRLF. */
static size_t header_len(size_t n)
{
    size_t len = 4;

    for (; n >= 10; n /= 10) {
        len++;
    }
    return len;
}

static char *header(char *at, char kind, size_t n)
{
    char digits[24];
    int count = 0;

    *at++ = kind;
    do {
        digits[count++] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    while (count > 0) {
        *at++ = digits[--count];
    }
    *at++ = '\r';
    *at++ = '\n';
    return at;
}

size_t sxe__resp_command(char *out, size_t size, unsigned argc, const char *const *argv,
                         const size_t *len)
{
    size_t need = header_len(argc);

    for (unsigned i = 0; i < argc; i++) {
        size_t n = len ? len[i] : strlen(argv[i]);
        need += header_len(n) + n + 2;
    }
    if (need > size) {
        return need;
    }
    char *at = header(out, '*', argc);
    for (unsigned i = 0; i < argc; i++) {
        size_t n = len ? len[i] : strlen(argv[i]);
        at = header(at, '$', n);
        memcpy(at, argv[i], n);
        at += n;
        *at++ = '\r';
        *at++ = '\n';
    }
    return need;
}

/* The nodes and bytes a copy of reply takes. */
static void measure(const struct sxe_redis_reply *reply, size_t *nodes, size_t *bytes)
{
    bool aggregate = reply->element != NULL || reply->type == SXE_REDIS_ARRAY ||
                     reply->type == SXE_REDIS_MAP || reply->type == SXE_REDIS_SET ||
                     reply->type == SXE_REDIS_PUSH;

    if (!aggregate) {
        *bytes += reply->str ? reply->len + 1 : 0;
        return;
    }
    *nodes += reply->len;
    for (size_t i = 0; i < reply->len; i++) {
        measure(&reply->element[i], nodes, bytes);
    }
}

static void copy(const struct sxe_redis_reply *from, struct sxe_redis_reply *to,
                 struct sxe_redis_reply **next, char **bytes)
{
    *to = *from;
    if (from->element != NULL) {
        struct sxe_redis_reply *elements = *next;
        *next += from->len;
        to->element = elements;
        for (size_t i = 0; i < from->len; i++) {
            copy(&from->element[i], &elements[i], next, bytes);
        }
    } else if (from->str != NULL) {
        memcpy(*bytes, from->str, from->len);
        (*bytes)[from->len] = '\0';
        to->str = *bytes;
        *bytes += from->len + 1;
    }
}

struct sxe_redis_reply *sxe__resp_copy(const struct sxe_redis_reply *reply)
{
    size_t nodes = 1, bytes = 0;
    struct sxe_redis_reply *block, *next;
    char *strings;

    measure(reply, &nodes, &bytes);
    if ((block = malloc(nodes * sizeof(*block) + bytes)) == NULL) {
        return NULL;
    }
    next = block + 1;
    strings = (char *)(block + nodes);
    copy(reply, block, &next, &strings);
    return block;
}
