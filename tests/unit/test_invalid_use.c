/*
 * Invalid use of the public API, one argument wrong at a time: each is an assertion that names
 * the check in debug builds (sxe_test_expect_abort) and the documented error in release builds,
 * and its valid neighbour still works. Each check of the form SXE_CHECK(a && b && c) gets a case
 * for each of a, b and c failing alone, so that no part of it goes unchecked; the module tests keep
 * their own invalid-use cases, and this table takes the checks they leave.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/fiber.h"
#include "sxe/hash.h"
#include "sxe/http_client.h"
#include "sxe/loop.h"
#include "sxe/pool.h"
#include "sxe_test.h"

static sxe_hash_t *variable_hash(void)
{
    struct sxe_hash_options options = {.name = "invalid",
                                       .capacity = 8,
                                       .key_size = SXE_HASH_VARIABLE,
                                       .value_size = 4,
                                       .arena_bytes = 4096};
    sxe_hash_t *hash;
    assert_int_equal(sxe_hash_create(&hash, &options), 0);
    return hash;
}

static const void *const one_key[] = {"k"};
static const size_t one_size[] = {1};

static void find_many_in_no_hash(void)
{
    const void *values[1];
    assert_int_equal(sxe_hash_find_many(NULL, 1, one_key, one_size, values, NULL), 0);
}

static void find_many_without_keys(void)
{
    sxe_hash_t *hash = variable_hash();
    const void *values[1];
    assert_int_equal(sxe_hash_find_many(hash, 1, NULL, one_size, values, NULL), 0);
    sxe_hash_destroy(hash);
}

static void find_many_without_values(void)
{
    sxe_hash_t *hash = variable_hash();
    assert_int_equal(sxe_hash_find_many(hash, 1, one_key, one_size, NULL, NULL), 0);
    sxe_hash_destroy(hash);
}

static void find_many_variable_keys_without_sizes(void)
{
    sxe_hash_t *hash = variable_hash();
    const void *values[1];
    assert_int_equal(sxe_hash_find_many(hash, 1, one_key, NULL, values, NULL), 0);
    sxe_hash_destroy(hash);
}

/* The valid neighbours: no keys at all, and sizes given. */
static void find_many_valid(void)
{
    sxe_hash_t *hash = variable_hash();
    const void *values[1];
    assert_int_equal(sxe_hash_find_many(hash, 0, NULL, one_size, NULL, NULL), 0);
    assert_int_equal(sxe_hash_find_many(hash, 1, one_key, one_size, values, NULL), 0);
    sxe_hash_destroy(hash);
}

static void fibers_with_a_stack_past_half_of_4_gb(void)
{
    sxe_loop_t *loop;
    sxe_fibers_t *fibers;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    struct sxe_fibers_options options = {.count = 1, .stack_size = (size_t)3 << 30};
    assert_int_equal(sxe_fibers_create(&fibers, loop, &options), -EINVAL);
    sxe_loop_destroy(loop);
}

static void fibers_past_half_of_4_g(void)
{
    sxe_loop_t *loop;
    sxe_fibers_t *fibers;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    struct sxe_fibers_options options = {.count = UINT32_MAX / 2 + 1, .stack_size = 16384};
    assert_int_equal(sxe_fibers_create(&fibers, loop, &options), -EINVAL);
    sxe_loop_destroy(loop);
}

static void client_without_a_loop(void)
{
    sxe_http_client_t *client;
    assert_int_equal(sxe_http_client_create(&client, NULL, "127.0.0.1:80", NULL), -EINVAL);
}

static void client_without_an_address(void)
{
    sxe_loop_t *loop;
    sxe_http_client_t *client;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_http_client_create(&client, loop, NULL, NULL), -EINVAL);
    sxe_loop_destroy(loop);
}

static void client_pipelining_past_64(void)
{
    sxe_loop_t *loop;
    sxe_http_client_t *client;
    struct sxe_http_client_options options = {.pipeline = 65};
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_http_client_create(&client, loop, "127.0.0.1:80", &options), -EINVAL);
    sxe_loop_destroy(loop);
}

static const struct sxe_pool_options one_element = {
    .count = 1, .element_size = 1, .state_count = 1};

static void pool_without_a_place_for_it(void)
{
    assert_int_equal(sxe_pool_create(NULL, &one_element), -EINVAL);
}

static void pool_without_options(void)
{
    sxe_pool_t *pool;
    assert_int_equal(sxe_pool_create(&pool, NULL), -EINVAL);
}

static void pool_attached_nowhere(void)
{
    assert_int_equal(sxe_pool_attach(NULL, "/tmp/sxe-invalid-pool", &one_element, SXE_POOL_CREATE),
                     -EINVAL);
}

static void pool_attached_to_no_path(void)
{
    sxe_pool_t *pool;
    assert_int_equal(sxe_pool_attach(&pool, NULL, &one_element, SXE_POOL_CREATE), -EINVAL);
}

static void pool_attached_with_invalid_options(void)
{
    sxe_pool_t *pool;
    struct sxe_pool_options none = one_element;
    none.count = 0;
    assert_int_equal(sxe_pool_attach(&pool, "/tmp/sxe-invalid-pool", &none, SXE_POOL_CREATE),
                     -EINVAL);
}

static void pool_attached_with_an_unknown_flag(void)
{
    sxe_pool_t *pool;
    assert_int_equal(sxe_pool_attach(&pool, "/tmp/sxe-invalid-pool", &one_element, 0x80), -EINVAL);
}

/* Memory for a pool of one element in the caller's memory: aligned, and just large enough. */
static _Alignas(64) char pool_memory[64 * 1024];

