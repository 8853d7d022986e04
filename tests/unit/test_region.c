/*
 * Regions (src/region.c): anonymous and file-backed shared memory. Their failures are tested
 * through the modules that use them (test_pool.c, test_hash.c, test_map.c); here, what only the
 * region itself decides: huge pages are a hint, so a kernel that refuses them costs nothing.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "region.h"
#include "sxe_test.h"
#include "sys.h"

static int reset(void **state)
{
    (void)state;
    sxe__sys_reset();
    return 0;
}

/* Large regions ask for huge pages and small ones do not; a refusal still gives the memory. */
static void test_huge_pages_are_a_hint(void **state)
{
    size_t large = 4u << 20;
    int rc = 0;

    (void)state;
    sxe__sys_fail(SXE_SYS_madvise, 1, 0, EINVAL);
    char *memory = sxe__region_map_anonymous("test", "large", large, false, &rc);
    assert_non_null(memory);
    assert_int_equal(rc, 0);
    assert_int_equal(sxe__sys_calls(SXE_SYS_madvise), 1);
    memset(memory, 0xa5, large); /* every byte is there to use */
    assert_int_equal((unsigned char)memory[large - 1], 0xa5);
    assert_int_equal(munmap(memory, large), 0);

    memory = sxe__region_map_anonymous("test", "small", 4096, true, &rc);
    assert_non_null(memory);
    assert_int_equal(sxe__sys_calls(SXE_SYS_madvise), 1); /* not asked for 4 KB */
    assert_int_equal(munmap(memory, 4096), 0);
}

/* Its lines are the REGION module's: a refused huge page hint is told at that module's DEBUG. */
static void test_its_lines_are_the_region_modules(void **state)
{
    struct sxe_test_capture capture;
    enum sxe_log_level was = sxe_log_get_module_level("REGION");
    size_t large = 4u << 20;
    int rc = 0;

    (void)state;
    assert_int_equal(sxe_log_set_module_level("REGION", SXE_LOG_LEVEL_DEBUG), 0);
    sxe__sys_fail(SXE_SYS_madvise, 1, 0, EINVAL);
    sxe_test_capture_start(&capture);
    char *memory = sxe__region_map_anonymous("test", "large", large, false, &rc);
    sxe_test_capture_stop();
    assert_non_null(memory);
    assert_non_null(strstr(capture.text, "no transparent huge pages for 4194304 bytes"));
    assert_int_equal(munmap(memory, large), 0);
    assert_int_equal(sxe_log_set_module_level("REGION", was), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_huge_pages_are_a_hint, reset),
        cmocka_unit_test_teardown(test_its_lines_are_the_region_modules, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
