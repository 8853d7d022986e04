/*
 * The harness of the HTTP server tests (test_http_server*.c): the handlers every test's server
 * routes to, setup and teardown of that server on a loopback port, and plain blocking clients that
 * send a request and read the answer. Static inline, so a test program that does not use a helper
 * is not warned about it.
 */
#ifndef SXE_HTTP_SERVER_TEST_H
#define SXE_HTTP_SERVER_TEST_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_test.h"

static inline void hello(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_respond(http, 200, "text/plain", "hello\n", 6);
}

/* Echoes the path, the query and the body. */
static inline void echo(sxe_http_t *http, void *arg)
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
static inline void stream(sxe_http_t *http, void *arg)
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
 * call sends all but 5,000 bytes (less than this server's high_water, past which the output would
 * be backed up), the second finds the socket full, so the rest is still queued when on_read
 * returns; the flush right after it sends the rest with a real call.
 */
static unsigned sendfile_calls;

static inline ssize_t sendfile_short_then_full(int out, int in, off_t *offset, size_t len)
{
    if (++sendfile_calls == 2) {
        errno = EAGAIN;
        return -1;
    }
    return sendfile(out, in, offset, sendfile_calls == 1 && len > 5000 ? len - 5000 : len);
}

static inline void send_file(sxe_http_t *http, void *arg)
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
static inline void send_owned_file(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_http_start(http, 200, NULL, 1000), 0);
    assert_int_equal(sxe_http_sendfile(http, dup(file_fd), 0, 1000, true), 0);
    assert_int_equal(sxe_http_finish(http), 0);
}

/* A file response that records what each call returned, for a connection that fails under it. */
static int file_rcs[3];

static inline void file_recording(sxe_http_t *http, void *arg)
{
    (void)arg;
    file_rcs[0] = sxe_http_start(http, 200, NULL, 1000);
    file_rcs[1] = sxe_http_sendfile(http, file_fd, 0, 1000, false);
    file_rcs[2] = sxe_http_finish(http);
}

/* 5,000 bytes of body, written (not a file): a few of these pass the test server's high_water. */
static inline void bulk(sxe_http_t *http, void *arg)
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

static inline void count_release(void *arg)
{
    (*(unsigned *)arg)++;
}

static inline void referred(sxe_http_t *http, void *arg)
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

static inline void silent(sxe_http_t *http, void *arg)
{
    (void)http;
    (void)arg;
}

/* Answers how many requests came before on this connection, counted in its user pointer. */
static inline void conn_user(sxe_http_t *http, void *arg)
{
    sxe_conn_t *conn = sxe_http_conn(http);
    uintptr_t seen = (uintptr_t)sxe_conn_user(conn);
    char body[32];
    int len = snprintf(body, sizeof(body), "seen %lu\n", (unsigned long)seen);

    (void)arg;
    sxe_conn_set_user(conn, (void *)(seen + 1));
    sxe_http_respond(http, 200, "text/plain", body, (size_t)len);
}

static inline void post_only(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_respond(http, 201, NULL, NULL, 0);
}

/* Reads the query and the rest of the path, and answers with extra headers. */
static inline void api(sxe_http_t *http, void *arg)
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
    assert_int_equal(sxe_http_headers_add(&headers, "X-Rest-Length", rest_len ? "some" : "none"),
                     0);
    sxe_http_respond_with(http, 200, "application/json", headers.text, reply, (size_t)len);
}

/* A body formatted to the query's width: past SXE_HTTP_FORMAT_MAX it is refused, and said so. */
static inline void formatted(sxe_http_t *http, void *arg)
{
    char width[16] = "0";

    (void)arg;
    (void)sxe_http_query_param(http, "width", width, sizeof(width));
    int rc = sxe_http_respondf(http, 200, "text/plain", "X-F: 1\r\n", "%0*d|", atoi(width), 7);
    if (rc == -EMSGSIZE) {
        sxe_http_respond(http, 500, "text/plain", "too big\n", 8);
    }
}

/* What the log hook saw: a line per request, "method target path status body-bytes". */
static char log_lines[8192];
static size_t log_used;

static inline void record_log(const sxe_http_t *http, void *arg)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    size_t path_len;
    const char *path = sxe_http_path(http, &path_len);

    assert_ptr_equal(arg, log_lines);
    assert_non_null(sxe_http_conn(http)); /* the connection is still there to ask */
    int len = snprintf(log_lines + log_used, sizeof(log_lines) - log_used,
                       "%.*s %.*s %.*s %d %llu\n", (int)request->method_len, request->method,
                       (int)request->target_len, request->target, (int)path_len, path,
                       sxe_http_status(http), (unsigned long long)sxe_http_body_sent(http));
    log_used += (size_t)len < sizeof(log_lines) - log_used ? (size_t)len : 0;
}

static inline int setup(void **state)
{
    struct sxe_http_server_options options = {.on_log = record_log,
                                              .log_arg = log_lines,
                                              .loop = {.connections = 64},
                                              .limits = {.request_line = 256,
                                                         .header_bytes = 1024,
                                                         .header_count = 10,
                                                         .body_bytes = 4096},
                                              .header_timeout = 5 * SXE_NS_PER_SEC};

    (void)state;
    /* Fake time throughout: it stands still unless a test moves it. */
    sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, 1795296612ULL * SXE_NS_PER_SEC);
    log_used = 0;
    log_lines[0] = '\0';
    assert_int_equal(sxe_http_server_create(&server, NULL, &options), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/", 0, hello, NULL), 0);
    assert_int_equal(
        sxe_http_server_route(server, NULL, "/echo", SXE_HTTP_ROUTE_PREFIX, echo, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/stream", 0, stream, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/silent", 0, silent, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/ref", 0, referred, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/bulk", 0, bulk, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/file-rc", 0, file_recording, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/file", 0, send_file, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "POST", "/post", 0, post_only, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/user", 0, conn_user, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "PUT", "/post", 0, post_only, NULL), 0);
    assert_int_equal(
        sxe_http_server_route(server, "GET", "/api/", SXE_HTTP_ROUTE_PREFIX, api, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/format", 0, formatted, NULL), 0);
    http_test_listen();
    return 0;
}

static inline void pump(void)
{
    http_test_turn(0);
}

static inline int client(void)
{
    return sxe_test_client(port);
}

/*
 * Reads what the server sends until it goes quiet (or closes, which *closed reports), turning the
 * server's loop meanwhile.
 */
static inline size_t receive(int fd, char *out, size_t size, bool *closed)
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
static inline const char *exchange(const char *request, bool *closed)
{
    static char response[16384];
    size_t len = strlen(request);
    int fd = client();

    assert_int_equal(send(fd, request, len, MSG_NOSIGNAL), (ssize_t)len);
    receive(fd, response, sizeof(response), closed);
    close(fd);
    return response;
}

static inline void expect_status(const char *request, const char *status_line, bool must_close)
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

#endif
