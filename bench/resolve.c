/*
 * What a name costs (sxe/resolve.h): a cached answer (sxe_resolve_cached(), what the HTTP client
 * does for each connection it opens to an upstream given by name), against getaddrinfo() for the
 * same name, which a pool thread would run for every connection without a cache of TTLs, and
 * against the resolver's own way for a name it must ask (/etc/hosts through c-ares, the answer
 * then from the loop). The name is "localhost." (the trailing dot makes it a name to resolve,
 * not the shortcut for localhost), which every /etc/hosts has, so no server is asked;
 * getaddrinfo() gets "localhost", which it finds in the same file. Usage:
 *
 *     taskset -c 0 bench/resolve [--json] [--quick] [LOOKUPS (10000000)] [ROUNDS (5)]
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>

#include "sxe/clock.h"
#include "sxe/loop.h"
#include "sxe/resolve.h"

#include "bench_json.h"
#include "bench_progress.h"

#define NAME "localhost."

static sxe_loop_t *loop;
static int answered;

static void done(void *arg, int err, const struct sxe_resolved *answer)
{
    (void)arg, (void)answer;
    answered = err == 0 ? 1 : -1;
}

/* A resolver that keeps nothing (its answers expire after 1 ms), asked count times: µs from
 * each question to its answer, the waits for the expiry between them left out. */
static double asked(uint64_t count)
{
    sxe_resolver_t *resolver;
    struct sxe_resolver_options options = {.ttl_min_ms = 1, .ttl_max_ms = 1, .negative_ms = 1};
    uint64_t spent = 0;

    if (sxe_resolver_create(&resolver, loop, &options) < 0) {
        exit(1);
    }
    for (uint64_t i = 0; i < count; i++) {
        uint64_t start = sxe_clock_mono_ns();
        answered = 0;
        if (sxe_resolve(resolver, NAME, 80, done, NULL, NULL) < 0) {
            exit(1);
        }
        while (answered == 0) {
            (void)sxe_loop_run_once(loop, SXE_NS_PER_MSEC);
        }
        spent += sxe_clock_mono_ns() - start;
        if (answered < 0) {
            fprintf(stderr, "resolve: %s did not resolve\n", NAME);
            exit(1);
        }
        while (sxe_resolve_cached(resolver, NAME, 80, &(struct sxe_resolved){0}) == 0) {
            (void)sxe_loop_run_once(loop, 100 * 1000); /* until its 1 ms is over */
        }
    }
    sxe_resolver_destroy(resolver);
    return (double)spent / 1e3 / (double)count;
}

/* Cached lookups: ns each. */
static double cached(sxe_resolver_t *resolver, uint64_t count)
{
    struct sxe_resolved answer;
    uint64_t start = sxe_clock_mono_ns(), ports = 0;

    for (uint64_t i = 0; i < count; i++) {
        int rc = sxe_resolve_cached(resolver, NAME, (uint16_t)i, &answer);
        if (rc != 0) {
            fprintf(stderr, "resolve: %s is not cached: %s\n", NAME, sxe_strerror(rc));
            exit(1);
        }
        ports += answer.address[0].in.sin_port;
    }
    double ns = (double)(sxe_clock_mono_ns() - start) / (double)count;
    return ports == 0 ? -1 : ns;
}

/* getaddrinfo() for the name, without its dot (glibc finds "localhost." in no file): µs each. */
static double system_lookups(uint64_t count)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *found;
    uint64_t start = sxe_clock_mono_ns();

    for (uint64_t i = 0; i < count; i++) {
        if (getaddrinfo("localhost", "80", &hints, &found) != 0) {
            fprintf(stderr, "resolve: getaddrinfo(localhost) failed\n");
            exit(1);
        }
        freeaddrinfo(found);
    }
    return (double)(sxe_clock_mono_ns() - start) / 1e3 / (double)count;
}

int main(int argc, char **argv)
{
    bool json = bench_option(&argc, argv, "--json");
    bool quick = bench_option(&argc, argv, "--quick");
    uint64_t lookups = argc > 1 ? strtoull(argv[1], NULL, 10) : quick ? 1000000 : 10000000;
    unsigned rounds = argc > 2 ? (unsigned)atoi(argv[2]) : 5;
    uint64_t slow = lookups / 10000 > 0 ? lookups / 10000 : 1; /* 1,000 getaddrinfo() */
    uint64_t questions = slow / 10 > 0 ? slow / 10 : 1;        /* 100 questions: 1 ms each */
    double hit[64], system[64], ask[64];
    struct bench_progress progress;
    sxe_resolver_t *resolver;
    /* kept an hour, /etc/hosts's answer too: the rounds of asked() run the loop's clock on */
    struct sxe_resolver_options kept = {.ttl_min_ms = 3600 * 1000};

    if (lookups == 0 || rounds == 0 || rounds > 64 || sxe_loop_create(&loop, NULL) < 0 ||
        sxe_resolver_create(&resolver, loop, &kept) < 0) {
        fprintf(stderr, "usage: resolve [--json] [--quick] [LOOKUPS] [ROUNDS (at most 64)]\n");
        return 1;
    }
    answered = 0;
    if (sxe_resolve(resolver, NAME, 80, done, NULL, NULL) < 0) {
        return 1;
    }
    while (answered == 0) {
        (void)sxe_loop_run_once(loop, SXE_NS_PER_MSEC);
    }
    bench_progress_begin(&progress, "resolve");
    for (unsigned r = 0; r < rounds; r++) {
        bench_progress(&progress, "round %u of %u: %llu cached lookups", r + 1, rounds,
                       (unsigned long long)lookups);
        hit[r] = cached(resolver, lookups);
        bench_progress(&progress, "round %u of %u: %llu getaddrinfo() and resolver questions",
                       r + 1, rounds, (unsigned long long)slow);
        system[r] = system_lookups(slow);
        ask[r] = asked(questions);
    }
    bench_progress_end(&progress);
    sxe_resolver_destroy(resolver);
    sxe_loop_destroy(loop);
    if (!json) {
        for (unsigned r = 0; r < rounds; r++) {
            printf("round %u: cached %.1f ns, getaddrinfo %.2f us, asked %.2f us\n", r + 1, hit[r],
                   system[r], ask[r]);
        }
        return 0;
    }
    struct bench_json out;
    bench_json_begin(&out, "resolve");
    bench_json_param_text(&out, "name", NAME);
    bench_json_param(&out, "lookups", lookups);
    bench_json_param(&out, "getaddrinfo", slow);
    bench_json_param(&out, "asked", questions);
    bench_json_row(&out, "ns", BENCH_LOWER, hit, rounds, "a cached name (sxe_resolve_cached)");
    bench_json_row(&out, "us", BENCH_LOWER, system, rounds, "getaddrinfo(), each call");
    bench_json_row(&out, "us", BENCH_LOWER, ask, rounds,
                   "the resolver asking (c-ares, /etc/hosts), answer from the loop");
    return bench_json_end(&out);
}
