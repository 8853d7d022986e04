/*
 * Connections and WebSockets to names (sxe_resolve_connect(), sxe_ws_client_connect()), resolved
 * by the tests' DNS server (dns_server.c): a name asked gives a connection at once, connected when
 * the answer comes, and the next connection to it connects at once from the cache; a name that
 * does not exist, fails or is not answered closes its connection with the resolver's error; a
 * connection closed, timed out or left by a destroyed resolver while its name is asked; TLS checks
 * the certificate for the name; ws:// and wss:// URLs.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dns_server.h"
#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/http.h"
#include "sxe/resolve.h"
#include "sxe/timer.h"
#include "sxe/websocket.h"
#include "sxe_test.h"
#ifdef SXE_TEST_TLS
#include "tls_test.h"
#endif

static struct dns_server *dns;
static char servers[32];
static sxe_loop_t *loop;
static sxe_resolver_t *resolver;
static int port;

static struct {
    int connects, closes, err, bytes;
    enum sxe_close_reason reason;
} seen;

static void on_connect(sxe_conn_t *conn)
{
    seen.connects++;
    assert_int_equal(sxe_conn_write(conn, "hello", 5), 0);
}

static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)conn, (void)data;
    seen.bytes += (int)len;
    return len;
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    (void)conn;
    seen.closes++;
    seen.reason = reason;
    seen.err = err;
}

static const struct sxe_conn_handlers client = {
    .on_connect = on_connect, .on_read = on_read, .on_close = on_close};

static size_t echo(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)sxe_conn_write(conn, data, len);
    return len;
}

static const struct sxe_conn_handlers server = {.on_read = echo};

/* An echo server on 127.0.0.1, TLS with tls; its port. */
static int listen_echo(sxe_tls_t *tls)
{
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(at);
    sxe_conn_t *listener;

    assert_int_equal(sxe_conn_listen(loop, &listener, (struct sockaddr *)&at, sizeof(at),
                                     &(struct sxe_listen_options){.tls = tls}, &server, NULL),
                     0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&at, &len), 0);
    return ntohs(at.sin_port);
}

