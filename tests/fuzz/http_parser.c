/*
 * libFuzzer harness for the HTTP request parser. Each input is a byte stream read as pipelined
 * requests, heads and bodies, under tight limits. It checks, beyond not crashing:
 * - the verdict and the bytes consumed do not depend on how the stream is split (the first input
 *   byte picks a split point);
 * - every pointer in a parsed request lies inside the input (but the constant "/" that an
 *   absolute-form target without a path gets);
 * - a refusal is one of the statuses the parser promises.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/parser/parser.h"
#include "sxe/http.h"

static const struct sxe_http_limits limits = {
    .request_line = 256, .header_bytes = 1024, .header_count = 16, .body_bytes = 4096};

static void check_inside(const char *pointer, size_t len, const char *data, size_t size)
{
    if (pointer < data || pointer + len > data + size) {
        abort();
    }
}

/* Reads requests from data until an error, an upgrade, or the end; returns a digest of it all. */
static uint64_t run(const char *data, size_t size, size_t split)
{
    struct sxe_http_parser parser;
    struct sxe_http_request_head request;
    struct sxe_http_body body;
    size_t base = 0, available = split < size ? split : size;
    uint64_t digest = 0;
    int in_body = 0;

    sxe_http_parser_init(&parser);
    for (;;) {
        long rc = in_body
                      ? sxe_http_parse_body(&parser, data + base, available - base, &limits, &body)
                      : sxe_http_parse_request_head(&parser, data + base, available - base, &limits,
                                                    &request);
        if (rc < 0) {
            int status = sxe_http_parser_status(&parser);
            if (rc != -EPROTO || (status != 400 && status != 413 && status != 414 &&
                                  status != 431 && status != 501 && status != 505)) {
                abort();
            }
            return digest * 31 + (uint64_t)status;
        }
        if (rc > 0 && !in_body) {
            check_inside(request.method, request.method_len, data, size);
            if (request.target_len != 1 || request.target[0] != '/') {
                check_inside(request.target, request.target_len, data, size); /* else maybe "/" */
            }
            if (request.host != NULL) {
                check_inside(request.host, request.host_len, data, size);
            }
            for (unsigned i = 0; i < request.header_count; i++) {
                check_inside(request.headers[i].name, request.headers[i].name_len, data, size);
                check_inside(request.headers[i].value, request.headers[i].value_len, data, size);
            }
            if (request.header_count > limits.header_count) {
                abort();
            }
            /* Where every part is, so a head parsed whole and one parsed in pieces must agree. */
            digest = digest * 31 + (uint64_t)(request.method - data) * 7 + request.method_len;
            digest = digest * 31 + (uint64_t)(request.target - data) * 7 + request.target_len;
            for (unsigned i = 0; i < request.header_count; i++) {
                digest = digest * 31 + (uint64_t)(request.headers[i].name - data) * 7 +
                         request.headers[i].name_len;
                digest = digest * 31 + (uint64_t)(request.headers[i].value - data) * 7 +
                         request.headers[i].value_len;
            }
            base += (size_t)rc;
            digest = digest * 31 + base;
            if (request.upgrade || request.tunnel) {
                return digest * 31 + 1;
            }
            in_body = request.has_body;
            continue;
        }
        if (in_body) {
            check_inside(body.data, body.len, data, size);
            if (body.data != data + base + (size_t)rc - body.len && body.len > 0) {
                abort(); /* the piece is the tail of what was consumed */
            }
            base += (size_t)rc;
            if (body.done) {
                in_body = 0;
                digest = digest * 31 + base;
                continue;
            }
        }
        if (rc == 0 || base == available) {
            if (available < size) {
                available = size;
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
    size_t split = input[0];
    /* Copy so that an over-read past the input is caught by AddressSanitizer. */
    char *data = malloc(size - 1 + 1);
    memcpy(data, input + 1, size - 1);
    /* Whole with one token scanner, split with the other: the verdicts must agree. */
    sxe__http_parser_use_ssse3(split % 2 == 0);
    uint64_t whole = run(data, size - 1, size - 1);
    sxe__http_parser_use_ssse3(split % 2 != 0);
    uint64_t parted = run(data, size - 1, split);
    free(data);
    if (whole != parted) {
        abort();
    }
    return 0;
}
