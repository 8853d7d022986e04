/*
 * The WebSocket client of our own against our server, permessage-deflate negotiated and used both
 * ways, and a client that checks the server's answer to its handshake. Harness: websocket_test.h.
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
    int rc =
        sxe_ws_client_connect(clients, &ws, "127.0.0.1:9", "/ws", "chat\r\nX: y", NULL, 0, NULL);
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
    sxe_ws_client_t *clients;
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
    sxe_ws_client_destroy(clients);
    assert_int_equal(sxe_log_set_module_level("WEBSOCKET", was), 0);
    sxe__sys_fail(SXE_SYS_getrandom, 1, 1, ENOSYS);
    sxe_test_capture_start(&capture);
    assert_int_equal(
        sxe_ws_client_create(&clients, sxe_http_server_loop(http), &client_handlers, NULL), 0);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "getrandom failed; WebSocket client keys"));
    snprintf(address, sizeof(address), "127.0.0.1:%d", port);
    assert_int_equal(
        sxe_ws_client_connect(clients, &ws, address, "/ws", "chat, other", NULL, 0, &seen), 0);
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
    assert_null(sxe_ws_server_of(ws)); /* a client's: it has no server to broadcast through */
    assert_int_equal(sxe_ws_close(ws, 4002, "done"), 0);
    run_until(&client_seen.closes, 1);
    assert_int_equal(client_seen.close_code, 4002); /* the server answered with ours */
    run_until(&seen.closes, 1);
    assert_int_equal(seen.close_code, 4002);
    assert_string_equal(seen.close_reason, "done");

    assert_int_equal(sxe_ws_client_connect(clients, &ws, address, "/nowhere", NULL, NULL, 0, NULL),
                     0);
    run_until(&client_seen.closes, 2);
    assert_int_equal(client_seen.close_code, SXE_WS_CLOSE_PROTOCOL);
    assert_string_equal(client_seen.close_reason, "the server did not switch protocols");
    /* The longest handshake request a set takes (its key's line fills the last of its room) goes
     * out whole: the server answers it (404, no route). */
    char path[512];
    int rc = -EINVAL;
    for (size_t n = sizeof(path) - 1; rc == -EINVAL && n > 1; n--) {
        memset(path, 'a', n);
        path[0] = '/';
        path[n] = '\0';
        rc = sxe_ws_client_connect(clients, &ws, address, path, NULL, NULL, 0, NULL);
    }
    assert_int_equal(rc, 0);
    assert_true(strlen(path) > 300);
    run_until(&client_seen.closes, 3);
    assert_string_equal(client_seen.close_reason, "the server did not switch protocols");

    int closed = socket(AF_INET, SOCK_STREAM, 0); /* a port nobody listens on */
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t any_len = sizeof(any);
    assert_int_equal(bind(closed, (struct sockaddr *)&any, sizeof(any)), 0);
    assert_int_equal(getsockname(closed, (struct sockaddr *)&any, &any_len), 0);
    snprintf(address, sizeof(address), "127.0.0.1:%d", ntohs(any.sin_port));
    assert_int_equal(sxe_ws_client_connect(clients, &ws, address, "/ws", NULL, NULL, 0, NULL), 0);
    run_until(&client_seen.closes, 4);
    assert_int_equal(client_seen.close_code, SXE_WS_CLOSE_ABNORMAL);
    close(closed);
    assert_int_equal(sxe_ws_client_connect(clients, &ws, "nowhere", "/ws", NULL, NULL, 0, NULL),
                     -EINVAL);
    /* Sub-protocols that would end the handshake's line: invalid use. */
#ifdef SXE_DEBUG
    const char *const expected[] = {"strpbrk(protocols, \"\\r\\n\") == NULL", NULL};
    sxe_test_expect_abort(connect_with_a_line_break, clients, expected);
#else
    assert_int_equal(
        sxe_ws_client_connect(clients, &ws, address, "/ws", "chat\r\nX: y", NULL, 0, NULL),
        -EINVAL);
    /* Each other part of the check refused alone, the rest valid. */
    assert_int_equal(sxe_ws_client_connect(NULL, &ws, address, "/ws", NULL, NULL, 0, NULL),
                     -EINVAL);
    assert_int_equal(sxe_ws_client_connect(clients, NULL, address, "/ws", NULL, NULL, 0, NULL),
                     -EINVAL);
    assert_int_equal(sxe_ws_client_connect(clients, &ws, NULL, "/ws", NULL, NULL, 0, NULL),
                     -EINVAL);
    assert_int_equal(sxe_ws_client_connect(clients, &ws, address, NULL, NULL, NULL, 0, NULL),
                     -EINVAL);
    assert_int_equal(sxe_ws_client_connect(clients, &ws, address, "ws", NULL, NULL, 0, NULL),
                     -EINVAL);
    for (const char *c = " \r\n"; *c != '\0'; c++) {
        char broken[] = "/w?s";
        broken[2] = *c;
        assert_int_equal(sxe_ws_client_connect(clients, &ws, address, broken, NULL, NULL, 0, NULL),
                         -EINVAL);
    }
#endif
    sxe_ws_client_destroy(clients);
    free(big);
}

/* A request whose only header is Sec-WebSocket-Extensions: value (twice if also is not NULL). */
static struct sxe_http_request_head *offering(const char *value, const char *also)
{
    static struct sxe_http_request_head request;

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
    assert_int_equal(code, SXE_WS_CLOSE_TOO_BIG);
    assert_non_null(sxe__ws_inflate(server, frame, 0, &out_len, &code)); /* empty: one message */
    assert_int_equal(out_len, 0);
    static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0x00};
    assert_null(sxe__ws_inflate(server, garbage, sizeof(garbage), &out_len, &code));
    assert_int_equal(code, SXE_WS_CLOSE_INVALID_DATA);
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
    sxe_ws_client_t *clients;
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
        assert_int_equal(sxe_ws_client_connect(clients, &ws, text, "/x", "chat", NULL, 0, NULL), 0);
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
    sxe_ws_client_destroy(clients);
    close(listener);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_a_client_of_our_own, teardown),
        cmocka_unit_test_teardown(test_permessage_deflate, teardown),
        cmocka_unit_test_teardown(test_a_client_checks_the_servers_answer, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
