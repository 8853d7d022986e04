/*
 * Requests parsed per second: a typical 200-byte GET with 6 headers, parsed whole, over and
 * over, on one core. Median of rounds.
 * Usage: http-parse [requests-per-round] [rounds]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sxe/sxe.h>
#include <sxe/http.h>

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

int main(int argc, char **argv)
{
    unsigned count = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 5000000;
    unsigned rounds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 5;
    double rates[64];
    struct sxe_http_request parsed;
    struct sxe_http_parser parser;
    unsigned long checksum = 0;

    if (rounds == 0 || rounds > 64 || count == 0) {
        fprintf(stderr, "usage: http-parse [requests > 0] [rounds 1..64]\n");
        return 2;
    }
    for (unsigned round = 0; round < rounds; round++) {
        uint64_t start = sxe_clock_mono_ns();
        for (unsigned i = 0; i < count; i++) {
            sxe_http_parser_init(&parser);
            int rc = sxe_http_parse_head(&parser, request, sizeof(request) - 1,
                                         &sxe_http_default_limits, &parsed);
            checksum += (unsigned long)rc + parsed.header_count;
        }
        rates[round] = count * 1e9 / (double)(sxe_clock_mono_ns() - start);
    }
    qsort(rates, rounds, sizeof(double), compare_doubles);
    printf("http-parse: %zu-byte request, %u headers: %.2f million requests/s (median of %u; "
           "checksum %lu)\n",
           sizeof(request) - 1, parsed.header_count, rates[rounds / 2] / 1e6, rounds, checksum);
    return 0;
}
