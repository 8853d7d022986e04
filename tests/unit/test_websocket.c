/*
 * The WebSocket module: SHA-1, Base64 and the accept key against published vectors; frame heads
 * and masking; then, through real sockets under fake time, the paths a conformance client cannot
 * reach: the server's own close (answered, and unanswered past close_timeout), keep-alive pings,
 * broadcast to groups by reference, slow readers (1008, or dropped), frames that came with the
 * handshake, a fragmented message joined across reads, refusals, counters and invalid use.
 * (tests/system/test_websocket.py checks RFC 6455 from the wire, with independent peers.)
 */
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

static void on_open(sxe_ws_t *ws)
{
    seen.sockets[seen.opens++ % 8] = ws;
    if (seen.close_in_open) {
        sxe_conn_close(sxe_ws_conn(ws));
    }
}

static void on_message(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
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

static void on_close(sxe_ws_t *ws, int code, const char *reason, size_t reason_len)
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
static void accept_unoffered(sxe_http_t *request, void *arg)
{
    (void)arg;
    errno = 0;
    assert_null(sxe_ws_accept(server, request, "bogus"));
    assert_int_equal(errno, EINVAL);
}

static void start(const struct sxe_ws_options *options)
{
    struct sxe_http_server_options http_options = {.loop = {.connections = 16},
                                                   .idle_timeout = SXE_NS_PER_SEC,
                                                   .limits = {.body_bytes = 300000},
                                                   .large_bodies = large_bodies};

    memset(&seen, 0, sizeof(seen));
    sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, 1795296612ULL * SXE_NS_PER_SEC);
    assert_int_equal(sxe_http_server_create(&http, NULL, &http_options), 0);
    assert_int_equal(sxe_ws_server_create(&server, http, &handlers, options), 0);
    assert_int_equal(sxe_ws_route(server, "/ws", "echo,chat"), 0);
    assert_int_equal(sxe_http_route(http, "GET", "/bogus", false, accept_unoffered, NULL), 0);
    assert_int_equal(sxe_http_listen(http, "127.0.0.1:0"), 0);
    port = sxe_http_port(http);
}

static int teardown(void **state)
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

static void pump(uint64_t advance_ns)
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
static size_t client_frame(uint8_t *out, bool fin, unsigned opcode, const void *payload, size_t len)
{
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    size_t head = sxe__ws_frame_encode(out, fin, opcode, len, mask);
    memcpy(out + head, payload, len);
    sxe__ws_unmask(out + head, len, mask, 0);
    return head + len;
}

static void send_frame(int fd, bool fin, unsigned opcode, const void *payload, size_t len)
{
    uint8_t *frame = malloc(len + SXE__WS_HEAD_MAX);
    size_t frame_len = client_frame(frame, fin, opcode, payload, len);
    assert_int_equal(send(fd, frame, frame_len, MSG_NOSIGNAL), (ssize_t)frame_len);
    free(frame);
}

/* Connects, shakes hands (with more bytes behind the request, if given) and reads the 101. */
static int open_socket(const void *behind, size_t behind_len)
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
static int read_frame(int fd, uint8_t *payload, size_t size, size_t *len)
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
static void expect_end(int fd)
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

