/*
 * The HTTP server module over real loopback sockets: every status it answers itself, keep-alive
 * rules, HEAD, 100-continue, pipelining in order, request bodies (Content-Length and chunked),
 * streamed responses, and a server that keeps serving others after each bad request.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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

static sxe_http_server_t *server;
static int port;

static void hello(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_respond(http, 200, "text/plain", "hello\n", 6);
}

/* Echoes the path, the query and the body. */
static void echo(sxe_http_t *http, void *arg)
{
    char reply[2048];
    size_t path_len, query_len, body_len;
    const char *path = sxe_http_path(http, &path_len);
    const char *query = sxe_http_query(http, &query_len);
    const char *body = sxe_http_body(http, &body_len);

    (void)arg;
    int len = snprintf(reply, sizeof(reply), "path=%.*s query=%.*s body=%.*s", (int)path_len, path,
                       (int)query_len, query ? query : "", (int)body_len, body ? body : "");
    sxe_http_respond(http, 200, "text/plain", reply, (size_t)len);
}

/* A response of unknown length, streamed in two pieces. */
static void stream(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_http_finish(http), -EINVAL); /* nothing started: nothing to end */
    assert_int_equal(sxe_http_start(http, 200, "X-Stream: yes\r\n", -1), 0);
    assert_int_equal(sxe_http_start(http, 200, NULL, -1), -EALREADY);
    assert_int_equal(sxe_http_send(http, "first,", 6), 0);
    assert_int_equal(sxe_http_send(http, "second", 6), 0);
    assert_int_equal(sxe_http_finish(http), 0);
    assert_int_equal(sxe_http_finish(http), -EINVAL);
}

/* A file of the size the query gives (?small or ?large), through sendfile. */
static int file_fd = -1;
#define LARGE_FILE (300 * 1000)

/*
 * sendfile through the seam, in the order that once left a large file's tail held back: the first
 * call sends all but 5,000 bytes (less than this server's high_water, past which the queue would be
 * reported through SXE_CONN_FULL), the second finds the socket full, so the rest is still queued
 * when on_read returns; the flush right after it sends the rest with a real call.
 */
static unsigned sendfile_calls;

static ssize_t sendfile_short_then_full(int out, int in, off_t *offset, size_t len)
{
    if (++sendfile_calls == 2) {
        errno = EAGAIN;
        return -1;
    }
    return sendfile(out, in, offset, sendfile_calls == 1 && len > 5000 ? len - 5000 : len);
}

static void send_file(sxe_http_t *http, void *arg)
{
    size_t query_len;
    const char *query = sxe_http_query(http, &query_len);
    bool large = query_len == 5 && memcmp(query, "large", 5) == 0;
    bool backed = query_len == 6 && memcmp(query, "backed", 6) == 0; /* a small socket buffer */
    size_t len = large || backed ? LARGE_FILE : 1000;

    /* Room for the rest, so the one flush after on_read sends it all; or not, to back it up. */
    int buffer = backed ? 16384 : 1 << 20;
    (void)arg;
    assert_int_equal(setsockopt(sxe_conn_fd(sxe_http_conn(http)), SOL_SOCKET, SO_SNDBUF, &buffer,
                                sizeof(buffer)),
                     0);
    assert_int_equal(sxe_http_start(http, 200, NULL, (int64_t)len), 0);
    assert_int_equal(sxe_http_sendfile(http, file_fd, 0, len, false), 0);
    assert_int_equal(sxe_http_finish(http), 0);
}

/* A file the response owns: a duplicate of file_fd, closed by the connection once sent. */
static void send_owned_file(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_http_start(http, 200, NULL, 1000), 0);
    assert_int_equal(sxe_http_sendfile(http, dup(file_fd), 0, 1000, true), 0);
    assert_int_equal(sxe_http_finish(http), 0);
}

/* A file response that records what each call returned, for a connection that fails under it. */
static int file_rcs[3];

static void file_recording(sxe_http_t *http, void *arg)
{
    (void)arg;
    file_rcs[0] = sxe_http_start(http, 200, NULL, 1000);
    file_rcs[1] = sxe_http_sendfile(http, file_fd, 0, 1000, false);
    file_rcs[2] = sxe_http_finish(http);
}

/* 5,000 bytes of body, written (not a file): a few of these pass the test server's high_water. */
static void bulk(sxe_http_t *http, void *arg)
{
    static char body[5000];
    int room = 1 << 20; /* the socket takes everything queued at once */

    (void)arg;
    assert_int_equal(
        setsockopt(sxe_conn_fd(sxe_http_conn(http)), SOL_SOCKET, SO_SNDBUF, &room, sizeof(room)),
        0);
    memset(body, 'b', sizeof(body));
    assert_int_equal(sxe_http_respond(http, 200, "text/plain", body, sizeof(body)), 0);
}

