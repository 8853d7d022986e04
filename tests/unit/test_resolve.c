/*
 * Names resolved on the loop, against the tests' own DNS server (dns_server.c): answers of each
 * kind, the cache and its TTL, NXDOMAIN remembered, a silent server, a truncated answer taken again
 * over TCP, an answer for another name, 100 addresses, SERVFAIL, a name that moves, callers that
 * share one question, cancel and destroy (from a callback too), names that are not names,
 * /etc/hosts before the servers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dns_server.h"
#include "loop.h"
#include "sxe/clock.h"
#include "sxe/loop.h"
#include "sxe/resolve.h"
#include "sxe_test.h"

static struct dns_server *dns;
static char servers[32];
static sxe_loop_t *loop;
static sxe_resolver_t *resolver;

struct got {
    int calls;
    int err;
    int order; /* when it was called, among every call of the test */
    struct sxe_resolved answer;
};

static int called; /* calls of got_it() so far */

static void got_it(void *arg, int err, const struct sxe_resolved *answer)
{
    struct got *got = arg;

    got->calls++;
    got->order = ++called;
    got->err = err;
    if (answer != NULL) {
        got->answer = *answer;
    } else {
        assert_int_not_equal(err, 0);
    }
}

static void run_until(const int *calls, int want)
{
    for (int i = 0; i < 400 && *calls < want; i++) {
        (void)sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC);
    }
    assert_int_equal(*calls, want);
}

static void make(const struct sxe_resolver_options *extra)
{
    struct sxe_resolver_options options = extra != NULL ? *extra : (struct sxe_resolver_options){0};

    options.servers = servers;
    options.timeout_ms = options.timeout_ms ? options.timeout_ms : 200;
    options.tries = options.tries ? options.tries : 1;
    assert_int_equal(sxe_resolver_create(&resolver, loop, &options), 0);
}

