/*
 * Workers (sxe/workers.h): what the supervisor (workers.c) and a worker (worker.c) share. The
 * supervisor makes the listening sockets and a channel per worker and listener, then forks or
 * starts each worker; a worker runs a loop of its own. Each worker's counters live in memory
 * mapped shared before the first fork, one 128-byte line pair per worker, written only by it.
 */
#ifndef SXE_WORKER_INTERNAL_H
#define SXE_WORKER_INTERNAL_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "sxe/workers.h"
#include "sys.h"

#define SXE__WORKER_LISTENERS 8

/* The shared counters are read and written relaxed: each has one writer, and readers only watch. */
#define SXE__LOAD(field)         __atomic_load_n(&(field), __ATOMIC_RELAXED)
#define SXE__STORE(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELAXED)

/* Closes *fd if open, and marks it closed. */
static inline void sxe__close_fd(int *fd)
{
    if (*fd >= 0) {
        sxe__sys.close(*fd);
        *fd = -1;
    }
}

/* A worker's published counters, in shared memory: written by the worker, read by anyone. */
struct sxe__worker_shared {
    struct sxe_worker_stats stats;
    uint64_t taken; /* connections passed to it that it has taken (or refused), as of its last
                     * published turn: stored after stats.open, with release */
    uint32_t drain; /* set by the supervisor before it closes the channels: drain, not stop */
} __attribute__((aligned(128)));

/* Log levels set through the control socket, for the workers to apply (a seqlock: seq is odd
 * while the supervisor writes; a worker reads after SIGUSR2). A worker started later inherits the
 * supervisor's levels, which it set too. */
#define SXE__WORKERS_LEVELS 16
struct sxe__workers_levels {
    uint32_t seq;
    uint32_t all_set; /* "log-level all": sxe_log_set_level(all_level), before the modules' */
    int32_t all_level;
    uint32_t count;
    struct {
        char module[28];
        int32_t level;
    } set[SXE__WORKERS_LEVELS];
};

/*
 * A worker's list of its connections, for the control socket's "connections" (workers_list.c):
 * the supervisor bumps asked (and sends SIGUSR2 to a process); the worker, at the end of its next
 * turn, writes the list and sets done to asked, with release.
 */
#define SXE__LISTING_MOST 64 /* connections listed per worker: the oldest in their state first */
struct sxe__listed_conn {
    char peer[56];    /* "IP:PORT", "[IPv6]:PORT", or "-" */
    uint8_t state;    /* enum sxe__conn_state */
    uint8_t outbound; /* the program's connection (an upstream's), not a client's */
    uint64_t since;   /* the loop's clock when it entered its state */
    uint64_t queued;  /* bytes waiting to go out */
    char what[104];   /* its handlers' describe(), or "" */
};
struct sxe__worker_listing {
    uint32_t asked;
    uint32_t done;
    uint32_t count; /* listed */
    uint32_t open;  /* streams open, listed or not */
    uint64_t now;   /* the loop's clock as it listed */
    struct sxe__listed_conn conns[SXE__LISTING_MOST];
};

/* What a worker takes from one listener: connections passed over a channel, or its own socket. */
struct sxe__worker_share {
    sxe_worker_t *worker;
    unsigned listener;
    const struct sxe_conn_handlers *handlers; /* NULL until sxe_worker_listen() */
    void *user;
};

struct sxe_worker {
    sxe_workers_t *set;
    unsigned index;
    struct sxe__worker_shared *shared;

    /* The supervisor's view. */
    pid_t pid; /* processes: the running child, or 0 */
    pthread_t thread;
    bool running;      /* started and not yet ended */
    bool start_failed; /* its start (or its loop's creation) failed: not restarted */
    bool killed;       /* sent SIGKILL after a stop's deadline */
    int thread_watch;  /* threads: hangs up when the thread ends (the supervisor's end) */
    int thread_done;   /* threads: the thread's end, closed as it returns */
    int wake[2]; /* threads: a byte written to [0] wakes the loop, which reads [1] (a listing) */
    uint64_t passed;                        /* connections passed to it */
    uint64_t started_ns;                    /* when it was last started */
    uint64_t restart_ns;                    /* when to restart it, or 0 */
    int channels[SXE__WORKER_LISTENERS][2]; /* [0] the supervisor's end, [1] the worker's */

    /* The worker's own. */
    sxe_loop_t *loop;
    struct sxe__worker_share shares[SXE__WORKER_LISTENERS];
    uint32_t own;     /* listeners and channels in its table: not client connections */
    uint64_t adopted; /* connections passed to it and taken */
    uint64_t taken;   /* connections passed to it and taken or refused: shared->taken's source */
    int result;       /* how it ended (threads) */
};

struct sxe__workers_listener {
    struct sxe_listen_options options;
    int *fds; /* one per worker (reuseport), or one (hand-off); -1 once closed */
    unsigned fd_count;
    int held; /* hand-off: accepted, waiting for a channel with room (accepting waits), or -1 */
    int port;
};

