/*
 * Invalid use of the connection calls, one argument wrong at a time: every clause of each check
 * (SXE_CHECK(a && b && c)) fails alone, an assertion naming the check in debug builds and the
 * documented error in release builds; then each call with every argument right works.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/loop.h"
#include "sxe/timer.h"
#include "sxe/udp.h"
#include "sxe_test.h"

static const struct sxe_conn_handlers handlers = {0};
static struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = 0};
#define ADDRESS ((const struct sockaddr *)&address), sizeof(address)

static sxe_loop_t *new_loop(void)
{
    sxe_loop_t *loop;

    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    return loop;
}

/* Each case makes its call with a loop of its own (or none), and checks the error it returns. */
#define CASE(name, rc, call)                                                                       \
    static void name(void)                                                                         \
    {                                                                                              \
        sxe_loop_t *loop = new_loop();                                                             \
        sxe_conn_t *conn, *other;                                                                  \
        (void)conn, (void)other;                                                                   \
        assert_int_equal(call, rc);                                                                \
        sxe_loop_destroy(loop);                                                                    \
    }

CASE(listen_without_a_loop, -EINVAL, sxe_conn_listen(NULL, &conn, ADDRESS, NULL, &handlers, NULL))
CASE(listen_nowhere, -EINVAL, sxe_conn_listen(loop, NULL, ADDRESS, NULL, &handlers, NULL))
CASE(listen_at_no_address, -EINVAL,
     sxe_conn_listen(loop, &conn, NULL, sizeof(address), NULL, &handlers, NULL))
CASE(connect_without_a_loop, -EINVAL, sxe_conn_connect(NULL, &conn, ADDRESS, NULL, &handlers, NULL))
CASE(connect_nowhere, -EINVAL, sxe_conn_connect(loop, NULL, ADDRESS, NULL, &handlers, NULL))
CASE(connect_to_no_address, -EINVAL,
     sxe_conn_connect(loop, &conn, NULL, sizeof(address), NULL, &handlers, NULL))
CASE(connect_without_handlers, -EINVAL, sxe_conn_connect(loop, &conn, ADDRESS, NULL, NULL, NULL))
CASE(pair_without_a_loop, -EINVAL, sxe_conn_pair(NULL, &conn, &other, 0, &handlers, NULL))
CASE(pair_without_a, -EINVAL, sxe_conn_pair(loop, NULL, &other, 0, &handlers, NULL))
CASE(pair_without_b, -EINVAL, sxe_conn_pair(loop, &conn, NULL, 0, &handlers, NULL))
CASE(pair_without_handlers, -EINVAL, sxe_conn_pair(loop, &conn, &other, 0, NULL, NULL))
CASE(adopt_without_a_loop, -EINVAL, sxe_conn_adopt(NULL, &conn, 0, &handlers, NULL))
CASE(adopt_nowhere, -EINVAL, sxe_conn_adopt(loop, NULL, 0, &handlers, NULL))
CASE(adopt_no_descriptor, -EINVAL, sxe_conn_adopt(loop, &conn, -1, &handlers, NULL))
CASE(adopt_without_handlers, -EINVAL, sxe_conn_adopt(loop, &conn, 0, NULL, NULL))
CASE(udp_without_a_loop, -EINVAL, sxe_udp_bind(NULL, &conn, ADDRESS, &handlers, NULL))
CASE(udp_nowhere, -EINVAL, sxe_udp_bind(loop, NULL, ADDRESS, &handlers, NULL))
CASE(udp_at_no_address, -EINVAL, sxe_udp_bind(loop, &conn, NULL, sizeof(address), &handlers, NULL))
CASE(udp_without_handlers, -EINVAL, sxe_udp_bind(loop, &conn, ADDRESS, NULL, NULL))

/* A pair, connected (its ends are not until the loop turns). */
static void open_pair(sxe_loop_t *loop, sxe_conn_t **a, sxe_conn_t **b)
{
    assert_int_equal(sxe_conn_pair(loop, a, b, 0, &handlers, NULL), 0);
    for (int i = 0; i < 3; i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
    }
}

/* Calls on a pair's first end (the loop destroyed after closes both). */
#define ON_A_PAIR(name, rc, call) CASE(name, rc, (open_pair(loop, &conn, &other), call))

ON_A_PAIR(handlers_of_no_conn, -EINVAL, sxe_conn_set_handlers(NULL, &handlers))
ON_A_PAIR(no_handlers, -EINVAL, sxe_conn_set_handlers(conn, NULL))
ON_A_PAIR(sendfile_of_no_descriptor, -EBADF, sxe_conn_sendfile(conn, -1, 0, 1))
ON_A_PAIR(write_of_nothing, -EINVAL, sxe_conn_write_ref(conn, NULL, 1, NULL, NULL))