static void test_sha1_base64_and_accept_key(void **state)
{
    uint8_t digest[20];
    char out[64];
    static char million[1000000];

    (void)state;
    sxe__sha1("abc", 3, digest);
    sxe__base64(digest, 20, out);
    assert_string_equal(out, "qZk+NkcGgWq6PiVxeFDCbJzQ2J0="); /* a9993e36...d89d: FIPS 180 */
    sxe__sha1("", 0, digest);
    sxe__base64(digest, 20, out);
    assert_string_equal(out, "2jmj7l5rSw0yVb/vlWAYkK/YBwk=");
    const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sxe__sha1(two_blocks, strlen(two_blocks), digest); /* 56 bytes: the padding's second block */
    assert_int_equal(digest[0], 0x84);
    assert_int_equal(digest[19], 0xf1);
    memset(million, 'a', sizeof(million));
    sxe__sha1(million, sizeof(million), digest);
    assert_int_equal(digest[0], 0x34); /* 34aa973c...6f */
    assert_int_equal(digest[19], 0x6f);
    static const char *const base64[][2] = {{"", ""},
                                            {"f", "Zg=="},
                                            {"fo", "Zm8="},
                                            {"foo", "Zm9v"},
                                            {"foob", "Zm9vYg=="},
                                            {"fooba", "Zm9vYmE="},
                                            {"foobar", "Zm9vYmFy"}}; /* RFC 4648 §10 */
    for (size_t i = 0; i < sizeof(base64) / sizeof(base64[0]); i++) {
        sxe__base64(base64[i][0], strlen(base64[i][0]), out);
        assert_string_equal(out, base64[i][1]);
    }
    assert_int_equal(sxe_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", 24, out), 28); /* §1.3 */
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    assert_int_equal(sxe_ws_accept_key(NULL, 0, out), -EINVAL);
    assert_true(sxe__ws_key_valid("dGhlIHNhbXBsZSBub25jZQ==", 24));
    assert_false(sxe__ws_key_valid("dGhlIHNhbXBsZSBub25jZR==", 24)); /* stray low bits */
    assert_false(sxe__ws_key_valid("dGhlIHNhbXBsZSBub25jZQ=", 23));
    assert_false(sxe__ws_key_valid("dGhlIHNhbXBsZSBub25j*Q==", 24));
}

static void test_frame_heads_and_masks(void **state)
{
    static const uint64_t lengths[] = {0, 125, 126, 65535, 65536, 1ULL << 32};
    static const uint8_t mask[4] = {1, 2, 3, 4};
    uint8_t head[SXE__WS_HEAD_MAX];
    struct sxe__ws_frame frame;

    (void)state;
    for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        size_t len = sxe__ws_frame_encode(head, i % 2 == 0, SXE_WS_BINARY, lengths[i],
                                          i % 3 == 0 ? mask : NULL);
        for (size_t cut = 0; cut < len; cut++) {
            assert_int_equal(sxe__ws_frame_head(head, cut, &frame), 0); /* more is needed */
        }
        assert_int_equal(sxe__ws_frame_head(head, len, &frame), (int)len);
        assert_true(frame.len == lengths[i]);
        assert_int_equal(frame.fin, i % 2 == 0);
        assert_int_equal(frame.masked, i % 3 == 0);
        assert_int_equal(frame.opcode, SXE_WS_BINARY);
    }
    memset(head, 0xff, sizeof(head));
    head[1] = 127; /* a 64-bit length with its top bit set */
    assert_int_equal(sxe__ws_frame_head(head, 10, &frame), -1);

    uint8_t data[37], copy[37];
    for (size_t i = 0; i < sizeof(data); i++) {
        data[i] = copy[i] = (uint8_t)(i * 13);
    }
    sxe__ws_unmask(data, 5, mask, 0); /* in two pieces, the second starting mid-key */
    sxe__ws_unmask(data + 5, sizeof(data) - 5, mask, 5);
    for (size_t i = 0; i < sizeof(data); i++) {
        assert_int_equal(data[i], copy[i] ^ mask[i % 4]);
    }
    assert_true(sxe__ws_code_valid(1000) && sxe__ws_code_valid(4999) && sxe__ws_code_valid(1014));
    assert_false(sxe__ws_code_valid(1005) || sxe__ws_code_valid(999) || sxe__ws_code_valid(2000));
}

/*
 * Frames sent with the handshake are read after the switch; a fragmented message whose pieces
 * come in separate reads is joined, with a ping between them answered first; the server's close
 * is answered and reported with the peer's code.
 */
static void test_messages_and_the_servers_close(void **state)
{
    uint8_t first[64], payload[256];
    size_t len;

    (void)state;
    start(NULL);
    size_t first_len = client_frame(first, true, SXE_WS_TEXT, "early", 5);
    int fd = open_socket(first, first_len);
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), SXE_WS_TEXT);
    assert_memory_equal(payload, "early", 5);
    assert_string_equal(sxe_ws_protocol(seen.sockets[0]), "chat");

    send_frame(fd, false, SXE_WS_TEXT, "h\xc3", 2); /* a UTF-8 sequence cut between pieces */
    pump(0);
    send_frame(fd, true, 0x9, "p", 1);
    pump(0);
    send_frame(fd, false, 0x0, "\xa9ll", 3);
    pump(0);
    send_frame(fd, true, 0x0, "o", 1);
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), 0xa); /* the pong first */
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), SXE_WS_TEXT);
    assert_int_equal(len, 6);
    assert_memory_equal(payload, "h\xc3\xa9llo", 6);

    assert_int_equal(sxe_ws_close(seen.sockets[0], 4000, "bye"), 0);
    assert_int_equal(sxe_ws_close(seen.sockets[0], 4000, "bye"), -EPIPE);
    assert_int_equal(sxe_ws_send(seen.sockets[0], SXE_WS_TEXT, "late", 4), -EPIPE);
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), 0x8);
    assert_int_equal(len, 5);
    assert_memory_equal(payload,
                        "\x0f\xa0"
                        "bye",
                        5);
    send_frame(fd, true, SXE_WS_TEXT, "ignored", 7); /* after our close: not delivered */
    send_frame(fd, true, 0x8, "\x0f\xa1ok", 4);
    expect_end(fd);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.close_code, 4001);
    assert_string_equal(seen.close_reason, "ok");
    assert_int_equal(seen.messages, 2);
    close(fd);
}

