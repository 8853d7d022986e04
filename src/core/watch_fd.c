/*
 * Outside descriptors on the loop (sxe_loop_watch_fd(), sxe/loop.h): a few sockets that belong to
 * a library with its own I/O, such as c-ares's, watched for readiness beside the connections.
 *
 * Each watch is a slot of a small table, and its events come back under the slot's own tag, from
 * SXE__FD_TAG(0) down, above every connection's tag. Watches are level-triggered on both backends
 * (a poll armed again after each event on io_uring), so a reader that leaves bytes is called
 * again; one forgotten and reused in the same turn may get an event meant for the one before,
 * which the contract calls spurious.
 */
#define SXE_LOG_MODULE watch_fd_log
#include "sxe/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include "loop.h"
#include "sys.h"

static struct sxe_log_module watch_fd_log = SXE_LOG_MODULE_INIT(WATCH);

struct sxe__fd_watch {
    int fd; /* -1 when the slot is free */
    unsigned wanted;
    sxe_loop_fd_ready_t ready;
    void *arg;
};

static unsigned backend_wants(unsigned wanted)
{
    return (wanted & SXE_LOOP_FD_READ ? SXE__IO_IN : 0) |
           (wanted & SXE_LOOP_FD_WRITE ? SXE__IO_OUT : 0);
}

static struct sxe__fd_watch *watch_of(sxe_loop_t *loop, int fd)
{
    for (unsigned i = 0; loop->fd_watches != NULL && i < SXE__FD_WATCHES_MAX; i++) {
        if (loop->fd_watches[i].fd == fd) {
            return &loop->fd_watches[i];
        }
    }
    return NULL;
}

static int watch_new(sxe_loop_t *loop, int fd, unsigned wanted, sxe_loop_fd_ready_t ready,
                     void *arg)
{
    if (loop->fd_watches == NULL) {
        if ((loop->fd_watches = malloc(SXE__FD_WATCHES_MAX * sizeof(*loop->fd_watches))) == NULL) {
            return -ENOMEM;
        }
        for (unsigned i = 0; i < SXE__FD_WATCHES_MAX; i++) {
            loop->fd_watches[i] = (struct sxe__fd_watch){.fd = -1};
        }
    }
    if (sxe__sys.fcntl(fd, F_GETFD, 0) < 0) {
        return -EBADF; /* (io_uring would take it, and report it only by a poll's error) */
    }
    struct sxe__fd_watch *slot = watch_of(loop, -1);
    if (slot == NULL) {
        SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN, "cannot watch fd %d: %u outside descriptors are watched",
                     fd, SXE__FD_WATCHES_MAX);
        return -ENOBUFS;
    }
    uint64_t tag = SXE__FD_TAG((unsigned)(slot - loop->fd_watches));
    int rc = loop->io->watch(loop, fd, tag, backend_wants(wanted));
    if (rc < 0) {
        return rc;
    }
    *slot = (struct sxe__fd_watch){.fd = fd, .wanted = wanted, .ready = ready, .arg = arg};
    return 0;
}

int sxe_loop_watch_fd(sxe_loop_t *loop, int fd, unsigned wanted, sxe_loop_fd_ready_t ready,
                      void *arg)
{
    if (!SXE_CHECK(loop != NULL && fd >= 0 && (wanted & ~SXE_LOOP_FD_BOTH) == 0 &&
                   (ready != NULL || wanted == 0))) {
        return -EINVAL;
    }
    struct sxe__fd_watch *watch = watch_of(loop, fd);
    if (watch == NULL) {
        return wanted == 0 ? -ENOENT : watch_new(loop, fd, wanted, ready, arg);
    }
    if (wanted == 0) {
        loop->io->forget(loop, fd, false);
        watch->fd = -1;
        return 0;
    }
    int rc = 0;
    if (wanted != watch->wanted) {
        unsigned wants = backend_wants(wanted) | SXE__IO_MODIFY;
        uint64_t tag = SXE__FD_TAG((unsigned)(watch - loop->fd_watches));
        if ((rc = loop->io->watch(loop, fd, tag, wants)) < 0) {
            return rc;
        }
    }
    *watch = (struct sxe__fd_watch){.fd = fd, .wanted = wanted, .ready = ready, .arg = arg};
    return rc;
}

void sxe__fd_watch_event(sxe_loop_t *loop, const struct sxe__io_event *event)
{
    unsigned i = (unsigned)(SXE__FD_TAG(0) - event->tag);
    struct sxe__fd_watch *watch = &loop->fd_watches[i];

    if (watch->fd < 0) {
        return; /* forgotten since the backend reported it */
    }
    unsigned what = (event->events & SXE__IO_IN ? SXE_LOOP_FD_READ : 0) |
                    (event->events & SXE__IO_OUT ? SXE_LOOP_FD_WRITE : 0);
    if (event->events & (SXE__IO_ERR | SXE__IO_HUP)) {
        what |= watch->wanted; /* the read or write that follows says what went wrong */
    }
    if ((what &= watch->wanted) != 0) {
        watch->ready(watch->arg, watch->fd, what);
    }
}

void sxe__fd_watch_close(sxe_loop_t *loop)
{
    for (unsigned i = 0; loop->fd_watches != NULL && i < SXE__FD_WATCHES_MAX; i++) {
        if (loop->fd_watches[i].fd >= 0) {
            SXE_LOG_WARN("fd %d is still watched as the loop ends: its owner did not stop",
                         loop->fd_watches[i].fd);
            loop->io->forget(loop, loop->fd_watches[i].fd, false);
        }
    }
    free(loop->fd_watches);
    loop->fd_watches = NULL;
}
