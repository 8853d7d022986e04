/*
 * The system call seam: entries can be replaced, the Nth call can be made to fail, and the clocks
 * can be stopped and moved.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "sxe_test.h"
#include "sys.h"

static int reset(void **state)
{
    (void)state;
    sxe__sys_reset();
    return 0;
}

static int dev_null(void)
{
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

/* The 3rd call of write fails with EIO, once; the calls before and after it go through. */
static void test_fail_nth_call_once(void **state)
{
    int fd = dev_null();

    (void)state;
    sxe__sys_fail(SXE_SYS_write, 3, 1, EIO);
    assert_int_equal(sxe__sys.write(fd, "a", 1), 1);
    assert_int_equal(sxe__sys.write(fd, "b", 1), 1);
    errno = 0;
    assert_int_equal(sxe__sys.write(fd, "c", 1), -1);
    assert_int_equal(errno, EIO);
    assert_int_equal(sxe__sys.write(fd, "d", 1), 1);
    assert_int_equal(sxe__sys_calls(SXE_SYS_write), 4);
    close(fd);
}

/* A fault loop: for N = 1..5 exactly the Nth of five calls fails. */
static void test_fault_loop(void **state)
{
    int fd = dev_null();

    (void)state;
    for (unsigned nth = 1; nth <= 5; nth++) {
        sxe__sys_fail(SXE_SYS_write, nth, 1, EPIPE);
        for (unsigned call = 1; call <= 5; call++) {
            ssize_t rc = sxe__sys.write(fd, "x", 1);
            assert_int_equal(rc, call == nth ? -1 : 1);
        }
        assert_int_equal(sxe__sys_calls(SXE_SYS_write), 5);
    }
    close(fd);
}

/* times == 0 fails every call from the Nth on; times == 2 fails exactly two. */
static void test_fail_ranges(void **state)
{
    int fd = dev_null();

    (void)state;
    sxe__sys_fail(SXE_SYS_write, 2, 0, ENOSPC);
    assert_int_equal(sxe__sys.write(fd, "x", 1), 1);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(sxe__sys.write(fd, "x", 1), -1);
        assert_int_equal(errno, ENOSPC);
    }

    sxe__sys_fail(SXE_SYS_write, 1, 2, EINTR);
    assert_int_equal(sxe__sys.write(fd, "x", 1), -1);
    assert_int_equal(sxe__sys.write(fd, "x", 1), -1);
    assert_int_equal(sxe__sys.write(fd, "x", 1), 1);

    /* nth 0 is read as 1: the very next call fails. */
    sxe__sys_fail(SXE_SYS_write, 0, 1, EAGAIN);
    assert_int_equal(sxe__sys.write(fd, "x", 1), -1);
    assert_int_equal(errno, EAGAIN);
    close(fd);
}

static unsigned short_writes;

/* A replacement entry: writes at most 2 bytes, like a socket with a nearly full buffer. */
static ssize_t write_two_bytes(int fd, const void *buf, size_t len)
{
    short_writes++;
    return write(fd, buf, len < 2 ? len : 2);
}

/* A test can replace an entry, and a fault layers over the replacement. */
static void test_replace_entry_and_layer_fault(void **state)
{
    int fds[2];
    char got[8] = {0};

    (void)state;
    assert_int_equal(pipe(fds), 0);
    sxe__sys.write = write_two_bytes;
    assert_int_equal(sxe__sys.write(fds[1], "hello", 5), 2);
    assert_int_equal(short_writes, 1);

    sxe__sys_fail(SXE_SYS_write, 2, 1, EPIPE);
    assert_int_equal(sxe__sys.write(fds[1], "llo", 3), 2);
    assert_int_equal(sxe__sys.write(fds[1], "o", 1), -1);
    assert_int_equal(errno, EPIPE);
    assert_int_equal(short_writes, 2);

    assert_int_equal(read(fds[0], got, sizeof(got)), 4);
    assert_string_equal(got, "hell");

    /* Reset brings back the real call. */
    sxe__sys_reset();
    assert_int_equal(sxe__sys.write(fds[1], "12345", 5), 5);
    assert_int_equal(short_writes, 2);
    close(fds[0]);
    close(fds[1]);
}

