/*
 * The HTTP server module over real loopback sockets: every status it answers itself, routing
 * (methods, OPTIONS, upgrades, absolute form, query strings, percent-decoding), formatted
 * responses, headers and their misuse, counters, ports with and without workers, and a slow
 * request's 408. Connections, files, pipelining and bodies are in test_http_server_io.c; the
 * harness is in http_server_test.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe/http.h"
#include "sxe_test.h"
#include "sys.h"

#include "http_server_test.h"
#include "sxe/timer.h"

static void test_hello_response(void **state)
{
    bool closed;
    const char *response = exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);

    (void)state;
    assert_memory_equal(response, "HTTP/1.1 200 OK\r\nDate: ", 23);
    assert_non_null(strstr(response, " GMT\r\nServer: sxe\r\nContent-Length: 6\r\n"));
    assert_non_null(strstr(response, "Content-Type: text/plain\r\n\r\nhello\n"));
    assert_null(strstr(response, "Connection:"));
    assert_false(closed);
}

static void test_a_connection_user_pointer_is_the_programs(void **state)
{
    static const char request[] = "GET /user HTTP/1.1\r\nHost: x\r\n\r\n";
    char response[4096];
    bool closed;

    (void)state;
    for (int round = 0; round < 2; round++) { /* a new connection starts from NULL */
        int fd = client();
        for (int i = 0; i < 3; i++) {
            char expected[32];
            assert_int_equal(send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL),
                             (ssize_t)sizeof(request) - 1);
            receive(fd, response, sizeof(response), &closed);
            snprintf(expected, sizeof(expected), "seen %d\n", i);
            assert_false(closed);
            assert_non_null(strstr(response, expected));
        }
        close(fd);
        pump();
    }
}

static void test_statuses_the_server_answers(void **state)
{
    char long_target[400];
    char many_headers[600];

    (void)state;
    expect_status("GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 404 Not Found", false);
    expect_status("GET /post HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 405 Method Not Allowed",
                  false);
    expect_status("GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 400 Bad Request", true);
    expect_status("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "HTTP/1.1 400 Bad Request", true);
    expect_status("GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n", "HTTP/1.1 400 Bad Request",
                  true);
    expect_status("BREW / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 501 Not Implemented", true);
    expect_status("CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n", "HTTP/1.1 501 Not Implemented",
                  true);
    expect_status("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "HTTP/1.1 400 Bad Request", true);
    expect_status("GET * HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400 Bad Request", true);
    expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                  "HTTP/1.1 400 Bad Request", true); /* a chunk size that is not hex */
    expect_status("GET / HTTP/2.0\r\nHost: x\r\n\r\n", "HTTP/1.1 505 HTTP Version Not Supported",
                  true);
    expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n",
                  "HTTP/1.1 413 Content Too Large", true);
    expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: "
                  "chunked\r\n\r\n",
                  "HTTP/1.1 400 Bad Request", true);
    snprintf(long_target, sizeof(long_target), "GET /%0300d HTTP/1.1\r\nHost: x\r\n\r\n", 0);
    expect_status(long_target, "HTTP/1.1 414 URI Too Long", true);
    int len = snprintf(many_headers, sizeof(many_headers), "GET / HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 12; i++) {
        len += snprintf(many_headers + len, sizeof(many_headers) - (size_t)len, "H%d: v\r\n", i);
    }
    snprintf(many_headers + len, sizeof(many_headers) - (size_t)len, "\r\n");
    expect_status(many_headers, "HTTP/1.1 431 Request Header Fields Too Large", true);
    expect_status("GET /silent HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 500 Internal Server Error",
                  true);
}

