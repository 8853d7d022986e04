/**
 * @file sxe/fiber.h
 * @brief Fibers: stackful contexts on a loop, so code that waits reads like sequential code.
 *
 * A fiber runs a function on a stack of its own. It runs on the loop's thread, never in parallel
 * with anything else on that loop: it runs from sxe_fiber_start() until it first waits (sleeps,
 * yields, or waits to be woken), then the loop goes on, and the fiber continues when what it waits
 * for happens, from inside the loop's callback for it (a timer, or whoever calls sxe_fiber_wake()).
 *
 *     static void greet(void *arg)
 *     {
 *         for (int i = 0; i < 3; i++) {
 *             printf("%s %d\n", (const char *)arg, i);
 *             (void)sxe_fiber_sleep(100 * SXE_NS_PER_MSEC); // the loop runs meanwhile
 *         }
 *     }
 *     ...
 *     if (sxe_fibers_create(&fibers, loop, NULL) < 0 ||
 *         sxe_fiber_start(fibers, greet, "hello", NULL) < 0)
 *         return 1;
 *     sxe_loop_run(loop);
 *
 * Memory is fixed at sxe_fibers_create(): options.count stacks of options.stack_size bytes, each
 * with a guard page below it, mapped and pre-faulted up front (so a fiber never page-faults on its
 * stack, and starting one costs no system call). Starting a fiber when all are in use fails with
 * -ENOBUFS. A fiber that overflows its stack hits the guard page: the process stops with a message
 * that says so (raise options.stack_size), not with corrupted memory.
 *
 * A switch between contexts saves and restores the callee-saved registers on x86-64 (a handful of
 * instructions, no system call); elsewhere it falls back to ucontext, which is correct but makes a
 * system call per switch. AddressSanitizer is told of every switch, and valgrind of every stack.
 *
 * Rules: fibers belong to the thread of their loop. A fiber's function must not call
 * sxe_loop_run() or sxe_loop_run_once(). A waiting fiber's pointer stays valid until it ends; after
 * that its slot is reused. sxe_fibers_destroy() abandons fibers still waiting: their stacks go, and
 * their functions never return, so a fiber that owns memory must be woken to free it first.
 */
#ifndef SXE_FIBER_H
#define SXE_FIBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "sxe/conn.h"
#include "sxe/error.h"
#include "sxe/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sxe_fibers sxe_fibers_t; /**< A pool of fibers on one loop. */
typedef struct sxe_fiber sxe_fiber_t;   /**< One fiber. */
typedef void (*sxe_fiber_fn_t)(void *arg);

/** Zero fields take the defaults shown. */
struct sxe_fibers_options {
    uint32_t count;      /**< Fibers that may exist at once: the stacks in the pool (256). */
    uint32_t stack_size; /**< Usable bytes per stack, rounded up to whole pages (65536). */
};

/** Pool counters. */
struct sxe_fibers_stats {
    uint64_t started;   /**< Fibers started. */
    uint64_t finished;  /**< Fibers whose function returned. */
    uint64_t no_fiber;  /**< Starts refused because every fiber was in use (-ENOBUFS). */
    uint64_t switches;  /**< Context switches, both ways. */
    uint32_t live;      /**< Fibers started and not yet finished. */
    uint32_t most_live; /**< The most that were live at once. */
};

/**
 * Makes a pool of fibers on loop, with its stacks: count * (stack_size + a page) bytes, mapped and
 * touched now. Each waiting fiber's sleep uses one of the loop's timers (sxe_loop_options.timers).
 * @return 0, -EINVAL, -ENOMEM (the stacks could not be mapped), or -errno.
 */
SXE_MUST_CHECK int sxe_fibers_create(sxe_fibers_t **fibers, sxe_loop_t *loop,
                                     const struct sxe_fibers_options *options);

/**
 * Frees the pool and its stacks; fibers still waiting are abandoned (see the rules above). Call it
 * before destroying the pool's loop (sleeping fibers' timers are stopped on it), and not from one
 * of its fibers.
 */
