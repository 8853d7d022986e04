/*
 * What a held request can do later: switch protocols (sxe_http_upgrade() on a held request), run
 * on a fiber of its own (fiber routes), and what it must not (invalid use of the handle).
 */
#include "http_defer_test.h"

static const char switch_request[] =
    "GET /switch HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: raw\r\n\r\n";

static void test_a_held_request_switches_protocols_later(void **state)
{
    char out[1024] = "";
    int fd = client();

    (void)state;
    sxe_test_say(fd, switch_request);
    sxe_test_say(fd, "early|"); /* before the 101: the new protocol's, not a request */
    pump(0);
    pump(10 * SXE_NS_PER_MSEC);
    assert_int_equal(switch_rc, 0);
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_memory_equal(out, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: raw\r\n", 48);
    sxe_test_say(fd, "late");
    pump(0);
    assert_string_equal(raw_read, "early|late");
    assert_string_equal(log_lines, "/switch 101 0\n");
    struct sxe_http_defer_stats stats;
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 0);
    close(fd);
    pump(0);
    assert_int_equal(raw_closes, 1);
}

static void test_a_switched_connection_closed_at_once_is_the_new_protocols(void **state)
{
    char out[1024] = "";
    int fd = client();

    (void)state;
    close_at_switch = true;
    sxe_test_say(fd, switch_request);
    pump(0);
    pump(10 * SXE_NS_PER_MSEC);
    assert_int_equal(switch_rc, 0);
    assert_int_equal(raw_closes, 1); /* its on_close, though the module still had the bytes */
    assert_string_equal(raw_read, "");
    while (sxe_test_heard(fd, out, sizeof(out)) > 0) {
    }
    close(fd);
}

static void test_a_held_request_whose_client_left_cannot_switch(void **state)
{
    int fd = client();

    (void)state;
    sxe_test_say(fd, switch_request);
    pump(0);
    close(fd);
    pump(0);
    pump(10 * SXE_NS_PER_MSEC);
    assert_int_equal(switch_rc, -ECANCELED);
    assert_int_equal(raw_closes, 0);
}

static sxe_http_t *twice_first;

static void defer_twice(void *arg)
{
    sxe_http_t *http = arg;
    (void)!sxe_http_defer(http, NULL, NULL);
}

static void set_drained_of_nothing(void *arg)
{
    (void)arg;
    (void)sxe_http_set_drained(NULL, NULL, NULL);
}

static void abort_not_held(void *arg)
{
    (void)sxe_http_abort(arg);
}

static void invalid(sxe_http_t *http, void *arg)
{
    (void)arg;
#ifndef SXE_DEBUG
    assert_int_equal(sxe_http_set_drained(http, NULL, NULL), -EINVAL); /* not held (yet) */
    assert_int_equal(sxe_http_abort(http), -EINVAL);
    assert_int_equal(sxe_http_abort(NULL), -EINVAL);
#else
    const char *const not_held[] = {"assertion failed: held != NULL && held->held", NULL};
    sxe_test_expect_abort(abort_not_held, http, not_held);
#endif
    assert_int_equal(sxe_http_defer(http, NULL, NULL), 0);
    twice_first = http; /* held in the slot it has had since its dispatch */
#ifdef SXE_DEBUG
    const char *const expected[] = {"!http->held", NULL};
    sxe_test_expect_abort(defer_twice, http, expected);
    const char *const no_handle[] = {"assertion failed: held != NULL", NULL};
    sxe_test_expect_abort(set_drained_of_nothing, NULL, no_handle);
#else
    (void)defer_twice;
    (void)set_drained_of_nothing;
    (void)abort_not_held;
    assert_int_equal(sxe_http_defer(http, NULL, NULL), -EINVAL);
    assert_int_equal(sxe_http_set_drained(NULL, NULL, NULL), -EINVAL);
#endif
    assert_int_equal(sxe_http_set_drained(twice_first, NULL, NULL), 0);
    assert_int_equal(sxe_http_respond(twice_first, 204, NULL, NULL, 0), 0);
}