static void test_method_not_allowed_says_which_are(void **state)
{
    bool closed;
    const char *response = exchange("DELETE /post HTTP/1.1\r\nHost: x\r\n\r\n", &closed);

    (void)state;
    assert_memory_equal(response, "HTTP/1.1 405", 12);
    assert_non_null(strstr(response, "Allow: POST, PUT, OPTIONS\r\n"));
    assert_false(closed);
    response = exchange("TRACE / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_memory_equal(response, "HTTP/1.1 405", 12);
    assert_non_null(strstr(response, "Allow: GET, HEAD, OPTIONS\r\n"));
}

/* Routes 14 methods on path, 13 of 15 bytes and the last of last_len, and writes the Allow list
 * they make into expected: 13 separators and last_len 9 bring it to 230 bytes. */
static void route_many_methods(const char *path, int last_len, char *expected, size_t size)
{
    char method[16];

    snprintf(expected, size, "Allow: ");
    for (int i = 0; i < 14; i++) {
        snprintf(method, sizeof(method), "%c%.*s", 'A' + i, i < 13 ? 14 : last_len - 1,
                 "MMMMMMMMMMMMMM");
        assert_int_equal(sxe_http_server_route(server, method, path, 0, hello, NULL), 0);
        snprintf(expected + strlen(expected), size - strlen(expected), "%s%s", i ? ", " : "",
                 method);
    }
}

/* An Allow list holds 239 bytes: OPTIONS fits to the byte after 230 of methods, not after 231. */
static void test_a_full_allow_list_is_cut_at_a_method(void **state)
{
    char expected[320];
    bool closed;

    (void)state;
    route_many_methods("/full", 9, expected, sizeof(expected));
    assert_int_equal(strlen(expected), 7 + 230);
    strcat(expected, ", OPTIONS\r\n");
    const char *response = exchange("OPTIONS /full HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_non_null(strstr(response, expected));
    route_many_methods("/fuller", 10, expected, sizeof(expected));
    strcat(expected, "\r\n");
    response = exchange("DELETE /fuller HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_memory_equal(response, "HTTP/1.1 405", 12);
    assert_non_null(strstr(response, expected));
}

/* OPTIONS (RFC 9110 §9.3.7): answered by the module unless a route takes it. */
static void test_options_answered_with_what_is_allowed(void **state)
{
    bool closed;
    const char *response = exchange("OPTIONS /post HTTP/1.1\r\nHost: x\r\n\r\n", &closed);

    (void)state;
    assert_memory_equal(response, "HTTP/1.1 200 OK\r\n", 17);
    assert_non_null(strstr(response, "Content-Length: 0\r\n"));
    assert_non_null(strstr(response, "Allow: POST, PUT, OPTIONS\r\n"));
    assert_false(closed);

    /* The whole server: the methods of every route that names its own. */
    response = exchange("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_memory_equal(response, "HTTP/1.1 200 OK\r\n", 17);
    assert_non_null(strstr(response, "Allow: GET, HEAD, POST, PUT, OPTIONS\r\n"));

    /* A route for any method answers OPTIONS itself; a path with no route is 404. */
    response = exchange("OPTIONS /echo HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_memory_equal(response, "HTTP/1.1 200 OK\r\n", 17);
    assert_null(strstr(response, "Allow:"));
    assert_non_null(strstr(response, "path=/echo query="));
    response = exchange("OPTIONS /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_memory_equal(response, "HTTP/1.1 404", 12);

    /* The answer is finished: a request behind it on the same connection is answered too. */
    response = exchange("OPTIONS /post HTTP/1.1\r\nHost: x\r\n\r\n"
                        "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n",
                        &closed);
    const char *second = strstr(response + 1, "HTTP/1.1 200 OK\r\n");
    assert_non_null(second);
    assert_non_null(strstr(second, "path=/echo query="));
}

/* An Upgrade the server does not take is ignored (RFC 9110 §7.8): curl --http2 gets its 200. */
static void test_an_upgrade_not_taken_is_answered_as_usual(void **state)
{
    bool closed;
    const char *response =
        exchange("GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, "
                 "HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: "
                 "AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
                 &closed);

    (void)state;
    assert_memory_equal(response, "HTTP/1.1 200 OK\r\n", 17);
    assert_null(strstr(response, "101"));
    assert_non_null(strstr(strstr(response, "hello\n") + 6, "HTTP/1.1 200 OK\r\n"));
    assert_false(closed);
}

/* Query parameters by name (decoded) and in order (as sent); the path after a prefix route's. */
static void test_query_parameters_and_the_rest_of_the_path(void **state)
{
    static const struct {
        const char *target;
        const char *body;
    } cases[] = {
        {"/api/users/42?na%20me=J%C3%B6rg+x&flag&&empty=&na+me=second",
         "rest=users/42 name=7:J\xc3\xb6rg x "
         "params=[na%20me=J%C3%B6rg+x][flag=][empty=][na+me=second]"},
        {"/api/?na+me=", "rest= name=0: params=[na+me=]"},
        {"/api/?na+me", "rest= name=0: params=[na+me=]"},
        {"/api/x?other=1", "rest=x name=-2:unset params=[other=1]"},
        {"/api/x", "rest=x name=-2:unset params="},
        {"/api/x?na+me=0123456789abcdef", "rest=x name=-105:unset params=[na+me=0123456789abcdef]"},
        {"/api/x?na+me=%zz", "rest=x name=-22:unset params=[na+me=%zz]"},
        {"/api/x?na+me%=1&na+me=ok", "rest=x name=2:ok params=[na+me%=1][na+me=ok]"},
    };
    char request[256];
    bool closed;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(request, sizeof(request), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", cases[i].target);
        const char *response = exchange(request, &closed);
        assert_memory_equal(response, "HTTP/1.1 200 OK\r\n", 17);
        assert_non_null(strstr(response, "Content-Type: application/json\r\nX-Rest-Length: "));
        const char *body = strstr(response, "\r\n\r\n") + 4;
        if (strcmp(body, cases[i].body) != 0) {
            fail_msg("%s: expected %s, got %s", cases[i].target, cases[i].body, body);
        }
    }
}

static void test_formatted_responses(void **state)
{
    bool closed;
    const char *response = exchange("GET /format?width=3 HTTP/1.1\r\nHost: x\r\n\r\n", &closed);

    (void)state;
    assert_memory_equal(response, "HTTP/1.1 200 OK\r\n", 17);
    assert_non_null(strstr(response, "Content-Length: 4\r\nContent-Type: text/plain\r\nX-F: 1\r\n"
                                     "\r\n007|"));
    response = exchange("GET /format?width=4095 HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_non_null(strstr(response, "Content-Length: 4096\r\n"));
    response = exchange("GET /format?width=4096 HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_memory_equal(response, "HTTP/1.1 500", 12);
    assert_non_null(strstr(response, "too big\n"));
}

/* Counters without workers: the server's loop is worker 0. */
static void test_server_counters(void **state)
{
    struct sxe_worker_stats stats;
    bool closed;

    (void)state;
    assert_int_equal(sxe_http_server_workers(server), 1);
    assert_int_equal(sxe_http_server_stats(server, 1, &stats), -EINVAL);
    exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    int fd = client(); /* held open while the counters are read */
    pump();
    assert_int_equal(sxe_http_server_stats(server, 0, &stats), 0);
    assert_int_equal(stats.connections, 3);
    assert_int_equal(stats.requests, 3);
    assert_true(stats.bytes > 3 * 6);
    assert_int_equal(stats.table_full, 0);
    assert_int_equal(stats.open, 1);
    close(fd);
}

static void test_percent_decoding(void **state)
{
    char out[8];

    (void)state;
    assert_int_equal(sxe_http_percent_decode("a%20b+c", 7, out, sizeof(out), true), 5);
    assert_string_equal(out, "a b c");
    assert_int_equal(sxe_http_percent_decode("a%20b+c", 7, out, sizeof(out), false), 5);
    assert_string_equal(out, "a b+c");
    assert_int_equal(sxe_http_percent_decode("%41%6a", 6, out, sizeof(out), false), 2);
    assert_string_equal(out, "Aj");
    assert_int_equal(sxe_http_percent_decode("%4", 2, out, sizeof(out), false), -EINVAL);
    assert_int_equal(sxe_http_percent_decode("%g1", 3, out, sizeof(out), false), -EINVAL);
    assert_int_equal(sxe_http_percent_decode("12345678", 8, out, sizeof(out), false), -ENOBUFS);
    assert_int_equal(sxe_http_percent_decode("1234567", 7, out, sizeof(out), false), 7);
    assert_int_equal(sxe_http_percent_decode("", 0, out, 0, false), -ENOBUFS);
    assert_int_equal(sxe_http_percent_decode("", 0, out, 1, false), 0);
    assert_string_equal(out, "");
}

/* A header line that is not one: in debug builds an assert says so; in release, -EINVAL. */
static void add_a_bad_header(void *arg)
{
    char buffer[64];
    struct sxe_http_headers headers = SXE_HTTP_HEADERS_INIT(buffer);

    (void)sxe_http_headers_add(&headers, "X", arg);
}

static void respond_with_a_long_type(void *arg)
{
    (void)sxe_http_respond_with(NULL, 200, arg, NULL, "", 0); /* the type is checked first */
}

static void test_misuse_of_headers(void **state)
{
    static char long_type[300];
    static char injection[] = "a\r\nSet-Cookie: b";

    (void)state;
    memset(long_type, 'x', sizeof(long_type) - 1);
#ifdef SXE_DEBUG
    const char *const bad_header[] = {"a header name is a token", NULL};
    sxe_test_expect_abort(add_a_bad_header, injection, bad_header);
    const char *const bad_type[] = {"a content type is at most 255 bytes", NULL};
    sxe_test_expect_abort(respond_with_a_long_type, long_type, bad_type);
#else
    (void)add_a_bad_header;
    (void)respond_with_a_long_type;
    (void)injection;
    assert_int_equal(sxe_http_respond_with(NULL, 200, long_type, NULL, "", 0), -EINVAL);
#endif
}

/* Extra headers too long to go out with the head's first write still go out, whole. */
static void big_header(sxe_http_t *http, void *arg)
{
    char headers[1400] = "X-Big: ";

    (void)arg;
    memset(headers + 7, 'b', 1300);
    memcpy(headers + 1307, "\r\n", 3);
    sxe_http_respond_with(http, 200, "text/plain", headers, "big\n", 4);
}

static void test_large_extra_headers(void **state)
{
    bool closed;

    (void)state;
    assert_int_equal(sxe_http_server_route(server, "GET", "/big-header", 0, big_header, NULL), 0);
    const char *response = exchange("GET /big-header HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_memory_equal(response, "HTTP/1.1 200 OK\r\n", 17);
    const char *big = strstr(response, "X-Big: ");
    assert_non_null(big);
    assert_int_equal(strspn(big + 7, "b"), 1300);
    assert_memory_equal(big + 1307, "\r\n\r\nbig\n", 9);
}

/* A server not listening yet has no port; with workers, the port and the counters are theirs. */
static void test_ports_with_and_without_workers(void **state)
{
    struct sxe_http_server_options workers = {.workers = 2};
    struct sxe_worker_stats stats;
    sxe_http_server_t *made;

    (void)state;
    assert_int_equal(sxe_http_server_create(&made, NULL, NULL), 0);
    assert_int_equal(sxe_http_server_port(made), 0);
    sxe_http_server_destroy(made);
    assert_int_equal(sxe_http_server_create(&made, NULL, &workers), 0);
    assert_int_equal(sxe_http_server_workers(made), 2);
    assert_int_equal(sxe_http_server_port(made), 0);
    assert_int_equal(sxe_http_server_listen(made, "127.0.0.1:0"), 0);
    assert_true(sxe_http_server_port(made) > 0);
    assert_int_equal(sxe_http_server_listen(made, "nowhere"), -EINVAL);
    assert_int_equal(sxe_http_server_stats(made, 1, &stats), 0);
    assert_int_equal(stats.requests, 0);
    sxe_http_server_destroy(made);
}

static void test_header_builder(void **state)
{
    char buffer[40];
    struct sxe_http_headers headers = SXE_HTTP_HEADERS_INIT(buffer);

    (void)state;
    assert_string_equal(headers.text, "");
    assert_int_equal(sxe_http_headers_add(&headers, "Cache-Control", "no-store"), 0);
    assert_int_equal(sxe_http_headers_add(&headers, "X-A", ""), 0);
    assert_string_equal(headers.text, "Cache-Control: no-store\r\nX-A: \r\n");
    assert_int_equal(sxe_http_headers_add(&headers, "X-Long", "123456"), -ENOBUFS);
    assert_int_equal(sxe_http_headers_add(&headers, "X", "1"),
                     -ENOBUFS); /* the first error stays */
    assert_string_equal(headers.text, "Cache-Control: no-store\r\nX-A: \r\n");
#ifdef NDEBUG /* misuse asserts in debug builds */
    static const char *const bad[][2] = {
        {"X", "a\r\nSet-Cookie: b"}, {"X: Y", "v"}, {"", "v"}, {"X\n", "v"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct sxe_http_headers fresh = SXE_HTTP_HEADERS_INIT(buffer);
        assert_int_equal(sxe_http_headers_add(&fresh, bad[i][0], bad[i][1]), -EINVAL);
        assert_string_equal(fresh.text, "");
    }
#endif
}

/* An absolute-form target is routed by its path (RFC 9112 §3.2.2). */
static void test_absolute_form_is_routed_by_its_path(void **state)
{
    bool closed;
    const char *response =
        exchange("POST http://example.com:8080/echo/x?y HTTP/1.1\r\nHost: other\r\n"
                 "Content-Length: 2\r\n\r\nhi",
                 &closed);

    (void)state;
    assert_memory_equal(response, "HTTP/1.1 200 OK\r\n", 17);
    assert_non_null(strstr(response, "path=/echo/x query=y body=hi"));
    response = exchange("GET HTTP://example.com HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_memory_equal(response, "HTTP/1.1 200 OK\r\n", 17);
    assert_non_null(strstr(response, "hello\n"));
}

static void test_routes_match_the_normal_path(void **state)
{
    bool closed;
    const char *response;

    (void)state;
    /* However a path is spelled, its route and its handler see it in one form. */
    response = exchange("GET /x/../echo/a/./b HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_non_null(strstr(response, "path=/echo/a/b query= body="));
    response = exchange("GET //echo HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_non_null(strstr(response, "path=/echo query= body="));
    response = exchange("GET /%65cho/%2e%2E/echo/z?a=%2e%2e HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_non_null(strstr(response, "path=/echo/z query=a=%2e%2e body="));
    response = exchange("GET /echo/%2f/%c3%a9 HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_non_null(strstr(response, "path=/echo/%2F/%C3%A9 query= body="));
    /* A prefix spelled around is no prefix: "/api/../post" is "/post", which takes POST only. */
    expect_status("GET /api/../post HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 405 Method Not Allowed",
                  false);
    response = exchange("GET /api/%2E%2E/api/x HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_non_null(strstr(response, "rest=x "));
    /* Absolute form too. */
    response = exchange("GET http://h/a/../echo HTTP/1.1\r\nHost: h\r\n\r\n", &closed);
    assert_non_null(strstr(response, "path=/echo query= body="));
    /* Above the root, a malformed escape, a fragment: 400, and the connection closes. */
    expect_status("GET /echo/../../x HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400 Bad Request",
                  true);
    expect_status("GET /%2e%2e/echo HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400 Bad Request", true);
    expect_status("GET /echo/%zz HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400 Bad Request", true);
    expect_status("GET /echo#top HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400 Bad Request", true);
    expect_status("GET /echo/0123456789abcdef#top HTTP/1.1\r\nHost: x\r\n\r\n",
                  "HTTP/1.1 400 Bad Request", true); /* past 16 bytes: the vector scan's */
    expect_status("POST /../echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody",
                  "HTTP/1.1 400 Bad Request", true);
}

/* A body no route takes is answered at its head, before it comes (it would hold a buffer, a large
 * one perhaps, for nothing), and the connection closes after the answer. */
static void test_a_body_nobody_takes_is_answered_at_its_head(void **state)
{
    (void)state;
    expect_status("POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n\r\n",
                  "HTTP/1.1 404 Not Found", true);
    expect_status("PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n\r\nabc",
                  "HTTP/1.1 405 Method Not Allowed", true);
    expect_status("OPTIONS /post HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                  "HTTP/1.1 200 OK", true);
}

/* Closes its connection without an answer. */
static void close_unanswered(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_conn_close(sxe_http_conn(http));
}

static void test_every_request_is_logged_once(void **state)
{
    bool closed;

    (void)state;
    assert_int_equal(sxe_http_server_route(server, "GET", "/hang-up", 0, close_unanswered, NULL),
                     0);
    exchange("GET /x/../ HTTP/1.1\r\nHost: x\r\n\r\nHEAD / HTTP/1.1\r\nHost: x\r\n\r\n"
             "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\nGET /post HTTP/1.1\r\nHost: x\r\n\r\n"
             "OPTIONS /post HTTP/1.1\r\nHost: x\r\n\r\nGET /silent HTTP/1.1\r\nHost: x\r\n\r\n",
             &closed);
    exchange("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    exchange("GET /a/../../b HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    exchange("GET / HTTP/1.1\r\n\r\n", &closed);
    exchange("G@T / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    exchange("GET /hang-up HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_true(closed);
    assert_string_equal(log_lines, "GET /x/../ / 200 6\n"
                                   "HEAD / / 200 0\n"
                                   "GET /nowhere /nowhere 404 14\n"
                                   "GET /post /post 405 23\n"
                                   "OPTIONS /post /post 200 0\n"
                                   "GET /silent /silent 500 26\n"
                                   "GET /stream /stream 200 12\n"
                                   "GET /a/../../b /a/../../b 400 16\n"
                                   "GET / / 400 16\n"
                                   "   400 16\n"
                                   "GET /hang-up /hang-up 499 0\n");
}

static void test_slow_request_gets_408(void **state)
{
    char out[4096];
    bool closed;

    (void)state;
    int fd = client();
    pump();
    for (int i = 0; i < 6; i++) {
        assert_int_equal(send(fd, "GET / HTTP/1.1\r\n" + i, 1, 0), 1);
        pump();
        sxe__sys_clock_advance(SXE_NS_PER_SEC);
    }
    receive(fd, out, sizeof(out), &closed);
    assert_memory_equal(out, "HTTP/1.1 408 Request Timeout", 28);
    assert_non_null(strstr(out, "Date: Sat, 21 Nov 2026"));
    assert_true(closed);
    close(fd);
}

/* Every status sxe names, with RFC 9110's reason phrase (written out here, not taken from the
 * library), and "Unknown" for those it does not name, beside them and at the range's ends. */
static void test_reasons(void **state)
{
    static const struct {
        int status;
        const char *reason;
    } named[] = {
        {100, "Continue"},
        {200, "OK"},
        {201, "Created"},
        {202, "Accepted"},
        {204, "No Content"},
        {206, "Partial Content"},
        {301, "Moved Permanently"},
        {302, "Found"},
        {303, "See Other"},
        {304, "Not Modified"},
        {307, "Temporary Redirect"},
        {308, "Permanent Redirect"},
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {408, "Request Timeout"},
        {409, "Conflict"},
        {410, "Gone"},
        {413, "Content Too Large"},
        {414, "URI Too Long"},
        {416, "Range Not Satisfiable"},
        {422, "Unprocessable Content"},
        {426, "Upgrade Required"},
        {429, "Too Many Requests"},
        {431, "Request Header Fields Too Large"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {502, "Bad Gateway"},
        {503, "Service Unavailable"},
        {504, "Gateway Timeout"},
        {505, "HTTP Version Not Supported"},
        {507, "Insufficient Storage"},
    };
    size_t count = sizeof(named) / sizeof(named[0]);

    (void)state;
    for (int status = -1; status <= 1000; status++) {
        const char *reason = "Unknown";
        for (size_t i = 0; i < count; i++) {
            reason = named[i].status == status ? named[i].reason : reason;
        }
        assert_string_equal(sxe_http_reason(status), reason);
    }
}

static void test_bad_listen(void **state)
{
    (void)state;
    assert_int_equal(sxe_http_server_listen(server, "nowhere"), -EINVAL);
    assert_int_equal(sxe_http_server_listen(server, "127.0.0.1:99999"), -EINVAL);
    assert_int_equal(sxe_http_server_listen(server, "[::1]:0"), 0);
    char taken[32];
    snprintf(taken, sizeof(taken), "127.0.0.1:%d", port);
    assert_int_equal(sxe_http_server_listen(server, taken), -EADDRINUSE);
}

/*
 * sxe_http_server_run() on the server's own loop calls on_loop_start before the loop runs (here it
 * starts a timer that asks the loop to stop, as SIGTERM would) and on_loop_stop after.
 */
static unsigned loop_starts, loop_stops;
static sxe_timer_t stop_soon;

static void raise_term(sxe_timer_t *timer, void *arg)
{
    (void)timer;
    (void)arg;
    raise(SIGTERM);
}

static void count_loop_start(sxe_loop_t *loop, void *arg)
{
    assert_ptr_equal(arg, &loop_starts);
    loop_starts++;
    sxe_timer_init(&stop_soon, raise_term, NULL);
    assert_int_equal(sxe_timer_start(loop, &stop_soon, 10 * SXE_NS_PER_MSEC, 0), 0);
}

static void count_loop_stop(void *arg)
{
    assert_ptr_equal(arg, &loop_starts);
    assert_int_equal(loop_starts, 1);
    loop_stops++;
}

static void test_loop_hooks_around_the_run(void **state)
{
    struct sxe_http_server_options options = {.on_loop_start = count_loop_start,
                                              .on_loop_stop = count_loop_stop,
                                              .loop_arg = &loop_starts};
    sxe_http_server_t *run_server;

    (void)state;
    loop_starts = loop_stops = 0;
    assert_int_equal(sxe_http_server_create(&run_server, NULL, &options), 0);
    assert_int_equal(sxe_http_server_listen(run_server, "127.0.0.1:0"), 0);
    assert_int_equal(sxe_http_server_run(run_server), 0);
    assert_int_equal(loop_starts, 1);
    assert_int_equal(loop_stops, 1);
    sxe_http_server_destroy(run_server);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hello_response, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_connection_user_pointer_is_the_programs, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_statuses_the_server_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_method_not_allowed_says_which_are, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_full_allow_list_is_cut_at_a_method, setup, teardown),
        cmocka_unit_test_setup_teardown(test_options_answered_with_what_is_allowed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_an_upgrade_not_taken_is_answered_as_usual, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_absolute_form_is_routed_by_its_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_routes_match_the_normal_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_request_is_logged_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_body_nobody_takes_is_answered_at_its_head, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_query_parameters_and_the_rest_of_the_path, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_formatted_responses, setup, teardown),
        cmocka_unit_test(test_header_builder),
        cmocka_unit_test(test_ports_with_and_without_workers),
        cmocka_unit_test(test_percent_decoding),
        cmocka_unit_test(test_misuse_of_headers),
        cmocka_unit_test_setup_teardown(test_large_extra_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_counters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_request_gets_408, setup, teardown),
        cmocka_unit_test(test_reasons),
        cmocka_unit_test_setup_teardown(test_bad_listen, setup, teardown),
        cmocka_unit_test(test_loop_hooks_around_the_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
