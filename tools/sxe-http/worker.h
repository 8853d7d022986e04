/*
 * A sxe-http worker's state, shared by its parts: the run (worker.c) and its connections
 * (client.c). Private to the worker process.
 */
#ifndef SXE_HTTP_WORKER_H
#define SXE_HTTP_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include <sxe/sxe.h>

#include "response.h"
#include "sxe-http.h"

#define NONE UINT32_MAX

enum { REOPEN_CLOSING = 1, REOPEN_CONNECTING };

/* One connection of a worker. */
struct client {
    sxe_conn_t *conn;
    sxe_ws_t *ws;   /* in WebSocket mode */
    uint64_t sent;  /* requests sent */
    uint64_t done;  /* responses checked */
    uint64_t owed;  /* -R: requests due, held back by the cap */
    uint64_t *ring; /* when each request in flight was sent: request k at k & ring_mask */
    uint64_t connect_start;
    uint32_t next_owing;  /* -R: the list of clients with requests due this turn */
    uint32_t next_reopen; /* the list of clients to reopen (reopen_all) */
    uint8_t reopen;       /* REOPEN_CLOSING, then REOPEN_CONNECTING, else 0: --http1.0, or an
                             answer that said Connection: close */
    bool owing;
    bool connected;
    bool finished;
    bool timed_out;
    struct response_reader reader;
};

struct worker {
    unsigned index;
    uint64_t first; /* global index of its first connection */
    uint64_t count;
    struct client *clients;
    uint64_t *rings;
    uint64_t ring_mask;
    sxe_loop_t *loop;
    uint64_t settled; /* connections connected or failed */
    uint64_t ended;   /* connections finished or closed */
    uint64_t opened;
    uint64_t start_ns;  /* the barrier */
    uint64_t window_ns; /* the measured window's start: the barrier, or --warmup after it */
    bool counting;      /* the window has started: answers are counted */
    uint64_t cpu_start; /* the worker's CPU time when the window started */
    uint64_t last_settled_ns;
    uint64_t last_response_ns;
    bool stop_sending; /* duration or count over */
    char *burst;       /* one target: config.pipeline copies of the request */
    char *scratch;     /* -U: the requests of one write */
    uint64_t turn;     /* -U: the next target in turn */
    uint64_t random;   /* -U --random: xorshift state */
    /* -R: the schedule */
    double period_ns;     /* between two requests of this worker */
    uint64_t scheduled;   /* requests come due so far */
    uint64_t next_due;    /* when the next one comes due */
    uint64_t next_tick;   /* sending wakes no sooner than this */
    uint32_t owing_head;  /* clients with requests due this turn */
    uint32_t reopen_head; /* --http1.0: clients whose next request needs a new connection */
    /* --timeline, --latency-log: the second being counted */
    bool intervals;
    uint64_t interval_index;
    uint64_t interval_queries;
    uint64_t interval_errors;
    struct histogram interval;
    struct histogram_cell *cells;
    int up;
    struct progress *progress;
    struct results results;
    sxe_ws_client_t *ws_set; /* in WebSocket mode */
};

extern struct worker worker;

extern const struct sxe_conn_handlers client_handlers;
extern const struct sxe_ws_handlers client_ws_handlers;

/* worker.c */
void __attribute__((noreturn)) worker_exit(int status);
uint64_t cpu_now(void);
uint64_t due_at(const struct client *client, uint64_t k);
void send_queries(struct client *client, unsigned count);
void send_owed(struct client *client);
void stop_sending(void);

/* client.c */
void finish(struct client *client);
void close_done(struct client *client);
void check_timeouts(sxe_timer_t *timer, void *arg);
void open_more(void);
void reopen_all(void);

#endif
