/*
 * What the request parser's rules mean, byte by byte and at each boundary (src/http/parser/fields.c
 * and the helpers of src/http/parser/parser.h): every byte's character classes against the RFCs'
 * grammar, the hex digits, case-folded names across the eight-byte steps, trimming, Host values at
 * each edge of a port, Transfer-Encoding lists, the request-target forms, and each limit.
 * test_http_parser.c runs the parser on whole requests; these pin each rule on both sides of its
 * edge.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/parser/parser.h"
#include "sxe/http.h"
#include "sxe_test.h"

/* RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" /
 * "_" / "`" / "|" / "~" / DIGIT / ALPHA. */
static bool is_tchar(unsigned c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && c < 0x80 && strchr("!#$%&'*+-.^_`|~", (int)c) != NULL);
}

/* RFC 3986 §3.2.2: unreserved and sub-delims, less the comma (a list of hosts is refused). */
static bool is_host(unsigned c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && c < 0x80 && strchr("-._~!$&'()*+;=", (int)c) != NULL);
}

static void test_character_classes_byte_by_byte(void **state)
{
    (void)state;
    for (unsigned c = 0; c < 256; c++) {
        unsigned class = sxe__http_classes[c];
        bool vchar = c >= 0x21 && c <= 0x7e;
        bool value = vchar || c >= 0x80 || c == ' ' || c == '\t'; /* field-vchar, SP, HTAB */
        bool qdtext = value && c != '"' && c != '\\';             /* RFC 9110 §5.6.4 */
        bool target = vchar && c != '#'; /* a fragment is never sent (RFC 9112 §3.2) */
        if (((class & TCHAR) != 0) != is_tchar(c) || ((class & VALUE) != 0) != value ||
            ((class & TARGET) != 0) != target || ((class & QDTEXT) != 0) != qdtext ||
            ((class & HOST) != 0) != is_host(c)) {
            fail_msg("byte 0x%02x has the classes 0x%02x", c, class);
        }
    }
}

static void test_hex_digits_byte_by_byte(void **state)
{
    (void)state;
    for (unsigned c = 0; c < 256; c++) {
        const char *digits = "0123456789abcdef", *upper = "0123456789ABCDEF";
        const char *at = c != 0 ? strchr(digits, (int)c) : NULL;
        const char *up = c != 0 ? strchr(upper, (int)c) : NULL;
        int want = at != NULL ? (int)(at - digits) : up != NULL ? (int)(up - upper) : -1;
        if (sxe__http_hex((unsigned char)c) != want) {
            fail_msg("byte 0x%02x: %d, want %d", c, sxe__http_hex((unsigned char)c), want);
        }
    }
}

/* Names compared case-blind, eight bytes at a time and then byte by byte: a difference in any
 * byte of either part is seen, and a length apart is never equal. */
static void test_names_compare_case_blind_at_every_byte(void **state)
{
    static const char lower[] = "content-length-and-more"; /* 23 bytes: 8, 8 and 7 */
    char name[sizeof(lower)];

    (void)state;
    for (size_t len = 0; len < sizeof(lower); len++) {
        char want[sizeof(lower)];
        memcpy(want, lower, len);
        want[len] = '\0';
        memcpy(name, lower, len);
        assert_true(sxe__http_name_is(name, len, want));
        for (size_t i = 0; i < len; i++) {
            name[i] = (char)(lower[i] >= 'a' && lower[i] <= 'z' ? lower[i] - 32 : lower[i]);
            assert_true(sxe__http_name_is(name, len, want)); /* upper case up to i */
        }
        for (size_t i = 0; i < len; i++) {
            memcpy(name, lower, len);
            name[i] = 'q' == lower[i] ? 'r' : 'q';
            if (sxe__http_name_is(name, len, want)) {
                fail_msg("\"%.*s\" taken for \"%s\"", (int)len, name, want);
            }
        }
        memcpy(name, lower, len);
        if (len > 0) {
            assert_false(sxe__http_name_is(name, len - 1, want));
        }
        assert_false(sxe__http_name_is(lower, len + 1, want));
    }
}

