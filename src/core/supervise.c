/*
 * sxe_workers_run(): the supervisor. It starts each worker (a fork or a thread) with a channel per
 * listener, then waits with poll on a signalfd (SIGINT and SIGTERM stop, SIGQUIT drains, SIGCHLD
 * reaps, SIGUSR1 reopens or reports, SIGHUP reloads or is passed on, SIGUSR2 is read and
 * ignored, so that a worker is born with it blocked: what each does is workers_act.c), on the
 * control socket (workers_control.c), on the hand-off listeners, and, for threads, on its ends of
 * the channels, which hang up when a worker ends. A process that dies is restarted (after a pause
 * if it died young); a stop closes the set's listeners and its ends of the channels, which every
 * worker reads as "stop", and waits for them all.
 */
#define SXE_LOG_MODULE workers_log
#include "sxe/log.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>

#include "loop.h"
#include "sxe/clock.h"
#include "sys.h"
#include "worker.h"

static struct sxe_log_module workers_log = SXE_LOG_MODULE_INIT(WORKERS);

#define EXIT_START_FAILED 3              /* a process whose start failed: not restarted */
#define ACCEPT_BATCH      64             /* hand-off accepts per listener per wake-up */
#define RESTART_PAUSE_NS  SXE_NS_PER_SEC /* a worker is restarted at most once a second */

#if defined(SXE_COVERAGE)
void __gcov_dump(void); /* libgcov's: writes this process's counters */
#endif

/* In a new worker process: keeps its own descriptors, closes the set's others, and runs. */
static void __attribute__((noreturn)) child_main(sxe_worker_t *worker)
{
    sxe_workers_t *set = worker->set;

    sxe__close_fd(&set->signal_fd);
    sxe__workers_control_close(set, false);
    for (unsigned i = 0; i < set->options.count; i++) {
        sxe__worker_close_channels(&set->workers[i], 0);
        if (i != worker->index) {
            sxe__worker_close_channels(&set->workers[i], 1);
        }
    }
    for (unsigned l = 0; l < set->listener_count; l++) {
        for (unsigned i = 0; i < set->listeners[l].fd_count; i++) {
            if (set->options.spread == SXE_SPREAD_HAND_OFF ||
                i % set->options.count != worker->index) {
                sxe__close_fd(&set->listeners[l].fds[i]);
            }
        }
        sxe__close_fd(&set->listeners[l].held);
    }
    if (set->options.on_reopen == NULL) {
        sxe__sys.sigaction(SIGUSR1, &(struct sigaction){.sa_handler = SIG_IGN}, NULL);
    }
    /* SIGHUP, SIGUSR1 and SIGUSR2 stay blocked until the worker's loop reads them: one passed on
     * before would kill. */
    sigset_t mask = set->old_mask;
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGUSR1);
    sigaddset(&mask, SIGUSR2);
    sxe__sys.pthread_sigmask(SIG_SETMASK, &mask, NULL);
    int rc = sxe__worker_main(worker);
    int status = rc == 0 ? 0 : worker->start_failed ? EXIT_START_FAILED : 1;
#if defined(SXE_COVERAGE)
    __gcov_dump(); /* _exit skips the flush of the coverage counters: a worker's lines count too */
#endif
    _exit(status); /* GCOVR_EXCL_LINE: runs after the counters were written, so is never counted */
}

static void *thread_main(void *arg)
{
    sxe_worker_t *worker = arg;

    worker->result = sxe__worker_main(worker);
    sxe__close_fd(&worker->thread_done); /* the supervisor's watch hangs up: it joins */
    return NULL;
}

