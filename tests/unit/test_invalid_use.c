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
#include "sxe/http.h"
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

/* A table of 8-byte keys and 8-byte values that holds key 1. */
static sxe_hash_t *fixed_hash(void)
{
    struct sxe_hash_options options = {
        .name = "invalid", .capacity = 8, .key_size = 8, .value_size = 8};
    sxe_hash_t *hash;
    uint64_t key = 1, value = 10;
    assert_int_equal(sxe_hash_create(&hash, &options), 0);
    assert_int_equal(sxe_hash_put(hash, &key, 8, &value, 8), 0);
    return hash;
}

static const uint64_t hash_key = 1;

static void hash_created_nowhere(void)
{
    struct sxe_hash_options options = {.capacity = 8, .key_size = 8};
    assert_int_equal(sxe_hash_create(NULL, &options), -EINVAL);
}

static void hash_created_without_options(void)
{
    sxe_hash_t *hash;
    assert_int_equal(sxe_hash_create(&hash, NULL), -EINVAL);
}

static void hash_attached_nowhere(void)
{
    struct sxe_hash_options options = {.capacity = 8, .key_size = 8};
    assert_int_equal(sxe_hash_attach(NULL, "/tmp/sxe-invalid-hash", &options, SXE_HASH_CREATE),
                     -EINVAL);
}

static void hash_attached_to_no_path(void)
{
    struct sxe_hash_options options = {.capacity = 8, .key_size = 8};
    sxe_hash_t *hash;
    assert_int_equal(sxe_hash_attach(&hash, NULL, &options, SXE_HASH_CREATE), -EINVAL);
}

static void hash_attached_without_options(void)
{
    sxe_hash_t *hash;
    assert_int_equal(sxe_hash_attach(&hash, "/tmp/sxe-invalid-hash", NULL, SXE_HASH_CREATE),
                     -EINVAL);
}

static void hash_attached_with_an_unknown_flag(void)
{
    struct sxe_hash_options options = {.capacity = 8, .key_size = 8};
    sxe_hash_t *hash;
    assert_int_equal(sxe_hash_attach(&hash, "/tmp/sxe-invalid-hash", &options, 0x80), -EINVAL);
}

/* Memory for a table in the caller's memory: aligned, and large enough. */
static _Alignas(64) char hash_memory[64 * 1024];
static const struct sxe_hash_options small_hash = {.capacity = 8, .key_size = 8};

static void hash_initialised_nowhere(void)
{
    assert_int_equal(sxe_hash_init(NULL, hash_memory, sizeof(hash_memory), &small_hash), -EINVAL);
}

static void hash_initialised_in_no_memory(void)
{
    sxe_hash_t *hash;
    assert_int_equal(sxe_hash_init(&hash, NULL, sizeof(hash_memory), &small_hash), -EINVAL);
}

static void hash_initialised_without_options(void)
{
    sxe_hash_t *hash;
    assert_int_equal(sxe_hash_init(&hash, hash_memory, sizeof(hash_memory), NULL), -EINVAL);
}

static void hash_initialised_in_a_byte_too_little(void)
{
    sxe_hash_t *hash;
    assert_int_equal(sxe_hash_init(&hash, hash_memory, sxe_hash_size(&small_hash) - 1, &small_hash),
                     -EINVAL);
}

static void hash_put_in_no_table(void)
{
    uint64_t value = 2;
    assert_int_equal(sxe_hash_put(NULL, &hash_key, 8, &value, 8), -EINVAL);
}

/* A put of no key: refused, and key 1 keeps its value. */
static void hash_put_of_no_key(void)
{
    sxe_hash_t *hash = fixed_hash();
    uint64_t value = 2;
    assert_int_equal(sxe_hash_put(hash, NULL, 8, &value, 8), -EINVAL);
    assert_int_equal(sxe_hash_get(hash, &hash_key, 8, &value, 8), 8);
    assert_int_equal(value, 10);
    sxe_hash_destroy(hash);
}

static void hash_put_of_a_value_past_4_gb(void)
{
    struct sxe_hash_options options = {.capacity = 8,
                                       .key_size = SXE_HASH_VARIABLE,
                                       .value_size = SXE_HASH_VARIABLE,
                                       .arena_bytes = 4096};
    sxe_hash_t *hash;
    assert_int_equal(sxe_hash_create(&hash, &options), 0);
    assert_int_equal(sxe_hash_put(hash, "k", 1, "v", (size_t)UINT32_MAX + 1), -EINVAL);
    assert_int_equal(sxe_hash_count(hash), 0);
    sxe_hash_destroy(hash);
}

