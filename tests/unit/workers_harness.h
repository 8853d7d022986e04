/*
 * The workers' tests' harness (test_workers.c, test_workers_hand_off.c): a set whose workers
 * answer every request ("?") with their index (a request "s" stalls the worker STALL_MS first), its
 * supervisor run in a forked child, the clients that ask it, and waits on the workers' counters.
 */
#ifndef SXE_TEST_WORKERS_HARNESS_H
#define SXE_TEST_WORKERS_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sxe/workers.h"

#define STALL_MS 1500

/* What the workers' start does besides listening. */
struct behaviour {
    unsigned fail;    /* workers whose index is below this fail their start */
    long slow_ms;     /* every worker's start takes this long: connections pile up meanwhile */
    bool fill_first;  /* worker 0 fills its table before it listens */
    bool hang;        /* every worker's start waits for a signal that never comes: never stops */
    bool spare_first; /* with hang: worker 0 serves, and stops when told */
};

struct server {
    sxe_workers_t *set;
    pid_t pid;
    int port;
    struct behaviour behaviour;
    int log_fd; /* where the server's log goes, if not 0 (stderr) */
};

/* The workers' start: its behaviour (arg), then it listens on listener 0. */
int start_worker(sxe_worker_t *worker, void *arg);

/* Creates the set, listens on 127.0.0.1 (any port) and runs it in a forked child. */
void server_start(struct server *server, const struct sxe_workers_options *options);

/* Stops the server with SIGTERM, within 10 s (or fails, killing it). @return its exit status. */
int server_stop(struct server *server);

/* Waits (10 s at most, or fails, killing it) for a server told to stop otherwise (a command: a
 * SIGTERM could come as its run returns, the signal no longer blocked). @return its status. */
int server_wait(struct server *server);

void sleep_ms(long ms);

/* A connected client socket to 127.0.0.1 (with a 5 s read timeout) or ::1, port. */
int client(int port);
int client6(int port);

/* Asks which worker serves fd. @return its index, or -1 if none answers. */
int ask(int fd);

/* Waits up to 5 s for worker index's counters to satisfy done(stats, want). */
bool wait_stats(sxe_workers_t *set, unsigned index,
                bool (*done)(const struct sxe_worker_stats *stats, uint64_t want), uint64_t want);
bool open_is(const struct sxe_worker_stats *stats, uint64_t want);
bool restarted(const struct sxe_worker_stats *stats, uint64_t want);

#endif
