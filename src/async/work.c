/*
 * The work pool: see sxe/work.h.
 *
 * Jobs live in a fixed array of slots. The loop's thread alone takes slots from the free list and
 * gives them back (submit, and the delivery of results), so that list needs no lock. Two mutexes
 * guard the rest, so that the threads taking jobs and those handing results back do not wait for
 * each other: `lock` the queue of jobs not started (a doubly linked FIFO, so a cancel unlinks in
 * O(1)) and whether a job is queued or running; `over_lock` the list of jobs over but not yet
 * called back. A thread that finishes a job appends it to that list and, when the list was empty,
 * wakes the loop while it still holds over_lock: a list that is not empty has a wake on its way,
 * whose delivery takes the whole list, so a burst of results costs one wake; and once the pool is
 * being destroyed no thread can wake a waker that is gone. A thread is signalled only when one
 * waits idle, and jobs submitted by done callbacks are queued together when the delivery ends:
 * one lock and one signal for the batch, not one each.
 */
#define SXE_LOG_MODULE work_log
#include "sxe/log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "sxe/clock.h"
#include "sxe/fiber.h"
#include "sxe/work.h"
#include "sys.h"

static struct sxe_log_module work_log = SXE_LOG_MODULE_INIT(WORK);

#define DEFAULT_THREADS 4
#define DEFAULT_QUEUE   1024
#define DEFAULT_STOP_NS (5 * SXE_NS_PER_SEC)
#define THREADS_MAX     256
#define QUEUE_MAX       (1u << 24)
#define NONE            UINT32_MAX

enum job_state { JOB_FREE, JOB_BATCHED, JOB_QUEUED, JOB_RUNNING, JOB_OVER };

struct job {
    sxe_work_fn_t work;
    sxe_work_done_t done;
    void *arg;
    uint32_t next; /* the queue's, the done list's or the free list's next */
    uint32_t prev; /* the queue's previous */
    uint32_t generation;
    uint8_t state;  /* enum job_state: QUEUED and RUNNING under lock, OVER under over_lock */
    bool cancelled; /* over without running: its done callback says -ECANCELED */
};

struct list {
    uint32_t head, tail;
};

struct sxe_work_pool {
    sxe_loop_waker_t *waker;
    struct sxe_work_options options;
    struct job *jobs;
    uint32_t free_head; /* the loop's thread only */
    bool delivering;    /* in the done callbacks: a destruction waits for their end */
    bool destroy_later; /* sxe_work_pool_destroy() was called from one */
    bool destroying;    /* in destroy_now(): its own delivery's callbacks cannot begin another */
    struct list batch;  /* the loop's thread only: submitted by done callbacks, not yet queued */

    pthread_mutex_t lock;
    pthread_cond_t queued; /* signalled for a job queued while a thread idles; broadcast at stop */
    struct list queue;     /* under lock: jobs not started, oldest first */
    uint32_t idle;         /* under lock: threads waiting for a job */
    bool stopping;         /* under lock: threads end once the queue is empty */
    pthread_mutex_t over_lock;
    struct list over;      /* under over_lock: jobs over, not yet called back, oldest first */
    bool abandoned;        /* under over_lock: the loop's side is gone; wake no one */
    uint32_t started;      /* threads started */
    uint32_t ended;        /* under lock: threads that have ended */
    pthread_cond_t ending; /* broadcast by each thread as it ends (CLOCK_MONOTONIC) */
    pthread_t *threads;

    struct sxe_work_stats stats; /* the loop's thread only */
};

static void list_append(struct job *jobs, struct list *list, uint32_t i)
{
    jobs[i].next = NONE;
    jobs[i].prev = list->tail;
    if (list->tail == NONE) {
        list->head = i;
    } else {
        jobs[list->tail].next = i;
    }
    list->tail = i;
}

static void list_unlink(struct job *jobs, struct list *list, uint32_t i)
{
    struct job *job = &jobs[i];

    if (job->prev == NONE) {
        list->head = job->next;
    } else {
        jobs[job->prev].next = job->next;
    }
    if (job->next == NONE) {
        list->tail = job->prev;
    } else {
        jobs[job->next].prev = job->prev;
    }
}

/* A job is over (run, or cancelled): the loop hears of it. */
static void job_over(sxe_work_pool_t *pool, uint32_t i)
{
    pthread_mutex_lock(&pool->over_lock);
    bool was_empty = pool->over.head == NONE;
    __atomic_store_n(&pool->jobs[i].state, JOB_OVER, __ATOMIC_RELAXED);
    list_append(pool->jobs, &pool->over, i);
    if (was_empty && !pool->abandoned) {
        sxe_loop_wake(pool->waker);
    }
    pthread_mutex_unlock(&pool->over_lock);
}