static void hash_put_of_an_empty_key(void)
{
    sxe_hash_t *hash = variable_hash();
    assert_int_equal(sxe_hash_put(hash, "", 0, "vvvv", 4), -EINVAL);
    assert_int_equal(sxe_hash_count(hash), 0);
    sxe_hash_destroy(hash);
}

static void hash_get_of_no_table(void)
{
    uint64_t value;
    assert_int_equal(sxe_hash_get(NULL, &hash_key, 8, &value, 8), -EINVAL);
}

static void hash_get_of_no_key(void)
{
    sxe_hash_t *hash = fixed_hash();
    uint64_t value;
    assert_int_equal(sxe_hash_get(hash, NULL, 8, &value, 8), -EINVAL);
    sxe_hash_destroy(hash);
}

/* Refused, not missed: -EINVAL where an absent key is -ENOENT. */
static void hash_get_of_a_key_of_the_wrong_size(void)
{
    sxe_hash_t *hash = fixed_hash();
    uint64_t value;
    assert_int_equal(sxe_hash_get(hash, &hash_key, 4, &value, 8), -EINVAL);
    sxe_hash_destroy(hash);
}

static void hash_get_into_nothing(void)
{
    sxe_hash_t *hash = fixed_hash();
    assert_int_equal(sxe_hash_get(hash, &hash_key, 8, NULL, 8), -EINVAL);
    sxe_hash_destroy(hash);
}

static void hash_find_in_no_table(void)
{
    assert_null(sxe_hash_find(NULL, &hash_key, 8, NULL));
}

static void hash_find_of_no_key(void)
{
    sxe_hash_t *hash = fixed_hash();
    assert_null(sxe_hash_find(hash, NULL, 8, NULL));
    sxe_hash_destroy(hash);
}

static void hash_delete_in_no_table(void)
{
    assert_int_equal(sxe_hash_delete(NULL, &hash_key, 8), -EINVAL);
}

/* A delete of no key, or of a key of the wrong size: refused, and key 1 stays. */
static void hash_delete_with_a_bad_key(const void *key, size_t key_size)
{
    sxe_hash_t *hash = fixed_hash();
    assert_int_equal(sxe_hash_delete(hash, key, key_size), -EINVAL);
    assert_int_equal(sxe_hash_count(hash), 1);
    sxe_hash_destroy(hash);
}

static void hash_delete_of_no_key(void)
{
    hash_delete_with_a_bad_key(NULL, 8);
}

static void hash_delete_of_a_key_of_the_wrong_size(void)
{
    hash_delete_with_a_bad_key(&hash_key, 4);
}

/* The valid neighbours: a key of one byte, a get into nothing of capacity 0, a table in memory
 * of exactly its size. */
static void hash_valid(void)
{
    sxe_hash_t *hash = fixed_hash();
    assert_int_equal(sxe_hash_get(hash, &hash_key, 8, NULL, 0), 8);
    assert_non_null(sxe_hash_find(hash, &hash_key, 8, NULL));
    assert_int_equal(sxe_hash_delete(hash, &hash_key, 8), 0);
    sxe_hash_destroy(hash);
    hash = variable_hash();
    assert_int_equal(sxe_hash_put(hash, "k", 1, "vvvv", 4), 0);
    assert_int_equal(sxe_hash_get(hash, "k", 1, NULL, 0), 4);
    assert_int_equal(sxe_hash_delete(hash, "k", 1), 0);
    sxe_hash_destroy(hash);
    assert_int_equal(sxe_hash_init(&hash, hash_memory, sxe_hash_size(&small_hash), &small_hash), 0);
    sxe_hash_fini(hash);
}

static void fibers_without_a_loop(void)
{
    sxe_fibers_t *fibers;
    assert_int_equal(sxe_fibers_create(&fibers, NULL, NULL), -EINVAL);
}

static void fibers_created_nowhere(void)
{
    sxe_loop_t *loop;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_fibers_create(NULL, loop, NULL), -EINVAL);
    sxe_loop_destroy(loop);
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

static void server_with_http2_options(const struct sxe_http2_options *http2)
{
    struct sxe_http_server_options options = {.http2 = *http2};
    sxe_http_server_t *server;
    assert_int_equal(sxe_http_server_create(&server, NULL, &options), -EINVAL);
}

static void http2_window_past_2_g(void)
{
    server_with_http2_options(&(struct sxe_http2_options){.window = (uint32_t)INT32_MAX + 1});
}

static void http2_frames_under_16_k(void)
{
    server_with_http2_options(&(struct sxe_http2_options){.max_frame = 16383});
}

static void http2_frames_past_16_m(void)
{
    server_with_http2_options(&(struct sxe_http2_options){.max_frame = 16777216});
}

