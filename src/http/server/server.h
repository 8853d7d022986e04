/*
 * The HTTP server module's own structures, shared by server.c (connections, parsing, routing) and
 * response.c (answers). Only the public API is used below this: no core internals.
 */
#ifndef SXE_HTTP_SERVER_INTERNAL_H
#define SXE_HTTP_SERVER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sxe/conn.h"
#include "sxe/fiber.h"
#include "sxe/http.h"
#include "sxe/timer.h"
#include "sxe/workers.h"

#define ROUTES_MAX 64
/* Body bytes a connection's ordinary buffer holds with its head; larger bodies, up to
 * limits.body_bytes, grow in one of the loop's large buffers (options.large_bodies of them). */
#define INLINE_BODY_MAX    (48 * 1024)
#define LARGE_BODIES       16
#define LARGE_BUFFER_LIMIT (1u << 30)

struct route {
    char method[16]; /* empty: any */
    char path[256];
    size_t path_len;
    bool prefix;
    bool fiber;  /* the handler runs on a fiber of its own (SXE_HTTP_ROUTE_FIBER) */
    bool stream; /* the handler runs at the head; the body comes in pieces (upload.c) */
    sxe_http_handler_t handler;
    void *arg;
};

struct slot;
struct h2;        /* an HTTP/2 connection's session (h2.c) */
struct h2_stream; /* one of its streams: a request and its response (h2_send.c) */

/* sxe_http.owed of a response without a Content-Length (chunked, or ended by the close). */
#define SXE__HTTP_NO_LENGTH UINT64_MAX

/* A request being answered: its slot's handle (request.c), or a refusal's on the stack. */
struct sxe_http {
    sxe_http_server_t *server;
    sxe_conn_t *conn;
    const struct sxe_http_request_head *request;
    const char *body;
    size_t body_len;
    int status;      /* 0 until a response starts */
    bool head_only;  /* HEAD: no body goes out */
    bool chunked;    /* the response is chunked */
    bool keep_alive; /* the connection carries on after this response */
    bool finished;
    bool stream;        /* from a streamed route (SXE_HTTP_ROUTE_STREAM) */
    bool logged;        /* the log hook has seen it (sxe__http_log) */
    bool body_unread;   /* a streamed body has not all been read: the response closes */
    int failed;         /* a write of the response failed (-errno): the rest of it is dropped */
    uint64_t sent;      /* bytes of the response queued */
    uint64_t body_sent; /* of them, the body's (sxe_http_body_sent) */
    uint64_t owed; /* body bytes its Content-Length still promises; SXE__HTTP_NO_LENGTH if none */
    void *user;    /* the program's, per request */
    const struct route *route; /* its route's, while its fiber runs (fiber.c) */
    const char *path;          /* normalized (route_path): in the target, or the server's scratch
                                  (a held one's own copy); NULL: refused before routing */
    size_t path_len;
    uint16_t prefix_len;  /* bytes of the path its route matched (sxe_http_path_rest) */
    uint64_t serial;      /* which request in its slot this is */
    bool held;            /* deferred (sxe_http_defer): answered after its handler returns */
    uint64_t began;       /* the loop's clock when it was dispatched, or refused (sxe_http_began) */
    struct h2_stream *h2; /* the HTTP/2 stream it came on (its answer goes there), or NULL */
};

/* RUNNING: its handler runs; HELD: deferred and answerable; CANCELLING: its on_cancel runs;
 * ORPHANED: cancelled without one, and kept until the holder's next call, so no other request
 * reuses the slot under it. */
enum slot_state { SLOT_FREE, SLOT_RUNNING, SLOT_HELD, SLOT_CANCELLING, SLOT_ORPHANED };

/*
 * A request from its dispatch to its finish, in a slot of a table sized at start-up
 * (request.c): its parse, its handle, and what a request answered later needs. A request its
 * handler has not finished when it returns is held (deferred) in its slot. Its handle's conn is
 * valid while it is held: the connection's on_close cancels it before the connection goes.
 */
