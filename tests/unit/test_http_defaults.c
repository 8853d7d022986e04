/*
 * What an HTTP server makes of its options (src/http/server/serve.c and request.c): each default
 * the header shows, in force; the loop it sizes for its own use (connections and a few more for
 * listeners, a buffer that holds a head and a small body, large buffers for larger bodies, a
 * buffer and a timer for each request that may be held, timers for sleeping fibers); and a body
 * limit held to what a loop passed in can hold. And the HTTP client's defaults, and pipelining
 * that only a client that may send a request twice takes.
 */
#include <stdint.h>

#include "../../src/http/server/server.h"
#include "http/client/client.h"
#include "sxe/clock.h"
#include "sxe/http_client.h"
#include "sxe_test.h"

static sxe_http_server_t *server;

static const struct sxe_loop_options *made(const struct sxe_http_server_options *options)
{
    assert_int_equal(sxe_http_server_create(&server, NULL, options), 0);
    return sxe_loop_options(sxe_http_server_loop(server));
}

static int teardown(void **state)
{
    (void)state;
    sxe_http_server_destroy(server);
    server = NULL;
    return 0;
}

static void test_the_defaults(void **state)
{
    const struct sxe_loop_options *loop = made(NULL);
    const struct http_config *config = &server->config;
    uint32_t buffer = 16384 + 48 * 1024 + 1024; /* a head, an inline body, slack */
    uint32_t large = 16384 + (1 << 20) + (1 << 20) / 64 + 1024;

    (void)state;
    assert_int_equal(loop->connections, 10000 + 16);
    assert_int_equal(loop->buffer_size, buffer);
    assert_int_equal(loop->large_buffers, 16);
    assert_int_equal(loop->large_buffer_size, large);
    assert_int_equal(loop->write_limit, large); /* the largest body may be echoed whole */
    assert_int_equal(loop->high_water, 2 * buffer);
    assert_int_equal(loop->read_timeout, 10 * SXE_NS_PER_SEC);
    assert_int_equal(loop->idle_timeout, 60 * SXE_NS_PER_SEC);
    assert_int_equal(loop->write_timeout, 30 * SXE_NS_PER_SEC);
    assert_int_equal(loop->buffers, (10000 + 16) / 4 + 16 + 256);
    assert_int_equal(loop->timers, 64 + 256 + 256);

    assert_memory_equal(&config->limits, &sxe_http_default_limits, sizeof(config->limits));
    assert_int_equal(config->held_max, 256);
    assert_int_equal(server->slot_capacity, 256 + 1);
    assert_int_equal(config->response_timeout, 30 * SXE_NS_PER_SEC);
    assert_int_equal(config->body_rate, 4096);
    assert_true(config->stream_body_bytes == UINT64_MAX);
}

/* Bodies that fit the ordinary buffer: no large buffers, and the loop's own write limit. */
static void test_small_bodies_take_no_large_buffers(void **state)
{
    const struct sxe_loop_options *loop = made(&(struct sxe_http_server_options){
        .limits = {.header_bytes = 4096, .body_bytes = 48 * 1024}});

    (void)state;
    assert_int_equal(loop->buffer_size, 4096 + 48 * 1024 + 1024);
    assert_int_equal(loop->large_buffers, 0);
    assert_int_equal(loop->write_limit, 4 * loop->buffer_size);
    assert_int_equal(server->config.limits.body_bytes, 48 * 1024);
    assert_int_equal(server->config.limits.request_line, 8192);
}