static void test_invalid_use(void **state)
{
    char out[1024] = "";
    int fd = client();

    (void)state;
    assert_int_equal(sxe_http_server_route(server, "GET", "/invalid", 0, invalid, NULL), 0);
    sxe_test_say(fd, "GET /invalid HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "204 No Content"));
    close(fd);
}

/* A handler that answers another held request, then holds its own: the other's slot given back
 * (here one after the handler's own in the table) leaves the handler's request the one running. */
static sxe_http_t *holding[2];
static unsigned holding_count;
static int own_defer_rc = 1;

static void hold(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_http_defer(http, NULL, NULL), 0);
    holding[holding_count++ % 2] = http;
}

static void answer_then_hold(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_http_respond(holding[1], 200, "text/plain", "second\n", 7), 0);
    own_defer_rc = sxe_http_defer(http, NULL, NULL);
    assert_int_equal(sxe_http_respond(http, 204, NULL, NULL, 0), 0);
}

static void test_answering_another_held_request_from_a_handler(void **state)
{
    char out[1024] = "";
    int first = client(), second = client(), third = client();

    (void)state;
    holding_count = 0;
    assert_int_equal(sxe_http_server_route(server, "GET", "/hold", 0, hold, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, "GET", "/answer", 0, answer_then_hold, NULL), 0);
    sxe_test_say(first, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_say(second, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    assert_int_equal(holding_count, 2);
    /* The first is answered from outside: its slot, the table's first, is the next one taken. */
    assert_int_equal(sxe_http_respond(holding[0], 200, "text/plain", "first\n", 6), 0);
    pump(0);
    sxe_test_say(third, "GET /answer HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    assert_int_equal(own_defer_rc, 0);
    sxe_test_heard(second, out, sizeof(out));
    assert_non_null(strstr(out, "\r\n\r\nsecond\n"));
    sxe_test_heard(third, out, sizeof(out));
    assert_non_null(strstr(out, "204 No Content"));
    close(first);
    close(second);
    close(third);
}

static void test_fiber_routes_wait_as_sequential_code(void **state)
{
    char out[4096] = "";
    int fd = client();

    (void)state;
    sxe_test_say(fd, "GET /fiber HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    assert_string_equal(out, "");
    int busy = client(); /* the only fiber sleeps: a second fiber request is refused */
    char busy_out[1024] = "";
    sxe_test_say(busy, "GET /fiber HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_heard(busy, busy_out, sizeof(busy_out));
    assert_non_null(strstr(busy_out, "Content-Length: 24\r\n"));
    assert_non_null(strstr(busy_out, "\r\n\r\n503 Service Unavailable\n")); /* its body, whole */
    pump(5 * SXE_NS_PER_MSEC);
    pump(0);
    sxe_test_heard(fd, out, sizeof(out));
    char *first = strstr(out, "from a fiber\n"), *second = strstr(out, "hello\n");
    assert_non_null(first);
    assert_non_null(second);
    assert_true(first < second);
    assert_int_equal(fiber_rc, 0);

    out[0] = '\0'; /* a fiber handler that does not answer gets 500 for it */
    sxe_test_say(fd, "GET /fiber/mute HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    pump(5 * SXE_NS_PER_MSEC);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "HTTP/1.1 500 Internal Server Error\r\n"));
    assert_string_equal(log_lines, "/fiber 503 24\n/fiber 200 13\n/ 200 6\n/fiber/mute 500 26\n");
    assert_non_null(strstr(out, "Content-Length: 26\r\n"));
    assert_non_null(strstr(out, "\r\n\r\n500 Internal Server Error\n")); /* its body, whole */
    close(fd);
    close(busy);
}

/* Every held request's slot is taken: a fiber route, which holds its request, answers 503. */
static void test_a_fiber_route_with_no_slot_to_hold_in_answers_503(void **state)
{
    char out[1024] = "";
    int one = client(), two = client(), third = client();

    (void)state;
    sxe_test_say(one, "GET /never HTTP/1.1\r\nHost: x\r\n\r\n");
    sxe_test_say(two, "GET /never HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_say(third, "GET /fiber HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_test_heard(third, out, sizeof(out));
    assert_non_null(strstr(out, "HTTP/1.1 503 Service Unavailable\r\n"));
    assert_non_null(strstr(out, "Content-Length: 24\r\n"));
    assert_non_null(strstr(out, "\r\n\r\n503 Service Unavailable\n"));
    assert_int_equal(fiber_rc, 1); /* its handler never ran */
    close(one);
    close(two);
    close(third);
}

static void test_a_fiber_whose_client_left_is_told_at_its_next_call(void **state)
{
    struct sxe_http_defer_stats stats;
    int fd = client();

    (void)state;
    sxe_test_say(fd, "GET /fiber HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    close(fd);
    pump(0);
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.cancelled, 1);
    pump(5 * SXE_NS_PER_MSEC);
    assert_int_equal(fiber_rc, -ECANCELED);
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 0);
    /* Its fiber is free again. */
    fd = client();
    char out[1024] = "";
    sxe_test_say(fd, "GET /fiber HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    pump(5 * SXE_NS_PER_MSEC);
    sxe_test_heard(fd, out, sizeof(out));
    assert_non_null(strstr(out, "from a fiber"));
    close(fd);
}

/* The holder closes the connection, then answers, in one callback: the answer fails, and the
 * request is over; the close at the end of the callback cancels nothing (its slot is free). */
static unsigned late_cancels;
static int late_rc;
static sxe_timer_t late_timer;

static void late_cancel(sxe_http_t *held, void *arg)
{
    (void)held;
    (void)arg;
    late_cancels++;
}

static void close_then_answer(sxe_timer_t *timer, void *arg)
{
    sxe_http_t *held = arg;

    (void)timer;
    sxe_conn_close(sxe_http_conn(held));
    late_rc = sxe_http_respond(held, 200, "text/plain", "late\n", 5);
}

static void hold_for_close(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_t *held = http;
    assert_int_equal(sxe_http_defer(http, late_cancel, NULL), 0);
    sxe_timer_init(&late_timer, close_then_answer, held);
    assert_int_equal(sxe_timer_start(sxe_http_server_loop(server), &late_timer, SXE_NS_PER_MSEC, 0),
                     0);
}

static void test_a_held_request_answered_after_its_close_is_not_cancelled(void **state)
{
    struct sxe_http_defer_stats stats;
    char out[1024] = "";

    (void)state;
    late_cancels = 0;
    assert_int_equal(sxe_http_server_route(server, "GET", "/late", 0, hold_for_close, NULL), 0);
    int fd = client();
    sxe_test_say(fd, "GET /late HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    pump(SXE_NS_PER_MSEC);
    assert_int_equal(late_rc, -EPIPE); /* closed for the program at once: the answer fails */
    assert_int_equal(late_cancels, 0); /* its holder ended it: no cancel follows */
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 0);
    assert_int_equal(stats.cancelled, 0);
    close(fd);
    /* Both slots hold again, at once, each its own request. */
    int one = client(), two = client();
    sxe_test_say(one, "GET /later/1 HTTP/1.1\r\nHost: x\r\n\r\n");
    sxe_test_say(two, "GET /later/2 HTTP/1.1\r\nHost: x\r\n\r\n");
    pump(0);
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 2);
    pump(10 * SXE_NS_PER_MSEC);
    pump(0);
    sxe_test_heard(one, out, sizeof(out));
    assert_non_null(strstr(out, "later /later/1 "));
    sxe_test_heard(two, out, sizeof(out));
    assert_non_null(strstr(out, "later /later/2 "));
    close(one);
    close(two);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_held_request_switches_protocols_later, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_switched_connection_closed_at_once_is_the_new_protocols, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_held_request_whose_client_left_cannot_switch, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_invalid_use, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answering_another_held_request_from_a_handler, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fiber_routes_wait_as_sequential_code, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_route_with_no_slot_to_hold_in_answers_503,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_whose_client_left_is_told_at_its_next_call,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_held_request_answered_after_its_close_is_not_cancelled, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
