/*
 * sxe-http's latency histogram (histogram.h).
 */
#include "histogram.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define HALF ((uint64_t)1 << HISTOGRAM_HALF_BITS)

static unsigned index_of(uint64_t value)
{
    if (value > HISTOGRAM_HIGHEST) {
        value = HISTOGRAM_HIGHEST;
    }
    /* The bucket: how far the value's top bit lies above the first bucket's 2 * HALF values. */
    unsigned bucket =
        64 - (unsigned)__builtin_clzll(value | (2 * HALF - 1)) - HISTOGRAM_HALF_BITS - 1;
    uint64_t sub = value >> bucket;
    return (unsigned)(((uint64_t)(bucket + 1) << HISTOGRAM_HALF_BITS) + sub - HALF);
}

/* The highest value that counts at index. */
static uint64_t top_of(unsigned index)
{
    int bucket = (int)(index >> HISTOGRAM_HALF_BITS) - 1;
    uint64_t sub = (index & (HALF - 1)) + HALF;

    if (bucket < 0) {
        sub -= HALF;
        bucket = 0;
    }
    return (sub << bucket) + ((uint64_t)1 << bucket) - 1;
}

void histogram_add(struct histogram *histogram, uint64_t value)
{
    histogram->counts[index_of(value)]++;
    histogram->total++;
    if (value > histogram->max) {
        histogram->max = value;
    }
}

void histogram_merge(struct histogram *total, const struct histogram *part)
{
    for (unsigned i = 0; i < HISTOGRAM_COUNTS; i++) {
        total->counts[i] += part->counts[i];
    }
    total->total += part->total;
    if (part->max > total->max) {
        total->max = part->max;
    }
}

uint64_t histogram_percentile(const struct histogram *histogram, double percentile)
{
    uint64_t rank = (uint64_t)(percentile / 100.0 * (double)histogram->total + 0.5);
    uint64_t seen = 0;

    if (histogram->total == 0) {
        return 0;
    }
    rank = rank == 0 ? 1 : rank;
    for (unsigned i = 0; i < HISTOGRAM_COUNTS; i++) {
        seen += histogram->counts[i];
        if (seen >= rank) {
            uint64_t top = top_of(i);
            return top < histogram->max ? top : histogram->max;
        }
    }
    return histogram->max;
}

size_t histogram_cells(const struct histogram *histogram, struct histogram_cell *cells)
{
    size_t used = 0;

    for (unsigned i = 0; i < HISTOGRAM_COUNTS; i++) {
        if (histogram->counts[i] != 0) {
            cells[used++] = (struct histogram_cell){.index = i, .count = histogram->counts[i]};
        }
    }
    return used;
}

void histogram_add_cells(struct histogram *histogram, const struct histogram_cell *cells,
                         size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (cells[i].index < HISTOGRAM_COUNTS) {
            histogram->counts[cells[i].index] += cells[i].count;
            histogram->total += cells[i].count;
        }
    }
}

static size_t put_be32(unsigned char *at, uint32_t value)
{
    for (int i = 0; i < 4; i++) {
        at[i] = (unsigned char)(value >> (24 - 8 * i));
    }
    return 4;
}

static size_t put_be64(unsigned char *at, uint64_t value)
{
    put_be32(at, (uint32_t)(value >> 32));
    return 4 + put_be32(at + 4, (uint32_t)value);
}

/* HdrHistogram's LEB128-64b9B of a zigzag-encoded value: 7 bits a byte, the ninth byte whole. */
static size_t put_zigzag(unsigned char *at, int64_t signed_value)
{
    uint64_t value = ((uint64_t)signed_value << 1) ^ (uint64_t)(signed_value >> 63);
    size_t len = 0;

    while (len < 8 && value >= 0x80) {
        at[len++] = (unsigned char)(value | 0x80);
        value >>= 7;
    }
    at[len++] = (unsigned char)value;
    return len;
}

static char *base64(const unsigned char *data, size_t len)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *text = malloc((len + 2) / 3 * 4 + 1);
    char *at = text;

    if (text == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < len; i += 3) {
        uint32_t group = (uint32_t)data[i] << 16 | (i + 1 < len ? (uint32_t)data[i + 1] << 8 : 0) |
                         (i + 2 < len ? data[i + 2] : 0);
        *at++ = digits[group >> 18];
        *at++ = digits[group >> 12 & 63];
        *at++ = i + 1 < len ? digits[group >> 6 & 63] : '=';
        *at++ = i + 2 < len ? digits[group & 63] : '=';
    }
    *at = '\0';
    return text;
}

char *histogram_encode(const struct histogram *histogram)
{
    enum { HEAD = 40, WORD_MAX = 9 };
    unsigned limit = histogram->total == 0 ? 0 : index_of(histogram->max) + 1;
    unsigned char *plain = malloc(HEAD + (size_t)limit * WORD_MAX);
    uLongf packed_len = compressBound(HEAD + (uLong)limit * WORD_MAX);
    unsigned char *packed = malloc(8 + packed_len);
    char *text = NULL;

    if (plain != NULL && packed != NULL) {
        /* The counts, a run of zeros as its negated length. */
        size_t len = HEAD;
        for (unsigned i = 0; i < limit;) {
            int64_t count = (int64_t)histogram->counts[i++];
            if (count == 0) {
                int64_t zeros = 1;
                for (; i < limit && histogram->counts[i] == 0; i++) {
                    zeros++;
                }
                count = zeros > 1 ? -zeros : 0;
            }
            len += put_zigzag(plain + len, count);
        }
        double ratio = 1.0; /* integer to double conversion */
        uint64_t ratio_bits;
        memcpy(&ratio_bits, &ratio, sizeof(ratio_bits));
        put_be32(plain, 0x1c849313); /* V2 encoding, LEB128-64b9B + zigzag */
        put_be32(plain + 4, (uint32_t)(len - HEAD));
        put_be32(plain + 8, 0); /* normalizing index offset */
        put_be32(plain + 12, HISTOGRAM_SIGNIFICANT);
        put_be64(plain + 16, 1); /* lowest discernible value */
        put_be64(plain + 24, HISTOGRAM_HIGHEST);
        put_be64(plain + 32, ratio_bits);
        if (compress(packed + 8, &packed_len, plain, len) == Z_OK) {
            put_be32(packed, 0x1c849314); /* V2 compressed */
            put_be32(packed + 4, (uint32_t)packed_len);
            text = base64(packed, 8 + packed_len);
        }
    }
    free(plain);
    free(packed);
    return text;
}