/* Each option given is what the loop is sized by, and a loop size given is kept. */
static void test_options_given(void **state)
{
    const struct sxe_loop_options *loop = made(&(struct sxe_http_server_options){
        .loop = {.connections = 100, .timers = 5, .write_limit = 300000},
        .limits = {.body_bytes = 2 << 20},
        .header_timeout = 1,
        .idle_timeout = 2,
        .write_timeout = 3,
        .deferred = 10,
        .response_timeout = 4,
        .fibers = 20,
        .large_bodies = 3,
        .body_rate = 5,
        .stream_body_bytes = 6});

    (void)state;
    assert_int_equal(loop->connections, 116);
    assert_int_equal(loop->buffers, 116 / 4 + 16 + 10);
    assert_int_equal(loop->timers, 5 + 10 + 20);
    assert_int_equal(loop->large_buffers, 3);
    assert_int_equal(loop->large_buffer_size, 16384 + (2 << 20) + (2 << 20) / 64 + 1024);
    assert_int_equal(loop->write_limit, 300000);
    assert_int_equal(loop->read_timeout, 1);
    assert_int_equal(loop->idle_timeout, 2);
    assert_int_equal(loop->write_timeout, 3);
    assert_int_equal(server->config.held_max, 10);
    assert_int_equal(server->slot_capacity, 11);
    assert_int_equal(server->config.response_timeout, 4);
    assert_int_equal(server->config.body_rate, 5);
    assert_int_equal(server->config.stream_body_bytes, 6);
    assert_int_equal(server->config.limits.body_bytes, 2 << 20);
}

/* A loop passed in keeps its sizes: bodies are held to what its largest buffer holds beside a
 * head, and to nothing when a head fills it. */
static void test_a_loop_passed_in_bounds_bodies(void **state)
{
    const uint32_t sizes[] = {32768, 16384, 8192};
    const uint64_t bodies[] = {32768 - 16384, 0, 0};

    (void)state;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        sxe_loop_t *loop;
        assert_int_equal(
            sxe_loop_create(&loop,
                            &(struct sxe_loop_options){.connections = 8, .buffer_size = sizes[i]}),
            0);
        assert_int_equal(sxe_http_server_create(&server, loop, NULL), 0);
        assert_int_equal(server->config.limits.body_bytes, bodies[i]);
        sxe_http_server_destroy(server);
        server = NULL;
        sxe_loop_destroy(loop);
    }
}

/* The client's defaults; options given are kept; pipelining is for clients that may retry. */
static void test_the_client_defaults(void **state)
{
    sxe_loop_t *loop;
    sxe_http_client_t *client;
    const struct sxe_http_client_options *in_force;

    (void)state;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_http_client_create(&client, loop, "127.0.0.1:1", NULL), 0);
    in_force = &client->options;
    assert_int_equal(in_force->connections, 64);
    assert_int_equal(in_force->queue, 256);
    assert_int_equal(in_force->timeout, 30 * SXE_NS_PER_SEC);
    assert_int_equal(in_force->pipeline, 1);
    assert_memory_equal(&in_force->limits, &sxe_http_default_limits, sizeof(in_force->limits));
    assert_true(client->stream_limits.body_bytes == UINT64_MAX);
    assert_int_equal(client->stream_limits.header_bytes, 16384);
    assert_string_equal(in_force->host, "127.0.0.1:1");
    assert_int_equal(client->calls_count, 64 + 256);
    sxe_http_client_destroy(client);

    struct sxe_http_client_options given = {
        .connections = 3,
        .queue = 4,
        .timeout = 5,
        .limits = {.request_line = 6, .header_bytes = 7, .header_count = 8, .body_bytes = 9},
        .host = "h",
        .pipeline = 2};
    assert_int_equal(sxe_http_client_create(&client, loop, "127.0.0.1:1", &given), 0);
    in_force = &client->options;
    assert_int_equal(in_force->connections, 3);
    assert_int_equal(in_force->queue, 4);
    assert_int_equal(in_force->timeout, 5);
    assert_int_equal(in_force->pipeline, 2);
    assert_memory_equal(&in_force->limits, &given.limits, sizeof(given.limits));
    assert_string_equal(in_force->host, "h");
    assert_int_equal(client->calls_count, 3 * 2 + 4);
    sxe_http_client_destroy(client);

    given.no_retry = true; /* a pipelined request may have to be sent again */
    assert_int_equal(sxe_http_client_create(&client, loop, "127.0.0.1:1", &given), 0);
    assert_int_equal(client->options.pipeline, 1);
    sxe_http_client_destroy(client);
    sxe_loop_destroy(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_the_defaults, teardown),
        cmocka_unit_test_teardown(test_small_bodies_take_no_large_buffers, teardown),
        cmocka_unit_test_teardown(test_options_given, teardown),
        cmocka_unit_test_teardown(test_a_loop_passed_in_bounds_bodies, teardown),
        cmocka_unit_test(test_the_client_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
