/* The JSON string writer: escapes, UTF-8 kept or replaced, and a buffer too small. */
#include <errno.h>
#include <string.h>

#include "sxe/json.h"
#include "sxe_test.h"

static void expect(const char *text, size_t len, const char *json)
{
    char out[128];
    ssize_t written = sxe_json_string(out, sizeof(out), text, len);

    if (written != (ssize_t)strlen(json) || strcmp(out, json) != 0) {
        fail_msg("expected %s (%zu), got %s (%zd)", json, strlen(json), out, written);
    }
}

static void test_escapes(void **state)
{
    (void)state;
    expect("", 0, "\"\"");
    expect("plain", 5, "\"plain\"");
    expect("say \"hi\"\\", 9, "\"say \\\"hi\\\"\\\\\"");
    expect("\b\t\n\v\f\r", 6, "\"\\b\\t\\n\\u000b\\f\\r\"");
    expect("\x01\x1f\x7f", 3, "\"\\u0001\\u001f\x7f\"");
    expect("a\0b", 3, "\"a\\u0000b\"");
    expect("</script>", 9, "\"</script>\"");
}

static void test_utf8_kept_and_invalid_bytes_replaced(void **state)
{
    (void)state;
    expect("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14,
           "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
    expect("\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf", 10,
           "\"\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf\"");
    static const struct {
        const char *bytes;
        const char *json;
    } invalid[] = {
        {"\x80", "\"\xef\xbf\xbd\""},                 /* a stray continuation byte */
        {"\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\""}, /* an overlong '/' */
        {"\xe0\x80\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""}, /* overlong, three bytes */
        {"\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""}, /* a surrogate */
        {"\xf4\x90\x80\x80",
         "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""}, /* > U+10FFFF */
        {"\xf5", "\"\xef\xbf\xbd\""},
        {"\xe2\x82", "\"\xef\xbf\xbd\xef\xbf\xbd\""}, /* cut short */
        {"a\xc3", "\"a\xef\xbf\xbd\""},
        {"\xc3(", "\"\xef\xbf\xbd(\""},
        {"\xe2\x82(", "\"\xef\xbf\xbd\xef\xbf\xbd(\""}, /* a bad third byte */
    };
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        expect(invalid[i].bytes, strlen(invalid[i].bytes), invalid[i].json);
    }
}

static void test_a_buffer_too_small(void **state)
{
    char out[8];

    (void)state;
    assert_int_equal(sxe_json_string(out, sizeof(out), "hello", 5), 7);
    assert_string_equal(out, "\"hello\"");
    memset(out, 'x', sizeof(out));
    assert_int_equal(sxe_json_string(out, sizeof(out), "hello!", 6), -ENOBUFS);
    assert_string_equal(out, "");
    assert_int_equal(sxe_json_string(out, 3, "", 0), 2);
    assert_int_equal(sxe_json_string(out, 2, "", 0), -ENOBUFS);
    assert_int_equal(sxe_json_string(out, 0, "", 0), -ENOBUFS);
    assert_int_equal(sxe_json_string(out, sizeof(out), "\n\n\n", 3), -ENOBUFS); /* 8 + NUL */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_utf8_kept_and_invalid_bytes_replaced),
        cmocka_unit_test(test_a_buffer_too_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