/* Starts a worker with fresh channels (and, for a thread, the pair that says it ended). */
static int spawn(sxe_worker_t *worker, uint64_t now)
{
    sxe_workers_t *set = worker->set;
    bool threads = set->options.kind == SXE_WORKERS_THREADS;
    int watch[2];
    int rc;

    for (unsigned l = 0; l < set->listener_count; l++) {
        if (sxe__sys.socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                                worker->channels[l]) < 0) {
            goto failed;
        }
    }
    if (threads) {
        if (sxe__sys.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, watch) < 0) {
            goto failed;
        }
        worker->thread_watch = watch[0];
        worker->thread_done = watch[1];
        if (sxe__sys.socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                                worker->wake) < 0) {
            goto failed;
        }
    }
    worker->passed = SXE__LOAD(worker->shared->taken); /* what a dead one left in flight is gone */
    worker->started_ns = now;
    worker->restart_ns = 0;
    worker->start_failed = false;
    if (threads) {
        SXE__STORE(worker->shared->stats.pid, set->pid);
        if ((rc = sxe__sys.pthread_create(&worker->thread, NULL, thread_main, worker)) != 0) {
            errno = rc > 0 ? rc : errno; /* the seam's faults say -1 and errno */
            goto failed;
        }
    } else {
        pid_t pid = sxe__sys.fork();
        if (pid < 0) {
            goto failed;
        }
        if (pid == 0) {
            child_main(worker); /* GCOVR_EXCL_LINE: the child's coverage is not merged */
        }
        sxe__worker_close_channels(worker, 1); /* the child's now */
        worker->pid = pid;
        SXE__STORE(worker->shared->stats.pid, pid);
    }
    worker->running = true;
    return 0;

failed:
    rc = -errno;
    sxe__worker_close_channels(worker, 0);
    sxe__worker_close_channels(worker, 1);
    sxe__close_fd(&worker->thread_watch);
    sxe__close_fd(&worker->thread_done);
    sxe__close_fd(&worker->wake[0]);
    sxe__close_fd(&worker->wake[1]);
    return rc;
}

/* A worker has ended: says how, and decides whether it comes back. */
static void ended(sxe_workers_t *set, sxe_worker_t *worker, int status, uint64_t now)
{
    worker->running = false;
    worker->pid = 0;
    sxe__worker_close_channels(worker, 0);
    if (set->stopping) {
        return;
    }
    if (set->options.kind == SXE_WORKERS_THREADS) {
        SXE_LOG_ERROR("worker %u ended: %s; the others serve on", worker->index,
                      worker->result < 0 ? sxe_strerror(worker->result) : "stopped");
        return;
    }
    if (WIFEXITED(status) &&
        (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == EXIT_START_FAILED)) {
        SXE_LOG_ERROR("worker %u %s; not restarted", worker->index,
                      WEXITSTATUS(status) == 0 ? "stopped by itself" : "failed to start");
        return;
    }
    uint64_t earliest = worker->started_ns + RESTART_PAUSE_NS;
    worker->restart_ns = earliest > now ? earliest : now;
    if (WIFSIGNALED(status)) {
        SXE_LOG_ERROR("worker %u died (signal %d); restarting it", worker->index, WTERMSIG(status));
    } else {
        SXE_LOG_ERROR("worker %u died (exit status %d); restarting it", worker->index,
                      WEXITSTATUS(status));
    }
}

static void reap(sxe_workers_t *set, uint64_t now)
{
    pid_t pid;
    int status;

    while ((pid = sxe__sys.waitpid(-1, &status, WNOHANG)) > 0) {
        if (sxe__workers_checked(set, pid, status)) {
            continue; /* a reload's check: the reload went on, or was refused */
        }
        bool ours = false;
        for (unsigned i = 0; i < set->options.count; i++) {
            if (set->workers[i].pid == pid) {
                ours = true;
                ended(set, &set->workers[i], status, now);
            }
        }
        if (!ours && sxe__workers_drained(pid)) {
            SXE_LOG_INFO("process %d ended (a worker from before the reload)", (int)pid);
        }
    }
}

/* Reads the signals that came. */
static void take_signals(sxe_workers_t *set, uint64_t now)
{
    struct signalfd_siginfo info;

    while (sxe__sys.read(set->signal_fd, &info, sizeof(info)) == (ssize_t)sizeof(info)) {
        switch (info.ssi_signo) {
        case SIGCHLD:
            reap(set, now);
            break;
        case SIGUSR1:
            sxe__workers_reopen(set, "SIGUSR1");
            break;
        case SIGHUP:
            (void)sxe__workers_hangup(set, -1);
            break;
        case SIGQUIT:
            sxe__workers_begin_stop(set, now, "SIGQUIT", true);
            break;
        case SIGUSR2: /* the workers' signal (log levels set): nothing to do here */
            break;
        default:
            sxe__workers_begin_stop(set, now, info.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM",
                                    false);
            break;
        }
    }
}

