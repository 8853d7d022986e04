#include <errno.h>
#include <string.h>

#include "sxe/error.h"
#include "sxe_test.h"

static void test_strerror(void **state)
{
    (void)state;
    assert_string_equal(sxe_strerror(0), "Success");
    assert_string_equal(sxe_strerror(-ENOBUFS), "No buffer space available");
    assert_string_equal(sxe_strerror(-EPIPE), "Broken pipe");
    assert_ptr_equal(sxe_strerror(EPIPE), sxe_strerror(-EPIPE));
    assert_string_equal(sxe_strerror(-9999), "Unknown error");
    assert_string_equal(sxe_strerror(-2147483647 - 1), "Unknown error");
    assert_string_equal(sxe_strerror(2147483647), "Unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
