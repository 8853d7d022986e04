/*
 * WebSocket framing (RFC 6455 §5.2): heads read and written, payloads unmasked. Pure functions of
 * bytes, so the fuzzer and the tests drive them without sockets.
 */
#include <string.h>

#include "websocket/ws.h"

int sxe__ws_frame_head(const uint8_t *data, size_t len, struct sxe__ws_frame *frame)
{
    if (len < 2) {
        return 0;
    }
    frame->fin = (data[0] & 0x80) != 0;
    frame->rsv = (uint8_t)(data[0] >> 4 & 7);
    frame->opcode = data[0] & 0x0f;
    frame->masked = (data[1] & 0x80) != 0;
    unsigned short_len = data[1] & 0x7f;
    size_t head = 2 + (short_len == 126 ? 2 : short_len == 127 ? 8 : 0) + (frame->masked ? 4 : 0);
    if (len < head) {
        return 0;
    }
    if (short_len < 126) {
        frame->len = short_len;
    } else if (short_len == 126) {
        frame->len = (uint64_t)data[2] << 8 | data[3];
    } else {
        frame->len = 0;
        for (int i = 0; i < 8; i++) {
            frame->len = frame->len << 8 | data[2 + i];
        }
        if (frame->len >> 63) {
            return -1; /* "the most significant bit MUST be 0" */
        }
    }
    if (frame->masked) {
        memcpy(frame->mask, data + head - 4, 4);
    }
    frame->head = head;
    return (int)head;
}

size_t sxe__ws_frame_encode(uint8_t out[SXE__WS_HEAD_MAX], bool fin, unsigned opcode, uint64_t len,
                            const uint8_t *mask)
{
    size_t head = 2;

    out[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x4f)); /* RSV1 may come with the opcode */
    if (len < 126) {
        out[1] = (uint8_t)len;
    } else if (len <= 0xffff) {
        out[1] = 126;
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
        head = 4;
    } else {
        out[1] = 127;
        for (int i = 0; i < 8; i++) {
            out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
        }
        head = 10;
    }
    if (mask != NULL) {
        out[1] |= 0x80;
        memcpy(out + head, mask, 4);
        head += 4;
    }
    return head;
}

void sxe__ws_unmask(uint8_t *data, size_t len, const uint8_t mask[4], size_t offset)
{
    size_t at = 0;

    /* Eight bytes at a time once aligned with the key: most of a payload in one XOR each. */
    for (; at < len && (offset + at) % 4 != 0; at++) {
        data[at] ^= mask[(offset + at) % 4];
    }
    uint64_t wide;
    uint8_t key8[8];
    for (int i = 0; i < 8; i++) {
        key8[i] = mask[i % 4];
    }
    memcpy(&wide, key8, 8);
    for (; at + 8 <= len; at += 8) {
        uint64_t word;
        memcpy(&word, data + at, 8);
        word ^= wide;
        memcpy(data + at, &word, 8);
    }
    for (; at < len; at++) {
        data[at] ^= mask[(offset + at) % 4];
    }
}

bool sxe__ws_code_valid(unsigned code)
{
    /* 1004-1006 and 1015 are reserved and never sent; 1012-1014 are registered since (IANA);
     * 3000-4999 belong to libraries and applications. */
    return (code >= 1000 && code <= 1014 && code != 1004 && code != 1005 && code != 1006) ||
           (code >= 3000 && code <= 4999);
}
