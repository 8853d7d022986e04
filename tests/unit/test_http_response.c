/*
 * A response keeps to the Content-Length it gave: body bytes past it are refused whole (the client
 * would read them as the start of the next response), an assertion in debug builds and -EMSGSIZE
 * in release; a response that ends short of it closes the connection, the only way the client
 * can learn the rest is not coming.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe/http.h"
#include "http_test.h"

#ifdef SXE_DEBUG
static void send_past_the_length(void *http)
{
    (void)!sxe_http_send(http, "56789", 5);
}
#endif

/* Declares 5 bytes and tries to send 10: refused whole, then the 5 go out and the answer ends. */
static void over(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_http_start(http, 200, NULL, 5), 0);
    assert_int_equal(sxe_http_send(http, "01", 2), 0);
#ifdef SXE_DEBUG
    const char *const expected[] = {"assertion failed: len <= http->owed",
                                    "a response of 200 sent 5 bytes with 3 of its Content-Length",
                                    NULL};
    sxe_test_expect_abort(send_past_the_length, http, expected);
#else
    assert_int_equal(sxe_http_send(http, "3456789", 7), -EMSGSIZE);
#endif
    assert_int_equal(sxe_http_send(http, "234", 3), 0);
    assert_int_equal(sxe_http_finish(http), 0);
}

/* Declares 10 bytes, sends 4 and ends. */
static void short_answer(sxe_http_t *http, void *arg)
{
    (void)arg;
    assert_int_equal(sxe_http_start(http, 200, NULL, 10), 0);
    assert_int_equal(sxe_http_send(http, "0123", 4), 0);
    assert_int_equal(sxe_http_finish(http), 0);
}

static int setup(void **state)
{
    (void)state;
    http_test_fake_clock();
    assert_int_equal(sxe_http_server_create(&server, NULL, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, NULL, "/over", 0, over, NULL), 0);
    assert_int_equal(sxe_http_server_route(server, NULL, "/short", 0, short_answer, NULL), 0);
    http_test_listen();
    return 0;
}

/* Turns the server's loop until out ends with end, or the peer closed (then returns -1). */
static ssize_t hear_until(int fd, char *out, size_t size, const char *end)
{
    size_t end_len = strlen(end);
    ssize_t heard = 0;

    out[0] = '\0';
    for (int turns = 0; turns < 1000; turns++) {
        assert_true(sxe_loop_run_once(sxe_http_server_loop(server), SXE_NS_PER_MSEC) >= 0);
        if ((heard = sxe_test_heard(fd, out, size)) < 0) {
            return -1;
        }
        size_t len = strlen(out);
        if (len >= end_len && strcmp(out + len - end_len, end) == 0) {
            return heard;
        }
    }
    fail_msg("heard only: %s", out);
    return -1;
}

static void test_bytes_past_the_length_are_refused(void **state)
{
    char out[4096];
    int fd = sxe_test_client(port);

    (void)state;
    /* Two on one connection: each answer is whole, and the second follows the first. */
    for (int request = 0; request < 2; request++) {
        sxe_test_say(fd, "GET /over HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_true(hear_until(fd, out, sizeof(out), "\r\n\r\n01234") >= 0);
        assert_memory_equal(out, "HTTP/1.1 200 OK\r\n", 17);
        assert_non_null(strstr(out, "Content-Length: 5\r\n\r\n01234"));
    }
    close(fd);
}

static void test_an_answer_short_of_its_length_closes(void **state)
{
    char out[4096];
    struct sxe_test_capture capture;
    int fd = sxe_test_client(port);

    (void)state;
    sxe_test_capture_start(&capture);
    sxe_test_say(fd, "GET /short HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_int_equal(hear_until(fd, out, sizeof(out), "never"), -1);
    sxe_test_capture_stop();
    assert_non_null(strstr(out, "Content-Length: 10\r\n"));
    assert_non_null(strstr(out, "\r\n\r\n0123"));
    assert_non_null(
        strstr(capture.text, "a response of 200 ended 6 bytes short of its Content-Length"));
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bytes_past_the_length_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_answer_short_of_its_length_closes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