/*
 * The worker to pass a connection to: the least loaded of those running and not tried, counting
 * open connections and those passed but not yet taken (a worker that is stuck or behind has
 * them), and preferring one whose table has room. Ties go round, so an idle set is spread evenly.
 * (Weighing the ones not yet taken more, 32 each, skewed a burst of connects 24 to 178 towards
 * the faster worker, and did not help a stalled one: docs/benchmarks.md, bench/stall.)
 */
static sxe_worker_t *least_loaded(sxe_workers_t *set, const uint64_t *tried)
{
    uint32_t capacity = set->options.loop.connections ? set->options.loop.connections : 1024;
    capacity = capacity > set->listener_count ? capacity - set->listener_count : 1;
    sxe_worker_t *best = NULL;
    uint64_t best_load = UINT64_MAX;
    bool best_room = false;

    for (unsigned n = 0; n < set->options.count; n++) {
        sxe_worker_t *worker = &set->workers[(set->next + n) % set->options.count];
        if (!worker->running || (tried[worker->index / 64] >> (worker->index % 64) & 1)) {
            continue;
        }
        uint64_t taken = __atomic_load_n(&worker->shared->taken, __ATOMIC_ACQUIRE); /* first */
        uint64_t pending = worker->passed > taken ? worker->passed - taken : 0;
        uint64_t load = SXE__LOAD(worker->shared->stats.open) + pending;
        bool room = load < capacity;
        if ((room && !best_room) || (room == best_room && load < best_load)) {
            best = worker;
            best_load = load;
            best_room = room;
        }
    }
    set->next = (set->next + 1) % set->options.count;
    return best;
}

/*
 * Gives an accepted connection to the least loaded worker whose channel takes it. @return false if
 * every channel is full (the workers are behind, or stalled): the caller keeps the connection and
 * stops accepting until a channel has room, so the rest wait in the kernel's backlog.
 */
static bool hand_off(sxe_workers_t *set, unsigned listener, int fd)
{
    uint64_t tried[SXE_WORKERS_MAX / 64] = {0}; /* workers whose channel refused it */
    sxe_worker_t *worker;

    while ((worker = least_loaded(set, tried)) != NULL) {
        if (sxe__fdpass_send(worker->channels[listener][0], fd, MSG_DONTWAIT) == 0) {
            worker->passed++;
            sxe__sys.close(fd);
            return true;
        }
        tried[worker->index / 64] |= 1ull << (worker->index % 64); /* full (it stalls), gone */
    }
    SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN, "every worker's channel is full: accepting waits for room");
    return false;
}

/* Passes the connection held back, if any, then accepts and passes until a channel is full. */
static void accept_and_pass(sxe_workers_t *set, unsigned listener)
{
    struct sxe__workers_listener *group = &set->listeners[listener];

    if (group->held >= 0) {
        if (!hand_off(set, listener, group->held)) {
            return;
        }
        group->held = -1;
    }
    for (unsigned accepted = 0; accepted < ACCEPT_BATCH && group->fds[0] >= 0;) {
        int fd = sxe__sys.accept4(group->fds[0], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            accepted++;
            if (!hand_off(set, listener, fd)) {
                group->held = fd;
                return;
            }
        } else if (errno != EINTR && errno != ECONNABORTED) {
            if (errno != EAGAIN) {
                SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR, "accept failed: %s", sxe_strerror(-errno));
            }
            return;
        }
    }
}

/* How long poll may wait: until the next restart, the stop's deadline or the earliest control
 * peer's (ms, -1 for ever). */
static int poll_timeout(const sxe_workers_t *set, uint64_t now, uint64_t deadline)
{
    deadline = set->stopping && set->stop_deadline < deadline ? set->stop_deadline : deadline;
    deadline =
        set->check_pid > 0 && set->check_deadline < deadline ? set->check_deadline : deadline;

    for (unsigned i = 0; i < set->options.count; i++) {
        if (set->workers[i].restart_ns != 0 && set->workers[i].restart_ns < deadline) {
            deadline = set->workers[i].restart_ns;
        }
    }
    if (deadline == UINT64_MAX) {
        return -1;
    }
    return deadline <= now ? 0 : (int)((deadline - now + SXE_NS_PER_MSEC - 1) / SXE_NS_PER_MSEC);
}

