/*
 * sxe-http's latency histogram (tools/sxe-http/histogram.c, compiled into this program): the
 * bucket of every kind of value against HdrHistogram's layout worked out here on its own, the
 * rank a percentile takes (rounded to the nearest, never 0), merging, the cells a worker sends,
 * and the compressed V2 encoding, decoded here field by field (Base64, the cookies, zlib, the
 * zigzag LEB128 counts and their runs of zeros).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "histogram.h"
#include "sxe_test.h"

/* The highest value counted with value, by HdrHistogram's layout at 2 significant figures:
 * exact below 256, then 128 sub-buckets a power of two; values past the highest count as it. */
static uint64_t top_for(uint64_t value)
{
    if (value > HISTOGRAM_HIGHEST) {
        value = HISTOGRAM_HIGHEST;
    }
    if (value < 256) {
        return value;
    }
    unsigned shift = 63 - (unsigned)__builtin_clzll(value) - 7;
    return ((value >> shift) << shift) + ((uint64_t)1 << shift) - 1;
}

static struct histogram *fresh(void)
{
    static struct histogram histogram;
    memset(&histogram, 0, sizeof(histogram));
    return &histogram;
}

static void test_every_kind_of_value_lands_in_its_bucket(void **state)
{
    uint64_t values[512];
    size_t count = 0;

    (void)state;
    for (uint64_t v = 0; v < 300; v++) {
        values[count++] = v;
    }
    for (unsigned bit = 8; bit < 42; bit++) {
        uint64_t power = (uint64_t)1 << bit;
        values[count++] = power - 1;
        values[count++] = power;
        values[count++] = power + 1;
        values[count++] = power + power / 2 + 3;
    }
    values[count++] = HISTOGRAM_HIGHEST;
    values[count++] = HISTOGRAM_HIGHEST + 1;
    values[count++] = UINT64_MAX;
    for (size_t i = 0; i < count; i++) {
        /* The value and one far above it: the median is the top of the value's bucket. */
        struct histogram *histogram = fresh();
        histogram_add(histogram, values[i]);
        histogram_add(histogram, UINT64_MAX);
        uint64_t got = histogram_percentile(histogram, 50);
        if (got != top_for(values[i])) {
            fail_msg("%llu: %llu, want %llu", (unsigned long long)values[i],
                     (unsigned long long)got, (unsigned long long)top_for(values[i]));
        }
        assert_true(got >= (values[i] < HISTOGRAM_HIGHEST ? values[i] : HISTOGRAM_HIGHEST));
        /* Alone, it is its own maximum: never more than it (past the highest, its bucket's top). */
        histogram = fresh();
        histogram_add(histogram, values[i]);
        uint64_t top = top_for(values[i]);
        assert_true(histogram_percentile(histogram, 100) == (top < values[i] ? top : values[i]));
        assert_true(histogram->max == values[i]);
        assert_int_equal(histogram->total, 1);
    }
}

static void test_percentiles_take_the_nearest_rank(void **state)
{
    struct histogram *histogram = fresh();

    (void)state;
    assert_int_equal(histogram_percentile(histogram, 50), 0); /* none */
    for (uint64_t v = 10; v <= 100; v += 10) {
        histogram_add(histogram, v); /* ten values: 10, 20, ... 100 */
    }
    static const struct {
        double percentile;
        uint64_t value;
    } cases[] = {{0, 10},    {4.9, 10}, {5, 10},    {14.9, 10}, {15, 20},    {50, 50},
                 {54.9, 50}, {55, 60},  {94.9, 90}, {95, 100},  {99.9, 100}, {100, 100}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t got = histogram_percentile(histogram, cases[i].percentile);
        if (got != cases[i].value) {
            fail_msg("p%g: %llu, want %llu", cases[i].percentile, (unsigned long long)got,
                     (unsigned long long)cases[i].value);
        }
    }
    /* The maximum caps the top of the last bucket: 1000 counts up to 1003 there. */
    histogram = fresh();
    histogram_add(histogram, 1000);
    histogram_add(histogram, 1001);
    assert_int_equal(histogram_percentile(histogram, 100), 1001);
    assert_int_equal(histogram_percentile(histogram, 50), 1001);
    histogram_add(histogram, 5000);
    assert_int_equal(histogram_percentile(histogram, 50), top_for(1001));
}

