/*
 * What the micro-benchmarks print with --json, for bench/all to read: one document on stdout,
 *
 *     {"bench": "fiber", "params": {"count": 10000, ...},
 *      "rows": [{"name": "...", "unit": "ms", "better": "lower", "rounds": [0.45, 0.47, ...]},
 * ...], "once": [{the same fields, "rounds": [v]} for each figure measured once, if any]}
 *
 * a row per figure, with every round's value as measured, so the reader can take a median and a
 * spread itself. Rates are in units a second ("lookups/s"), ratios "x", as bench/map writes them.
 * Write it in order: bench_json_begin(), its params, its rows, its once figures, bench_json_end().
 * Names are quoted with sxe_json_string(), so any text is safe in them.
 *
 * bench/all runs each program as "PROGRAM --json" and, for a quick run, "PROGRAM --json --quick":
 * bench_option() takes those out of argv before the program reads its own arguments.
 */
#ifndef SXE_BENCH_BENCH_JSON_H
#define SXE_BENCH_BENCH_JSON_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <sxe/json.h>

enum bench_better { BENCH_LOWER, BENCH_HIGHER };

struct bench_json {
    enum { BENCH_JSON_PARAMS, BENCH_JSON_ROWS, BENCH_JSON_ONCE } section;
    unsigned items; /* written so far in the section: every one after the first takes a comma */
};

/*
 * Takes option ("--json", "--quick") out of argv, wherever it is, so the positional arguments
 * after it keep their places; returns whether it was there.
 */
static inline bool bench_option(int *argc, char **argv, const char *option)
{
    bool seen = false;
    int kept = 1;

    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], option) == 0) {
            seen = true;
        } else {
            argv[kept++] = argv[i];
        }
    }
    argv[kept] = NULL;
    *argc = kept;
    return seen;
}

/* The µs of CPU (user and system) the process has used so far: what a figure per operation is
 * measured with. */
static inline double bench_cpu_us(void)
{
    struct rusage usage;

    getrusage(RUSAGE_SELF, &usage);
    return (double)usage.ru_utime.tv_sec * 1e6 + (double)usage.ru_utime.tv_usec +
           (double)usage.ru_stime.tv_sec * 1e6 + (double)usage.ru_stime.tv_usec;
}

/* Writes n with a comma between each group of three digits ("10,000"), for names. */
#define BENCH_THOUSANDS_SIZE 27 /* 20 digits, 6 commas and the NUL */
static inline const char *bench_thousands(char out[BENCH_THOUSANDS_SIZE], uint64_t n)
{
    char digits[21];
    int len = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)n);
    size_t used = 0;

    for (int i = 0; i < len; i++) {
        if (i > 0 && (len - i) % 3 == 0) {
            out[used++] = ',';
        }
        out[used++] = digits[i];
    }
    out[used] = '\0';
    return out;
}

/* Names are this program's own short text: one too long to quote is a mistake in the program. */
static inline void bench_json_text(const char *text)
{
    char quoted[512];

    if (sxe_json_string(quoted, sizeof(quoted), text, strlen(text)) < 0) {
        fprintf(stderr, "bench_json: cannot quote a name of %zu bytes\n", strlen(text));
        abort();
    }
    fputs(quoted, stdout);
}

/* JSON has no infinity or NaN (a rate over no time, say): those become null. */
static inline void bench_json_number(double value)
{
    if (isfinite(value)) {
        printf("%.10g", value);
    } else {
        fputs("null", stdout);
    }
}

static inline void bench_json_begin(struct bench_json *json, const char *bench)
{
    *json = (struct bench_json){.section = BENCH_JSON_PARAMS};
    fputs("{\"bench\": ", stdout);
    bench_json_text(bench);
    fputs(", \"params\": {", stdout);
}

static inline void bench_json_param_name(struct bench_json *json, const char *name)
{
    if (json->section != BENCH_JSON_PARAMS) {
        fprintf(stderr, "bench_json: param %s after the rows\n", name);
        abort();
    }
    fputs(json->items++ > 0 ? ", " : "", stdout);
    bench_json_text(name);
    fputs(": ", stdout);
}

static inline void bench_json_param(struct bench_json *json, const char *name, uint64_t value)
{
    bench_json_param_name(json, name);
    printf("%llu", (unsigned long long)value);
}

static inline void bench_json_param_text(struct bench_json *json, const char *name,
                                         const char *value)
{
    bench_json_param_name(json, name);
    bench_json_text(value);
}

/* Closes the section being written and opens the next, up to the one named. */
static inline void bench_json_section(struct bench_json *json, int section)
{
    static const char *const opening[] = {"", "},\n \"rows\": [", "\n ],\n \"once\": ["};

    if ((int)json->section > section) {
        fprintf(stderr, "bench_json: a row after the figures measured once\n");
        abort();
    }
    while ((int)json->section < section) {
        json->section++;
        json->items = 0;
        fputs(opening[json->section], stdout);
    }
}

static inline void bench_json_vitem(struct bench_json *json, int section, const char *unit,
                                    enum bench_better better, const double *rounds, unsigned count,
                                    const char *format, va_list args)
{
    char name[256];

    vsnprintf(name, sizeof(name), format, args);
    bench_json_section(json, section);
    fputs(json->items++ > 0 ? ",\n  {\"name\": " : "\n  {\"name\": ", stdout);
    bench_json_text(name);
    fputs(", \"unit\": ", stdout);
    bench_json_text(unit);
    printf(", \"better\": \"%s\", \"rounds\": [", better == BENCH_LOWER ? "lower" : "higher");
    for (unsigned i = 0; i < count; i++) {
        fputs(i > 0 ? ", " : "", stdout);
        bench_json_number(rounds[i]);
    }
    fputs("]}", stdout);
}

/* A figure measured in every round: its name (a printf format), unit, which way is better. */
static inline __attribute__((format(printf, 6, 7))) void
bench_json_row(struct bench_json *json, const char *unit, enum bench_better better,
               const double *rounds, unsigned count, const char *format, ...)
{
    va_list args;

    va_start(args, format);
    bench_json_vitem(json, BENCH_JSON_ROWS, unit, better, rounds, count, format, args);
    va_end(args);
}

/* A figure measured once, after the rows. */
static inline __attribute__((format(printf, 5, 6))) void
bench_json_once(struct bench_json *json, const char *unit, enum bench_better better, double value,
                const char *format, ...)
{
    va_list args;

    va_start(args, format);
    bench_json_vitem(json, BENCH_JSON_ONCE, unit, better, &value, 1, format, args);
    va_end(args);
}

/* Closes the document; returns 0, or 1 (an exit status) when stdout could not take it all. */
static inline int bench_json_end(struct bench_json *json)
{
    bench_json_section(json, BENCH_JSON_ONCE);
    fputs(json->items > 0 ? "\n ]}\n" : "]}\n", stdout);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("bench_json: stdout");
        return 1;
    }
    return 0;
}

#endif