struct sxe_workers {
    struct sxe_workers_options options;
    struct sxe__worker_shared *shared; /* count of them, mapped shared */
    size_t shared_size;
    struct sxe_worker *workers;
    struct sxe__workers_listener listeners[SXE__WORKER_LISTENERS];
    unsigned listener_count;
    sxe_worker_start_t start;
    sxe_worker_stop_t stop;
    void *arg;
    pid_t pid; /* the supervisor's */
    bool ran;
    int signal_fd;
    sigset_t old_mask;
    bool stopping;
    bool draining;           /* the stop is a drain */
    uint64_t stop_deadline;  /* processes still running then are killed */
    unsigned next;           /* hand-off: where the search for the least loaded starts */
    uint64_t started_ns;     /* when sxe_workers_run() began */
    pid_t check_pid;         /* a reload's check (options.on_reload, in a child), or 0 */
    uint64_t check_deadline; /* past it, the check is killed */
    int check_reply; /* the control peer that asked for the reload, answered at its end, or -1 */
    struct sxe__workers_levels *levels;   /* in the shared mapping, after the workers' lines */
    struct sxe__worker_listing *listings; /* ... and after the levels, one per worker */
    struct sxe__workers_control *control; /* options.control_path's socket, or NULL */
};

/* The most control connections answered at once (more wait in the socket's backlog), and so the
 * most descriptors sxe__workers_control_poll() adds. */
#define SXE__CONTROL_PEERS 8

/* workers.c: closes a worker's ends (0: the supervisor's, 1: the worker's) of its channels. */
void sxe__worker_close_channels(sxe_worker_t *worker, unsigned end);

/* workers.c: closes the set's copies of the listening sockets, and any connection held back. */
void sxe__workers_close_listeners(sxe_workers_t *set);

/* workers_reload.c: takes the sockets a reload passed on for a listener on address, into
 * listener's fds (sized for the set; fd_count), held and port. @return how many it took (0 for
 * none: the caller binds them), or -ENOMEM. */
int sxe__workers_inherited(sxe_workers_t *set, struct sxe__workers_listener *listener,
                           const struct sockaddr *address);

/* workers_reload.c: a process ended; @return whether it was a worker of an image before a reload,
 * still draining (then it is one less to wait for). */
bool sxe__workers_drained(pid_t pid);

/* workers_reload.c: how many workers of the images before a reload are still draining; with
 * kill_them, they are sent SIGKILL (a stop's deadline has passed). */
unsigned sxe__workers_draining(bool kill_them);

/* workers_reload.c: closes what a reload passed on and no listener took. */
void sxe__workers_inherit_end(void);

/* workers_reload.c: a reload whose check passed: executes the program again with the listeners;
 * returns only if that failed (said in the log), with -errno. Just before the exec, writes
 * "ok: reloading" to reply_fd if it is not -1. */
int sxe__workers_reexec(sxe_workers_t *set, int reply_fd);

/* workers_act.c: what signals do, and the control socket's commands. */
void sxe__workers_begin_stop(sxe_workers_t *set, uint64_t now, const char *why, bool drain);
void sxe__workers_reopen(sxe_workers_t *set, const char *why);
/* hangup: @return -errno if a reload could not begin or failed, 0 if SIGHUP's hook ran, 1 if there
 * is none, 2 if the reload's check runs (in a child: sxe__workers_checked() goes on when it ends),
 * reply_fd then the check's to answer and close. */
int sxe__workers_hangup(sxe_workers_t *set, int reply_fd);
/* A process ended: @return whether it was a reload's check; if so, the reload goes on (or is
 * refused) and the peer that asked is answered. */
bool sxe__workers_checked(sxe_workers_t *set, pid_t pid, int status);
/* A stop began, or the check's deadline passed: the check is killed (and then refused). */
void sxe__workers_check_end(sxe_workers_t *set);

/* workers_control.c: the control socket (options.control_path). open: binds it (0 without a path,
 * or -errno: -EADDRINUSE if a program answers on it); close: closes it and the peers', and, with
 * remove, the file if it is still the one bound (not in a worker process, which has copies). */
int sxe__workers_control_open(sxe_workers_t *set);
void sxe__workers_control_close(sxe_workers_t *set, bool remove);
/* The descriptors to poll (at most 1 + SXE__CONTROL_PEERS, into fds), and, after poll, what they
 * brought: commands read and answered, peers too slow closed. deadline: the earliest time a peer
 * times out, or UINT64_MAX. */
unsigned sxe__workers_control_poll(sxe_workers_t *set, struct pollfd *fds, uint64_t *deadline);
void sxe__workers_control_ready(sxe_workers_t *set, const struct pollfd *fds, uint64_t now);

/* workers_list.c, in a worker: writes its list if one was asked for since the last. */
void sxe__worker_list(sxe_worker_t *worker);
/* workers_list.c, in the supervisor: asks every running worker for its list. @return how many
 * were asked. */
unsigned sxe__workers_list_ask(sxe_workers_t *set);
/* Whether every worker asked has answered. */
bool sxe__workers_list_ready(sxe_workers_t *set);
/* Says the lists (as text for people, or JSON) through say(arg, text): a worker that has not
 * answered is said to be idle. */
void sxe__workers_list_say(sxe_workers_t *set, bool json, void (*say)(void *arg, const char *text),
                           void *arg);

/* worker.c: a worker's life, in its thread or process. @return 0, or -errno if it failed. */
int sxe__worker_main(sxe_worker_t *worker);

#endif
