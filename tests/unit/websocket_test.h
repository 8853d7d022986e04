/*
 * The harness of the WebSocket tests (test_websocket*.c): a WebSocket server on an HTTP server on
 * a loopback port, under fake time, what it saw, and raw clients that send frames and read them.
 * Static inline, so a test program that does not use a helper is not warned about it.
 */
#ifndef SXE_WEBSOCKET_TEST_H
#define SXE_WEBSOCKET_TEST_H

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop.h"
#include "sxe/clock.h"
#include "sxe/random.h"
#include "sxe/websocket.h"
#include "sxe_test.h"
#include "sys.h"
#include "websocket/ws.h"

static sxe_http_server_t *http;
static sxe_ws_server_t *server;
static int port;

/* What the program saw. */
static struct {
    int opens, messages, closes;
    int close_code;
    char close_reason[128];
    char last[256];
    size_t last_len;
    sxe_ws_t *sockets[8];
    bool close_in_open;
} seen;

static inline void on_open(sxe_ws_t *ws)
{
    seen.sockets[seen.opens++ % 8] = ws;
    if (seen.close_in_open) {
        sxe_conn_close(sxe_ws_conn(ws));
    }
}

static inline void on_message(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
{
    seen.messages++;
    seen.last_len = len < sizeof(seen.last) ? len : sizeof(seen.last) - 1;
    memcpy(seen.last, data, seen.last_len);
    seen.last[seen.last_len] = '\0';
    if (len > 0 && data[0] == '!') { /* "!..." is not echoed */
        return;
    }
    int rc = sxe_ws_send(ws, type, data, len);
    if (rc != 0) {
        fail_msg("echo of %zu bytes: %d", len, rc);
    }
}

static inline void on_close(sxe_ws_t *ws, int code, const char *reason, size_t reason_len)
{
    (void)ws;
    seen.closes++;
    seen.close_code = code;
    snprintf(seen.close_reason, sizeof(seen.close_reason), "%.*s", (int)reason_len, reason);
    assert_int_equal(sxe_ws_send(ws, SXE_WS_TEXT, "x", 1), -EPIPE);
}

static const struct sxe_ws_handlers handlers = {
    .on_open = on_open, .on_message = on_message, .on_close = on_close};

static uint32_t large_bodies; /* the HTTP server's large buffers: 0 for its default */

/* A route of the program's own that accepts with a sub-protocol the client did not offer. */
static inline void accept_unoffered(sxe_http_t *request, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_ws_server_accept(server, request, "bogus", NULL), -EINVAL);
}

static inline void start(const struct sxe_ws_options *options)
{
    struct sxe_http_server_options http_options = {.loop = {.connections = 16},
                                                   .idle_timeout = SXE_NS_PER_SEC,
                                                   .limits = {.body_bytes = 300000},
                                                   .large_bodies = large_bodies};

    memset(&seen, 0, sizeof(seen));
    sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, 1795296612ULL * SXE_NS_PER_SEC);
    assert_int_equal(sxe_http_server_create(&http, NULL, &http_options), 0);
    assert_int_equal(sxe_ws_server_create(&server, http, &handlers, options), 0);
    assert_int_equal(sxe_ws_server_route(server, "/ws", "echo,chat"), 0);
    assert_int_equal(sxe_http_server_route(http, "GET", "/bogus", 0, accept_unoffered, NULL), 0);
    assert_int_equal(sxe_http_server_listen(http, "127.0.0.1:0"), 0);
    port = sxe_http_server_port(http);
}

static inline int teardown(void **state)
{
    (void)state;
    if (server != NULL) {
        assert_int_equal(sxe__conn_validate(sxe_http_server_loop(http)), 0);
        sxe_ws_server_destroy(server);
        sxe_http_server_destroy(http);
        server = NULL;
    }
    sxe__sys_reset();
    return 0;
}

static inline void pump(uint64_t advance_ns)
{
    sxe_loop_t *loop = sxe_http_server_loop(http);

    sxe__sys_clock_advance(advance_ns);
    for (int i = 0; i < 3; i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
        assert_int_equal(sxe__conn_validate(loop), 0);
    }
}

