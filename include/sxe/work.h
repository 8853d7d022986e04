/**
 * @file sxe/work.h
 * @brief Work off the loop: a pool of threads that runs blocking functions and hands each
 * result back to the loop's thread.
 *
 * A loop must never block: one slow call (a password hash, a read from a slow disk, SQLite,
 * getaddrinfo) stalls every connection on it. Give such a call to a pool instead:
 *
 *     static void hash(void *arg)              // on a pool thread: may block
 *     {
 *         struct check *check = arg;
 *         check->ok = password_matches(check->user, check->password);
 *     }
 *     static void hashed(void *arg, int status) // on the loop's thread, a turn or more later
 *     {
 *         struct check *check = arg;
 *         answer(check->request, status == 0 && check->ok ? 200 : 401);
 *     }
 *     ...
 *     if (sxe_work_pool_create(&pool, loop, NULL) < 0)
 *         return 1;
 *     if (sxe_work_submit(pool, hash, hashed, check, NULL) < 0)  // -ENOBUFS: the queue is full
 *         answer(request, 503);
 *
 * In a fiber, sxe_work_call() reads as a plain call: the fiber waits, the loop runs on.
 *
 * Memory is fixed at sxe_work_pool_create(): options.queue job slots, and options.threads
 * threads started then (their stacks are the system's, or options.stack_size). A job holds its
 * slot from its submission until its done callback returns; submitting when every slot is held
 * fails with -ENOBUFS at once, never blocks. Jobs start in the order submitted; results come
 * back in the order they finished. The threads block every signal, so a loop's signalfd and
 * SIGPIPE's handling are left to the loop's thread.
 *
 * Rules: submit, cancel, call and destroy on the loop's thread. A work function must not touch
 * the loop or its connections (nothing of sxe is thread-safe but sxe_loop_wake()); it hands its
 * result over in arg, which the done callback reads.
 */
#ifndef SXE_WORK_H
#define SXE_WORK_H

#include <stdint.h>

#include "sxe/error.h"
#include "sxe/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sxe_work_pool sxe_work_pool_t; /**< Threads that run jobs for one loop. */

/** Runs on a pool thread, and may block. */
typedef void (*sxe_work_fn_t)(void *arg);

/**
 * Runs on the loop's thread when the job is over: status 0 once work(arg) has returned, or
 * -ECANCELED when it never started (sxe_work_cancel(), or the pool's destruction). It may
 * submit more jobs, and destroy the pool (which then goes once the callbacks due with it have run).
 */
typedef void (*sxe_work_done_t)(void *arg, int status);

/** Zero fields take the defaults shown. */
struct sxe_work_options {
    uint32_t threads;    /**< Threads that run jobs (4, as libuv's pool). At most 256. */
    uint32_t queue;      /**< Jobs submitted and not yet done, at most (1024). */
    uint32_t stack_size; /**< Bytes of each thread's stack (0: the system's default). */
    uint64_t stop_ns;    /**< How long sxe_work_pool_destroy() waits for jobs running (5 s;
                              UINT64_MAX: as long as they take). */
};

/** Pool counters. */
struct sxe_work_stats {
    uint64_t submitted; /**< Jobs accepted by sxe_work_submit(). */
    uint64_t done;      /**< Jobs whose done callback said 0. */
    uint64_t cancelled; /**< Jobs whose done callback said -ECANCELED. */
    uint64_t full;      /**< Submissions refused with -ENOBUFS. */
    uint32_t held;      /**< Slots held now: queued, running, or done and not yet called back. */
    uint32_t most_held; /**< The most held at once. */
};

/**
 * Makes a pool on loop and starts its threads; its results come back through a waker of the
 * loop (sxe_loop_waker_create()).
 * @return 0, -EINVAL for invalid options, -ENOMEM, -ENOBUFS (the loop has 16 wakers), or the
 *         -errno of creating a thread (every thread started is stopped again).
 */
SXE_MUST_CHECK int sxe_work_pool_create(sxe_work_pool_t **pool, sxe_loop_t *loop,
                                        const struct sxe_work_options *options);

/**
 * Stops the pool. Jobs not started are called back with -ECANCELED; jobs running are waited for,
 * up to options.stop_ns, and called back with 0 when they return in time. A job still running
 * then is abandoned: its done callback is never called, its thread is left to end by itself, and
 * the pool's memory stays for it (logged as an error). Call it on the loop's thread, before
 * destroying the loop, and before destroying fibers that call sxe_work_call() (their jobs hold
 * the fibers' stacks). From a done callback, or a fiber a done callback woke, the pool goes once
 * the callbacks due with that one have run; submissions are refused from then on.
 */
void sxe_work_pool_destroy(sxe_work_pool_t *pool);

/**
 * Queues work(arg) for a pool thread; done(arg, status) follows on the loop's thread, never
 * from inside this call.
 * @param id  Set to the job's id for sxe_work_cancel() (NULL if not wanted).
 * @return 0, -ENOBUFS when options.queue jobs are held (counted in full), -ESHUTDOWN while the
 *         pool is being destroyed, or -EINVAL (asserts in debug builds).
 */
SXE_MUST_CHECK int sxe_work_submit(sxe_work_pool_t *pool, sxe_work_fn_t work, sxe_work_done_t done,
                                   void *arg, uint64_t *id);

/**
 * Cancels a job that has not started: it never runs, and its done callback says -ECANCELED, at
 * the loop's next turn.
 * @return 0; -EBUSY if it runs, has run, or was cancelled already (its done callback is due, and
 *         says 0 or -ECANCELED as it would have); -ENOENT if id names no job held now (called
 *         back already, or never an id).
 */
int sxe_work_cancel(sxe_work_pool_t *pool, uint64_t id);

/**
 * From a fiber: runs work(arg) on a pool thread and waits for it, while the loop runs on. The
 * job holds the fiber's stack: destroy the pool before the fibers (sxe_fibers_destroy() abandons
 * a fiber that waits here, and its job would come back to a stack that is gone).
 * @return 0 once it has run; -ECANCELED if the pool was destroyed first; -ENOBUFS, -ESHUTDOWN
 *         or -EINVAL as sxe_work_submit(); -EPERM outside a fiber.
 */
int sxe_work_call(sxe_work_pool_t *pool, sxe_work_fn_t work, void *arg);

/** The pool's counters. */
void sxe_work_stats(const sxe_work_pool_t *pool, struct sxe_work_stats *stats);

#ifdef __cplusplus
}
#endif

#endif
