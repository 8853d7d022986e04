/*
 * What tracing costs: the same loop with and without SXE_LOG_ENTER/TRACE/DUMP/LEAVE in its body.
 * Built in a release tree the two must cost the same, because the macros compile to nothing;
 * built in a debug tree (SXE_DEBUG) this shows what tracing costs when compiled in but disabled.
 * Rounds alternate between the two loops and the median of each is reported.
 *
 * Usage: trace-cost [iterations-per-round] [rounds]
 */
#include <stdio.h>
#include <stdlib.h>

#include <sxe/sxe.h>

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

int main(int argc, char **argv)
{
    unsigned iterations = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 20000000u;
    unsigned rounds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 9;
    double plain[ROUNDS_MAX];
    double traced[ROUNDS_MAX];
    uint32_t sink = 0;

    if (iterations == 0 || rounds == 0 || rounds > ROUNDS_MAX) {
        fprintf(stderr, "usage: trace-cost [iterations > 0] [rounds 1..%d]\n", ROUNDS_MAX);
        return 2;
    }
    for (unsigned round = 0; round < rounds; round++) {
        plain[round] = ns_per_call(step_plain, iterations, &sink);
        traced[round] = ns_per_call(step_traced, iterations, &sink);
    }
    qsort(plain, rounds, sizeof(double), compare_doubles);
    qsort(traced, rounds, sizeof(double), compare_doubles);

#ifdef SXE_DEBUG
    const char *build = "debug (SXE_DEBUG: tracing compiled in, level below TRACE)";
#else
    const char *build = "release (tracing compiled out)";
#endif
    printf("trace-cost: %s build, %u calls x %u rounds, medians\n", build, iterations, rounds);
    printf("  without tracing macros: %6.3f ns/call\n", plain[rounds / 2]);
    printf("  with tracing macros:    %6.3f ns/call\n", traced[rounds / 2]);
    printf("  ratio:                  %6.3f   (checksum %08x)\n",
           traced[rounds / 2] / plain[rounds / 2], sink);
    return 0;
}
