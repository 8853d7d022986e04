/*
 * libFuzzer harness for reading WebSocket frames into messages (src/websocket/reader.c), as a
 * server reads clients and as a client reads a server. Each input is a byte stream; its first byte
 * picks the side, whether permessage-deflate was agreed (RSV1 then marks compressed messages, not
 * inflated here: deflate.c is zlib's), and the size of the pieces it arrives in. The stream is read
 * as the sockets read it: pieces appended to the kept input, frames read while whole, the joined
 * part of a fragmented message moved up and kept. It checks, beyond not crashing:
 * - the outcome (every message and control frame, in order, with its bytes, then the first
 *   error's code) does not depend on how the stream arrives: read whole, then in pieces;
 * - a message is at most the limit; text not compressed is valid UTF-8; nothing is compressed
 *   unless deflate was agreed; a control frame is at most 125 bytes;
 * - every event's bytes lie inside the input held, and consumed bytes never pass what was read.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/utf8.h"
#include "websocket/ws.h"

#define MOST 1024 /* the largest message */
#define ROOM 8192 /* the input a connection holds: larger than MOST and a frame head */

static uint64_t mix(uint64_t digest, const uint8_t *data, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        digest = (digest ^ data[i]) * 0x100000001b3ULL;
    }
    return digest ^ len;
}

/* Reads stream in pieces of piece bytes (0: whole). @return a digest of the outcome. */
static uint64_t read_stream(const uint8_t *stream, size_t len, size_t piece, bool client,
                            bool deflate)
{
    static uint8_t held[ROOM];
    struct sxe__ws_reader reader = {.client = client, .deflate = deflate};
    struct sxe__ws_event event;
    uint64_t digest = 14695981039346656037ULL;
    size_t held_len = 0, fed = 0;

    while (fed < len) {
        size_t take = piece == 0 || len - fed < piece ? len - fed : piece;
        if (take > ROOM - held_len) {
            take = ROOM - held_len;
        }
        if (take == 0) {
            abort(); /* a frame larger than the room is refused (1009) before it fills it */
        }
        memcpy(held + held_len, stream + fed, take);
        held_len += take;
        fed += take;
        size_t at = reader.assembled;
        int got;
        while (at < held_len &&
               (got = sxe__ws_read(&reader, held, held_len, &at, MOST, &event)) != SXE__WS_MORE) {
            if (at > held_len) {
                abort();
            }
            if (got == SXE__WS_ERROR) {
                return mix(digest, (const uint8_t *)&event.code, sizeof(event.code));
            }
            if (got == SXE__WS_FRAGMENT) {
                continue;
            }
            if (event.data < held || event.data + event.len > held + held_len ||
                (got == SXE__WS_MESSAGE && event.len > MOST) ||
                (got == SXE__WS_CONTROL && event.len > 125) ||
                (got == SXE__WS_MESSAGE && event.opcode == SXE_WS_TEXT && !event.compressed &&
                 !sxe_utf8_valid(event.data, event.len)) ||
                (event.compressed && !deflate)) {
                abort();
            }
            digest = mix(digest, (const uint8_t *)&event.opcode, sizeof(event.opcode));
            digest = mix(digest, event.data, event.len);
        }
        size_t consumed = sxe__ws_read_done(&reader, held, at);
        if (consumed > held_len || reader.assembled > held_len - consumed) {
            abort();
        }
        memmove(held, held + consumed, held_len - consumed);
        held_len -= consumed;
    }
    return digest;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    bool client = data[0] & 0x80, deflate = data[0] & 0x40;
    size_t piece = (size_t)(data[0] & 0x3f) + 1;
    uint8_t *copy = malloc(size); /* frames are unmasked in place: each reading gets its own */

    memcpy(copy, data + 1, size - 1);
    uint64_t whole = read_stream(copy, size - 1, 0, client, deflate);
    memcpy(copy, data + 1, size - 1);
    if (read_stream(copy, size - 1, piece, client, deflate) != whole) {
        abort();
    }
    free(copy);
    return 0;
}
