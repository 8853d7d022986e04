/*
 * A stream's input in large buffers (sxe_loop_options.large_buffers): a message that outgrows
 * buffer_size moves to a large buffer and grows there whole, on either backend; the large buffer
 * goes back once the message is consumed; a full set of large buffers, or a message larger than
 * one, overflows with the reason in errno; bad options and a failed reservation are refused.
 *
 * The server runs in the test's loop; clients are blocking sockets; the connection table and the
 * buffers are validated after every turn.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop.h"
#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe_test.h"
#include "sys.h"

#define SMALL 1024
#define LARGE (64 * 1024)

/* What the server saw. */
static struct {
    int messages;    /* whole messages consumed */
    size_t last_len; /* the last one's length */
    int overflows;   /* on_overflow calls */
    int overflow_errs[4];
    int closes;
    uint32_t most_large; /* large buffers in use, at most, seen from on_read */
} seen;

static sxe_loop_t *loop;
static sxe_conn_t *listener;

/* A message is everything up to and including a '\n'; it is answered with its length. */
static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    struct sxe_loop_stats stats;
    size_t used = 0;
    const char *end;

    sxe_loop_stats(loop, &stats);
    seen.most_large =
        stats.large_buffers_in_use > seen.most_large ? stats.large_buffers_in_use : seen.most_large;
    while ((end = memchr(data + used, '\n', len - used)) != NULL) {
        char answer[32];
        size_t message = (size_t)(end - data) + 1 - used;
        int answer_len = snprintf(answer, sizeof(answer), "%zu\n", message);
        assert_int_equal(sxe_conn_write(conn, answer, (size_t)answer_len), 0);
        seen.messages++;
        seen.last_len = message;
        used += message;
    }
    return used;
}

static void on_overflow(sxe_conn_t *conn)
{
    seen.overflow_errs[seen.overflows++ % 4] = errno;
    assert_int_equal(sxe_conn_write(conn, "too big\n", 8), 0);
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    (void)conn;
    (void)reason;
    (void)err;
    seen.closes++;
}

static const struct sxe_conn_handlers handlers = {
    .on_read = on_read, .on_overflow = on_overflow, .on_close = on_close};

static int listener_port(void)
{
    struct sockaddr_in address;
    socklen_t len = sizeof(address);

    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&address, &len), 0);
    return ntohs(address.sin_port);
}

/* Turns the loop once, waiting up to wait_ns for events. */
static void turn(uint64_t wait_ns)
{
    assert_true(sxe_loop_run_once(loop, wait_ns) >= 0);
}

/* A loop with SMALL ordinary buffers and `large` large ones of LARGE bytes, listening. */
static int start(uint32_t large)
{
    struct sxe_loop_options options = {.connections = 16,
                                       .buffers = 8,
                                       .buffer_size = SMALL,
                                       .large_buffers = large,
                                       .large_buffer_size = LARGE};

    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    assert_int_equal(sxe_conn_listen_at(loop, &listener, "127.0.0.1:0", NULL, &handlers, NULL), 0);
    return listener_port();
}

static int teardown(void **state)
{
    (void)state;
    if (loop != NULL) {
        assert_int_equal(sxe__conn_validate(loop), 0);
        sxe_loop_destroy(loop);
        loop = NULL;
    }
    sxe__sys_reset();
    return 0;
}

/* Turns the loop, validating after each turn, until *counter reaches count (5 s at most). */
static void run_until(const int *counter, int count)
{
    for (int turns = 0; *counter < count && turns < 5000; turns++) {
        turn(SXE_NS_PER_MSEC);
        assert_int_equal(sxe__conn_validate(loop), 0);
    }
    assert_int_equal(*counter, count);
}

/* Sends a message of len bytes: len - 1 of 'x', then '\n'. */
static void send_message(int fd, size_t len)
{
    char *message = malloc(len);

    assert_non_null(message);
    memset(message, 'x', len - 1);
    message[len - 1] = '\n';
    for (size_t sent = 0; sent < len;) {
        ssize_t put = send(fd, message + sent, len - sent, 0);
        assert_true(put > 0);
        sent += (size_t)put;
        turn(0); /* the server reads as it comes */
    }
    free(message);
}

