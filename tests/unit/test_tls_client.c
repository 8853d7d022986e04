/*
 * TLS as a client (sxe_tls_client_create(), sxe_connect_options.tls): a connection sxe makes to a
 * TLS listener of its own, on the same loop, on both backends. The server's certificate is checked
 * for the name given (a host name or an IP address) against a CA file, or not at all (no_verify);
 * a name the certificate does not carry fails the handshake. WebSocket over TLS both ways (wss).
 * Sessions resumed, per server name, unless no_resume. Bytes written outside any callback: sent
 * as the socket drains, on_drained at the end.
 * Invalid use: a server's context to connect with, a client's to listen with, no name to check.
 */
#include <errno.h>
#include <string.h>

#include "loop.h"
#include "sxe/conn.h"
#include "sxe/http.h"
#include "sxe/loop.h"
#include "sxe/websocket.h"
#include "sxe_test.h"
#include "tls_test.h"

static sxe_loop_t *loop;
static sxe_tls_t *server_tls, *client_tls;
static sxe_conn_t *listener;
static struct sockaddr_in address = {.sin_family = AF_INET};

static struct {
    unsigned connects, closes;
    enum sxe_close_reason reason;
    int err;
    char input[64];
    size_t input_len;
} client_seen;

/* The server: echoes. */
static size_t echo(sxe_conn_t *conn, const char *data, size_t len)
{
    assert_int_equal(sxe_conn_write(conn, data, len), 0);
    return len;
}

static const struct sxe_conn_handlers server_handlers = {.on_read = echo};

/* The client: says hello at once (it waits for the handshake), then reads the echo. */
static void client_connect(sxe_conn_t *conn)
{
    client_seen.connects++;
    assert_int_equal(sxe_conn_write(conn, "hello\n", 6), 0);
}

static size_t client_read(sxe_conn_t *conn, const char *data, size_t len)
{
    size_t room = sizeof(client_seen.input) - client_seen.input_len;

    memcpy(client_seen.input + client_seen.input_len, data, len < room ? len : room);
    client_seen.input_len += len < room ? len : room;
    if (client_seen.input_len >= 6) {
        sxe_conn_close(conn);
    }
    return len;
}

static void client_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    (void)conn;
    client_seen.closes++;
    client_seen.reason = reason;
    client_seen.err = err;
}

static const struct sxe_conn_handlers client_handlers = {
    .on_connect = client_connect, .on_read = client_read, .on_close = client_close};

/* A loop with a TLS listener of the localhost certificate, and a client context of options. */
static void start(const struct sxe_tls_client_options *options)
{
    socklen_t address_len = sizeof(address);

    memset(&client_seen, 0, sizeof(client_seen));
    assert_int_equal(
        sxe_tls_server_create(
            &server_tls, &(struct sxe_tls_options){.certificate = tls_certificate, .key = tls_key}),
        0);
    assert_int_equal(sxe_tls_client_create(&client_tls, options), 0);
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_conn_listen_at(loop, &listener, "127.0.0.1:0",
                                        &(struct sxe_listen_options){.tls = server_tls},
                                        &server_handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&address, &address_len), 0);
}

/* Connects to the listener as server_name, and turns the loop until the client's close. */
static void connect_as(const char *server_name)
{
    sxe_conn_t *conn;
    uint64_t deadline = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;

    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&address, sizeof(address),
                                      &(struct sxe_connect_options){.tls = client_tls,
                                                                    .server_name = server_name},
                                      &client_handlers, NULL),
                     0);
    while (client_seen.closes == 0) {
        assert_true(sxe_clock_mono_ns() < deadline);
        assert_true(sxe_loop_run_once(loop, 10 * 1000000ULL) >= 0);
    }
}

static int teardown(void **state)
{
    (void)state;
    if (loop != NULL) {
        assert_int_equal(sxe__conn_validate(loop), 0);
        sxe_loop_destroy(loop);
        loop = NULL;
    }
    sxe_tls_destroy(server_tls);
    sxe_tls_destroy(client_tls);
    server_tls = client_tls = NULL;
    return 0;
}

/* The certificate checked for its name: the hello waits for the handshake, the echo comes back. */
static void test_client_verifies_and_echoes(void **state)
{
    (void)state;
    start(&(struct sxe_tls_client_options){.ca_file = tls_certificate});
    connect_as("localhost");
    assert_int_equal(client_seen.connects, 1);
    assert_int_equal(client_seen.reason, SXE_CLOSE_LOCAL);
    assert_int_equal(client_seen.input_len, 6);
    assert_memory_equal(client_seen.input, "hello\n", 6);
}

