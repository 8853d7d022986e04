/*
 * Requests parsed per second: a typical 200-byte GET with 6 headers, parsed whole, over and
 * over, on one core. Median of rounds, or with --json every round's rate (bench/bench_json.h);
 * --quick makes the requests 500,000 a round unless they are given.
 * Usage: http-parse [--json] [--quick] [requests-per-round (5000000)] [rounds (5)]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sxe/sxe.h>
#include <sxe/http.h>

#include "bench_json.h"
#include "bench_progress.h"

/* 200 bytes, 6 header fields: what a browser's or an API client's request looks like. */
static const char request[] = "GET /api/v1/items?id=12345 HTTP/1.1\r\n"
                              "Host: www.example.com\r\n"
                              "User-Agent: sxe-bench/1.0\r\n"
                              "Accept: application/json, */*\r\n"
                              "Accept-Encoding: gzip, deflate\r\n"
                              "Connection: keep-alive\r\n"
                              "Cookie: session=abcdef01\r\n"
                              "\r\n";

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int print_json(const double *rates, unsigned rounds, unsigned count, unsigned headers,
                      unsigned long checksum)
{
    struct bench_json json;

    bench_json_begin(&json, "http-parse");
    bench_json_param(&json, "request_bytes", sizeof(request) - 1);
    bench_json_param(&json, "headers", headers);
    bench_json_param(&json, "requests", count);
    bench_json_param(&json, "rounds", rounds);
    bench_json_param(&json, "checksum", checksum); /* used, so the parsing cannot be left out */
    bench_json_row(&json, "requests/s", BENCH_HIGHER, rates, rounds,
                   "a %zu-byte GET with %u header fields, parsed whole", sizeof(request) - 1,
                   headers);
    return bench_json_end(&json);
}

int main(int argc, char **argv)
{
    bool json = bench_option(&argc, argv, "--json");
    bool quick = bench_option(&argc, argv, "--quick");
    unsigned count = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : quick ? 500000 : 5000000;
    unsigned rounds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 5;
    double rates[64];
    struct sxe_http_request_head parsed;
    struct sxe_http_parser parser;
    unsigned long checksum = 0;
    struct bench_progress progress;

    if (rounds == 0 || rounds > 64 || count == 0) {
        fprintf(stderr, "usage: http-parse [--json] [--quick] [requests > 0] [rounds 1..64]\n");
        return 2;
    }
    bench_progress_begin(&progress, "http-parse");
    for (unsigned round = 0; round < rounds; round++) {
        bench_progress(&progress, "round %u of %u (%u requests)", round + 1, rounds, count);
        uint64_t start = sxe_clock_mono_ns();
        for (unsigned i = 0; i < count; i++) {
            sxe_http_parser_init(&parser);
            int rc = sxe_http_parse_request_head(&parser, request, sizeof(request) - 1,
                                                 &sxe_http_default_limits, &parsed);
            checksum += (unsigned long)rc + parsed.header_count;
        }
        rates[round] = count * 1e9 / (double)(sxe_clock_mono_ns() - start);
    }
    bench_progress_end(&progress);
    if (json) {
        return print_json(rates, rounds, count, parsed.header_count, checksum);
    }
    qsort(rates, rounds, sizeof(double), compare_doubles);
    printf("http-parse: %zu-byte request, %u headers: %.2f million requests/s (median of %u; "
           "checksum %lu)\n",
           sizeof(request) - 1, parsed.header_count, rates[rounds / 2] / 1e6, rounds, checksum);
    return 0;
}