static void test_trim_drops_spaces_and_tabs_at_both_ends_only(void **state)
{
    static const struct {
        const char *text;
        size_t start, end;
    } cases[] = {
        {"abc", 0, 3},         {" abc", 1, 4}, {"abc ", 0, 3}, {"\tabc\t", 1, 4},
        {" \t a b \t ", 3, 6}, {"   ", 3, 3},  {"", 0, 0},     {"\rabc\n", 0, 5},
        {"\vabc", 0, 4},       {"x", 0, 1},    {" \t", 2, 2},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t start = 0, end = strlen(cases[i].text);
        sxe__http_trim(cases[i].text, &start, &end);
        if (start != cases[i].start || end != cases[i].end) {
            fail_msg("\"%s\": [%zu, %zu), want [%zu, %zu)", cases[i].text, start, end,
                     cases[i].start, cases[i].end);
        }
    }
    /* Within a longer buffer: only [start, end) is looked at. */
    size_t start = 2, end = 5;
    sxe__http_trim("  a b  ", &start, &end);
    assert_int_equal(start, 2);
    assert_int_equal(end, 5);
}

/* Host values at each edge: the port's length and value, its digits, brackets and escapes. */
static void test_hosts_at_each_edge(void **state)
{
    static const struct {
        const char *host;
        bool valid;
    } cases[] = {
        {"h", true},
        {"h:", true},
        {"h:0", true},
        {"h:9", true},
        {"h:65535", true},
        {"h:65536", false},
        {"h:99999", false},
        {"h:00080", true},   /* five digits */
        {"h:000080", false}, /* six, though its value is small */
        {"h:/", false},      /* the byte before '0' */
        {"h::", false},      /* the byte after '9' */
        {"h:8/", false},
        {"h/", false},
        {"h,g", false},
        {"[::1]", true},
        {"[::1]:1", true},
        {"[a.b:C]", true},
        {"[::1]:123456", false},
        {"[]", false},
        {"[", false},
        {"[::1", false},
        {"[::1]x", false},
        {"[g]", false},
        {"[::1]]", false},
        {"%41", true},
        {"a%4", false},
        {"a%4g", false},
        {"a%g1", false},
        {"%", false},
        {"a%41:1", true},
        {":1", false},
        {"", false},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (sxe__http_valid_host(cases[i].host, strlen(cases[i].host)) != cases[i].valid) {
            fail_msg("\"%s\" taken as %s", cases[i].host, cases[i].valid ? "invalid" : "valid");
        }
    }
    /* The length given is the end: bytes past it are not read. */
    assert_true(sxe__http_valid_host("h:1x", 3));
    assert_true(sxe__http_valid_host("[::1]x", 5));
    assert_false(sxe__http_valid_host("[::1]", 4));
}

static void test_transfer_coding_lists(void **state)
{
    static const struct {
        const char *value;
        int rc;
    } cases[] = {
        {"chunked", 0},
        {"CHUNKED", 0},
        {" chunked\t", 0},
        {",chunked", 0},
        {"chunked,", 0},
        {", ,chunked, ,", 0},
        {"", -400},
        {",", -400},
        {" , ", -400},
        {"gzip, chunked", -501},
        {"gzip", -501},
        {"chunked, chunked", -400},
        {"chunked, gzip", -400},
        {"chunkedx", -501},
        {"chunke", -501},
        {"chunked chunked", -501},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sxe_http_parser parser;
        sxe_http_parser_init(&parser);
        int rc = sxe__http_transfer_codings(&parser, cases[i].value, strlen(cases[i].value));
        if (rc != cases[i].rc) {
            fail_msg("\"%s\": %d, want %d", cases[i].value, rc, cases[i].rc);
        }
        if (cases[i].rc == 0) {
            assert_true(parser.flags & F_CHUNKED);
        }
    }
    /* Only len bytes are read. */
    struct sxe_http_parser parser;
    sxe_http_parser_init(&parser);
    assert_int_equal(sxe__http_transfer_codings(&parser, "chunked, gzip", 7), 0);
}

/* One request with target; @return the parse's status (0 if it parsed), and the request. */
static int parse_target(const char *method, const char *target,
                        struct sxe_http_request_head *request)
{
    struct sxe_http_parser parser;
    char text[512];
    int len =
        snprintf(text, sizeof(text), "%s %s HTTP/1.1\r\nHost: the.host\r\n\r\n", method, target);
    static char kept[512];

