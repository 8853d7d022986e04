/*
 * Regions (src/base/region.c): anonymous and file-backed shared memory. Their failures are tested
 * through the modules that use them (test_pool.c, test_hash.c, test_map.c); here, what only the
 * region itself decides: huge pages are a hint, so a kernel that refuses them costs nothing.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "base.h"
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

/*
 * A large shared region is aligned to a huge page: its address space is reserved with a huge page
 * to spare, the memory is mapped over the aligned part, and the rest is given back. Either
 * mapping may fail, and the failure is the caller's, with nothing left mapped.
 */
static void test_a_large_shared_region_is_aligned(void **state)
{
    size_t large = (6u << 20) + 4096;
    int rc = 0;

    (void)state;
    sxe__sys_count(SXE_SYS_mmap);
    sxe__sys_count(SXE_SYS_munmap);
    unsigned char *memory = sxe__region_map_anonymous("test", "aligned", large, true, &rc);
    assert_non_null(memory);
    assert_int_equal((uintptr_t)memory % (2u << 20), 0);
    assert_int_equal(sxe__sys_calls(SXE_SYS_mmap), 2);
    assert_in_range(sxe__sys_calls(SXE_SYS_munmap), 1, 2); /* the head only if unaligned */
    memset(memory, 0x5a, large);
    assert_int_equal(memory[large - 1], 0x5a);
    assert_int_equal(munmap(memory, large), 0);

    struct sxe_test_capture capture;
    sxe_test_capture_start(&capture);
    sxe__sys_reset();
    sxe__sys_fail(SXE_SYS_mmap, 1, 1, ENOMEM); /* the reservation */
    assert_null(sxe__region_map_anonymous("test", "reserve", large, true, &rc));
    assert_int_equal(rc, -ENOMEM);
    sxe__sys_reset();
    sxe__sys_fail(SXE_SYS_mmap, 2, 1, ENFILE); /* the memory over it */
    sxe__sys_count(SXE_SYS_munmap);
    assert_null(sxe__region_map_anonymous("test", "fixed", large, true, &rc));
    assert_int_equal(rc, -ENFILE);
    assert_int_equal(sxe__sys_calls(SXE_SYS_munmap), 1); /* the reservation, given back */
    sxe_test_capture_stop();
    assert_non_null(
        strstr(capture.text, "test reserve: cannot map 6295552 bytes: Cannot allocate"));
    assert_non_null(strstr(capture.text, "test fixed: cannot map 6295552 bytes: Too many open"));
}

/*
 * Backing a shared region with huge pages asks for one per aligned 2 MB and stops at the first
 * refusal; where the kernel makes them, smaps shows them all, and the memory is still zero.
 */
static void test_a_shared_region_is_backed_by_huge_pages(void **state)
{
    size_t large = 8u << 20;
    bool collapses = sxe_test_kernel_collapses();
    int rc = 0;

    (void)state;
    unsigned char *memory = sxe__region_map_anonymous("test", "huge", large, true, &rc);
    assert_non_null(memory);
    sxe__sys_count(SXE_SYS_madvise);
    sxe__region_back_huge(memory, large);
    assert_int_equal(sxe__sys_calls(SXE_SYS_madvise), collapses ? 4 : 1);
    assert_int_equal(sxe_test_smaps_kb(memory, "ShmemPmdMapped:"), collapses ? 8192 : 0);
    for (size_t at = 0; at < large; at += 4096) {
        assert_int_equal(memory[at], 0);
    }
    assert_int_equal(munmap(memory, large), 0);

    memory = sxe__region_map_anonymous("test", "refused", large, true, &rc);
    assert_non_null(memory);
    sxe__sys_fail(SXE_SYS_madvise, 2, 1, EAGAIN);
    sxe__region_back_huge(memory, large);
    assert_int_equal(sxe__sys_calls(SXE_SYS_madvise), collapses ? 2 : 1); /* none after it */
    assert_int_equal(sxe_test_smaps_kb(memory, "ShmemPmdMapped:"), collapses ? 2048 : 0);
    memset(memory, 1, large);
    assert_int_equal(munmap(memory, large), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_huge_pages_are_a_hint, reset),
        cmocka_unit_test_teardown(test_its_lines_are_the_region_modules, reset),
        cmocka_unit_test_teardown(test_a_large_shared_region_is_aligned, reset),
        cmocka_unit_test_teardown(test_a_shared_region_is_backed_by_huge_pages, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