static int setup(void **state)
{
    (void)state;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    make(NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_resolver_destroy(resolver);
    sxe_loop_destroy(loop);
    return 0;
}

/* Resolves name with port, waits, and gives the answer's error. */
static int ask(const char *name, uint16_t port, struct got *got)
{
    *got = (struct got){0};
    assert_int_equal(sxe_resolve(resolver, name, port, got_it, got, NULL), 0);
    assert_int_equal(got->calls, 0); /* never from inside the call */
    run_until(&got->calls, 1);
    return got->err;
}

static const char *text_of(const union sxe_resolved_address *address, char *text)
{
    const void *ip = address->sa.sa_family == AF_INET6 ? (const void *)&address->in6.sin6_addr
                                                       : (const void *)&address->in.sin_addr;
    return inet_ntop(address->sa.sa_family, ip, text, INET6_ADDRSTRLEN);
}

static void test_numeric_and_localhost(void **state)
{
    struct sxe_resolved answer;
    struct got got;
    char text[INET6_ADDRSTRLEN];

    (void)state;
    assert_int_equal(sxe_resolve_cached(resolver, "10.1.2.3", 80, &answer), 0);
    assert_int_equal(answer.count, 1);
    assert_string_equal(text_of(&answer.address[0], text), "10.1.2.3");
    assert_int_equal(ntohs(answer.address[0].in.sin_port), 80);
    assert_int_equal(sxe_resolved_len(&answer.address[0]), sizeof(struct sockaddr_in));
    assert_int_equal(sxe_resolve_cached(resolver, "::1", 443, &answer), 0);
    assert_int_equal(answer.address[0].sa.sa_family, AF_INET6);
    assert_int_equal(ntohs(answer.address[0].in6.sin6_port), 443);
    assert_int_equal(sxe_resolve_cached(resolver, "LocalHost", 1, &answer), 0);
    assert_string_equal(text_of(&answer.address[0], text), "127.0.0.1");
    assert_int_equal(ask("192.168.0.1", 9, &got), 0);
    assert_string_equal(text_of(&got.answer.address[0], text), "192.168.0.1");
    assert_int_equal(dns_server_asked(dns, ""), 0);
}

static void test_a_name_is_asked_once_then_cached(void **state)
{
    struct sxe_resolved answer;
    struct sxe_resolver_stats stats;
    struct got got;
    char text[INET6_ADDRSTRLEN];

    (void)state;
    assert_int_equal(sxe_resolve_cached(resolver, "a.test", 80, &answer), -EAGAIN);
    assert_int_equal(ask("A.Test.", 8080, &got), 0);
    assert_int_equal(got.answer.count, 1);
    assert_string_equal(text_of(&got.answer.address[0], text), "127.0.0.1");
    assert_int_equal(ntohs(got.answer.address[0].in.sin_port), 8080);
    unsigned asked = dns_server_asked(dns, "a.test");
    assert_true(asked >= 1);
    assert_int_equal(sxe_resolve_cached(resolver, "a.test", 81, &answer), 0);
    assert_int_equal(ntohs(answer.address[0].in.sin_port), 81);
    assert_int_equal(ask("a.test", 82, &got), 0);
    assert_int_equal(dns_server_asked(dns, "a.test"), asked);
    sxe_resolver_stats(resolver, &stats);
    assert_int_equal(stats.asked, 1);
    assert_int_equal(stats.answered, 1);
    assert_int_equal(stats.hits, 2);
    assert_int_equal(stats.waiting, 0);
}

static void test_families(void **state)
{
    struct got got;
    bool four = false, six = false;

    (void)state;
    assert_int_equal(ask("both.test", 1, &got), 0);
    assert_int_equal(got.answer.count, 2);
    for (unsigned i = 0; i < 2; i++) {
        four |= got.answer.address[i].sa.sa_family == AF_INET;
        six |= got.answer.address[i].sa.sa_family == AF_INET6;
    }
    assert_true(four && six);
    assert_int_equal(ask("six.test", 1, &got), 0);
    assert_int_equal(got.answer.address[0].sa.sa_family, AF_INET6);
    sxe_resolver_destroy(resolver);
    make(&(struct sxe_resolver_options){.family = AF_INET});
    assert_int_equal(ask("six.test", 1, &got), -ENOENT);
    assert_int_equal(ask("both.test", 1, &got), 0);
    assert_int_equal(got.answer.count, 1);
    assert_int_equal(got.answer.address[0].sa.sa_family, AF_INET);
}

static void test_failures(void **state)
{
    struct sxe_resolved answer;
    struct got got;
    char text[INET6_ADDRSTRLEN];

    (void)state;
    assert_int_equal(ask("nx.test", 1, &got), -ENOENT);
    unsigned asked = dns_server_asked(dns, "nx.test");
    assert_int_equal(sxe_resolve_cached(resolver, "nx.test", 1, &answer), -ENOENT); /* kept */
    assert_int_equal(ask("nx.test", 1, &got), -ENOENT);
    assert_int_equal(dns_server_asked(dns, "nx.test"), asked);
    assert_int_equal(ask("fail.test", 1, &got), -EPROTO); /* SERVFAIL */
    assert_int_equal(ask("silent.test", 1, &got), -ETIMEDOUT);
    assert_int_equal(ask("wrong.test", 1, &got), -ETIMEDOUT);
    assert_int_equal(ask("trunc.test", 1, &got), 0); /* again over TCP */
    assert_string_equal(text_of(&got.answer.address[0], text), "127.0.0.3");
    assert_int_equal(ask("many.test", 1, &got), 0);
    assert_int_equal(got.answer.count, SXE_RESOLVE_ADDRESSES);
}

static void test_a_moving_name_is_followed(void **state)
{
    struct sxe_resolved answer;
    struct got got;
    char text[INET6_ADDRSTRLEN];

    (void)state;
    sxe_resolver_destroy(resolver);
    make(&(struct sxe_resolver_options){.ttl_min_ms = 1});
    dns_server_move(dns, 1);
    assert_int_equal(ask("moving.test", 1, &got), 0);
    assert_string_equal(text_of(&got.answer.address[0], text), "10.9.0.1");
    dns_server_move(dns, 2);
    assert_int_equal(sxe_resolve_cached(resolver, "moving.test", 1, &answer), 0);
    assert_string_equal(text_of(&answer.address[0], text), "10.9.0.1"); /* within its TTL */
    nanosleep(&(struct timespec){.tv_sec = 1, .tv_nsec = 100 * 1000 * 1000}, NULL);
    (void)sxe_loop_run_once(loop, 0); /* the loop's clock moves on */
    assert_int_equal(sxe_resolve_cached(resolver, "moving.test", 1, &answer), -EAGAIN);
    assert_int_equal(ask("moving.test", 1, &got), 0);
    assert_string_equal(text_of(&got.answer.address[0], text), "10.9.0.2");
}

static void test_callers_share_a_question(void **state)
{
    struct got got[8] = {0};
    sxe_resolve_query_t *query[8];
    int calls = 0;

    (void)state;
    for (int i = 0; i < 8; i++) {
        assert_int_equal(
            sxe_resolve(resolver, "both.test", (uint16_t)i, got_it, &got[i], &query[i]), 0);
    }
    sxe_resolve_cancel(query[3]);
    for (int i = 0; i < 400 && calls < 7; i++) {
        (void)sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC);
        calls = 0;
        for (int j = 0; j < 8; j++) {
            calls += got[j].calls;
        }
    }
    for (int i = 0; i < 8; i++) {
        assert_int_equal(got[i].calls, i == 3 ? 0 : 1);
        assert_int_equal(got[i].err, 0);
        assert_true(i < 1 || i == 3 || got[i].order > got[i == 4 ? 2 : i - 1].order); /* FIFO */
    }
    assert_int_equal(ntohs(got[7].answer.address[0].in.sin_port), 7);
    struct sxe_resolver_stats stats;
    sxe_resolver_stats(resolver, &stats);
    assert_int_equal(stats.asked, 1);
    assert_int_equal(stats.waiting, 0);
}

