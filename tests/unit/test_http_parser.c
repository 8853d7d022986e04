/*
 * The HTTP request parser: llhttp's request corpus, whole and split at every byte; the smuggling
 * rules one by one; limits; bodies; and the request it returns.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/parser/parser.h"
#include "sxe/http.h"
#include "sxe_test.h"

struct vector {
    const char *name;
    const char *data;
    size_t len;
    const char *verdict;
    int messages;
};

#include "llhttp_vectors.h"

#define DEFAULTS (&sxe_http_default_limits) /* the limits most cases parse under */

/*
 * Where sxe's verdict differs from llhttp's on purpose. Each is listed, with its rule, in
 * docs/http.md.
 */
static const struct {
    const char *name;
    const char *verdict;
} differences[] = {
    /* Only HTTP/1.0 and HTTP/1.1: RTSP, ICE and HTTP/0.9 request lines are other protocols. */
    {"Methods / REPORT request / SOURCE request with ICE", "reject"},
    {"Methods / REPORT request / OPTIONS request with RTSP", "reject"},
    {"Methods / REPORT request / ANNOUNCE request with RTSP", "reject"},
    {"Sample requests / No HTTP version", "reject"},
    /* Transfer-Encoding must be exactly "chunked": sxe decodes no other coding (501). */
    {"Transfer-Encoding header / POST with `chunked` as last transfer-encoding", "reject"},
    {"Transfer-Encoding header / POST with `chunked` as last transfer-encoding (multiple headers)",
     "reject"},
    /* The asterisk-form is for OPTIONS only (RFC 9112 §3.2.4): SSDP's M-SEARCH is not HTTP. */
    {"Methods / REPORT request / M-SEARCH request", "reject"},
    /* An absolute-form target's path must be in the caller's bytes: "http://h?q" has none. */
    {"URI / Host terminated by a query string", "reject"},
    {"URI / `host:port` terminated by a query string", "reject"},
    /* A fragment is never sent (RFC 9112 §3.2: the target has none): '#' is refused with 400, as
     * nginx refuses a path that climbs above the root, so a server behind does not see it. */
    {"URI / Fragment in URI", "reject"},
    /* userinfo in an http URI is an error to its recipient (RFC 9110 §4.2.4). */
    {"URI / `host:port` and basic auth", "reject"},
    /* llhttp's test skips the first body through a callback; by RFC 9112 its 123 bytes swallow
     * the second request, so the bytes end inside a body. */
    {"Content-Length header / Content-Length reset when no body is received", "incomplete"},
};

static const char *difference(const char *name)
{
    for (size_t i = 0; i < sizeof(differences) / sizeof(differences[0]); i++) {
        if (strcmp(differences[i].name, name) == 0) {
            return differences[i].verdict;
        }
    }
    return NULL;
}

/* A parse's result with a refusal as its negative status: -EPROTO carries it in the parser. */
static long outcome(long rc, const struct sxe_http_parser *parser)
{
    if (rc >= 0) {
        return rc;
    }
    assert_int_equal(rc, -EPROTO);
    assert_true(sxe_http_parser_status(parser) >= 400);
    return -sxe_http_parser_status(parser);
}

/*
 * Feeds data as it would arrive on a connection: the first split bytes, then the rest, keeping
 * what is unconsumed. Returns the verdict, in the corpus's words, and counts complete messages.
 */
static const char *run(const char *data, size_t len, size_t split, int *messages, int *status)
{
    struct sxe_http_parser parser;
    struct sxe_http_request_head request;
    struct sxe_http_body body;
    size_t base = 0;
    size_t available = split;
    bool in_body = false;

    sxe_http_parser_init(&parser);
    *messages = 0;
    *status = 0;
    for (;;) {
        long rc;
        if (!in_body) {
            rc = sxe_http_parse_request_head(&parser, data + base, available - base, DEFAULTS,
                                             &request);
        } else {
            rc = sxe_http_parse_body(&parser, data + base, available - base, DEFAULTS, &body);
        }
        if (rc < 0) {
            *status = (int)-outcome(rc, &parser);
            return "reject";
        }
        bool done = false;
        if (!in_body && rc > 0) {
            base += (size_t)rc;
            if (request.upgrade || request.tunnel) {
                ++*messages;
                return "upgrade/pause";
            }
            in_body = request.has_body;
            done = !in_body;
        } else if (in_body) {
            base += (size_t)rc;
            done = body.done;
            in_body = !body.done;
        }
        if (done) {
            ++*messages;
            if (!request.keep_alive) {
                return base < len ? "accept-then-close" : "accept";
            }
            continue;
        }
        if (rc == 0 || base == available) {
            if (available < len) {
                available = len;
                continue;
            }
            return in_body || sxe_http_parser_busy(&parser) ? "incomplete" : "accept";
        }
    }
}

