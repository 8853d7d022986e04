/*
 * Whole request bodies up to the default limit, 1 MiB, through real sockets: a small body waits in
 * the connection's ordinary buffer; a large one, by length or chunked, grows whole in one of the
 * loop's few large buffers, which is free again once it is answered; a body past the limit is 413;
 * when every large buffer is taken a large body gets 503 with Retry-After, read to its end so the
 * client hears it, and a retry succeeds once one is free.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop.h"
#include "sxe/clock.h"
#include "sxe/http.h"
#include "sxe_test.h"
#include "sys.h"

#define MIB (1024u * 1024)

static sxe_http_server_t *server;
static int port;
static int answered; /* requests the handler answered */

static unsigned char pattern(size_t at)
{
    return (unsigned char)(at * 7 % 251);
}

/* A sum that changes if any byte is lost, added or moved. */
static uint64_t weighted_sum(const unsigned char *data, size_t len)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < len; i++) {
        sum += data[i] * (uint64_t)(i % 13 + 1);
    }
    return sum;
}

static uint64_t pattern_sum(size_t len)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < len; i++) {
        sum += pattern(i) * (uint64_t)(i % 13 + 1);
    }
    return sum;
}

/* Answers with the length and the sum of the body it was given whole. */
static void sum(sxe_http_t *http, void *arg)
{
    size_t len;
    const unsigned char *body = (const unsigned char *)sxe_http_body(http, &len);
    char text[96];

    (void)arg;
    int n = snprintf(text, sizeof(text), "got %zu sum %llu\n", len,
                     (unsigned long long)weighted_sum(body, len));
    assert_int_equal(sxe_http_respond(http, 200, "text/plain", text, (size_t)n), 0);
    answered++;
}

static int setup(void **state)
{
    struct sxe_http_server_options options = {.loop = {.connections = 16}, .large_bodies = 2};

    (void)state;
    answered = 0;
    assert_int_equal(sxe_http_server_create(&server, NULL, &options), 0);
    assert_int_equal(sxe_http_server_route(server, NULL, "/sum", 0, sum, NULL), 0);
    assert_int_equal(sxe_http_server_listen(server, "127.0.0.1:0"), 0);
    port = sxe_http_server_port(server);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    assert_int_equal(sxe__conn_validate(sxe_http_server_loop(server)), 0);
    sxe_http_server_destroy(server);
    sxe__sys_reset();
    return 0;
}

static void pump(void)
{
    sxe_loop_t *loop = sxe_http_server_loop(server);

    assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
    assert_int_equal(sxe__conn_validate(loop), 0);
}

static struct sxe_loop_stats stats(void)
{
    struct sxe_loop_stats now;
    sxe_loop_stats(sxe_http_server_loop(server), &now);
    return now;
}

/* A client whose sends do not block. */
static int client(void)
{
    int fd = sxe_test_client(port);
    assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
    return fd;
}

/* Sends all of data, turning the server's loop whenever the socket is full. */
static void send_all(int fd, const void *data, size_t len)
{
    const char *at = data;

    for (int turns = 0; len > 0 && turns < 100000; turns++) {
        ssize_t sent = send(fd, at, len, MSG_NOSIGNAL);
        if (sent > 0) {
            at += sent;
            len -= (size_t)sent;
        }
        pump();
    }
    assert_int_equal(len, 0);
}

/* The pattern's bytes [from, to), sent as they are or in chunks of chunk bytes (chunk > 0). */
static void send_body(int fd, size_t from, size_t to, size_t chunk)
{
    unsigned char *body = malloc(to - from);

    assert_non_null(body);
    for (size_t i = from; i < to; i++) {
        body[i - from] = pattern(i);
    }
    if (chunk == 0) {
        send_all(fd, body, to - from);
    }
    for (size_t at = 0; chunk > 0 && at < to - from; at += chunk) {
        size_t len = to - from - at < chunk ? to - from - at : chunk;
        char size_line[32];
        int n = snprintf(size_line, sizeof(size_line), "%zx\r\n", len);
        send_all(fd, size_line, (size_t)n);
        send_all(fd, body + at, len);
        send_all(fd, "\r\n", 2);
    }
    free(body);
}

static void send_head(int fd, const char *framing)
{
    char head[256];
    int n = snprintf(head, sizeof(head), "POST /sum HTTP/1.1\r\nHost: h\r\n%s\r\n\r\n", framing);
    send_all(fd, head, (size_t)n);
}

