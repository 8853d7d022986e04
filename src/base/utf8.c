/*
 * UTF-8 checks (RFC 3629), for JSON strings and WebSocket text. A sequence is judged byte by byte,
 * so text that is still coming is refused at its first bad byte, not at its end.
 */
#include "utf8.h"

#include "sxe/utf8.h"

int sxe__utf8_sequence(const unsigned char *text, size_t len)
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
        low = lead == 0xe0 ? 0xa0 : 0x80;  /* no overlong forms */
        high = lead == 0xed ? 0x9f : 0xbf; /* no surrogates */
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        need = 4;
        low = lead == 0xf0 ? 0x90 : 0x80;
        high = lead == 0xf4 ? 0x8f : 0xbf; /* nothing past U+10FFFF */
    } else {
        return -1;
    }
    if (len >= 2 && (text[1] < low || text[1] > high)) {
        return -1;
    }
    for (size_t i = 2; i < need && i < len; i++) {
        if ((text[i] & 0xc0) != 0x80) {
            return -1;
        }
    }
    return len < need ? 0 : (int)need;
}

size_t sxe_utf8_check(const void *data, size_t len, bool *bad)
{
    const unsigned char *text = data;
    size_t at = 0;

    *bad = false;
    while (at < len) {
        if (text[at] < 0x80) { /* ASCII runs are most text: no call per byte */
            at++;
            continue;
        }
        int used = sxe__utf8_sequence(text + at, len - at);
        if (used <= 0) {
            *bad = used < 0;
            return at;
        }
        at += (size_t)used;
    }
    return at;
}

bool sxe_utf8_valid(const void *data, size_t len)
{
    bool bad;

    return sxe_utf8_check(data, len, &bad) == len;
}