    memcpy(kept, text, (size_t)len + 1);
    sxe_http_parser_init(&parser);
    int rc =
        sxe_http_parse_request_head(&parser, kept, (size_t)len, &sxe_http_default_limits, request);
    if (rc < 0) {
        assert_int_equal(rc, -EPROTO);
        return sxe_http_parser_status(&parser);
    }
    assert_int_equal(rc, len);
    return 0;
}

static void expect_target(const char *method, const char *target, int status, const char *path,
                          const char *host)
{
    struct sxe_http_request_head request;
    int got = parse_target(method, target, &request);

    if (got != status) {
        fail_msg("%s %s: status %d, want %d", method, target, got, status);
    }
    if (status == 0) {
        if (request.target_len != strlen(path) || memcmp(request.target, path, strlen(path))) {
            fail_msg("%s %s: target \"%.*s\", want \"%s\"", method, target, (int)request.target_len,
                     request.target, path);
        }
        if (request.host_len != strlen(host) || memcmp(request.host, host, strlen(host))) {
            fail_msg("%s %s: host \"%.*s\", want \"%s\"", method, target, (int)request.host_len,
                     request.host, host);
        }
    }
}

/* The request-target's forms at their edges (RFC 9112 §3.2). */
static void test_target_forms_at_their_edges(void **state)
{
    (void)state;
    expect_target("GET", "/", 0, "/", "the.host");
    expect_target("OPTIONS", "*", 0, "*", "the.host");
    expect_target("DELETE", "*", 400, NULL, NULL);
    expect_target("GET", "*", 400, NULL, NULL);
    expect_target("OPTIONS", "**", 400, NULL, NULL);
    expect_target("OPTIONS", "/", 0, "/", "the.host");
    expect_target("GET", "http://", 400, NULL, NULL);
    expect_target("GET", "http://h", 0, "/", "h");
    expect_target("GET", "HTTP://h/", 0, "/", "h");
    expect_target("GET", "https://", 400, NULL, NULL);
    expect_target("GET", "https://h", 0, "/", "h");
    expect_target("GET", "https://h:1/x?y", 0, "/x?y", "h:1");
    expect_target("GET", "http:/h", 400, NULL, NULL);
    expect_target("GET", "httpx://h", 400, NULL, NULL);
    expect_target("GET", "http://h?q", 400, NULL, NULL);
    expect_target("GET", "http://h#f", 400, NULL, NULL);
    expect_target("GET", "http://h:000080/", 400, NULL, NULL);
    expect_target("GET", "http://h:65535/", 0, "/", "h:65535");
    expect_target("GET", "h", 400, NULL, NULL);
}

/* A request head parsed whole under limits: 0 if it parsed to its end, else the refusal. */
static int head_status(const char *text, size_t len, const struct sxe_http_limits *limits)
{
    struct sxe_http_parser parser;
    struct sxe_http_request_head request;

    sxe_http_parser_init(&parser);
    int rc = sxe_http_parse_request_head(&parser, text, len, limits, &request);
    if (rc < 0) {
        assert_int_equal(rc, -EPROTO);
        return sxe_http_parser_status(&parser);
    }
    assert_int_equal(rc, (int)len);
    return 0;
}

/* A chunked body of size bytes in one chunk, parsed after its head: 0 if it was read to its end,
 * else its refusal's status. */
static int chunked_status(size_t size, const struct sxe_http_limits *limits)
{
    static const char top[] = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    size_t most = sizeof(top) + 32 + size;
    char *text = malloc(most);
    struct sxe_http_parser parser;
    struct sxe_http_request_head request;
    struct sxe_http_body body = {0};

    assert_non_null(text);
    int len = snprintf(text, most, "%s%zx\r\n", top, size);
    memset(text + len, 'b', size);
    len += (int)size;
    len += snprintf(text + len, most - (size_t)len, "\r\n0\r\n\r\n");
    sxe_http_parser_init(&parser);
    long at = sxe_http_parse_request_head(&parser, text, (size_t)len, limits, &request), rc = 0;
    assert_int_equal(at, (long)sizeof(top) - 1);
    while (!body.done && (rc = sxe_http_parse_body(&parser, text + at, (size_t)len - (size_t)at,
                                                   limits, &body)) > 0) {
        at += rc;
    }
    free(text);
    if (!body.done) {
        assert_int_equal(rc, -EPROTO);
        return sxe_http_parser_status(&parser);
    }
    assert_int_equal(at, len);
    return 0;
}