/* Turns the loop until out holds want (5 s at most). */
static void until_heard(int fd, char *out, size_t size, const char *want)
{
    for (int turns = 0; strstr(out, want) == NULL && turns < 5000; turns++) {
        pump();
        (void)sxe_test_heard(fd, out, size);
    }
    if (strstr(out, want) == NULL) {
        fail_msg("expected \"%s\" in: %s", want, out);
    }
}

static void expect_sum(int fd, size_t len)
{
    char out[1024] = "", want[96];
    snprintf(want, sizeof(want), "got %zu sum %llu\n", len, (unsigned long long)pattern_sum(len));
    until_heard(fd, out, sizeof(out), want);
    assert_non_null(strstr(out, "HTTP/1.1 200 OK\r\n"));
}

/* A small body needs no large buffer; 1 MiB, the default limit, arrives whole in one. */
static void test_a_mebibyte_arrives_whole(void **state)
{
    (void)state;
    int fd = client();
    send_head(fd, "Content-Length: 100");
    send_body(fd, 0, 100, 0);
    expect_sum(fd, 100);
    assert_int_equal(stats().no_large_buffer, 0);

    send_head(fd, "Content-Length: 1048576");
    send_body(fd, 0, MIB, 0);
    expect_sum(fd, MIB);
    pump();
    assert_int_equal(stats().large_buffers_in_use, 0); /* free again once answered */
    assert_int_equal(stats().buffers_in_use, 0);
    assert_int_equal(answered, 2);
    close(fd);
}

/* A chunked body grows in a large buffer too, and is decoded whole. */
static void test_a_chunked_body_grows_in_a_large_buffer(void **state)
{
    (void)state;
    int fd = client();
    send_head(fd, "Transfer-Encoding: chunked");
    send_body(fd, 0, 600 * 1024, 8192);
    send_all(fd, "0\r\n\r\n", 5);
    expect_sum(fd, 600 * 1024);
    close(fd);
}

/* One byte past the limit is refused at the head, before the body comes. */
static void test_past_the_limit_is_413(void **state)
{
    char out[1024] = "";

    (void)state;
    int fd = client();
    send_head(fd, "Content-Length: 1048577");
    until_heard(fd, out, sizeof(out), "HTTP/1.1 413 Content Too Large\r\n");
    assert_int_equal(answered, 0);
    close(fd);
}

/*
 * Two large bodies under way hold both large buffers: a third is answered 503 with Retry-After
 * while its body still comes, the rest of which is read and dropped so the client hears the 503
 * rather than a reset; the two are served, and the third's retry then is too.
 */
static void test_large_buffers_run_out_and_a_retry_succeeds(void **state)
{
    char out[1024] = "";
    int first, second, third;

    (void)state;
    first = client();
    second = client();
    third = client();
    send_head(first, "Content-Length: 300000");
    send_body(first, 0, 100000, 0);
    send_head(second, "Content-Length: 300000");
    send_body(second, 0, 100000, 0);
    for (int turns = 0; stats().large_buffers_in_use < 2 && turns < 5000; turns++) {
        pump();
    }
    assert_int_equal(stats().large_buffers_in_use, 2);

    send_head(third, "Content-Length: 300000");
    send_body(third, 0, 300000, 0); /* all of it: none is refused under the client */
    until_heard(third, out, sizeof(out), "\r\n\r\n503 Service Unavailable\n");
    assert_non_null(strstr(out, "HTTP/1.1 503 Service Unavailable\r\n"));
    assert_non_null(strstr(out, "Retry-After: 1\r\n"));
    assert_non_null(strstr(out, "Connection: close\r\n"));
    assert_int_equal(stats().no_large_buffer, 1);
    close(third);

    send_body(first, 100000, 300000, 0);
    expect_sum(first, 300000);
    send_body(second, 100000, 300000, 0);
    expect_sum(second, 300000);
    third = client();
    send_head(third, "Content-Length: 300000");
    send_body(third, 0, 300000, 0);
    expect_sum(third, 300000);
    assert_int_equal(answered, 3);
    assert_int_equal(stats().no_large_buffer, 1);
    close(first);
    close(second);
    close(third);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_mebibyte_arrives_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_chunked_body_grows_in_a_large_buffer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_past_the_limit_is_413, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_buffers_run_out_and_a_retry_succeeds, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
