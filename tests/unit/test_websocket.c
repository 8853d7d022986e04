/*
 * The WebSocket module: SHA-1, Base64 and the accept key against published vectors; frame heads
 * and masking; then, through real sockets under fake time, the paths a conformance client cannot
 * reach: the server's own close (answered, and unanswered past close_timeout), keep-alive pings,
 * broadcast to groups by reference, slow readers (1008, or dropped), frames that came with the
 * handshake, a fragmented message joined across reads, refusals, counters and invalid use. The
 * client and permessage-deflate are in test_websocket_client.c; the harness in websocket_test.h.
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

#include "websocket_test.h"

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
    assert_int_equal(sxe_ws_close(seen.sockets[0], SXE_WS_CLOSE_NORMAL, NULL), 0);
    pump(200 * SXE_NS_PER_MSEC);
    assert_int_equal(sxe_ws_close(seen.sockets[1], SXE_WS_CLOSE_GOING_AWAY, NULL), 0);
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), 0x8);
    pump(250 * SXE_NS_PER_MSEC); /* only the first's deadline passed */
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.close_code, SXE_WS_CLOSE_ABNORMAL);
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
        assert_int_equal(sxe_ws_close(seen.sockets[i], SXE_WS_CLOSE_NORMAL, NULL), 0);
    }
    pump(0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(read_frame(fds[i], payload, sizeof(payload), &len), 0x8);
    }
    send_frame(fds[1], true, 0x3, "x", 1); /* a reserved opcode */
    pump(0);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.close_code, SXE_WS_CLOSE_PROTOCOL);
    pump(450 * SXE_NS_PER_MSEC);
    assert_int_equal(seen.closes, 3);
    assert_int_equal(seen.close_code, SXE_WS_CLOSE_ABNORMAL);
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
    struct sxe_ws_server_stats stats;

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
    assert_int_equal(seen.close_code, SXE_WS_CLOSE_ABNORMAL);
    sxe_ws_server_stats(server, &stats);
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
    struct sxe_ws_server_stats stats;

    (void)state;
    start(&(struct sxe_ws_options){.broadcasts = 1, .groups = 2, .broadcast_bytes = 16});
    for (int i = 0; i < 3; i++) {
        fds[i] = open_socket(NULL, 0);
    }
    assert_int_equal(sxe_ws_join(seen.sockets[2], 1), 0);
    assert_int_equal(sxe_ws_server_broadcast(server, 0, SXE_WS_TEXT, "to all", 6, seen.sockets[1]),
                     1);
    pump(0);
    assert_int_equal(sxe_ws_server_broadcast(server, 1, SXE_WS_BINARY, "\x01\x02", 2, NULL), 1);
    assert_int_equal(read_frame(fds[0], payload, sizeof(payload), &len), SXE_WS_TEXT);
    assert_memory_equal(payload, "to all", 6);
    assert_int_equal(read_frame(fds[2], payload, sizeof(payload), &len), SXE_WS_BINARY);
    assert_int_equal(len, 2);
    assert_int_equal(sxe_ws_server_broadcast(server, 2, SXE_WS_TEXT, "x", 1, NULL), -EINVAL);
    assert_int_equal(sxe_ws_server_broadcast(server, 0, SXE_WS_TEXT, "seventeen bytes!!", 17, NULL),
                     -EMSGSIZE);
    assert_int_equal(sxe_ws_join(seen.sockets[0], 2), -EINVAL);
    sxe_ws_server_stats(server, &stats);
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
    assert_int_equal(sxe_ws_server_broadcast(server, 0, SXE_WS_BINARY, first, sizeof(first), NULL),
                     1);
    assert_int_equal(
        sxe_ws_server_broadcast(server, 0, SXE_WS_BINARY, second, sizeof(second), NULL), 1);
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
    struct sxe_ws_server_stats stats;
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
        sxe_ws_server_stats(server, &stats);
        assert_int_equal(drop ? stats.dropped : stats.slow_closed, 1);
        assert_int_equal(seen.closes, drop ? 0 : 1);
        if (!drop) {
            assert_int_equal(seen.close_code, SXE_WS_CLOSE_POLICY);
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
    struct sxe_ws_server_stats stats;

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
    sxe_ws_server_stats(server, &stats);
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

    /* Each part of the checks refused alone, its neighbours valid. */
    char reason[125];
    memset(reason, 'r', sizeof(reason) - 1);
    reason[124] = '\0';
    assert_int_equal(sxe_ws_send(NULL, SXE_WS_TEXT, "x", 1), -EINVAL);
    assert_int_equal(sxe_ws_send(ws, SXE_WS_BINARY, NULL, 1), -EINVAL);
    assert_int_equal(sxe_ws_server_broadcast(NULL, 0, SXE_WS_TEXT, "x", 1, NULL), -EINVAL);
    assert_int_equal(sxe_ws_server_broadcast(server, 0, 7, "x", 1, NULL), -EINVAL);
    assert_int_equal(sxe_ws_server_broadcast(server, 0, SXE_WS_BINARY, NULL, 1, NULL), -EINVAL);
    assert_int_equal(sxe_ws_join(NULL, 0), -EINVAL);
    assert_int_equal(sxe_ws_close(NULL, 1000, NULL), -EINVAL);
    assert_int_equal(sxe_ws_close(ws, 1000, reason), -EINVAL); /* 124 bytes */
    assert_int_equal(sxe_ws_close(ws, 1000, "\xff"), -EINVAL);
    char protocols[257]; /* 256 bytes: one more than a route keeps with its end */
    memset(protocols, 'p', sizeof(protocols) - 1);
    protocols[256] = '\0';
    assert_int_equal(sxe_ws_server_route(NULL, "/r", NULL), -EINVAL);
    assert_int_equal(sxe_ws_server_route(server, NULL, NULL), -EINVAL);
    assert_int_equal(sxe_ws_server_route(server, "/r", protocols), -EINVAL);
    assert_int_equal(sxe_ws_server_route(server, "/r", protocols + 1), 0); /* 255: the most */
    assert_int_equal(sxe_ws_send(ws, SXE_WS_BINARY, NULL, 0), 0);
    assert_int_equal(sxe_ws_server_broadcast(server, 0, SXE_WS_BINARY, NULL, 0, NULL), 1);
    assert_int_equal(sxe_ws_join(ws, 0), 0);
    assert_int_equal(sxe_ws_close(ws, 1000, reason + 1), 0); /* 123 bytes, the most */
#endif
    close(fd);
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
    assert_int_equal(payload[0] << 8 | payload[1], SXE_WS_CLOSE_TRY_AGAIN);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.close_code, SXE_WS_CLOSE_TRY_AGAIN);
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