/* Restarts the workers that are due, kills processes that outlive a stop's deadline, and a
 * reload's check that outlives its own. */
static void on_time(sxe_workers_t *set, uint64_t now)
{
    if (set->check_pid > 0 && now >= set->check_deadline) {
        sxe__workers_check_end(set);
    }
    for (unsigned i = 0; i < set->options.count; i++) {
        sxe_worker_t *worker = &set->workers[i];
        if (worker->restart_ns != 0 && worker->restart_ns <= now) {
            int rc = spawn(worker, now);
            if (rc < 0) {
                SXE_LOG_ERROR("cannot restart worker %u: %s; trying again in a second", i,
                              sxe_strerror(rc));
                worker->restart_ns = now + RESTART_PAUSE_NS;
            } else {
                __atomic_add_fetch(&worker->shared->stats.restarts, 1, __ATOMIC_RELAXED);
            }
        }
        if (set->stopping && now >= set->stop_deadline && i == 0) {
            (void)sxe__workers_draining(true); /* from before a reload: no time left either */
        }
        if (set->stopping && now >= set->stop_deadline && worker->pid > 0 && !worker->killed) {
            SXE_LOG_ERROR("worker %u did not stop in time: killing it", i);
            sxe__sys.kill(worker->pid, SIGKILL);
            worker->killed = true;
        }
    }
}

/* Whether anything is left to supervise: a worker, or one from before a reload still draining
 * (it holds sockets a restart would need). */
static bool busy(const sxe_workers_t *set)
{
    if (sxe__workers_draining(false) > 0) {
        return true;
    }
    for (unsigned i = 0; i < set->options.count; i++) {
        if (set->workers[i].running || set->workers[i].restart_ns != 0) {
            return true;
        }
    }
    return false;
}

/*
 * One wait and what it brings. @return 0 or -errno from poll. Waits on the signalfd; on each
 * hand-off listener, or, while it holds a connection back, on its channels' room; and on each
 * thread's watch.
 */
static int supervise_once(sxe_workers_t *set)
{
    struct pollfd fds[2 + SXE__CONTROL_PEERS + SXE__WORKER_LISTENERS * (1 + SXE_WORKERS_MAX) +
                      SXE_WORKERS_MAX];
    unsigned listener_of[SXE__WORKER_LISTENERS * (1 + SXE_WORKERS_MAX)];
    nfds_t count = 0;
    bool threads = set->options.kind == SXE_WORKERS_THREADS;
    uint64_t deadline;

    fds[count++] = (struct pollfd){.fd = set->signal_fd, .events = POLLIN};
    count += sxe__workers_control_poll(set, &fds[count], &deadline);
    unsigned first_listener = (unsigned)count;
    for (unsigned l = 0; set->options.spread == SXE_SPREAD_HAND_OFF && l < set->listener_count;
         l++) {
        const struct sxe__workers_listener *group = &set->listeners[l];
        listener_of[count - first_listener] = l;
        fds[count++] =
            (struct pollfd){.fd = group->held >= 0 ? -1 : group->fds[0], .events = POLLIN};
        for (unsigned i = 0; group->held >= 0 && i < set->options.count; i++) {
            listener_of[count - first_listener] = l;
            fds[count++] = (struct pollfd){.fd = set->workers[i].channels[l][0], .events = POLLOUT};
        }
    }
    unsigned first_worker = (unsigned)count;
    for (unsigned i = 0; threads && i < set->options.count; i++) {
        /* a thread's channel hangs up when it ends; -1 (ignored) once stopping closed it */
        fds[count++] = (struct pollfd){
            .fd = set->workers[i].running ? set->workers[i].thread_watch : -1, .events = POLLIN};
    }
    int ready = sxe__sys.poll(fds, count, poll_timeout(set, sxe_clock_mono_ns(), deadline));
    if (ready < 0) {
        return errno == EINTR ? 0 : -errno;
    }
    uint64_t now = sxe_clock_mono_ns();
    if (fds[0].revents) {
        take_signals(set, now);
    }
    sxe__workers_control_ready(set, &fds[1], now); /* may have exec'd: a reload */
    for (unsigned n = first_listener; n < first_worker; n++) {
        if (fds[n].revents && !set->stopping) {
            accept_and_pass(set, listener_of[n - first_listener]);
        }
    }
    for (unsigned n = first_worker; n < count; n++) {
        sxe_worker_t *worker = &set->workers[n - first_worker];
        if (fds[n].revents && worker->running) {
            pthread_join(worker->thread, NULL);
            sxe__close_fd(&worker->thread_watch);
            sxe__close_fd(&worker->wake[0]);
            ended(set, worker, 0, now);
        }
    }
    on_time(set, now);
    return 0;
}

