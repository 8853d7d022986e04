/*
 * A JSON string writer. Valid UTF-8 is copied as it is; every byte that would make the string
 * invalid JSON is escaped or replaced, so a handler may quote what a client sent.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "sxe/json.h"
#include "utf8.h"

/* The length of the whole, valid UTF-8 sequence at text, or 0. */
static size_t whole_sequence(const unsigned char *text, size_t len)
{
    int used = sxe__utf8_sequence(text, len);

    return used > 0 ? (size_t)used : 0;
}

ssize_t sxe_json_string(char *out, size_t size, const char *text, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *in = (const unsigned char *)text;
    size_t used = 0;

    for (size_t at = 0; at <= len;) {
        char piece[8];
        const char *copy = piece;
        size_t piece_len;
        if (at == len) { /* the quotes, around everything */
            piece[0] = '"';
            piece_len = 1;
            at++;
        } else if (in[at] == '"' || in[at] == '\\') {
            piece[0] = '\\';
            piece[1] = (char)in[at++];
            piece_len = 2;
        } else if (in[at] < 0x20) {
            static const char short_forms[] = "btn\0fr"; /* \b \t \n, \v has none, \f \r */
            unsigned char c = in[at++];
            bool is_short = c >= '\b' && c <= '\r' && short_forms[c - '\b'] != '\0';
            piece[0] = '\\';
            piece[1] = is_short ? short_forms[c - '\b'] : 'u';
            memcpy(piece + 2, "00", 2);
            piece[4] = hex[c >> 4];
            piece[5] = hex[c & 0xf];
            piece_len = is_short ? 2 : 6;
        } else if ((piece_len = whole_sequence(in + at, len - at)) > 0) {
            copy = text + at;
            at += piece_len;
        } else {
            copy = "\xef\xbf\xbd"; /* U+FFFD for the one byte that is not UTF-8 */
            piece_len = 3;
            at++;
        }
        if (used + piece_len + 2 > size) { /* room for the opening quote and the NUL */
            if (size > 0) {
                out[0] = '\0';
            }
            return -ENOBUFS;
        }
        memcpy(out + 1 + used, copy, piece_len);
        used += piece_len;
    }
    out[0] = '"';
    out[used + 1] = '\0';
    return (ssize_t)used + 1;
}
