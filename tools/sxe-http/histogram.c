/*
 * sxe-http's latency histogram (histogram.h).
 */
#include "histogram.h"

void histogram_add(struct histogram *histogram, uint64_t value)
{
    unsigned bucket;

    if (value < 128) {
        bucket = (unsigned)value;
    } else {
        unsigned shift = 63 - (unsigned)__builtin_clzll(value) - 6;
        bucket = 128 + (shift - 1) * HISTOGRAM_SUB + (unsigned)((value >> shift) - HISTOGRAM_SUB);
    }
    histogram->counts[bucket < HISTOGRAM_BUCKETS ? bucket : HISTOGRAM_BUCKETS - 1]++;
    histogram->total++;
    if (value > histogram->max) {
        histogram->max = value;
    }
}

/* The upper edge of a bucket, so a percentile never understates. */
static uint64_t histogram_bucket_top(unsigned bucket)
{
    if (bucket < 128) {
        return bucket;
    }
    unsigned shift = (bucket - 128) / HISTOGRAM_SUB + 1;
    uint64_t base = (uint64_t)((bucket - 128) % HISTOGRAM_SUB + HISTOGRAM_SUB) << shift;
    return base + ((uint64_t)1 << shift) - 1;
}

uint64_t histogram_percentile(const struct histogram *histogram, double percentile)
{
    uint64_t rank = (uint64_t)(percentile / 100.0 * (double)histogram->total + 0.5);
    uint64_t seen = 0;

    if (histogram->total == 0) {
        return 0;
    }
    rank = rank == 0 ? 1 : rank;
    for (unsigned bucket = 0; bucket < HISTOGRAM_BUCKETS; bucket++) {
        seen += histogram->counts[bucket];
        if (seen >= rank) {
            uint64_t top = histogram_bucket_top(bucket);
            return top < histogram->max ? top : histogram->max;
        }
    }
    return histogram->max;
}