static void pool_initialised_nowhere(void)
{
    assert_int_equal(sxe_pool_init(NULL, pool_memory, sxe_pool_size(&one_element), &one_element),
                     -EINVAL);
}

static void pool_initialised_in_no_memory(void)
{
    sxe_pool_t *pool;
    assert_int_equal(sxe_pool_init(&pool, NULL, sxe_pool_size(&one_element), &one_element),
                     -EINVAL);
}

static void pool_initialised_in_misaligned_memory(void)
{
    sxe_pool_t *pool;
    assert_int_equal(
        sxe_pool_init(&pool, pool_memory + 8, sxe_pool_size(&one_element), &one_element), -EINVAL);
}

static void pool_initialised_with_invalid_options(void)
{
    sxe_pool_t *pool;
    struct sxe_pool_options none = one_element;
    none.state_count = 0;
    assert_int_equal(sxe_pool_init(&pool, pool_memory, sizeof(pool_memory), &none), -EINVAL);
}

static void pool_initialised_in_too_little_memory(void)
{
    sxe_pool_t *pool;
    assert_int_equal(
        sxe_pool_init(&pool, pool_memory, sxe_pool_size(&one_element) - 1, &one_element), -EINVAL);
}

static void fiber_connect_outside_a_fiber(void)
{
    sxe_loop_t *loop;
    sxe_fiber_stream_t stream;
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(9)};
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_fiber_connect(&stream, loop, (struct sockaddr *)&to, sizeof(to)), -EPERM);
    sxe_loop_destroy(loop);
}

static void pool_valid(void)
{
    sxe_pool_t *pool;
    assert_int_equal(sxe_pool_create(&pool, &one_element), 0);
    sxe_pool_destroy(pool);
    assert_int_equal(sxe_pool_init(&pool, pool_memory, sxe_pool_size(&one_element), &one_element),
                     0);
    sxe_pool_fini(pool);
}

static void client_valid(void)
{
    sxe_loop_t *loop;
    sxe_http_client_t *client;
    struct sxe_http_client_options options = {.pipeline = 64};
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_http_client_create(&client, loop, "127.0.0.1:80", &options), 0);
    sxe_http_client_destroy(client);
    assert_int_equal(sxe_http_client_create(&client, loop, "127.0.0.1:80", NULL), 0);
    sxe_http_client_destroy(client);
    sxe_loop_destroy(loop);
}

static const struct {
    const char *what;
    void (*call)(void);
    const char *check; /* a piece of the assertion's text */
} cases[] = {
    {"sxe_hash_find_many() of no table", find_many_in_no_hash, "hash != NULL"},
    {"sxe_hash_find_many() without keys", find_many_without_keys, "keys != NULL"},
    {"sxe_hash_find_many() without values", find_many_without_values, "values != NULL"},
    {"sxe_hash_find_many() of variable keys without their sizes",
     find_many_variable_keys_without_sizes, "key_sizes != NULL"},
    {"sxe_fibers_create() with 3 GB stacks", fibers_with_a_stack_past_half_of_4_gb,
     "stack_size <= UINT32_MAX / 2"},
    {"sxe_fibers_create() of 2^31 fibers", fibers_past_half_of_4_g, "count <= UINT32_MAX / 2"},
    {"sxe_http_client_create() without a loop", client_without_a_loop, "loop != NULL"},
    {"sxe_http_client_create() without an address", client_without_an_address, "address != NULL"},
    {"sxe_http_client_create() pipelining 65", client_pipelining_past_64,
     "pipeline <= PIPELINE_MOST"},
    {"sxe_pool_create() with nowhere to put the pool", pool_without_a_place_for_it, "pool != NULL"},
    {"sxe_pool_create() without options", pool_without_options, "options_are_valid(options)"},
    {"sxe_pool_attach() with nowhere to put the pool", pool_attached_nowhere, "pool != NULL"},
    {"sxe_pool_attach() to no file", pool_attached_to_no_path, "path != NULL"},
    {"sxe_pool_attach() with no elements", pool_attached_with_invalid_options,
     "options_are_valid(options)"},
    {"sxe_pool_attach() with an unknown flag", pool_attached_with_an_unknown_flag,
     "(flags & ~SXE_POOL_CREATE) == 0"},
    {"sxe_pool_init() with nowhere to put the pool", pool_initialised_nowhere, "pool != NULL"},
    {"sxe_pool_init() in no memory", pool_initialised_in_no_memory, "memory != NULL"},
    {"sxe_pool_init() in memory off 64 bytes", pool_initialised_in_misaligned_memory,
     "% POOL_ALIGN) == 0"},
    {"sxe_pool_init() with no states", pool_initialised_with_invalid_options,
     "options_are_valid(options)"},
    {"sxe_pool_init() in a byte too little", pool_initialised_in_too_little_memory,
     "size >= sxe_pool_size(options)"},
    {"sxe_fiber_connect() outside a fiber", fiber_connect_outside_a_fiber,
     "sxe_fiber_self() != NULL"},
};

#ifdef SXE_DEBUG
static void call(void *arg)
{
    ((void (*)(void))arg)();
}
#endif

static void test_each_invalid_use(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        print_message("%s\n", cases[i].what);
#ifdef SXE_DEBUG
        const char *const expected[] = {"assertion failed: ", cases[i].check, NULL};
        sxe_test_expect_abort(call, (void *)cases[i].call, expected);
#else
        cases[i].call();
#endif
    }
}

static void test_the_valid_neighbours(void **state)
{
    (void)state;
    find_many_valid();
    client_valid();
    pool_valid();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_invalid_use),
        cmocka_unit_test(test_the_valid_neighbours),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
