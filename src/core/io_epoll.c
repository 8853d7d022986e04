/*
 * The epoll backend: readiness. The only file in the library that names epoll.
 *
 * Streams are registered once, edge-triggered for input and output together, and changed only
 * when paused or resumed: a connection costs one epoll_ctl in its life, and the loop needs no
 * batch of interest changes per turn. Listeners are level-triggered, so accepting in bounded
 * batches cannot lose a wake-up. epoll receives and accepts nothing itself: SXE__IO_RECV and
 * SXE__IO_ACCEPT come back as plain readiness, and sends are made at once.
 */
#define SXE_LOG_MODULE epoll_log
#include "sxe/log.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "io.h"
#include "loop.h"
#include "sxe/clock.h"
#include "sys.h"

static struct sxe_log_module epoll_log = SXE_LOG_MODULE_INIT(EPOLL);

struct epoll_state {
    int epoll_fd;
    bool ms_only;                /* the kernel has no epoll_pwait2 (before 5.11): waits in ms */
    uint32_t max;                /* events taken per wait */
    struct epoll_event events[]; /* what the kernel fills */
};

static int epoll_open(sxe_loop_t *loop)
{
    struct epoll_state *state =
        calloc(1, sizeof(*state) + loop->options.events * sizeof(struct epoll_event));
    int rc;

    if (state == NULL) {
        return -ENOMEM;
    }
    if ((state->epoll_fd = sxe__sys.epoll_create1(EPOLL_CLOEXEC)) < 0) {
        rc = -errno;
        SXE_LOG_ERROR("cannot create an epoll instance: %s", sxe_strerror(rc));
        free(state);
        return rc;
    }
    state->max = loop->options.events;
    loop->io_state = state;
    return 0;
}

static void epoll_close(sxe_loop_t *loop)
{
    struct epoll_state *state = loop->io_state;

    if (state != NULL) {
        sxe__sys.close(state->epoll_fd);
        free(state);
        loop->io_state = NULL;
    }
}

static int epoll_watch(sxe_loop_t *loop, int fd, uint64_t tag, unsigned wanted)
{
    struct epoll_state *state = loop->io_state;
    struct epoll_event event = {.data.u64 = tag};

    event.events = (wanted & SXE__IO_IN ? EPOLLIN | EPOLLRDHUP : 0) |
                   (wanted & SXE__IO_OUT ? EPOLLOUT : 0) | (wanted & SXE__IO_EDGE ? EPOLLET : 0);
    int op = wanted & SXE__IO_MODIFY ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (sxe__sys.epoll_ctl(state->epoll_fd, op, fd, &event) < 0) {
        int rc = -errno;
        SXE_LOG_ERROR("cannot watch fd %d: %s", fd, sxe_strerror(rc));
        return rc;
    }
    return 0;
}

static void epoll_forget(sxe_loop_t *loop, int fd, bool close_fd)
{
    struct epoll_state *state = loop->io_state;

    /* Closing the last descriptor of a file removes it from epoll: no system call for that. A
     * descriptor that lives on (handed to another process) must be removed by hand. */
    if (close_fd) {
        sxe__sys.close(fd);
    } else {
        sxe__sys.epoll_ctl(state->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
    }
}

/* Milliseconds for epoll_wait to reach deadline, rounded up so the loop never wakes early. */
static int wait_ms(const sxe_loop_t *loop, uint64_t deadline)
{
    if (deadline <= loop->now) {
        return 0;
    }
    if (deadline == UINT64_MAX) {
        return -1;
    }
    uint64_t ms = (deadline - loop->now + SXE_NS_PER_MSEC - 1) / SXE_NS_PER_MSEC;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/*
 * Waits until deadline to the nanosecond with epoll_pwait2, so a timer or a load generator's
 * schedule is kept to within the kernel's timer slack, not rounded up to the next millisecond.
 * A kernel without it (ENOSYS) is asked in milliseconds from then on.
 */
static int wait_until(struct epoll_state *state, const sxe_loop_t *loop, uint64_t deadline, int max)
{
    if (!state->ms_only) {
        struct timespec timeout = {0};
        uint64_t ns = deadline > loop->now ? deadline - loop->now : 0;
        timeout.tv_sec = (time_t)(ns / SXE_NS_PER_SEC);
        timeout.tv_nsec = (long)(ns % SXE_NS_PER_SEC);
        int count = sxe__sys.epoll_pwait2(state->epoll_fd, state->events, max,
                                          deadline == UINT64_MAX ? NULL : &timeout, NULL);
        if (count >= 0 || errno != ENOSYS) {
            return count;
        }
        state->ms_only = true;
    }
    return sxe__sys.epoll_wait(state->epoll_fd, state->events, max, wait_ms(loop, deadline));
}

static int epoll_wait_events(sxe_loop_t *loop, uint64_t deadline, struct sxe__io_event *events,
                             int max)
{
    struct epoll_state *state = loop->io_state;

    if ((uint32_t)max > state->max) {
        max = (int)state->max;
    }
    int count = wait_until(state, loop, deadline, max);
    if (count < 0) {
        if (errno == EINTR) {
            return 0;
        }
        int rc = -errno;
        SXE_LOG_ERROR("waiting for events failed: %s", sxe_strerror(rc));
        return rc;
    }
    for (int i = 0; i < count; i++) {
        uint32_t got = state->events[i].events;
        events[i] = (struct sxe__io_event){
            .tag = state->events[i].data.u64,
            .events = (got & EPOLLIN ? SXE__IO_IN : 0) | (got & EPOLLOUT ? SXE__IO_OUT : 0) |
                      (got & (EPOLLRDHUP | EPOLLHUP) ? SXE__IO_HUP : 0) |
                      (got & EPOLLERR ? SXE__IO_ERR : 0)};
    }
    return count;
}

static ssize_t epoll_send(sxe_loop_t *loop, int fd, uint64_t tag, const struct iovec *iov,
                          int count, int flags)
{
    (void)loop;
    (void)tag;
    for (;;) {
        ssize_t sent;
        if (count == 1) {
            sent = sxe__sys.send(fd, iov[0].iov_base, iov[0].iov_len, flags);
        } else {
            struct msghdr message = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)count};
            sent = sxe__sys.sendmsg(fd, &message, flags);
        }
        if (sent >= 0 || errno != EINTR) {
            return sent >= 0 ? sent : -errno;
        }
    }
}

const struct sxe__io_backend sxe__io_epoll = {
    .name = "epoll",
    .kind = SXE__IO_READINESS,
    .open = epoll_open,
    .close = epoll_close,
    .watch = epoll_watch,
    .forget = epoll_forget,
    .wait = epoll_wait_events,
    .send = epoll_send,
};
