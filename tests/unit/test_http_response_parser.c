/*
 * The response head parser (src/http/parser/response_parser.c) at the edge of each rule: the status
 * line byte by byte (version, digits and the bytes just outside '0'..'9', codes below 100, the
 * reason and its space), field lines (names, values, whitespace around them, lines without a
 * colon), Content-Length (digits, length, repeats), Transfer-Encoding, the Connection tokens and
 * what they mean for keep-alive, bodiless statuses, and the limits; fed whole and a byte at a
 * time; and whole heads as RFC 9112 frames them, and past the limits. test_http_client.c frames
 * whole responses through a client; this pins the parser alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/http.h"
#include "sxe/http_parser.h"
#include "sxe_test.h"

static const struct sxe_http_limits limits = {.header_bytes = 4096, .header_count = 8};

/* Parses head whole, then again a byte at a time: both must agree. @return the result. */
static int parse(const char *head, bool head_request, struct sxe_http_response_head *response)
{
    struct sxe_http_parser parser;
    size_t len = strlen(head);

    sxe_http_parser_init(&parser);
    int whole = sxe_http_parse_response_head(&parser, head, len, &limits, head_request, response);
    sxe_http_parser_init(&parser);
    int piecewise = 0;
    for (size_t have = 1; have <= len; have++) {
        piecewise =
            sxe_http_parse_response_head(&parser, head, have, &limits, head_request, response);
        if (piecewise != 0) {
            break;
        }
    }
    if (piecewise != whole) {
        fail_msg("\"%s\": %d whole, %d a byte at a time", head, whole, piecewise);
    }
    return whole;
}

static void expect_refused(const char *head)
{
    struct sxe_http_response_head response;
    int rc = parse(head, false, &response);
    if (rc != -EPROTO) {
        fail_msg("\"%s\": %d, want -EPROTO", head, rc);
    }
}

static void expect_status(const char *head, int status, int minor, const char *reason)
{
    struct sxe_http_response_head response;
    int rc = parse(head, false, &response);
    if (rc != (int)strlen(head)) {
        fail_msg("\"%s\": %d, want %zu", head, rc, strlen(head));
    }
    assert_int_equal(response.status, status);
    assert_int_equal(response.minor_version, minor);
    assert_int_equal(response.reason_len, strlen(reason));
    assert_memory_equal(response.reason, reason, response.reason_len);
}

static void test_status_lines_at_each_byte(void **state)
{
    (void)state;
    expect_status("HTTP/1.1 200 OK\r\n\r\n", 200, 1, "OK");
    expect_status("HTTP/1.0 999 Whatever it says\r\n\r\n", 999, 0, "Whatever it says");
    expect_status("HTTP/1.1 100\r\n\r\n", 100, 1, "");
    expect_status("HTTP/1.1 404 \r\n\r\n", 404, 1, "");
    expect_status("HTTP/1.1 509 \t tabs\x80 and obs-text\xff\r\n\r\n", 509, 1,
                  "\t tabs\x80 and obs-text\xff");
    expect_refused("HTTP/1.1 099 Low\r\n\r\n");
    expect_refused("HTTP/1.1 000\r\n\r\n");
    expect_refused("HTTP/1.2 200 OK\r\n\r\n");
    expect_refused("HTTP/1./ 200 OK\r\n\r\n");
    expect_refused("HTTP/2.0 200 OK\r\n\r\n");
    expect_refused("HTTP/1.1  200 OK\r\n\r\n");
    expect_refused("HTTP/1.1-200 OK\r\n\r\n");
    expect_refused("http/1.1 200 OK\r\n\r\n");
    expect_refused("HTTP/1.1 20\r\n\r\n"); /* shorter than a status line */
    expect_refused("HTTP/1.1 2000 OK\r\n\r\n");
    expect_refused("HTTP/1.1 200-OK\r\n\r\n");
    expect_refused("HTTP/1.1 200\tOK\r\n\r\n"); /* below the space, as above it: not a space */
    expect_refused("HTTP/1.1 200\x01OK\r\n\r\n");
    expect_refused("HTTP/1.1 200 O\x7fK\r\n\r\n");
    expect_refused("HTTP/1.1 200 O\x01K\r\n\r\n");
    /* Each of the three digits, with the byte just below '0' and just above '9'. */
    for (int at = 9; at < 12; at++) {
        for (int i = 0; i < 2; i++) {
            char head[] = "HTTP/1.1 555 X\r\n\r\n";
            head[at] = i == 0 ? '/' : ':';
            expect_refused(head);
        }
        char head[] = "HTTP/1.1 555 X\r\n\r\n";
        head[at] = '9';
        struct sxe_http_response_head response;
        assert_int_equal(parse(head, false, &response), (int)strlen(head));
        head[at] = at == 9 ? '1' : '0'; /* 0 first would be below 100 */
        assert_int_equal(parse(head, false, &response), (int)strlen(head));
    }
    expect_refused("\r\nHTTP/1.1 200 OK\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\r\n\r\n");
}

