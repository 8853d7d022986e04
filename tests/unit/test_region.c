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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_huge_pages_are_a_hint, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