/* A name the certificate does not carry (a host name, an IP address), or an authority that did
 * not sign it: the handshake fails, and the log says why. */
static void test_client_refuses_a_certificate_not_for_it(void **state)
{
    static const char *const names[] = {"other.test", "127.0.0.1"};
    static const char *const why[] = {"(the certificate: hostname mismatch)",
                                      "(the certificate: IP address mismatch)"};
    struct sxe_test_capture capture;

    (void)state;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        start(&(struct sxe_tls_client_options){.ca_file = tls_certificate});
        sxe_test_capture_start(&capture);
        connect_as(names[i]);
        sxe_test_capture_stop();
        assert_int_equal(client_seen.reason, SXE_CLOSE_ERROR);
        assert_int_equal(client_seen.err, EPROTO);
        assert_int_equal(client_seen.input_len, 0);
        assert_non_null(strstr(capture.text, "certificate verify failed"));
        assert_non_null(strstr(capture.text, why[i]));
        teardown(NULL);
    }
    start(&(struct sxe_tls_client_options){.ca_file = tls_other_certificate});
    sxe_test_capture_start(&capture);
    connect_as("localhost");
    sxe_test_capture_stop();
    assert_int_equal(client_seen.err, EPROTO);
    assert_non_null(strstr(capture.text, "certificate verify failed"));
}

/* A server name SNI cannot carry (past 255 bytes): refused before anything is sent. */
static void test_client_name_too_long(void **state)
{
    char name[300];
    sxe_conn_t *conn;
    struct sxe_test_capture capture;

    (void)state;
    start(&(struct sxe_tls_client_options){.ca_file = tls_certificate});
    memset(name, 'a', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    sxe_test_capture_start(&capture);
    assert_int_equal(
        sxe_conn_connect(loop, &conn, (struct sockaddr *)&address, sizeof(address),
                         &(struct sxe_connect_options){.tls = client_tls, .server_name = name},
                         &client_handlers, NULL),
        -EINVAL);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "not a host name or an IP address"));
}

/* no_verify: any certificate, any name or none; the create warns. */
static void test_client_without_verification(void **state)
{
    struct sxe_test_capture capture;

    (void)state;
    sxe_test_capture_start(&capture);
    start(&(struct sxe_tls_client_options){.no_verify = true});
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "no server certificate is checked"));
    connect_as(NULL);
    assert_int_equal(client_seen.input_len, 6);
}

/* Connects as "localhost" twice: @return how many handshakes of the four resumed a session. */
static uint64_t resumed_of_two(const struct sxe_tls_client_options *options)
{
    struct sxe_loop_stats stats;

    start(options);
    connect_as("localhost");
    memset(&client_seen, 0, sizeof(client_seen));
    connect_as("localhost");
    assert_int_equal(client_seen.input_len, 6);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.tls_handshakes, 4); /* two a connection: the client's, the server's */
    teardown(NULL);
    return stats.tls_resumed;
}

/* The second connection to a name resumes the session the first was given (both sides count
 * it), unless the context was made with no_resume. */
static void test_client_resumes_sessions(void **state)
{
    (void)state;
    assert_int_equal(resumed_of_two(&(struct sxe_tls_client_options){.ca_file = tls_certificate}),
                     2);
    assert_int_equal(resumed_of_two(&(struct sxe_tls_client_options){.ca_file = tls_certificate,
                                                                     .no_resume = true}),
                     0);
}

/* wss: a WebSocket server on an HTTPS listener, and a client set over TLS, messages both ways. */
static struct {
    unsigned opens, closes;
    int close_code;
    char message[16];
} wss_seen;