static int setup(void **state)
{
    (void)state;
    memset(&seen, 0, sizeof(seen));
    struct sxe_loop_options options = {.connections = 16, .connect_timeout = 5 * SXE_NS_PER_SEC};
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    port = listen_echo(NULL);
    struct sxe_resolver_options resolve = {.servers = servers, .timeout_ms = 200, .tries = 1};
    assert_int_equal(sxe_resolver_create(&resolver, loop, &resolve), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_resolver_destroy(resolver);
    sxe_loop_destroy(loop);
    return 0;
}

static void run_until(const int *counter, int count)
{
    for (int turn = 0; turn < 300 && *counter < count; turn++) {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
    assert_int_equal(*counter, count);
}

static void counted(void *arg, int err, const struct sxe_resolved *answer)
{
    (void)err, (void)answer;
    ++*(int *)arg;
}

/* Connects to name at the echo server's port. @return sxe_resolve_connect()'s result. */
static int connect_to(sxe_resolver_t *with, const char *name, const struct sxe_connect_options *o)
{
    char address[300];
    sxe_conn_t *conn;

    snprintf(address, sizeof(address), "%s:%d", name, port);
    return sxe_resolve_connect(loop, with, &conn, address, o, &client, NULL);
}

static void test_a_name_connects(void **state)
{
    struct sxe_resolver_stats stats;
    sxe_conn_t *conn;
    char address[32];

    (void)state;
    snprintf(address, sizeof(address), "a.test:%d", port);
    assert_int_equal(sxe_resolve_connect(loop, resolver, &conn, address, NULL, &client, NULL), 0);
    assert_int_equal(sxe_conn_write(conn, "x", 1), -EPIPE); /* reserved: its name is asked */
    run_until(&seen.bytes, 5);                              /* echoed */
    assert_int_equal(connect_to(resolver, "A.TEST", NULL), 0);
    sxe_resolver_stats(resolver, &stats);
    assert_int_equal(stats.asked, 1);
    assert_int_equal(stats.hits, 1); /* the second from the cache: connected at once */
    run_until(&seen.bytes, 10);
    /* Addresses and localhost need no resolver. */
    assert_int_equal(connect_to(NULL, "127.0.0.1", NULL), 0);
    assert_int_equal(connect_to(NULL, "LocalHost", NULL), 0);
    run_until(&seen.bytes, 20);
    assert_int_equal(seen.closes, 0);
}

static void test_names_that_fail(void **state)
{
    (void)state;
    assert_int_equal(connect_to(resolver, "nx.test", NULL), 0);
    run_until(&seen.closes, 1);
    assert_int_equal(seen.reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.err, ENOENT);
    assert_int_equal(connect_to(resolver, "nx.test", NULL), -ENOENT); /* remembered */
    assert_int_equal(connect_to(resolver, "fail.test", NULL), 0);
    run_until(&seen.closes, 2);
    assert_int_equal(seen.err, EPROTO);
    assert_int_equal(connect_to(resolver, "silent.test", NULL), 0);
    run_until(&seen.closes, 3);
    assert_int_equal(seen.err, ETIMEDOUT);
    assert_int_equal(seen.connects, 0);
    static const char *const bad[] = {"a.test", "a..test:80", "a.test:0", "[a.test]:80", ""};
    sxe_conn_t *conn;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(sxe_resolve_connect(loop, resolver, &conn, bad[i], NULL, &client, NULL),
                         -EINVAL);
    }
    assert_int_equal(connect_to(NULL, "a.test", NULL), -EINVAL); /* a name, no resolver */
}

/* The connection closed, or out of time, while its name is asked; then its resolver destroyed
 * while it is asked: the answer finds nothing to connect, or the connection fails. */
static void test_a_connection_gone_while_asked(void **state)
{
    struct sxe_resolver_stats stats;
    sxe_conn_t *conn;
    char address[32];

    (void)state;
    snprintf(address, sizeof(address), "a.test:%d", port);
    assert_int_equal(sxe_resolve_connect(loop, resolver, &conn, address, NULL, &client, NULL), 0);
    sxe_conn_close(conn);
    assert_int_equal(seen.closes, 1);
    do {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
        sxe_resolver_stats(resolver, &stats);
    } while (stats.answered == 0);
    assert_int_equal(seen.connects, 0);
    /* A loop whose connects time out at 100 ms, and a server that never answers. */
    sxe_resolver_destroy(resolver);
    sxe_loop_destroy(loop);
    struct sxe_loop_options options = {.connections = 16, .connect_timeout = 100 * SXE_NS_PER_MSEC};
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    struct sxe_resolver_options resolve = {.servers = servers, .timeout_ms = 500, .tries = 1};
    assert_int_equal(sxe_resolver_create(&resolver, loop, &resolve), 0);
    assert_int_equal(connect_to(resolver, "silent.test", NULL), 0);
    run_until(&seen.closes, 2);
    assert_int_equal(seen.reason, SXE_CLOSE_TIMEOUT);
    do {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
        sxe_resolver_stats(resolver, &stats);
    } while (stats.failed == 0);
    assert_int_equal(connect_to(resolver, "a.test", NULL), 0);
    sxe_resolver_destroy(resolver); /* its question out */
    resolver = NULL;
    assert_int_equal(seen.closes, 3);
    assert_int_equal(seen.reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.err, ECANCELED);
}

/* A name's addresses tried in turn when one refuses from the loop (both.test: ::1, where nothing
 * listens, before 127.0.0.1): asked, then known; every address refusing (the last one's error);
 * closed, and its loop destroyed, while it tries them. */
static void test_every_address_is_tried(void **state)
{
    struct sockaddr_in6 any = {.sin6_family = AF_INET6};
    socklen_t len = sizeof(any);
    sxe_conn_t *conn;
    char address[32];

    (void)state;
    assert_int_equal(connect_to(resolver, "both.test", NULL), 0); /* asked */
    run_until(&seen.bytes, 5);
    assert_int_equal(connect_to(resolver, "both.test", NULL), 0); /* known */
    run_until(&seen.bytes, 10);
    assert_int_equal(seen.closes, 0);
    /* A port where nothing listens, on both families: a socket bound to it, never listening. */
    int bound = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(bind(bound, (struct sockaddr *)&any, sizeof(any)), 0);
    assert_int_equal(getsockname(bound, (struct sockaddr *)&any, &len), 0);
    snprintf(address, sizeof(address), "both.test:%d", ntohs(any.sin6_port));
    assert_int_equal(sxe_resolve_connect(loop, resolver, &conn, address, NULL, &client, NULL), 0);
    run_until(&seen.closes, 1);
    assert_int_equal(seen.reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.err, ECONNREFUSED);
    assert_int_equal(sxe_resolve_connect(loop, resolver, &conn, address, NULL, &client, NULL), 0);
    sxe_conn_close(conn);
    assert_int_equal(seen.closes, 2);
    close(bound);
    assert_int_equal(connect_to(resolver, "both.test", NULL), 0);
    sxe_resolver_destroy(resolver);
    resolver = NULL;
    sxe_loop_destroy(loop); /* what its connect holds goes with it */
    loop = NULL;
    assert_int_equal(seen.connects, 2);
}

/* both.test's ::1 never answering (a listener whose queue is full drops the SYN) and 127.0.0.1
 * listening on the same port: ::1 has connect_timeout, then 127.0.0.1 its own. */
static void test_a_silent_address_is_passed_over(void **state)
{
    struct sockaddr_in6 six = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int silent = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0), fillers[2];

    (void)state;
    sxe_resolver_destroy(resolver);
    sxe_loop_destroy(loop);
    struct sxe_loop_options options = {.connections = 16, .connect_timeout = 200 * SXE_NS_PER_MSEC};
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    struct sxe_resolver_options resolve = {.servers = servers, .timeout_ms = 200, .tries = 1};
    assert_int_equal(sxe_resolver_create(&resolver, loop, &resolve), 0);
    port = listen_echo(NULL);
    six.sin6_port = htons((uint16_t)port);
    if (bind(silent, (struct sockaddr *)&six, sizeof(six)) < 0) {
        close(silent);
        skip(); /* [::1] at 127.0.0.1's port is taken: nothing to learn here */
    }
    assert_int_equal(listen(silent, 0), 0);
    for (int i = 0; i < 2; i++) {
        fillers[i] = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        (void)connect(fillers[i], (struct sockaddr *)&six, sizeof(six));
    }
    uint64_t start = sxe_clock_mono_ns();
    assert_int_equal(connect_to(resolver, "both.test", NULL), 0);
    run_until(&seen.bytes, 5);
    assert_true(sxe_clock_mono_ns() - start >= 200 * SXE_NS_PER_MSEC); /* ::1's time, first */
    assert_int_equal(seen.closes, 0);
    close(fillers[0]);
    close(fillers[1]);
    close(silent);
}

