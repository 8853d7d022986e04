/*
 * Wakers (sxe/loop.h): other threads' way into a loop.
 *
 * A loop's wakers share one eventfd, watched under SXE__WAKE_TAG. A wake sets its waker's
 * pending flag and, unless the loop was woken since it last looked (wake_sent), writes the
 * eventfd. The loop reads the eventfd, clears wake_sent, then calls the hook of each waker whose
 * pending flag it clears: a wake after that clear writes again, and one before it is seen by the
 * scan that follows, so none is lost, and a burst of wakes costs one write and one read.
 */
#define SXE_LOG_MODULE wake_log
#include "sxe/log.h"

#include <errno.h>
#include <stdlib.h>

#include "loop.h"
#include "sys.h"

static struct sxe_log_module wake_log = SXE_LOG_MODULE_INIT(WAKE);

struct sxe_loop_waker {
    sxe_loop_t *loop; /* NULL when the slot is free */
    void (*hook)(void *arg);
    void *arg;
    int pending; /* atomic: woken since the hook last ran */
};

int sxe_loop_waker_create(sxe_loop_t *loop, sxe_loop_waker_t **waker, void (*hook)(void *arg),
                          void *arg)
{
    int rc;

    if (!SXE_CHECK(loop != NULL && waker != NULL && hook != NULL)) {
        return -EINVAL;
    }
    if (loop->wakers == NULL &&
        (loop->wakers = calloc(SXE__WAKERS_MAX, sizeof(*loop->wakers))) == NULL) {
        return -ENOMEM;
    }
    if (loop->wake_fd < 0) {
        int fd = sxe__sys.eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fd < 0) {
            rc = -errno;
            SXE_LOG_ERROR("cannot create an eventfd to wake the loop: %s", sxe_strerror(rc));
            return rc;
        }
        if ((rc = loop->io->watch(loop, fd, SXE__WAKE_TAG, SXE__IO_IN)) < 0) {
            SXE_LOG_ERROR("cannot watch the eventfd that wakes the loop: %s", sxe_strerror(rc));
            sxe__sys.close(fd);
            return rc;
        }
        loop->wake_fd = fd;
    }
    for (unsigned i = 0; i < SXE__WAKERS_MAX; i++) {
        struct sxe_loop_waker *slot = &loop->wakers[i];
        if (slot->loop == NULL) {
            *slot = (struct sxe_loop_waker){.loop = loop, .hook = hook, .arg = arg};
            *waker = slot;
            return 0;
        }
    }
    return -ENOBUFS;
}

void sxe_loop_wake(sxe_loop_waker_t *waker)
{
    sxe_loop_t *loop = waker->loop;

    if (__atomic_exchange_n(&waker->pending, 1, __ATOMIC_ACQ_REL) == 0 &&
        __atomic_exchange_n(&loop->wake_sent, 1, __ATOMIC_ACQ_REL) == 0) {
        uint64_t one = 1;
        (void)sxe__sys.write(loop->wake_fd, &one, sizeof(one)); /* full only at 2^64 - 2 */
    }
}

void sxe_loop_waker_destroy(sxe_loop_waker_t *waker)
{
    if (waker != NULL) {
        *waker = (struct sxe_loop_waker){0};
    }
}

void sxe__wake_take(sxe_loop_t *loop)
{
    uint64_t count;

    (void)sxe__sys.read(loop->wake_fd, &count, sizeof(count)); /* EAGAIN: read by an earlier turn */
    __atomic_store_n(&loop->wake_sent, 0, __ATOMIC_SEQ_CST);
    for (unsigned i = 0; i < SXE__WAKERS_MAX; i++) {
        struct sxe_loop_waker *waker = &loop->wakers[i];
        if (waker->loop != NULL && __atomic_exchange_n(&waker->pending, 0, __ATOMIC_ACQ_REL)) {
            waker->hook(waker->arg);
        }
    }
}

void sxe__wake_close(sxe_loop_t *loop)
{
    if (loop->wake_fd >= 0) {
        sxe__sys.close(loop->wake_fd);
        loop->wake_fd = -1;
    }
    free(loop->wakers);
    loop->wakers = NULL;
}
