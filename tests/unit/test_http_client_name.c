/*
 * The HTTP client with an upstream given by name, resolved by the tests' DNS server
 * (dns_server.c): a name's answer is asked once and its connections reused; a name that does
 * not exist, or that no server answers for, fails its calls with the resolver's error; a name
 * whose first address refuses (::1, where nothing listens) is reached at its next (127.0.0.1);
 * addresses that are not names are refused at create; URLs, with their authority as the Host.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "dns_server.h"
#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/http_client.h"
#include "sxe/resolve.h"
#include "sxe_test.h"

static struct dns_server *dns;
static char servers[32];
static sxe_loop_t *loop;
static sxe_conn_t *listener;
static sxe_resolver_t *resolver;
static int port;

static char last_head[1024]; /* the last request head the upstream read */

static size_t upstream(sxe_conn_t *conn, const char *data, size_t len)
{
    if (memmem(data, len, "\r\n\r\n", 4) != NULL) {
        snprintf(last_head, sizeof(last_head), "%.*s", (int)len, data);
        static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        (void)sxe_conn_write(conn, reply, strlen(reply));
    }
    return len;
}

static const struct sxe_conn_handlers upstream_handlers = {.on_read = upstream};

static int setup(void **state)
{
    struct sxe_loop_options options = {.connections = 16, .timers = 32};
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in bound;
    socklen_t bound_len = sizeof(bound);

    (void)state;
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    assert_int_equal(sxe_conn_listen(loop, &listener, (struct sockaddr *)&any, sizeof(any), NULL,
                                     &upstream_handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&bound, &bound_len), 0);
    port = ntohs(bound.sin_port);
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

static void done(sxe_http_call_t *call, int err, const struct sxe_http_response_head *response,
                 const char *body, size_t body_len, void *arg)
{
    (void)call, (void)body;
    *(int *)arg = err == 0 ? response->status * 1000 + (int)body_len : err;
}

/* A client of address fetches "/" n times at once; @return the last result. */
static int fetch_at(const char *address, int n, struct sxe_http_client_stats *stats)
{
    sxe_http_client_t *client;
    struct sxe_http_client_options options = {.resolver = resolver, .timeout = SXE_NS_PER_SEC};
    int results[8], ended = 0;

    assert_int_equal(sxe_http_client_create(&client, loop, address, &options), 0);
    for (int i = 0; i < n; i++) {
        results[i] = 1;
        assert_int_equal(sxe_http_client_fetch(client,
                                               &(struct sxe_http_client_request){.target = "/"},
                                               done, &results[i], NULL),
                         0);
    }
    for (int turn = 0; turn < 300 && ended < n; turn++) {
        (void)sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC);
        ended = 0;
        for (int i = 0; i < n; i++) {
            ended += results[i] != 1;
        }
    }
    assert_int_equal(ended, n);
    sxe_http_client_stats(client, stats);
    sxe_http_client_destroy(client);
    for (int i = 1; i < n; i++) {
        assert_int_equal(results[i], results[0]);
    }
    return results[0];
}

/* A client of name:port fetches "/" n times at once; @return the last result. */
static int fetch(const char *name, int n, struct sxe_http_client_stats *stats)
{
    char address[300];

    snprintf(address, sizeof(address), "%s:%d", name, port);
    return fetch_at(address, n, stats);
}

static void test_a_name_is_resolved_once(void **state)
{
    struct sxe_http_client_stats stats;
    struct sxe_resolver_stats asked;

    (void)state;
    assert_int_equal(fetch("a.test", 4, &stats), 200002);
    assert_int_equal(stats.requests, 4);
    assert_int_equal(fetch("A.TEST", 2, &stats), 200002);
    sxe_resolver_stats(resolver, &asked);
    assert_int_equal(asked.asked, 1);
}

static void test_names_that_fail(void **state)
{
    struct sxe_http_client_stats stats;
    char longest[254];

    (void)state;
    for (int i = 0; i < 253; i++) {
        longest[i] = i % 64 == 63 ? '.' : 'n'; /* four labels: 63, 63, 63 and 61 bytes */
    }
    longest[253] = '\0';
    assert_int_equal(fetch(longest, 1, &stats), -ENOENT); /* asked, and not there */
    assert_int_equal(fetch("nx.test", 3, &stats), -ENOENT);
    assert_int_equal(stats.failed, 3);
    assert_int_equal(stats.connects, 0);
    assert_int_equal(fetch("silent.test", 1, &stats), -ETIMEDOUT);
}

static void test_localhost_in_capitals(void **state)
{
    struct sxe_http_client_stats stats;

    (void)state;
    assert_int_equal(fetch("LocalHost", 1, &stats), 200002); /* 127.0.0.1, never asked */
}

static void test_the_next_address_when_one_refuses(void **state)
{
    struct sxe_http_client_stats stats;

    (void)state;
    assert_int_equal(fetch("both.test", 1, &stats), 200002); /* ::1 first: nothing listens */
    assert_int_equal(stats.connects, 2);
}

static void test_not_names(void **state)
{
    static const char *const bad[] = {"a.test",     "a..test:80", "a.test:99999", "a.test:http",
                                      "-a.test:80", "a test:80",  "[a.test]:80",  "a.test:0",
                                      "http://:80", "http://",    "a..:80"};
    sxe_http_client_t *client;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(sxe_http_client_create(&client, loop, bad[i], NULL), -EINVAL);
    }
    /* Without a resolver given, the client makes its own (resolv.conf's servers: not asked). */
    assert_int_equal(sxe_http_client_create(&client, loop, "example.invalid:80", NULL), 0);
    sxe_http_client_destroy(client);
}

static void test_urls(void **state)
{
    struct sxe_http_client_stats stats;
    char url[80], host[80];
    sxe_http_client_t *client;

    (void)state;
    snprintf(url, sizeof(url), "http://a.test:%d", port);
    assert_int_equal(fetch_at(url, 1, &stats), 200002);
    snprintf(host, sizeof(host), "\r\nHost: a.test:%d\r\n", port);
    assert_non_null(strstr(last_head, host)); /* the URL's authority */
    snprintf(url, sizeof(url), "HTTP://127.0.0.1:%d/", port);
    assert_int_equal(fetch_at(url, 1, &stats), 200002);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", port); /* a TLS context of its own */
    assert_true(fetch_at(url, 1, &stats) < 0);                /* the upstream speaks no TLS */
    assert_int_equal(stats.connects, 1);
    assert_int_equal(sxe_http_client_create(&client, loop, "http://a.test/path", NULL), -EINVAL);
    assert_int_equal(sxe_http_client_create(&client, loop, "http://", NULL), -EINVAL);
    assert_int_equal(sxe_http_client_create(&client, loop, "http://[::1]", NULL), 0);
    sxe_http_client_destroy(client);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_name_is_resolved_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names_that_fail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_next_address_when_one_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_localhost_in_capitals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_urls, setup, teardown),
    };

    dns = dns_server_start(servers);
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dns_server_stop(dns);
    return failed;
}