/* The resolver's steps for clients: a name's nth address, asked then known; connects that cannot
 * begin, a full table, a resolver with no room for another caller, a server name too long. */
static void test_the_edges(void **state)
{
    union sxe_resolved_address address;
    sxe_conn_t *conns[16];
    int taken = 0, asked = 0;

    (void)state;
    assert_int_equal(sxe_resolve_address(NULL, "a.test", 80, 0, &address, NULL, NULL, NULL),
                     -EINVAL);
    assert_int_equal(sxe_resolve_address(NULL, "127.0.0.1", 80, 3, &address, NULL, NULL, NULL), 0);
    assert_int_equal(ntohs(address.in.sin_port), 80);
    assert_int_equal(
        sxe_resolve_address(resolver, "both.test", 80, 1, &address, counted, &asked, NULL),
        -EAGAIN);
    run_until(&asked, 1);
    assert_int_equal(
        sxe_resolve_address(resolver, "both.test", 80, 3, &address, counted, &asked, NULL), 0);
    assert_int_equal(address.sa.sa_family, AF_INET); /* ::1 first, then 127.0.0.1: round */
    /* Connects that cannot begin, from a source this host lacks: at once for an address, and
     * on the answer for a name. */
    struct sockaddr_in nowhere = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0xc0000201)};
    struct sxe_connect_options from = {.source = (struct sockaddr *)&nowhere,
                                       .source_len = sizeof(nowhere)};
    assert_int_equal(connect_to(NULL, "127.0.0.1", &from), -EADDRNOTAVAIL);
    assert_int_equal(connect_to(resolver, "other.test", &from), 0);
    run_until(&seen.closes, 1);
    assert_int_equal(seen.err, EADDRNOTAVAIL);
    char name[300];
    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    assert_int_equal(
        connect_to(NULL, "127.0.0.1", &(struct sxe_connect_options){.server_name = name}), -EINVAL);
    /* The table full: an address, and a name to ask (its question withdrawn). */
    while (taken < 16 && sxe_conn_reserve(loop, &conns[taken], &client, NULL) == 0) {
        taken++;
    }
    assert_int_equal(connect_to(NULL, "127.0.0.1", NULL), -ENOBUFS);
    assert_int_equal(connect_to(resolver, "six.test", NULL), -ENOBUFS);
    for (int i = 0; i < taken; i++) {
        sxe_conn_close(conns[i]);
    }
    /* A resolver that takes one caller at a time. */
    sxe_resolver_t *one;
    struct sxe_resolver_options resolve = {.servers = servers, .queries = 1};
    assert_int_equal(sxe_resolver_create(&one, loop, &resolve), 0);
    assert_int_equal(connect_to(one, "silent.test", NULL), 0);
    assert_int_equal(connect_to(one, "a.test", NULL), -ENOBUFS);
    sxe_resolver_destroy(one);
}

