/*
 * A JSON string writer. Valid UTF-8 is copied as it is; every byte that would make the string
 * invalid JSON is escaped or replaced, so a handler may quote what a client sent.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "sxe/json.h"

/*
 * The length of the valid UTF-8 sequence at text (RFC 3629: no overlong forms, no surrogates,
 * nothing past U+10FFFF), or 0 if the bytes there are not one.
 */
static size_t utf8_sequence(const unsigned char *text, size_t len)
{
    unsigned char lead = text[0];
    size_t need;
    unsigned char low = 0x80, high = 0xbf; /* the range of the second byte */

    if (lead < 0x80) {
        return 1;
    }
    if (lead >= 0xc2 && lead <= 0xdf) {
        need = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        need = 3;
        low = lead == 0xe0 ? 0xa0 : 0x80;
        high = lead == 0xed ? 0x9f : 0xbf;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        need = 4;
        low = lead == 0xf0 ? 0x90 : 0x80;
        high = lead == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (len < need || text[1] < low || text[1] > high) {
        return 0;
    }
    for (size_t i = 2; i < need; i++) {
        if ((text[i] & 0xc0) != 0x80) {
            return 0;
        }
    }
    return need;
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
        } else if ((piece_len = utf8_sequence(in + at, len - at)) > 0) {
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