struct slot {
    struct sxe_http http; /* the handle: first, so a handle is its slot */
    struct sxe_http_request_head request;
    sxe_http_cancel_t on_cancel;
    void *arg;
    sxe_http_drained_t on_drained;
    void *drained_arg;
    sxe_timer_t deadline;
    uint32_t next_free;
    /* The requests live on one connection, oldest first (request.c): slot + 1, or 0. */
    uint32_t conn_prev;
    uint32_t conn_next;
    enum slot_state state;
    /* A streamed body (upload.c): its head's bytes lead the connection's kept input. */
    uint32_t head_len;
    bool streaming;      /* the body is still arriving */
    bool body_paused;    /* sxe_http_body_pause() */
    bool feeding;        /* pieces are being handed out */
    bool rate_restart;   /* the body's rate is judged afresh from its next bytes (upload.c) */
    uint64_t rate_since; /* when the window the body's rate is judged over began */
    uint64_t rate_bytes; /* the body's bytes since then */
    sxe_http_body_t on_body;
    void *body_arg;
    char *path;          /* its normalized path, when that is not its target's own bytes */
    sxe_fiber_t *reader; /* a fiber waiting in sxe_http_body_read() */
    char *read_buf;
    size_t read_room;
    ssize_t read_got; /* what a read handed within its own call got (HTTP/2's kept DATA) */
};

/* What the server keeps per connection. */
struct http_conn {
    union {
        struct sxe_http_parser parser;
        struct h2 *h2; /* HTTP/2 (switch_to is sxe__h2_events): the session, which parses */
    };
    uint32_t head_len;    /* of the request whose body is being read, or 0 */
    uint32_t body_offset; /* bytes after the head that the body parser has seen */
    /* Its live requests, those that outlived their handler, oldest first (request.c): slot + 1,
     * or 0. Over HTTP/1.1 there is at most one: the requests pipelined behind it wait, in order,
     * in the connection's input, and are parsed once it is finished. */
    uint32_t first;
    uint32_t last;
    uint32_t skip; /* bytes of an answered held request, consumed at the next read */
    /* One bit each, so that the struct stays 96 bytes (a connection's whole share). */
    bool continued : 1; /* 100 Continue was sent for this request */
    bool closing : 1;   /* answered "Connection: close": discard input until the peer goes */
    bool linger : 1;    /* closing, but the peer may still be sending: never close at once */
    bool peer_done : 1; /* the peer shut down its side: close once our answers are sent */
    bool nodelay : 1;   /* TCP_NODELAY is set */
    bool paused : 1;    /* output backed up: reading waits for on_drained */
    bool full : 1;      /* a write left the output backed up, until it drains */
    bool waiting : 1;   /* paused while a request is held: more came in behind it */
    bool framed : 1;    /* HTTP/2: h2 is its session (h2.c), and switch_to sxe__h2_events */
    bool h1 : 1;        /* its first bytes were not HTTP/2's: HTTP/1.1 for good */
    /* Answered 101 (upgrade.c): the handlers the connection goes to once the request's bytes are
     * consumed; until then its events are theirs. */
    const struct sxe_conn_handlers *switch_to;
    uint64_t id; /* the connection's sxe_conn_id() while open, for destroy; else 0 */
};

_Static_assert(sizeof(struct http_conn) <= 96, "a connection's HTTP state grew");

/*
 * What a server is told (its options, routes and limits): set up before it runs, read-only after,
 * and copied whole to each worker's copy of the server.
 */
struct http_config {
    struct route routes[ROUTES_MAX];
    unsigned route_count;
    unsigned listen_flags;
    sxe_tls_t *tls;                 /* options.tls: sxe_http_server_listen()'s */
    struct sxe_http2_options http2; /* options.http2, its defaults filled in */
    unsigned listener_count; /* sxe_http_server_listen() calls: each worker listens on each */
    struct sxe_http_limits limits;
    struct sxe_http_limits head_limits;   /* heads, with stream routes: the larger body limit */
    struct sxe_http_limits stream_limits; /* streamed bodies: body_bytes is stream_body_bytes */
    uint64_t stream_body_bytes;           /* options.stream_body_bytes, or no limit */
    uint32_t body_rate;                   /* options.body_rate: a streamed body's least */
    uint32_t held_max;                    /* options.deferred */
    uint64_t response_timeout;
    bool has_fiber_routes;
    bool has_stream_routes;
    struct sxe_fibers_options fiber_options;
    sxe_http_log_t on_log; /* options.on_log */
    void *log_arg;
    void (*on_hangup)(void *arg); /* options.on_hangup, for sxe_http_server_run() without workers */
    void (*on_reopen)(void *arg); /* options.on_reopen, the same way (SIGUSR1) */
    void *hangup_arg;
    void (*on_loop_start)(sxe_loop_t *loop, void *arg); /* options.on_loop_start, stop and arg */
    void (*on_loop_stop)(void *arg);
    void *loop_arg;
};