/*
 * Whether our verdict agrees with the corpus's. The corpus says "accept" for bytes that hold its
 * messages, even when more bytes follow that start another: what counts there is no error and the
 * number of messages.
 */
static bool agrees(const struct vector *vector, const char *verdict, int messages)
{
    if (strcmp(vector->verdict, "accept") == 0) {
        return (strcmp(verdict, "accept") == 0 || strcmp(verdict, "incomplete") == 0) &&
               (vector->messages == 0 || messages == vector->messages);
    }
    return strcmp(verdict, vector->verdict) == 0;
}

static void test_llhttp_corpus_whole_and_split_at_every_byte(void **state)
{
    unsigned matched = 0, differing = 0, failures = 0;

    (void)state;
    for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
        const struct vector *vector = &vectors[i];
        const char *expected = difference(vector->name);
        int messages, status;
        const char *verdict = run(vector->data, vector->len, vector->len, &messages, &status);

        if (expected != NULL ? strcmp(verdict, expected) != 0
                             : !agrees(vector, verdict, messages)) {
            print_error("%s: expected %s (%d messages), got %s (%d messages, status %d)\n",
                        vector->name, expected ? expected : vector->verdict, vector->messages,
                        verdict, messages, status);
            failures++;
            continue;
        }
        /* The same verdict however the bytes are split. */
        for (size_t split = 0; split < vector->len; split++) {
            int split_messages, split_status;
            const char *split_verdict =
                run(vector->data, vector->len, split, &split_messages, &split_status);
            if (strcmp(split_verdict, verdict) != 0 || split_messages != messages ||
                split_status != status) {
                print_error("%s: split at %zu gives %s, whole gives %s\n", vector->name, split,
                            split_verdict, verdict);
                failures++;
                break;
            }
        }
        expected != NULL ? differing++ : matched++;
    }
    print_message("llhttp corpus: %u of %zu cases agree, %u differ on purpose\n", matched,
                  sizeof(vectors) / sizeof(vectors[0]), differing);
    assert_int_equal(failures, 0);
    assert_int_equal(differing, sizeof(differences) / sizeof(differences[0]));
}

/* Parses text as one request head; returns the parser's result. */
static int parse(const char *text, struct sxe_http_request_head *request)
{
    struct sxe_http_parser parser;

    sxe_http_parser_init(&parser);
    return (int)outcome(sxe_http_parse_request_head(&parser, text, strlen(text), DEFAULTS, request),
                        &parser);
}

static void test_request_fields(void **state)
{
    static const char text[] = "GET /index.html?q=1 HTTP/1.1\r\n"
                               "Host: example.com\r\n"
                               "X-Spaces:  \t padded value \t \r\n"
                               "Empty:\r\n"
                               "Expect: 100-continue\r\n\r\n";
    struct sxe_http_request_head request;

    (void)state;
    assert_int_equal(parse(text, &request), (int)strlen(text));
    assert_int_equal(request.method_len, 3);
    assert_memory_equal(request.method, "GET", 3);
    assert_int_equal(request.target_len, strlen("/index.html?q=1"));
    assert_memory_equal(request.target, "/index.html?q=1", request.target_len);
    assert_int_equal(request.minor_version, 1);
    assert_int_equal(request.header_count, 4);
    assert_int_equal(request.host_count, 1);
    assert_true(request.keep_alive);
    assert_false(request.has_body);
    assert_true(request.expect_continue);
    const struct sxe_http_header *header = sxe_http_request_header(&request, "x-SPACES");
    assert_non_null(header);
    assert_int_equal(header->value_len, strlen("padded value"));
    assert_memory_equal(header->value, "padded value", header->value_len);
    assert_int_equal(sxe_http_request_header(&request, "empty")->value_len, 0);
    assert_null(sxe_http_request_header(&request, "missing"));
}

