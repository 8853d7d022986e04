/*
 * SHA-1 (FIPS 180-4) and Base64 (RFC 4648), as much as the handshake needs: the accept key is
 * Base64(SHA-1(key + GUID)), RFC 6455 §4.2.2. SHA-1 is broken for signatures, not for this: the
 * key proves only that the server read the handshake.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "websocket/ws.h"

static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static uint32_t rotate(uint32_t word, unsigned bits)
{
    return word << bits | word >> (32 - bits);
}

/* One 64-byte block into the running state. */
static void sha1_block(uint32_t state[5], const uint8_t block[64])
{
    uint32_t w[80];

    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 |
               (uint32_t)block[4 * i + 2] << 8 | block[4 * i + 3];
    }
    for (int i = 16; i < 80; i++) {
        w[i] = rotate(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3], e = state[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5a827999;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ed9eba1;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8f1bbcdc;
        } else {
            f = b ^ c ^ d;
            k = 0xca62c1d6;
        }
        uint32_t next = rotate(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rotate(b, 30);
        b = a;
        a = next;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
}

void sxe__sha1(const void *data, size_t len, uint8_t digest[20])
{
    uint32_t state[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
    const uint8_t *bytes = data;
    uint8_t last[128] = {0};
    size_t whole = len / 64 * 64, rest = len - whole;

    for (size_t at = 0; at < whole; at += 64) {
        sha1_block(state, bytes + at);
    }
    /* The padding: a 1 bit, zeros, and the length in bits, in one block or two. */
    memcpy(last, bytes + whole, rest);
    last[rest] = 0x80;
    size_t tail = rest < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++) {
        last[tail - 1 - i] = (uint8_t)(bits >> (8 * i));
    }
    sha1_block(state, last);
    if (tail == 128) {
        sha1_block(state, last + 64);
    }
    for (int i = 0; i < 20; i++) {
        digest[i] = (uint8_t)(state[i / 4] >> (24 - 8 * (i % 4)));
    }
}

size_t sxe__base64(const void *data, size_t len, char *out)
{
    const uint8_t *in = data;
    size_t used = 0;

    for (size_t at = 0; at < len; at += 3) {
        uint32_t group = (uint32_t)in[at] << 16;
        group |= at + 1 < len ? (uint32_t)in[at + 1] << 8 : 0;
        group |= at + 2 < len ? in[at + 2] : 0;
        out[used++] = alphabet[group >> 18 & 63];
        out[used++] = alphabet[group >> 12 & 63];
        out[used++] = at + 1 < len ? alphabet[group >> 6 & 63] : '=';
        out[used++] = at + 2 < len ? alphabet[group & 63] : '=';
    }
    out[used] = '\0';
    return used;
}

bool sxe__ws_key_valid(const char *key, size_t len)
{
    /* Base64 of 16 bytes: 22 characters, the last of which carries 2 bits (its low 4 are 0),
     * then "==". */
    if (len != 24 || key[22] != '=' || key[23] != '=') {
        return false;
    }
    for (size_t i = 0; i < 22; i++) {
        const char *found = memchr(alphabet, key[i], 64);
        if (key[i] == '\0' || found == NULL || (i == 21 && ((found - alphabet) & 15) != 0)) {
            return false;
        }
    }
    return true;
}

int sxe_ws_accept_key(const char *key, size_t key_len, char out[29])
{
    char joined[128 + sizeof(guid)];
    uint8_t digest[20];

    if (key == NULL || key_len > 128) {
        return -EINVAL;
    }
    memcpy(joined, key, key_len);
    memcpy(joined + key_len, guid, sizeof(guid) - 1);
    sxe__sha1(joined, key_len + sizeof(guid) - 1, digest);
    return (int)sxe__base64(digest, sizeof(digest), out);
}