/*
 * A server: its configuration, and the state of the loop it runs on (connections, request slots,
 * fibers, scratch areas, counters). With workers, the server made by create is a template that
 * never runs a loop, and each worker runs a copy with the template's configuration and a state
 * of its own.
 */
struct sxe_http_server {
    struct sxe_conn_handlers handlers; /* every connection's: how one finds its server */
    struct http_config config;
    sxe_loop_t *loop; /* NULL for a server with workers: each worker's copy has its own */
    bool own_loop;
    sxe_workers_t *workers; /* with options.workers > 1: the set, on the server made by create */
    sxe_worker_t *worker;   /* on a worker's copy: the worker it runs on */
    sxe_http_server_t **copies; /* on the template, while it runs: each worker's copy */
    uint64_t requests;          /* without workers: responses finished, and their bytes */
    uint64_t bytes;
    struct slot *slots;     /* every request's, from its dispatch to its finish (request.c) */
    uint32_t slot_capacity; /* config.held_max held, and one whose handler runs */
    uint32_t slot_free;
    uint32_t slot_untouched; /* slots from here on were never used: free, their pages untouched */
    struct slot *running;    /* the slot whose handler runs now, or NULL */
    uint64_t serial;         /* requests given a slot */
    struct sxe_http_defer_stats defer_stats;
    sxe_fibers_t *fibers; /* for fiber routes: made with the first, or each worker's copy */
    struct http_conn *conns;
    uint32_t conn_count;
    sxe_conn_t *listener;
    bool going; /* its loop is stopping or draining: every answer closes its connection */
    struct h2_stream *h2_answering; /* the HTTP/2 stream whose request is dispatched, or NULL */
    size_t h2_memory;               /* held by its HTTP/2 connections (h2_send.c) */
    char *scratch;                  /* chunked bodies are decoded here */
    char *path_scratch; /* a path being normalized, config.limits.request_line + 1 bytes */
    uint64_t date_second;
    char date[64];
    size_t date_len;
};

/* The server a connection belongs to: its handlers are the server's own copy. */
static inline sxe_http_server_t *sxe__http_server_of(const sxe_conn_t *conn)
{
    return (sxe_http_server_t *)(void *)((char *)(uintptr_t)sxe_conn_handlers(conn) -
                                         offsetof(struct sxe_http_server, handlers));
}

/* The server's state for a connection. */
static inline struct http_conn *sxe__http_state(sxe_http_server_t *server, sxe_conn_t *conn)
{
    return &server->conns[sxe_conn_index(conn)];
}

/* response.c */
void sxe__http_set_nodelay(struct http_conn *state, sxe_conn_t *conn);
void sxe__http_close_after_response(sxe_http_server_t *server, sxe_conn_t *conn, bool linger);

/* server.c: what every connection of the server is given. */
extern const struct sxe_conn_handlers sxe__http_handlers;

/* response.c: hands the request to the log hook, if there is one and it has not seen it. */
static inline void sxe__http_log(sxe_http_t *http)
{
    if (http->server->config.on_log != NULL && !http->logged) {
        http->logged = true;
        http->server->config.on_log(http, http->server->config.log_arg);
    }
}

/* Whether http is a held (deferred) request's handle. */
static inline bool sxe__http_is_held(const sxe_http_t *http)
{
    return http->held;
}

/* The slot of a handle that has one (not a refusal's). */
static inline struct slot *sxe__http_slot(sxe_http_t *http)
{
    return (struct slot *)(void *)http; /* the handle is its slot's first member */
}

/* Whether a handle is a slot's: a handler's request, held or not (not a refusal's). */
static inline bool sxe__http_in_slot(const sxe_http_t *http)
{
    const struct sxe_http_server *server = http->server;
    return server->slots != NULL && (const void *)http >= (const void *)server->slots &&
           (const void *)http < (const void *)(server->slots + server->slot_capacity);
}

/*
 * The server's files call one way (tests/build/check-layers.py): serve.c -> server.c <-> h2.c ->
 * fiber.c, upgrade.c, upload.c <-> defer.c -> response.c -> h2_send.c, request.c. Each section
 * below is one file's.
 */