/* A close that is never answered is cut off after close_timeout, reported as 1006. */
static void test_an_unanswered_close_times_out(void **state)
{
    uint8_t payload[64];
    size_t len;

    (void)state;
    start(&(struct sxe_ws_options){.close_timeout = 400 * SXE_NS_PER_MSEC}); /* under idle's 1 s */
    int fd = open_socket(NULL, 0);
    int other = open_socket(NULL, 0);
    assert_int_equal(sxe_ws_close(seen.sockets[0], SXE_WS_NORMAL, NULL), 0);
    pump(200 * SXE_NS_PER_MSEC);
    assert_int_equal(sxe_ws_close(seen.sockets[1], SXE_WS_GOING_AWAY, NULL), 0);
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), 0x8);
    pump(250 * SXE_NS_PER_MSEC); /* only the first's deadline passed */
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.close_code, SXE_WS_ABNORMAL);
    expect_end(fd);
    pump(200 * SXE_NS_PER_MSEC);
    assert_int_equal(seen.closes, 2);
    expect_end(other);
    close(fd);
    close(other);
}

/*
 * Three closes wait for their answers; the middle one's peer sends a bad frame instead, which ends
 * that socket at once. The other two are still cut off when close_timeout passes: the middle one
 * left the list of waiting sockets without breaking it.
 */
static void test_a_failure_while_closes_wait_keeps_the_others_waiting(void **state)
{
    uint8_t payload[64];
    size_t len;
    int fds[3];

    (void)state;
    start(&(struct sxe_ws_options){.close_timeout = 400 * SXE_NS_PER_MSEC});
    for (int i = 0; i < 3; i++) {
        fds[i] = open_socket(NULL, 0);
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sxe_ws_close(seen.sockets[i], SXE_WS_NORMAL, NULL), 0);
    }
    pump(0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(read_frame(fds[i], payload, sizeof(payload), &len), 0x8);
    }
    send_frame(fds[1], true, 0x3, "x", 1); /* a reserved opcode */
    pump(0);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.close_code, SXE_WS_PROTOCOL);
    pump(450 * SXE_NS_PER_MSEC);
    assert_int_equal(seen.closes, 3);
    assert_int_equal(seen.close_code, SXE_WS_ABNORMAL);
    for (int i = 0; i < 3; i++) {
        expect_end(fds[i]);
        close(fds[i]);
    }
}

/* A silent socket is pinged at the idle timeout; one that answers stays, one that does not goes. */
static void test_keep_alive_pings(void **state)
{
    uint8_t payload[64];
    size_t len;
    struct sxe_ws_stats stats;

    (void)state;
    start(NULL);
    int fd = open_socket(NULL, 0);
    pump(SXE_NS_PER_SEC + 1);
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), 0x9);
    send_frame(fd, true, 0xa, payload, len);
    pump(0);
    pump(SXE_NS_PER_SEC + 1);
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), 0x9);
    assert_int_equal(seen.closes, 0);
    pump(SXE_NS_PER_SEC + 1); /* no answer this time */
    expect_end(fd);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.close_code, SXE_WS_ABNORMAL);
    sxe_ws_stats(server, &stats);
    assert_int_equal(stats.pings, 2);
    assert_int_equal(stats.open, 0);
    close(fd);
}

/*
 * A broadcast reaches every open socket of its group but the one excepted, from one frame that
 * is free again once sent (one frame in all: the second broadcast needs the first's back).
 */
static void test_broadcast_to_groups(void **state)
{
    uint8_t payload[64];
    size_t len;
    int fds[3];
    struct sxe_ws_stats stats;

    (void)state;
    start(&(struct sxe_ws_options){.broadcasts = 1, .groups = 2, .broadcast_bytes = 16});
    for (int i = 0; i < 3; i++) {
        fds[i] = open_socket(NULL, 0);
    }
    assert_int_equal(sxe_ws_join(seen.sockets[2], 1), 0);
    assert_int_equal(sxe_ws_broadcast(server, 0, SXE_WS_TEXT, "to all", 6, seen.sockets[1]), 1);
    pump(0);
    assert_int_equal(sxe_ws_broadcast(server, 1, SXE_WS_BINARY, "\x01\x02", 2, NULL), 1);
    assert_int_equal(read_frame(fds[0], payload, sizeof(payload), &len), SXE_WS_TEXT);
    assert_memory_equal(payload, "to all", 6);
    assert_int_equal(read_frame(fds[2], payload, sizeof(payload), &len), SXE_WS_BINARY);
    assert_int_equal(len, 2);
    assert_int_equal(sxe_ws_broadcast(server, 2, SXE_WS_TEXT, "x", 1, NULL), -EINVAL);
    assert_int_equal(sxe_ws_broadcast(server, 0, SXE_WS_TEXT, "seventeen bytes!!", 17, NULL),
                     -EMSGSIZE);
    assert_int_equal(sxe_ws_join(seen.sockets[0], 2), -EINVAL);
    sxe_ws_stats(server, &stats);
    assert_int_equal(stats.messages_out, 2);
    for (int i = 0; i < 3; i++) {
        close(fds[i]);
    }
    pump(0);
    assert_int_equal(seen.closes, 3);
}

/*
 * Two broadcasts queued at once behind a socket that is full, each too big to be copied into its
 * queue (over 1 KB), so each is sent from its frame: the frames are apart, and both arrive whole.
 */
