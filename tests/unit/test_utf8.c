/*
 * UTF-8 checks (RFC 3629): every class of invalid sequence is refused at its first bad byte, valid
 * text of every length of sequence passes, and text cut inside a sequence is "needs more", not bad.
 */
#include <string.h>

#include "sxe/utf8.h"
#include "sxe_test.h"

static void test_valid_text(void **state)
{
    static const char *const valid[] = {
        "",
        "plain ASCII",
        "\xc2\x80",
        "\xdf\xbf",
        "\xe0\xa0\x80",
        "\xed\x9f\xbf",
        "\xee\x80\x80",
        "\xef\xbf\xbf",
        "\xf0\x90\x80\x80",
        "\xf4\x8f\xbf\xbf",
        "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5", /* Greek, from RFC 6455's examples */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
        assert_true(sxe_utf8_valid(valid[i], strlen(valid[i])));
    }
}

static void test_invalid_text_is_refused_at_its_first_bad_byte(void **state)
{
    static const struct {
        const char *text;
        size_t bad_at;
    } invalid[] = {
        {"\x80", 0},             /* a lone continuation */
        {"ab\xc0\xaf", 2},       /* overlong */
        {"\xc1\xbf", 0},         /* overlong */
        {"\xe0\x80\xaf", 0},     /* overlong */
        {"\xed\xa0\x80", 0},     /* a surrogate */
        {"\xf0\x80\x80\xaf", 0}, /* overlong */
        {"\xf4\x90\x80\x80", 0}, /* past U+10FFFF */
        {"\xf5\x80\x80\x80", 0}, /* no such lead */
        {"\xfe", 0},             /* no such byte */
        {"x\xe2\x82y", 1},       /* cut short by an ASCII byte */
        {"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80"
         "edited",
         11},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        bool bad;
        size_t len = strlen(invalid[i].text);
        assert_false(sxe_utf8_valid(invalid[i].text, len));
        assert_int_equal(sxe_utf8_check(invalid[i].text, len, &bad), invalid[i].bad_at);
        assert_true(bad);
    }
}

static void test_text_cut_inside_a_sequence_needs_more(void **state)
{
    static const char *const cut[] = {"ab\xc3", "\xe2\x82", "\xf0\x9f\x98", "\xf4"};
    bool bad;

    (void)state;
    for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
        size_t len = strlen(cut[i]);
        size_t whole = sxe_utf8_check(cut[i], len, &bad);
        assert_false(bad);
        assert_true(whole < len);
        assert_false(sxe_utf8_valid(cut[i], len));
    }
    assert_int_equal(sxe_utf8_check("\xe0\x9f", 2, &bad), 0); /* already overlong: bad now */
    assert_true(bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_text),
        cmocka_unit_test(test_invalid_text_is_refused_at_its_first_bad_byte),
        cmocka_unit_test(test_text_cut_inside_a_sequence_needs_more),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