/* When the loop begins to stop, each open socket sends a close of 1001 (going away), and the
 * program hears that code too. */
static void test_the_loop_stopping_says_going_away(void **state)
{
    uint8_t payload[64];
    size_t len;

    (void)state;
    start(NULL);
    int fd = open_socket(NULL, 0);
    pump(0);
    sxe_loop_shutdown(sxe_http_server_loop(http), 100 * SXE_NS_PER_MSEC);
    pump(0);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.close_code, SXE_WS_CLOSE_GOING_AWAY);
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), 0x8);
    assert_int_equal(len, 2);
    assert_int_equal(payload[0] << 8 | payload[1], SXE_WS_CLOSE_GOING_AWAY);
    close(fd);
}

/* What follows the peer's close frame is not read: frames behind it in the same packet, even
 * broken ones (unmasked here), neither reach the program nor fail the socket. */
static void test_nothing_after_the_close_frame_is_read(void **state)
{
    uint8_t out[64], payload[64];
    size_t len;
    struct sxe_ws_server_stats stats;

    (void)state;
    start(NULL);
    int fd = open_socket(NULL, 0);
    pump(0);
    size_t at = client_frame(out, true, 0x8, "\x03\xe8", 2);
    out[at++] = 0x81; /* a text frame, unmasked: a protocol error, were it read */
    out[at++] = 0x02;
    out[at++] = 'h';
    out[at++] = 'i';
    assert_int_equal(send(fd, out, at, MSG_NOSIGNAL), (ssize_t)at);
    pump(0);
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), 0x8);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.close_code, SXE_WS_CLOSE_NORMAL);
    assert_int_equal(seen.messages, 0);
    sxe_ws_server_stats(server, &stats);
    assert_int_equal(stats.protocol_errors, 0);
    close(fd);
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
        cmocka_unit_test_teardown(test_a_large_message_with_no_large_buffer_free, teardown),
        cmocka_unit_test_teardown(test_the_loop_stopping_says_going_away, teardown),
        cmocka_unit_test_teardown(test_nothing_after_the_close_frame_is_read, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
