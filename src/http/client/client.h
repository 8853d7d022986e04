/*
 * The HTTP client's internals, shared by client.c (the pool, the calls, their queue and timers),
 * client_read.c (reading responses), client_write.c (streamed request bodies) and client_fiber.c
 * (sxe_http_fetch()).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "sxe/conn.h"
#include "sxe/http_client.h"
#include "sxe/http_parser.h"
#include "sxe/timer.h"

enum sxe__up_state { SXE__UP_FREE, SXE__UP_CONNECTING, SXE__UP_IDLE, SXE__UP_BUSY };

/*
 * A connection to the upstream. Its calls, oldest first, are the ones whose requests it carried and
 * whose responses it still owes: more than one only with options.pipeline. The first is the one
 * being answered.
 */
struct sxe__upstream {
    sxe_http_client_t *client;
    sxe_conn_t *conn;
    struct sxe_http_call *first, *last;
    uint32_t calls;
    struct sxe_http_parser parser;
    enum sxe__up_state state;
    bool reused;       /* it has carried a whole response */
    bool got_bytes;    /* of the first call's response */
    bool in_body;      /* the first call's head has been read */
    bool until_close;  /* ... and its body runs to the close */
    bool keep_alive;   /* ... and the connection may carry the next request */
    bool gets_only;    /* every call on it is a plain GET: more may be pipelined behind them */
    bool corked;       /* gathering this turn's requests, sent when the turn ends */
    bool flush_listed; /* on the client's list of connections to uncork */
    char *store;       /* the first call's gathered response: head, then body */
    size_t store_len, store_size;
    uint32_t head_len;
    uint32_t next_idle;
    uint32_t next_flush;
};

enum sxe__call_kind { SXE__CALL_FETCH, SXE__CALL_STREAM };

struct sxe_http_call {
    sxe_http_client_t *client;
    struct sxe_http_client_request request;
    enum sxe__call_kind kind;
    sxe_http_client_done_t done;
    const struct sxe_http_client_handlers *handlers;
    void *arg;
    struct sxe__upstream *up;          /* carrying it, or NULL */
    struct sxe_http_call *up_next;     /* the next call on its connection */
    struct sxe_http_call *prev, *next; /* in the queue, or the free list (next) */
    sxe_timer_t timer;
    struct sxe__upstream *store_of; /* during done: the connection whose store holds the response */
    bool in_use, queued, head_request, idempotent, retried, paused;
    bool plain_get; /* a GET without a body or an upgrade: it may be pipelined */
    bool discard;   /* cancelled behind another: its answer is read and dropped, unheard */
    /* A streamed request body (client_write.c): */
    bool body_open;     /* not ended yet */
    bool head_unsent;   /* the head waits for the body's first bytes, to leave with them */
    bool writable;      /* the caller was told it may write: the call cannot be sent again */
    bool writable_due;  /* its timer runs at 0 ns, to tell the caller from the loop */
    bool wait_drain;    /* a write said "full": on_writable when the connection drains */
    bool in_write;      /* inside sxe_http_call_write(): a drain there only clears wait_drain */
    uint64_t body_left; /* bytes of a body with a length still to write */
};

struct sxe_http_client {
    sxe_loop_t *loop;
    struct sockaddr_storage address;
    socklen_t address_len;
    char host[80];
    struct sxe_http_client_options options;
    struct sxe_http_limits stream_limits; /* no body limit: bodies pass through */
    struct sxe__upstream *ups;
    struct sxe_http_call *calls;
    struct sxe_http_call *free_calls;
    struct sxe_http_call *queue_head, *queue_tail;
    uint32_t idle; /* top of the idle stack, or UINT32_MAX */
    uint32_t calls_count;
    uint32_t calls_untouched; /* calls from here on were never used: free, their pages untouched */
    struct sxe__upstream *batch; /* this turn's pipelined requests join it, while it has room */
    uint32_t flush_head;         /* connections corked this turn, or UINT32_MAX */
    sxe_timer_t flush;           /* a timer of 0 ns: it runs when the turn's events are done */
    struct sxe_http_client_stats stats;
};

/* client.c, for client_read.c */
/* The call ends with an error: it is off its connection already, or was never on one. */
void sxe__http_call_fail(struct sxe_http_call *call, int err);
/* Takes the first call off its connection. */
void sxe__http_up_pop(struct sxe__upstream *up);
/* The connection is free of calls after a whole response: to the pool, or closed. */
void sxe__http_up_release(struct sxe__upstream *up, bool paused);
/* The upstream answered 101 to the first call, which asked to upgrade: the connection leaves the
 * pool for the call's on_upgrade, and the call ends. */
void sxe__http_up_switched(struct sxe__upstream *up, struct sxe_http_call *call,
                           const struct sxe_http_response *response);
/* A protocol failure: the first call fails, the connection closes (never reused). */
void sxe__http_up_fail(struct sxe__upstream *up, struct sxe_http_call *call, int err);
/* The upstream was heard from: the call's silence counts again from now. */
void sxe__http_call_rearm(struct sxe_http_call *call);
void sxe__http_call_free(struct sxe_http_call *call);

/* Writes the call's request head (and a whole body) on its connection. @return 0 or -errno. */
int sxe__http_send_request(struct sxe__upstream *up, const struct sxe_http_call *call);

/* client_write.c, for client.c */
/* The call's connection is there: the caller is told from the loop that it may write. */
void sxe__http_body_begin(struct sxe_http_call *call);
/* The call's timer ran at 0 ns: the caller hears on_writable. */
void sxe__http_call_writable(struct sxe_http_call *call);
/* The connection's queued output was all sent. */
void sxe__http_client_on_drained(sxe_conn_t *conn);

/* client_read.c, for client.c */
size_t sxe__http_client_on_read(sxe_conn_t *conn, const char *data, size_t len);
/* The call's response is whole (it is off its connection): its caller hears, its slot is freed. */
void sxe__http_call_deliver(struct sxe__upstream *up, struct sxe_http_call *call);

/* From a gathered call's done callback: the memory holding its head and body, now the caller's
 * (free() it). */
char *sxe__http_call_take_store(sxe_http_call_t *call);
