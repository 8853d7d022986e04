/*
 * What tracing costs: the same loop with and without SXE_LOG_ENTER/TRACE/DUMP/LEAVE in its body.
 * Built in a release tree the two must cost the same, because the macros compile to nothing;
 * built in a debug tree (SXE_DEBUG) this shows what tracing costs when compiled in but disabled.
 * Rounds alternate between the two loops and the median of each is reported, or with --json every
 * round's value (bench/bench_json.h); --quick makes the iterations 2 million unless they are given.
 *
 * Usage: trace-cost [--json] [--quick] [iterations-per-round (20000000)] [rounds (9)]
 */
#include <stdio.h>
#include <stdlib.h>

#include <sxe/sxe.h>

#include "bench_json.h"
#include "bench_progress.h"

/* A small amount of real work per call: one step of an FNV-1a hash over four bytes. */
static __attribute__((noinline)) uint32_t step_plain(uint32_t hash, uint32_t word)
{
    for (int i = 0; i < 4; i++) {
        hash = (hash ^ ((word >> (i * 8)) & 0xff)) * 16777619u;
    }
    return hash;
}

static __attribute__((noinline)) uint32_t step_traced(uint32_t hash, uint32_t word)
{
    SXE_LOG_ENTER("(hash=%u, word=%u)", hash, word);
    for (int i = 0; i < 4; i++) {
        SXE_LOG_TRACE("byte %d", i);
        hash = (hash ^ ((word >> (i * 8)) & 0xff)) * 16777619u;
    }
    SXE_LOG_DUMP(&hash, sizeof(hash));
    SXE_LOG_LEAVE(" = %u", hash);
    return hash;
}

static double ns_per_call(uint32_t (*step)(uint32_t, uint32_t), unsigned iterations, uint32_t *sink)
{
    uint64_t start = sxe_clock_mono_ns();
    uint32_t hash = 2166136261u;

    for (unsigned i = 0; i < iterations; i++) {
        hash = step(hash, i);
    }
    *sink += hash;
    return (double)(sxe_clock_mono_ns() - start) / iterations;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

#define ROUNDS_MAX 101

#ifdef SXE_DEBUG
#define BUILD      "debug"
#define BUILD_TEXT "debug (SXE_DEBUG: tracing compiled in, level below TRACE)"
#else
#define BUILD      "release"
#define BUILD_TEXT "release (tracing compiled out)"
#endif

/* The ratio's rounds are each round's own (the two loops run one after the other in it). */
static int print_json(const double *plain, const double *traced, unsigned iterations,
                      unsigned rounds, uint32_t sink)
{
    double ratios[ROUNDS_MAX];
    struct bench_json json;

    for (unsigned round = 0; round < rounds; round++) {
        ratios[round] = traced[round] / plain[round];
    }
    bench_json_begin(&json, "trace-cost");
    bench_json_param_text(&json, "build", BUILD);
    bench_json_param(&json, "iterations", iterations);
    bench_json_param(&json, "rounds", rounds);
    bench_json_param(&json, "checksum", sink); /* used, so the loops cannot be left out */
    bench_json_row(&json, "ns/call", BENCH_LOWER, plain, rounds, "without tracing macros");
    bench_json_row(&json, "ns/call", BENCH_LOWER, traced, rounds, "with tracing macros");
    bench_json_row(&json, "x", BENCH_LOWER, ratios, rounds,
                   "with tracing macros / without, per round");
    return bench_json_end(&json);
}

int main(int argc, char **argv)
{
    bool json = bench_option(&argc, argv, "--json");
    bool quick = bench_option(&argc, argv, "--quick");
    unsigned iterations = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10)
                          : quick  ? 2000000u
                                   : 20000000u;
    unsigned rounds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 9;
    double plain[ROUNDS_MAX];
    double traced[ROUNDS_MAX];
    uint32_t sink = 0;
    struct bench_progress progress;

    if (iterations == 0 || rounds == 0 || rounds > ROUNDS_MAX) {
        fprintf(stderr, "usage: trace-cost [--json] [--quick] [iterations > 0] [rounds 1..%d]\n",
                ROUNDS_MAX);
        return 2;
    }
    bench_progress_begin(&progress, "trace-cost");
    for (unsigned round = 0; round < rounds; round++) {
        bench_progress(&progress, "round %u of %u (%u calls each way)", round + 1, rounds,
                       iterations);
        plain[round] = ns_per_call(step_plain, iterations, &sink);
        traced[round] = ns_per_call(step_traced, iterations, &sink);
    }
    bench_progress_end(&progress);
    if (json) {
        return print_json(plain, traced, iterations, rounds, sink);
    }
    qsort(plain, rounds, sizeof(double), compare_doubles);
    qsort(traced, rounds, sizeof(double), compare_doubles);

    printf("trace-cost: %s build, %u calls x %u rounds, medians\n", BUILD_TEXT, iterations, rounds);
    printf("  without tracing macros: %6.3f ns/call\n", plain[rounds / 2]);
    printf("  with tracing macros:    %6.3f ns/call\n", traced[rounds / 2]);
    printf("  ratio:                  %6.3f   (checksum %08x)\n",
           traced[rounds / 2] / plain[rounds / 2], sink);
    return 0;
}
