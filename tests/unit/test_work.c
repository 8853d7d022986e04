/*
 * The work pool and the loop's wakers: jobs run on the pool's threads and come back on the loop's
 * thread; a full queue refuses at once; cancels before a job starts, while it runs and after it;
 * a thousand cancellations; the loop's timers keep time while a job blocks; destruction with jobs
 * queued, running, and running past the bound; a fiber's plain call; every signal blocked in the
 * threads; thread and eventfd failures through the seam; wakes from many threads, none lost;
 * invalid use.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe/fiber.h"
#include "sxe/timer.h"
#include "sxe/work.h"
#include "sxe_test.h"
#include "sys.h"

static sxe_loop_t *loop;
static pthread_t loop_thread;

/* A gate a job waits at until the test opens it. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_moved = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static unsigned at_gate; /* jobs waiting at it */

static void gate_close(void)
{
    pthread_mutex_lock(&gate_lock);
    gate_open = false;
    at_gate = 0;
    pthread_mutex_unlock(&gate_lock);
}

static void gate_release(void)
{
    pthread_mutex_lock(&gate_lock);
    gate_open = true;
    pthread_cond_broadcast(&gate_moved);
    pthread_mutex_unlock(&gate_lock);
}

/* Waits until n jobs wait at the gate. */
static void gate_wait_for(unsigned n)
{
    pthread_mutex_lock(&gate_lock);
    while (at_gate < n) {
        pthread_cond_wait(&gate_moved, &gate_lock);
    }
    pthread_mutex_unlock(&gate_lock);
}

struct job {
    int ran;      /* times work ran */
    int done;     /* times done was called */
    int status;   /* done's status */
    bool on_loop; /* work ran on the loop's thread (it must not) */
    bool gated;   /* work waits at the gate */
    bool signals_blocked;
    unsigned order; /* when done was called, counting from 1 */
};

static unsigned done_count;

static void work(void *arg)
{
    struct job *job = arg;
    sigset_t mask;

    job->ran++;
    job->on_loop = pthread_equal(pthread_self(), loop_thread);
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    job->signals_blocked = sigismember(&mask, SIGTERM) && sigismember(&mask, SIGINT) &&
                           sigismember(&mask, SIGPIPE) && sigismember(&mask, SIGUSR1);
    if (job->gated) {
        pthread_mutex_lock(&gate_lock);
        at_gate++;
        pthread_cond_broadcast(&gate_moved);
        while (!gate_open) {
            pthread_cond_wait(&gate_moved, &gate_lock);
        }
        pthread_mutex_unlock(&gate_lock);
    }
}

static void done(void *arg, int status)
{
    struct job *job = arg;

    assert_true(pthread_equal(pthread_self(), loop_thread));
    job->done++;
    job->status = status;
    job->order = ++done_count;
}

/* Runs the loop until count jobs have been called back (10 s at most). */
static void run_until(unsigned count)
{
    uint64_t deadline = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;

    while (done_count < count) {
        assert_true(sxe_clock_mono_ns() < deadline);
        assert_true(sxe_loop_run_once(loop, 100 * SXE_NS_PER_MSEC) >= 0);
    }
}

