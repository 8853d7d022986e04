/*
 * A hash table's options (sxe_hash_size()): each limit the header states is refused one at a
 * time, just past it, and accepted at it. sxe_hash_create() and sxe_hash_attach() check the same
 * way, so what passes here is what they take. Tables themselves are tested in test_hash.c; here,
 * also the memory a shared table is made in.
 */
#include <stdint.h>

#include "sxe/hash.h"
#include "sxe_test.h"
#include "sys.h"

static const struct sxe_hash_options fixed = {
    .name = "limits", .capacity = 10, .key_size = 8, .value_size = 8};

static void test_each_limit_is_refused_past_it(void **state)
{
    static const struct {
        const char *why;
        struct sxe_hash_options options;
    } refused[] = {
        {"an unknown flag", {.capacity = 10, .key_size = 8, .flags = 0x80}},
        {"more stripes than the most",
         {.capacity = 10,
          .key_size = 8,
          .stripes = 2 * SXE_HASH_STRIPES_MAX,
          .flags = SXE_HASH_LOCKED}},
        {"a load under 50%", {.capacity = 10, .key_size = 8, .load_percent = 49}},
        {"a capacity past 2^40", {.capacity = (1ULL << 40) + 1, .key_size = 8}},
        {"a fixed key past 4096 bytes", {.capacity = 10, .key_size = 4097}},
        {"a fixed value past 65536 bytes", {.capacity = 10, .key_size = 8, .value_size = 65537}},
        {"a variable value with too small an arena",
         {.capacity = 10, .key_size = 8, .value_size = SXE_HASH_VARIABLE, .arena_bytes = 15}},
        {"an arena of 2^56 bytes",
         {.capacity = 10, .key_size = SXE_HASH_VARIABLE, .arena_bytes = 1ULL << 56}},
    };

    (void)state;
    for (unsigned i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        if (sxe_hash_size(&refused[i].options) != 0) {
            fail_msg("%s was accepted", refused[i].why);
        }
    }
}

static void test_each_limit_is_accepted_at_it(void **state)
{
    struct sxe_hash_options options;

    (void)state;
    assert_int_not_equal(sxe_hash_size(&fixed), 0);
    options = fixed;
    options.key_size = 4096;
    options.value_size = 65536;
    options.load_percent = 50;
    assert_int_not_equal(sxe_hash_size(&options), 0);
    options = fixed;
    options.stripes = SXE_HASH_STRIPES_MAX;
    options.flags = SXE_HASH_LOCKED;
    assert_int_not_equal(sxe_hash_size(&options), 0);
    options = fixed;
    options.value_size = SXE_HASH_VARIABLE; /* a fixed key with a variable value */
    options.arena_bytes = 16 * 64;
    assert_int_not_equal(sxe_hash_size(&options), 0);
}

/* A large shared table asks for a huge page per aligned 2 MB (sxe__region_back_huge()), besides
 * the advice every large table gets; a private one only for the advice. */
static void test_a_shared_table_is_backed_by_huge_pages(void **state)
{
    struct sxe_hash_options options = fixed;
    sxe_hash_t *hash;

    (void)state;
    options.capacity = 200000;
    options.flags = SXE_HASH_SHARED;
    size_t chunks = sxe_hash_size(&options) / (2u << 20);
    assert_true(chunks >= 2);
    sxe__sys_count(SXE_SYS_madvise);
    assert_int_equal(sxe_hash_create(&hash, &options), 0);
    assert_int_equal(sxe__sys_calls(SXE_SYS_madvise), sxe_test_kernel_collapses() ? 1 + chunks : 2);
    sxe_hash_destroy(hash);

    options.flags = 0;
    sxe__sys_count(SXE_SYS_madvise);
    assert_int_equal(sxe_hash_create(&hash, &options), 0);
    assert_int_equal(sxe__sys_calls(SXE_SYS_madvise), 1);
    sxe_hash_destroy(hash);
    sxe__sys_reset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_limit_is_refused_past_it),
        cmocka_unit_test(test_each_limit_is_accepted_at_it),
        cmocka_unit_test(test_a_shared_table_is_backed_by_huge_pages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
