/*
 * sxe-http's pipes between a worker and its parent (read_all and write_all in
 * tools/sxe-http/worker.c, compiled into this program with the tool's other parts, its main
 * aside). They call libc's read and write, not the library's seam, so this program is linked with
 * both wrapped (-Wl,--wrap): a test makes the next call on one descriptor fail with a chosen errno.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sxe/sxe.h>

#include "sxe-http.h"
#include "sxe_test.h"

ssize_t __real_read(int fd, void *buf, size_t len);
ssize_t __real_write(int fd, const void *buf, size_t len);
ssize_t __wrap_read(int fd, void *buf, size_t len);
ssize_t __wrap_write(int fd, const void *buf, size_t len);

/* The next call on failing_fd fails with failing_err, once; calls counts the calls on it. */
static int failing_fd = -1;
static int failing_err;
static unsigned calls;

static bool fails_now(int fd)
{
    if (fd != failing_fd) {
        return false;
    }
    calls++;
    if (failing_err == 0) {
        return false;
    }
    errno = failing_err;
    failing_err = 0;
    return true;
}

ssize_t __wrap_read(int fd, void *buf, size_t len)
{
    return fails_now(fd) ? -1 : __real_read(fd, buf, len);
}

ssize_t __wrap_write(int fd, const void *buf, size_t len)
{
    return fails_now(fd) ? -1 : __real_write(fd, buf, len);
}

static void fail_next(int fd, int err)
{
    failing_fd = fd;
    failing_err = err;
    calls = 0;
}

/*
 * A read interrupted (EINTR) is made again and the bytes are all read; one failing with an errno
 * below EINTR's (EPERM) or above it (EIO) is not: read_all says it could not, the bytes unread.
 */
static void test_read_all_retries_an_interruption_only(void **state)
{
    static const int errors[] = {EPERM, EIO};
    int fds[2];
    char got[4] = "";

    (void)state;
    assert_int_equal(pipe2(fds, O_NONBLOCK), 0);
    assert_int_equal(__real_write(fds[1], "abc", 3), 3);
    fail_next(fds[0], EINTR);
    assert_true(read_all(fds[0], got, 3));
    assert_int_equal(calls, 2);
    assert_string_equal(got, "abc");
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        assert_int_equal(__real_write(fds[1], "d", 1), 1);
        fail_next(fds[0], errors[i]);
        if (read_all(fds[0], got, 1) || calls != 1) {
            fail_msg("errno %d: read %u times", errors[i], calls);
        }
        assert_int_equal(__real_read(fds[0], got, 1), 1); /* still there */
    }
    failing_fd = -1;
    close(fds[0]);
    close(fds[1]);
}

/* Runs write_all(fd, bytes) in a child, its first write failing with err. @return how it ended:
 * its exit status, or 128 and the signal. */
static int write_all_in_a_child(int fd, int err, const char *bytes)
{
    int status;
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        fail_next(fd, err);
        write_all(fd, bytes, strlen(bytes));
        sxe_test_exit(
            calls == 2 ? 0 : 4); /* done, after the one failed write and the one that took it */
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * A write interrupted (EINTR) is made again and the bytes all go; one failing with an errno below
 * EINTR's (EPERM) or above it (EPIPE) is not: the worker exits with status 3, nothing written.
 */
static void test_write_all_retries_an_interruption_only(void **state)
{
    static const int errors[] = {EPERM, EPIPE};
    int fds[2];
    char got[4] = "";

    (void)state;
    assert_int_equal(pipe2(fds, O_NONBLOCK), 0);
    assert_int_equal(write_all_in_a_child(fds[1], EINTR, "abc"), 0);
    assert_int_equal(__real_read(fds[0], got, sizeof(got)), 3);
    assert_string_equal(got, "abc");
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        int status = write_all_in_a_child(fds[1], errors[i], "d");
        if (status != 3) {
            fail_msg("errno %d: the worker ended with status %d", errors[i], status);
        }
        assert_int_equal(__real_read(fds[0], got, 1), -1); /* nothing came */
        assert_int_equal(errno, EAGAIN);
    }
    close(fds[0]);
    close(fds[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_all_retries_an_interruption_only),
        cmocka_unit_test(test_write_all_retries_an_interruption_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