static void test_two_broadcasts_at_once(void **state)
{
    static uint8_t block[1000], first[2000], second[2000], payload[sizeof(first)];
    size_t len;
    int small = 4096, blocks = 0;

    (void)state;
    memset(first, '1', sizeof(first));
    memset(second, '2', sizeof(second));
    start(&(struct sxe_ws_options){.broadcasts = 2, .broadcast_bytes = sizeof(first)});
    int fd = open_socket(NULL, 0);
    sxe_conn_t *conn = sxe_ws_conn(seen.sockets[0]);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    assert_int_equal(setsockopt(sxe_conn_fd(conn), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
                     0);
    while (sxe_conn_queued(conn) == 0) { /* the socket takes no more: the rest is queued */
        assert_int_equal(sxe_ws_send(seen.sockets[0], SXE_WS_BINARY, block, sizeof(block)), 0);
        blocks++;
    }
    assert_int_equal(sxe_ws_broadcast(server, 0, SXE_WS_BINARY, first, sizeof(first), NULL), 1);
    assert_int_equal(sxe_ws_broadcast(server, 0, SXE_WS_BINARY, second, sizeof(second), NULL), 1);
    for (int i = 0; i < blocks; i++) {
        assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), SXE_WS_BINARY);
    }
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), SXE_WS_BINARY);
    assert_int_equal(len, sizeof(first));
    assert_memory_equal(payload, first, sizeof(first));
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), SXE_WS_BINARY);
    assert_int_equal(len, sizeof(second));
    assert_memory_equal(payload, second, sizeof(second));
    close(fd);
    pump(0);
}

/* A reader too slow for queue_bytes is closed with 1008; with drop_when_full its messages drop. */
static void test_slow_readers(void **state)
{
    static char block[32000];
    struct sxe_ws_stats stats;
    int rc = 0;

    (void)state;
    memset(block, 'b', sizeof(block));
    for (int drop = 0; drop <= 1; drop++) {
        start(&(struct sxe_ws_options){.queue_bytes = 64 * 1024, .drop_when_full = drop});
        int fd = open_socket(NULL, 0);
        int small = 4096;
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
        /* Straight to the socket until it is full, then queued: no turn of the loop needed. */
        rc = 0;
        for (int i = 0; i < 5000 && rc == 0; i++) {
            rc = sxe_ws_send(seen.sockets[0], SXE_WS_BINARY, block, sizeof(block));
        }
        assert_int_equal(rc, -ENOBUFS);
        sxe_ws_stats(server, &stats);
        assert_int_equal(drop ? stats.dropped : stats.slow_closed, 1);
        assert_int_equal(seen.closes, drop ? 0 : 1);
        if (!drop) {
            assert_int_equal(seen.close_code, SXE_WS_POLICY);
        }
        close(fd);
        teardown(NULL);
    }
}

/* Handshakes that are not: 426 with the version, 400; counted. */
static void test_refused_handshakes(void **state)
{
    static const char *const requests[][2] = {
        {"GET /ws HTTP/1.1\r\nHost: h\r\n\r\n", "426 Upgrade Required"},
        {"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n",
         "400 Bad Request"},
        {"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n",
         "426 Upgrade Required"},
        {"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
         "400 Bad Request"},
        {"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection-X: Upgrade\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
         "400 Bad Request"}, /* a longer name is not Connection */
        {"GET /bogus HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
         "500 Internal Server Error"},
    };
    struct sxe_ws_stats stats;

    (void)state;
    start(NULL);
    for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
        char answer[1024] = "";
        int fd = sxe_test_client(port);
        sxe_test_say(fd, requests[i][0]);
        for (int turns = 0; strstr(answer, "\r\n\r\n") == NULL && turns < 1000; turns++) {
            pump(0);
            (void)sxe_test_heard(fd, answer, sizeof(answer));
        }
        assert_non_null(strstr(answer, requests[i][1]));
        if (strstr(requests[i][1], "426") != NULL) {
            assert_non_null(strstr(answer, "Sec-WebSocket-Version: 13\r\n"));
        }
        close(fd);
    }
    sxe_ws_stats(server, &stats);
    assert_int_equal(stats.refused, 5);
    assert_int_equal(stats.opened, 0);
}

/* A socket closed by its own on_open: accept says so, and on_close still comes once. */
static void test_closed_in_on_open(void **state)
{
    (void)state;
    start(NULL);
    seen.close_in_open = true;
    int fd = sxe_test_client(port);
    char request[512];
    snprintf(request, sizeof(request), "%s\r\n", handshake_request);
    sxe_test_say(fd, request);
    expect_end(fd);
    assert_int_equal(seen.opens, 1);
    assert_int_equal(seen.closes, 1);
    close(fd);
}

static void send_invalid_text(void *arg)
{
    (void)sxe_ws_send(arg, SXE_WS_TEXT, "\xff", 1);
}

