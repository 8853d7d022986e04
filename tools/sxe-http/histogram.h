/*
 * sxe-http's latency histogram, laid out as HdrHistogram lays out one with 2 significant figures,
 * in nanoseconds from 1 to an hour: exact below 256 ns, then 128 sub-buckets per power of two, so
 * a percentile is never more than 0.8% (1/128) above the true value, and never below it. The same
 * layout lets histogram_encode() write HdrHistogram's own compressed form, which its tools read.
 */
#ifndef SXE_HTTP_HISTOGRAM_H
#define SXE_HTTP_HISTOGRAM_H

#include <stddef.h>
#include <stdint.h>

#define HISTOGRAM_SIGNIFICANT 2
#define HISTOGRAM_HIGHEST     3600000000000ULL /* an hour in ns; larger values count as it */
#define HISTOGRAM_HALF_BITS   7                /* 128 sub-buckets in each half */
#define HISTOGRAM_BUCKETS     35               /* powers of two that reach HISTOGRAM_HIGHEST */
#define HISTOGRAM_COUNTS      ((HISTOGRAM_BUCKETS + 1) << HISTOGRAM_HALF_BITS)

struct histogram {
    uint64_t total;
    uint64_t max;
    uint64_t counts[HISTOGRAM_COUNTS];
};

/* One counter that is not zero, as an interval travels from a worker to the parent. */
struct histogram_cell {
    uint32_t index;
    uint64_t count;
};

void histogram_add(struct histogram *histogram, uint64_t value);

/* Adds every count of part to total. */
void histogram_merge(struct histogram *total, const struct histogram *part);

/*
 * The value at percentile (0 to 100), ranked as HdrHistogram ranks it (the count at
 * percentile / 100 * total, rounded): the top of its bucket, or the maximum if that is lower.
 */
uint64_t histogram_percentile(const struct histogram *histogram, double percentile);

/* Writes the counters that are not zero into cells (room for HISTOGRAM_COUNTS); returns how many.
 */
size_t histogram_cells(const struct histogram *histogram, struct histogram_cell *cells);

/* Adds cells (from histogram_cells) to histogram, all but the maximum, which the caller sets.
 * Cells out of range are ignored. */
void histogram_add_cells(struct histogram *histogram, const struct histogram_cell *cells,
                         size_t count);

/*
 * HdrHistogram's V2 compressed encoding of the histogram (zigzag LEB128 counts, zlib, Base64),
 * as a string to free(); NULL when out of memory.
 */
char *histogram_encode(const struct histogram *histogram);

#endif
