/**
 * @file sxe/workers.h
 * @brief Workers: N loops behind the same listening addresses, one per core, in processes or
 * threads, with a supervisor that spreads connections, restarts processes that die and stops
 * them all cleanly.
 *
 *     static int start(sxe_worker_t *worker, void *arg)
 *     {
 *         // on the worker: its loop is made; set up its state, then take its share of listener 0
 *         return sxe_worker_listen(worker, 0, &handlers, my_state_for(worker));
 *     }
 *     ...
 *     if (sxe_workers_create(&workers, &(struct sxe_workers_options){.count = 4}) < 0 ||
 *         sxe_workers_listen(workers, (struct sockaddr *)&address, sizeof(address), NULL) < 0)
 *         return 1;
 *     rc = sxe_workers_run(workers, start, NULL, NULL);   // until SIGINT or SIGTERM
 *     sxe_workers_destroy(workers);
 *
 * Each worker has its own loop, with its own fixed-memory connection table (options.loop sizes
 * each one), and a connection stays on the worker that took it: its callbacks run there.
 *
 * Processes or threads. Processes (the default) share nothing implicitly: each worker has its own
 * copy of the program's globals, its own file descriptor limit (so N workers hold N times the
 * per-process limit of connections), and one that dies is restarted by the supervisor while the
 * others serve on. Threads share the process's memory: a handler that touches global state must
 * make it safe (atomics, or one copy per worker found by sxe_worker_index()); a worker that fails
 * is reported but not restarted. Share state between processes through memory mapped before
 * sxe_workers_run() (a sxe pool in shared memory, sxe/pool.h).
 *
 * Spreading connections (options.spread):
 * - SXE_SPREAD_REUSEPORT: each worker has a listening socket of its own on the address
 *   (SO_REUSEPORT) and the kernel hashes each new connection to one of them. Cheapest, no hop;
 *   but a worker that stalls still gets its share of new connections, which wait.
 * - SXE_SPREAD_REUSEPORT_CPU: the same, steered by a 3-instruction classic BPF program
 *   (SO_ATTACH_REUSEPORT_CBPF): a connection goes to the worker whose index is the number of the
 *   CPU that received it, modulo the count. With one worker per CPU, pinned, it stays on one core.
 * - SXE_SPREAD_HAND_OFF: the supervisor accepts every connection and passes it (SCM_RIGHTS) to
 *   the least loaded worker: open connections plus those passed and not yet taken. A stalled
 *   worker's backlog grows and new connections go elsewhere; so do they when a worker's table is
 *   full. Costs the supervisor an accept, a sendmsg and a close per connection.
 *
 * Stopping. On SIGINT or SIGTERM the supervisor stops accepting, tells every worker to stop (each
 * closes its listeners, gives queued output up to drain_ns to be sent, closes its connections)
 * and returns once all have ended; a process still running drain_ns plus a second later is
 * killed. SIGQUIT is the same, except that the workers drain (sxe_loop_drain(): what each
 * connection has under way is finished first, within drain_ns). On SIGUSR1 it calls
 * options.on_reopen, or writes one line per worker with its statistics to the log; on SIGHUP it
 * reloads (options.reload_argv), or calls options.on_hangup in it and in every worker process (see
 * there). A control socket (options.control_path) does the same from a command line, and tells
 * the workers' counters.
 */
#ifndef SXE_WORKERS_H
#define SXE_WORKERS_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "sxe/conn.h"
#include "sxe/error.h"
#include "sxe/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sxe_workers sxe_workers_t;
typedef struct sxe_worker sxe_worker_t;

/** What a worker runs in. */
enum sxe_workers_kind {
    SXE_WORKERS_PROCESSES, /**< A process each, forked by the supervisor: restarted if it dies. */
    SXE_WORKERS_THREADS,   /**< A thread each, in the supervisor's process. */
};

/** How new connections are spread over the workers (see above). */
enum sxe_workers_spread {
    SXE_SPREAD_REUSEPORT,     /**< A listener per worker; the kernel hashes connections. */
    SXE_SPREAD_REUSEPORT_CPU, /**< The same, each to the worker of the receiving CPU. */
    SXE_SPREAD_HAND_OFF,      /**< The supervisor accepts and passes to the least loaded. */
};

#define SXE_WORKERS_MAX 256 /**< The most workers a set may have. */