/* Invalid use: assertions in debug builds, -EINVAL (or -EILSEQ) in release. */
static void test_invalid_use(void **state)
{
    (void)state;
    start(NULL);
    int fd = open_socket(NULL, 0);
    sxe_ws_t *ws = seen.sockets[0];
    assert_int_equal(sxe_ws_send(ws, SXE_WS_TEXT, "x", (1u << 20) + 1), -EMSGSIZE);
    sxe_ws_set_user(ws, &seen);
    assert_ptr_equal(sxe_ws_user(ws), &seen);
    assert_ptr_equal(sxe_ws_server_of(ws), server);
#ifdef SXE_DEBUG
    const char *const expected[] = {"WebSocket text must be UTF-8", NULL};
    sxe_test_expect_abort(send_invalid_text, ws, expected);
#else
    send_invalid_text(ws);
    assert_int_equal(sxe_ws_send(ws, SXE_WS_TEXT, "\xff", 1), -EILSEQ);
    assert_int_equal(sxe_ws_send(ws, 7, "x", 1), -EINVAL);
    assert_int_equal(sxe_ws_close(ws, 1005, NULL), -EINVAL);
    assert_int_equal(sxe_ws_server_create(&server, NULL, &handlers, NULL), -EINVAL);
#endif
    close(fd);
}

/* What the client set saw. */
static struct {
    int opens, closes, messages;
    int close_code;
    char close_reason[128];
    size_t last_len;
    uint64_t last_sum;
} client_seen;

static void client_open(sxe_ws_t *ws)
{
    client_seen.opens++;
    assert_string_equal(sxe_ws_protocol(ws), "chat");
}

static void client_message(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
{
    (void)ws;
    (void)type;
    client_seen.messages++;
    client_seen.last_len = len;
    client_seen.last_sum = 0;
    for (size_t i = 0; i < len; i++) {
        client_seen.last_sum += (uint8_t)data[i] * (i % 7 + 1);
    }
}

static void client_close(sxe_ws_t *ws, int code, const char *reason, size_t reason_len)
{
    (void)ws;
    client_seen.closes++;
    client_seen.close_code = code;
    snprintf(client_seen.close_reason, sizeof(client_seen.close_reason), "%.*s", (int)reason_len,
             reason);
}

static void run_until(const int *counter, int count)
{
    for (int turns = 0; *counter < count && turns < 2000; turns++) {
        pump(0);
    }
    assert_int_equal(*counter, count);
}

#ifdef SXE_DEBUG
static void connect_with_a_line_break(void *clients)
{
    sxe_ws_t *ws;
    int rc = sxe_ws_connect(clients, &ws, "127.0.0.1:9", "/ws", "chat\r\nX: y", NULL, 0, NULL);
    (void)rc; /* not reached: the assertion aborts first */
}
#endif

/*
 * sxe's own client against its server, on one loop: the handshake (a sub-protocol chosen from
 * those offered), messages both ways (the client's masked: the server refuses any other), a large
 * one masked a piece at a time, the client's close; then a handshake the server refuses, and a
 * connection refused, each told to on_close.
 */
static void test_a_client_of_our_own(void **state)
{
    static const struct sxe_ws_handlers client_handlers = {
        .on_open = client_open, .on_message = client_message, .on_close = client_close};
    sxe_ws_server_t *clients;
    sxe_ws_t *ws;
    char address[32], *big = malloc(100000);
    uint64_t sum = 0;

    (void)state;
    start(NULL);
    memset(&client_seen, 0, sizeof(client_seen));
    unsigned char bytes[8];
    sxe__sys_fail(SXE_SYS_getrandom, 1, 1, EINTR); /* interrupted: asked again */
    assert_int_equal(sxe_random_bytes(bytes, sizeof(bytes)), 0);
    sxe__sys_fail(SXE_SYS_getrandom, 1, 1, ENOSYS); /* none at all: the set seeds from the clock */
    assert_int_equal(sxe_random_bytes(bytes, sizeof(bytes)), -ENOSYS);
    /* The warning is the WebSocket module's: quiet while that module logs errors only. */
    struct sxe_test_capture capture;
    enum sxe_log_level was = sxe_log_get_module_level("WEBSOCKET");
    assert_int_equal(sxe_log_set_module_level("WEBSOCKET", SXE_LOG_LEVEL_ERROR), 0);
    sxe__sys_fail(SXE_SYS_getrandom, 1, 1, ENOSYS);
    sxe_test_capture_start(&capture);
    assert_int_equal(
        sxe_ws_client_create(&clients, sxe_http_server_loop(http), &client_handlers, NULL), 0);
    sxe_test_capture_stop();
    assert_null(strstr(capture.text, "getrandom failed"));
    sxe_ws_server_destroy(clients);
    assert_int_equal(sxe_log_set_module_level("WEBSOCKET", was), 0);
    sxe__sys_fail(SXE_SYS_getrandom, 1, 1, ENOSYS);
    sxe_test_capture_start(&capture);
    assert_int_equal(
        sxe_ws_client_create(&clients, sxe_http_server_loop(http), &client_handlers, NULL), 0);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "getrandom failed; WebSocket client keys"));
    snprintf(address, sizeof(address), "127.0.0.1:%d", port);
    assert_int_equal(sxe_ws_connect(clients, &ws, address, "/ws", "chat, other", NULL, 0, &seen),
                     0);
    assert_ptr_equal(sxe_ws_user(ws), &seen);
    assert_int_equal(sxe_ws_send(ws, SXE_WS_TEXT, "early", 5), -EPIPE);
    run_until(&client_seen.opens, 1);
    assert_int_equal(sxe_ws_send(ws, SXE_WS_TEXT, "hi", 2), 0);
    run_until(&client_seen.messages, 1);
    assert_int_equal(client_seen.last_len, 2);
    for (size_t i = 0; i < 100000; i++) {
        big[i] = (char)(i * 31);
        sum += (uint8_t)big[i] * (i % 7 + 1);
    }
    assert_int_equal(sxe_ws_send(ws, SXE_WS_BINARY, big, 100000), 0);
    run_until(&client_seen.messages, 2);
    assert_int_equal(client_seen.last_len, 100000);
    assert_true(client_seen.last_sum == sum);
    assert_int_equal(sxe_ws_broadcast(clients, 0, SXE_WS_TEXT, "x", 1, NULL), -EINVAL);
    assert_int_equal(sxe_ws_close(ws, 4002, "done"), 0);
    run_until(&client_seen.closes, 1);
    assert_int_equal(client_seen.close_code, 4002); /* the server answered with ours */
    run_until(&seen.closes, 1);
    assert_int_equal(seen.close_code, 4002);
    assert_string_equal(seen.close_reason, "done");

    assert_int_equal(sxe_ws_connect(clients, &ws, address, "/nowhere", NULL, NULL, 0, NULL), 0);
    run_until(&client_seen.closes, 2);
    assert_int_equal(client_seen.close_code, SXE_WS_PROTOCOL);
    assert_string_equal(client_seen.close_reason, "the server did not switch protocols");

    int closed = socket(AF_INET, SOCK_STREAM, 0); /* a port nobody listens on */
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t any_len = sizeof(any);
    assert_int_equal(bind(closed, (struct sockaddr *)&any, sizeof(any)), 0);
    assert_int_equal(getsockname(closed, (struct sockaddr *)&any, &any_len), 0);
    snprintf(address, sizeof(address), "127.0.0.1:%d", ntohs(any.sin_port));
    assert_int_equal(sxe_ws_connect(clients, &ws, address, "/ws", NULL, NULL, 0, NULL), 0);
    run_until(&client_seen.closes, 3);
    assert_int_equal(client_seen.close_code, SXE_WS_ABNORMAL);
    close(closed);
    assert_int_equal(sxe_ws_connect(clients, &ws, "nowhere", "/ws", NULL, NULL, 0, NULL), -EINVAL);
    /* Sub-protocols that would end the handshake's line: invalid use. */
