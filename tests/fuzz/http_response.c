/*
 * libFuzzer harness for the HTTP response head parser (the client's side). Each input is a byte
 * stream read as pipelined responses, heads and bodies, under tight limits. It checks, beyond not
 * crashing:
 * - the verdict and the bytes consumed do not depend on how the stream arrives: it is read whole,
 *   then again in pieces (the first input byte picks their size, and whether the responses answer
 *   HEAD);
 * - every pointer in a parsed response lies inside its head, and a body piece inside what the call
 *   consumed;
 * - a refusal is one the parser promises: -EPROTO or -EMSGSIZE for a head, -EPROTO with 400 or
 *   413 for a body;
 * - a parsed head is consistent: status 100 to 999, HTTP/1.0 or 1.1, no more fields than allowed,
 *   no body framing without a body, never both chunked and until the close;
 * - a body ends after exactly Content-Length bytes, or within body_bytes when chunked.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/http_parser.h"

/* header_bytes and header_count are the response parser's; body_bytes bounds chunked bodies. */
static const struct sxe_http_limits limits = {
    .request_line = 256, .header_bytes = 1024, .header_count = 16, .body_bytes = 4096};

static void check_inside(const char *pointer, size_t len, const char *from, size_t size)
{
    if (pointer < from || pointer + len > from + size) {
        abort();
    }
}

/* Checks a head of head_len bytes at head and returns a digest of where its parts are. */
static uint64_t check_head(const struct sxe_http_response_head *response, const char *head,
                           size_t head_len, const char *data)
{
    uint64_t digest = 0;

    check_inside(response->reason, response->reason_len, head, head_len);
    for (unsigned i = 0; i < response->header_count; i++) {
        check_inside(response->headers[i].name, response->headers[i].name_len, head, head_len);
        check_inside(response->headers[i].value, response->headers[i].value_len, head, head_len);
    }
    if (response->status < 100 || response->status > 999 ||
        (response->minor_version != 0 && response->minor_version != 1) ||
        response->header_count > limits.header_count) {
        abort();
    }
    /* Without a body there is nothing to frame: a caller would wait for bytes that never come. */
    if (!response->has_body && (response->content_length != 0 || response->chunked)) {
        abort();
    }
    /* Both would leave the body's end ambiguous, which is what response splitting relies on. */
    if (response->chunked && response->until_close) {
        abort();
    }
    /* A body that ends at the close leaves nothing to keep alive. */
    if (response->until_close && response->keep_alive) {
        abort();
    }
    /* Where every part is and what it means, so a head read whole and in pieces must agree. */
    digest = digest * 31 + (uint64_t)response->status * 2 + (uint64_t)response->minor_version;
    digest = digest * 31 + (uint64_t)(response->reason - data) * 7 + response->reason_len;
    for (unsigned i = 0; i < response->header_count; i++) {
        digest = digest * 31 + (uint64_t)(response->headers[i].name - data) * 7 +
                 response->headers[i].name_len;
        digest = digest * 31 + (uint64_t)(response->headers[i].value - data) * 7 +
                 response->headers[i].value_len;
    }
    digest = digest * 31 + response->content_length;
    digest = digest * 31 + (uint64_t)response->has_body * 8 + (uint64_t)response->chunked * 4 +
             (uint64_t)response->until_close * 2 + (uint64_t)response->keep_alive;
    return digest;
}

/*
 * Reads responses from data until an error, a body that runs to the close, or the end, with the
 * bytes arriving piece bytes at a time; returns a digest of it all.
 */
static uint64_t run(const char *data, size_t size, size_t piece, bool head_request)
{
    struct sxe_http_parser parser;
    struct sxe_http_response_head response;
    struct sxe_http_body body;
    size_t base = 0, available = piece < size ? piece : size;
    uint64_t digest = 0, body_seen = 0;
    bool in_body = false;

    sxe_http_parser_init(&parser);
    for (;;) {
        long rc = in_body
                      ? sxe_http_parse_body(&parser, data + base, available - base, &limits, &body)
                      : sxe_http_parse_response_head(&parser, data + base, available - base,
                                                     &limits, head_request, &response);
        if (rc < 0) {
            int status = sxe_http_parser_status(&parser);
            if (in_body ? rc != -EPROTO || (status != 400 && status != 413)
                        : rc != -EPROTO && rc != -EMSGSIZE) {
                abort();
            }
            /* A body refused partway has had pieces consumed that depend on the split. */
            return (digest * 31 + (in_body ? 0 : base)) * 31 + (uint64_t)(in_body ? status : -rc);
        }
        if ((size_t)rc > available - base) {
            abort(); /* consumed bytes it was not given */
        }
        if (rc > 0 && !in_body) {
            digest = digest * 31 + check_head(&response, data + base, (size_t)rc, data);
            base += (size_t)rc;
            digest = digest * 31 + base;
            if (response.until_close) {
                /* Not for sxe_http_parse_body(): the rest is the body, whatever its bytes. */
                return digest * 31 + 1;
            }
            in_body = response.has_body;
            body_seen = 0;
            continue;
        }
        if (in_body) {
            check_inside(body.data, body.len, data + base, (size_t)rc);
            if (body.data != data + base + (size_t)rc - body.len && body.len > 0) {
                abort(); /* the piece is the tail of what was consumed */
            }
            body_seen += body.len;
            base += (size_t)rc;
            /* Content-Length is the body's size exactly; a chunked one is bounded by the limit. */
            uint64_t most = response.chunked ? limits.body_bytes : response.content_length;
            if (body_seen > most ||
                (!response.chunked && body.done && body_seen != response.content_length)) {
                abort();
            }
            if (body.done) {
                in_body = false;
                digest = (digest * 31 + base) * 31 + body_seen;
                continue;
            }
        }
        if (rc == 0 || base == available) {
            if (available < size) {
                available = size - available > piece ? available + piece : size;
                continue;
            }
            return (digest * 31 + base) * 31 + 7;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t size)
{
    if (size < 1) {
        return 0;
    }
    /* Pieces of 1 to 128 bytes: every byte boundary gets to be where a head or chunk is cut. */
    size_t piece = (size_t)(input[0] >> 1) + 1;
    bool head_request = input[0] & 1;
    /* Copy so that an over-read past the input is caught by AddressSanitizer. */
    char *data = malloc(size - 1 + 1);
    memcpy(data, input + 1, size - 1);
    uint64_t whole = run(data, size - 1, size - 1, head_request);
    uint64_t pieces = run(data, size - 1, piece, head_request);
    free(data);
    if (whole != pieces) {
        abort();
    }
    return 0;
}