static void *thread_main(void *arg)
{
    sxe_work_pool_t *pool = arg;

    for (;;) {
        pthread_mutex_lock(&pool->lock);
        while (pool->queue.head == NONE && !pool->stopping) {
            pool->idle++;
            pthread_cond_wait(&pool->queued, &pool->lock);
            pool->idle--;
        }
        uint32_t i = pool->queue.head;
        if (i == NONE) { /* stopping, and nothing left to start */
            pool->ended++;
            pthread_cond_broadcast(&pool->ending);
            pthread_mutex_unlock(&pool->lock);
            return NULL;
        }
        struct job *job = &pool->jobs[i];
        list_unlink(pool->jobs, &pool->queue, i);
        __atomic_store_n(&job->state, JOB_RUNNING, __ATOMIC_RELAXED); /* cancel peeks */
        pthread_mutex_unlock(&pool->lock);

        job->work(job->arg);
        job_over(pool, i);
    }
}

/* Under lock: wakes as many idle threads as there are new jobs, at most. */
static void signal_idle(sxe_work_pool_t *pool, uint32_t jobs)
{
    if (pool->idle == 0) {
        return;
    }
    if (jobs >= pool->idle) {
        pthread_cond_broadcast(&pool->queued);
        return;
    }
    while (jobs-- > 0) {
        pthread_cond_signal(&pool->queued);
    }
}

/* What done callbacks submitted, queued as one. */
static void queue_batch(sxe_work_pool_t *pool)
{
    if (pool->batch.head == NONE) {
        return;
    }
    uint32_t count = 0;
    pthread_mutex_lock(&pool->lock);
    for (uint32_t i = pool->batch.head; i != NONE; i = pool->jobs[i].next, count++) {
        pool->jobs[i].state = JOB_QUEUED;
    }
    if (pool->queue.tail == NONE) {
        pool->queue = pool->batch;
    } else {
        pool->jobs[pool->queue.tail].next = pool->batch.head;
        pool->jobs[pool->batch.head].prev = pool->queue.tail;
        pool->queue.tail = pool->batch.tail;
    }
    signal_idle(pool, count);
    pthread_mutex_unlock(&pool->lock);
    pool->batch = (struct list){NONE, NONE};
}

static void destroy_now(sxe_work_pool_t *pool);

/* On the loop's thread: calls back every job over, each slot freed before its callback (which
 * may submit again). */
static void deliver(void *arg)
{
    sxe_work_pool_t *pool = arg;

    pthread_mutex_lock(&pool->over_lock);
    uint32_t i = pool->over.head;
    pool->over = (struct list){NONE, NONE};
    pthread_mutex_unlock(&pool->over_lock);

    pool->delivering = true;
    while (i != NONE) {
        struct job *job = &pool->jobs[i];
        uint32_t next = job->next;
        sxe_work_done_t done = job->done;
        void *job_arg = job->arg;
        int status = job->cancelled ? -ECANCELED : 0;

        job->state = JOB_FREE; /* no thread sees it again: it left every list under the lock */
        job->generation++;
        job->next = pool->free_head;
        pool->free_head = i;
        pool->stats.held--;
        if (status == 0) {
            pool->stats.done++;
        } else {
            pool->stats.cancelled++;
        }
        done(job_arg, status);
        i = next;
    }
    pool->delivering = false;
    queue_batch(pool);
    if (pool->destroy_later && !pool->destroying) {
        destroy_now(pool); /* asked for by a callback of this delivery: pool is gone after */
    }
}

static bool options_valid(const struct sxe_work_options *options)
{
    return options->threads >= 1 && options->threads <= THREADS_MAX && options->queue >= 1 &&
           options->queue <= QUEUE_MAX;
}

/* Starts the threads with every signal blocked (they inherit the mask). */
static int start_threads(sxe_work_pool_t *pool)
{
    pthread_attr_t attr;
    sigset_t all, old;
    int rc = 0;

    sigfillset(&all);
    pthread_attr_init(&attr);
    if (pool->options.stack_size != 0 &&
        (rc = pthread_attr_setstacksize(&attr, pool->options.stack_size)) != 0) {
        pthread_attr_destroy(&attr);
        SXE_LOG_ERROR("a work thread's stack of %u bytes: %s", pool->options.stack_size,
                      sxe_strerror(-rc));
        return -rc;
    }
    (void)sxe__sys.pthread_sigmask(SIG_SETMASK, &all, &old);
    while (pool->started < pool->options.threads) {
        rc = sxe__sys.pthread_create(&pool->threads[pool->started], &attr, thread_main, pool);
        if (rc != 0) {
            rc = rc > 0 ? -rc : -errno; /* the seam's faults say -1 and errno */
            SXE_LOG_ERROR("cannot start work thread %u of %u: %s", pool->started + 1,
                          pool->options.threads, sxe_strerror(rc));
            break;
        }
        pthread_setname_np(pool->threads[pool->started], "sxe-work");
        pool->started++;
    }
    (void)sxe__sys.pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return rc;
}