struct sxe_workers_options {
    unsigned count;                 /**< Workers (0: the CPUs this process may run on). */
    enum sxe_workers_kind kind;     /**< SXE_WORKERS_PROCESSES. */
    enum sxe_workers_spread spread; /**< SXE_SPREAD_REUSEPORT. */
    struct sxe_loop_options loop;   /**< Each worker's loop (its connections, buffers...). */
    uint64_t drain_ns;              /**< ns queued output may take to drain on a stop (5 s). */
    /**
     * On SIGHUP to the supervisor: called in the supervisor, on_hangup(hangup_arg) (a program
     * reopens its logs and reloads its certificates there), then, with worker processes, in each
     * of them: each gets the signal and calls it on its loop's thread. The supervisor's call is
     * what a worker it starts later inherits. With threads it is called once, on the supervisor's
     * thread, so it must be safe beside the workers. NULL: SIGHUP is logged and ignored. It never
     * stops the set.
     */
    void (*on_hangup)(void *arg);
    void *hangup_arg;
    /**
     * Reload by running the program again (worker processes only; NULL: SIGHUP goes to on_hangup).
     * On SIGHUP the supervisor calls on_reload(hangup_arg), if set, where the program checks its
     * new configuration, in a child process of its own (forked: what it changes stays there), so
     * that the set serves on meanwhile; one still running after 30 s is killed. A negative
     * return keeps the set serving as it is, and so does a SIGHUP while a check runs. Then it
     * executes the
     * program again (/proc/self/exe) with these arguments, in the same process: the new image's
     * set, made as the first was, takes the listening sockets back in sxe_workers_listen() (by
     * address; a port of 0 by the listener's place) instead of binding new ones, so nothing
     * waiting in them is lost, and starts its own workers, while those of the old image drain
     * (sxe_loop_drain()) and end. A listener the new configuration has no more is closed; a
     * changed workers' count is followed. The signals the supervisor reads stay blocked through
     * the exec: those that come meanwhile wait for the new image. If the exec fails, the old set
     * serves on. The new image must start: check everything it needs in on_reload.
     */
    char *const *reload_argv;
    int (*on_reload)(void *arg);
    /**
     * On SIGUSR1: called as on_hangup is (in the supervisor, then in each worker process on its
     * loop's thread; once with threads), with hangup_arg: a program reopens its log files there
     * (logrotate's postrotate sends SIGUSR1, as it does to nginx). NULL: SIGUSR1 writes a line of
     * counters per worker to the log instead.
     */
    void (*on_reopen)(void *arg);
    /**
     * The path of a control socket, NULL for none: a Unix stream socket, mode 0600, that the
     * supervisor answers while sxe_workers_run() runs; only a peer of the same user (or root) is
     * served. A peer sends one line (at most 255 bytes), gets the answer and the end of the
     * connection: "status" (add "json" for JSON), "reopen" (as SIGUSR1), "reload" (as SIGHUP:
     * the answer comes once the check passed, before the new image starts), "drain" (as SIGQUIT),
     * "stop" (as SIGTERM), "log-level MODULE LEVEL" (MODULE "all" for every module; in the
     * supervisor and in every worker), "help". An answer that starts with "error:" failed.
     * A socket file at the path that no program answers on is replaced; one that a program answers
     * on makes sxe_workers_run() fail with -EADDRINUSE. The file is removed at the end of the run
     * (not by a reload: the new image replaces it). docs/workers.md has more.
     */
    const char *control_path;
};

/**
 * A worker's counters. The worker's loop publishes the connection counts after each turn; the
 * protocol on it adds requests and bytes with sxe_worker_count().
 */
struct sxe_worker_stats {
    uint64_t connections; /**< Connections taken since the set started (accepted or passed). */
    uint64_t requests;    /**< Requests answered, as the protocol counts them. */
    uint64_t bytes;       /**< Bytes of responses, as the protocol counts them. */
    uint64_t table_full;  /**< Connections refused because the worker's table was full. */
    uint64_t evicted;     /**< Idle connections closed to make room. */
    uint32_t open;        /**< Client connections open now. */
    uint32_t restarts;    /**< Times the worker was restarted after dying. */
    pid_t pid;            /**< The worker's process (the supervisor's, for threads). */
};

