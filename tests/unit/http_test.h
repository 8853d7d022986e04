/*
 * What every HTTP server test shares: the server under test on a free loopback port, turning its
 * loop, a client, and the teardown. The test programs' own harnesses (http_server_test.h,
 * http_defer_test.h) and the smaller test files build on it; each sets its server up with the
 * options and routes it tests.
 */
#ifndef SXE_HTTP_TEST_H
#define SXE_HTTP_TEST_H

#include "sxe/clock.h"
#include "sxe/http.h"
#include "sxe_test.h"
#include "sys.h"

static sxe_http_server_t *server;
static int port;

/* Time starts at a fixed instant, and moves only when a test moves it (http_test_turn). */
static inline void http_test_fake_clock(void)
{
    sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, 1795296612ULL * SXE_NS_PER_SEC);
}

/* The server listens on a free loopback port, which becomes the test's. */
static inline void http_test_listen(void)
{
    assert_int_equal(sxe_http_server_listen(server, "127.0.0.1:0"), 0);
    port = sxe_http_server_port(server);
    assert_true(port > 0);
}

/* Turns the server's loop five times, after moving fake time on by ns (none under a real clock). */
static inline void http_test_turn(uint64_t ns)
{
    sxe__sys_clock_advance(ns);
    for (int i = 0; i < 5; i++) {
        assert_true(sxe_loop_run_once(sxe_http_server_loop(server), SXE_NS_PER_MSEC) >= 0);
    }
}

static inline int teardown(void **state)
{
    (void)state;
    sxe_http_server_destroy(server);
    sxe__sys_reset();
    return 0;
}

#endif