#ifdef SXE_DEBUG
    const char *const expected[] = {"strpbrk(protocols, \"\\r\\n\") == NULL", NULL};
    sxe_test_expect_abort(connect_with_a_line_break, clients, expected);
#else
    assert_int_equal(sxe_ws_connect(clients, &ws, address, "/ws", "chat\r\nX: y", NULL, 0, NULL),
                     -EINVAL);
#endif
    sxe_ws_server_destroy(clients);
    free(big);
}

/*
 * With one large buffer, a socket whose message outgrows its ordinary buffer while another holds
 * the large one is closed with 1013 (try again later), told to on_close; the other is served.
 */
static void test_a_large_message_with_no_large_buffer_free(void **state)
{
    static uint8_t big[150000];
    uint8_t frame[SXE__WS_HEAD_MAX], payload[64];
    static const uint8_t mask[4] = {0, 0, 0, 0};
    size_t len;

    (void)state;
    large_bodies = 1;
    start(NULL);
    large_bodies = 0;
    int first = open_socket(NULL, 0), second = open_socket(NULL, 0);
    size_t head = sxe__ws_frame_encode(frame, true, SXE_WS_BINARY, sizeof(big), mask);
    for (int fd = first; fd >= 0; fd = fd == first ? second : -1) { /* a head, then 100 KB */
        assert_int_equal(send(fd, frame, head, 0), (ssize_t)head);
        for (size_t sent = 0; sent < 100000; pump(0)) {
            ssize_t put = send(fd, big + sent, 100000 - sent, MSG_DONTWAIT);
            sent += put > 0 ? (size_t)put : 0;
        }
        pump(0);
    }
    assert_int_equal(read_frame(second, payload, sizeof(payload), &len), 0x8);
    assert_int_equal(payload[0] << 8 | payload[1], SXE_WS_TRY_AGAIN);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.close_code, SXE_WS_TRY_AGAIN);
    for (size_t sent = 100000; sent < sizeof(big); pump(0)) { /* the first is served whole */
        ssize_t put = send(first, big + sent, sizeof(big) - sent, MSG_DONTWAIT);
        sent += put > 0 ? (size_t)put : 0;
    }
    for (int turns = 0; seen.messages == 0 && turns < 2000; turns++) {
        pump(0);
    }
    assert_int_equal(seen.messages, 1);
    close(first);
    close(second);
}