static int setup(void **state)
{
    (void)state;
    done_count = 0;
    loop_thread = pthread_self();
    gate_close();
    assert_int_equal(sxe_loop_create(&loop, &(struct sxe_loop_options){.connections = 4}), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gate_release(); /* a failed test's jobs must not hold the pool's destruction */
    sxe_loop_destroy(loop);
    sxe__sys_reset();
    return 0;
}

static void test_jobs_run_on_threads_and_come_back_on_the_loop(void **state)
{
    enum { JOBS = 1000 };
    static struct job jobs[JOBS];
    sxe_work_pool_t *pool;
    struct sxe_work_stats stats;

    (void)state;
    memset(jobs, 0, sizeof(jobs));
    assert_int_equal(sxe_work_pool_create(&pool, loop, &(struct sxe_work_options){.queue = JOBS}),
                     0);
    for (int i = 0; i < JOBS; i++) {
        assert_int_equal(sxe_work_submit(pool, work, done, &jobs[i], NULL), 0);
    }
    assert_int_equal(done_count, 0); /* never called back from inside the submission */
    run_until(JOBS);
    for (int i = 0; i < JOBS; i++) {
        assert_int_equal(jobs[i].ran, 1);
        assert_int_equal(jobs[i].done, 1);
        assert_int_equal(jobs[i].status, 0);
        assert_false(jobs[i].on_loop);
        assert_true(jobs[i].signals_blocked);
    }
    sxe_work_stats(pool, &stats);
    assert_int_equal(stats.submitted, JOBS);
    assert_int_equal(stats.done, JOBS);
    assert_int_equal(stats.cancelled, 0);
    assert_int_equal(stats.held, 0);
    assert_true(stats.most_held >= 1 && stats.most_held <= JOBS);
    sxe_work_pool_destroy(pool);
}

static void test_a_full_queue_refuses_at_once(void **state)
{
    struct job jobs[5] = {{.gated = true}, {0}, {0}, {0}, {0}};
    sxe_work_pool_t *pool;
    struct sxe_work_stats stats;

    (void)state;
    assert_int_equal(
        sxe_work_pool_create(&pool, loop, &(struct sxe_work_options){.threads = 1, .queue = 4}), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sxe_work_submit(pool, work, done, &jobs[i], NULL), 0);
    }
    assert_int_equal(sxe_work_submit(pool, work, done, &jobs[4], NULL), -ENOBUFS);
    sxe_work_stats(pool, &stats);
    assert_int_equal(stats.full, 1);
    assert_int_equal(stats.held, 4);
    assert_int_equal(stats.most_held, 4);
    gate_release();
    run_until(4);
    assert_int_equal(sxe_work_submit(pool, work, done, &jobs[4], NULL), 0); /* room again */
    run_until(5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(jobs[i].status, 0);
        assert_int_equal(jobs[i].order, i + 1); /* one thread: in the order submitted */
    }
    sxe_work_pool_destroy(pool);
}

static void test_cancel_before_while_and_after(void **state)
{
    struct job running = {.gated = true}, queued = {0}, last = {0};
    uint64_t running_id, queued_id, last_id;
    sxe_work_pool_t *pool;

    (void)state;
    assert_int_equal(sxe_work_pool_create(&pool, loop, &(struct sxe_work_options){.threads = 1}),
                     0);
    assert_int_equal(sxe_work_submit(pool, work, done, &running, &running_id), 0);
    assert_int_equal(sxe_work_submit(pool, work, done, &queued, &queued_id), 0);
    assert_int_equal(sxe_work_submit(pool, work, done, &last, &last_id), 0);
    gate_wait_for(1);
    assert_int_equal(sxe_work_cancel(pool, running_id), -EBUSY);
    assert_int_equal(sxe_work_cancel(pool, queued_id), 0);
    assert_int_equal(sxe_work_cancel(pool, queued_id), -EBUSY); /* over: waits to be called back */
    assert_int_equal(queued.done, 0);                           /* not from inside the cancel */
    run_until(1);
    assert_int_equal(queued.done, 1);
    assert_int_equal(queued.status, -ECANCELED);
    assert_int_equal(queued.ran, 0);
    assert_int_equal(sxe_work_cancel(pool, queued_id), -ENOENT); /* called back: gone */
    assert_int_equal(sxe_work_cancel(pool, UINT64_MAX), -ENOENT);
    assert_int_equal(sxe_work_cancel(pool, (uint64_t)7 << 32 | (uint32_t)running_id), -ENOENT);
    assert_int_equal(sxe_work_cancel(NULL, running_id), -ENOENT);
    gate_release();
    run_until(3);
    assert_int_equal(running.status, 0);
    assert_int_equal(last.status, 0); /* the queue closed up over the cancelled one */
    assert_int_equal(last.ran, 1);
    assert_int_equal(sxe_work_cancel(pool, last_id), -ENOENT);
    sxe_work_pool_destroy(pool);
}