/*
 * Referenced bodies: ?stream chunked, ?file a file range, else 8 bytes by Content-Length. Every
 * call with a release counts in released once, whether its bytes were sent or refused.
 */
static unsigned released;

static void count_release(void *arg)
{
    (*(unsigned *)arg)++;
}

static void referred(sxe_http_t *http, void *arg)
{
    size_t query_len;
    const char *query = sxe_http_query(http, &query_len);

    (void)arg;
    assert_int_equal(sxe_http_send_ref(http, "x", 1, count_release, &released), -EINVAL);
    if (query_len == 6 && memcmp(query, "stream", 6) == 0) {
        assert_int_equal(sxe_http_start(http, 200, NULL, -1), 0);
        assert_int_equal(sxe_http_send_ref(http, "first,", 6, count_release, &released), 0);
        assert_int_equal(sxe_http_sendfile_ref(http, 0, 0, 1, count_release, &released), -EINVAL);
        assert_int_equal(sxe_http_send(http, "second", 6), 0);
    } else if (query_len == 4 && memcmp(query, "file", 4) == 0) {
        assert_int_equal(sxe_http_start(http, 200, NULL, 1000), 0);
        assert_int_equal(sxe_http_sendfile_ref(http, file_fd, 0, 1000, count_release, &released),
                         0);
    } else {
        assert_int_equal(sxe_http_start(http, 200, NULL, 8), 0);
        assert_int_equal(sxe_http_send_ref(http, "referred", 8, count_release, &released), 0);
    }
    assert_int_equal(sxe_http_finish(http), 0);
    assert_int_equal(sxe_http_send_ref(http, "x", 1, count_release, &released), -EINVAL);
}

static void silent(sxe_http_t *http, void *arg)
{
    (void)http;
    (void)arg;
}

/* Answers how many requests came before on this connection, counted in its user pointer. */
static void conn_user(sxe_http_t *http, void *arg)
{
    sxe_conn_t *conn = sxe_http_conn(http);
    uintptr_t seen = (uintptr_t)sxe_conn_user(conn);
    char body[32];
    int len = snprintf(body, sizeof(body), "seen %lu\n", (unsigned long)seen);

    (void)arg;
    sxe_conn_set_user(conn, (void *)(seen + 1));
    sxe_http_respond(http, 200, "text/plain", body, (size_t)len);
}

static void post_only(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_respond(http, 201, NULL, NULL, 0);
}

/* Reads the query and the rest of the path, and answers with extra headers. */
static void api(sxe_http_t *http, void *arg)
{
    char name[16] = "unset", reply[512], buffer[64];
    struct sxe_http_headers headers = SXE_HTTP_HEADERS_INIT(buffer);
    struct sxe_http_param param;
    size_t cursor = 0, rest_len;
    const char *rest = sxe_http_path_rest(http, &rest_len);
    ssize_t got = sxe_http_query_param(http, "na me", name, sizeof(name));

    (void)arg;
    int len = snprintf(reply, sizeof(reply), "rest=%.*s name=%zd:%s params=", (int)rest_len, rest,
                       got, name);
    while (sxe_http_query_next(http, &cursor, &param)) {
        len += snprintf(reply + len, sizeof(reply) - (size_t)len, "[%.*s=%.*s]",
                        (int)param.name_len, param.name, (int)param.value_len, param.value);
    }
    assert_int_equal(sxe_http_header_add(&headers, "X-Rest-Length", rest_len ? "some" : "none"), 0);
    sxe_http_respond_with(http, 200, "application/json", headers.text, reply, (size_t)len);
}

/* A body formatted to the query's width: past SXE_HTTP_FORMAT_MAX it is refused, and said so. */
static void formatted(sxe_http_t *http, void *arg)
{
    char width[16] = "0";

    (void)arg;
    (void)sxe_http_query_param(http, "width", width, sizeof(width));
    int rc = sxe_http_respondf(http, 200, "text/plain", "X-F: 1\r\n", "%0*d|", atoi(width), 7);
    if (rc == -EMSGSIZE) {
        sxe_http_respond(http, 500, "text/plain", "too big\n", 8);
    }
}