static void connect_without_handlers(void)
{
    sxe_loop_t *own;
    sxe_conn_t *conn;
    assert_int_equal(sxe_loop_create(&own, NULL), 0);
    assert_int_equal(sxe_resolve_connect(own, NULL, &conn, "127.0.0.1:9", NULL, NULL, NULL),
                     -EINVAL);
    sxe_loop_destroy(own);
}

static void connect_from_too_long_a_source(void)
{
    sxe_loop_t *own;
    sxe_conn_t *conn;
    struct sockaddr_storage source = {.ss_family = AF_INET};
    struct sxe_connect_options from = {.source = (struct sockaddr *)&source,
                                       .source_len = sizeof(source) + 1};
    assert_int_equal(sxe_loop_create(&own, NULL), 0);
    assert_int_equal(sxe_resolve_connect(own, NULL, &conn, "127.0.0.1:9", &from, &client, NULL),
                     -EINVAL);
    sxe_loop_destroy(own);
}

static void connect_without_a_loop(void)
{
    sxe_conn_t *conn;
    assert_int_equal(sxe_resolve_connect(NULL, NULL, &conn, "127.0.0.1:9", NULL, &client, NULL),
                     -EINVAL);
}

static const struct sxe_test_invalid_use uses[] = {
    {"sxe_resolve_connect() without a loop", connect_without_a_loop, "loop != NULL"},
    {"sxe_resolve_connect() without handlers", connect_without_handlers, "handlers != NULL"},
    {"sxe_resolve_connect() from a source longer than any", connect_from_too_long_a_source,
     "options->source_len <= sizeof(struct sockaddr_storage)"},
};

static void test_each_invalid_use(void **state)
{
    (void)state;
    sxe_test_invalid_uses(uses, sizeof(uses) / sizeof(uses[0]));
}

#ifdef SXE_TEST_TLS
/* TLS to a name: the certificate is checked for it (other.test's passes, a.test's does not); a
 * session for each address tried. */
static void test_tls_to_a_name(void **state)
{
    sxe_tls_t *server_tls, *client_tls;

    (void)state;
    assert_int_equal(
        sxe_tls_server_create(
            &server_tls,
            &(struct sxe_tls_options){.certificate = tls_other_certificate, .key = tls_other_key}),
        0);
    assert_int_equal(
        sxe_tls_client_create(&client_tls,
                              &(struct sxe_tls_client_options){.ca_file = tls_other_certificate}),
        0);
    port = listen_echo(server_tls);
    struct sxe_connect_options secure = {.tls = client_tls};
    assert_int_equal(connect_to(resolver, "other.test", &secure), 0);
    run_until(&seen.bytes, 5);
    /* ::1 refuses, and 127.0.0.1 takes a session of its own (the name given for the check). */
    struct sxe_connect_options named = {.tls = client_tls, .server_name = "other.test"};
    assert_int_equal(connect_to(resolver, "both.test", &named), 0);
    run_until(&seen.bytes, 10);
    assert_int_equal(seen.closes, 0);
    assert_int_equal(connect_to(resolver, "a.test", &secure), 0);
    struct sxe_test_capture capture;
    sxe_test_capture_start(&capture);
    run_until(&seen.closes, 1);
    sxe_test_capture_stop();
    assert_int_equal(seen.err, EPROTO);
    assert_non_null(strstr(capture.text, "certificate verify failed"));
    sxe_resolver_destroy(resolver); /* the contexts outlive the connections and the listener */
    resolver = NULL;
    sxe_loop_destroy(loop);
    loop = NULL;
    sxe_tls_destroy(client_tls);
    sxe_tls_destroy(server_tls);
}
#endif