/* Reads a whole answer line from fd into line (the loop turns meanwhile). */
static void read_answer(int fd, char *line, size_t size)
{
    line[0] = '\0';
    for (int turns = 0; strchr(line, '\n') == NULL && turns < 5000; turns++) {
        turn(SXE_NS_PER_MSEC);
        assert_int_equal(sxe__conn_validate(loop), 0);
        (void)sxe_test_heard(fd, line, size);
    }
    assert_non_null(strchr(line, '\n'));
}

/*
 * A message 40 times buffer_size grows whole in a large buffer, and is answered; the large buffer
 * is free again once it is consumed, and the next small message needs no large one.
 */
static void test_a_large_message_grows_in_a_large_buffer(void **state)
{
    struct sxe_loop_stats stats;
    char line[64];

    (void)state;
    int fd = sxe_test_client(start(1));
    send_message(fd, 40 * SMALL);
    read_answer(fd, line, sizeof(line));
    assert_string_equal(line, "40960\n");
    assert_int_equal(seen.most_large, 1);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.large_buffers_in_use, 0);
    assert_int_equal(stats.buffers_in_use, 0);
    assert_int_equal(stats.no_large_buffer, 0);

    seen.most_large = 0;
    send_message(fd, 100);
    line[0] = '\0';
    read_answer(fd, line, sizeof(line));
    assert_string_equal(line, "100\n");
    assert_int_equal(seen.most_large, 0);
    close(fd);
}

/*
 * A large message followed by the start of a small one: once the large one is consumed, what is
 * left goes back to an ordinary buffer and the large one is free for another connection.
 */
static void test_what_is_left_goes_back_to_an_ordinary_buffer(void **state)
{
    struct sxe_loop_stats stats;
    char line[64] = "";
    size_t len = 10 * SMALL;
    char *both = malloc(len + 5);

    (void)state;
    assert_non_null(both);
    int fd = sxe_test_client(start(1));
    memset(both, 'y', len + 5);
    both[len - 1] = '\n'; /* a message of len bytes, then 5 bytes of the next */
    sxe_test_say(fd, ""); /* connected */
    assert_int_equal(send(fd, both, len + 5, 0), (ssize_t)(len + 5));
    free(both);
    read_answer(fd, line, sizeof(line));
    assert_string_equal(line, "10240\n");
    turn(0);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.large_buffers_in_use, 0);
    assert_int_equal(stats.buffers_in_use, 1); /* the 5 bytes wait in an ordinary buffer */

    /* A second connection's large message finds the large buffer free. */
    int other = sxe_test_client(listener_port());
    send_message(other, 20 * SMALL);
    line[0] = '\0';
    read_answer(other, line, sizeof(line));
    assert_string_equal(line, "20480\n");
    sxe_test_say(fd, "\n"); /* the first one's message ends */
    line[0] = '\0';
    read_answer(fd, line, sizeof(line));
    assert_string_equal(line, "6\n");
    close(other);
    close(fd);
}

/*
 * With one large buffer, two connections that each send a large message: the first grows, the
 * second overflows with ENOBUFS (told, counted) and is closed once answered; the first is served.
 * A message larger than a large buffer overflows with EMSGSIZE.
 */