static int setup(void **state)
{
    struct sxe_http_server_options options = {.loop = {.connections = 64},
                                              .limits = {.request_line = 256,
                                                         .header_bytes = 1024,
                                                         .header_count = 10,
                                                         .body_bytes = 4096},
                                              .header_timeout = 5 * SXE_NS_PER_SEC};

    (void)state;
    /* Fake time throughout: it stands still unless a test moves it. */
    sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, 1795296612ULL * SXE_NS_PER_SEC);
    assert_int_equal(sxe_http_server_create(&server, NULL, &options), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/", false, hello, NULL), 0);
    assert_int_equal(sxe_http_route(server, NULL, "/echo", true, echo, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/stream", false, stream, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/silent", false, silent, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/ref", false, referred, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/bulk", false, bulk, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/file-rc", false, file_recording, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/file", false, send_file, NULL), 0);
    assert_int_equal(sxe_http_route(server, "POST", "/post", false, post_only, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/user", false, conn_user, NULL), 0);
    assert_int_equal(sxe_http_route(server, "PUT", "/post", false, post_only, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/api/", true, api, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/format", false, formatted, NULL), 0);
    assert_int_equal(sxe_http_listen(server, "127.0.0.1:0"), 0);
    port = sxe_http_port(server);
    assert_true(port > 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_http_server_destroy(server);
    sxe__sys_reset();
    return 0;
}

static void pump(void)
{
    for (int i = 0; i < 5; i++) {
        assert_true(sxe_loop_run_once(sxe_http_server_loop(server), SXE_NS_PER_MSEC) >= 0);
    }
}

static int client(void)
{
    return sxe_test_client(port);
}

/*
 * Reads what the server sends until it goes quiet (or closes, which *closed reports), turning the
 * server's loop meanwhile.
 */
static size_t receive(int fd, char *out, size_t size, bool *closed)
{
    size_t have = 0;
    int quiet = 0;

    *closed = false;
    while (quiet < 10 && have < size - 1) {
        pump();
        ssize_t n = recv(fd, out + have, size - 1 - have, MSG_DONTWAIT);
        if (n > 0) {
            have += (size_t)n;
            quiet = 0;
        } else if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            *closed = true;
            break;
        } else {
            quiet++;
        }
    }
    out[have] = '\0';
    return have;
}

/* Sends request on a new connection; returns the response text and whether the server closed. */
static const char *exchange(const char *request, bool *closed)
{
    static char response[16384];
    size_t len = strlen(request);
    int fd = client();

    assert_int_equal(send(fd, request, len, MSG_NOSIGNAL), (ssize_t)len);
    receive(fd, response, sizeof(response), closed);
    close(fd);
    return response;
}

static void expect_status(const char *request, const char *status_line, bool must_close)
{
    bool closed;
    const char *response = exchange(request, &closed);

    if (strncmp(response, status_line, strlen(status_line)) != 0) {
        fail_msg("for %s expected %s, got: %s", request, status_line, response);
    }
    if (must_close) {
        assert_true(closed);
        assert_non_null(strstr(response, "Connection: close\r\n"));
    }
    /* The server goes on serving others. */
    response = exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_memory_equal(response, "HTTP/1.1 200 OK\r\n", 17);
}

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
    assert_int_equal(sxe_http_decode("a%20b+c", 7, out, sizeof(out), true), 5);
    assert_string_equal(out, "a b c");
    assert_int_equal(sxe_http_decode("a%20b+c", 7, out, sizeof(out), false), 5);
    assert_string_equal(out, "a b+c");
    assert_int_equal(sxe_http_decode("%41%6a", 6, out, sizeof(out), false), 2);
    assert_string_equal(out, "Aj");
    assert_int_equal(sxe_http_decode("%4", 2, out, sizeof(out), false), -EINVAL);
    assert_int_equal(sxe_http_decode("%g1", 3, out, sizeof(out), false), -EINVAL);
    assert_int_equal(sxe_http_decode("12345678", 8, out, sizeof(out), false), -ENOBUFS);
    assert_int_equal(sxe_http_decode("1234567", 7, out, sizeof(out), false), 7);
    assert_int_equal(sxe_http_decode("", 0, out, 0, false), -ENOBUFS);
    assert_int_equal(sxe_http_decode("", 0, out, 1, false), 0);
    assert_string_equal(out, "");
}

/* A header line that is not one: in debug builds an assert says so; in release, -EINVAL. */
static void add_a_bad_header(void *arg)
{
    char buffer[64];
    struct sxe_http_headers headers = SXE_HTTP_HEADERS_INIT(buffer);

    (void)sxe_http_header_add(&headers, "X", arg);
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
    assert_int_equal(sxe_http_route(server, "GET", "/big-header", false, big_header, NULL), 0);
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
    assert_int_equal(sxe_http_port(made), 0);
    sxe_http_server_destroy(made);
    assert_int_equal(sxe_http_server_create(&made, NULL, &workers), 0);
    assert_int_equal(sxe_http_server_workers(made), 2);
    assert_int_equal(sxe_http_port(made), 0);
    assert_int_equal(sxe_http_listen(made, "127.0.0.1:0"), 0);
    assert_true(sxe_http_port(made) > 0);
    assert_int_equal(sxe_http_listen(made, "nowhere"), -EINVAL);
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
    assert_int_equal(sxe_http_header_add(&headers, "Cache-Control", "no-store"), 0);
    assert_int_equal(sxe_http_header_add(&headers, "X-A", ""), 0);
    assert_string_equal(headers.text, "Cache-Control: no-store\r\nX-A: \r\n");
    assert_int_equal(sxe_http_header_add(&headers, "X-Long", "123456"), -ENOBUFS);
    assert_int_equal(sxe_http_header_add(&headers, "X", "1"), -ENOBUFS); /* the first error stays */
    assert_string_equal(headers.text, "Cache-Control: no-store\r\nX-A: \r\n");
#ifdef NDEBUG /* misuse asserts in debug builds */
    static const char *const bad[][2] = {
        {"X", "a\r\nSet-Cookie: b"}, {"X: Y", "v"}, {"", "v"}, {"X\n", "v"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct sxe_http_headers fresh = SXE_HTTP_HEADERS_INIT(buffer);
        assert_int_equal(sxe_http_header_add(&fresh, bad[i][0], bad[i][1]), -EINVAL);
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

static void test_keep_alive_rules(void **state)
{
    bool closed;
    const char *response;

    (void)state;
    response = exchange("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
    assert_non_null(strstr(response, "Connection: close\r\n"));
    assert_true(closed);
    response = exchange("GET / HTTP/1.0\r\n\r\n", &closed);
    assert_memory_equal(response, "HTTP/1.1 200 OK", 15);
    assert_true(closed);
    response = exchange("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &closed);
    assert_non_null(strstr(response, "Connection: keep-alive\r\n"));
    assert_false(closed);
    /* HTTP/1.0 and a response of unknown length: no chunks, the close ends it. */
    response = exchange("GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &closed);
    assert_null(strstr(response, "Transfer-Encoding"));
    assert_non_null(strstr(response, "\r\n\r\nfirst,second"));
    assert_true(closed);
}

/*
 * After "Connection: close" the server closes once the answer is out: with a plain close when the
 * client sent nothing more, with a half-close (so the answer survives) when more bytes followed.
 * TCP_NODELAY is set only on a connection that stays open for more, once.
 */
static void test_close_and_nodelay_cost_no_extra_calls(void **state)
{
    bool closed;
    const char *response;

    (void)state;
    sxe__sys_count(SXE_SYS_shutdown);
    sxe__sys_count(SXE_SYS_setsockopt);
    response = exchange("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
    assert_non_null(strstr(response, "Connection: close\r\n"));
    assert_true(closed);
    assert_int_equal(sxe__sys_calls(SXE_SYS_shutdown), 0);
    assert_int_equal(sxe__sys_calls(SXE_SYS_setsockopt), 0);

    response = exchange("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                        "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                        &closed);
    assert_true(closed);
    assert_null(strstr(strstr(response, "hello\n"), "HTTP/1.1")); /* one answer only */
    assert_int_equal(sxe__sys_calls(SXE_SYS_shutdown), 1);

    int fd = client();
    char text[4096];
    for (int i = 0; i < 3; i++) {
        static const char request[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_int_equal(send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL),
                         (ssize_t)sizeof(request) - 1);
        receive(fd, text, sizeof(text), &closed);
        assert_false(closed);
        assert_memory_equal(text, "HTTP/1.1 200 OK\r\n", 17);
    }
    close(fd);
    assert_int_equal(sxe__sys_calls(SXE_SYS_setsockopt), 1);
}

/* Makes file_fd a file of LARGE_FILE bytes, "abc...zab...", and leaves a copy in content. */
static void make_file(char content[LARGE_FILE])
{
    char path[] = "/tmp/sxe-http-file-XXXXXX";

    file_fd = mkstemp(path);
    assert_true(file_fd >= 0);
    unlink(path);
    for (size_t i = 0; i < LARGE_FILE; i++) {
        content[i] = (char)('a' + i % 26);
    }
    assert_int_equal(write(file_fd, content, LARGE_FILE), (ssize_t)LARGE_FILE);
}

/* A file whose descriptor the response owns is closed once sent, and at once for HEAD. */
static void test_owned_files_are_closed(void **state)
{
    char content[LARGE_FILE];
    bool closed;

    (void)state;
    make_file(content);
    assert_int_equal(sxe_http_route(server, "GET", "/owned", false, send_owned_file, NULL), 0);
    unsigned open_before = sxe_test_open_fds();
    const char *response = exchange("GET /owned HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_non_null(strstr(response, "Content-Length: 1000\r\n"));
    assert_memory_equal(strstr(response, "\r\n\r\n") + 4, content, 1000);
    response = exchange("HEAD /owned HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_non_null(strstr(response, "Content-Length: 1000\r\n\r\n"));
    assert_int_equal(strstr(response, "\r\n\r\n")[4], '\0');
    pump();
    assert_int_equal(sxe_test_open_fds(), open_before);
    close(file_fd);
    file_fd = -1;
}

/* Records the flags of every send: a head followed by a file goes with MSG_MORE, nothing else. */
static int send_flags_seen;

static ssize_t send_recording_flags(int fd, const void *buf, size_t len, int flags)
{
    send_flags_seen |= flags;
    return send(fd, buf, len, flags);
}

/*
 * A file goes out with TCP_NODELAY set once and no TCP_CORK: its head is sent with MSG_MORE, to
 * leave with the file's first bytes. Every byte arrives, and in order, the tail included.
 */
static void test_files_nodelay_and_more(void **state)
{
    static char text[LARGE_FILE + 1024];
    static char content[LARGE_FILE];
    bool closed;

    (void)state;
    make_file(content);

    sxe__sys_count(SXE_SYS_setsockopt);
    sxe__sys.send = send_recording_flags;
    int fd = client();
    static const char hello_request[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(send(fd, hello_request, sizeof(hello_request) - 1, MSG_NOSIGNAL),
                     (ssize_t)sizeof(hello_request) - 1);
    receive(fd, text, sizeof(text), &closed);
    if (!sxe_test_uring()) {                             /* io_uring submits the send itself */
        assert_int_equal(send_flags_seen & MSG_MORE, 0); /* no file follows */
    }

    static const char small[] = "GET /file?small HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(send(fd, small, sizeof(small) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(small) - 1);
    size_t got = receive(fd, text, sizeof(text), &closed);
    assert_non_null(strstr(text, "Content-Length: 1000\r\n"));
    assert_memory_equal(text + got - 1000, content, 1000);
    assert_int_equal(sxe__sys_calls(SXE_SYS_setsockopt), 1); /* TCP_NODELAY */
    if (!sxe_test_uring()) {
        assert_int_equal(send_flags_seen & MSG_MORE, MSG_MORE);
    }

    static const char large[] = "GET /file?large HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(send(fd, large, sizeof(large) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(large) - 1);
    got = receive(fd, text, sizeof(text), &closed);
    assert_false(closed);
    assert_non_null(strstr(text, "Content-Length: 300000\r\n"));
    assert_true(got > LARGE_FILE);
    assert_memory_equal(text + got - LARGE_FILE, content, LARGE_FILE);
    assert_int_equal(sxe__sys_calls(SXE_SYS_setsockopt), 1); /* no TCP_CORK */

    /* The same, with part of the file still queued when on_read returns, sent at once after. */
    sxe__sys.sendfile = sendfile_short_then_full;
    sendfile_calls = 0;
    assert_int_equal(send(fd, large, sizeof(large) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(large) - 1);
    got = receive(fd, text, sizeof(text), &closed);
    assert_int_equal(sendfile_calls, 3);
    assert_true(got > LARGE_FILE);
    assert_memory_equal(text + got - LARGE_FILE, content, LARGE_FILE);
    assert_int_equal(sxe__sys_calls(SXE_SYS_setsockopt), 1);
    close(fd);
    close(file_fd);
    file_fd = -1;
}

static void test_head_has_no_body(void **state)
{
    bool closed;
    const char *response = exchange("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", &closed);

    (void)state;
    assert_non_null(strstr(response, "Content-Length: 6\r\n"));
    assert_non_null(strstr(response, "\r\n\r\n"));
    assert_string_equal(strstr(response, "\r\n\r\n"), "\r\n\r\n");
}

static void test_pipelined_requests_answered_in_order(void **state)
{
    static const char requests[] =
        "GET /echo/1 HTTP/1.1\r\nHost: x\r\n\r\n"
        "POST /echo/2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
        "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"
        "GET /echo/3?q=1 HTTP/1.1\r\nHost: x\r\n\r\n";
    bool closed;
    const char *response = exchange(requests, &closed);

    (void)state;
    const char *first = strstr(response, "path=/echo/1 query= body=");
    const char *second = strstr(response, "path=/echo/2 query= body=abc");
    const char *third = strstr(response, "404 Not Found\n");
    const char *fourth = strstr(response, "path=/echo/3 query=q=1 body=");
    assert_non_null(first);
    assert_non_null(second);
    assert_non_null(third);
    assert_non_null(fourth);
    assert_true(first < second && second < third && third < fourth);
    assert_false(closed);
}

/*
 * Pipelined requests for large files, read by a client with a small window: the output backs up,
 * so each next request waits (unread) until the one before has gone. Every response arrives whole,
 * head and file, in order, and the hello after them too.
 */
static void test_pipelined_files_wait_for_the_output(void **state)
{
    static char content[LARGE_FILE];
    static char text[4 * (LARGE_FILE + 512) + 512];
    static const char one[] = "GET /file?backed HTTP/1.1\r\nHost: x\r\n\r\n";
    char requests[4 * sizeof(one) + 64] = "";
    int window = 16384;
    bool closed;

    (void)state;
    make_file(content);
    for (int i = 0; i < 4; i++) {
        strcat(requests, one);
    }
    strcat(requests, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &window, sizeof(window)), 0);
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof(address)), 0);
    assert_int_equal(send(fd, requests, strlen(requests), MSG_NOSIGNAL), (ssize_t)strlen(requests));
    pump(); /* the first file fills both socket buffers; the rest wait */

    size_t got = receive(fd, text, sizeof(text), &closed);
    assert_false(closed);
    const char *at = text;
    for (int i = 0; i < 4; i++) {
        assert_true(strncmp(at, "HTTP/1.1 200 OK\r\n", 17) == 0);
        const char *body = strstr(at, "\r\n\r\n");
        assert_non_null(body);
        body += 4;
        assert_true((size_t)(body - text) + LARGE_FILE <= got);
        assert_memory_equal(body, content, LARGE_FILE);
        at = body + LARGE_FILE;
    }
    assert_true(strncmp(at, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_non_null(strstr(at, "\r\n\r\nhello\n"));
    close(fd);
    close(file_fd);
    file_fd = -1;
}

/*
 * Pipelined requests whose answers pass high_water, to a client that reads at once: the server
 * pauses after the answers of one read, the socket takes them all right after on_read, and
 * on_drained resumes it for the requests that waited.
 */
static void test_pipelined_answers_past_high_water(void **state)
{
    static char text[8 * 5200];
    char requests[8 * 64] = "";
    bool closed;

    (void)state;
    for (int i = 0; i < 8; i++) {
        strcat(requests, "GET /bulk HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    int fd = client();
    assert_int_equal(send(fd, requests, strlen(requests), MSG_NOSIGNAL), (ssize_t)strlen(requests));
    receive(fd, text, sizeof(text), &closed);
    assert_false(closed);
    unsigned answers = 0;
    for (const char *at = text; (at = strstr(at, "HTTP/1.1 200 OK\r\n")) != NULL; at++) {
        answers++;
    }
    assert_int_equal(answers, 8);
    close(fd);
}

/*
 * The connection fails under a handler (its head, flushed ahead of the file, meets EPIPE): the
 * sendfile and the finish return the error, the connection closes, and others are served.
 */
static void test_a_connection_failing_under_a_handler(void **state)
{
    static char content[LARGE_FILE];
    char text[4096];
    bool closed;

    (void)state;
    sxe_test_skip_on_uring("it fails send, which io_uring submits");
    make_file(content);
    int fd = client();
    sxe__sys_fail(SXE_SYS_send, 1, 1, EPIPE);
    static const char request[] = "GET /file-rc HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL),
                     (ssize_t)sizeof(request) - 1);
    receive(fd, text, sizeof(text), &closed);
    assert_true(closed);
    assert_int_equal(file_rcs[0], 0);
    assert_int_equal(file_rcs[1], -EPIPE);
    assert_int_equal(file_rcs[2], -EPIPE);
    close(fd);
    close(file_fd);
    file_fd = -1;

    bool hello_closed;
    const char *response = exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &hello_closed);
    assert_non_null(strstr(response, "\r\n\r\nhello\n"));
}

/* Answers with 180 bytes of body, or with ?big 400, more than write_limit (300) lets queue. */
static int sized_rc;

static void sized(sxe_http_t *http, void *arg)
{
    static char body[400];
    size_t query_len;
    const char *query = sxe_http_query(http, &query_len);
    int start_rc;

    (void)arg;
    memset(body, 'x', sizeof(body));
    if (query_len == 3 && memcmp(query, "big", 3) == 0) {
        assert_int_equal(sxe_http_start(http, 200, NULL, sizeof(body)), 0);
        sized_rc = sxe_http_send(http, body, sizeof(body));
        assert_int_equal(sxe_http_send(http, body, 1), sized_rc); /* the rest is dropped */
        assert_int_equal(sxe_http_sendfile(http, -1, 0, 1, false), sized_rc);
        assert_int_equal(sxe_http_finish(http), sized_rc);
        return;
    }
    if ((start_rc = sxe_http_start(http, 200, NULL, 180)) < 0) {
        sized_rc = start_rc;
        assert_int_equal(sxe_http_send(http, body, 180), start_rc);
        return; /* the module's finish is a no-op after the failure */
    }
    assert_int_equal(sxe_http_send(http, body, 180), 0);
}

/*
 * A response the connection cannot queue (past write_limit) is never followed by the next: what
 * was accepted leaves, the answers before it whole, and the connection closes. Other connections
 * go on being served.
 */
static void test_a_response_too_large_to_queue_closes(void **state)
{
    struct sxe_http_server_options options = {
        .loop = {.connections = 8, .write_limit = 300, .high_water = 300}};
    static const char two[] =
        "GET /sized HTTP/1.1\r\nHost: x\r\n\r\nGET /sized HTTP/1.1\r\nHost: x\r\n\r\n";
    static const char big[] = "GET /sized?big HTTP/1.1\r\nHost: x\r\n\r\n";
    char text[4096];
    bool closed;

    (void)state;
    sxe_http_server_destroy(server);
    assert_int_equal(sxe_http_server_create(&server, NULL, &options), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/sized", false, sized, NULL), 0);
    assert_int_equal(sxe_http_route(server, "GET", "/", false, hello, NULL), 0);
    assert_int_equal(sxe_http_listen(server, "127.0.0.1:0"), 0);
    port = sxe_http_port(server);

    /* The second head does not fit behind the first response: the first arrives whole, then the
     * close. */
    int fd = client();
    assert_int_equal(send(fd, two, sizeof(two) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(two) - 1);
    size_t got = receive(fd, text, sizeof(text), &closed);
    assert_true(closed);
    assert_int_equal(sized_rc, -ENOBUFS);
    const char *body = strstr(text, "\r\n\r\n");
    assert_non_null(body);
    assert_int_equal(got, (size_t)(body + 4 - text) + 180);
    assert_true(got > 300 - (size_t)(body + 4 - text)); /* so the second head could not fit */
    close(fd);

    /* The body does not fit behind its head: the head goes, then the close, short of the body. */
    sized_rc = 0;
    fd = client();
    assert_int_equal(send(fd, big, sizeof(big) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(big) - 1);
    got = receive(fd, text, sizeof(text), &closed);
    assert_true(closed);
    assert_int_equal(sized_rc, -ENOBUFS);
    assert_non_null(strstr(text, "Content-Length: 400\r\n"));
    assert_null(strstr(text, "xxxx"));
    close(fd);

    bool hello_closed;
    const char *response = exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &hello_closed);
    assert_non_null(strstr(response, "\r\n\r\nhello\n"));
    assert_false(hello_closed);
}

static void test_request_bodies(void **state)
{
    static const char chunked[] =
        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: t\r\n\r\n";
    bool closed;

    (void)state;
    const char *response = exchange(chunked, &closed);
    assert_non_null(strstr(response, "body=Wikipedia"));

    /* A body that arrives in pieces, across reads. */
    int fd = client();
    char out[4096];
    static const char head[] = "PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n";
    assert_int_equal(send(fd, head, sizeof(head) - 1, 0), (ssize_t)sizeof(head) - 1);
    pump();
    assert_int_equal(send(fd, "01234", 5, 0), 5);
    pump();
    assert_int_equal(send(fd, "56789", 5, 0), 5);
    receive(fd, out, sizeof(out), &closed);
    assert_non_null(strstr(out, "body=0123456789"));
    close(fd);
}

static void test_expect_100_continue(void **state)
{
    static const char head[] = "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                               "Content-Length: 4\r\n\r\n";
    static const char *const bodies[] = {"data", "more"};
    char out[4096], echoed[16];
    bool closed;
    int fd = client();

    (void)state;
    /* Each request on the connection that expects 100 gets its own, the second too. */
    for (unsigned i = 0; i < 2; i++) {
        assert_int_equal(send(fd, head, sizeof(head) - 1, 0), (ssize_t)sizeof(head) - 1);
        receive(fd, out, sizeof(out), &closed);
        assert_string_equal(out, "HTTP/1.1 100 Continue\r\n\r\n");
        assert_int_equal(send(fd, bodies[i], 4, 0), 4);
        receive(fd, out, sizeof(out), &closed);
        assert_memory_equal(out, "HTTP/1.1 200 OK", 15);
        snprintf(echoed, sizeof(echoed), "body=%s", bodies[i]);
        assert_non_null(strstr(out, echoed));
        assert_false(closed);
    }
    close(fd);
}

static void test_streamed_response_is_chunked(void **state)
{
    bool closed;
    const char *response = exchange("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n", &closed);

    (void)state;
    assert_non_null(strstr(response, "Transfer-Encoding: chunked\r\n"));
    assert_non_null(strstr(response, "X-Stream: yes\r\n"));
    assert_non_null(strstr(response, "\r\n\r\n6\r\nfirst,\r\n6\r\nsecond\r\n0\r\n\r\n"));
    assert_false(closed);
}

/* A request that trickles in past the header timeout gets a 408 and the connection closes. */
/* Bodies by reference: sent as copies would be, chunked or not, none for HEAD; each released once.
 */
static void test_bodies_by_reference(void **state)
{
    static char content[LARGE_FILE];
    bool closed;

    (void)state;
    released = 0;
    const char *response = exchange("GET /ref HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_non_null(strstr(response, "Content-Length: 8\r\n\r\nreferred"));
    assert_int_equal(released, 3); /* before start, the body, after finish */

    released = 0;
    response = exchange("HEAD /ref HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_string_equal(strstr(response, "\r\n\r\n"), "\r\n\r\n");
    assert_int_equal(released, 3);

    released = 0;
    response = exchange("GET /ref?stream HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    assert_non_null(strstr(response, "\r\n\r\n6\r\nfirst,\r\n6\r\nsecond\r\n0\r\n\r\n"));
    assert_int_equal(released, 4); /* and the file refused in a chunked response */

    make_file(content);
    released = 0;
    response = exchange("GET /ref?file HTTP/1.1\r\nHost: x\r\n\r\n", &closed);
    const char *body = strstr(response, "\r\n\r\n");
    assert_non_null(body);
    assert_memory_equal(body + 4, content, 1000);
    assert_int_equal(released, 3);
    close(file_fd);
    file_fd = -1;
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

static void test_reasons_and_bad_listen(void **state)
{
    (void)state;
    assert_string_equal(sxe_http_reason(404), "Not Found");
    assert_string_equal(sxe_http_reason(299), "Unknown");
    assert_int_equal(sxe_http_listen(server, "nowhere"), -EINVAL);
    assert_int_equal(sxe_http_listen(server, "127.0.0.1:99999"), -EINVAL);
    assert_int_equal(sxe_http_listen(server, "[::1]:0"), 0);
    char taken[32];
    snprintf(taken, sizeof(taken), "127.0.0.1:%d", port);
    assert_int_equal(sxe_http_listen(server, taken), -EADDRINUSE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hello_response, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_connection_user_pointer_is_the_programs, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_statuses_the_server_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_method_not_allowed_says_which_are, setup, teardown),
        cmocka_unit_test_setup_teardown(test_options_answered_with_what_is_allowed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_an_upgrade_not_taken_is_answered_as_usual, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_absolute_form_is_routed_by_its_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_query_parameters_and_the_rest_of_the_path, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_formatted_responses, setup, teardown),
        cmocka_unit_test(test_header_builder),
        cmocka_unit_test_setup_teardown(test_owned_files_are_closed, setup, teardown),
        cmocka_unit_test(test_ports_with_and_without_workers),
        cmocka_unit_test(test_percent_decoding),
        cmocka_unit_test(test_misuse_of_headers),
        cmocka_unit_test_setup_teardown(test_large_extra_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_counters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_alive_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_and_nodelay_cost_no_extra_calls, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_files_nodelay_and_more, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelined_files_wait_for_the_output, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelined_answers_past_high_water, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_connection_failing_under_a_handler, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_response_too_large_to_queue_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_head_has_no_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelined_requests_answered_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_bodies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expect_100_continue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streamed_response_is_chunked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bodies_by_reference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_request_gets_408, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reasons_and_bad_listen, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
