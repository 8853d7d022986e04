/*
 * The WebSocket server's edges that test_websocket.c does not pin: what a peer's close frame of no
 * bytes is reported as, the 500 a handshake gets when the server cannot keep the sub-protocol
 * the program accepts with (its name too long, or its table of names full), and the options in
 * force. The harness is websocket_test.h.
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

/*
 * A close frame of no bytes has no code: the program is told SXE_WS_CLOSE_NO_STATUS and an empty
 * reason, and the answer has no code either. The frame comes with a ping behind it in the same
 * read, so the bytes after the close's empty payload are the ping's head, not a code.
 */
static void test_an_empty_close_is_no_status(void **state)
{
    uint8_t frames[64], payload[64];
    size_t len;

    (void)state;
    start(NULL);
    int fd = open_socket(NULL, 0);
    size_t used = client_frame(frames, true, 0x8, "", 0);
    used += client_frame(frames + used, true, 0x9, "pp", 2);
    assert_int_equal(send(fd, frames, used, 0), (ssize_t)used);
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), 0x8);
    assert_int_equal(len, 0);
    expect_end(fd);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.close_code, SXE_WS_CLOSE_NO_STATUS);
    assert_string_equal(seen.close_reason, "");
    close(fd);
}

/* A close frame of one byte (half a code) is a protocol error: 1002. */
static void test_a_close_of_one_byte_is_a_protocol_error(void **state)
{
    uint8_t payload[64];
    size_t len;

    (void)state;
    start(NULL);
    int fd = open_socket(NULL, 0);
    send_frame(fd, true, 0x8, "\x03", 1);
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), 0x8);
    assert_true(len >= 2);
    assert_int_equal(payload[0] << 8 | payload[1], SXE_WS_CLOSE_PROTOCOL);
    expect_end(fd);
    assert_int_equal(seen.close_code, SXE_WS_CLOSE_PROTOCOL);
    close(fd);
}

static const char *accepted_protocol;
static int accept_errno;

/* The program's route: accepts with accepted_protocol, and keeps the error if that fails. */
static void accept_with(sxe_http_t *request, void *arg)
{
    (void)arg;
    sxe_ws_t *ws = (sxe_ws_t *)&ws;
    accept_errno = -sxe_ws_server_accept(server, request, accepted_protocol, &ws);
    assert_true(accept_errno == 0 ? ws != NULL : ws == NULL);
}

/* Sends a handshake for /mine offering protocol; @return the answer's head (static). */
static const char *handshake_offering(const char *protocol)
{
    static char answer[1024];
    char request[512];
    int fd = sxe_test_client(port);

    snprintf(request, sizeof(request),
             "GET /mine HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
             "Sec-WebSocket-Protocol: %s\r\n\r\n",
             protocol);
    sxe_test_say(fd, request);
    answer[0] = '\0';
    for (int turns = 0; strstr(answer, "\r\n\r\n") == NULL && turns < 1000; turns++) {
        pump(0);
        (void)sxe_test_heard(fd, answer, sizeof(answer));
    }
    close(fd);
    return answer;
}

/*
 * A sub-protocol the server cannot keep a name for (32 bytes or more, or past its table of 16) is
 * refused with 500 and ENOBUFS; a name it knows is still accepted once the table is full.
 */
static void test_a_protocol_the_server_cannot_keep_is_answered_500(void **state)
{
    static const char long_name[] = "a-sub-protocol-name-of-33-bytes-x";
    char names[SXE__WS_PROTOCOLS][16];

    (void)state;
    start(NULL);
    assert_int_equal(sxe_http_server_route(http, "GET", "/mine", 0, accept_with, NULL), 0);
    accepted_protocol = long_name;
    assert_int_equal(strlen(long_name), 33);
    const char *answer = handshake_offering(long_name);
    assert_non_null(strstr(answer, "HTTP/1.1 500 Internal Server Error\r\n"));
    assert_int_equal(accept_errno, ENOBUFS);

    /* Fill the table's places that are left (none of them is taken until a name is accepted). */
    unsigned known = server->protocol_count;
    for (unsigned i = 0; i < SXE__WS_PROTOCOLS - known; i++) {
        snprintf(names[i], sizeof(names[i]), "p%u", i);
        accepted_protocol = names[i];
        answer = handshake_offering(names[i]);
        assert_non_null(strstr(answer, "HTTP/1.1 101 Switching Protocols\r\n"));
        assert_int_equal(accept_errno, 0);
    }
    assert_int_equal(server->protocol_count, SXE__WS_PROTOCOLS);
    accepted_protocol = "one-too-many";
    answer = handshake_offering("one-too-many");
    assert_non_null(strstr(answer, "HTTP/1.1 500 Internal Server Error\r\n"));
    assert_int_equal(accept_errno, ENOBUFS);
    accepted_protocol = names[0];
    answer = handshake_offering(names[0]);
    assert_non_null(strstr(answer, "HTTP/1.1 101 Switching Protocols\r\n"));
    assert_int_equal(accept_errno, 0);
}

