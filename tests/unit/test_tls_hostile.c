/*
 * Hostile TLS clients against the transport (src/core/transport_tls.c).
 * ClientHellos that declare more than a record: OpenSSL reserves and clears the size such a hello
 * declares (up to 128 KB) when its header comes, so a loop reads at most 16 at once. A real one (a
 * client offering 20 KB of ALPN names) completes its handshake, and its end makes room; 16 that
 * stall hold the room, the next is refused and counted (large_hellos_refused), and a closed one
 * makes room again. Smaller hellos never count.
 * KeyUpdates bring the program nothing: they do not keep an idle connection alive.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "sxe/conn.h"
#include "sxe/loop.h"
#include "sxe_test.h"
#include "tls_test.h"

#define ROOM 16 /* LARGE_HELLOS_MOST */

static sxe_loop_t *loop;
static sxe_tls_t *tls;
static sxe_conn_t *listener;
static int port;
static struct {
    unsigned closes;
    enum sxe_close_reason reason; /* the last close's */
    int err;
} seen;

static size_t echo(sxe_conn_t *conn, const char *data, size_t len)
{
    assert_int_equal(sxe_conn_write(conn, data, len), 0);
    return len;
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    (void)conn;
    seen.closes++;
    seen.reason = reason;
    seen.err = err;
}

static const struct sxe_conn_handlers handlers = {.on_read = echo, .on_close = on_close};

/* A loop with a TLS listener, its connections closed after idle_timeout ns idle (0: never). */
static int setup_idle(uint64_t idle_timeout)
{
    struct sockaddr_in address;
    socklen_t len = sizeof(address);

    memset(&seen, 0, sizeof(seen));
    assert_int_equal(
        sxe_tls_server_create(
            &tls, &(struct sxe_tls_options){.certificate = tls_certificate, .key = tls_key}),
        0);
    assert_int_equal(
        sxe_loop_create(
            &loop, &(struct sxe_loop_options){.connections = 64, .idle_timeout = idle_timeout}),
        0);
    assert_int_equal(sxe_conn_listen_at(loop, &listener, "127.0.0.1:0",
                                        &(struct sxe_listen_options){.tls = tls}, &handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&address, &len), 0);
    port = ntohs(address.sin_port);
    return 0;
}

static int setup(void **state)
{
    (void)state;
    return setup_idle(0);
}

static int setup_short_idle(void **state)
{
    (void)state;
    return setup_idle(200 * SXE_NS_PER_MSEC);
}

static int teardown(void **state)
{
    (void)state;
    sxe_loop_destroy(loop);
    sxe_tls_destroy(tls);
    return 0;
}

static struct sxe_loop_stats stats(void)
{
    struct sxe_loop_stats now;

    sxe_loop_stats(loop, &now);
    return now;
}

static void turns(int count)
{
    for (int i = 0; i < count; i++) {
        assert_true(sxe_loop_run_once(loop, 1000000ULL) >= 0);
    }
}

/* A client that sends the first record (16 KB) of a ClientHello declaring 128 KB, and waits. */
static int stalled_hello(void)
{
    static unsigned char record[5 + 16384] = {0x16, 0x03, 0x01, 0x40, 0x00, 0x01,
                                              0x02, 0x00, 0x00, 0x03, 0x03};
    int fd = sxe_test_client(port);

    assert_int_equal(send(fd, record, sizeof(record), 0), sizeof(record));
    turns(10);
    return fd;
}

/* A real client, offering padding bytes of made-up ALPN names before http/1.1 (if any), its
 * handshake run beside the loop's turns. @return its session, handshake done, or NULL if the
 * server refused it. */
