/*
 * What the supervisor's signals and its control socket's commands do (sxe/workers.h): stop or
 * drain the set, reload it or pass SIGHUP on, reopen (SIGUSR1) or report the counters.
 */
#define SXE_LOG_MODULE workers_log
#include "sxe/log.h"

#include <signal.h>

#include "sxe/clock.h"
#include "sys.h"
#include "worker.h"

static struct sxe_log_module workers_log = SXE_LOG_MODULE_INIT(WORKERS);

#define KILL_GRACE_NS SXE_NS_PER_SEC /* past the drain, before a process is killed */

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

int sxe__workers_hangup(sxe_workers_t *set, int reply_fd)
{
    if (set->options.reload_argv != NULL && set->options.kind == SXE_WORKERS_PROCESSES &&
        !set->stopping) {
        return sxe__workers_reexec(set, reply_fd); /* returns if the reload was refused or failed */
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