/* A request whose only header is Sec-WebSocket-Extensions: value (twice if also is not NULL). */
static struct sxe_http_request *offering(const char *value, const char *also)
{
    static struct sxe_http_request request;

    memset(&request, 0, sizeof(request));
    for (const char *each = value; each != NULL; each = each == value ? also : NULL) {
        request.headers[request.header_count++] =
            (struct sxe_http_header){.name = "Sec-WebSocket-Extensions",
                                     .name_len = 24,
                                     .value = each,
                                     .value_len = strlen(each)};
    }
    return &request;
}

/*
 * permessage-deflate's negotiation (the first offer that can be taken; both no-context-takeover
 * parameters answered), and its streams: a message compressed with the window promised inflates
 * back; a "zip bomb" past message_bytes is 1009; bytes that are not deflate are 1007, and what
 * follows a final block is not read; a message that would not shrink is sent as it is.
 */
static void test_permessage_deflate(void **state)
{
    static const char *const offers[][3] = {
        {"permessage-deflate", NULL, "15"},
        {"permessage-deflate; client_max_window_bits", NULL, "15"},
        {"x-other, permessage-deflate; server_max_window_bits=10", NULL, "10"},
        {"permessage-deflate; server_max_window_bits=\"12\"; client_no_context_takeover", NULL,
         "12"},
        {"permessage-deflate; server_max_window_bits=8", "permessage-deflate", "15"},
        {"permessage-deflate; unknown", NULL, "0"},
        {"permessage-deflatex", NULL, "0"}, /* another extension's name */
        {"permessage-deflate; server_no_context_takeover; server_no_context_takeover", NULL, "0"},
        {"permessage-deflate; server_max_window_bits", NULL, "0"},
        {"permessage-deflate; server_max_window_bits=16", NULL, "0"},
        {"permessage-deflate; server_max_window_bits=1/", NULL, "0"}, /* '/' is '0' - 1 */
        {"permessage-deflate; server_max_window_bits=7", NULL, "0"},
        {"permessage-deflate; server_max_window_bits=\"105\"", NULL, "0"}, /* not "10" */
        {"permessage-deflate; client_no_context_takeover=1", NULL, "0"},
    };
    char answer[160];
    static uint8_t text[100000], frame[120000];

    (void)state;
    for (size_t i = 0; i < sizeof(offers) / sizeof(offers[0]); i++) {
        answer[0] = '\0';
        int bits =
            sxe__ws_deflate_negotiate(offering(offers[i][0], offers[i][1]), answer, sizeof(answer));
        assert_int_equal(bits, atoi(offers[i][2]));
        assert_true(bits == 0 || strncmp(answer,
                                         "permessage-deflate; server_no_context_takeover; "
                                         "client_no_context_takeover",
                                         73) == 0);
        assert_true((strstr(answer, "server_max_window_bits=") != NULL) == (bits > 0 && bits < 15));
    }

    start(&(struct sxe_ws_options){.deflate = true, .message_bytes = 50000});
    for (size_t i = 0; i < sizeof(text); i++) {
        text[i] = (uint8_t)("sxe says hello "[i % 15]);
    }
    size_t len, out_len;
    unsigned code;
    const uint8_t *deflated = sxe__ws_deflate(server, 10, text, 40000, &len);
    assert_non_null(deflated);
    assert_true(len < 1000);
    memcpy(frame, deflated, len);
    const uint8_t *inflated = sxe__ws_inflate(server, frame, len, &out_len, &code);
    assert_non_null(inflated);
    assert_int_equal(out_len, 40000);
    assert_memory_equal(inflated, text, 40000);
    static uint8_t noise[60000]; /* does not compress, and more than the scratch holds */
    uint32_t seed = 1;
    for (size_t i = 0; i < sizeof(noise); i++) {
        seed = seed * 1103515245 + 12345;
        noise[i] = (uint8_t)(seed >> 16);
    }
    assert_null(sxe__ws_deflate(server, 15, noise, sizeof(noise), &len)); /* sent as it is */
    assert_null(sxe__ws_deflate(server, 15, noise, 30000, &len));         /* fits, but no smaller */
    assert_null(sxe__ws_deflate(server, 15, "\x01\x02", 2, &len));        /* would not shrink */
    static const uint8_t zeros[98000]; /* a few hundred bytes compressed, past 50,000 inflated */
    deflated = sxe__ws_deflate(server, 15, zeros, sizeof(zeros), &len);
    assert_non_null(deflated);
    assert_true(len < 1000);
    memcpy(frame, deflated, len);
    assert_null(sxe__ws_inflate(server, frame, len, &out_len, &code));
    assert_int_equal(code, SXE_WS_TOO_BIG);
    assert_non_null(sxe__ws_inflate(server, frame, 0, &out_len, &code)); /* empty: one message */
    assert_int_equal(out_len, 0);
    static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0x00};
    assert_null(sxe__ws_inflate(server, garbage, sizeof(garbage), &out_len, &code));
    assert_int_equal(code, SXE_WS_INVALID_DATA);
    static const uint8_t final_then_more[] = {0x03, 0x00, 0x41}; /* an empty final block, and 'A' */
    assert_non_null(sxe__ws_inflate(server, final_then_more, sizeof(final_then_more), &out_len,
                                    &code)); /* what follows a final block is not read */
    assert_int_equal(out_len, 0);
}