void sxe_fibers_destroy(sxe_fibers_t *fibers);

/**
 * Starts fn(arg) on a fiber of the pool and runs it now, until it first waits or returns. From a
 * fiber too: the starter continues once the new fiber waits.
 * @param fiber  Set to the new fiber (NULL if not wanted): valid until it ends.
 * @return 0, or -ENOBUFS when every fiber is in use (counted in no_fiber).
 */
SXE_MUST_CHECK int sxe_fiber_start(sxe_fibers_t *fibers, sxe_fiber_fn_t fn, void *arg,
                                   sxe_fiber_t **fiber);

/** The fiber running now, or NULL on the thread's own stack. */
sxe_fiber_t *sxe_fiber_self(void);

/**
 * From a fiber: waits ns (at least one loop turn for 0), while the loop runs.
 * @return 0; -EPERM outside a fiber; -ENOBUFS when every loop timer is in use.
 */
int sxe_fiber_sleep(uint64_t ns);

/** From a fiber: lets the loop run one turn, then goes on. @return as sxe_fiber_sleep(). */
int sxe_fiber_yield(void);

/**
 * From a fiber: waits until another context calls sxe_fiber_wake() for it; the building block of
 * blocking-style calls (register the fiber with whatever will complete, then wait).
 * @return the value given to sxe_fiber_wake(); -EPERM outside a fiber.
 */
int sxe_fiber_wait(void);

/**
 * Wakes a fiber that waits in sxe_fiber_wait(), which returns value, and runs it now until it
 * waits again or ends; then this returns.
 * @return 0; -EINVAL if fiber is not waiting in sxe_fiber_wait() (asserts in debug builds).
 */
int sxe_fiber_wake(sxe_fiber_t *fiber, int value);

/** The pool's counters. */
void sxe_fibers_stats(const sxe_fibers_t *fibers, struct sxe_fibers_stats *stats);

/**
 * A connection used from one fiber with blocking-style calls: each waits, while the loop runs,
 * until it can return. The caller owns the memory (on the fiber's stack, say) from
 * sxe_fiber_connect() until sxe_fiber_close(); never touch the fields.
 */
typedef struct sxe_fiber_stream {
    sxe_conn_t *conn;    /* NULL once closed */
    sxe_fiber_t *waiter; /* the fiber waiting in a call */
    char *buf;           /* the read under way */
    size_t size;
    int err;       /* why it closed: -errno, or -EPIPE */
    bool eof;      /* the peer has shut down its side */
    bool paused;   /* input arrived with no read waiting: it waits in the connection */
    bool draining; /* a write waits for the output to drain */
} sxe_fiber_stream_t;

/**
 * From a fiber: connects stream to a TCP or Unix stream address (connect_timeout applies).
 * @return 0; -EPERM outside a fiber; -ENOBUFS if the loop's table is full; -ECONNREFUSED,
 *         -ETIMEDOUT or another -errno if the connect failed.
 */
int sxe_fiber_connect(sxe_fiber_stream_t *stream, sxe_loop_t *loop, const struct sockaddr *address,
                      socklen_t address_len);

/**
 * From a fiber: reads what has arrived, up to size bytes, waiting until something has.
 * @return the bytes read; 0 once the peer has shut down its side; -errno if the connection closed
 *         (-EPIPE after sxe_fiber_close(), or when it closed for no error).
 */
ssize_t sxe_fiber_read(sxe_fiber_stream_t *stream, void *buf, size_t size);

/**
 * From a fiber: queues len bytes to send, and waits while the output is backed up (high_water),
 * so a fast writer runs at the peer's pace. @return 0, or -errno (-EPIPE: closed).
 */
int sxe_fiber_write(sxe_fiber_stream_t *stream, const void *data, size_t len);

/** Closes the stream's connection (queued output is sent first, if the peer reads it). */
void sxe_fiber_close(sxe_fiber_stream_t *stream);

#ifdef __cplusplus
}
#endif

#endif