static SSL *handshake(SSL_CTX *ctx, size_t padding)
{
    static unsigned char offered[20000 + 9];
    size_t len = 0;
    int fd = sxe_test_client(port);
    SSL *ssl = SSL_new(ctx);

    while (len + 201 <= padding) {
        offered[len] = 200;
        memset(offered + len + 1, 'a' + (int)(len % 26), 200);
        len += 201;
    }
    memcpy(offered + len, "\x08http/1.1", 9);
    if (padding > 0) {
        assert_int_equal(SSL_set_alpn_protos(ssl, offered, (unsigned)len + 9), 0);
    }
    assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
    SSL_set_fd(ssl, fd);
    SSL_set_tlsext_host_name(ssl, "localhost");
    int rc;
    for (int i = 0; i < 1000 && (rc = SSL_connect(ssl)) != 1; i++) {
        if (SSL_get_error(ssl, rc) != SSL_ERROR_WANT_READ) {
            break;
        }
        turns(1);
    }
    turns(3);
    if (rc != 1) {
        ERR_clear_error();
        SSL_free(ssl);
        close(fd);
        return NULL;
    }
    const unsigned char *chosen;
    unsigned chosen_len;
    SSL_get0_alpn_selected(ssl, &chosen, &chosen_len);
    assert_int_equal(chosen_len, padding > 0 ? 8 : 0);
    assert_true(padding == 0 || memcmp(chosen, "http/1.1", 8) == 0);
    return ssl;
}

static void session_free(SSL *ssl)
{
    close(SSL_get_fd(ssl));
    SSL_free(ssl);
}

/* A client that sends a KeyUpdate every 50 ms, and reads the server's answer to each, sends the
 * program nothing: idle_timeout closes its connection as if it were silent. */
static void test_key_updates_keep_no_connection_alive(void **state)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    uint64_t deadline = sxe_clock_mono_ns() + 2 * SXE_NS_PER_SEC;
    unsigned updates = 0;
    char sink[64];

    (void)state;
    assert_non_null(ctx);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    SSL *ssl = handshake(ctx, 0);
    assert_non_null(ssl);
    assert_int_equal(SSL_version(ssl), TLS1_3_VERSION);
    while (seen.closes == 0 && sxe_clock_mono_ns() < deadline) {
        assert_int_equal(SSL_key_update(ssl, SSL_KEY_UPDATE_REQUESTED), 1);
        (void)SSL_do_handshake(ssl); /* sends it */
        updates++;
        for (int i = 0; i < 5 && seen.closes == 0; i++) {
            assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
            (void)SSL_read(ssl, sink, sizeof(sink)); /* the server's own KeyUpdate */
            ERR_clear_error();
        }
    }
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.reason, SXE_CLOSE_TIMEOUT);
    assert_true(updates >= 3); /* 200 ms of them came, and went unheeded */
    session_free(ssl);
    SSL_CTX_free(ctx);
}

static void test_large_hellos_are_bounded(void **state)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *done[ROOM + 1];
    int stalled[ROOM + 2];

    (void)state;
    assert_non_null(ctx);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    /* Hellos that end their handshakes give their room back: 17 in turn, all kept open. */
    for (int i = 0; i <= ROOM; i++) {
        done[i] = handshake(ctx, 20000);
        assert_non_null(done[i]);
    }
    assert_int_equal(stats().large_hellos_refused, 0);

    /* 16 that stall hold the room: the next is refused, counted, and closed saying why. */
    for (int i = 0; i < ROOM; i++) {
        stalled[i] = stalled_hello();
    }
    assert_int_equal(stats().large_hellos_refused, 0);
    assert_int_equal(seen.closes, 0);
    assert_null(handshake(ctx, 20000));
    assert_int_equal(stats().large_hellos_refused, 1);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.err, EMSGSIZE);

    /* A hello that fits its record is not counted: served while the room is full. */
    struct tls_client small = {.port = port, .send = "ping", .expect = 4};
    tls_client_run(loop, &small);
    assert_true(small.handshake_ok);
    assert_int_equal(small.got_len, 4);
    tls_client_free(&small);

    /* A stalled one that goes makes room for the next. */
    close(stalled[0]);
    turns(10);
    stalled[ROOM] = stalled_hello();
    assert_int_equal(stats().large_hellos_refused, 1);
    stalled[ROOM + 1] = stalled_hello();
    assert_int_equal(stats().large_hellos_refused, 2);

    for (int i = 1; i < ROOM + 2; i++) {
        close(stalled[i]);
    }
    for (int i = 0; i <= ROOM; i++) {
        session_free(done[i]);
    }
    SSL_CTX_free(ctx);
    turns(10);
    assert_int_equal(stats().open, 1); /* the listener */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_large_hellos_are_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_updates_keep_no_connection_alive, setup_short_idle,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, tls_test_group_setup, tls_test_group_teardown);
}