static void http2_valid(void)
{
    struct sxe_http_server_options options = {
        .http2 = {.max_streams = 1, .window = INT32_MAX, .max_frame = 16777215}};
    sxe_http_server_t *server;
    assert_int_equal(sxe_http_server_create(&server, NULL, &options), 0);
    sxe_http_server_destroy(server);
    options.http2.max_frame = 16384;
    assert_int_equal(sxe_http_server_create(&server, NULL, &options), 0);
    sxe_http_server_destroy(server);
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

static const struct sxe_test_invalid_use cases[] = {
    {"sxe_hash_find_many() of no table", find_many_in_no_hash, "hash != NULL"},
    {"sxe_hash_find_many() without keys", find_many_without_keys, "keys != NULL"},
    {"sxe_hash_find_many() without values", find_many_without_values, "values != NULL"},
    {"sxe_hash_find_many() of variable keys without their sizes",
     find_many_variable_keys_without_sizes, "key_sizes != NULL"},
    {"sxe_hash_create() with nowhere to put the table", hash_created_nowhere, "hash != NULL"},
    {"sxe_hash_create() without options", hash_created_without_options,
     "options_are_valid(options)"},
    {"sxe_hash_attach() with nowhere to put the table", hash_attached_nowhere, "hash != NULL"},
    {"sxe_hash_attach() to no file", hash_attached_to_no_path, "path != NULL"},
    {"sxe_hash_attach() without options", hash_attached_without_options,
     "options_are_valid(options)"},
    {"sxe_hash_attach() with an unknown flag", hash_attached_with_an_unknown_flag,
     "(flags & ~SXE_HASH_CREATE) == 0"},
    {"sxe_hash_init() with nowhere to put the table", hash_initialised_nowhere, "hash != NULL"},
    {"sxe_hash_init() in no memory", hash_initialised_in_no_memory, "memory != NULL"},
    {"sxe_hash_init() without options", hash_initialised_without_options,
     "options_are_valid(options)"},
    {"sxe_hash_init() in a byte too little", hash_initialised_in_a_byte_too_little,
     "size >= sxe_hash_size(options)"},
    {"sxe_hash_put() in no table", hash_put_in_no_table, "hash != NULL"},
    {"sxe_hash_put() of no key", hash_put_of_no_key, "key != NULL"},
    {"sxe_hash_put() of a value past 4 GB", hash_put_of_a_value_past_4_gb,
     "value_size <= UINT32_MAX"},
    {"sxe_hash_put() of an empty key", hash_put_of_an_empty_key, "key_size_fits(hash, key_size)"},
    {"sxe_hash_get() of no table", hash_get_of_no_table, "hash != NULL"},
    {"sxe_hash_get() of no key", hash_get_of_no_key, "key != NULL"},
    {"sxe_hash_get() of a 4-byte key", hash_get_of_a_key_of_the_wrong_size,
     "key_size_fits(hash, key_size)"},
    {"sxe_hash_get() into nothing", hash_get_into_nothing, "value != NULL || value_capacity == 0"},
    {"sxe_hash_find() in no table", hash_find_in_no_table, "hash != NULL"},
    {"sxe_hash_find() of no key", hash_find_of_no_key, "key != NULL"},
    {"sxe_hash_delete() in no table", hash_delete_in_no_table, "hash != NULL"},
    {"sxe_hash_delete() of no key", hash_delete_of_no_key, "key != NULL"},
    {"sxe_hash_delete() of a 4-byte key", hash_delete_of_a_key_of_the_wrong_size,
     "key_size_fits(hash, key_size)"},
    {"sxe_fibers_create() without a loop", fibers_without_a_loop, "loop != NULL"},
    {"sxe_fibers_create() with nowhere to put the pool", fibers_created_nowhere,
     "fibers_out != NULL"},
    {"sxe_fibers_create() with 3 GB stacks", fibers_with_a_stack_past_half_of_4_gb,
     "stack_size <= UINT32_MAX / 2"},
    {"sxe_fibers_create() of 2^31 fibers", fibers_past_half_of_4_g, "count <= UINT32_MAX / 2"},
    {"sxe_http_server_create() with an HTTP/2 window past 2^31 - 1", http2_window_past_2_g,
     "http2->window <= INT32_MAX"},
    {"sxe_http_server_create() with HTTP/2 frames under 16 KiB", http2_frames_under_16_k,
     "http2->max_frame >= 16384"},
    {"sxe_http_server_create() with HTTP/2 frames past 16 MiB", http2_frames_past_16_m,
     "http2->max_frame <= 16777215"},
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

static void test_each_invalid_use(void **state)
{
    (void)state;
    sxe_test_invalid_uses(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_the_valid_neighbours(void **state)
{
    (void)state;
    find_many_valid();
    hash_valid();
    client_valid();
    pool_valid();
    http2_valid();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_invalid_use),
        cmocka_unit_test(test_the_valid_neighbours),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
