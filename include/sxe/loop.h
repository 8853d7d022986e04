/**
 * @file sxe/loop.h
 * @brief The event loop: all its memory made at creation, turns, "now", signals, the backend.
 *
 * A server is a few callbacks (sxe/conn.h):
 *
 *     static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
 *     {
 *         sxe_conn_write(conn, data, len);   // echo
 *         return len;                        // consumed; anything not consumed is kept
 *     }
 *     static const struct sxe_conn_handlers echo = {.on_read = on_read};
 *     ...
 *     if (sxe_loop_create(&loop, &(struct sxe_loop_options){.connections = 10000}) < 0 ||
 *         sxe_conn_listen(loop, &listener, (struct sockaddr *)&addr, sizeof(addr), NULL, &echo,
 *                         NULL) < 0)
 *         return 1; // the log says why
 *     sxe_loop_run(loop);
 *
 * Memory. The loop allocates everything at creation: the connection table (a pool, see
 * sxe/pool.h), the timer heap, an I/O buffer pool and the event array. Nothing on the hot path
 * allocates. A connection holds a buffer only while it has unconsumed input or queued output, so
 * 10,000 idle keep-alive connections cost about 200 bytes each.
 *
 * Threads. A loop and its connections belong to the thread that runs the loop. Run one loop per
 * core for more: sxe/workers.h runs and supervises them, in processes or threads.
 *
 * Callbacks. Every callback runs on the loop's thread, never re-entrantly for one connection:
 * while a callback for a connection runs, sxe makes no other callback for it, except on_close
 * when the callback itself closes it. A callback may close any connection, write to any
 * connection, start and stop timers and stop the loop. A sxe_conn_t pointer stays valid until its
 * on_close returns; after that the slot is reused. Keep sxe_conn_id() to refer to a connection
 * that may have closed.
 *
 * Backends. The API does not depend on the backend: input arrives in buffers sxe owns and output
 * is queued by sxe, so the same program runs on epoll (readiness) or io_uring (completion), chosen
 * by sxe_loop_options.backend or, for programs that leave it alone, SXE_BACKEND=epoll|io_uring|auto
 * in the environment.
 */
#ifndef SXE_LOOP_H
#define SXE_LOOP_H

#include <stdint.h>
#include <sys/types.h>

#include "sxe/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sxe_loop sxe_loop_t;
typedef struct sxe_conn sxe_conn_t;
typedef struct sxe_timer sxe_timer_t;

/** Which event backend a loop runs on (sxe_loop_options.backend). */
enum sxe_backend {
    SXE_BACKEND_DEFAULT,  /**< The environment's SXE_BACKEND (epoll, io_uring or auto), else epoll.
                           */
    SXE_BACKEND_EPOLL,    /**< epoll: readiness. */
    SXE_BACKEND_IO_URING, /**< io_uring: completion; sxe_loop_create fails if it cannot be set up.
                           */
    SXE_BACKEND_AUTO, /**< io_uring where it can be set up, else epoll (said once in the log). */
};

/** What a loop holds. Zero fields take the defaults shown. */
struct sxe_loop_options {
    uint32_t connections; /**< Connection table size, listeners and UDP sockets included (1024). */
    uint32_t buffers;     /**< I/O buffers shared by all connections (connections / 4 + 16). */
    uint32_t buffer_size; /**< Bytes per buffer: the largest message kept whole (16384). */
    uint32_t write_limit; /**< Most bytes one connection may have queued (4 * buffer_size). */
    uint32_t high_water; /**< Queued bytes at which sxe_conn_write says "stop" (write_limit / 2). */
    uint32_t timers;     /**< Timers that may run at once (64). */
    uint32_t events;     /**< Events taken from the kernel per turn (256). */
    uint64_t idle_timeout;    /**< ns a connection may sit with nothing pending (0: none). */
    uint64_t read_timeout;    /**< ns a partial message may wait for more bytes (0: none). */
    uint64_t write_timeout;   /**< ns queued output may wait for the peer to read (0: none). */
    uint64_t connect_timeout; /**< ns an outgoing connect may take (0: none). */
    /** ns a TLS handshake may take, from the accept to its end, however its bytes come (10 s). */
    uint64_t handshake_timeout;
    enum sxe_backend backend; /**< The event backend (SXE_BACKEND_DEFAULT). */
    /**
     * Large buffers (0: none), shared by all connections, for the few messages that outgrow
     * buffer_size: when a connection's kept input fills its buffer, it moves to a free large
     * buffer of large_buffer_size bytes, and back to an ordinary one (or none) once on_read has
     * consumed enough. Reserved at create, touched only when used: a program that takes messages
     * of a megabyte now and then pays for a few large buffers, not one per connection. When none
     * is free the connection overflows (on_overflow, with errno ENOBUFS) and no_large_buffer
     * counts it.
     */
    uint32_t large_buffers;
    uint32_t
        large_buffer_size; /**< Bytes per large buffer: more than buffer_size, at most 1 GiB. */
};