/**
 * Makes a set of workers (none runs yet).
 * @return 0, -EINVAL for invalid options (more than SXE_WORKERS_MAX), or -ENOMEM.
 */
SXE_MUST_CHECK int sxe_workers_create(sxe_workers_t **workers,
                                      const struct sxe_workers_options *options);

/** Frees the set, after sxe_workers_run() has returned (or if it never ran). */
void sxe_workers_destroy(sxe_workers_t *workers);

/**
 * Listens on address for every worker: opens the listening sockets now, so a port given as 0 is
 * chosen here (sxe_workers_port() tells which) and an address in use fails here. With
 * SXE_SPREAD_REUSEPORT* the set makes one socket per worker (SO_REUSEPORT is added to
 * options->flags); with SXE_SPREAD_HAND_OFF one, which the supervisor accepts on.
 * A TLS listener (options->tls) spreads either way: with SXE_SPREAD_HAND_OFF the supervisor
 * accepts and passes the socket, and the worker that takes it runs the handshake.
 * @return the listener's index (0 for the first), -EINVAL, -ENOBUFS past 8 listeners, or -errno
 *         from socket, setsockopt, bind or listen (-EADDRINUSE).
 */
SXE_MUST_CHECK int sxe_workers_listen(sxe_workers_t *workers, const struct sockaddr *address,
                                      socklen_t address_len,
                                      const struct sxe_listen_options *options);

/** The port listener listens on, or 0. */
int sxe_workers_port(const sxe_workers_t *workers, unsigned listener);

/** On a worker, after its loop is made: set up, and take listeners with sxe_worker_listen(). */
typedef int (*sxe_worker_start_t)(sxe_worker_t *worker, void *arg);

/** On a worker whose start succeeded, once its loop has stopped and been destroyed (every
 * connection closed): frees what start made. */
typedef void (*sxe_worker_stop_t)(sxe_worker_t *worker, void *arg);

/**
 * Starts the workers and supervises them until SIGINT or SIGTERM, then stops them all (above).
 * Each worker makes its loop, calls start(worker, arg) and runs the loop; a start that fails
 * (negative) ends that worker, and is not restarted. The calling thread blocks SIGINT, SIGTERM,
 * SIGQUIT, SIGCHLD, SIGHUP, SIGUSR1 and SIGUSR2 and reads them from a signalfd (SIGUSR2, which
 * tells a worker process that the control socket set log levels, is ignored there).
 * @return 0 after a clean stop, -EINVAL if no listener was added, -ECHILD if every worker ended
 *         by itself, or -errno if the workers could not be started.
 */
SXE_MUST_CHECK int sxe_workers_run(sxe_workers_t *workers, sxe_worker_start_t start,
                                   sxe_worker_stop_t stop, void *arg);

/** The CPUs this process may run on (its affinity): the count of workers that fills them. */
unsigned sxe_workers_cpus(void);

/** How many workers the set has. */
unsigned sxe_workers_count(const sxe_workers_t *workers);

/** Copies worker index's counters (any process or thread of the set may read them). */
void sxe_workers_stats(const sxe_workers_t *workers, unsigned index,
                       struct sxe_worker_stats *stats);

/**
 * On a worker: takes its share of listener (an index from sxe_workers_listen()). Connections it
 * gets from the listener start with handlers and user, as sxe_conn_listen() gives them.
 * @return 0, -EINVAL for a listener that does not exist, or -errno.
 */
SXE_MUST_CHECK int sxe_worker_listen(sxe_worker_t *worker, unsigned listener,
                                     const struct sxe_conn_handlers *handlers, void *user);

/** The worker's loop. */
sxe_loop_t *sxe_worker_loop(const sxe_worker_t *worker);

/** The worker's index, from 0 to the count less one. */
unsigned sxe_worker_index(const sxe_worker_t *worker);

/**
 * The worker the calling thread runs (in its start, its loop's callbacks and its stop), or NULL
 * outside every worker: for code far from the start function, such as an HTTP handler, that keeps
 * state per worker (index it by sxe_worker_index()).
 */
sxe_worker_t *sxe_worker_current(void);

/** The set the worker belongs to. */
sxe_workers_t *sxe_worker_set(const sxe_worker_t *worker);

/** On a worker: adds requests and bytes to its counters (cheap: two stores to its own line). */
void sxe_worker_count(sxe_worker_t *worker, uint64_t requests, uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif
