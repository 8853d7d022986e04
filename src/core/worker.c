/*
 * A worker's side of sxe/workers.h: its loop, the channels on which the supervisor passes it
 * connections (and whose end tells it to stop), its share of the listeners, and its counters,
 * published to shared memory after each turn of its loop.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "loop.h"
#include "sxe/log.h"
#include "sys.h"
#include "transport.h"
#include "worker.h"

/* Counters the worker's earlier lives left: a restarted worker's counts go on from them. */
struct base {
    uint64_t connections;
    uint64_t table_full;
    uint64_t evicted;
};
static __thread struct base base;

/*
 * After each turn: the loop's counts, as the set sees them. A few stores to the worker's line.
 * The count of connections taken goes last, with release, so that the supervisor, which reads it
 * first, never sees a connection as taken before it sees it open: one taken mid-turn stays pending
 * until then, not uncounted (which made the busier worker look the less loaded).
 */
static void publish(sxe_loop_t *loop, void *arg)
{
    sxe_worker_t *worker = arg;
    struct sxe__worker_shared *shared = worker->shared;
    const struct sxe_loop_stats *stats = &loop->stats;
    uint32_t open = sxe__conn_open_count(loop);

    SXE__STORE(shared->stats.open, open > worker->own ? open - worker->own : 0);
    SXE__STORE(shared->stats.connections, base.connections + stats->accepted + worker->adopted);
    SXE__STORE(shared->stats.table_full, base.table_full + stats->table_full);
    SXE__STORE(shared->stats.evicted, base.evicted + stats->evicted);
    __atomic_store_n(&shared->taken, worker->taken, __ATOMIC_RELEASE);
    sxe__worker_list(worker); /* a list of its connections, if the control socket asked */
}

/* The supervisor passed a connection it accepted: take it, as the listener's would be. */
static void on_fd(sxe_conn_t *channel, int fd)
{
    struct sxe__worker_share *share = sxe_conn_user(channel);
    sxe_worker_t *worker = share->worker;
    sxe_conn_t *conn;

    worker->taken++;
    if (share->handlers == NULL) {
        sxe__sys.close(fd); /* the worker did not listen on this one */
        return;
    }
    const struct sxe_listen_options *options = &worker->set->listeners[share->listener].options;
    bool evict = (options->flags & SXE_LISTEN_EVICT_IDLE);
    if (sxe__conn_adopt_passed(worker->loop, &conn, fd, evict, options->tls, share->handlers,
                               share->user) == 0) {
        worker->adopted++;
    }
}

/* The supervisor closed its end: it is stopping (or gone), so stop too; or drain, if it said so
 * first (SIGQUIT, or a reload). */
static void on_channel_close(sxe_conn_t *channel, enum sxe_close_reason reason, int err)
{
    struct sxe__worker_share *share = sxe_conn_user(channel);
    sxe_worker_t *worker = share->worker;

    (void)err;
    worker->own--;
    if (reason == SXE_CLOSE_SHUTDOWN) {
        return;
    }
    if (SXE__LOAD(worker->shared->drain)) {
        sxe_loop_drain(worker->loop, worker->set->options.drain_ns);
    } else {
        sxe_loop_shutdown(worker->loop, worker->set->options.drain_ns);
    }
}

/* A channel is open for the worker's whole life: no idle timeout applies, and no eviction. */
static void on_channel_connect(sxe_conn_t *channel)
{
    sxe_loop_t *loop = sxe_conn_loop(channel);

    sxe_pool_set_state(loop->conn_pool, sxe__conn_index(channel), SXE__CONN_IDLE,
                       SXE__CONN_LISTENING, loop->now);
}

static const struct sxe_conn_handlers channel_handlers = {
    .on_connect = on_channel_connect, .on_fd = on_fd, .on_close = on_channel_close};

/* A worker thread's wake pair: the bytes only end a wait, so that the turn's end lists. It is
 * parked as the channels are: no timeout closes it, no drain waits for it, no list shows it. */