/*
 * Waits up to wait_ns for every thread to end (`ending` runs on the monotonic clock: a step of
 * the wall clock is no wait), then joins them all; if some still run, detaches them all instead.
 * @return how many still run.
 */
static uint32_t join_threads(sxe_work_pool_t *pool, uint64_t wait_ns)
{
    struct timespec deadline;

    sxe__sys.clock_gettime(CLOCK_MONOTONIC, &deadline);
    uint64_t now = (uint64_t)deadline.tv_sec * SXE_NS_PER_SEC + (uint64_t)deadline.tv_nsec;
    uint64_t at = wait_ns > UINT64_MAX / 2 - now ? UINT64_MAX / 2 : now + wait_ns; /* "forever" */
    deadline = (struct timespec){.tv_sec = (time_t)(at / SXE_NS_PER_SEC),
                                 .tv_nsec = (long)(at % SXE_NS_PER_SEC)};
    pthread_mutex_lock(&pool->lock);
    while (pool->ended < pool->started &&
           pthread_cond_timedwait(&pool->ending, &pool->lock, &deadline) == 0) {
    }
    uint32_t left = pool->started - pool->ended;
    pthread_mutex_unlock(&pool->lock);
    for (uint32_t t = 0; t < pool->started; t++) {
        if (left == 0) {
            pthread_join(pool->threads[t], NULL); /* each has ended, or is returning */
        } else {
            pthread_detach(pool->threads[t]);
        }
    }
    return left;
}

static void pool_free(sxe_work_pool_t *pool)
{
    sxe_loop_waker_destroy(pool->waker);
    pthread_cond_destroy(&pool->queued);
    pthread_cond_destroy(&pool->ending);
    pthread_mutex_destroy(&pool->lock);
    pthread_mutex_destroy(&pool->over_lock);
    free(pool->threads);
    free(pool->jobs);
    free(pool);
}

int sxe_work_pool_create(sxe_work_pool_t **pool_out, sxe_loop_t *loop,
                         const struct sxe_work_options *options)
{
    struct sxe_work_options o = options != NULL ? *options : (struct sxe_work_options){0};
    int rc;

    o.threads = o.threads != 0 ? o.threads : DEFAULT_THREADS;
    o.queue = o.queue != 0 ? o.queue : DEFAULT_QUEUE;
    o.stop_ns = o.stop_ns != 0 ? o.stop_ns : DEFAULT_STOP_NS;
    if (!SXE_CHECK(pool_out != NULL && loop != NULL && options_valid(&o))) {
        return -EINVAL;
    }
    sxe_work_pool_t *pool = calloc(1, sizeof(*pool));
    if (pool == NULL) {
        return -ENOMEM;
    }
    pool->jobs = calloc(o.queue, sizeof(*pool->jobs));
    pool->threads = calloc(o.threads, sizeof(*pool->threads));
    if (pool->jobs == NULL || pool->threads == NULL) {
        free(pool->jobs);
        free(pool->threads);
        free(pool);
        return -ENOMEM;
    }
    pool->options = o;
    pool->queue = pool->over = pool->batch = (struct list){NONE, NONE};
    for (uint32_t i = 0; i < o.queue; i++) {
        pool->jobs[i].next = i + 1 < o.queue ? i + 1 : NONE;
    }
    pthread_mutex_init(&pool->lock, NULL);
    pthread_mutex_init(&pool->over_lock, NULL);
    pthread_cond_init(&pool->queued, NULL);
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&pool->ending, &monotonic);
    pthread_condattr_destroy(&monotonic);
    if ((rc = sxe_loop_waker_create(loop, &pool->waker, deliver, pool)) < 0 ||
        (rc = start_threads(pool)) < 0) {
        pthread_mutex_lock(&pool->lock);
        pool->stopping = true; /* the threads started, if any, see an empty queue: they end */
        pthread_cond_broadcast(&pool->queued);
        pthread_mutex_unlock(&pool->lock);
        for (uint32_t t = 0; t < pool->started; t++) {
            pthread_join(pool->threads[t], NULL);
        }
        pool_free(pool);
        return rc;
    }
    *pool_out = pool;
    return 0;
}

