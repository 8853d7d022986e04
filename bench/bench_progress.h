/*
 * Progress lines for the micro-benchmarks, on stderr (stdout is the result's): what runs and how
 * far along, at most one line every BENCH_PROGRESS_NS, so a caller may report as often as it likes,
 * even from inside a measured loop every many thousand steps, for the cost of reading the clock.
 */
#ifndef SXE_BENCH_BENCH_PROGRESS_H
#define SXE_BENCH_BENCH_PROGRESS_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include <sxe/clock.h>

#define BENCH_PROGRESS_NS 2000000000ULL

struct bench_progress {
    const char *bench;
    uint64_t start_ns;
    uint64_t last_ns; /* of the last line; 0 before the first */
};

static inline void bench_progress_begin(struct bench_progress *progress, const char *bench)
{
    progress->bench = bench;
    progress->start_ns = sxe_clock_mono_ns();
    progress->last_ns = 0;
}

/* Prints "bench: " and the formatted text, if it is the first line or the last was long enough ago.
 */
static inline __attribute__((format(printf, 2, 3))) void
bench_progress(struct bench_progress *progress, const char *format, ...)
{
    uint64_t now = sxe_clock_mono_ns();
    va_list args;

    if (progress->last_ns != 0 && now - progress->last_ns < BENCH_PROGRESS_NS) {
        return;
    }
    progress->last_ns = now;
    fprintf(stderr, "%s: ", progress->bench);
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fputc('\n', stderr);
}

static inline void bench_progress_end(struct bench_progress *progress)
{
    fprintf(stderr, "%s: done in %.1f s\n", progress->bench,
            (double)(sxe_clock_mono_ns() - progress->start_ns) / 1e9);
}

#endif