static void test_merge_and_cells(void **state)
{
    static struct histogram a, b, copy;
    static struct histogram_cell cells[HISTOGRAM_COUNTS];

    (void)state;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    histogram_add(&a, 70000);
    histogram_add(&a, 5); /* a smaller value after: the maximum stays */
    assert_int_equal(a.max, 70000);
    histogram_add(&b, 0);
    histogram_add(&b, 900);
    histogram_add(&b, 40);
    assert_int_equal(b.max, 900);
    histogram_merge(&a, &b);
    assert_int_equal(a.total, 5);
    assert_int_equal(a.max, 70000);
    assert_int_equal(a.counts[0], 1);
    histogram_merge(&b, &a);
    assert_int_equal(b.max, 70000);
    assert_int_equal(b.total, 8);
    assert_int_equal(b.counts[0], 2);
    memset(&copy, 0, sizeof(copy));
    copy.max = 100000;
    histogram_merge(&copy, &a); /* a smaller maximum does not lower it */
    assert_int_equal(copy.max, 100000);

    size_t count = histogram_cells(&a, cells);
    assert_int_equal(count, 5); /* 0, 5, 40, 900, 70000 */
    for (size_t i = 1; i < count; i++) {
        assert_true(cells[i - 1].index < cells[i].index);
    }
    assert_int_equal(cells[0].index, 0);
    assert_int_equal(cells[0].count, 1);
    memset(&copy, 0, sizeof(copy));
    cells[count] = (struct histogram_cell){.index = HISTOGRAM_COUNTS, .count = 7}; /* ignored */
    cells[count + 1] = (struct histogram_cell){.index = HISTOGRAM_COUNTS + 9, .count = 7};
    histogram_add_cells(&copy, cells, count + 2);
    assert_int_equal(copy.total, a.total);
    assert_memory_equal(copy.counts, a.counts, sizeof(a.counts));
    assert_int_equal(copy.max, 0);            /* the caller's */
    histogram_add_cells(&copy, cells, count); /* added to what is there */
    assert_int_equal(copy.total, 2 * a.total);
    assert_int_equal(copy.counts[0], 2);
    assert_int_equal(copy.counts[cells[count - 1].index], 2 * cells[count - 1].count);
    assert_int_equal(histogram_cells(fresh(), cells), 0);
}

static size_t unbase64(const char *text, unsigned char *out)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t len = 0, bits = 0;
    uint32_t group = 0;

    for (const char *at = text; *at != '\0' && *at != '='; at++) {
        const char *digit = strchr(digits, *at);
        assert_non_null(digit);
        group = group << 6 | (uint32_t)(digit - digits);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[len++] = (unsigned char)(group >> bits);
        }
    }
    assert_int_equal(strlen(text) % 4, 0);
    return len;
}

static uint64_t be(const unsigned char *at, int bytes)
{
    uint64_t value = 0;
    for (int i = 0; i < bytes; i++) {
        value = value << 8 | at[i];
    }
    return value;
}

