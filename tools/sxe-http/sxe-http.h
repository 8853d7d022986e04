/*
 * sxe-http's parts: its options (options.c), the worker processes that make the load (worker.c),
 * the report (report.c), and the parent that forks the workers, holds them at the barrier and
 * gathers what they send (main.c).
 */
#ifndef SXE_HTTP_TOOL_H
#define SXE_HTTP_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "histogram.h"

#define PIPELINE_MAX         128
#define SOURCES_MAX          64
#define WORKERS_MAX          64
#define SLOW_CONNECT_NS      1000000000ULL
#define SLOW_LISTED_MAX      256 /* slow connects a worker lists for -v */
#define FDS_RESERVED         32  /* per process: stdio, epoll, pipes, reserve fd */
#define PORTS_PER_SOURCE     28000
#define RATE_CAP             16 /* with -R, the most requests outstanding per connection by default */
#define STATUS_LOW           100
#define STATUS_SPAN          500  /* statuses 100 to 599 */
#define REQUEST_BY_REFERENCE 4096 /* a larger burst of requests is sent without copying it */

enum error_kind {
    ERR_CONNECT,
    ERR_READ,
    ERR_WRITE,
    ERR_TIMEOUT,
    ERR_STATUS,
    ERR_LENGTH,
    ERR_CAP,  /* with -R: a request came due while its connection had the cap outstanding */
    ERR_BODY, /* a body of another length than --body-length, or --body's bytes (a sample) */
    ERR_KINDS
};
extern const char *const error_names[ERR_KINDS];
extern const char *const error_keys[ERR_KINDS];

struct config {
    struct sockaddr_storage target;
    socklen_t target_len;
    char target_text[64];
    char host_header[300]; /* the requests' Host: target_text, or a URL's authority */
    struct sockaddr_storage sources[SOURCES_MAX];
    socklen_t source_len;
    unsigned source_count;
    uint64_t queries; /* per connection (0 in duration mode) */
    uint64_t connections;
    unsigned pipeline; /* closed loop: the depth; with -R: the cap on outstanding requests */
    unsigned workers;
    uint64_t duration_ns; /* 0: count mode */
    uint64_t warmup_ns;   /* --warmup: load before the measured window, not counted */
    bool marks;           /* --warmup given: the window's start and end are told on stderr */
    uint64_t timeout_ns;
    unsigned ramp_batch;
    int expect_status;
    int64_t expect_length; /* --body-length, or --body's size: each body's; -1 for any */
    bool expect_hash_set;  /* --body: a sample of the bodies is hashed and compared */
    uint64_t expect_hash;  /* --body's bytes' FNV-1a */
    bool verbose;
    bool json;
    bool graceful_close;
    bool head;
    bool http10;             /* --http1.0: requests say HTTP/1.0, a new connection for each */
    sxe_tls_t *tls;          /* --tls: every connection speaks TLS (no certificate checked) */
    bool timeline;           /* --timeline: each second's rate, errors and p99 in the JSON */
    bool random;             /* --random: -U targets drawn at random, not in turn */
    double rate;             /* -R: requests per second over all connections; 0: closed loop */
    uint64_t tick_ns;        /* -R: what comes due within a tick is sent at once */
    const char *latency_log; /* --latency-log FILE */
    /* The requests: one, or one per -U target, back to back; target i is bytes
     * [offsets[i], offsets[i + 1]) of requests, drawn with weight weight_ends[i] -
     * weight_ends[i-1]. */
    char *requests;
    size_t *offsets;
    uint64_t *weight_ends;
    uint64_t targets;
    size_t request_max;  /* the longest request */
    const char *ws_path; /* WebSocket mode: each connection a WebSocket to it (NULL: HTTP) */
    size_t ws_size;      /* each query a binary message of so many bytes, echoed */
};
extern struct config config;

/* A connect that took longer than a second: which connection, and how long. */
struct slow_connect {
    uint64_t connection;
    uint64_t ns;
};

/* What a worker reports: once after connecting, once at the end. */
struct results {
    uint64_t connected;
    uint64_t reopened; /* connections opened after the first: one per request (--http1.0), or
                        * after an answer that said Connection: close */
    uint64_t slow_connects;
    uint64_t connect_ns; /* from the first connect to the last one settled */
    uint64_t sent;       /* requests sent */
    uint64_t queries;    /* responses received and checked */
    uint64_t not_sent;   /* queries never sent: their connection ended first */
    uint64_t query_ns;   /* from the barrier to the last response */
    uint64_t cpu_ns;     /* the CPU time the worker took from the window's start to its end */
    uint64_t errors[ERR_KINDS];
    uint64_t statuses[STATUS_SPAN]; /* the unexpected statuses that came, by code */
    int first_connect_errno;
    uint32_t slow_listed;
    struct slow_connect slow[SLOW_LISTED_MAX];
    struct histogram latency; /* from each request's intended send time (-R), or its send */
    struct histogram service; /* from each request's actual send (with -R, uncorrected) */
};

/* Live counters a worker shares with the parent, for the progress line. */
struct progress {
    uint64_t queries;
    uint64_t open;
};

/*
 * What a worker sends the parent up its pipe: a head, then len bytes: the results after
 * connecting (MESSAGE_CONNECTED) and at the end (MESSAGE_DONE), and with --timeline or
 * --latency-log one interval a second between them.
 */
enum message_kind { MESSAGE_CONNECTED = 1, MESSAGE_INTERVAL, MESSAGE_DONE };

struct message_head {
    uint32_t kind;
    uint32_t len;
};

/* One second of a worker's run (the last may be shorter), followed by cells[cell_count]. */
struct interval {
    uint64_t index; /* seconds since the barrier */
    uint64_t ns;    /* its length */
    uint64_t queries;
    uint64_t errors;
    uint64_t max; /* the largest latency */
    uint64_t cell_count;
};

/* One second of the whole run, as --timeline reports it. */
struct timeline_entry {
    double seconds; /* its length: 1, but the last may be shorter */
    double queries_per_s;
    uint64_t errors;
    uint64_t p99_ns;
};

void parse_options(int argc, char **argv);

/* Runs a worker in a child process: connects its share, reports, waits for the go, runs. */
void __attribute__((noreturn)) run_worker(unsigned index, uint64_t first, uint64_t count, int up,
                                          int down, struct progress *progress);

void write_all(int fd, const void *data, size_t len);
bool read_all(int fd, void *data, size_t len);

void results_add(struct results *total, const struct results *part);
uint64_t results_errors(const struct results *results);
void report(const struct results *total, uint64_t run_ns, const struct timeline_entry *timeline,
            size_t seconds);

/* url.c: a target given as a URL. */
struct url {
    char authority[256]; /* HOST[:PORT] as the URL has it: the requests' Host */
    char host[256];      /* without brackets or port */
    int port;            /* the URL's, or the scheme's (80, 443) */
    char path[8192];     /* from its first '/', query included; "/" when it has none */
    bool tls;            /* https */
    const char *error;   /* why the URL is not taken, or NULL */
};
void parse_url(const char *url, struct url *out);
bool has_control(const char *text); /* a byte <= ' ' or DEL: no place in a request line */
int resolve_url(const struct url *url, struct sockaddr_storage *target, socklen_t *len,
                const char **why);

#endif
