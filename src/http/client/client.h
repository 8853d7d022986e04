/*
 * The HTTP client's internals, shared by its files, which call one another one way only:
 *
 *   client.c        the entry points, the pool and its connections' handlers (connect, read,
 *                   drain, close), the calls' timers
 *   client_read.c   reading a response and handing it to its caller
 *   client_write.c  writing a request: its head, and a body streamed in pieces
 *   client_call.c   a call's controls (pause, resume, cancel) and its failure
 *   client_fiber.c  sxe_http_client_fetch_wait(), over the entry points
 *
 * The small steps every level takes (a call's slot freed, its timer restarted, the queue, the
 * first call off its connection) are inline below.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "sxe/conn.h"
#include "sxe/http_client.h"
#include "sxe/http_parser.h"
#include "sxe/log.h"
#include "sxe/resolve.h"
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
    uint8_t refused; /* a named upstream's addresses that refused it: the next is tried */
    bool plain_get;  /* a GET without a body or an upgrade: it may be pipelined */
    bool discard;    /* cancelled behind another: its answer is read and dropped, unheard */
    /* A streamed request body (client_write.c): */
    bool body_open;     /* not ended yet */
    bool head_unsent;   /* the head waits for the body's first bytes, to leave with them */
    bool writable;      /* the caller was told it may write: the call cannot be sent again */
    bool writable_due;  /* its timer runs at 0 ns, to tell the caller from the loop */
    bool wait_drain;    /* a write left it backed up: on_writable when the connection drains */
    bool in_write;      /* inside sxe_http_call_write(): a drain there only clears wait_drain */
    uint64_t body_left; /* bytes of a body with a length still to write */
};

struct sxe_http_client {
    sxe_loop_t *loop;
    struct sockaddr_storage address; /* the upstream's, or (named) the one connected to last */
    socklen_t address_len;
    /* A named upstream (client_name.c): its name, port and resolver, the question out for it,
     * and which of its addresses the next connection goes to. */
    char *name;
    uint16_t port;
    bool own_resolver;
    sxe_tls_t *own_tls; /* for https:// without options.tls */
    uint32_t prefer;
    sxe_resolver_t *resolver;
    sxe_resolve_query_t *resolving;
    char host[SXE_RESOLVE_NAME_MAX + 8];        /* a name, or "[IPv6]", with ":65535" */
    char server_name[SXE_RESOLVE_NAME_MAX + 1]; /* host without its port or brackets: for TLS */
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

/* The call's slot is free again, its timer stopped. */
static inline void sxe__http_call_free(struct sxe_http_call *call)
{
    sxe_http_client_t *client = call->client;

    if (!call->in_use) {
        return; /* cancelled from its own last callback */
    }
    sxe_timer_stop(client->loop, &call->timer);
    call->in_use = false;
    call->next = client->free_calls;
    client->free_calls = call;
}

/* The upstream was heard from: the call's silence counts again from now. */
static inline void sxe__http_call_rearm(struct sxe_http_call *call)
{
    /* The timer runs from submit() to the call's end, so restarting it cannot fail. */
    int rc = sxe_timer_start(call->client->loop, &call->timer, call->client->options.timeout, 0);
    SXE_ASSERT(rc == 0);
    (void)rc;
}

static inline void sxe__http_queue_remove(sxe_http_client_t *client, struct sxe_http_call *call)
{
    *(call->prev != NULL ? &call->prev->next : &client->queue_head) = call->next;
    *(call->next != NULL ? &call->next->prev : &client->queue_tail) = call->prev;
    call->prev = call->next = NULL;
    call->queued = false;
    client->stats.queued--;
}

/* Queues the call after another queued call, or first when after is NULL. */
static inline void sxe__http_queue_insert(sxe_http_client_t *client, struct sxe_http_call *call,
                                          struct sxe_http_call *after)
{
    call->prev = after;
    call->next = after != NULL ? after->next : client->queue_head;
    *(call->next != NULL ? &call->next->prev : &client->queue_tail) = call;
    *(after != NULL ? &after->next : &client->queue_head) = call;
    call->queued = true;
    client->stats.queued++;
}

/* Takes the first call off its connection. */
static inline void sxe__http_up_pop(struct sxe__upstream *up)
{
    struct sxe_http_call *call = up->first;

    up->first = call->up_next;
    up->last = up->first != NULL ? up->last : NULL;
    up->calls--;
    call->up = NULL;
    call->up_next = NULL;
    up->got_bytes = up->in_body = false; /* of the next call's answer, which has not begun */
}

/* client_call.c */
/* The call ends with an error: it is off its connection already, or was never on one. */
void sxe__http_call_fail(struct sxe_http_call *call, int err);

/* Gives waiting calls the connections that are idle, or may be opened (client.c). */
void sxe__http_client_dispatch(sxe_http_client_t *client);

/*
 * client_name.c. Reads the upstream as create was given it: "IP:PORT", "NAME:PORT", or a URL
 * ("http[s]://HOST[:PORT][/]"), and sets the Host, the TLS name, and for a name its resolver, for
 * https:// without options.tls a TLS context of its own. @return 0, -EINVAL, -ENOMEM, or what
 * making a resolver or a TLS context says (-ENOTSUP without c-ares or OpenSSL).
 */
int sxe__http_client_upstream(sxe_http_client_t *client, const char *address);

/*
 * The address the next connection goes to, in client->address: at once for a numeric upstream,
 * or a name whose answer is known; -EAGAIN while its name is asked (the queue is dispatched when
 * the answer comes); else the name's failure, for the call.
 */
int sxe__http_client_address(sxe_http_client_t *client);

/* A connection to a named upstream was refused: whether the call should try its next address. */
bool sxe__http_client_try_next(sxe_http_client_t *client, struct sxe_http_call *call);

/* Frees what sxe__http_client_upstream() made. */
void sxe__http_client_upstream_free(sxe_http_client_t *client);
/* A protocol failure: the first call fails, the connection closes (never reused). */
void sxe__http_up_fail(struct sxe__upstream *up, struct sxe_http_call *call, int err);

/* client_write.c */
/* Writes the call's request head (and a whole body) on its connection. @return 0 or -errno. */
int sxe__http_send_request(struct sxe__upstream *up, const struct sxe_http_call *call);
/* The call's connection is there: the caller is told from the loop that it may write. */
void sxe__http_body_begin(struct sxe_http_call *call);
/* The call's timer ran at 0 ns: the caller hears on_writable. */
void sxe__http_call_writable(struct sxe_http_call *call);
/* The connection's queued output was all sent. */
void sxe__http_client_on_drained(sxe_conn_t *conn);

/* client_read.c */
/*
 * Reads the response of the connection's first call: interim 1xx heads skipped, the head, the body
 * in pieces. Each head is parsed into *head. @return as on_read: what was read; *whole is set when
 * the response ended, and the call is still the connection's first unless it ended (then the
 * return is len and nothing more is done); *switched when the upstream agreed to the call's
 * upgrade with the 101 in *head (then the return is the head's end, and nothing was done yet).
 */
size_t sxe__http_read_response(struct sxe__upstream *up, struct sxe_http_call *call,
                               const char *data, size_t len, struct sxe_http_response_head *head,
                               bool *whole, bool *switched);
/* The call's response is whole (it is off its connection): its caller hears, its slot is freed. */
void sxe__http_call_deliver(struct sxe__upstream *up, struct sxe_http_call *call);
/* From a gathered call's done callback: the memory holding its head and body, now the caller's
 * (free() it). */
char *sxe__http_call_take_store(sxe_http_call_t *call);