/* A caller still to hear an answer, when the answer's time ends and its name is asked again. */
static void test_an_answer_out_of_time_with_callers_still_to_hear_it(void **state)
{
    struct got first = {0}, late = {0}, again = {0}, other = {0};
    struct sxe_resolver_stats stats;

    (void)state;
    sxe_resolver_destroy(resolver);
    make(&(struct sxe_resolver_options){.cache = 2, .ttl_min_ms = 1, .ttl_max_ms = 1});
    assert_int_equal(ask("a.test", 1, &first), 0);
    assert_int_equal(sxe_resolve(resolver, "a.test", 2, got_it, &late, NULL), 0); /* ready */
    loop->now += 10 * SXE_NS_PER_MSEC; /* its 1 ms ends before it is heard (white-box) */
    assert_int_equal(sxe_resolve(resolver, "a.test", 3, got_it, &again, NULL), 0); /* asked */
    run_until(&again.calls, 1);
    assert_int_equal(late.calls, 1);
    assert_int_equal(late.err, 0);
    assert_int_equal(late.answer.count, 1); /* the old answer, whole */
    assert_int_equal(ntohs(late.answer.address[0].in.sin_port), 2);
    assert_int_equal(again.err, 0);
    for (int i = 0; i < 3; i++) { /* every place in the cache is free again */
        static const char *const names[] = {"six.test", "both.test", "many.test"};
        assert_int_equal(ask(names[i], 1, &other), 0);
    }
    sxe_resolver_stats(resolver, &stats);
    assert_int_equal(stats.waiting, 0);
}

static void destroy_from_callback(void *arg, int err, const struct sxe_resolved *answer)
{
    got_it(arg, err, answer);
    sxe_resolver_destroy(resolver);
    resolver = NULL;
}

static void test_destroy_ends_every_query(void **state)
{
    struct got slow = {0}, cached = {0}, first = {0};

    (void)state;
    assert_int_equal(sxe_resolve(resolver, "silent.test", 1, got_it, &slow, NULL), 0);
    assert_int_equal(sxe_resolve(resolver, "10.0.0.1", 1, got_it, &cached, NULL), 0);
    sxe_resolver_destroy(resolver);
    assert_int_equal(slow.calls, 1);
    assert_int_equal(slow.err, -ECANCELED);
    assert_int_equal(cached.err, -ECANCELED);
    make(NULL);
    slow = (struct got){0};
    assert_int_equal(sxe_resolve(resolver, "10.0.0.1", 1, destroy_from_callback, &first, NULL), 0);
    assert_int_equal(sxe_resolve(resolver, "silent.test", 1, got_it, &slow, NULL), 0);
    run_until(&first.calls, 1);
    assert_int_equal(first.err, 0);
    assert_null(resolver);
    assert_int_equal(slow.calls, 1);
    assert_int_equal(slow.err, -ECANCELED);
    make(NULL); /* for teardown */
}