static void test_a_thousand_cancellations(void **state)
{
    enum { JOBS = 1000 };
    static struct job jobs[JOBS + 2];
    static uint64_t ids[JOBS + 2];
    sxe_work_pool_t *pool;
    struct sxe_work_stats stats;

    (void)state;
    memset(jobs, 0, sizeof(jobs));
    jobs[0].gated = jobs[1].gated = true; /* one for each thread */
    assert_int_equal(
        sxe_work_pool_create(&pool, loop, &(struct sxe_work_options){.threads = 2, .queue = 2000}),
        0);
    for (int i = 0; i < JOBS + 2; i++) {
        assert_int_equal(sxe_work_submit(pool, work, done, &jobs[i], &ids[i]), 0);
    }
    gate_wait_for(2);
    for (int i = 2; i < JOBS + 2; i += 2) { /* every other one, then the rest */
        assert_int_equal(sxe_work_cancel(pool, ids[i]), 0);
    }
    for (int i = 3; i < JOBS + 2; i += 2) {
        assert_int_equal(sxe_work_cancel(pool, ids[i]), 0);
    }
    run_until(JOBS); /* the cancelled are called back while the two still run */
    for (int i = 2; i < JOBS + 2; i++) {
        assert_int_equal(jobs[i].done, 1);
        assert_int_equal(jobs[i].ran, 0);
        assert_int_equal(jobs[i].status, -ECANCELED);
    }
    assert_int_equal(jobs[2].order, 1); /* called back in the order cancelled */
    assert_int_equal(jobs[4].order, 2);
    assert_int_equal(jobs[3].order, JOBS / 2 + 1);
    gate_release();
    run_until(JOBS + 2);
    assert_int_equal(jobs[0].status, 0);
    assert_int_equal(jobs[1].status, 0);
    sxe_work_stats(pool, &stats);
    assert_int_equal(stats.cancelled, JOBS);
    assert_int_equal(stats.done, 2);
    assert_int_equal(sxe_work_submit(pool, work, done, &jobs[2], NULL), 0); /* the slots are free */
    run_until(JOBS + 3);
    sxe_work_pool_destroy(pool);
}

/* Opens the gate 100 ms from now, from another thread. */
static void *open_later(void *arg)
{
    (void)arg;
    usleep(100 * 1000);
    gate_release();
    return NULL;
}

static sxe_work_pool_t *chain_pool;
static struct job chained[3];

/* A done callback that submits three more and cancels the second before the delivery ends. */
static void submit_more(void *arg, int status)
{
    uint64_t ids[3];

    done(arg, status);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sxe_work_submit(chain_pool, work, done, &chained[i], &ids[i]), 0);
    }
    assert_int_equal(sxe_work_cancel(chain_pool, ids[1]), 0);
    assert_int_equal(sxe_work_cancel(chain_pool, ids[1]), -EBUSY); /* over: to be called back */
}

static void test_jobs_submitted_by_a_done_callback(void **state)
{
    struct job first = {0};

    (void)state;
    memset(chained, 0, sizeof(chained));
    assert_int_equal(sxe_work_pool_create(&chain_pool, loop, NULL), 0);
    assert_int_equal(sxe_work_submit(chain_pool, work, submit_more, &first, NULL), 0);
    run_until(4);
    assert_int_equal(first.status, 0);
    assert_int_equal(chained[0].status, 0);
    assert_int_equal(chained[0].ran, 1);
    assert_int_equal(chained[1].status, -ECANCELED);
    assert_int_equal(chained[1].ran, 0);
    assert_int_equal(chained[2].status, 0);
    assert_int_equal(chained[2].ran, 1);
    sxe_work_pool_destroy(chain_pool);
}

static struct job late = {0};

/* A done callback that submits again, to a queue that still holds a job: the batch goes after. */
static void submit_behind(void *arg, int status)
{
    done(arg, status);
    assert_int_equal(sxe_work_submit(chain_pool, work, done, &late, NULL), 0);
}

static void test_a_batch_queues_behind_jobs_waiting(void **state)
{
    struct job gated[2] = {{.gated = true}, {.gated = true}}, cancelled = {0}, waiting = {0};
    uint64_t id;

    (void)state;
    memset(&late, 0, sizeof(late));
    assert_int_equal(
        sxe_work_pool_create(&chain_pool, loop, &(struct sxe_work_options){.threads = 2}), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(sxe_work_submit(chain_pool, work, done, &gated[i], NULL), 0);
    }
    gate_wait_for(2); /* both threads held */
    assert_int_equal(sxe_work_submit(chain_pool, work, submit_behind, &cancelled, &id), 0);
    assert_int_equal(sxe_work_submit(chain_pool, work, done, &waiting, NULL), 0);
    assert_int_equal(sxe_work_cancel(chain_pool, id), 0);
    run_until(1); /* the cancelled one's callback queues late behind waiting */
    assert_int_equal(cancelled.status, -ECANCELED);
    gate_release();
    run_until(5);
    assert_int_equal(waiting.status, 0);
    assert_int_equal(late.status, 0);
    assert_int_equal(late.ran, 1);
    sxe_work_pool_destroy(chain_pool);
}