/*
 * sxe's client against a scripted server: a 101 that does not prove the key, is not to websocket,
 * brings an extension or a sub-protocol not offered, or is not HTTP, is refused with the reason;
 * a good one opens the socket, and frames behind it in the same read are delivered.
 */
static void test_a_client_checks_the_servers_answer(void **state)
{
    static const struct sxe_ws_handlers client_handlers = {
        .on_open = client_open, .on_message = client_message, .on_close = client_close};
    static const char *const answers[][2] = {
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n",
         "Sec-WebSocket-Accept does not prove our key"},
        {"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "
         "%s\r\n\r\n",
         "the 101 is not to websocket"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
         "an extension we did not offer"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: other\r\n\r\n",
         "a sub-protocol we did not offer"},
        {"garbage garbage\r\n\r\n", "the answer is not HTTP"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: chat\r\n\r\n\x81\x02hi",
         NULL},
    };
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t address_len = sizeof(address);
    sxe_ws_server_t *clients;
    sxe_ws_t *ws;
    char text[64];

    (void)state;
    start(NULL);
    memset(&client_seen, 0, sizeof(client_seen));
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_int_equal(bind(listener, (struct sockaddr *)&address, sizeof(address)), 0);
    assert_int_equal(listen(listener, 8), 0);
    assert_int_equal(getsockname(listener, (struct sockaddr *)&address, &address_len), 0);
    snprintf(text, sizeof(text), "127.0.0.1:%d", ntohs(address.sin_port));
    assert_int_equal(
        sxe_ws_client_create(&clients, sxe_http_server_loop(http), &client_handlers, NULL), 0);
    for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
        char request[1024] = "", answer[512], proof[29];
        int peer = -1;
        assert_int_equal(sxe_ws_connect(clients, &ws, text, "/x", "chat", NULL, 0, NULL), 0);
        for (int turns = 0; strstr(request, "\r\n\r\n") == NULL && turns < 2000; turns++) {
            pump(0);
            peer = peer >= 0 ? peer : accept(listener, NULL, NULL);
            if (peer >= 0) {
                (void)sxe_test_heard(peer, request, sizeof(request));
            }
        }
        const char *key = strstr(request, "Sec-WebSocket-Key: ");
        assert_non_null(key);
        assert_int_equal(sxe_ws_accept_key(key + 19, 24, proof), 28);
        const char *slot = strstr(answers[i][0], "%s"); /* where the key's proof goes */
        int len = slot == NULL
                      ? snprintf(answer, sizeof(answer), "%s", answers[i][0])
                      : snprintf(answer, sizeof(answer), "%.*s%s%s", (int)(slot - answers[i][0]),
                                 answers[i][0], proof, slot + 2);
        assert_int_equal(send(peer, answer, (size_t)len, 0), len); /* a frame behind, the last */
        if (answers[i][1] != NULL) {
            run_until(&client_seen.closes, (int)i + 1);
            assert_string_equal(client_seen.close_reason, answers[i][1]);
        } else {
            run_until(&client_seen.messages, 1);
            assert_int_equal(client_seen.opens, 1);
            assert_int_equal(client_seen.last_len, 2);
        }
        close(peer);
    }
    run_until(&client_seen.closes, 6);
    sxe_ws_server_destroy(clients);
    close(listener);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha1_base64_and_accept_key),
        cmocka_unit_test(test_frame_heads_and_masks),
        cmocka_unit_test_teardown(test_messages_and_the_servers_close, teardown),
        cmocka_unit_test_teardown(test_an_unanswered_close_times_out, teardown),
        cmocka_unit_test_teardown(test_a_failure_while_closes_wait_keeps_the_others_waiting,
                                  teardown),
        cmocka_unit_test_teardown(test_keep_alive_pings, teardown),
        cmocka_unit_test_teardown(test_broadcast_to_groups, teardown),
        cmocka_unit_test_teardown(test_two_broadcasts_at_once, teardown),
        cmocka_unit_test_teardown(test_slow_readers, teardown),
        cmocka_unit_test_teardown(test_refused_handshakes, teardown),
        cmocka_unit_test_teardown(test_closed_in_on_open, teardown),
        cmocka_unit_test_teardown(test_invalid_use, teardown),
        cmocka_unit_test_teardown(test_a_client_of_our_own, teardown),
        cmocka_unit_test_teardown(test_a_large_message_with_no_large_buffer_free, teardown),
        cmocka_unit_test_teardown(test_permessage_deflate, teardown),
        cmocka_unit_test_teardown(test_a_client_checks_the_servers_answer, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