/* Sec-WebSocket-Key: Base64 of 16 bytes, 22 characters and "==", the last one carrying 2 bits. */
static void test_keys_are_base64_of_16_bytes_at_every_character(void **state)
{
    static const char good[] = "dGhlIHNhbXBsZSBub25jZQ==";
    static const char last[] = "AQgw"; /* the characters whose low 4 bits are 0 */

    (void)state;
    assert_true(sxe__ws_key_valid(good, 24));
    assert_true(sxe__ws_key_valid("+++++++++++++++++++++A==", 24));
    assert_true(sxe__ws_key_valid("/////////////////////w==", 24));
    for (size_t i = 0; i < 22; i++) { /* a byte outside the alphabet, at each place */
        static const char bad[] = "!-_.\x80 =";
        for (const char *c = bad; *c != '\0'; c++) {
            char key[25];
            memcpy(key, good, sizeof(key));
            key[i] = *c;
            if (sxe__ws_key_valid(key, 24)) {
                fail_msg("'%c' at %zu taken: %s", *c, i, key);
            }
        }
        char key[25];
        memcpy(key, good, sizeof(key));
        key[i] = '\0';
        assert_false(sxe__ws_key_valid(key, 24));
    }
    for (const char *c = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"; *c;
         c++) {
        char key[25];
        memcpy(key, good, sizeof(key));
        key[21] = *c;
        assert_int_equal(sxe__ws_key_valid(key, 24), strchr(last, *c) != NULL);
        key[0] = *c;
        key[21] = 'Q';
        assert_true(sxe__ws_key_valid(key, 24));
    }
    assert_false(sxe__ws_key_valid(good, 23));
    assert_false(sxe__ws_key_valid("dGhlIHNhbXBsZSBub25jZQ=x", 24));
    assert_false(sxe__ws_key_valid("dGhlIHNhbXBsZSBub25jZQx=", 24));
    assert_false(sxe__ws_key_valid("dGhlIHNhbXBsZSBub25jZQ===", 25));
    assert_false(sxe__ws_key_valid("dGhlIHNhbXBsZSBub25jZ===", 24));
}

/*
 * The options in force: each default the header shows where the loop leaves room for it; else the
 * largest message is the most the loop's largest buffer holds, deflated, with a frame head and a
 * ping behind, and the queue is held to the loop's write limit.
 */
static void test_defaults_in_force(void **state)
{
    struct sxe_http_server_options roomy = {.loop = {.connections = 16, .write_limit = 2 << 20},
                                            .limits = {.body_bytes = 4 << 20}};

    (void)state;
    assert_int_equal(sxe_http_server_create(&http, NULL, &roomy), 0);
    assert_int_equal(sxe_ws_server_create(&server, http, &handlers, NULL), 0);
    const struct sxe_ws_options *set = &server->options;
    assert_int_equal(set->message_bytes, 1 << 20);
    assert_int_equal(set->queue_bytes, 1 << 20);
    assert_int_equal(set->close_timeout, 5 * SXE_NS_PER_SEC);
    assert_int_equal(set->message_timeout, 30 * SXE_NS_PER_SEC);
    assert_int_equal(set->message_rate, 16384);
    assert_int_equal(set->groups, 16);
    assert_int_equal(set->broadcasts, 64);
    assert_int_equal(set->broadcast_bytes, 65536);
    sxe_ws_server_destroy(server);
    sxe_http_server_destroy(http);
    server = NULL;

    start(NULL);
    const struct sxe_loop_options *loop = sxe_loop_options(sxe_http_server_loop(http));
    uint64_t room = (loop->large_buffers > 0 ? loop->large_buffer_size : loop->buffer_size) - 256;
    uint64_t most = server->options.message_bytes;
    assert_true(most < 1 << 20);
    assert_true(SXE__WS_DEFLATED_MOST(most) <= room && SXE__WS_DEFLATED_MOST(most + 2) > room);
    assert_int_equal(server->options.queue_bytes, loop->write_limit);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_an_empty_close_is_no_status, teardown),
        cmocka_unit_test_teardown(test_a_close_of_one_byte_is_a_protocol_error, teardown),
        cmocka_unit_test_teardown(test_a_protocol_the_server_cannot_keep_is_answered_500, teardown),
        cmocka_unit_test(test_keys_are_base64_of_16_bytes_at_every_character),
        cmocka_unit_test_teardown(test_defaults_in_force, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