/* Blocks the signals the supervisor reads, and opens its signalfd. @return 0 or -errno. */
static int open_signals(sxe_workers_t *set)
{
    sigset_t signals;
    int rc;

    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGQUIT);
    sigaddset(&signals, SIGCHLD);
    sigaddset(&signals, SIGUSR1);
    sigaddset(&signals, SIGUSR2); /* the workers': blocked here, so a worker is born with it so */
    sigaddset(&signals, SIGHUP);
    if ((rc = sxe__sys.pthread_sigmask(SIG_BLOCK, &signals, &set->old_mask)) != 0) {
        return -rc; /* GCOVR_EXCL_LINE: fails only for an invalid "how", a constant here. */
    }
    if ((set->signal_fd = sxe__sys.signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        rc = -errno;
        sxe__sys.pthread_sigmask(SIG_SETMASK, &set->old_mask, NULL);
        return rc;
    }
    return 0;
}

/* Starts every worker. @return 0, or the first failure (the workers started are stopped). */
static int spawn_all(sxe_workers_t *set)
{
    uint64_t now = sxe_clock_mono_ns();

    for (unsigned i = 0; i < set->options.count; i++) {
        int rc = spawn(&set->workers[i], now);
        if (rc < 0) {
            SXE_LOG_ERROR("cannot start worker %u: %s", i, sxe_strerror(rc));
            sxe__workers_begin_stop(set, now, "a worker could not start", false);
            return rc;
        }
    }
    return 0;
}

int sxe_workers_run(sxe_workers_t *set, sxe_worker_start_t start, sxe_worker_stop_t stop, void *arg)
{
    int rc;

    if (!SXE_CHECK(set != NULL && start != NULL && set->listener_count > 0 && !set->ran)) {
        return -EINVAL;
    }
    set->ran = true;
    set->start = start;
    set->stop = stop;
    set->arg = arg;
    set->pid = sxe__sys.getpid();
    set->started_ns = sxe_clock_mono_ns();
    sxe__workers_inherit_end(); /* what a reload passed on and no listener took */
    if ((rc = sxe__workers_control_open(set)) < 0) { /* said in the log */
        if (sxe__workers_draining(false) == 0) {
            return rc;
        }
        /* a reload's new image: ending here would end the service */
        SXE_LOG_ERROR("serving on without a control socket");
    }
    if ((rc = open_signals(set)) < 0) {
        SXE_LOG_ERROR("cannot read signals: %s", sxe_strerror(rc));
        sxe__workers_control_close(set, true);
        return rc;
    }
    int failed = spawn_all(set);
    while (busy(set)) {
        if ((rc = supervise_once(set)) < 0) {
            SXE_LOG_ERROR("poll failed: %s; stopping", sxe_strerror(rc));
            failed = failed ? failed : rc;
            sxe__workers_begin_stop(set, sxe_clock_mono_ns(), "poll failed", false);
        }
    }
    /* Signals that came during the stop (a second SIGTERM) are read away: unblocked, they would
     * kill the process as the run returns */
    struct signalfd_siginfo info;
    while (sxe__sys.read(set->signal_fd, &info, sizeof(info)) == (ssize_t)sizeof(info)) {
    }
    sxe__close_fd(&set->signal_fd);
    sxe__workers_control_close(set, true);
    sxe__sys.pthread_sigmask(SIG_SETMASK, &set->old_mask, NULL);
    if (failed < 0) {
        return failed;
    }
    if (!set->stopping) {
        SXE_LOG_ERROR("every worker has ended");
        return -ECHILD;
    }
    SXE_LOG_INFO("every worker has stopped");
    return 0;
}