static void wss_echo(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
{
    assert_int_equal(sxe_ws_send(ws, type, data, len), 0);
}

static void wss_client_open(sxe_ws_t *ws)
{
    wss_seen.opens++;
    assert_int_equal(sxe_ws_send(ws, SXE_WS_TEXT, "over tls", 8), 0);
}

static void wss_client_message(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
{
    (void)type;
    snprintf(wss_seen.message, sizeof(wss_seen.message), "%.*s", (int)len, data);
    assert_int_equal(sxe_ws_close(ws, SXE_WS_CLOSE_NORMAL, NULL), 0);
}

static void wss_client_close(sxe_ws_t *ws, int code, const char *reason, size_t reason_len)
{
    (void)ws, (void)reason, (void)reason_len;
    wss_seen.closes++;
    wss_seen.close_code = code;
}

static void test_websocket_over_tls(void **state)
{
    static const struct sxe_ws_handlers server_ws = {.on_message = wss_echo};
    static const struct sxe_ws_handlers client_ws = {
        .on_open = wss_client_open, .on_message = wss_client_message, .on_close = wss_client_close};
    sxe_http_server_t *http;
    sxe_ws_server_t *ws_server;
    sxe_ws_client_t *ws_clients;
    sxe_ws_t *ws;
    char target[32];
    uint64_t deadline = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;

    (void)state;
    assert_int_equal(
        sxe_tls_server_create(
            &server_tls, &(struct sxe_tls_options){.certificate = tls_certificate, .key = tls_key}),
        0);
    assert_int_equal(sxe_tls_client_create(
                         &client_tls, &(struct sxe_tls_client_options){.ca_file = tls_certificate}),
                     0);
    assert_int_equal(
        sxe_http_server_create(&http, NULL, &(struct sxe_http_server_options){.tls = server_tls}),
        0);
    assert_int_equal(sxe_ws_server_create(&ws_server, http, &server_ws, NULL), 0);
    assert_int_equal(sxe_ws_server_route(ws_server, "/ws", NULL), 0);
    assert_int_equal(sxe_http_server_listen(http, "127.0.0.1:0"), 0);
    assert_int_equal(sxe_ws_client_create(&ws_clients, sxe_http_server_loop(http), &client_ws,
                                          &(struct sxe_ws_options){.tls = client_tls}),
                     0);
    /* The certificate is localhost's, so the client checks it for that name: 127.0.0.1 fails. */
    snprintf(target, sizeof(target), "127.0.0.1:%d", sxe_http_server_port(http));
    struct sxe_test_capture capture;
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_ws_client_connect(ws_clients, &ws, target, "/ws", NULL, NULL, 0, NULL), 0);
    while (wss_seen.closes == 0) {
        assert_true(sxe_clock_mono_ns() < deadline);
        assert_true(sxe_loop_run_once(sxe_http_server_loop(http), 10 * 1000000ULL) >= 0);
    }
    assert_int_equal(wss_seen.opens, 0);
    assert_int_equal(wss_seen.close_code, SXE_WS_CLOSE_ABNORMAL);
    memset(&wss_seen, 0, sizeof(wss_seen));
    snprintf(target, sizeof(target), "wss://localhost:%d/ws", sxe_http_server_port(http));
    assert_int_equal(sxe_ws_client_connect(ws_clients, &ws, target, NULL, NULL, NULL, 0, NULL), 0);
    while (wss_seen.closes == 0) {
        assert_true(sxe_clock_mono_ns() < deadline);
        assert_true(sxe_loop_run_once(sxe_http_server_loop(http), 10 * 1000000ULL) >= 0);
    }
    sxe_test_capture_stop(); /* (the server's log of the first handshake's alert came here) */
    assert_int_equal(wss_seen.opens, 1);
    assert_string_equal(wss_seen.message, "over tls");
    assert_int_equal(wss_seen.close_code, SXE_WS_CLOSE_NORMAL);
    assert_non_null(strstr(capture.text, "certificate verify failed"));
    sxe_ws_client_destroy(ws_clients);
    sxe_ws_server_destroy(ws_server);
    sxe_http_server_destroy(http);
}

/* Context errors, and invalid use: an assertion in debug builds, -EINVAL in release builds. */
static void test_client_context_errors(void **state)
{
    struct sxe_test_capture capture;
    sxe_tls_t *made = (sxe_tls_t *)&made;

    (void)state;
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_tls_client_create(
                         &made, &(struct sxe_tls_client_options){.ca_file = "/nonexistent.pem"}),
                     -ENOENT);
    assert_null(made);
    assert_int_equal(
        sxe_tls_client_create(&made, &(struct sxe_tls_client_options){.ca_file = tls_key}),
        -EPROTO);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "CA file /nonexistent.pem"));
    assert_non_null(strstr(capture.text, "no PEM certificate"));
    assert_int_equal(sxe_tls_client_create(&made, NULL), 0); /* the system's authorities */
    sxe_tls_destroy(made);
}

static void connect_with_server_context(void *arg)
{
    sxe_conn_t *conn;

    (void)arg;
    start(NULL);
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&address, sizeof(address),
                                      &(struct sxe_connect_options){.tls = server_tls,
                                                                    .server_name = "localhost"},
                                      &client_handlers, NULL),
                     -EINVAL);
}