/** Loop counters, for monitoring and tests. */
struct sxe_loop_stats {
    uint64_t accepted;          /**< Connections accepted. */
    uint64_t connected;         /**< Outgoing connects completed. */
    uint64_t closed;            /**< Connections closed, for any reason. */
    uint64_t table_full;        /**< Connections refused because the table was full. */
    uint64_t evicted;           /**< Idle connections closed to make room. */
    uint64_t accept_errors;     /**< accept4 failures other than EAGAIN (EMFILE, ENOBUFS, ...). */
    uint64_t no_buffer;         /**< Connections closed because no buffer was free. */
    uint64_t stale_events;      /**< Events dropped because their slot was reused. */
    uint64_t timeouts;          /**< Connections closed by a timeout. */
    uint64_t datagrams_dropped; /**< UDP datagrams too large for a buffer. */
    uint32_t open;              /**< Connections open now, listeners and UDP sockets included. */
    uint32_t buffers_in_use;    /**< I/O buffers held now. */
    uint64_t no_large_buffer; /**< Messages that outgrew buffer_size when no large one was free. */
    uint32_t large_buffers_in_use; /**< Large buffers held now. */
    /** TLS handshakes refused: a ClientHello longer than a record while 16 such were being read. */
    uint64_t large_hellos_refused;
    uint64_t tls_handshakes; /**< TLS handshakes completed, as a server and as a client. */
    uint64_t tls_resumed;    /**< Of those, the ones that resumed a session. */
};

/**
 * Creates a loop and all of its memory. If SIGPIPE still has its default action (which would kill
 * the process when a peer vanishes mid-write), it is set to be ignored.
 * @return 0, -EINVAL for invalid options, -ENOMEM, or -errno from epoll_create1.
 */
SXE_MUST_CHECK int sxe_loop_create(sxe_loop_t **loop, const struct sxe_loop_options *options);

/** Closes every connection (on_close with SXE_CLOSE_SHUTDOWN), then frees the loop. */
void sxe_loop_destroy(sxe_loop_t *loop);

/**
 * Runs until sxe_loop_stop() or a stop signal (sxe_loop_stop_on_signals()).
 * @return 0, or a negative errno if waiting for events failed (other than EINTR).
 */
int sxe_loop_run(sxe_loop_t *loop);

/**
 * Runs one turn: waits up to timeout_ns for events (0: do not wait), handles them, then runs
 * expired timers and timeouts. @return the number of events handled, or a negative errno.
 */
int sxe_loop_run_once(sxe_loop_t *loop, uint64_t timeout_ns);

/** Makes sxe_loop_run() return after the current turn. */
void sxe_loop_stop(sxe_loop_t *loop);

/** CLOCK_MONOTONIC nanoseconds, read once per turn. */
uint64_t sxe_loop_now(const sxe_loop_t *loop);

/**
 * On SIGINT or SIGTERM, stop cleanly: close the listeners, give queued output up to drain_ns to
 * be sent, close every connection (SXE_CLOSE_SHUTDOWN) and return from sxe_loop_run(). On SIGQUIT,
 * drain instead (sxe_loop_drain()). On SIGHUP, call the hook of sxe_loop_on_hangup(), or log that
 * it is ignored: it never kills the process (SIGUSR1 and SIGUSR2 too, once sxe_loop_on_signal()
 * hooks them). Blocks these signals in the calling thread and reads them from a signalfd.
 * @return 0 or -errno.
 */
int sxe_loop_stop_on_signals(sxe_loop_t *loop, uint64_t drain_ns);

/**
 * Calls hook(arg) on the loop's thread for each SIGHUP the loop reads (sxe_loop_stop_on_signals()):
 * where a program reopens its log files after logrotate moved them. NULL removes it.
 * The same as sxe_loop_on_signal(loop, SIGHUP, hook, arg).
 */
void sxe_loop_on_hangup(sxe_loop_t *loop, void (*hook)(void *arg), void *arg);

/**
 * Calls hook(arg) on the loop's thread for each signo the loop reads: SIGHUP, SIGUSR1 or SIGUSR2.
 * SIGUSR1 and SIGUSR2 are read (blocked in the calling thread, and added to the signalfd of
 * sxe_loop_stop_on_signals(), before or after it) only once hooked; NULL removes the hook, and
 * the signal, still blocked, is then logged and ignored.
 * @return 0, -EINVAL for another signal, or -errno from signalfd.
 */
SXE_MUST_CHECK int sxe_loop_on_signal(sxe_loop_t *loop, int signo, void (*hook)(void *arg),
                                      void *arg);

/**
 * Stops as a stop signal does: closes the listeners, gives queued output up to drain_ns to be sent,
 * closes every connection (SXE_CLOSE_SHUTDOWN) and makes sxe_loop_run() return. Call it on the
 * loop's thread (from a callback, or between turns). Calling it again, or while stopping, does
 * nothing.
 */
void sxe_loop_shutdown(sxe_loop_t *loop, uint64_t drain_ns);