static void submit_while_stopping(void *arg, int status)
{
    done(arg, status);
    assert_int_equal(sxe_work_submit(chain_pool, work, done, &late, NULL), -ESHUTDOWN);
}

static void test_no_submission_while_the_pool_stops(void **state)
{
    struct job gated = {.gated = true}, queued = {0};

    (void)state;
    assert_int_equal(
        sxe_work_pool_create(&chain_pool, loop, &(struct sxe_work_options){.threads = 1}), 0);
    assert_int_equal(sxe_work_submit(chain_pool, work, done, &gated, NULL), 0);
    assert_int_equal(sxe_work_submit(chain_pool, work, submit_while_stopping, &queued, NULL), 0);
    gate_wait_for(1);
    pthread_t opener;
    assert_int_equal(pthread_create(&opener, NULL, open_later, NULL), 0);
    sxe_work_pool_destroy(
        chain_pool); /* queued is cancelled, and cannot submit from its callback */
    pthread_join(opener, NULL);
    assert_int_equal(queued.status, -ECANCELED);
    assert_int_equal(done_count, 2);
}

static unsigned ticks;

static void on_tick(sxe_timer_t *timer, void *arg)
{
    (void)timer;
    (void)arg;
    ticks++;
}

/* A job that blocks for 300 ms stalls nothing: a 10 ms timer keeps ticking meanwhile. */
static void test_the_loop_keeps_time_while_a_job_blocks(void **state)
{
    struct job blocker = {.gated = true};
    sxe_work_pool_t *pool;
    sxe_timer_t tick;

    (void)state;
    ticks = 0;
    assert_int_equal(sxe_work_pool_create(&pool, loop, NULL), 0);
    sxe_timer_init(&tick, on_tick, NULL);
    assert_int_equal(sxe_timer_start(loop, &tick, 10 * SXE_NS_PER_MSEC, 10 * SXE_NS_PER_MSEC), 0);
    assert_int_equal(sxe_work_submit(pool, work, done, &blocker, NULL), 0);
    uint64_t until = sxe_clock_mono_ns() + 300 * SXE_NS_PER_MSEC;
    while (sxe_clock_mono_ns() < until) {
        assert_true(sxe_loop_run_once(loop, 100 * SXE_NS_PER_MSEC) >= 0);
    }
    assert_true(ticks >= 15); /* 30 due; a loaded machine's turns come late, not never */
    assert_int_equal(blocker.done, 0);
    gate_release();
    run_until(1);
    sxe_timer_stop(loop, &tick);
    sxe_work_pool_destroy(pool);
}

static void test_destroy_cancels_the_queued_and_waits_for_the_running(void **state)
{
    struct job running = {.gated = true}, queued[3] = {{0}};
    sxe_work_pool_t *pool;

    (void)state;
    assert_int_equal(sxe_work_pool_create(&pool, loop, &(struct sxe_work_options){.threads = 1}),
                     0);
    assert_int_equal(sxe_work_submit(pool, work, done, &running, NULL), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sxe_work_submit(pool, work, done, &queued[i], NULL), 0);
    }
    gate_wait_for(1);
    pthread_t opener;
    assert_int_equal(pthread_create(&opener, NULL, open_later, NULL), 0);
    sxe_work_pool_destroy(pool); /* the queued are cancelled at once; the running one ends later */
    pthread_join(opener, NULL);
    assert_int_equal(running.done, 1);
    assert_int_equal(running.status, 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(queued[i].done, 1);
        assert_int_equal(queued[i].ran, 0);
        assert_int_equal(queued[i].status, -ECANCELED);
    }
}