static size_t on_wake(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)conn;
    (void)data;
    return len;
}

static const struct sxe_conn_handlers wake_handlers = {.on_connect = on_channel_connect,
                                                       .on_read = on_wake};

/* SIGUSR2: the control socket set log levels, in the shared mapping (a seqlock: the supervisor
 * writes for microseconds, while seq is odd). */
static void apply_levels(void *arg)
{
    const struct sxe__workers_levels *levels = ((sxe_worker_t *)arg)->set->levels;
    struct sxe__workers_levels copy;

    for (unsigned tries = 0; tries < 1000; tries++) { /* the supervisor writes for microseconds */
        uint32_t seq = __atomic_load_n(&levels->seq, __ATOMIC_ACQUIRE);
        memcpy(&copy, levels, sizeof(copy));
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (seq % 2 == 0 && __atomic_load_n(&levels->seq, __ATOMIC_RELAXED) == seq) {
            if (copy.all_set) {
                (void)sxe_log_set_level((enum sxe_log_level)copy.all_level);
            }
            for (unsigned i = 0; i < copy.count && i < SXE__WORKERS_LEVELS; i++) {
                copy.set[i].module[sizeof(copy.set[i].module) - 1] = '\0';
                (void)sxe_log_set_module_level(copy.set[i].module,
                                               (enum sxe_log_level)copy.set[i].level);
            }
            return;
        }
    }
}

/* The loop, its channels and its signals. @return 0 or -errno. */
static int worker_open(sxe_worker_t *worker)
{
    sxe_workers_t *set = worker->set;
    int rc;

    if ((rc = sxe_loop_create(&worker->loop, &set->options.loop)) < 0) {
        for (unsigned l = 0; l < set->listener_count; l++) {
            sxe__sys.close(worker->channels[l][1]);
        }
        return rc;
    }
    worker->loop->turn_hook = publish;
    worker->loop->turn_arg = worker;
    for (unsigned l = 0; l < set->listener_count; l++) {
        sxe_conn_t *channel;
        worker->shares[l] = (struct sxe__worker_share){.worker = worker, .listener = l};
        int fd = worker->channels[l][1];
        worker->channels[l][1] = -1; /* the loop owns it now */
        if (rc < 0) {
            sxe__sys.close(fd); /* an earlier channel failed: this one is never handed over */
        } else if ((rc = sxe__conn_adopt_channel(worker->loop, &channel, fd, &channel_handlers,
                                                 &worker->shares[l])) == 0) {
            worker->own++;
        } /* else the adoption closed fd itself */
    }
    if (set->options.kind == SXE_WORKERS_THREADS && worker->wake[1] >= 0) {
        sxe_conn_t *wake;
        int fd = worker->wake[1];
        worker->wake[1] = -1; /* the loop's now, or closed by a failed adoption */
        if (rc < 0) {
            sxe__sys.close(fd);
        } else if ((rc = sxe_conn_adopt(worker->loop, &wake, fd, &wake_handlers, worker)) ==
                   0) { /* (which closes fd if it fails) */
            worker->own++;
        }
    }
    if (rc == 0 && set->options.kind == SXE_WORKERS_PROCESSES) {
        rc = sxe_loop_stop_on_signals(worker->loop, set->options.drain_ns);
        sxe_loop_on_hangup(worker->loop, set->options.on_hangup, set->options.hangup_arg);
        /* SIGUSR1 reopens (as the supervisor passes it on); SIGUSR2 says the control socket set
         * log levels, in the shared mapping */
        if (rc == 0 && set->options.on_reopen != NULL) {
            rc = sxe_loop_on_signal(worker->loop, SIGUSR1, set->options.on_reopen,
                                    set->options.hangup_arg);
        }
        if (rc == 0) {
            rc = sxe_loop_on_signal(worker->loop, SIGUSR2, apply_levels, worker);
        }
    }
    return rc;
}