static const char handshake_request[] = "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                                        "Connection: Upgrade\r\n"
                                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                        "Sec-WebSocket-Version: 13\r\n";

/* A masked client frame. @return its length in out. */
static inline size_t client_frame(uint8_t *out, bool fin, unsigned opcode, const void *payload,
                                  size_t len)
{
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    size_t head = sxe__ws_frame_encode(out, fin, opcode, len, mask);
    memcpy(out + head, payload, len);
    sxe__ws_unmask(out + head, len, mask, 0);
    return head + len;
}

static inline void send_frame(int fd, bool fin, unsigned opcode, const void *payload, size_t len)
{
    uint8_t *frame = malloc(len + SXE__WS_HEAD_MAX);
    size_t frame_len = client_frame(frame, fin, opcode, payload, len);
    assert_int_equal(send(fd, frame, frame_len, MSG_NOSIGNAL), (ssize_t)frame_len);
    free(frame);
}

/* Connects, shakes hands (with more bytes behind the request, if given) and reads the 101. */
static inline int open_socket(const void *behind, size_t behind_len)
{
    char request[1024], answer[1024] = "";
    int fd = sxe_test_client(port);
    int len = snprintf(request, sizeof(request), "%sSec-WebSocket-Protocol: chat\r\n\r\n",
                       handshake_request);

    if (behind_len > 0) {
        memcpy(request + len, behind, behind_len);
    }
    assert_int_equal(send(fd, request, (size_t)len + behind_len, 0), (ssize_t)len + behind_len);
    for (int turns = 0; strstr(answer, "\r\n\r\n") == NULL && turns < 1000; turns++) {
        pump(0);
        ssize_t got = recv(fd, answer, sizeof(answer) - 1, MSG_PEEK | MSG_DONTWAIT);
        assert_true(got != 0);
        answer[got > 0 ? got : 0] = '\0';
    }
    assert_non_null(strstr(answer, "\r\n\r\n"));
    size_t head = (size_t)(strstr(answer, "\r\n\r\n") + 4 - answer);
    assert_int_equal(recv(fd, answer, head, 0), (ssize_t)head); /* the head alone */
    answer[head] = '\0';
    assert_non_null(strstr(answer, "HTTP/1.1 101 Switching Protocols\r\n"));
    assert_non_null(strstr(answer, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
    assert_non_null(strstr(answer, "Sec-WebSocket-Protocol: chat\r\n"));
    return fd;
}

/* Reads one server frame from fd. @return its opcode, or -1 if the connection ended first. */
static inline int read_frame(int fd, uint8_t *payload, size_t size, size_t *len)
{
    static uint8_t buf[70000];
    struct sxe__ws_frame frame;

    for (int turns = 0; turns < 2000; turns++) {
        ssize_t have = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
        if (have == 0) {
            return -1;
        }
        int head = have > 0 ? sxe__ws_frame_head(buf, (size_t)have, &frame) : 0;
        if (head > 0 && (size_t)have >= (size_t)head + frame.len) {
            assert_false(frame.masked); /* servers never mask */
            assert_true(frame.len <= size);
            size_t whole = (size_t)head + (size_t)frame.len;
            assert_int_equal(recv(fd, buf, whole, 0), (ssize_t)whole); /* this frame alone */
            memcpy(payload, buf + head, (size_t)frame.len);
            *len = (size_t)frame.len;
            return frame.opcode;
        }
        pump(0);
    }
    fail_msg("no frame came");
    return -1;
}

/* Reads until the server ends the connection (FIN or reset). */
static inline void expect_end(int fd)
{
    char byte;
    for (int turns = 0; turns < 2000; turns++) {
        pump(0);
        ssize_t got = recv(fd, &byte, 1, MSG_DONTWAIT);
        if (got == 0 || (got < 0 && errno != EAGAIN)) {
            return;
        }
    }
    fail_msg("the server did not close");
}

#endif