static const struct sxe_http_header *field_of(const struct sxe_http_response_head *response,
                                              const char *name)
{
    return sxe_http_response_header(response, name);
}

static void test_field_lines(void **state)
{
    struct sxe_http_response_head response;

    (void)state;
    const char *head = "HTTP/1.1 200 OK\r\nX-A:\tvalue with spaces \t\r\nX-B: \r\nX-C:x\r\n"
                       "X-D: a\x80\xff\r\nContent-Length: 0\r\n\r\n";
    assert_int_equal(parse(head, false, &response), (int)strlen(head));
    assert_int_equal(response.header_count, 5);
    const struct sxe_http_header *a = field_of(&response, "x-a");
    assert_non_null(a);
    assert_int_equal(a->value_len, strlen("value with spaces"));
    assert_memory_equal(a->value, "value with spaces", a->value_len);
    assert_int_equal(a->name_len, 3);
    assert_int_equal(field_of(&response, "X-B")->value_len, 0);
    assert_memory_equal(field_of(&response, "X-C")->value, "x", 1);
    assert_int_equal(field_of(&response, "X-D")->value_len, 3);
    assert_null(field_of(&response, "X-E"));

    expect_refused("HTTP/1.1 200 OK\r\nNo colon\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\n: no name\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nX-A : space before the colon\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nX(A): a separator\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nX-A: a\x01"
                   "control\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nX-A: a\x7f\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n");
}

/* How the head frames the body: its length, chunked, until the close, or none. */
static void expect_framing(const char *head, bool head_request, int64_t length, bool keep_alive)
{
    struct sxe_http_response_head response;
    int rc = parse(head, head_request, &response);

    if (rc != (int)strlen(head)) {
        fail_msg("\"%s\": %d, want %zu", head, rc, strlen(head));
    }
    int64_t got = response.chunked       ? -1
                  : response.until_close ? -2
                                         : (int64_t)response.content_length;
    if (got != length || response.keep_alive != keep_alive) {
        fail_msg("\"%s\": length %lld keep-alive %d, want %lld and %d", head, (long long)got,
                 response.keep_alive, (long long)length, keep_alive);
    }
    assert_int_equal(response.has_body, length != 0);
}