/* request.c: the slots, at the bottom. */
int sxe__http_slots_init(sxe_http_server_t *server);
/* The free slot the next request is parsed into; there is always one (options.deferred + 1). */
struct slot *sxe__http_slot_next(sxe_http_server_t *server);
/* Takes the next slot for its request, whose handler runs now (SLOT_RUNNING). */
void sxe__http_slot_take(sxe_http_server_t *server, struct slot *slot);
/* Frees a slot whose request is finished, or was never held. */
void sxe__http_slot_release(sxe_http_server_t *server, struct slot *slot);
/* The oldest request live on a connection, or NULL. */
static inline struct slot *sxe__http_first(sxe_http_server_t *server, const struct http_conn *state)
{
    return state->first != 0 ? &server->slots[state->first - 1] : NULL;
}
/* Adds a held request at the end of its connection's live ones. */
void sxe__http_enlist(sxe_http_server_t *server, struct http_conn *state, struct slot *slot);
/* Takes a request off its connection's live ones, wherever it is among them. */
void sxe__http_delist(sxe_http_server_t *server, struct http_conn *state, struct slot *slot);
/* A response call on a held request that was cancelled: frees it. -ECANCELED, or 0 if live. */
int sxe__http_held_check(sxe_http_t *http);
/* How many body bytes a streamed body's reader takes now (0: none, it waits or paused). */
size_t sxe__http_body_wanted(const struct slot *held);
/* Hands a piece of a streamed body to its callback, or copies it to its fiber and runs it. */
void sxe__http_body_hand(struct slot *held, const char *data, size_t len, bool done);
/* Whether a streamed body comes too slowly (under options.body_rate), counting bytes more. */
bool sxe__http_body_too_slow(sxe_http_server_t *server, struct slot *held, size_t bytes);

/* The same for any request: one test of a flag for a request that was never held. */
static inline int sxe__http_defer_check(sxe_http_t *http)
{
    return http->held ? sxe__http_held_check(http) : 0;
}
/* A held request's response has started: its deadline no longer applies. */
void sxe__http_defer_started(sxe_http_t *http);
/* A held request's response is finished: the connection reads its next request. */
void sxe__http_defer_done(sxe_http_t *http);
/* The connection's output drained: each held request's on_drained, if it set one, in order. */
void sxe__http_defer_drained(sxe_http_server_t *server, sxe_conn_t *conn);
/* Decodes a complete chunked body (head bytes at data, then body_len) into out; its length. */
size_t sxe__http_decode_chunked(sxe_http_server_t *server, const char *data, int head,
                                size_t body_len, char *out);

/* response.c: besides the public calls. */
/* A response of bytes was finished (the worker's counters, or the server's own). */
void sxe__http_count(sxe_http_server_t *server, uint64_t bytes);
/* Answers a request the server refuses itself (request NULL: not parsed), closing where the RFC
 * wants it closed. extra_headers (CRLF-ended lines, or NULL) are at most HTTP_REFUSE_EXTRA bytes:
 * an Allow list of every route's method (server.c) is the longest. */
#define HTTP_REFUSE_EXTRA 256
void sxe__http_refuse(sxe_http_server_t *server, sxe_conn_t *conn, int status,
                      const struct sxe_http_request_head *request, const char *extra_headers);
/* Sends 100 Continue for a request that asked, once, before its body is read. */
void sxe__http_send_continue(struct http_conn *state, sxe_conn_t *conn,
                             const struct sxe_http_request_head *request);

/* defer.c: requests held to answer later. */
/* After a handler that held its request: keeps the connection's input (data, len; the request's
 * bytes from at: head and body_len more) and points the held request at it. false: cancelled. */
bool sxe__http_defer_keep(sxe_http_server_t *server, sxe_conn_t *conn, const char *data, size_t len,
                          const char *at, size_t head, size_t body_len);
/* The connection closed: its held requests, if any, are cancelled, oldest first. */
void sxe__http_defer_cancel(sxe_http_server_t *server, sxe_conn_t *conn);
/* The handler that held its request closed its connection: the request is cancelled. */
void sxe__http_defer_drop(sxe_http_server_t *server, struct slot *slot);

/* upload.c: streamed bodies. */
/* Whether the connection's held request is still reading a streamed body. */
bool sxe__http_upload_active(sxe_http_server_t *server, const struct http_conn *state);
/* on_read for a connection whose held request reads a streamed body. */
size_t sxe__http_upload_feed(sxe_http_server_t *server, sxe_conn_t *conn, char *data, size_t len);
/* A streamed request was kept (len bytes at kept, its head first): hands out the body's pieces. */
void sxe__http_upload_kept(sxe_http_server_t *server, sxe_conn_t *conn, struct slot *held,
                           char *kept, size_t len);
