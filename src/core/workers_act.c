/*
 * What the supervisor's signals and its control socket's commands do (sxe/workers.h): stop or
 * drain the set, reload it or pass SIGHUP on, reopen (SIGUSR1) or report the counters.
 */
#define SXE_LOG_MODULE workers_log
#include "sxe/log.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sys.h"
#include "worker.h"

static struct sxe_log_module workers_log = SXE_LOG_MODULE_INIT(WORKERS);

#define KILL_GRACE_NS SXE_NS_PER_SEC        /* past the drain, before a process is killed */
#define CHECK_NS      (30 * SXE_NS_PER_SEC) /* a reload's check that takes longer is killed */

#if defined(SXE_COVERAGE)
void __gcov_dump(void); /* libgcov's: writes this process's counters */
#endif

/* Stops accepting and tells every worker to stop, or to drain: its channels close. */
void sxe__workers_begin_stop(sxe_workers_t *set, uint64_t now, const char *why, bool drain)
{
    if (set->stopping) {
        return;
    }
    SXE_LOG_INFO("%s: %s %u worker%s; %s for up to %llu ms", why, drain ? "draining" : "stopping",
                 set->options.count, set->options.count == 1 ? "" : "s",
                 drain ? "they finish what they hold" : "their output drains",
                 (unsigned long long)(set->options.drain_ns / SXE_NS_PER_MSEC));
    set->stopping = true;
    set->draining = drain;
    sxe__workers_check_end(set);
    set->stop_deadline = now + set->options.drain_ns + KILL_GRACE_NS;
    sxe__workers_close_listeners(set);
    for (unsigned i = 0; i < set->options.count; i++) {
        set->workers[i].restart_ns = 0;
        SXE__STORE(set->workers[i].shared->drain, drain);
        sxe__worker_close_channels(&set->workers[i], 0);
    }
}

static void report(const sxe_workers_t *set)
{
    for (unsigned i = 0; i < set->options.count; i++) {
        struct sxe_worker_stats stats;
        sxe_workers_stats(set, i, &stats);
        SXE_LOG_INFO("worker %u pid %d%s: open %u connections %llu requests %llu bytes %llu "
                     "table_full %llu evicted %llu restarts %u",
                     i, (int)stats.pid, set->workers[i].running ? "" : " (ended)", stats.open,
                     (unsigned long long)stats.connections, (unsigned long long)stats.requests,
                     (unsigned long long)stats.bytes, (unsigned long long)stats.table_full,
                     (unsigned long long)stats.evicted, stats.restarts);
    }
}

/* The hook here; then, with worker processes, the signal on to each, whose loop calls it too. The
 * supervisor's own call is what a worker it starts later begins with (a log opened again,
 * certificates read again), as a restarted worker must not go back to the files of the start. */
static void pass_on(sxe_workers_t *set, void (*hook)(void *arg), int signo)
{
    hook(set->options.hangup_arg);
    for (unsigned i = 0; set->options.kind == SXE_WORKERS_PROCESSES && i < set->options.count;
         i++) {
        if (set->workers[i].running && set->workers[i].pid > 0) {
            sxe__sys.kill(set->workers[i].pid, signo);
        }
    }
}

/* Answers the control peer that asked for the reload, if one did, and ends its connection. */
static void reply(sxe_workers_t *set, const char *text)
{
    if (set->check_reply >= 0) {
        (void)sxe__sys.send(set->check_reply, text, strlen(text), MSG_DONTWAIT | MSG_NOSIGNAL);
        sxe__close_fd(&set->check_reply);
    }
}

/* Runs options.on_reload in a child process, so that the supervisor serves on while the program
 * checks (accepting for hand-off, answering the control socket): sxe-httpd runs itself with -t,
 * which takes 10 ms, and up to 10 s on a file that does not end. @return 2, or -errno. */
static int begin_check(sxe_workers_t *set, int reply_fd)
{
    if (set->check_pid > 0) {
        SXE_LOG_WARN("SIGHUP: a reload's check runs already: this one is not made");
        return -EALREADY;
    }
    pid_t pid = sxe__sys.fork();
    if (pid < 0) {
        int rc = -errno;
        SXE_LOG_ERROR("SIGHUP: cannot check the new configuration: %s", sxe_strerror(rc));
        return rc;
    }
    if (pid == 0) {
        int rc = set->options.on_reload(set->options.hangup_arg);
#if defined(SXE_COVERAGE)
        __gcov_dump(); /* _exit skips the flush of the coverage counters */
#endif
        _exit(rc >= 0 ? 0 : -rc < 256 ? -rc : EINVAL); /* GCOVR_EXCL_LINE: after the counters */
    }
    set->check_pid = pid;
    set->check_deadline = sxe_clock_mono_ns() + CHECK_NS;
    set->check_reply = reply_fd;
    return 2;
}

bool sxe__workers_checked(sxe_workers_t *set, pid_t pid, int status)
{
    char text[160];

    if (pid != set->check_pid) {
        return false;
    }
    set->check_pid = 0;
    int rc = WIFEXITED(status) ? -WEXITSTATUS(status) : -ETIMEDOUT; /* killed: too slow */
    if (set->stopping) {
        reply(set, "error: stopping: no reload\n");
    } else if (rc < 0) {
        SXE_LOG_ERROR("SIGHUP: the reload was refused (%s): serving on as before",
                      sxe_strerror(rc));
        snprintf(text, sizeof(text),
                 "error: not reloaded (%s): serving on as before; the log says why\n",
                 sxe_strerror(rc));
        reply(set, text);
    } else {
        rc = sxe__workers_reexec(set, set->check_reply); /* returns only if the exec failed */
        snprintf(text, sizeof(text), "error: cannot run the program again (%s): serving on\n",
                 sxe_strerror(rc));
        reply(set, text);
    }
    return true;
}

void sxe__workers_check_end(sxe_workers_t *set)
{
    if (set->check_pid > 0) {
        if (!set->stopping) {
            SXE_LOG_ERROR("SIGHUP: the reload's check took more than %d s: killed",
                          (int)(CHECK_NS / SXE_NS_PER_SEC));
        }
        sxe__sys.kill(set->check_pid, SIGKILL); /* reaped, and refused, as any that ends */
        set->check_deadline = UINT64_MAX;
    }
    if (set->stopping) {
        reply(set, "error: stopping: no reload\n");
    }
}

int sxe__workers_hangup(sxe_workers_t *set, int reply_fd)
{
    if (set->options.reload_argv != NULL && set->options.kind == SXE_WORKERS_PROCESSES &&
        !set->stopping) {
        return set->options.on_reload != NULL ? begin_check(set, reply_fd)
                                              : sxe__workers_reexec(set, reply_fd);
    }
    SXE_LOG_INFO("SIGHUP: %s", set->options.on_hangup != NULL ? "passing it on" : "ignored");
    if (set->options.on_hangup == NULL) {
        return 1;
    }
    pass_on(set, set->options.on_hangup, SIGHUP);
    return 0;
}

/* SIGUSR1: options.on_reopen, passed on as SIGHUP's hook is; without it, the counters. */
void sxe__workers_reopen(sxe_workers_t *set, const char *why)
{
    if (set->options.on_reopen == NULL) {
        report(set);
        return;
    }
    SXE_LOG_INFO("%s: reopening, and passing it on", why);
    pass_on(set, set->options.on_reopen, SIGUSR1);
}