/* Counting alone fails nothing. */
static void test_count_only(void **state)
{
    int fd = dev_null();

    (void)state;
    assert_int_equal(sxe__sys_calls(SXE_SYS_write), 0);
    sxe__sys_count(SXE_SYS_write);
    for (int i = 0; i < 7; i++) {
        assert_int_equal(sxe__sys.write(fd, "x", 1), 1);
    }
    assert_int_equal(sxe__sys_calls(SXE_SYS_write), 7);
    close(fd);
}

/* Fake clocks stand still until advanced; a fault can sit in front of the fake clock. */
static void test_fake_clock(void **state)
{
    struct timespec now;

    (void)state;
    sxe__sys_clock_fake(5000000123ULL, 1700000000000000000ULL);
    assert_int_equal(sxe__sys.clock_gettime(CLOCK_MONOTONIC, &now), 0);
    assert_int_equal(now.tv_sec, 5);
    assert_int_equal(now.tv_nsec, 123);
    sxe__sys_clock_advance(999999877ULL);
    assert_int_equal(sxe__sys.clock_gettime(CLOCK_MONOTONIC, &now), 0);
    assert_int_equal(now.tv_sec, 6);
    assert_int_equal(now.tv_nsec, 0);
    assert_int_equal(sxe__sys.clock_gettime(CLOCK_REALTIME, &now), 0);
    assert_int_equal(now.tv_sec, 1700000000);
    assert_int_equal(now.tv_nsec, 999999877);
    assert_int_equal(sxe__sys.clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now), -1);
    assert_int_equal(errno, EINVAL);

    sxe__sys_fail(SXE_SYS_clock_gettime, 1, 1, EFAULT);
    sxe__sys_clock_fake(7000000000ULL, 0);
    assert_int_equal(sxe__sys.clock_gettime(CLOCK_MONOTONIC, &now), -1);
    assert_int_equal(sxe__sys.clock_gettime(CLOCK_MONOTONIC, &now), 0);
    assert_int_equal(now.tv_sec, 7);
}

/*
 * Every entry can be armed: arming puts the fault wrapper in the table, arming it again keeps
 * that wrapper and what it passes through to (were the wrapper to pass through to itself, the
 * first call would recurse until the stack ran out), and reset puts the real call back.
 */
static void test_every_entry_arms_once_and_resets(void **state)
{
    (void)state;
#define SXE_TEST_ARM(name, ret, params, args, impl)                                                \
    {                                                                                              \
        ret(*real) params = sxe__sys.name;                                                         \
        sxe__sys_count(SXE_SYS_##name);                                                            \
        ret(*armed) params = sxe__sys.name;                                                        \
        assert_ptr_not_equal(armed, real);                                                         \
        sxe__sys_fail(SXE_SYS_##name, 2, 1, EIO);                                                  \
        assert_ptr_equal(sxe__sys.name, armed);                                                    \
        sxe__sys_reset();                                                                          \
        assert_ptr_equal(sxe__sys.name, real);                                                     \
    }
    SXE_SYS_CALLS(SXE_TEST_ARM)
#undef SXE_TEST_ARM

    /* Armed twice, an entry still reaches the real call, and fails only the call asked for. */
    sxe__sys_count(SXE_SYS_getpid);
    sxe__sys_fail(SXE_SYS_getpid, 2, 1, EPERM);
    assert_int_equal(sxe__sys.getpid(), getpid());
    errno = 0;
    assert_int_equal(sxe__sys.getpid(), -1);
    assert_int_equal(errno, EPERM);
    assert_int_equal(sxe__sys.getpid(), getpid());
    assert_int_equal(sxe__sys_calls(SXE_SYS_getpid), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_fail_nth_call_once, reset),
        cmocka_unit_test_teardown(test_fault_loop, reset),
        cmocka_unit_test_teardown(test_fail_ranges, reset),
        cmocka_unit_test_teardown(test_replace_entry_and_layer_fault, reset),
        cmocka_unit_test_teardown(test_count_only, reset),
        cmocka_unit_test_teardown(test_fake_clock, reset),
        cmocka_unit_test_teardown(test_every_entry_arms_once_and_resets, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