/* Decodes histogram_encode()'s text and checks every field and count against histogram. */
static void expect_encoding(const struct histogram *histogram)
{
    static unsigned char packed[1 << 20], plain[1 << 20];
    char *text = histogram_encode(histogram);

    assert_non_null(text);
    size_t packed_len = unbase64(text, packed);
    free(text);
    assert_int_equal(be(packed, 4), 0x1c849314);
    assert_int_equal(be(packed + 4, 4), packed_len - 8);
    uLongf plain_len = sizeof(plain);
    assert_int_equal(uncompress(plain, &plain_len, packed + 8, packed_len - 8), Z_OK);
    assert_int_equal(be(plain, 4), 0x1c849313);
    assert_int_equal(be(plain + 4, 4), plain_len - 40);
    assert_int_equal(be(plain + 8, 4), 0);
    assert_int_equal(be(plain + 12, 4), HISTOGRAM_SIGNIFICANT);
    assert_int_equal(be(plain + 16, 8), 1);
    assert_true(be(plain + 24, 8) == HISTOGRAM_HIGHEST);
    double ratio;
    uint64_t ratio_bits = be(plain + 32, 8);
    memcpy(&ratio, &ratio_bits, sizeof(ratio));
    assert_true(ratio == 1.0);
    size_t index = 0;
    bool previous_zero = false;
    for (size_t at = 40; at < plain_len;) {
        uint64_t value = 0;
        int shift = 0, bytes = 0;
        for (;;) {
            unsigned char byte = plain[at++];
            bytes++;
            if (bytes == 9) {
                value |= (uint64_t)byte << shift;
                break;
            }
            value |= (uint64_t)(byte & 0x7f) << shift;
            shift += 7;
            if ((byte & 0x80) == 0) {
                break;
            }
        }
        /* Written in as few bytes as it takes: no byte of a longer one only carries zeros. */
        if ((bytes > 1 && bytes < 9 && value >> (7 * (bytes - 1)) == 0) ||
            (bytes == 9 && value >> 56 == 0)) {
            fail_msg("%llu written in %d bytes", (unsigned long long)value, bytes);
        }
        int64_t count = (int64_t)(value >> 1) ^ -(int64_t)(value & 1);
        if (count <= 0 && previous_zero) {
            fail_msg("a run of zeros written in two parts, at count %zu", index);
        }
        previous_zero = count <= 0;
        if (count < 0) {
            assert_true(count < -1); /* a single zero is written as 0 */
            for (int64_t i = 0; i < -count; i++) {
                assert_true(histogram->counts[index++] == 0);
            }
        } else {
            assert_true(histogram->counts[index++] == (uint64_t)count);
        }
    }
    /* Up to the maximum's bucket, and nothing past it. */
    size_t limit = 0;
    for (size_t i = 0; i < HISTOGRAM_COUNTS; i++) {
        limit = histogram->counts[i] != 0 ? i + 1 : limit;
    }
    assert_int_equal(index, limit);
}

static void test_the_v2_encoding_decodes_to_the_counts(void **state)
{
    struct histogram *histogram = fresh();

    (void)state;
    expect_encoding(histogram);
    histogram_add(histogram, 1);
    expect_encoding(histogram);
    histogram_add(histogram, 3); /* a single zero between */
    histogram_add(histogram, 3);
    histogram_add(histogram, 6); /* a run of two zeros */
    for (int i = 0; i < 64; i++) {
        histogram_add(histogram, 7); /* a count of 64: zigzag 128, the first of two bytes */
    }
    for (uint64_t v = 20; v < 120; v += 2) {
        histogram_add(histogram, v); /* single zeros between: a payload of some length */
    }
    histogram_add(histogram, 250); /* a run of zeros */
    for (int i = 0; i < 300; i++) {
        histogram_add(histogram, 100000); /* a count of two LEB128 bytes */
    }
    for (int i = 0; i < 70000; i++) {
        histogram_add(histogram, 200000); /* of three */
    }
    histogram->counts[2000] = (uint64_t)1 << 62; /* of nine, the ninth byte whole */
    histogram->total += (uint64_t)1 << 62;
    histogram_add(histogram, UINT64_MAX);
    expect_encoding(histogram);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind_of_value_lands_in_its_bucket),
        cmocka_unit_test(test_percentiles_take_the_nearest_rank),
        cmocka_unit_test(test_merge_and_cells),
        cmocka_unit_test(test_the_v2_encoding_decodes_to_the_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