/* A head parsed in one call and one parsed over many calls give the same request. */
static void test_same_request_however_split(void **state)
{
    static const char text[] = "\r\nPOST /form?x=1 HTTP/1.1\r\nHost: h\r\nA:b\r\nLong-Value: "
                               "0123456789abcdef0123456789abcdef\t \r\nContent-Length: 0\r\n\r\n";
    struct sxe_http_request_head whole, parted;
    struct sxe_http_parser parser;
    size_t len = strlen(text);

    (void)state;
    sxe_http_parser_init(&parser);
    assert_int_equal(sxe_http_parse_request_head(&parser, text, len, DEFAULTS, &whole), (int)len);
    for (size_t split = 1; split < len; split++) {
        sxe_http_parser_init(&parser);
        assert_int_equal(sxe_http_parse_request_head(&parser, text, split, DEFAULTS, &parted), 0);
        assert_int_equal(sxe_http_parse_request_head(&parser, text, len, DEFAULTS, &parted),
                         (int)len);
        assert_ptr_equal(parted.method, whole.method);
        assert_int_equal(parted.method_len, 4);
        assert_ptr_equal(parted.target, whole.target);
        assert_int_equal(parted.target_len, whole.target_len);
        assert_int_equal(parted.header_count, 4);
        for (unsigned i = 0; i < whole.header_count; i++) {
            assert_ptr_equal(parted.headers[i].name, whole.headers[i].name);
            assert_int_equal(parted.headers[i].name_len, whole.headers[i].name_len);
            assert_ptr_equal(parted.headers[i].value, whole.headers[i].value);
            assert_int_equal(parted.headers[i].value_len, whole.headers[i].value_len);
        }
    }
    assert_int_equal(whole.headers[2].value_len, 32);
    assert_memory_equal(whole.headers[1].value, "b", 1);
}

static void test_keep_alive_rules(void **state)
{
    struct sxe_http_request_head request;

    (void)state;
    assert_true(parse("GET / HTTP/1.1\r\nHost: a\r\n\r\n", &request) > 0);
    assert_true(request.keep_alive);
    assert_true(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", &request) > 0);
    assert_false(request.keep_alive);
    assert_true(parse("GET / HTTP/1.0\r\n\r\n", &request) > 0);
    assert_false(request.keep_alive);
    assert_int_equal(request.minor_version, 0);
    assert_true(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &request) > 0);
    assert_true(request.keep_alive);
    assert_true(parse("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", &request) > 0);
    assert_false(request.keep_alive);
    assert_true(parse("GET / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: ws\r\n\r\n", &request) >
                0);
    assert_true(request.upgrade);
    assert_true(parse("GET / HTTP/1.1\r\nUpgrade: ws\r\n\r\n", &request) > 0);
    assert_false(request.upgrade); /* Upgrade without Connection: upgrade is not an upgrade */
    assert_false(request.tunnel);
    assert_true(parse("CONNECT host:443 HTTP/1.1\r\nHost: host:443\r\n\r\n", &request) > 0);
    assert_true(request.tunnel);
    assert_false(request.upgrade);
}

