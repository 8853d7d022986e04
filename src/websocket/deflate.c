/*
 * permessage-deflate (RFC 7692), with no memory per socket.
 *
 * Compression is the classic memory blow-up of WebSocket servers: a deflate stream with its window
 * is hundreds of kilobytes, and kept per socket for "context takeover" it costs more than
 * everything else a socket has. Here the server accepts an offer only with both
 * server_no_context_takeover and client_no_context_takeover in its answer (RFC 7692 §7.1.1: a
 * server may add both to any offer), so every message is compressed and decompressed on its own,
 * and one deflate stream (per window size a client asks for) and one inflate stream serve every
 * socket of the server, reset between messages. A socket's whole compression state is one byte:
 * the window it was promised.
 *
 * Inflating writes into one scratch area of message_bytes: a message that inflates past it (a
 * "zip bomb") is refused with 1009 before more is written; one that is not valid deflate with 1007.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "websocket/ws.h"

/* The end of a flushed deflate block, left off each message (RFC 7692 §7.2.1). */
static const uint8_t tail[4] = {0x00, 0x00, 0xff, 0xff};

struct sxe__ws_deflate {
    z_stream inflater;
    bool inflater_ready;
    z_stream deflaters[8]; /* by window bits, 8 (taken as 9, zlib's least) to 15 */
    bool deflater_ready[8];
    uint8_t *in_scratch;  /* inflated messages: message_bytes */
    uint8_t *out_scratch; /* deflated messages: message_bytes + a margin */
    size_t scratch_size;
};

int sxe__ws_deflate_create(sxe_ws_server_t *server)
{
    struct sxe__ws_deflate *shared = calloc(1, sizeof(*shared));

    if (shared == NULL) {
        return -ENOMEM;
    }
    shared->scratch_size = (size_t)server->options.message_bytes + 1024;
    shared->in_scratch = malloc(shared->scratch_size); /* touched only when used */
    shared->out_scratch = malloc(shared->scratch_size);
    server->deflate = shared;
    if (shared->in_scratch == NULL || shared->out_scratch == NULL ||
        inflateInit2(&shared->inflater, -15) != Z_OK) {
        return -ENOMEM;
    }
    shared->inflater_ready = true;
    return 0;
}

