/*
 * The harness of the io_uring backend's tests (test_io_uring*.c): bare loops with only the fields
 * the backend reads, waits, socket pairs and TCP sockets, and pumps that collect what arrives.
 * Static inline, so a test program that does not use a helper is not warned about it.
 */
#ifndef SXE_IO_URING_TEST_H
#define SXE_IO_URING_TEST_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io.h"
#include "io_uring.h"
#include "loop.h"
#include "sxe/clock.h"
#include "sxe_test.h"
#include "sys.h"

#define EVENTS_MAX 64

static inline int reset(void **state)
{
    (void)state;
    sxe__sys_reset();
    sxe__io_uring_set_buffers(0, 0);
    sxe_log_set_sink(NULL, NULL);
    return 0;
}

static inline sxe_loop_t *bare_loop(void)
{
    sxe_loop_t *loop = calloc(1, sizeof(*loop));

    assert_non_null(loop);
    loop->options.events = EVENTS_MAX;
    loop->options.connections = 64;
    loop->now = sxe_clock_mono_ns();
    return loop;
}

/* A bare loop with the backend open, or the test skipped where the kernel has no io_uring. */
static inline sxe_loop_t *open_loop(void)
{
    sxe_loop_t *loop = bare_loop();
    int rc = sxe__io_uring.open(loop);

    if (rc == -ENOSYS || rc == -EPERM || rc == -EINVAL) {
        free(loop);
        sxe_test_skip_or_fail_in_ci("the kernel cannot set up the io_uring the backend asks for");
    }
    assert_int_equal(rc, 0);
    assert_non_null(loop->io_state);
    return loop;
}

static inline void close_loop(sxe_loop_t *loop)
{
    sxe__io_uring.close(loop);
    assert_null(loop->io_state);
    free(loop);
}

/* One wait until now + ms, with now refreshed first, as the loop does each turn. */
static inline int wait_ms(sxe_loop_t *loop, uint64_t ms, struct sxe__io_event *events, int max)
{
    loop->now = sxe_clock_mono_ns();
    return sxe__io_uring.wait(loop, loop->now + ms * SXE_NS_PER_MSEC, events, max);
}

static inline void stream_pair(int fds[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
}

/* A listener on 127.0.0.1 at a port the kernel picks; its address goes to address. */
static inline int tcp_listener(struct sockaddr_in *address)
{
    socklen_t len = sizeof(*address);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    *address =
        (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)address, sizeof(*address)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)address, &len), 0);
    return fd;
}

static inline int tcp_client(const struct sockaddr_in *address)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (const struct sockaddr *)address, sizeof(*address)), 0);
    return fd;
}

/* What one watched fd received: the bytes, ends of stream and the last error. */
struct sink {
    uint64_t tag;
    char *data;
    size_t cap;
    size_t len;
    unsigned eofs;
    int error;
};

/* One wait; every event must be a receive for one of the sinks. @return the events. */
static inline int pump(sxe_loop_t *loop, struct sink *sinks, int count, uint64_t ms)
{
    struct sxe__io_event events[EVENTS_MAX];
    int filled = wait_ms(loop, ms, events, EVENTS_MAX);

    assert_true(filled >= 0);
    for (int i = 0; i < filled; i++) {
        struct sink *sink = NULL;
        for (int s = 0; s < count; s++) {
            if (sinks[s].tag == events[i].tag) {
                sink = &sinks[s];
            }
        }
        assert_non_null(sink);
        assert_int_equal(events[i].events & (SXE__IO_IN | SXE__IO_RECV), SXE__IO_IN | SXE__IO_RECV);
        if (events[i].result > 0) {
            assert_non_null(events[i].data);
            assert_true(sink->len + (size_t)events[i].result <= sink->cap);
            memcpy(sink->data + sink->len, events[i].data, (size_t)events[i].result);
            sink->len += (size_t)events[i].result;
        } else if (events[i].result == 0) {
            sink->eofs++;
        } else {
            sink->error = events[i].result;
        }
    }
    return filled;
}

/* Pumps until sink has want bytes, for at most a second. */
static inline void pump_until(sxe_loop_t *loop, struct sink *sink, size_t want)
{
    uint64_t give_up = sxe_clock_mono_ns() + SXE_NS_PER_SEC;

    while (sink->len < want && sxe_clock_mono_ns() < give_up) {
        pump(loop, sink, 1, 100);
    }
    assert_int_equal(sink->len, want);
}

#endif