static void timer_without_a_callback(void)
{
    sxe_loop_t *loop = new_loop();
    sxe_timer_t timer = {0};

    assert_int_equal(sxe_timer_start(loop, &timer, 1, 0), -EINVAL);
    sxe_loop_destroy(loop);
}

static const struct sxe_test_invalid_use cases[] = {
    {"sxe_conn_listen() without a loop", listen_without_a_loop, "loop != NULL"},
    {"sxe_conn_listen() with nowhere to put it", listen_nowhere, "listener != NULL"},
    {"sxe_conn_listen() at no address", listen_at_no_address, "address != NULL"},
    {"sxe_conn_connect() without a loop", connect_without_a_loop, "loop != NULL"},
    {"sxe_conn_connect() with nowhere to put it", connect_nowhere, "conn_out != NULL"},
    {"sxe_conn_connect() to no address", connect_to_no_address, "address != NULL"},
    {"sxe_conn_connect() without handlers", connect_without_handlers, "handlers != NULL"},
    {"sxe_conn_pair() without a loop", pair_without_a_loop, "loop != NULL"},
    {"sxe_conn_pair() with nowhere to put a", pair_without_a, "a != NULL"},
    {"sxe_conn_pair() with nowhere to put b", pair_without_b, "b != NULL"},
    {"sxe_conn_pair() without handlers", pair_without_handlers, "handlers != NULL"},
    {"sxe_conn_adopt() without a loop", adopt_without_a_loop, "loop != NULL"},
    {"sxe_conn_adopt() with nowhere to put it", adopt_nowhere, "conn != NULL"},
    {"sxe_conn_adopt() of descriptor -1", adopt_no_descriptor, "fd >= 0"},
    {"sxe_conn_adopt() without handlers", adopt_without_handlers, "handlers != NULL"},
    {"sxe_udp_bind() without a loop", udp_without_a_loop, "loop != NULL"},
    {"sxe_udp_bind() with nowhere to put it", udp_nowhere, "socket_out != NULL"},
    {"sxe_udp_bind() at no address", udp_at_no_address, "address != NULL"},
    {"sxe_udp_bind() without handlers", udp_without_handlers, "handlers != NULL"},
    {"sxe_conn_set_handlers() of no connection", handlers_of_no_conn, "conn != NULL"},
    {"sxe_conn_set_handlers() to none", no_handlers, "handlers != NULL"},
    {"sxe_conn_sendfile() of descriptor -1", sendfile_of_no_descriptor, "fd >= 0"},
    {"sxe_conn_write_ref() of 1 byte at NULL", write_of_nothing, "data != NULL || len == 0"},
    {"sxe_timer_start() without a callback", timer_without_a_callback, "timer->callback != NULL"},
};

static void test_each_invalid_use(void **state)
{
    (void)state;
    sxe_test_invalid_uses(cases, sizeof(cases) / sizeof(cases[0]));
}

/* The valid neighbours: each call with every argument right (descriptor 0 adopted: a pipe's). */
static void test_the_valid_neighbours(void **state)
{
    sxe_loop_t *loop = new_loop();
    sxe_conn_t *conn, *other, *listener, *udp, *adopted;
    int fds[2];

    (void)state;
    assert_int_equal(sxe_conn_listen(loop, &listener, ADDRESS, NULL, &handlers, NULL), 0);
    socklen_t len = sizeof(address);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&address, &len), 0);
    assert_int_equal(sxe_conn_connect(loop, &conn, ADDRESS, NULL, &handlers, NULL), 0);
    address.sin_port = 0;
    assert_int_equal(sxe_udp_bind(loop, &udp, ADDRESS, &handlers, NULL), 0);
    open_pair(loop, &conn, &other);
    assert_int_equal(sxe_conn_set_handlers(conn, &handlers), 0);
    assert_int_equal(sxe_conn_write_ref(conn, NULL, 0, NULL, NULL), 0);
    int saved = dup(0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    assert_int_equal(dup2(fds[0], 0), 0);
    close(fds[0]);
    assert_int_equal(sxe_conn_adopt(loop, &adopted, 0, &handlers, NULL), 0);
    sxe_loop_destroy(loop); /* closes descriptor 0 with the connection */
    assert_int_equal(dup2(saved, 0), 0);
    close(saved);
    close(fds[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_invalid_use),
        cmocka_unit_test(test_the_valid_neighbours),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