void sxe__ws_deflate_destroy(sxe_ws_server_t *server)
{
    struct sxe__ws_deflate *shared = server->deflate;

    if (shared == NULL) {
        return;
    }
    if (shared->inflater_ready) {
        inflateEnd(&shared->inflater);
    }
    for (unsigned i = 0; i < 8; i++) {
        if (shared->deflater_ready[i]) {
            deflateEnd(&shared->deflaters[i]);
        }
    }
    free(shared->in_scratch);
    free(shared->out_scratch);
    free(shared);
    server->deflate = NULL;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* The next ";"- or ","-separated token of an extension list, trimmed. @return its end. */
static const char *token(const char *at, const char *end, const char **start, size_t *len)
{
    while (at < end && is_space(*at)) {
        at++;
    }
    *start = at;
    while (at < end && *at != ';' && *at != ',') {
        at++;
    }
    const char *last = at;
    while (last > *start && is_space(last[-1])) {
        last--;
    }
    *len = (size_t)(last - *start);
    return at;
}

/* A window size parameter's value: 8 to 15, possibly quoted; 0 if none; -1 if invalid. */
static int window_bits(const char *param, size_t len)
{
    const char *equals = memchr(param, '=', len);

    if (equals == NULL) {
        return 0;
    }
    const char *value = equals + 1;
    size_t value_len = len - (size_t)(value - param);
    while (value_len > 0 && is_space(*value)) {
        value++;
        value_len--;
    }
    if (value_len >= 2 && value[0] == '"' && value[value_len - 1] == '"') {
        value++;
        value_len -= 2;
    }
    if (value_len == 1 && value[0] >= '8' && value[0] <= '9') {
        return value[0] - '0';
    }
    if (value_len == 2 && value[0] == '1' && value[1] >= '0' && value[1] <= '5') {
        return 10 + value[1] - '0';
    }
    return -1;
}

static bool named(const char *param, size_t len, const char *name)
{
    size_t name_len = strlen(name);
    return len >= name_len && strncasecmp(param, name, name_len) == 0 &&
           (len == name_len || param[name_len] == '=' || is_space(param[name_len]));
}

/*
 * Reads one offer's parameters (from at to the next ',' or end). @return the window bits the
 * server must keep to (15 if the client set none), or 0 if the offer cannot be taken (an unknown
 * or repeated parameter, or a bad value).
 */
static int read_offer(const char **at, const char *end)
{
    unsigned seen = 0;
    int server_bits = 15;
    bool good = true;

    while (*at < end && **at == ';') {
        const char *param;
        size_t len;
        *at = token(*at + 1, end, &param, &len);
        static const char *const names[] = {"server_no_context_takeover",
                                            "client_no_context_takeover", "server_max_window_bits",
                                            "client_max_window_bits"};
        unsigned which = 0;
        while (which < 4 && !named(param, len, names[which])) {
            which++;
        }
        int bits = which < 4 ? window_bits(param, len) : -1;
        if (which == 4 || (seen & (1u << which)) || bits < 0 || (which < 2 && bits != 0) ||
            (which == 2 && bits == 0)) {
            good = false; /* unknown, repeated, or a value where none belongs (or none given) */
        }
        seen |= which < 4 ? 1u << which : 0;
        server_bits = which == 2 && bits > 0 ? bits : server_bits;
    }
    if (server_bits == 8) {
        good = false; /* zlib's raw deflate cannot keep to a 256-byte window: declined */
    }
    return good ? server_bits : 0;
}

int sxe__ws_deflate_negotiate(const struct sxe_http_request_head *request, char *answer,
                              size_t size)
{
    for (unsigned i = 0; i < request->header_count; i++) {
        const struct sxe_http_header *header = &request->headers[i];
        if (header->name_len != 24 || strncasecmp(header->name, "Sec-WebSocket-Extensions", 24)) {
            continue;
        }
        const char *at = header->value, *end = header->value + header->value_len;
        while (at < end) {
            const char *name;
            size_t len;
            at = token(at, end, &name, &len);
            bool ours = len == 18 && strncasecmp(name, "permessage-deflate", 18) == 0;
            int bits = read_offer(&at, end);
            if (ours && bits > 0) {
                int used = snprintf(answer, size,
                                    "permessage-deflate; server_no_context_takeover; "
                                    "client_no_context_takeover");
                if (bits < 15) {
                    snprintf(answer + used, size - (size_t)used, "; server_max_window_bits=%d",
                             bits);
                }
                return bits;
            }
            at += at < end; /* past the ',' */
        }
    }
    return 0;
}

/* The deflate stream for a window of bits, made when first needed. */
static z_stream *deflater(struct sxe__ws_deflate *shared, unsigned bits)
{
    z_stream *stream = &shared->deflaters[bits - 8];

    if (!shared->deflater_ready[bits - 8]) {
        if (deflateInit2(stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -(int)bits, 8,
                         Z_DEFAULT_STRATEGY) != Z_OK) {
            return NULL;
        }
        shared->deflater_ready[bits - 8] = true;
    }
    return stream;
}

const uint8_t *sxe__ws_deflate(sxe_ws_server_t *server, unsigned bits, const void *data, size_t len,
                               size_t *out_len)
{
    struct sxe__ws_deflate *shared = server->deflate;
    z_stream *stream = deflater(shared, bits);

    if (stream == NULL || deflateReset(stream) != Z_OK) {
        return NULL; /* sent as it is: compression is the sender's choice, message by message */
    }
    stream->next_in = (Bytef *)(uintptr_t)data;
    stream->avail_in = (uInt)len;
    stream->next_out = shared->out_scratch;
    stream->avail_out = (uInt)shared->scratch_size;
    if (deflate(stream, Z_SYNC_FLUSH) != Z_OK || stream->avail_in != 0 || stream->avail_out == 0) {
        return NULL; /* it would not fit: no smaller than it was */
    }
    size_t made = shared->scratch_size - stream->avail_out;
    if (made < 4 || memcmp(shared->out_scratch + made - 4, tail, 4) != 0 || made - 4 >= len) {
        return NULL; /* not smaller: sent as it is */
    }
    *out_len = made - 4;
    return shared->out_scratch;
}

const uint8_t *sxe__ws_inflate(sxe_ws_server_t *server, const uint8_t *data, size_t len,
                               size_t *out_len, unsigned *code)
{
    struct sxe__ws_deflate *shared = server->deflate;
    z_stream *stream = &shared->inflater;
    size_t most = server->options.message_bytes;
    int rc = Z_OK;

    if (inflateReset(stream) != Z_OK) {
        *code = SXE_WS_CLOSE_SERVER_ERROR;
        return NULL;
    }
    stream->next_out = shared->in_scratch;
    stream->avail_out = (uInt)(most + 1); /* one byte more tells a message past the limit */
    /* A block with BFINAL set ends the stream (RFC 7692 §7.2.3.4): what follows it, padding and
     * our tail, is not read. */
    for (int part = 0; part < 2 && rc == Z_OK; part++) {
        stream->next_in = (Bytef *)(uintptr_t)(part == 0 ? data : tail);
        stream->avail_in = (uInt)(part == 0 ? len : sizeof(tail));
        while (stream->avail_in > 0 && stream->avail_out > 0 && rc == Z_OK) {
            rc = inflate(stream, Z_SYNC_FLUSH);
        }
    }
    /* The room is one byte more than a message may hold: a message that fills it is too big,
     * whatever input is left. */
    size_t made = most + 1 - stream->avail_out;
    if (made > most) {
        *code = SXE_WS_CLOSE_TOO_BIG;
        return NULL;
    }
    if (rc != Z_OK && rc != Z_STREAM_END) {
        *code = SXE_WS_CLOSE_INVALID_DATA; /* not deflate data */
        return NULL;
    }
    *out_len = made;
    return shared->in_scratch;
}