/* Each limit on both sides of its edge, under the defaults the header documents (8192, 16384, 100,
 * 1 MiB) and under small ones: a request exactly at a limit is served, one byte or field past it
 * gets the limit's refusal. */
static void test_limits_at_their_edges(void **state)
{
    static const struct sxe_http_limits small = {
        .request_line = 32, .header_bytes = 64, .header_count = 2, .body_bytes = 10};
    const struct sxe_http_limits *each[] = {&sxe_http_default_limits, &small};
    char *text = malloc(1 << 15);

    (void)state;
    assert_non_null(text);
    assert_int_equal(sxe_http_default_limits.request_line, 8192);
    assert_int_equal(sxe_http_default_limits.header_bytes, 16384);
    assert_int_equal(sxe_http_default_limits.header_count, 100);
    assert_int_equal(sxe_http_default_limits.body_bytes, 1 << 20);
    for (size_t i = 0; i < sizeof(each) / sizeof(each[0]); i++) {
        const struct sxe_http_limits *limits = each[i];
        static const char line_rest[] = " HTTP/1.1\r\n", host[] = "Host: x\r\n";

        /* The request line, CRLF included: "GET /aaa...a HTTP/1.1\r\n". */
        for (uint32_t extra = 0; extra <= 1; extra++) {
            size_t target = limits->request_line + extra - strlen("GET ") - strlen(line_rest);
            int len = snprintf(text, 16, "GET /");
            memset(text + len, 'a', target - 1);
            len += (int)target - 1;
            len += sprintf(text + len, "%s%s\r\n", line_rest, host);
            assert_int_equal(head_status(text, (size_t)len, limits), extra ? 414 : 0);
        }

        /* The header section, request line and its final empty line included. */
        for (uint32_t extra = 0; extra <= 1; extra++) {
            int len = sprintf(text, "GET / HTTP/1.1\r\n%sA: ", host);
            size_t value = limits->header_bytes + extra - (size_t)len - strlen("\r\n\r\n");
            memset(text + len, 'v', value);
            len += (int)value;
            len += sprintf(text + len, "\r\n\r\n");
            assert_int_equal(head_status(text, (size_t)len, limits), extra ? 431 : 0);
        }

        /* The number of fields, Host one of them. */
        for (uint32_t extra = 0; extra <= 1; extra++) {
            int len = sprintf(text, "GET / HTTP/1.1\r\n%s", host);
            for (uint32_t field = 1; field < limits->header_count + extra; field++) {
                len += sprintf(text + len, "F%u: 1\r\n", field);
            }
            len += sprintf(text + len, "\r\n");
            assert_int_equal(head_status(text, (size_t)len, limits), extra ? 431 : 0);
        }

        /* The body, by its Content-Length (refused with the head) and chunked. */
        for (uint64_t extra = 0; extra <= 1; extra++) {
            int len = sprintf(text, "POST / HTTP/1.1\r\n%sContent-Length: %llu\r\n\r\n", host,
                              (unsigned long long)(limits->body_bytes + extra));
            assert_int_equal(head_status(text, (size_t)len, limits), extra ? 413 : 0);
            assert_int_equal(chunked_status(limits->body_bytes + extra, limits), extra ? 413 : 0);
        }
    }
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_character_classes_byte_by_byte),
        cmocka_unit_test(test_hex_digits_byte_by_byte),
        cmocka_unit_test(test_names_compare_case_blind_at_every_byte),
        cmocka_unit_test(test_trim_drops_spaces_and_tabs_at_both_ends_only),
        cmocka_unit_test(test_hosts_at_each_edge),
        cmocka_unit_test(test_transfer_coding_lists),
        cmocka_unit_test(test_target_forms_at_their_edges),
        cmocka_unit_test(test_limits_at_their_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
