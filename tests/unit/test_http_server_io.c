/*
 * The HTTP server's connections and bodies over real loopback sockets: keep-alive rules, files
 * (owned, nodelay, pipelined behind other output), HEAD, pipelining in order and past the high
 * water mark, a connection failing under a handler, responses too large to queue, request bodies
 * (Content-Length and chunked), 100-continue, streamed and referenced bodies. Harness:
 * http_server_test.h.
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

#include "http_server_test.h"

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
    assert_int_equal(sxe_http_server_route(server, "GET", "/owned", 0, send_owned_file, NULL), 0);
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
    assert_int_equal(sxe_http_server_route(server, "GET", "/sized", 0, sized, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/", 0, hello, NULL), 0);
    assert_int_equal(sxe_http_server_listen(server, "127.0.0.1:0"), 0);
    port = sxe_http_server_port(server);

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_owned_files_are_closed, setup, teardown),
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