static void test_framing(void **state)
{
    (void)state;
    expect_framing("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, 0, true);
    expect_framing("HTTP/1.1 200 OK\r\nContent-Length: 9999999999999999999\r\n\r\n", false,
                   (int64_t)9999999999999999999ULL, true);
    expect_framing("HTTP/1.1 200 OK\r\ncontent-LENGTH:  7 \r\n\r\n", false, 7, true);
    expect_framing("HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 7\r\n\r\n", false, 7,
                   true);
    expect_framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: CHUNKED\r\n\r\n", false, -1, true);
    expect_framing("HTTP/1.1 200 OK\r\n\r\n", false, -2, false);
    expect_framing("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false, 1, false);
    expect_framing("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\n", false,
                   1, true);
    expect_framing(
        "HTTP/1.0 200 OK\r\nConnection: x,\t keep-alive \t,y\r\nContent-Length: 1\r\n\r\n", false,
        1, true);
    expect_framing("HTTP/1.0 200 OK\r\nConnection: keep-alives\r\nContent-Length: 1\r\n\r\n", false,
                   1, false);
    expect_framing("HTTP/1.1 200 OK\r\nConnection: CLOSE\r\nContent-Length: 1\r\n\r\n", false, 1,
                   false);
    expect_framing("HTTP/1.1 200 OK\r\nConnection: closed, x\r\nContent-Length: 1\r\n\r\n", false,
                   1, true);
    expect_framing("HTTP/1.1 200 OK\r\nConnection: a, \t close\t \r\nContent-Length: 1\r\n\r\n",
                   false, 1, false);
    expect_framing("HTTP/1.1 200 OK\r\nConnection: ,close,\r\nContent-Length: 1\r\n\r\n", false, 1,
                   false);
    expect_framing("HTTP/1.1 200 OK\r\nX-Connection: close\r\nContent-Length: 1\r\n\r\n", false, 1,
                   true);
    /* Bodiless: the answer to HEAD, 1xx, 204 and 304, whatever they say; 199 and 205 are not. */
    expect_framing("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true, 0, true);
    expect_framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", true, 0, true);
    expect_framing("HTTP/1.1 200 OK\r\n\r\n", true, 0, true);
    expect_framing("HTTP/1.1 199 X\r\nContent-Length: 5\r\n\r\n", false, 0, true);
    expect_framing("HTTP/1.1 204 X\r\nContent-Length: 5\r\n\r\n", false, 0, true);
    expect_framing("HTTP/1.1 304 X\r\nTransfer-Encoding: chunked\r\n\r\n", false, 0, true);
    expect_framing("HTTP/1.1 205 X\r\nContent-Length: 5\r\n\r\n", false, 5, true);
    expect_framing("HTTP/1.1 303 X\r\nContent-Length: 5\r\n\r\n", false, 5, true);
    expect_framing("HTTP/1.1 305 X\r\nContent-Length: 5\r\n\r\n", false, 5, true);
    expect_framing("HTTP/1.1 203 X\r\nContent-Length: 5\r\n\r\n", false, 5, true);
    expect_framing("HTTP/1.1 200 X\r\nContent-Length: 5\r\n\r\n", false, 5, true);

    expect_refused("HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 12345678901234567890\r\n\r\n"); /* 20 */
    expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 1/\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 1:\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nContent-Length: /1\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 1 1\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 8\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Length: 1\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunkedx\r\n\r\n");
    expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n");
    expect_refused("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
}

static void test_limits(void **state)
{
    struct sxe_http_limits small = {.header_bytes = 40, .header_count = 2};
    struct sxe_http_response_head response;
    struct sxe_http_parser parser;

    (void)state;
    const char *two = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n"; /* 32 bytes */
    sxe_http_parser_init(&parser);
    assert_int_equal(
        sxe_http_parse_response_head(&parser, two, strlen(two), &small, false, &response),
        (int)strlen(two));
    assert_int_equal(response.header_count, 2);
    const char *three = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    sxe_http_parser_init(&parser);
    assert_int_equal(
        sxe_http_parse_response_head(&parser, three, strlen(three), &small, false, &response),
        -EMSGSIZE);
    /* header_bytes: a head of exactly 40 bytes fits, one of 41 does not. */
    char head[64];
    small.header_count = 8;
    snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nX: %s\r\n\r\n", "0123456789abcdefg");
    assert_int_equal(strlen(head), 41);
    sxe_http_parser_init(&parser);
    assert_int_equal(sxe_http_parse_response_head(&parser, head, 41, &small, false, &response),
                     -EMSGSIZE);
    snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nX: %s\r\n\r\n", "0123456789abcdef");
    assert_int_equal(strlen(head), 40);
    sxe_http_parser_init(&parser);
    assert_int_equal(sxe_http_parse_response_head(&parser, head, 40, &small, false, &response), 40);
    sxe_http_parser_init(&parser);
    assert_int_equal(sxe_http_parse_response_head(&parser, head, 39, &small, false, &response), 0);
}

/* Response heads: the parser's verdicts, fed whole and a byte at a time. */

static int parse_response(const char *text, bool head_request,
                          struct sxe_http_response_head *response, size_t step)
{
    struct sxe_http_parser parser;
    size_t len = strlen(text);
    int rc = 0;

    sxe_http_parser_init(&parser);
    for (size_t have = step < len ? step : len;; have = have + step < len ? have + step : len) {
        rc = sxe_http_parse_response_head(&parser, text, have, &sxe_http_default_limits,
                                          head_request, response);
        if (rc != 0 || have == len) {
            return rc;
        }
    }
}

static void test_response_heads_are_framed_by_rfc_9112(void **state)
{
    static const struct {
        const char *head;
        bool head_request;
        int status;
        long length; /* -1 chunked, -2 until close, else Content-Length */
        bool keep_alive;
    } good[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", false, 200, 5, true},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false, 200, -1, true},
        {"HTTP/1.1 200 OK\r\nServer: x\r\n\r\n", false, 200, -2, false},
        {"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", false, 204, 0, true},
        {"HTTP/1.1 304 Not Modified\r\n\r\n", false, 304, 0, true},
        {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", true, 200, 0, true},
        {"HTTP/1.1 100 Continue\r\n\r\n", false, 100, 0, true},
        {"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false, 200, 1, false},
        {"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", false, 200, 1,
         true},
        {"HTTP/1.1 200 OK\r\nConnection: x, close\r\nContent-Length: 1\r\n\r\n", false, 200, 1,
         false},
        {"HTTP/1.1 200\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n", false, 200, 2, true},
        {"HTTP/1.1 404 \r\nContent-Length:  3 \r\n\r\n", false, 404, 3, true},
    };
    static const struct {
        const char *head;
        int rc;
    } bad[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunk\r\n\r\n", -EPROTO}, /* a prefix is not it */
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
         -EPROTO},
        {"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200 OK\r\nX: a\nb\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200 OK\r\nName : x\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200 OK\r\nX: a\x01z\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200 OK\r\nX: a\rz\r\n\r\n", -EPROTO},
        {"HTTP/2 200 OK\r\n\r\n", -EPROTO},
        {"HTTP/1.1 20 OK\r\n\r\n", -EPROTO},
        {"HTTP/1.1 099 Low\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200OK\r\n\r\n", -EPROTO},
        {"\r\nHTTP/1.1 200 OK\r\n\r\n", -EPROTO},
        {"HTTP/1.1 200 OK\r\nNo-colon\r\n\r\n", -EPROTO},
    };
    struct sxe_http_response_head response;

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        for (size_t step = 1; step <= 1000; step += 999) {
            int rc = parse_response(good[i].head, good[i].head_request, &response, step);
            if (rc != (int)strlen(good[i].head)) {
                fail_msg("good head %zu (step %zu): %d", i, step, rc);
            }
            assert_int_equal(response.status, good[i].status);
            assert_int_equal(response.keep_alive, good[i].keep_alive);
            long length = response.chunked       ? -1
                          : response.until_close ? -2
                                                 : (long)response.content_length;
            if (length != good[i].length) {
                fail_msg("good head %zu: length %ld, not %ld", i, length, good[i].length);
            }
        }
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        for (size_t step = 1; step <= 1000; step += 999) {
            int rc = parse_response(bad[i].head, false, &response, step);
            if (rc != bad[i].rc) {
                fail_msg("bad head %zu (step %zu): %d, not %d", i, step, rc, bad[i].rc);
            }
        }
    }
    assert_int_equal(
        parse_response("HTTP/1.1 200 OK\r\nX-A: 1\r\nx-b:2\r\n\r\n", false, &response, 1000), 34);
    assert_int_equal(response.header_count, 2);
    assert_memory_equal(sxe_http_response_header(&response, "X-B")->value, "2", 1);
    assert_null(sxe_http_response_header(&response, "X-C"));
    assert_memory_equal(response.reason, "OK", 2);
}

static void test_response_heads_past_the_limits_are_refused(void **state)
{
    struct sxe_http_limits tight = {.header_bytes = 64, .header_count = 2};
    struct sxe_http_response_head response;
    struct sxe_http_parser parser;
    char big[200];

    (void)state;
    memset(big, 'a', sizeof(big));
    memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
    sxe_http_parser_init(&parser);
    assert_int_equal(sxe_http_parse_response_head(&parser, big, 40, &tight, false, &response), 0);
    assert_int_equal(
        sxe_http_parse_response_head(&parser, big, sizeof(big), &tight, false, &response),
        -EMSGSIZE);
    const char *many = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    sxe_http_parser_init(&parser);
    assert_int_equal(
        sxe_http_parse_response_head(&parser, many, strlen(many), &tight, false, &response),
        -EMSGSIZE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_lines_at_each_byte),
        cmocka_unit_test(test_field_lines),
        cmocka_unit_test(test_framing),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_response_heads_are_framed_by_rfc_9112),
        cmocka_unit_test(test_response_heads_past_the_limits_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