static void test_full_large_buffers_and_a_message_too_large(void **state)
{
    struct sxe_loop_stats stats;
    char line[64] = "";

    (void)state;
    int port = start(1);
    int first = sxe_test_client(port), second = sxe_test_client(port);
    char part[3 * SMALL];
    memset(part, 'z', sizeof(part));
    /* The first's message is under way, past buffer_size: it holds the large buffer. */
    assert_int_equal(send(first, part, 2 * SMALL, 0), (ssize_t)(2 * SMALL));
    struct sxe_loop_stats now = {0};
    for (int turns = 0; now.large_buffers_in_use == 0 && turns < 5000; turns++) {
        turn(SXE_NS_PER_MSEC);
        sxe_loop_stats(loop, &now);
    }
    assert_int_equal(now.large_buffers_in_use, 1);
    assert_int_equal(send(second, part, sizeof(part), 0), (ssize_t)sizeof(part));
    run_until(&seen.overflows, 1);
    assert_int_equal(seen.overflow_errs[0], ENOBUFS);
    read_answer(second, line, sizeof(line));
    assert_string_equal(line, "too big\n");
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.no_large_buffer, 1);
    close(second);
    run_until(&seen.closes, 1);

    sxe_test_say(first, "\n");
    line[0] = '\0';
    read_answer(first, line, sizeof(line));
    assert_string_equal(line, "2049\n");

    char *huge = malloc(LARGE + SMALL);
    assert_non_null(huge);
    memset(huge, 'h', LARGE + SMALL);
    int third = sxe_test_client(port);
    for (size_t sent = 0; sent < LARGE + SMALL && seen.overflows < 2;) {
        ssize_t put = send(third, huge + sent, LARGE + SMALL - sent, MSG_DONTWAIT);
        sent += put > 0 ? (size_t)put : 0;
        turn(SXE_NS_PER_MSEC);
    }
    free(huge);
    run_until(&seen.overflows, 2);
    assert_int_equal(seen.overflow_errs[1], EMSGSIZE);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.no_large_buffer, 1);
    assert_int_equal(stats.large_buffers_in_use, 0);
    close(third);
    close(first);
}

/* Without large buffers a message past buffer_size overflows with EMSGSIZE, as it always did. */
static void test_no_large_buffers(void **state)
{
    char big[2 * SMALL];

    (void)state;
    int fd = sxe_test_client(start(0));
    memset(big, 'n', sizeof(big));
    assert_int_equal(send(fd, big, sizeof(big), 0), (ssize_t)sizeof(big));
    run_until(&seen.overflows, 1);
    assert_int_equal(seen.overflow_errs[0], EMSGSIZE);
    close(fd);
}

/* Options that ask for large buffers no larger than the ordinary ones, or over 1 GiB. */
static void create_invalid(void *arg)
{
    struct sxe_loop_options options = {
        .buffer_size = SMALL, .large_buffers = 2, .large_buffer_size = (uint32_t)(uintptr_t)arg};
    sxe_loop_t *refused = NULL;

    assert_int_equal(sxe_loop_create(&refused, &options), -EINVAL);
    assert_null(refused);
}

/*
 * Large buffers must be larger than the ordinary ones and at most 1 GiB (an assertion in debug
 * builds, -EINVAL in release); every mmap of a loop with them can fail (ASan sees leaks).
 */
static void test_options_and_a_failed_reservation(void **state)
{
    struct sxe_loop_options options = {
        .buffer_size = SMALL, .large_buffers = 2, .large_buffer_size = LARGE};
    sxe_loop_t *made = NULL;

    (void)state;
#ifdef SXE_DEBUG
    const char *const expected[] = {"assertion failed: options_are_valid", NULL};
    sxe_test_expect_abort(create_invalid, (void *)(uintptr_t)SMALL, expected);
    sxe_test_expect_abort(create_invalid, (void *)(uintptr_t)((1u << 30) + 1), expected);
#else
    create_invalid((void *)(uintptr_t)SMALL);
    create_invalid((void *)(uintptr_t)((1u << 30) + 1));
#endif
    unsigned nth = 1;
    for (int rc;
         (sxe__sys_fail(SXE_SYS_mmap, nth, 1, ENOMEM), rc = sxe_loop_create(&made, &options)) != 0;
         nth++) {
        assert_int_equal(rc, -ENOMEM);
        assert_null(made);
    }
    assert_true(nth > 3); /* the ordinary buffers, the scratch area, the large buffers */
    sxe_loop_destroy(made);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_a_large_message_grows_in_a_large_buffer, teardown),
        cmocka_unit_test_teardown(test_what_is_left_goes_back_to_an_ordinary_buffer, teardown),
        cmocka_unit_test_teardown(test_full_large_buffers_and_a_message_too_large, teardown),
        cmocka_unit_test_teardown(test_no_large_buffers, teardown),
        cmocka_unit_test_teardown(test_options_and_a_failed_reservation, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
