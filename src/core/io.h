/*
 * The event backend: how a loop waits for its descriptors. Two backends implement it:
 * io_epoll.c (readiness: epoll) and io_uring.c (completion: io_uring). Nothing else in src/ names
 * either, and a third backend is one more file with a struct sxe__io_backend in it.
 *
 * The contract is Redis ae's four entry points (open, watch, forget, wait), plus the two a
 * completion backend needs to be honest about:
 * - close, the other half of open;
 * - send: a completion backend sends from the caller's memory after the call has returned, so
 *   whoever queued the bytes must leave them alone until the backend says it is done with them.
 *   A readiness backend sends at once, and the caller goes on as it always did.
 * A completion backend also receives for its watchers (SXE__IO_RECV) and accepts for them
 * (SXE__IO_ACCEPT); an event then carries the result, not mere readiness. A watcher that asks for
 * those gets either kind of event and handles both, so the layers above need not know which
 * backend runs.
 *
 * Tags. Each watched descriptor carries a 64-bit tag that comes back with its events. The loop
 * packs a slot index and its generation in it, so an event for a slot that has been reused since
 * is recognised and dropped.
 */
#ifndef SXE_IO_H
#define SXE_IO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "sxe/loop.h"

/* What a watcher wants (watch), and what an event reports (wait). */
#define SXE__IO_IN   0x001u /* readable; as an event without SXE__IO_RECV: read it yourself */
#define SXE__IO_OUT  0x002u /* writable */
#define SXE__IO_HUP  0x004u /* event: the peer shut down its side or hung up */
#define SXE__IO_ERR  0x008u /* event: the descriptor has an error pending */
#define SXE__IO_EDGE 0x010u /* wanted: report a change once, not for as long as it holds */
#define SXE__IO_RECV 0x020u /* wanted with IN: receive for me if you can; event: data, result */
#define SXE__IO_ACCEPT                                                                             \
    0x040u                    /* wanted with IN on a listener: accept for me if you can; event:    \
                                 result is the new connection's fd (non-blocking, close-on-exec) */
#define SXE__IO_SENT   0x080u /* event: a send that returned SXE__IO_PENDING is done; result */
#define SXE__IO_MODIFY 0x100u /* wanted: fd is already watched; change what it wants */
#define SXE__IO_KEPT   0x200u /* event from the ready list: offer kept input, read nothing */

/* sxe__io_send's answer from a completion backend: the result comes later, as SXE__IO_SENT. */
#define SXE__IO_PENDING ((ssize_t)-4096)

struct sxe__io_event {
    uint64_t tag;
    uint32_t events; /* SXE__IO_* */
    int32_t result;  /* RECV: bytes (0: end of stream) or -errno; ACCEPT: fd or -errno;
                        SENT: bytes sent or -errno */
    char *data;      /* RECV: the bytes, lent by the backend until the next sxe__io_wait */
};

/* What a backend is: it tells readiness (the caller reads and writes), or it completes the
 * calls itself (it receives into its own buffers and lends them, and sends for the caller). */
enum sxe__io_kind_of_backend { SXE__IO_READINESS, SXE__IO_COMPLETION };

struct sxe__io_backend {
    const char *name;
    enum sxe__io_kind_of_backend kind;

    /* Makes the backend's state in loop->io_state. @return 0 or -errno (logged). */
    int (*open)(sxe_loop_t *loop);

    /* Frees what open made. Descriptors still watched are the caller's to close. */
    void (*close)(sxe_loop_t *loop);

    /*
     * Starts watching fd (or, with SXE__IO_MODIFY, changes what it wants). Events for fd carry
     * tag. A descriptor is watched once per loop. @return 0 or -errno (logged).
     */
    int (*watch)(sxe_loop_t *loop, int fd, uint64_t tag, unsigned wanted);

    /*
     * Stops watching fd, and closes it if close_fd. Afterwards no event for fd is reported, even
     * one the kernel had already produced; what such events held (received bytes, accepted
     * connections) is released. Events a wait has already returned are the loop's to drop (and
     * an accepted connection among them, to close). The stream layer never forgets a fd with a send
     * pending, except when the loop is destroyed: the send is then cancelled with the rest.
     */
    void (*forget)(sxe_loop_t *loop, int fd, bool close_fd);

    /*
     * Waits until an event, or until deadline (CLOCK_MONOTONIC ns; <= loop->now: do not block;
     * UINT64_MAX: no deadline), and fills events with at most max of them. Also hands the kernel
     * whatever was submitted since the last wait. Data lent by the last wait's events is taken
     * back. @return the number of events, 0 (deadline or EINTR), or -errno (logged).
     */
    int (*wait)(sxe_loop_t *loop, uint64_t deadline, struct sxe__io_event *events, int max);

    /*
     * Sends iov[0..count) on fd with flags (MSG_*). A readiness backend sends now: bytes sent,
     * or -errno (-EAGAIN: the socket is full; an edge-triggered SXE__IO_OUT says when it is not).
     * A completion backend may copy iov and return SXE__IO_PENDING: the bytes stay the caller's
     * but must not change or go until the SXE__IO_SENT event for tag. One send per fd at a time.
     */
    ssize_t (*send)(sxe_loop_t *loop, int fd, uint64_t tag, const struct iovec *iov, int count,
                    int flags);

    /*
     * A completion backend lends received bytes (SXE__IO_RECV) until the next wait. keep() holds
     * the buffer of data past it, for a watcher that cannot take the bytes yet, until release()
     * gives it back; it refuses (false) when holding more would leave the backend too few buffers
     * to receive for everyone else. A readiness backend lends nothing and leaves both NULL.
     */
    bool (*keep)(sxe_loop_t *loop, const char *data);
    void (*release)(sxe_loop_t *loop, const char *data);
};

extern const struct sxe__io_backend sxe__io_epoll;
extern const struct sxe__io_backend sxe__io_uring;

/*
 * Opens the backend the loop's options ask for (io.c) and sets loop->io: automatic falls back to
 * epoll, saying so once in the log, when io_uring cannot be set up; an explicit choice fails.
 * @return 0 or -errno (logged).
 */
int sxe__io_open(sxe_loop_t *loop);

#endif