/* The destruction itself (sxe_work_pool_destroy() defers it to the end of a delivery). */
static void destroy_now(sxe_work_pool_t *pool)
{
    pool->destroying = true;
    pthread_mutex_lock(&pool->lock);
    pool->stopping = true;
    while (pool->queue.head != NONE) {
        uint32_t i = pool->queue.head;
        list_unlink(pool->jobs, &pool->queue, i);
        pool->jobs[i].cancelled = true;
        job_over(pool, i);
    }
    pthread_cond_broadcast(&pool->queued);
    pthread_mutex_unlock(&pool->lock);

    uint32_t left = join_threads(pool, pool->options.stop_ns);

    pthread_mutex_lock(&pool->over_lock);
    pool->abandoned = true; /* the threads left wake no one, and free nothing */
    pthread_mutex_unlock(&pool->over_lock);
    deliver(pool); /* what ended in time, and the cancelled */
    if (left > 0) {
        SXE_LOG_ERROR("%u work thread%s still running a job after %llu ms: left to end by "
                      "itself, with the pool's memory, and its job never called back",
                      left, left == 1 ? " is" : "s are",
                      (unsigned long long)(pool->options.stop_ns / SXE_NS_PER_MSEC));
        sxe_loop_waker_destroy(pool->waker);
        return;
    }
    pool_free(pool);
}

void sxe_work_pool_destroy(sxe_work_pool_t *pool)
{
    if (pool == NULL || pool->destroying) {
        return; /* (a done callback of the destruction's own delivery: it is under way) */
    }
    if (pool->delivering) { /* from a done callback, or a fiber one woke: when they are done */
        pool->destroy_later = true;
        return;
    }
    destroy_now(pool);
}

int sxe_work_submit(sxe_work_pool_t *pool, sxe_work_fn_t work, sxe_work_done_t done, void *arg,
                    uint64_t *id)
{
    if (!SXE_CHECK(pool != NULL && work != NULL && done != NULL)) {
        return -EINVAL;
    }
    if (pool->stopping || pool->destroy_later) { /* only the loop's thread sets them */
        return -ESHUTDOWN;
    }
    uint32_t i = pool->free_head;
    if (i == NONE) {
        pool->stats.full++;
        return -ENOBUFS;
    }
    struct job *job = &pool->jobs[i];
    pool->free_head = job->next;
    job->work = work;
    job->done = done;
    job->arg = arg;
    job->cancelled = false;
    if (pool->delivering) { /* queued with the others when the delivery ends */
        job->state = JOB_BATCHED;
        list_append(pool->jobs, &pool->batch, i);
    } else {
        pthread_mutex_lock(&pool->lock);
        job->state = JOB_QUEUED;
        list_append(pool->jobs, &pool->queue, i);
        signal_idle(pool, 1);
        pthread_mutex_unlock(&pool->lock);
    }

    pool->stats.submitted++;
    if (++pool->stats.held > pool->stats.most_held) {
        pool->stats.most_held = pool->stats.held;
    }
    if (id != NULL) {
        *id = (uint64_t)job->generation << 32 | i;
    }
    return 0;
}

int sxe_work_cancel(sxe_work_pool_t *pool, uint64_t id)
{
    uint32_t i = (uint32_t)id;
    int rc;

    if (pool == NULL || i >= pool->options.queue) {
        return -ENOENT;
    }
    struct job *job = &pool->jobs[i];
    if (job->generation != (uint32_t)(id >> 32)) {
        return -ENOENT; /* only the loop's thread changes it, and a job's state from FREE */
    }
    if (__atomic_load_n(&job->state, __ATOMIC_RELAXED) == JOB_BATCHED) { /* only ours set it */
        list_unlink(pool->jobs, &pool->batch, i);
    } else {
        pthread_mutex_lock(&pool->lock);
        uint8_t state = __atomic_load_n(&job->state, __ATOMIC_RELAXED); /* OVER: over_lock's */
        rc = state == JOB_FREE ? -ENOENT : state == JOB_QUEUED ? 0 : -EBUSY;
        if (rc == 0) {
            list_unlink(pool->jobs, &pool->queue, i);
        }
        pthread_mutex_unlock(&pool->lock);
        if (rc < 0) {
            return rc;
        }
    }
    job->cancelled = true;
    job_over(pool, i); /* called back at the next turn, as any result */
    return 0;
}

struct call {
    sxe_fiber_t *fiber;
    sxe_work_fn_t work;
    void *arg;
};

static void call_work(void *arg)
{
    struct call *call = arg;

    call->work(call->arg);
}

static void call_done(void *arg, int status)
{
    struct call *call = arg;

    (void)sxe_fiber_wake(call->fiber, status);
}

int sxe_work_call(sxe_work_pool_t *pool, sxe_work_fn_t work, void *arg)
{
    struct call call = {.fiber = sxe_fiber_self(), .work = work, .arg = arg};
    int rc;

    if (call.fiber == NULL) {
        return -EPERM;
    }
    if (!SXE_CHECK(work != NULL)) {
        return -EINVAL;
    }
    if ((rc = sxe_work_submit(pool, call_work, call_done, &call, NULL)) < 0) {
        return rc;
    }
    return sxe_fiber_wait();
}

void sxe_work_stats(const sxe_work_pool_t *pool, struct sxe_work_stats *stats)
{
    *stats = pool->stats;
}