/* WebSockets by name and by URL, against a server of ours on the same loop. */
static struct {
    int opens, closes, messages, code;
    char reason[128];
} ws_seen;

static void ws_echo(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
{
    (void)sxe_ws_send(ws, type, data, len);
}

static void ws_open(sxe_ws_t *ws)
{
    ws_seen.opens++;
    assert_int_equal(sxe_ws_send(ws, SXE_WS_TEXT, "hi", 2), 0);
}

static void ws_message(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
{
    (void)type, (void)data, (void)len;
    ws_seen.messages++;
    (void)sxe_ws_close(ws, SXE_WS_CLOSE_NORMAL, NULL);
}

static void ws_close(sxe_ws_t *ws, int code, const char *reason, size_t reason_len)
{
    (void)ws;
    ws_seen.closes++;
    ws_seen.code = code;
    snprintf(ws_seen.reason, sizeof(ws_seen.reason), "%.*s", (int)reason_len, reason);
}

static void run_ws_until(int closes)
{
    for (int turn = 0; turn < 300 && ws_seen.closes < closes; turn++) {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
    assert_int_equal(ws_seen.closes, closes);
}

static void test_websockets_to_names(void **state)
{
    static const struct sxe_ws_handlers echoes = {.on_message = ws_echo};
    static const struct sxe_ws_handlers talks = {
        .on_open = ws_open, .on_message = ws_message, .on_close = ws_close};
    sxe_http_server_t *http;
    sxe_ws_server_t *ws_server;
    sxe_ws_client_t *clients, *own;
    sxe_ws_t *ws;
    char address[128];

    (void)state;
    assert_int_equal(sxe_http_server_create(&http, loop, NULL), 0);
    assert_int_equal(sxe_ws_server_create(&ws_server, http, &echoes, NULL), 0);
    assert_int_equal(sxe_ws_server_route(ws_server, "/ws", NULL), 0);
    assert_int_equal(sxe_http_server_listen(http, "127.0.0.1:0"), 0);
    int at = sxe_http_server_port(http);
    assert_int_equal(sxe_ws_client_create(&clients, loop, &talks,
                                          &(struct sxe_ws_options){.resolver = resolver}),
                     0);
    snprintf(address, sizeof(address), "ws://a.test:%d/ws?room=1", at);
    assert_int_equal(sxe_ws_client_connect(clients, &ws, address, NULL, NULL, NULL, 0, NULL), 0);
    snprintf(address, sizeof(address), "both.test:%d", at); /* ::1 refuses: then 127.0.0.1 */
    assert_int_equal(sxe_ws_client_connect(clients, &ws, address, "/ws", NULL, NULL, 0, NULL), 0);
    snprintf(address, sizeof(address), "ws://a.test:%d?room=1", at); /* "/?room=1": no route */
    assert_int_equal(sxe_ws_client_connect(clients, &ws, address, NULL, NULL, NULL, 0, NULL), 0);
    run_ws_until(3);
    assert_int_equal(ws_seen.opens, 2);
    assert_int_equal(ws_seen.messages, 2);
    assert_int_equal(ws_seen.code, SXE_WS_CLOSE_NORMAL);
    /* A name that does not exist; wss:// with the set's own TLS context, to a server that speaks
     * none; a name of /etc/hosts with the set's own resolver (which asks no server for it). */
    snprintf(address, sizeof(address), "ws://nx.test:%d/ws", at);
    assert_int_equal(sxe_ws_client_connect(clients, &ws, address, NULL, NULL, NULL, 0, NULL), 0);
    run_ws_until(4);
    assert_int_equal(ws_seen.code, SXE_WS_CLOSE_ABNORMAL);
    assert_string_equal(ws_seen.reason, strerror(ENOENT));
    assert_int_equal(sxe_ws_client_create(&own, loop, &talks, NULL), 0);
    snprintf(address, sizeof(address), "wss://127.0.0.1:%d/ws", at);
    assert_int_equal(sxe_ws_client_connect(own, &ws, address, NULL, NULL, NULL, 0, NULL), 0);
    run_ws_until(5);
    assert_int_equal(ws_seen.code, SXE_WS_CLOSE_ABNORMAL);
    assert_int_equal(ws_seen.opens, 2);
    assert_int_equal(sxe_ws_client_connect(own, &ws, address, NULL, NULL, NULL, 0, NULL), 0);
    run_ws_until(6); /* the set's TLS context made once, used twice */
    char name[64], ip[64];
    if (dns_hosts_name(name, ip) && strcmp(ip, "127.0.0.1") == 0) {
        for (int i = 0; i < 2; i++) { /* the set's resolver made once, used twice */
            snprintf(address, sizeof(address), "WS://%s:%d", name, at);
            assert_int_equal(sxe_ws_client_connect(own, &ws, address, "/ws", NULL, NULL, 0, NULL),
                             0);
            run_ws_until(7 + i);
            assert_int_equal(ws_seen.opens, 3 + i);
            assert_int_equal(ws_seen.code, SXE_WS_CLOSE_NORMAL);
        }
    }
    static const char *const bad[] = {"ws://",           "ws:///ws",         "ws://:80/ws",
                                      "ws://a.test/a b", "wss://a.test#top", "ws://a.test/ws#x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(sxe_ws_client_connect(own, &ws, bad[i], NULL, NULL, NULL, 0, NULL),
                         -EINVAL);
    }
    assert_int_equal(sxe_ws_client_connect(own, &ws, "ws://a.test/ws", "/ws", NULL, NULL, 0, NULL),
                     -EINVAL); /* a path twice */
    assert_int_equal(sxe_ws_client_connect(own, &ws, "a.test:80", NULL, NULL, NULL, 0, NULL),
                     -EINVAL); /* no path */
    assert_int_equal(sxe_ws_client_connect(own, &ws, "ws://a.test/a\tb", NULL, NULL, NULL, 0, NULL),
                     -EINVAL);    /* a control byte in the path */
    for (int i = 0; i < 9; i++) { /* connects that fail take none of the set's 8 requests */
        snprintf(address, sizeof(address), "ws://bad!%d:%d/ws", i, at);
        assert_int_equal(sxe_ws_client_connect(own, &ws, address, NULL, NULL, NULL, 0, NULL),
                         -EINVAL);
    }
    char longest[600];
    memset(longest, 'a', sizeof(longest));
    longest[sizeof(longest) - 1] = '\0';
    assert_int_equal(sxe_ws_client_connect(own, &ws, longest, "/", NULL, NULL, 0, NULL), -EINVAL);
    memcpy(longest + 260, ":80", 4); /* a host longer than a name */
    assert_int_equal(sxe_ws_client_connect(own, &ws, longest, "/", NULL, NULL, 0, NULL), -EINVAL);
    longest[260] = 'a';
    memset(longest, 'a', sizeof(longest) - 1);
    memcpy(longest, "ws://", 5); /* a host too long for the Host header */
    assert_int_equal(sxe_ws_client_connect(own, &ws, longest, NULL, NULL, NULL, 0, NULL), -EINVAL);
    longest[5 + 266] = '\0'; /* a Host that fits, with no room for its port */
    assert_int_equal(sxe_ws_client_connect(own, &ws, longest, NULL, NULL, NULL, 0, NULL), -EINVAL);
    memcpy(longest, "ws://a.test/", 12); /* a path too long */
    longest[12] = 'p';
    memset(longest + 13, 'p', sizeof(longest) - 14);
    assert_int_equal(sxe_ws_client_connect(own, &ws, longest, NULL, NULL, NULL, 0, NULL), -EINVAL);
    sxe_ws_client_destroy(own);
    /* A loop with the set's own timers and none for a resolver: a name cannot be resolved. */
    sxe_loop_t *small = NULL;
    for (uint32_t timers = 1; small == NULL && timers < 16; timers++) {
        assert_int_equal(sxe_loop_create(&small, &(struct sxe_loop_options){.timers = timers}), 0);
        if (sxe_ws_client_create(&own, small, &talks, NULL) < 0) {
            sxe_loop_destroy(small);
            small = NULL;
        }
    }
    assert_non_null(small);
    assert_int_equal(sxe_ws_client_connect(own, &ws, "a.test:80", "/", NULL, NULL, 0, NULL),
                     -ENOBUFS);
    sxe_ws_client_destroy(own);
    sxe_loop_destroy(small);
    sxe_ws_client_destroy(clients);
    sxe_ws_server_destroy(ws_server);
    sxe_http_server_destroy(http);
}

/* A set destroyed from a timer's callback, inside a turn: one socket open, one whose connection
 * the callback closed first (its close ends after the callback), one whose name is asked. */
static sxe_ws_client_t *doomed;
static sxe_ws_t *doomed_open;

static void destroy_from_a_callback(sxe_timer_t *timer, void *arg)
{
    (void)timer, (void)arg;
    sxe_conn_close(sxe_ws_conn(doomed_open));
    sxe_ws_client_destroy(doomed);
}

static void opened(sxe_ws_t *ws)
{
    ws_seen.opens++;
    (void)ws;
}

static void test_a_websocket_set_destroyed_in_a_turn(void **state)
{
    static const struct sxe_ws_handlers echoes = {.on_message = ws_echo};
    static const struct sxe_ws_handlers listens = {.on_open = opened, .on_close = ws_close};
    sxe_http_server_t *http;
    sxe_ws_server_t *ws_server;
    sxe_ws_t *ws;
    char address[64];

    (void)state;
    memset(&ws_seen, 0, sizeof(ws_seen));
    assert_int_equal(sxe_http_server_create(&http, loop, NULL), 0);
    assert_int_equal(sxe_ws_server_create(&ws_server, http, &echoes, NULL), 0);
    assert_int_equal(sxe_ws_server_route(ws_server, "/ws", NULL), 0);
    assert_int_equal(sxe_http_server_listen(http, "127.0.0.1:0"), 0);
    assert_int_equal(sxe_ws_client_create(&doomed, loop, &listens,
                                          &(struct sxe_ws_options){.resolver = resolver}),
                     0);
    snprintf(address, sizeof(address), "ws://127.0.0.1:%d/ws", sxe_http_server_port(http));
    assert_int_equal(
        sxe_ws_client_connect(doomed, &doomed_open, address, NULL, NULL, NULL, 0, NULL), 0);
    assert_int_equal(sxe_ws_client_connect(doomed, &ws, address, NULL, NULL, NULL, 0, NULL), 0);
    run_until(&ws_seen.opens, 2);
    assert_int_equal(
        sxe_ws_client_connect(doomed, &ws, "ws://silent.test/ws", NULL, NULL, NULL, 0, NULL), 0);
    sxe_timer_t timer;
    sxe_timer_init(&timer, destroy_from_a_callback, NULL);
    assert_int_equal(sxe_timer_start(loop, &timer, 0, 0), 0);
    run_until(&ws_seen.closes, 3); /* each told once, 1001 */
    assert_int_equal(ws_seen.code, SXE_WS_CLOSE_GOING_AWAY);
    for (int turn = 0; turn < 5; turn++) {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
    sxe_ws_server_destroy(ws_server);
    sxe_http_server_destroy(http);
}

static int group_setup(void **state)
{
    dns = dns_server_start(servers);
#ifdef SXE_TEST_TLS
    tls_test_group_setup(state);
#endif
    (void)state;
    return 0;
}

static int group_teardown(void **state)
{
    dns_server_stop(dns);
#ifdef SXE_TEST_TLS
    tls_test_group_teardown(state);
#endif
    (void)state;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_name_connects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names_that_fail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_connection_gone_while_asked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_address_is_tried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_silent_address_is_passed_over, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_edges, setup, teardown),
        cmocka_unit_test(test_each_invalid_use),
#ifdef SXE_TEST_TLS
        cmocka_unit_test_setup_teardown(test_tls_to_a_name, setup, teardown),
#endif
        cmocka_unit_test_setup_teardown(test_websockets_to_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_websocket_set_destroyed_in_a_turn, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