static void test_bad_names_and_limits(void **state)
{
    static const char *const bad[] = {"",    ".",   "a..b",   "-a.b", "a-.b",
                                      "a b", "a/b", "é.test", "a..",  "ok.t.."};
    struct sxe_resolved answer;
    char long_label[80], long_name[300];
    struct got got[3] = {0};

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(sxe_resolve_cached(resolver, bad[i], 1, &answer), -EINVAL);
        assert_int_equal(sxe_resolve(resolver, bad[i], 1, got_it, &got[0], NULL), -EINVAL);
    }
    memset(long_label, 'a', 64);
    strcpy(long_label + 64, ".test");
    assert_int_equal(sxe_resolve_cached(resolver, long_label, 1, &answer), -EINVAL);
    for (int i = 0; i < 127; i++) {
        memcpy(long_name + 2 * i, "a.", 2);
    }
    long_name[254] = '\0'; /* 254 bytes, without a trailing dot */
    long_name[253] = 'b';
    assert_int_equal(sxe_resolve_cached(resolver, long_name, 1, &answer), -EINVAL);
    long_name[253] = '\0';
    long_name[252] = 'b'; /* 253: the most */
    assert_int_equal(sxe_resolve_cached(resolver, long_name, 1, &answer), -EAGAIN);
    sxe_resolver_destroy(resolver);
    make(&(struct sxe_resolver_options){.queries = 2, .cache = 1});
    assert_int_equal(sxe_resolve(resolver, "silent.test", 1, got_it, &got[0], NULL), 0);
    assert_int_equal(sxe_resolve(resolver, "a.test", 1, got_it, &got[1], NULL), -ENOBUFS);
    assert_int_equal(sxe_resolve(resolver, "silent.test", 1, got_it, &got[1], NULL), 0);
    assert_int_equal(sxe_resolve(resolver, "silent.test", 1, got_it, &got[2], NULL), -ENOBUFS);
    run_until(&got[1].calls, 1);
    assert_int_equal(got[0].err, -ETIMEDOUT);
}

static void invalid_family(void)
{
    sxe_resolver_t *other;

    assert_int_equal(
        sxe_resolver_create(&other, loop, &(struct sxe_resolver_options){.family = 99}), -EINVAL);
}

static void invalid_ttls(void)
{
    sxe_resolver_t *other;
    struct sxe_resolver_options options = {.ttl_min_ms = 10, .ttl_max_ms = 9};

    assert_int_equal(sxe_resolver_create(&other, loop, &options), -EINVAL);
}

static void invalid_done(void)
{
    assert_int_equal(sxe_resolve(resolver, "a.test", 1, NULL, NULL, NULL), -EINVAL);
}

static void test_bad_options(void **state)
{
    static const struct sxe_test_invalid_use uses[] = {
        {"a family of neither", invalid_family, "family"},
        {"a shortest TTL past the longest", invalid_ttls, "ttl_min_ms <= options->ttl_max_ms"},
        {"a query without done", invalid_done, "done != NULL"},
    };
    sxe_resolver_t *other;

    (void)state;
    assert_int_equal(
        sxe_resolver_create(&other, loop, &(struct sxe_resolver_options){.servers = "x"}), -EINVAL);
    sxe_loop_t *small; /* one timer: a resolver holds two */
    assert_int_equal(sxe_loop_create(&small, &(struct sxe_loop_options){.timers = 1}), 0);
    assert_int_equal(sxe_resolver_create(&other, small, NULL), -ENOBUFS);
    sxe_loop_destroy(small);
    sxe_test_invalid_uses(uses, sizeof(uses) / sizeof(uses[0]));
}

static void test_hosts_file_first(void **state)
{
    char name[64], ip[64], text[INET6_ADDRSTRLEN];
    struct got got;

    (void)state;
    if (!dns_hosts_name(name, ip)) {
        skip();
    }
    assert_int_equal(ask(name, 1, &got), 0);
    assert_string_equal(text_of(&got.answer.address[0], text), ip);
    assert_int_equal(dns_server_asked(dns, name), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_numeric_and_localhost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_name_is_asked_once_then_cached, setup, teardown),
        cmocka_unit_test_setup_teardown(test_families, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_moving_name_is_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callers_share_a_question, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_answer_out_of_time_with_callers_still_to_hear_it,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_ends_every_query, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_names_and_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hosts_file_first, setup, teardown),
    };

    dns = dns_server_start(servers);
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dns_server_stop(dns);
    return failed;
}