static void connect_without_a_name(void *arg)
{
    sxe_conn_t *conn;

    (void)arg;
    start(NULL);
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&address, sizeof(address),
                                      &(struct sxe_connect_options){.tls = client_tls},
                                      &client_handlers, NULL),
                     -EINVAL);
}

static void listen_with_client_context(void *arg)
{
    sxe_conn_t *second;

    (void)arg;
    start(NULL);
    assert_int_equal(sxe_conn_listen_at(loop, &second, "127.0.0.1:0",
                                        &(struct sxe_listen_options){.tls = client_tls},
                                        &server_handlers, NULL),
                     -EINVAL);
}

static void test_client_invalid_use(void **state)
{
    static void (*const uses[])(void *) = {connect_with_server_context, connect_without_a_name,
                                           listen_with_client_context};
    static const char *const checks[] = {"tls->client", "server_name != NULL", "!tls->client"};

    (void)state;
    for (size_t i = 0; i < sizeof(uses) / sizeof(uses[0]); i++) {
#ifdef SXE_DEBUG
        const char *const expected[] = {"assertion failed: ", checks[i], NULL};
        sxe_test_expect_abort(uses[i], NULL, expected);
#else
        (void)checks;
        uses[i](NULL);
        teardown(NULL);
#endif
    }
}

/* A server that counts what it reads, and a client that says when its queue has drained. */
static size_t received;
static unsigned drained;

static size_t count(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)conn, (void)data;
    received += len;
    return len;
}

static void client_drained(sxe_conn_t *conn)
{
    (void)conn;
    drained++;
}

/* Bytes written outside any callback are sealed and sent at once as far as the socket takes
 * them, the rest as it drains (nothing else wakes the connection here: the server never answers),
 * and on_drained says when the queue is empty. */
static void test_client_writes_outside_callbacks(void **state)
{
    static const struct sxe_conn_handlers counting = {.on_read = count};
    static const struct sxe_conn_handlers writer = {.on_drained = client_drained};
    enum { BYTES = 8 * 1024 * 1024 };
    char *bytes = calloc(1, BYTES);
    sxe_conn_t *counter, *conn;
    socklen_t len = sizeof(address);
    uint64_t deadline = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;

    (void)state;
    assert_non_null(bytes);
    start(&(struct sxe_tls_client_options){.ca_file = tls_certificate});
    received = drained = 0;
    assert_int_equal(sxe_conn_listen_at(loop, &counter, "127.0.0.1:0",
                                        &(struct sxe_listen_options){.tls = server_tls}, &counting,
                                        NULL),
                     0);
    assert_int_equal(sxe_conn_local(counter, (struct sockaddr *)&address, &len), 0);
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&address, sizeof(address),
                                      &(struct sxe_connect_options){.tls = client_tls,
                                                                    .server_name = "localhost"},
                                      &writer, NULL),
                     0);
    for (int turns = 0; turns < 20; turns++) { /* the handshake */
        assert_true(sxe_loop_run_once(loop, 1000000ULL) >= 0);
    }
    drained = 0; /* (the handshake's records said so too) */
    assert_true(sxe_conn_write_ref(conn, bytes, BYTES, NULL, NULL) >= 0);
    while (received < BYTES || drained == 0) {
        assert_true(sxe_clock_mono_ns() < deadline);
        assert_true(sxe_loop_run_once(loop, 10 * 1000000ULL) >= 0);
    }
    assert_int_equal(received, BYTES);
    assert_true(drained >= 1);
    sxe_conn_close(conn);
    free(bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_client_verifies_and_echoes, teardown),
        cmocka_unit_test_teardown(test_client_refuses_a_certificate_not_for_it, teardown),
        cmocka_unit_test_teardown(test_client_without_verification, teardown),
        cmocka_unit_test_teardown(test_client_name_too_long, teardown),
        cmocka_unit_test(test_client_context_errors),
        cmocka_unit_test_teardown(test_websocket_over_tls, teardown),
        cmocka_unit_test_teardown(test_client_invalid_use, teardown),
        cmocka_unit_test_teardown(test_client_writes_outside_callbacks, teardown),
        cmocka_unit_test_teardown(test_client_resumes_sessions, teardown),
    };
    return cmocka_run_group_tests(tests, tls_test_group_setup, tls_test_group_teardown);
}
