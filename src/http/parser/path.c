/*
 * Request paths in their one canonical form, for routing and for whatever a handler forwards or
 * opens: the form nginx matches its locations against. Two targets that name the same resource
 * must not be told apart by a prefix match, or "/api/../admin" passes a check on "/api/" and then
 * reaches "/admin" wherever it is resolved next (an upstream, a file system).
 *
 * Only what RFC 3986 §6.2.2 says is equivalent is changed: escapes of unreserved bytes are
 * decoded ("%2e" is "."), other escapes keep their meaning and get upper-case digits, dot
 * segments are resolved (§5.2.4), and empty segments ("//") collapse, as nginx's merge_slashes
 * does. A reserved byte stays escaped ("%2F" is not a separator), so the result is still a path in
 * its encoded form, fit to be sent on as it is. Also here: percent-decoding
 * (sxe_http_percent_decode()), for what a handler reads of a query or a path.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "parser.h"
#include "sxe/http.h"

/* RFC 3986 §2.3: ALPHA / DIGIT / "-" / "." / "_" / "~". */
static bool unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

bool sxe_http_path_is_normal(const char *path, size_t len)
{
    for (size_t at = 0; at < len; at++) {
        if (path[at] == '%') {
            return false;
        }
        if (path[at] != '/' || at + 1 == len) {
            continue;
        }
        /* "//", or a segment that is "." or "..". */
        const char *next = path + at + 1, *end = path + len;
        if (next[0] == '/' ||
            (next[0] == '.' && (next + 1 == end || next[1] == '/' ||
                                (next[1] == '.' && (next + 2 == end || next[2] == '/'))))) {
            return false;
        }
    }
    return true;
}

/*
 * Writing never overtakes reading: each byte written stands for at least one read, so in and out
 * may be the same buffer.
 */
ssize_t sxe_http_path_normalize(const char *in, size_t len, char *out, size_t size)
{
    static const char digits[] = "0123456789ABCDEF";
    size_t written = 0;

    if (len == 0 || in[0] != '/') {
        return -EINVAL;
    }
    if (size <= len) {
        return -ENOBUFS; /* the result may be as long as the path */
    }
    for (size_t at = 0; at < len;) {
        while (at < len && in[at] == '/') { /* one separator, however many were written */
            at++;
        }
        size_t segment = written;
        out[written++] = '/';
        while (at < len && in[at] != '/') {
            int high, low;
            if (in[at] != '%') {
                out[written++] = in[at++];
                continue;
            }
            if (at + 2 >= len || (high = sxe__http_hex((unsigned char)in[at + 1])) < 0 ||
                (low = sxe__http_hex((unsigned char)in[at + 2])) < 0) {
                return -EINVAL;
            }
            unsigned char c = (unsigned char)(high << 4 | low);
            at += 3;
            if (unreserved(c)) {
                out[written++] = (char)c;
            } else {
                out[written++] = '%';
                out[written++] = digits[c >> 4];
                out[written++] = digits[c & 15];
            }
        }
        size_t name_len = written - segment - 1;
        const char *name = out + segment + 1;
        bool dot = name_len == 1 && name[0] == '.';
        bool dots = name_len == 2 && name[0] == '.' && name[1] == '.';
        if (!dot && !dots) {
            continue;
        }
        written = segment;
        if (dots) {
            if (written == 0) {
                return -EACCES; /* above the root */
            }
            while (out[--written] != '/') { /* the segment before goes too */
            }
        }
        if (at == len) {
            out[written++] = '/'; /* "/a/." is "/a/", "/a/b/.." is "/a/" */
        }
    }
    out[written] = '\0';
    return (ssize_t)written;
}

ssize_t sxe_http_path_encode(const char *in, size_t len, char *out, size_t size)
{
    static const char digits[] = "0123456789ABCDEF";
    size_t written = 0;

    for (size_t at = 0; at < len; at++) {
        unsigned char c = (unsigned char)in[at];
        size_t need = unreserved(c) || c == '/' ? 1 : 3;
        if (written + need >= size) {
            return -ENOBUFS;
        }
        if (need == 1) {
            out[written++] = (char)c;
        } else {
            out[written++] = '%';
            out[written++] = digits[c >> 4];
            out[written++] = digits[c & 15];
        }
    }
    if (size == 0) {
        return -ENOBUFS;
    }
    out[written] = '\0';
    return (ssize_t)written;
}

int sxe_http_percent_decode_byte(const char *in, size_t len, size_t *at, bool plus_is_space)
{
    char c = in[(*at)++];
    int high, low;

    if (c == '+' && plus_is_space) {
        return ' ';
    }
    if (c != '%') {
        return (unsigned char)c;
    }
    if (*at + 2 > len || (high = sxe__http_hex((unsigned char)in[*at])) < 0 ||
        (low = sxe__http_hex((unsigned char)in[*at + 1])) < 0) {
        return -1;
    }
    *at += 2;
    return high << 4 | low;
}

ssize_t sxe_http_percent_decode(const char *in, size_t len, char *out, size_t size,
                                bool plus_is_space)
{
    size_t used = 0;

    for (size_t at = 0; at < len;) {
        int c = sxe_http_percent_decode_byte(in, len, &at, plus_is_space);
        if (c < 0) {
            return -EINVAL;
        }
        if (used + 1 >= size) {
            return -ENOBUFS;
        }
        out[used++] = (char)c;
    }
    if (size == 0) {
        return -ENOBUFS;
    }
    out[used] = '\0';
    return (ssize_t)used;
}