static __thread sxe_worker_t *current; /* the worker this thread runs, or NULL */

sxe_worker_t *sxe_worker_current(void)
{
    return current;
}

int sxe__worker_main(sxe_worker_t *worker)
{
    sxe_workers_t *set = worker->set;
    struct sxe__worker_shared *shared = worker->shared;
    int rc;

    current = worker;

    base = (struct base){.connections = SXE__LOAD(shared->stats.connections),
                         .table_full = SXE__LOAD(shared->stats.table_full),
                         .evicted = SXE__LOAD(shared->stats.evicted)};
    worker->own = 0;
    worker->adopted = 0;
    worker->taken = SXE__LOAD(shared->taken);
    if ((rc = worker_open(worker)) < 0) {
        SXE_LOG_ERROR("worker %u: cannot start: %s", worker->index, sxe_strerror(rc));
        worker->start_failed = true;
    } else if ((rc = set->start(worker, set->arg)) < 0) {
        SXE_LOG_ERROR("worker %u: its start failed: %s", worker->index, sxe_strerror(rc));
        worker->start_failed = true;
    } else {
        publish(worker->loop, worker);
        if ((rc = sxe_loop_run(worker->loop)) < 0) {
            SXE_LOG_ERROR("worker %u: its loop failed: %s", worker->index, sxe_strerror(rc));
        }
    }
    if (worker->loop != NULL) {
        sxe_loop_destroy(worker->loop);
        worker->loop = NULL;
    }
    if (!worker->start_failed && set->stop != NULL) {
        set->stop(worker, set->arg);
    }
    current = NULL;
    return rc;
}

int sxe_worker_listen(sxe_worker_t *worker, unsigned listener,
                      const struct sxe_conn_handlers *handlers, void *user)
{
    sxe_workers_t *set = worker != NULL ? worker->set : NULL;
    sxe_conn_t *conn;

    if (!SXE_CHECK(set != NULL && worker->loop != NULL && listener < set->listener_count)) {
        return -EINVAL;
    }
    struct sxe__workers_listener *group = &set->listeners[listener];
    bool hand_off = set->options.spread == SXE_SPREAD_HAND_OFF;
    int rc = hand_off && group->options.tls != NULL
                 ? sxe__tls_prepare(worker->loop, group->options.tls) /* its handshakes are ours */
                 : 0;
    if (rc < 0) {
        return rc;
    }
    worker->shares[listener].handlers = handlers;
    worker->shares[listener].user = user;
    if (hand_off) {
        return 0; /* connections come over the channel */
    }
    /* The loop owns the sockets it attaches: a process's copies are its own; a thread takes a
     * dup, since the set keeps its own for a restart. Its own socket, and, in a group larger than
     * the set (a reload that made the set smaller), every count-th after it. */
    for (unsigned i = worker->index; i < group->fd_count; i += set->options.count) {
        int fd = group->fds[i];
        if (set->options.kind == SXE_WORKERS_THREADS) {
            if ((fd = sxe__sys.dup(fd)) < 0) {
                return -errno;
            }
        } else {
            group->fds[i] = -1;
        }
        if ((rc = sxe__listen_attach(worker->loop, &conn, fd, &group->options, handlers, user)) <
            0) {
            return rc;
        }
        worker->own++;
    }
    return 0;
}

sxe_loop_t *sxe_worker_loop(const sxe_worker_t *worker)
{
    return worker->loop;
}

unsigned sxe_worker_index(const sxe_worker_t *worker)
{
    return worker->index;
}

sxe_workers_t *sxe_worker_set(const sxe_worker_t *worker)
{
    return worker->set;
}

void sxe_worker_count(sxe_worker_t *worker, uint64_t requests, uint64_t bytes)
{
    struct sxe_worker_stats *stats = &worker->shared->stats;

    SXE__STORE(stats->requests, SXE__LOAD(stats->requests) + requests);
    SXE__STORE(stats->bytes, SXE__LOAD(stats->bytes) + bytes);
}