/* Each rule that request smuggling relies on breaking, refused with its status. */
static void test_smuggling_rules(void **state)
{
    static const struct {
        const char *text;
        int status;
    } cases[] = {
        {"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 5 5\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 0x5\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
         400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n", 501},
        {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nX: a\nb\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nX : a\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nX\t: a\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nX(Y): a\r\n\r\n", 400},
        {"G(T / HTTP/1.1\r\n\r\n", 400},
        {"GET / HTTP/1.1\nHost: a\n\n", 400},
        {"GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400},
        {"GET / HTTP/2.0\r\n\r\n", 505},
        {"GET / HTTP/1.2\r\n\r\n", 505},
        {"GET / HTTP/1.x\r\n\r\n", 400},
        {"GET / HTTP/A.1\r\n\r\n", 400}, /* not a digit: bad, not an unknown version */
        {"GET / HTTX/1.1\r\n\r\n", 400},
        {"GET  / HTTP/1.1\r\n\r\n", 400},
        {"GET /a b HTTP/1.1\r\n\r\n", 400},
        {"BREW /pot HTTP/1.1\r\n\r\n", 501},
        {" GET / HTTP/1.1\r\n\r\n", 400},
    };
    struct sxe_http_request_head request;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sxe_http_parser parser;
        const char *text = cases[i].text;
        size_t len = strlen(text);
        sxe_http_parser_init(&parser);
        long rc =
            outcome(sxe_http_parse_request_head(&parser, text, len, DEFAULTS, &request), &parser);
        if (rc != -cases[i].status) {
            fail_msg("case %zu (%s): expected %d, got %d", i, text, -cases[i].status, rc);
        }
    }

    /* NUL in a value, which strlen above could not carry. */
    static const char nul[] = "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n";
    struct sxe_http_parser parser;
    sxe_http_parser_init(&parser);
    assert_int_equal(
        outcome(sxe_http_parse_request_head(&parser, nul, sizeof(nul) - 1, DEFAULTS, &request),
                &parser),
        -400);
    assert_int_equal(sxe_http_parser_status(&parser), 400);
    sxe_http_parser_init(&parser);
    assert_int_equal(sxe_http_parser_status(&parser), 0);
}

/* Expects text to parse as a whole head, or to be refused with status. */
static void expect_status(const char *text, int status, struct sxe_http_request_head *request)
{
    int rc = parse(text, request);
    int expected = status == 0 ? (int)strlen(text) : -status;
    if (rc != expected) {
        fail_msg("%s: expected %d, got %d", text, expected, rc);
    }
}

/* Host (RFC 9112 §3.2, RFC 9110 §7.2): one, and a valid uri-host [":" port]. */
static void test_host_rules(void **state)
{
    static const struct {
        const char *host;
        int status;
    } cases[] = {
        {"example.com", 0},
        {"example.com:8080", 0},
        {"127.0.0.1", 0},
        {"[::1]:443", 0},
        {"[fe80::1%25]", 400},
        {"a-b_c~d.e!$&'()*+;=", 0},
        {"x%41y", 0},
        {"host:", 0},
        {"", 400},
        {"a b", 400},
        {"a,b", 400},
        {"a.com, b.com", 400},
        {"user@a.com", 400},
        {"a.com/path", 400},
        {"a.com:80x", 400},
        {"a.com:123456", 400},
        {"a.com:65536", 400},
        {"[::1", 400},
        {"[]", 400},
        {"x%4", 400},
        {":80", 400},
        {"a.com:80:80", 400},
        {"[::1]x", 400},
        {"a\"b", 400},
    };
    struct sxe_http_request_head request;
    char text[256];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", cases[i].host);
        expect_status(text, cases[i].status, &request);
        if (cases[i].status == 0) {
            assert_int_equal(request.host_len, strlen(cases[i].host));
            assert_memory_equal(request.host, cases[i].host, request.host_len);
        }
    }
    expect_status("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400, &request);
    expect_status("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", 400, &request);
    expect_status("GET / HTTP/1.1\r\nHost:\r\n\r\n", 400, &request);
    expect_status("GET / HTTP/1.0\r\n\r\n", 0, &request);
    assert_null(request.host);
    assert_int_equal(request.host_count, 0);
}

/* Request-target forms (RFC 9112 §3.2); an absolute-form authority wins over Host. */
static void test_target_forms(void **state)
{
    struct sxe_http_request_head request;

    (void)state;
    expect_status("GET http://example.com:81/a/b?c=d HTTP/1.1\r\nHost: other\r\n\r\n", 0, &request);
    assert_int_equal(request.target_len, strlen("/a/b?c=d"));
    assert_memory_equal(request.target, "/a/b?c=d", request.target_len);
    assert_int_equal(request.host_len, strlen("example.com:81"));
    assert_memory_equal(request.host, "example.com:81", request.host_len);
    expect_status("GET HTTPS://Example.com HTTP/1.1\r\nHost: x\r\n\r\n", 0, &request);
    assert_int_equal(request.target_len, 1);
    assert_memory_equal(request.target, "/", 1);
    assert_memory_equal(request.host, "Example.com", request.host_len);
    expect_status("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 0, &request);
    assert_memory_equal(request.target, "*", request.target_len);

    static const char *const refused[] = {
        "GET * HTTP/1.1\r\nHost: x\r\n\r\n",
        "HEAD * HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET example.com:80 HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET index.html HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET ftp://example.com/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET http:/example.com/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET http:// HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET http:///a HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET http://u:p@example.com/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET http://a,b/ HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET http://example.com?q HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET http://example.com#f HTTP/1.1\r\nHost: x\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        expect_status(refused[i], 400, &request);
    }

    /* Split anywhere, an absolute-form request gives the same request. */
    static const char text[] = "GET http://h:1/p?q HTTP/1.1\r\nHost: x\r\n\r\n";
    for (size_t split = 1; split < sizeof(text) - 1; split++) {
        struct sxe_http_parser parser;
        sxe_http_parser_init(&parser);
        assert_int_equal(sxe_http_parse_request_head(&parser, text, split, DEFAULTS, &request), 0);
        assert_int_equal(
            sxe_http_parse_request_head(&parser, text, sizeof(text) - 1, DEFAULTS, &request),
            (int)sizeof(text) - 1);
        assert_ptr_equal(request.target, text + 14);
        assert_int_equal(request.target_len, 4);
        assert_ptr_equal(request.host, text + 11);
        assert_int_equal(request.host_len, 3);
    }
}

/* Transfer-Encoding is a list (RFC 9110 §5.6.1): empty elements do not count. */
static void test_transfer_encoding_lists(void **state)
{
    static const struct {
        const char *value;
        int status;
    } cases[] = {
        {", chunked", 0},
        {"chunked,", 0},
        {" ,, chunked , ", 0},
        {"CHUNKED", 0},
        {"chunked, chunked", 400},
        {"chunked,,chunked", 400},
        {"chunked, gzip", 400},
        {"gzip, chunked", 501},
        {"", 400},
        {",", 400},
        {"chunked;q=1", 501},
        {"identity", 501},
    };
    struct sxe_http_request_head request;
    char text[256];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(text, sizeof(text), "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: %s\r\n\r\n",
                 cases[i].value);
        expect_status(text, cases[i].status, &request);
        if (cases[i].status == 0) {
            assert_true(request.chunked);
        }
        /* With a Content-Length, before or after: always 400, never a body of either length. */
        snprintf(text, sizeof(text),
                 "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: %s\r\nContent-Length: 3\r\n\r\n",
                 cases[i].value);
        expect_status(text, cases[i].status == 501 ? 501 : 400, &request);
        snprintf(text, sizeof(text),
                 "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: %s\r\n\r\n",
                 cases[i].value);
        expect_status(text, 400, &request);
    }
    expect_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ,\r\nTransfer-Encoding: "
                  "chunked\r\n\r\n",
                  400, &request);
}

static void test_limits(void **state)
{
    struct sxe_http_limits limits = {
        .request_line = 32, .header_bytes = 64, .header_count = 2, .body_bytes = 10};
    struct sxe_http_parser parser;
    struct sxe_http_request_head request;
    char text[256];

    (void)state;
    snprintf(text, sizeof(text), "GET /%s HTTP/1.1\r\n\r\n", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    sxe_http_parser_init(&parser);
    assert_int_equal(
        outcome(sxe_http_parse_request_head(&parser, text, strlen(text), &limits, &request),
                &parser),
        -414);
    /* Refused as soon as the line is too long, before it ends. */
    sxe_http_parser_init(&parser);
    assert_int_equal(
        outcome(sxe_http_parse_request_head(&parser, text, 33, &limits, &request), &parser), -414);

    /* The limit counts from the request line's start, not from empty lines before it, whether or
     * not they came in the same call (the fuzzer found the two disagreeing). */
    snprintf(text, sizeof(text), "\r\nGET /%s HTTP/1.1\r\nHost: x\r\n\r\n", "aaaaaaaaaaaaaaa");
    assert_int_equal(strlen("GET /aaaaaaaaaaaaaaa HTTP/1.1\r\n"), 31);
    sxe_http_parser_init(&parser);
    assert_int_equal(sxe_http_parse_request_head(&parser, text, strlen(text), &limits, &request),
                     (int)strlen(text));
    sxe_http_parser_init(&parser);
    assert_int_equal(sxe_http_parse_request_head(&parser, text, 2, &limits, &request), 0);
    assert_int_equal(sxe_http_parse_request_head(&parser, text, strlen(text), &limits, &request),
                     (int)strlen(text));

    snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n");
    sxe_http_parser_init(&parser);
    assert_int_equal(
        outcome(sxe_http_parse_request_head(&parser, text, strlen(text), &limits, &request),
                &parser),
        -431);

    snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nA: %s\r\n\r\n",
             "0123456789012345678901234567890123456789012345678901234567890");
    sxe_http_parser_init(&parser);
    assert_int_equal(
        outcome(sxe_http_parse_request_head(&parser, text, strlen(text), &limits, &request),
                &parser),
        -431);

    snprintf(text, sizeof(text), "POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n");
    sxe_http_parser_init(&parser);
    assert_int_equal(
        outcome(sxe_http_parse_request_head(&parser, text, strlen(text), &limits, &request),
                &parser),
        -413);

    /* A chunked body past the limit is refused at the chunk size that passes it. */
    static const char chunked[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                  "5\r\nhello\r\n6\r\nworld!\r\n0\r\n\r\n";
    struct sxe_http_body body;
    sxe_http_parser_init(&parser);
    int head = sxe_http_parse_request_head(&parser, chunked, strlen(chunked), &limits, &request);
    assert_true(head > 0);
    long at = head, rc;
    while ((rc = sxe_http_parse_body(&parser, chunked + at, strlen(chunked) - (size_t)at, &limits,
                                     &body)) > 0) {
        at += rc;
    }
    assert_int_equal(outcome(rc, &parser), -413);
}

/* Reads a whole body, a few bytes at a time, and returns it joined. */
static long read_body(const char *text, size_t step, char *out, size_t *out_len)
{
    struct sxe_http_parser parser;
    struct sxe_http_request_head request;
    struct sxe_http_body body = {0};
    size_t len = strlen(text);
    size_t base, available = step;
    int head;

    sxe_http_parser_init(&parser);
    while ((head = sxe_http_parse_request_head(&parser, text, available < len ? available : len,
                                               DEFAULTS, &request)) == 0) {
        available += step;
        assert_true(available < len + step);
    }
    assert_true(head > 0);
    base = (size_t)head;
    *out_len = 0;
    while (!body.done) {
        size_t end = available < len ? available : len;
        long rc = sxe_http_parse_body(&parser, text + base, end - base, DEFAULTS, &body);
        if (rc < 0) {
            return outcome(rc, &parser);
        }
        assert_true((size_t)rc <= end - base); /* it consumes only what it was given */
        memcpy(out + *out_len, body.data, body.len);
        *out_len += body.len;
        base += (size_t)rc;
        if (!body.done && base == end) {
            if (end == len) {
                return 0; /* incomplete */
            }
            available += step;
        }
    }
    return (long)base;
}

static void test_bodies(void **state)
{
    static const char fixed[] = "PUT /x HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world";
    static const char chunked[] = "POST /x HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
                                  "5;name=value;other=\"q\\\"uoted\"\r\nhello\r\n"
                                  "1 ; x\r\n \r\n"
                                  "00005\r\nworld\r\n0\r\nTrailer: yes\r\nMore: 1\r\n\r\n";
    char out[64];
    size_t out_len;

    (void)state;
    for (size_t step = 1; step <= strlen(chunked); step++) {
        assert_int_equal(read_body(fixed, step, out, &out_len), (long)strlen(fixed));
        assert_int_equal(out_len, 11);
        assert_memory_equal(out, "hello world", 11);
        assert_int_equal(read_body(chunked, step, out, &out_len), (long)strlen(chunked));
        assert_int_equal(out_len, 11);
        assert_memory_equal(out, "hello world", 11);
    }
}

static void test_bad_chunks(void **state)
{
    static const char *const cases[] = {
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nx\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\"b\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\rx",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\rX",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1111111111111111111\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nBad Trailer: x\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: \x01\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: x\rx",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\rx",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n:x\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\"\\\x01\"\r\n",
    };
    char out[64];
    size_t out_len;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long rc = read_body(cases[i], strlen(cases[i]), out, &out_len);
        if (rc >= 0) {
            fail_msg("bad chunk case %zu was accepted: %s", i, cases[i]);
        }
        assert_true(rc == -400 || rc == -413);
    }
}

/* Pipelined requests parse one after another from the bytes that follow each. */
static void test_pipelined(void **state)
{
    static const char text[] = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"
                               "POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
                               "GET /3 HTTP/1.1\r\nHost: a\r\n\r\n";
    struct sxe_http_parser parser;
    struct sxe_http_request_head request;
    struct sxe_http_body body;
    size_t at = 0;

    (void)state;
    sxe_http_parser_init(&parser);
    for (int i = 1; i <= 3; i++) {
        int head =
            sxe_http_parse_request_head(&parser, text + at, strlen(text) - at, DEFAULTS, &request);
        assert_true(head > 0);
        assert_int_equal(request.target[1], '0' + i);
        at += (size_t)head;
        if (request.has_body) {
            long used = sxe_http_parse_body(&parser, text + at, strlen(text) - at, DEFAULTS, &body);
            assert_int_equal(used, 3);
            assert_true(body.done);
            assert_memory_equal(body.data, "abc", 3);
            at += (size_t)used;
        }
    }
    assert_int_equal(at, strlen(text));
}

/*
 * Every byte value at every place of a header name and of a method, under both token scanners:
 * refused exactly when it is not a token character (the colon and the space end them).
 */
static void test_token_characters_under_both_scanners(void **state)
{
    static const char tchars[] = "!#$%&'*+-.^_`|~";
    char text[256];
    struct sxe_http_request_head request;

    (void)state;
    for (int ssse3 = 0; ssse3 < 2; ssse3++) {
        sxe__http_parser_use_ssse3(ssse3);
        for (unsigned c = 0; c < 256; c++) {
            bool tchar = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                         (c >= 'A' && c <= 'Z') || (c != 0 && strchr(tchars, (int)c) != NULL);
            for (size_t place = 0; place < 40; place++) {
                char name[41];
                memset(name, 'x', sizeof(name) - 1);
                name[place] = (char)c;
                static const char before[] = "GET / HTTP/1.1\r\nHost: h\r\n";
                static const char after[] = ": v\r\n\r\n";
                int len = 0;
                memcpy(text, before, sizeof(before) - 1); /* not printf: the byte may be NUL */
                len += (int)sizeof(before) - 1;
                memcpy(text + len, name, sizeof(name) - 1);
                len += (int)sizeof(name) - 1;
                memcpy(text + len, after, sizeof(after) - 1);
                len += (int)sizeof(after) - 1;
                struct sxe_http_parser parser;
                sxe_http_parser_init(&parser);
                int rc =
                    sxe_http_parse_request_head(&parser, text, (size_t)len, DEFAULTS, &request);
                bool refused = rc < 0;
                if (c == ':' && place > 0) {
                    refused = false; /* the name ends early; the rest is the value */
                }
                if (refused != !(tchar || (c == ':' && place > 0))) {
                    fail_msg("byte 0x%02x at %zu of a name: %d (%s)", c, place, rc,
                             ssse3 ? "ssse3" : "sse2");
                }
            }
            /* A method of that byte then "ET": a token, or refused. */
            int len = snprintf(text, sizeof(text), "%cET / HTTP/1.1\r\nHost: h\r\n\r\n",
                               c == 0 ? 1 : (int)c);
            struct sxe_http_parser parser;
            sxe_http_parser_init(&parser);
            long rc =
                outcome(sxe_http_parse_request_head(&parser, text, (size_t)len, DEFAULTS, &request),
                        &parser);
            bool token = c != 0 && (c == 1 ? false : tchar);
            if (token && c != 'G' && rc != -501) {
                fail_msg("method byte 0x%02x: %d, want 501 (%s)", c, rc, ssse3 ? "ssse3" : "sse2");
            }
            if (!token && c != '\r' && rc != -400) {
                fail_msg("method byte 0x%02x: %d, want 400 (%s)", c, rc, ssse3 ? "ssse3" : "sse2");
            }
        }
    }
    sxe__http_parser_use_ssse3(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llhttp_corpus_whole_and_split_at_every_byte),
        cmocka_unit_test(test_request_fields),
        cmocka_unit_test(test_same_request_however_split),
        cmocka_unit_test(test_keep_alive_rules),
        cmocka_unit_test(test_smuggling_rules),
        cmocka_unit_test(test_host_rules),
        cmocka_unit_test(test_target_forms),
        cmocka_unit_test(test_transfer_encoding_lists),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_bad_chunks),
        cmocka_unit_test(test_pipelined),
        cmocka_unit_test(test_token_characters_under_both_scanners),
    };
    /* Everything under each token scanner: SSE2, then SSSE3 where the CPU has it. */
    sxe__http_parser_use_ssse3(false);
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    sxe__http_parser_use_ssse3(true);
    return failed + cmocka_run_group_tests(tests, NULL, NULL);
}
