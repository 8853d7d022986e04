/*
 * Blocking-style connections from fibers (sxe_fiber_connect, read, write, close) against servers
 * on the same loop: an echo that closes on "quit", a talker that sends 100 bytes at once, and a
 * sink that counts; a refused connect; reads smaller than what arrived; writes paced by the
 * output's high water; invalid use.
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/fiber.h"
#include "sxe/timer.h"
#include "sxe_test.h"

static sxe_loop_t *loop;
static sxe_fibers_t *fibers;
static sxe_conn_t *listener;
static struct sockaddr_in address;
static bool done;
static size_t sunk; /* bytes the sink server read */

static sxe_timer_t stall_timer;
static uint64_t written_before_close;

static void end_stall(sxe_timer_t *timer, void *arg)
{
    (void)timer;
    (void)sxe_conn_resume(arg);
}

/*
 * The server side: echo, or with "quit" a close; "talk" gets 100 bytes; "sink" counts the rest;
 * "stall" does too, but reads nothing for 50 ms first.
 */
static size_t serve(sxe_conn_t *conn, const char *data, size_t len)
{
    if (sxe_conn_user(conn) != NULL) { /* a sink */
        sunk += len;
        return len;
    }
    if (len >= 4 && memcmp(data, "quit", 4) == 0) {
        (void)sxe_conn_close_when_sent(conn);
        return len;
    }
    if (len >= 4 && memcmp(data, "sink", 4) == 0) {
        sxe_conn_set_user(conn, &sunk);
        sunk += len - 4;
        return len;
    }
    if (len >= 5 && memcmp(data, "stall", 5) == 0) {
        sxe_conn_set_user(conn, &sunk);
        (void)sxe_conn_pause(conn);
        sxe_timer_init(&stall_timer, end_stall, conn);
        assert_int_equal(sxe_timer_start(loop, &stall_timer, 50 * SXE_NS_PER_MSEC, 0), 0);
        return 5;
    }
    if (len >= 4 && memcmp(data, "talk", 4) == 0) {
        char talk[100];
        for (int i = 0; i < 100; i++) {
            talk[i] = (char)('a' + i % 26);
        }
        (void)sxe_conn_write(conn, talk, sizeof(talk));
        return len;
    }
    (void)sxe_conn_write(conn, data, len);
    return len;
}

static const struct sxe_conn_handlers server_handlers = {.on_read = serve};