/* A held request is cancelled: a fiber reading its body hears -ECANCELED. */
void sxe__http_upload_cancel(struct slot *held);

/* fiber.c: runs a fiber route's handler on a fiber; false if it could not start (answered). */
bool sxe__http_run_fiber(sxe_http_server_t *server, sxe_http_t *http, const struct route *route);
int sxe__http_fibers_make(sxe_http_server_t *server);

/* upgrade.c: hands a connection answered 101, its request consumed, to the new protocol's
 * handlers. */
void sxe__http_switch(sxe_http_server_t *server, sxe_conn_t *conn);

/*
 * HTTP/2 (h2 by ALPN over TLS, h2c with prior knowledge), with libnghttp2 doing the framing, HPACK
 * and flow control:
 * h2.c reads (a session per connection, a stream per request, each dispatched in a slot as over
 * HTTP/1.1), h2_send.c writes (a handler's answer becomes HEADERS and DATA). Without libnghttp2
 * (h2_none.c) sxe__h2_begin() declines, and the preface is refused for its version (505).
 */
/* The connection preface's first line, a request head the parser reads as PRI with HTTP/2.0. */
#define SXE__H2_PREFACE     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define SXE__H2_PREFACE_LEN 24
/* h2.c: what a connection's events go to once it speaks HTTP/2 (state->switch_to). */
extern const struct sxe_conn_handlers sxe__h2_events;
/* h2.c: the connection's first bytes are the HTTP/2 preface: its session begins. false if this
 * build has no HTTP/2, or the session could not be made (then refused as HTTP/1.1 would). */
bool sxe__h2_begin(sxe_http_server_t *server, sxe_conn_t *conn);
/* h2.c: a TLS context the server listens with names h2 in ALPN (none: nothing). */
void sxe__h2_offer(sxe_tls_t *tls);
/* h2.c: the loop is stopping: each HTTP/2 connection gets GOAWAY, and closes once its streams end
 * (none: nothing). */
void sxe__h2_going_away(sxe_http_server_t *server);
/* h2.c: on_read for an HTTP/2 connection. */
size_t sxe__h2_read(sxe_http_server_t *server, sxe_conn_t *conn, const char *data, size_t len);
/* server.c: runs the handler of the request in slot (routing it as over HTTP/1.1), or answers it
 * itself; HELD when its handler holds it. streamed: at its head, its body unread. */
enum sxe__dispatched { SXE__ANSWERED, SXE__HELD, SXE__CLOSED };
enum sxe__dispatched sxe__http_dispatch(sxe_http_server_t *server, sxe_conn_t *conn,
                                        struct slot *slot, const char *body, size_t body_len,
                                        bool streamed);
/* server.c: whether the route request goes to streams its body (SXE_HTTP_ROUTE_STREAM). */
bool sxe__http_streams(sxe_http_server_t *server, const struct sxe_http_request_head *request);
/* defer.c: a held request whose stream ended before its answer did is cancelled. */
void sxe__http_defer_cancel_one(sxe_http_server_t *server, sxe_conn_t *conn, struct slot *held);
/* h2_send.c: the answer on a stream (response.c's calls, when http->h2 is set); date is the
 * Date field's value, date_len bytes. */
int sxe__h2_start(sxe_http_t *http, int status, const char *content_type, const char *date,
                  size_t date_len, const char *headers, int64_t content_length);
int sxe__h2_data(sxe_http_t *http, const void *data, size_t len, bool copy,
                 sxe_conn_release_t release, void *arg);
int sxe__h2_file(sxe_http_t *http, int fd, off_t offset, size_t len, bool close_when_sent,
                 sxe_conn_release_t release, void *arg);
void sxe__h2_end(sxe_http_t *http);
/* h2_send.c: a held request's stream is reset (its answer is cut off: the deadline passed). */
void sxe__h2_reset(struct h2_stream *stream);
/* h2_send.c: whether a stream's answer has SXE__H2_STREAM_HIGH_WATER bytes or more waiting on it
 * (sxe_http_backed_up()); it tells its holder's on_drained once they are out. */
bool sxe__h2_backed_up(const struct h2_stream *stream);
/* h2_body.c: a streamed body's reader takes more: its stream's DATA kept so far goes to it. */
void sxe__h2_body_offer(struct slot *held);

#endif