/**
 * Stops gracefully: the listeners stop accepting (they stay open until the stop, so that a socket
 * shared with another process keeps what waits in it for that one), the connections it accepted
 * finish what they are doing, and the rest is closed once none of those is open, or at drain_ns,
 * whichever comes first; then sxe_loop_run() returns. The protocols end their connections
 * themselves, told by the hooks of sxe_loop_at_stop(): the HTTP server ends each connection with
 * its next answer (Connection: close, or HTTP/2's GOAWAY); WebSocket says 1001 and waits for the
 * peer's close. A connection idle for a second (or its idle timeout, if shorter) is closed, as a
 * drained one. A connection of a protocol that never closes holds the drain to its deadline.
 * Connections the program opened (sxe_conn_connect) do not hold it. Call it on the loop's thread;
 * calling it again, or while stopping, does nothing.
 */
void sxe_loop_drain(sxe_loop_t *loop, uint64_t drain_ns);

/**
 * Adds hook(arg) to the functions called once when the loop begins to stop (sxe_loop_shutdown(),
 * sxe_loop_drain(), a stop signal), before its listeners close and its output drains: where a
 * protocol module says goodbye (WebSocket's close frames with 1001). A NULL hook removes the one
 * added with arg.
 * @return 0, -ENOBUFS past 8 hooks, or -ENOENT for a removal that finds none.
 */
int sxe_loop_at_stop(sxe_loop_t *loop, void (*hook)(void *arg), void *arg);

typedef struct sxe_loop_waker sxe_loop_waker_t; /**< A way for other threads to wake a loop. */

/**
 * Makes a waker: after sxe_loop_wake(waker) on any thread (or in a signal handler), the loop
 * calls hook(arg) on its own thread, at its next turn. Wakes that come before the hook runs are
 * one call; a wake during the hook is another. What the waking thread wrote before it woke the
 * loop is visible to the hook. This is how results come back from threads (sxe/work.h): put them
 * where the hook looks, then wake. A loop has at most 16 wakers; they share one eventfd, made
 * with the first.
 * @return 0, -EINVAL (no hook), -ENOBUFS past 16, or -errno from eventfd or from watching it.
 */
SXE_MUST_CHECK int sxe_loop_waker_create(sxe_loop_t *loop, sxe_loop_waker_t **waker,
                                         void (*hook)(void *arg), void *arg);

/**
 * Wakes the waker's loop: its hook runs on the loop's thread, soon. Safe from any thread and in
 * a signal handler; costs an atomic exchange, and a write to the eventfd when the loop has not
 * been woken since it last looked.
 */
void sxe_loop_wake(sxe_loop_waker_t *waker);

/**
 * Removes a waker; a wake already made may not call its hook. On the loop's thread, once no
 * other thread can wake it. sxe_loop_destroy() removes those left.
 */
void sxe_loop_waker_destroy(sxe_loop_waker_t *waker);

/** What an outside descriptor waits for, and what it is ready for (sxe_loop_watch_fd()). */
#define SXE_LOOP_FD_READ  1u
#define SXE_LOOP_FD_WRITE 2u
#define SXE_LOOP_FD_BOTH  (SXE_LOOP_FD_READ | SXE_LOOP_FD_WRITE)

/** fd is ready for what (SXE_LOOP_FD_READ, SXE_LOOP_FD_WRITE or both). */
typedef void (*sxe_loop_fd_ready_t)(void *arg, int fd, unsigned what);

/**
 * Watches a descriptor the loop does not own, such as the sockets of a library that does its own
 * I/O (the resolver's c-ares, sxe/resolve.h): ready(arg, fd, what) is called on the loop's thread
 * while fd is ready for what it waits for (wanted: SXE_LOOP_FD_READ, SXE_LOOP_FD_WRITE or both),
 * again each turn while that holds. An error or hang-up on fd reports what it waits for, so the
 * read or write that follows says what went wrong. A call may find the readiness gone (taken
 * already, or meant for a descriptor watched before in the same slot): read and write without
 * blocking. Called again for a watched fd, it changes what fd waits for, and ready and arg; wanted
 * 0 stops the watch, after which fd is still the caller's to close (stop before closing it).
 * Connections are sxe_conn's (sxe/conn.h); this is for a few descriptors more: at most 16 per loop,
 * forgotten (not closed) by sxe_loop_destroy() when their owner left them watched.
 * @return 0; -EINVAL for a negative fd, a bad wanted or a NULL ready; -EBADF for a descriptor
 *         not open; -ENOENT for wanted 0 on a descriptor not watched; -ENOBUFS past 16; or the
 *         backend's -errno.
 */
SXE_MUST_CHECK int sxe_loop_watch_fd(sxe_loop_t *loop, int fd, unsigned wanted,
                                     sxe_loop_fd_ready_t ready, void *arg);

/** Copies the loop's counters into stats. */
void sxe_loop_stats(const sxe_loop_t *loop, struct sxe_loop_stats *stats);

/**
 * The options the loop runs with, every default filled in: what a protocol module needs to size
 * its own state (buffer_size, connections) or to decide on backpressure (high_water).
 */
const struct sxe_loop_options *sxe_loop_options(const sxe_loop_t *loop);

/** The event backend the loop runs on: "epoll" or "io_uring". */
const char *sxe_loop_backend(const sxe_loop_t *loop);

#ifdef __cplusplus
}
#endif

#endif