static int setup(void **state)
{
    struct sxe_loop_options options = {.connections = 16};
    struct sxe_fibers_options fiber_options = {.count = 4, .stack_size = 65536};
    socklen_t len = sizeof(address);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

    (void)state;
    done = false;
    sunk = 0;
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    assert_int_equal(sxe_fibers_create(&fibers, loop, &fiber_options), 0);
    assert_int_equal(sxe_conn_listen(loop, &listener, (struct sockaddr *)&any, sizeof(any), NULL,
                                     &server_handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&address, &len), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_fibers_destroy(fibers);
    sxe_loop_destroy(loop);
    return 0;
}

/* Runs the loop until the fiber says it is done (5 s at most). */
static void run_until_done(void)
{
    uint64_t deadline = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;

    while (!done) {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
        assert_true(sxe_clock_mono_ns() < deadline);
    }
}

/* Reads exactly len bytes. */
static void read_exactly(sxe_fiber_stream_t *stream, char *out, size_t len, size_t piece)
{
    size_t have = 0;

    while (have < len) {
        ssize_t got = sxe_fiber_read(stream, out + have, piece < len - have ? piece : len - have);
        assert_true(got > 0);
        have += (size_t)got;
    }
}

static void echo_client(void *arg)
{
    sxe_fiber_stream_t stream;
    char buf[64];

    (void)arg;
    assert_int_equal(sxe_fiber_connect(&stream, loop, (struct sockaddr *)&address, sizeof(address)),
                     0);
    assert_int_equal(sxe_fiber_write(&stream, "hello", 5), 0);
    read_exactly(&stream, buf, 5, sizeof(buf));
    assert_memory_equal(buf, "hello", 5);
    assert_int_equal(sxe_fiber_write(&stream, "quit", 4), 0);
    assert_int_equal(sxe_fiber_read(&stream, buf, sizeof(buf)), 0); /* the server's end */
    sxe_fiber_close(&stream);
    assert_int_equal(sxe_fiber_read(&stream, buf, sizeof(buf)), -EPIPE);
    assert_int_equal(sxe_fiber_write(&stream, "x", 1), -EPIPE);
    done = true;
}

static void test_a_fiber_talks_to_a_server_as_sequential_code(void **state)
{
    (void)state;
    assert_int_equal(sxe_fiber_start(fibers, echo_client, NULL, NULL), 0);
    run_until_done();
}

static void small_reads(void *arg)
{
    sxe_fiber_stream_t stream;
    char buf[100];

    (void)arg;
    assert_int_equal(sxe_fiber_connect(&stream, loop, (struct sockaddr *)&address, sizeof(address)),
                     0);
    assert_int_equal(sxe_fiber_write(&stream, "talk", 4), 0);
    read_exactly(&stream, buf, 100, 7); /* 100 bytes arrive at once, taken 7 at a time */
    for (int i = 0; i < 100; i++) {
        assert_int_equal(buf[i], 'a' + i % 26);
    }
    sxe_fiber_close(&stream);
    done = true;
}

static void test_reads_smaller_than_what_arrived_take_it_in_order(void **state)
{
    (void)state;
    assert_int_equal(sxe_fiber_start(fibers, small_reads, NULL, NULL), 0);
    run_until_done();
}

/* Writes its greeting ("sink", or "stall"), then 4 MB: far past the output's high water. */
static void big_writer(void *arg)
{
    static char piece[65536];
    const char *greeting = arg;
    sxe_fiber_stream_t stream;

    assert_int_equal(sxe_fiber_connect(&stream, loop, (struct sockaddr *)&address, sizeof(address)),
                     0);
    assert_int_equal(sxe_fiber_write(&stream, greeting, strlen(greeting)), 0);
    for (int i = 0; i < 64; i++) {
        assert_int_equal(sxe_fiber_write(&stream, piece, sizeof(piece)), 0);
    }
    sxe_fiber_close(&stream);
    done = true;
}

/* Runs big_writer with greeting, and the loop until the server has had all 4 MB. */
static void write_big(const char *greeting)
{
    uint64_t deadline = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;

    assert_int_equal(sxe_fiber_start(fibers, big_writer, (void *)(uintptr_t)greeting, NULL), 0);
    run_until_done();
    while (sunk < 64 * 65536 && sxe_clock_mono_ns() < deadline) { /* the last bytes drain */
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
    assert_int_equal(sunk, 64 * 65536);
}

static void test_writes_wait_while_the_output_is_backed_up(void **state)
{
    (void)state;
    write_big("sink");
}

/* To a stalled peer, writes until some output waits in the connection (under its high water, so
 * the write returns at once), then closes: the rest goes out after the stream is gone. */
static void close_with_output_waiting(void *arg)
{
    static char piece[1000];
    sxe_fiber_stream_t stream;
    uint64_t written = 0;

    (void)arg;
    assert_int_equal(sxe_fiber_connect(&stream, loop, (struct sockaddr *)&address, sizeof(address)),
                     0);
    assert_int_equal(sxe_fiber_write(&stream, "stall", 5), 0);
    while (sxe_conn_queued(stream.conn) == 0) {
        assert_true(written < 64 * 1024 * 1024);
        assert_int_equal(sxe_fiber_write(&stream, piece, sizeof(piece)), 0);
        written += sizeof(piece);
    }
    sxe_fiber_close(&stream);
    written_before_close = written;
    done = true;
}

static void test_output_waiting_at_close_goes_out_after_the_stream(void **state)
{
    uint64_t deadline = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;

    (void)state;
    assert_int_equal(sxe_fiber_start(fibers, close_with_output_waiting, NULL, NULL), 0);
    run_until_done();
    while (sunk < written_before_close && sxe_clock_mono_ns() < deadline) {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
    assert_int_equal(sunk, written_before_close);
}

static void refused(void *arg)
{
    sxe_fiber_stream_t stream;
    char buf[8];
    struct sockaddr_in nobody = address;

    (void)arg;
    sxe_conn_close(listener); /* its port now refuses */
    assert_int_equal(sxe_fiber_connect(&stream, loop, (struct sockaddr *)&nobody, sizeof(nobody)),
                     -ECONNREFUSED);
    assert_int_equal(sxe_fiber_read(&stream, buf, sizeof(buf)), -ECONNREFUSED);
    sxe_fiber_close(&stream);
    done = true;
}

/* A fiber that stops reading holds the rest back in the connection, and gets it later. */
static void slow_reader(void *arg)
{
    sxe_fiber_stream_t stream;
    char buf[100];

    (void)arg;
    assert_int_equal(sxe_fiber_connect(&stream, loop, (struct sockaddr *)&address, sizeof(address)),
                     0);
    assert_int_equal(sxe_fiber_write(&stream, "talk", 4), 0);
    read_exactly(&stream, buf, 7, 7);
    assert_int_equal(sxe_fiber_sleep(20 * SXE_NS_PER_MSEC), 0); /* the rest waits, paused */
    assert_int_equal(sxe_fiber_read(&stream, buf + 7, 0), 0);
    read_exactly(&stream, buf + 7, 93, 93);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(buf[i], 'a' + i % 26);
    }
    assert_int_equal(sxe_fiber_write(&stream, "quit", 4), 0);
    assert_int_equal(sxe_fiber_read(&stream, buf, sizeof(buf)), 0); /* the server's end */
    assert_int_equal(sxe_fiber_read(&stream, buf, sizeof(buf)), 0); /* and again, at once */
    sxe_fiber_close(&stream);
    done = true;
}

static void test_a_fiber_that_stops_reading_gets_the_rest_later(void **state)
{
    (void)state;
    assert_int_equal(sxe_fiber_start(fibers, slow_reader, NULL, NULL), 0);
    run_until_done();
}

/* Writes to a peer that reads nothing for a while wait for the output to drain, then go on. */
static void test_writes_to_a_stalled_peer_wait_and_go_on(void **state)
{
    (void)state;
    write_big("stall");
}

static void test_a_refused_connect_says_so(void **state)
{
    (void)state;
    assert_int_equal(sxe_fiber_start(fibers, refused, NULL, NULL), 0);
    run_until_done();
}

static void read_outside_a_fiber(void *arg)
{
    char buf[4];
    (void)sxe_fiber_read(arg, buf, sizeof(buf));
}

static void test_invalid_use(void **state)
{
    sxe_fiber_stream_t stream = {0};

    (void)state;
#ifdef SXE_DEBUG
    const char *const expected[] = {"sxe_fiber_self() != NULL", NULL};
    sxe_test_expect_abort(read_outside_a_fiber, &stream, expected);
#else
    char buf[4];
    (void)read_outside_a_fiber;
    assert_int_equal(sxe_fiber_read(&stream, buf, sizeof(buf)), -EPERM);
    assert_int_equal(sxe_fiber_write(&stream, buf, sizeof(buf)), -EPERM);
    assert_int_equal(sxe_fiber_connect(&stream, loop, (struct sockaddr *)&address, sizeof(address)),
                     -EPERM);
#endif
    sxe_fiber_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_fiber_talks_to_a_server_as_sequential_code, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reads_smaller_than_what_arrived_take_it_in_order,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_writes_wait_while_the_output_is_backed_up, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_that_stops_reading_gets_the_rest_later, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_output_waiting_at_close_goes_out_after_the_stream,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_writes_to_a_stalled_peer_wait_and_go_on, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_refused_connect_says_so, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_use, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
