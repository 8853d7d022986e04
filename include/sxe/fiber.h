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
 *     sxe_fibers_create(&fibers, loop, NULL);
 *     sxe_fiber_start(fibers, greet, "hello", NULL);
 *     sxe_loop_run(loop);
 *
 * Memory is fixed at sxe_fibers_create(): options.count stacks of options.stack_size bytes, each
 * with a guard page below it, mapped and pre-faulted up front (so a fiber never page-faults on its
 * stack, and starting one costs no system call). Starting a fiber when all are in use fails with
 * -ENOBUFS. A fiber that overflows its stack hits the guard page: the process stops with a message
 * that names the fiber's stack size, not with corrupted memory.
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

#include <stdint.h>

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

#ifdef __cplusplus
}
#endif

#endif
