#include <errno.h>
#include <time.h>

#include "sxe/clock.h"
#include "sxe_test.h"
#include "sys.h"

static int reset(void **state)
{
    (void)state;
    sxe__sys_reset();
    return 0;
}

/* The real clocks: monotonic never goes back, and wall time is after 2020. */
static void test_real_clocks(void **state)
{
    (void)state;
    uint64_t before = sxe_clock_mono_ns();
    uint64_t after = sxe_clock_mono_ns();
    assert_true(before > 0);
    assert_true(after >= before);
    assert_true(sxe_clock_wall_ns() > 1577836800ULL * SXE_NS_PER_SEC);
}

/* Fake time: set, read back exactly, move an hour without sleeping. */
static void test_fake_time(void **state)
{
    (void)state;
    sxe__sys_clock_fake(42 * SXE_NS_PER_SEC, 1763760612345000000ULL);
    assert_int_equal(sxe_clock_mono_ns(), 42 * SXE_NS_PER_SEC);
    assert_int_equal(sxe_clock_mono_ns(), 42 * SXE_NS_PER_SEC);
    assert_int_equal(sxe_clock_wall_ns(), 1763760612345000000ULL);
    sxe__sys_clock_advance(3600 * SXE_NS_PER_SEC);
    assert_int_equal(sxe_clock_mono_ns(), 3642 * SXE_NS_PER_SEC);
    assert_int_equal(sxe_clock_wall_ns(), 1763760612345000000ULL + 3600 * SXE_NS_PER_SEC);
}

/* A clock that cannot be read is impossible on Linux but must be survived: time reads 0. */
static void test_clock_failure(void **state)
{
    (void)state;
    sxe__sys_fail(SXE_SYS_clock_gettime, 1, 0, EINVAL);
    assert_int_equal(sxe_clock_mono_ns(), 0);
    assert_int_equal(sxe_clock_wall_ns(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_real_clocks, reset),
        cmocka_unit_test_teardown(test_fake_time, reset),
        cmocka_unit_test_teardown(test_clock_failure, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
