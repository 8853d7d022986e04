/*
 * What the micro-benchmarks print with --json, for bench/all to read: one document on stdout,
 *
 *     {"bench": "fiber", "params": {"count": 10000, ...},
 *      "rows": [{"name": "...", "unit": "ms", "better": "lower", "rounds": [0.45, 0.47, ...]},
 * ...]}
 *
 * a row per figure, with every round's value as measured, so the reader can take a median and a
 * spread itself. Write it in order: bench_json_begin(), its params, its rows, bench_json_end().
 * Names are quoted with sxe_json_string(), so any text is safe in them.
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

#include <sxe/json.h>

enum bench_better { BENCH_LOWER, BENCH_HIGHER };

struct bench_json {
    unsigned params; /* written so far: every one after the first takes a comma */
    unsigned rows;
};

/*
 * Takes "--json" out of argv, wherever it is, so the positional arguments after it keep their
 * places; returns whether it was there.
 */
static inline bool bench_json_option(int *argc, char **argv)
{
    bool seen = false;
    int kept = 1;

    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            seen = true;
        } else {
            argv[kept++] = argv[i];
        }
    }
    argv[kept] = NULL;
    *argc = kept;
    return seen;
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
    *json = (struct bench_json){0};
    fputs("{\"bench\": ", stdout);
    bench_json_text(bench);
    fputs(", \"params\": {", stdout);
}

static inline void bench_json_param_name(struct bench_json *json, const char *name)
{
    if (json->rows > 0) {
        fprintf(stderr, "bench_json: param %s after the rows\n", name);
        abort();
    }
    fputs(json->params++ > 0 ? ", " : "", stdout);
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

/* One figure: its name (a printf format), its unit, which way is better, and each round's value. */
static inline __attribute__((format(printf, 6, 7))) void
bench_json_row(struct bench_json *json, const char *unit, enum bench_better better,
               const double *rounds, unsigned count, const char *format, ...)
{
    char name[256];
    va_list args;

    va_start(args, format);
    vsnprintf(name, sizeof(name), format, args);
    va_end(args);
    fputs(json->rows++ == 0 ? "},\n \"rows\": [\n  {\"name\": " : ",\n  {\"name\": ", stdout);
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

/* Closes the document; returns 0, or 1 (an exit status) when stdout could not take it all. */
static inline int bench_json_end(struct bench_json *json)
{
    fputs(json->rows == 0 ? "}, \"rows\": []}\n" : "\n ]}\n", stdout);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("bench_json: stdout");
        return 1;
    }
    return 0;
}

#endif