/* In a child (the abandoned pool's memory is left, as documented: no leak check at _exit). */
static void abandon_a_running_job(void)
{
    struct job stuck = {.gated = true};
    sxe_work_pool_t *pool;
    struct sxe_test_capture capture;

    gate_close();
    if (sxe_loop_create(&loop, &(struct sxe_loop_options){.connections = 4}) < 0 ||
        sxe_work_pool_create(
            &pool, loop,
            &(struct sxe_work_options){.threads = 2, .stop_ns = 50 * SXE_NS_PER_MSEC}) < 0 ||
        sxe_work_submit(pool, work, done, &stuck, NULL) < 0) {
        sxe_test_exit(2);
    }
    gate_wait_for(1);
    uint64_t began = sxe_clock_mono_ns();
    sxe_test_capture_start(&capture);
    sxe_work_pool_destroy(pool);
    sxe_test_capture_stop();
    uint64_t took = sxe_clock_mono_ns() - began;
    bool said = strstr(capture.text, "1 work thread is still running a job after 50 ms") != NULL;
    sxe_test_exit(
        took >= 50 * SXE_NS_PER_MSEC && took < 2 * SXE_NS_PER_SEC && said && stuck.done == 0 ? 0
                                                                                             : 1);
}

static void test_destroy_abandons_a_job_past_its_bound(void **state)
{
    int status;

    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        abandon_a_running_job();
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

struct sum {
    uint64_t n, total;
};

static void add_up(void *arg)
{
    struct sum *sum = arg;

    for (uint64_t i = 1; i <= sum->n; i++) {
        sum->total += i;
    }
}

static int call_rc;
static uint64_t call_total;

static void caller(void *arg)
{
    struct sum sum = {.n = 1000};

    call_rc = sxe_work_call(arg, add_up, &sum);
    call_total = sum.total;
    done_count++;
}

static void test_a_fiber_calls_as_if_it_were_plain(void **state)
{
    sxe_fibers_t *fibers;
    sxe_work_pool_t *pool;

    (void)state;
    assert_int_equal(sxe_work_call(NULL, add_up, NULL), -EPERM); /* outside a fiber */
    assert_int_equal(sxe_fibers_create(&fibers, loop, NULL), 0);
    assert_int_equal(sxe_work_pool_create(&pool, loop, NULL), 0);
    call_rc = 1;
    assert_int_equal(sxe_fiber_start(fibers, caller, pool, NULL), 0);
    assert_int_equal(call_rc, 1); /* it waits, the loop goes on */
    run_until(1);
    assert_int_equal(call_rc, 0);
    assert_int_equal(call_total, 500500);
    sxe_work_pool_destroy(pool);
    sxe_fibers_destroy(fibers);
}

static void gated_caller(void *arg)
{
    struct job job = {.gated = true};

    call_rc = sxe_work_call(arg, work, &job);
    done_count++;
}

static void test_a_fiber_hears_of_its_pools_end(void **state)
{
    sxe_fibers_t *fibers;
    sxe_work_pool_t *pool;
    struct job blocker = {.gated = true};

    (void)state;
    assert_int_equal(sxe_fibers_create(&fibers, loop, NULL), 0);
    assert_int_equal(
        sxe_work_pool_create(&pool, loop, &(struct sxe_work_options){.threads = 1, .queue = 2}), 0);
    assert_int_equal(sxe_work_submit(pool, work, done, &blocker, NULL), 0);
    assert_int_equal(sxe_fiber_start(fibers, gated_caller, pool, NULL), 0);
    assert_int_equal(sxe_fiber_start(fibers, gated_caller, pool, NULL), 0); /* the queue is full */
    assert_int_equal(call_rc, -ENOBUFS);
    assert_int_equal(done_count, 1);
    gate_wait_for(1);
    gate_release();
    sxe_work_pool_destroy(pool); /* the fiber's job never started, or ran: either is said */
    assert_int_equal(done_count, 3);
    assert_true(call_rc == -ECANCELED || call_rc == 0);
    sxe_fibers_destroy(fibers);
}

static sxe_fibers_t *ending_fibers;

/* A fiber that calls, then destroys the pool it called, from inside the delivery that woke it. */
static void call_then_destroy(void *arg)
{
    struct sum sum = {.n = 10};

    call_rc = sxe_work_call(arg, add_up, &sum);
    sxe_work_pool_destroy(arg); /* goes when this delivery ends */
    assert_int_equal(sxe_work_submit(arg, work, done, &late, NULL), -ESHUTDOWN);
    done_count++;
}

static void destroy_from_done(void *arg, int status)
{
    done(arg, status);
    sxe_work_pool_destroy(chain_pool);
    sxe_work_pool_destroy(chain_pool); /* once is enough; again changes nothing */
}

static void test_a_pool_destroyed_from_its_own_callbacks(void **state)
{
    struct job first = {0}, second = {0};
    sxe_work_pool_t *pool;

    (void)state;
    assert_int_equal(sxe_fibers_create(&ending_fibers, loop, NULL), 0);
    assert_int_equal(sxe_work_pool_create(&pool, loop, NULL), 0);
    assert_int_equal(sxe_fiber_start(ending_fibers, call_then_destroy, pool, NULL), 0);
    run_until(1);
    assert_int_equal(call_rc, 0); /* (ASan, in the asan preset, sees the pool freed whole) */
    sxe_fibers_destroy(ending_fibers);

    assert_int_equal(
        sxe_work_pool_create(&chain_pool, loop, &(struct sxe_work_options){.threads = 1}), 0);
    assert_int_equal(sxe_work_submit(chain_pool, work, destroy_from_done, &first, NULL), 0);
    assert_int_equal(sxe_work_submit(chain_pool, work, done, &second, NULL), 0);
    run_until(3); /* the second is delivered by the destruction, whichever way it went */
    assert_int_equal(first.status, 0);
    assert_true(second.status == 0 || second.status == -ECANCELED);
}

/* A job of 100 ms and a pool that waits "forever" for it: the destruction waits it out. */
static void test_a_stop_without_bound_waits(void **state)
{
    struct job gated = {.gated = true};
    sxe_work_pool_t *pool;
    pthread_t opener;

    (void)state;
    assert_int_equal(
        sxe_work_pool_create(&pool, loop,
                             &(struct sxe_work_options){.threads = 1, .stop_ns = UINT64_MAX}),
        0);
    assert_int_equal(sxe_work_submit(pool, work, done, &gated, NULL), 0);
    gate_wait_for(1);
    assert_int_equal(pthread_create(&opener, NULL, open_later, NULL), 0);
    sxe_work_pool_destroy(pool);
    pthread_join(opener, NULL);
    assert_int_equal(gated.done, 1);
    assert_int_equal(gated.status, 0);
}

static void test_failures_to_start(void **state)
{
    sxe_work_pool_t *pool;
    unsigned fds = sxe_test_open_fds();

    (void)state;
    sxe__sys_fail(SXE_SYS_eventfd, 1, 1, EMFILE);
    assert_int_equal(sxe_work_pool_create(&pool, loop, NULL), -EMFILE);
    sxe__sys_reset();
    assert_int_equal(sxe_test_open_fds(), fds); /* nothing left open */
    if (!sxe_test_uring()) { /* epoll's watch is an epoll_ctl; io_uring's makes no call */
        sxe__sys_fail(SXE_SYS_epoll_ctl, 1, 1, ENOSPC);
        assert_int_equal(sxe_work_pool_create(&pool, loop, NULL), -ENOSPC);
        sxe__sys_reset();
        assert_int_equal(sxe_test_open_fds(), fds); /* the eventfd closed again */
    }
    sxe__sys_fail(SXE_SYS_pthread_create, 3, 1, EAGAIN); /* the third of four */
    assert_int_equal(sxe_work_pool_create(&pool, loop, NULL), -EAGAIN);
    sxe__sys_reset();
    assert_int_equal(sxe_work_pool_create(&pool, loop, NULL), 0); /* fine now */
    sxe_work_pool_destroy(pool);
    sxe_work_pool_destroy(NULL);
    assert_int_equal(sxe_work_pool_create(
                         &pool, loop, &(struct sxe_work_options){.threads = 1, .stack_size = 1}),
                     -EINVAL); /* below PTHREAD_STACK_MIN */
}

/* Wakers: many threads wake at once, and the hook sees every thread's last count. */
static unsigned hook_calls;
static uint64_t counts[4];
static uint64_t seen[4];
static sxe_loop_waker_t *waker;

static void on_wake(void *arg)
{
    (void)arg;
    hook_calls++;
    for (int t = 0; t < 4; t++) {
        seen[t] = __atomic_load_n(&counts[t], __ATOMIC_ACQUIRE);
    }
}

static void *waking_thread(void *arg)
{
    uint64_t *count = arg;

    for (int i = 0; i < 20000; i++) {
        __atomic_store_n(count, *count + 1, __ATOMIC_RELEASE);
        sxe_loop_wake(waker);
    }
    return NULL;
}

static void test_wakes_from_many_threads_lose_none(void **state)
{
    pthread_t threads[4];
    sxe_loop_waker_t *more[16];

    (void)state;
    hook_calls = 0;
    memset(counts, 0, sizeof(counts));
    memset(seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_waker_create(loop, &waker, on_wake, NULL), 0);
    for (int t = 0; t < 4; t++) {
        assert_int_equal(pthread_create(&threads[t], NULL, waking_thread, &counts[t]), 0);
    }
    uint64_t deadline = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;
    while (seen[0] + seen[1] + seen[2] + seen[3] < 80000) {
        assert_true(sxe_clock_mono_ns() < deadline);
        assert_true(sxe_loop_run_once(loop, 100 * SXE_NS_PER_MSEC) >= 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(threads[t], NULL);
    }
    while (sxe_loop_run_once(loop, 0) > 0) { /* the last wakes, after the hook saw their counts */
    }
    unsigned calls = hook_calls;
    for (int i = 0; i < 3; i++) {
        sxe_loop_wake(waker);
    }
    assert_int_equal(sxe_loop_run_once(loop, 0), 1); /* three wakes, one event, one call */
    assert_int_equal(hook_calls, calls + 1);
    assert_int_equal(sxe_loop_run_once(loop, 0), 0);
    calls = hook_calls;

    for (int i = 0; i < 15; i++) { /* a loop has 16 */
        assert_int_equal(sxe_loop_waker_create(loop, &more[i], on_wake, NULL), 0);
    }
    assert_int_equal(sxe_loop_waker_create(loop, &more[15], on_wake, NULL), -ENOBUFS);
    sxe_loop_waker_destroy(more[3]);
    assert_int_equal(sxe_loop_waker_create(loop, &more[15], on_wake, NULL), 0); /* its slot */
    assert_ptr_equal(more[15], more[3]);
    sxe_loop_wake(waker);
    sxe_loop_waker_destroy(waker); /* woken, then gone: its hook is not called */
    assert_true(sxe_loop_run_once(loop, 0) >= 0);
    assert_int_equal(hook_calls, calls);
    sxe_loop_waker_destroy(NULL);
}

static void invalid_submit(void)
{
    sxe_work_pool_t *pool;
    assert_int_equal(sxe_work_pool_create(&pool, loop, NULL), 0);
    assert_int_equal(sxe_work_submit(pool, NULL, done, NULL, NULL), -EINVAL);
    sxe_work_pool_destroy(pool);
}

static void invalid_threads(void)
{
    sxe_work_pool_t *pool;
    assert_int_equal(sxe_work_pool_create(&pool, loop, &(struct sxe_work_options){.threads = 257}),
                     -EINVAL);
}

static void invalid_waker(void)
{
    sxe_loop_waker_t *w;
    assert_int_equal(sxe_loop_waker_create(loop, &w, NULL, NULL), -EINVAL);
}

static void test_invalid_use(void **state)
{
    static const struct sxe_test_invalid_use uses[] = {
        {"a job without work", invalid_submit, "work != NULL"},
        {"257 threads", invalid_threads, "options_valid"},
        {"a waker without a hook", invalid_waker, "hook != NULL"},
    };

    (void)state;
    sxe_test_invalid_uses(uses, sizeof(uses) / sizeof(uses[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_jobs_run_on_threads_and_come_back_on_the_loop, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_full_queue_refuses_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_before_while_and_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_thousand_cancellations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jobs_submitted_by_a_done_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_batch_queues_behind_jobs_waiting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_submission_while_the_pool_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_loop_keeps_time_while_a_job_blocks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_destroy_cancels_the_queued_and_waits_for_the_running,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_abandons_a_job_past_its_bound, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_calls_as_if_it_were_plain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_hears_of_its_pools_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_pool_destroyed_from_its_own_callbacks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_stop_without_bound_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failures_to_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wakes_from_many_threads_lose_none, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_use, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
