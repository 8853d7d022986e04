/*
 * fd channels (src/core/fdpass.c): a descriptor sent over a pair made with SXE_LISTEN_RECEIVE_FDS,
 * a send interrupted by a signal and one the kernel refuses, a hand-off that cannot be sent, and
 * a descriptor that arrives where nobody takes it, several in one message (up to the 8 one message
 * carries, and past them). The hand-off that works is in test_conn_kinds.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/loop.h"
#include "sxe_test.h"
#include "sys.h"

static sxe_loop_t *loop;
static int received[16];
static unsigned received_count;

static void keep_fd(sxe_conn_t *conn, int fd)
{
    (void)conn;
    assert_true(received_count < sizeof(received) / sizeof(received[0]));
    received[received_count++] = fd;
}

static const struct sxe_conn_handlers taking = {.on_fd = keep_fd};
static const struct sxe_conn_handlers not_taking = {0};

static int setup(void **state)
{
    (void)state;
    received_count = 0;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (unsigned i = 0; i < received_count; i++) {
        close(received[i]);
    }
    sxe_loop_destroy(loop);
    sxe__sys_reset();
    return 0;
}

/* Turns the loop a few times, for what was sent to arrive. */
static void pump(void)
{
    for (int i = 0; i < 5; i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
    }
}

static bool same_file(int fd, int other)
{
    struct stat one, two;

    assert_int_equal(fstat(fd, &one), 0);
    assert_int_equal(fstat(other, &two), 0);
    return one.st_dev == two.st_dev && one.st_ino == two.st_ino;
}

/*
 * A send interrupted by a signal is sent again; one the kernel refuses, with an errno below
 * EINTR's (EPERM, from a security module) or above it (ENOBUFS), returns its error after one try,
 * and nothing arrives.
 */
static void test_send_retries_eintr_and_returns_a_refusal(void **state)
{
    static const int refusals[] = {EPERM, ENOBUFS};
    sxe_conn_t *sender, *receiver;
    int file = open("/dev/null", O_RDONLY | O_CLOEXEC);

    (void)state;
    assert_int_equal(sxe_conn_pair(loop, &sender, &receiver, SXE_LISTEN_RECEIVE_FDS, &taking, NULL),
                     0);
    pump();
    sxe__sys_fail(SXE_SYS_sendmsg, 1, 1, EINTR);
    assert_int_equal(sxe_conn_send_fd(sender, file), 0);
    assert_int_equal(sxe__sys_calls(SXE_SYS_sendmsg), 2);
    pump();
    assert_int_equal(received_count, 1);
    assert_true(same_file(received[0], file));

    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        sxe__sys_fail(SXE_SYS_sendmsg, 1, 1, refusals[i]);
        assert_int_equal(sxe_conn_send_fd(sender, file), -refusals[i]);
        assert_int_equal(sxe__sys_calls(SXE_SYS_sendmsg), 1);
        pump();
        assert_int_equal(received_count, 1);
    }
    close(file);
}

/* A hand-off that cannot be sent leaves the connection open, here, to be served or closed. */
static void test_a_hand_off_that_fails_keeps_the_connection(void **state)
{
    sxe_conn_t *sender, *receiver, *conn, *peer;

    (void)state;
    assert_int_equal(sxe_conn_pair(loop, &sender, &receiver, SXE_LISTEN_RECEIVE_FDS, &taking, NULL),
                     0);
    assert_int_equal(sxe_conn_pair(loop, &conn, &peer, 0, &not_taking, NULL), 0);
    pump();
    int fd = sxe_conn_fd(conn);
    sxe__sys_fail(SXE_SYS_sendmsg, 1, 1, ETOOMANYREFS);
    assert_int_equal(sxe_conn_hand_off(conn, sender), -ETOOMANYREFS);
    assert_int_equal(sxe_conn_fd(conn), fd);
    assert_int_equal(sxe_conn_write(conn, "still here", 10), 0);
    pump();
    assert_int_equal(received_count, 0);
}

/* A descriptor sent to a connection without on_fd is closed on arrival: nothing leaks. */
static void test_a_descriptor_nobody_takes_is_closed(void **state)
{
    sxe_conn_t *sender, *receiver;
    int file = open("/dev/null", O_RDONLY | O_CLOEXEC);

    (void)state;
    assert_int_equal(
        sxe_conn_pair(loop, &sender, &receiver, SXE_LISTEN_RECEIVE_FDS, &not_taking, NULL), 0);
    pump();
    unsigned fds = sxe_test_open_fds();
    assert_int_equal(sxe_conn_send_fd(sender, file), 0);
    pump();
    assert_int_equal(sxe_test_open_fds(), fds);
    assert_int_equal(received_count, 0);
    close(file);
}

/* Sends count descriptors of files of their own in one message, as a sender that is not sxe may:
 * @return how many were taken, each checked to be the one sent in its place. */
static unsigned send_in_one_message(unsigned count)
{
    sxe_conn_t *sender, *receiver;
    int files[16];
    char control[CMSG_SPACE(sizeof(files))] = {0};
    char x = 'x';
    struct iovec byte = {.iov_base = &x, .iov_len = 1};
    struct msghdr message = {.msg_iov = &byte,
                             .msg_iovlen = 1,
                             .msg_control = control,
                             .msg_controllen = CMSG_SPACE(count * sizeof(int))};

    assert_true(count <= 16);
    for (unsigned i = 0; i < count; i++) {
        files[i] = memfd_create("fdpass", MFD_CLOEXEC);
        assert_true(files[i] >= 0);
    }
    assert_int_equal(sxe_conn_pair(loop, &sender, &receiver, SXE_LISTEN_RECEIVE_FDS, &taking, NULL),
                     0);
    pump();
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    assert_non_null(header);
    if (header == NULL) {
        return 0;
    }
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(count * sizeof(int));
    memcpy(CMSG_DATA(header), files, count * sizeof(int));
    assert_int_equal(sendmsg(sxe_conn_fd(sender), &message, 0), 1);
    pump();
    for (unsigned i = 0; i < received_count; i++) {
        assert_true(same_file(received[i], files[i]));
    }
    for (unsigned i = 0; i < count; i++) {
        close(files[i]);
    }
    return received_count;
}

/* Several descriptors in one message: each is taken, in the order sent, up to 8 (the most a
 * message may carry: the kernel closes the others). */
static void test_several_descriptors_in_one_message(void **state)
{
    (void)state;
    assert_int_equal(send_in_one_message(3), 3);
}

static void test_eight_descriptors_in_one_message(void **state)
{
    (void)state;
    assert_int_equal(send_in_one_message(8), 8);
}

static void test_nine_descriptors_in_one_message(void **state)
{
    (void)state;
    assert_int_equal(send_in_one_message(9), 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_send_retries_eintr_and_returns_a_refusal, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_hand_off_that_fails_keeps_the_connection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_descriptor_nobody_takes_is_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_several_descriptors_in_one_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eight_descriptors_in_one_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nine_descriptors_in_one_message, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
