/*
 * sxe-http's latency histogram: exact below 128 ns, then 64 sub-buckets per power of two (under
 * 1.6% wide), so percentiles never understate by more than that.
 */
#ifndef SXE_HTTP_HISTOGRAM_H
#define SXE_HTTP_HISTOGRAM_H

#include <stdint.h>

#define HISTOGRAM_SUB     64
#define HISTOGRAM_BUCKETS (128 + 57 * HISTOGRAM_SUB)

struct histogram {
    uint64_t counts[HISTOGRAM_BUCKETS];
    uint64_t total;
    uint64_t max;
};

void histogram_add(struct histogram *histogram, uint64_t value);

/* The value at percentile (0 to 100): the top of its bucket, or the maximum if lower. */
uint64_t histogram_percentile(const struct histogram *histogram, double percentile);

#endif
