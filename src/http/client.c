/*
 * The HTTP client (sxe/http_client.h): a pool of keep-alive connections to one upstream, calls
 * queued for them in a table of fixed size, responses read with the strict response parser.
 *
 * A connection ("upstream") is free, connecting, idle (in the pool, on a stack so the warmest is
 * reused first) or busy with one call. A call is queued (a FIFO list), or on a connection, from
 * its request's first byte to its response's last. Every call runs its own timer, restarted by each
 * read of its response, so a silent upstream fails it with -ETIMEDOUT wherever it waits.
 *
 * A gathered (fetch) response is copied into its connection's store as it arrives: the head, then
 * the body without its framing. When it is whole the connection goes back to the pool at once, and
 * the done callback is given the head parsed again from the copy, which a fiber's reply may keep.
 * Streamed responses pass through without a copy: the head is parsed in the connection's buffer,
 * the body handed on piece by piece.
 */
#define SXE_LOG_MODULE client_log
#include "sxe/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/http_client.h"
#include "sxe/timer.h"
#include "http/address.h"
#include "http/client.h"

static struct sxe_log_module client_log = SXE_LOG_MODULE_INIT(HTTP_CLIENT);

#define STORE_KEPT (64 * 1024) /* a larger store is freed after use, not kept for the next */

enum up_state { UP_FREE, UP_CONNECTING, UP_IDLE, UP_BUSY };

struct upstream {
    sxe_http_client_t *client;
    sxe_conn_t *conn;
    struct sxe_http_call *call;
    struct sxe_http_parser parser;
    enum up_state state;
    bool reused;      /* it has carried a whole response */
    bool got_bytes;   /* of the current call's response */
    bool in_body;     /* the current response's head has been read */
    bool until_close; /* ... and its body runs to the close */
    bool keep_alive;  /* ... and the connection may carry the next request */
    char *store;      /* a gathered response: head, then body */
    size_t store_len, store_size;
    uint32_t head_len;
    uint32_t next_idle;
};

enum call_kind { CALL_FETCH, CALL_STREAM };

struct sxe_http_call {
    sxe_http_client_t *client;
    struct sxe_http_client_request request;
    enum call_kind kind;
    sxe_http_client_done_t done;
    const struct sxe_http_client_handlers *handlers;
    void *arg;
    struct upstream *up;               /* carrying it, or NULL */
    struct sxe_http_call *prev, *next; /* in the queue, or the free list (next) */
    sxe_timer_t timer;
    struct upstream *store_of; /* during done: the connection whose store holds the response */
    bool in_use, queued, head_request, idempotent, retried, paused;
};

struct sxe_http_client {
    sxe_loop_t *loop;
    struct sockaddr_storage address;
    socklen_t address_len;
    char host[80];
    struct sxe_http_client_options options;
    struct sxe_http_limits stream_limits; /* no body limit: bodies pass through */
    struct upstream *ups;
    struct sxe_http_call *calls;
    struct sxe_http_call *free_calls;
    struct sxe_http_call *queue_head, *queue_tail;
    uint32_t idle; /* top of the idle stack, or UINT32_MAX */
    uint32_t calls_count;
    uint32_t calls_untouched; /* calls from here on were never used: free, their pages untouched */
    struct sxe_http_client_stats stats;
};

static const char *const idempotent_methods[] = {"GET",    "HEAD",    "PUT",
                                                 "DELETE", "OPTIONS", "TRACE"};

static size_t on_read(sxe_conn_t *conn, const char *data, size_t len);
static void on_connect(sxe_conn_t *conn);
static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err);
static void on_timer(sxe_timer_t *timer, void *arg);
static void up_fail(struct upstream *up, struct sxe_http_call *call, int err);

static const struct sxe_conn_handlers up_handlers = {
    .on_connect = on_connect, .on_read = on_read, .on_close = on_close};

int sxe_http_client_create(sxe_http_client_t **client_out, sxe_loop_t *loop, const char *address,
                           const struct sxe_http_client_options *options)
{
    struct sxe_http_client_options defaults = {0};
    sxe_http_client_t *client;

    *client_out = NULL;
    if (!SXE_CHECK(loop != NULL && address != NULL)) {
        return -EINVAL;
    }
    if ((client = calloc(1, sizeof(*client))) == NULL) {
        return -ENOMEM;
    }
    client->options = options != NULL ? *options : defaults;
    struct sxe_http_client_options *o = &client->options;
    o->connections = o->connections ? o->connections : 64;
    o->queue = o->queue ? o->queue : 256;
    o->timeout = o->timeout ? o->timeout : 30 * SXE_NS_PER_SEC;
    struct sxe_http_limits *limits = &o->limits;
    limits->request_line = limits->request_line ? limits->request_line : 8192;
    limits->header_bytes = limits->header_bytes ? limits->header_bytes : 16384;
    limits->header_count = limits->header_count ? limits->header_count : 100;
    limits->body_bytes = limits->body_bytes ? limits->body_bytes : 1 << 20;
    client->stream_limits = *limits;
    client->stream_limits.body_bytes = UINT64_MAX;
    client->loop = loop;
    client->calls_count = o->connections + o->queue;
    snprintf(client->host, sizeof(client->host), "%s", o->host != NULL ? o->host : address);
    o->host = client->host;
    client->ups = calloc(o->connections, sizeof(*client->ups));
    client->calls = calloc(client->calls_count, sizeof(*client->calls));
    if (sxe__http_parse_address(address, &client->address, &client->address_len) < 0 ||
        client->ups == NULL || client->calls == NULL) {
        int rc = client->ups == NULL || client->calls == NULL ? -ENOMEM : -EINVAL;
        sxe_http_client_destroy(client);
        return rc;
    }
    client->idle = UINT32_MAX;
    for (uint32_t i = 0; i < o->connections; i++) {
        client->ups[i].client = client;
    }
    *client_out = client;
    return 0;
}

static void queue_remove(sxe_http_client_t *client, struct sxe_http_call *call)
{
    *(call->prev != NULL ? &call->prev->next : &client->queue_head) = call->next;
    *(call->next != NULL ? &call->next->prev : &client->queue_tail) = call->prev;
    call->prev = call->next = NULL;
    call->queued = false;
    client->stats.queued--;
}

/* The call is over: its slot goes back to the free list. */
static void call_free(struct sxe_http_call *call)
{
    sxe_http_client_t *client = call->client;

    sxe_timer_stop(client->loop, &call->timer);
    call->in_use = false;
    call->next = client->free_calls;
    client->free_calls = call;
}

/* Ends a call with an error: it is off its connection already, or was never on one. */
static void call_fail(struct sxe_http_call *call, int err)
{
    SXE_LOG_DEBUG("request %s %s to %s failed: %s", call->request.method, call->request.target,
                  call->client->host, sxe_strerror(err));
    call->client->stats.failed++;
    if (call->queued) {
        queue_remove(call->client, call);
    }
    call->up = NULL;
    if (call->kind == CALL_FETCH) {
        call->done(call, err, NULL, NULL, 0, call->arg);
    } else if (call->handlers->on_done != NULL) {
        call->handlers->on_done(call, err, call->arg);
    }
    call_free(call);
}

void sxe_http_client_destroy(sxe_http_client_t *client)
{
    if (client == NULL) {
        return;
    }
    for (uint32_t i = 0; client->calls != NULL && i < client->calls_untouched; i++) {
        struct sxe_http_call *call = &client->calls[i];
        if (call->in_use) {
            if (call->up != NULL) {
                call->up->call = NULL;
            }
            call_fail(call, -ECANCELED);
        }
    }
    for (uint32_t i = 0; client->ups != NULL && i < client->options.connections; i++) {
        if (client->ups[i].conn != NULL) {
            sxe_conn_close(client->ups[i].conn);
        }
        free(client->ups[i].store);
    }
    free(client->calls);
    free(client->ups);
    free(client);
}

/* Writes the call's request on its connection, corked into one send. */
static int send_request(struct upstream *up)
{
    const struct sxe_http_client_request *request = &up->call->request;
    sxe_conn_t *conn = up->conn;
    const char *host = request->host != NULL ? request->host : up->client->host;
    char line[1024];
    bool length = request->body_len > 0 || strcmp(request->method, "POST") == 0 ||
                  strcmp(request->method, "PUT") == 0 || strcmp(request->method, "PATCH") == 0;
    int rc = 0;

    bool corked = sxe_conn_cork(conn);
    int n = snprintf(line, sizeof(line), "%s %s HTTP/1.1\r\nHost: %s\r\n", request->method,
                     request->target, host);
    if ((size_t)n < sizeof(line)) {
        rc = sxe_conn_write(conn, line, (size_t)n);
    } else { /* a long target or host: in pieces */
        rc = sxe_conn_write(conn, request->method, strlen(request->method));
        rc = rc < 0 ? rc : sxe_conn_write(conn, " ", 1);
        rc = rc < 0 ? rc : sxe_conn_write(conn, request->target, strlen(request->target));
        rc = rc < 0 ? rc : sxe_conn_write(conn, " HTTP/1.1\r\nHost: ", 17);
        rc = rc < 0 ? rc : sxe_conn_write(conn, host, strlen(host));
        rc = rc < 0 ? rc : sxe_conn_write(conn, "\r\n", 2);
    }
    if (length && rc >= 0) {
        n = snprintf(line, sizeof(line), "Content-Length: %zu\r\n", request->body_len);
        rc = sxe_conn_write(conn, line, (size_t)n);
    }
    if (request->headers != NULL && rc >= 0) {
        rc = sxe_conn_write(conn, request->headers, strlen(request->headers));
    }
    rc = rc < 0 ? rc : sxe_conn_write(conn, "\r\n", 2);
    if (request->body_len > 0 && rc >= 0) {
        rc = sxe_conn_write(conn, request->body, request->body_len);
    }
    if (corked) {
        sxe_conn_uncork(conn);
    }
    return rc < 0 ? rc : 0;
}

/* Puts a call on a connection that is connected and free of calls, and sends its request. */
static int send_on(struct upstream *up, struct sxe_http_call *call)
{
    sxe_http_client_t *client = up->client;

    up->call = call;
    call->up = up;
    if (up->state != UP_BUSY) {
        up->state = UP_BUSY;
        client->stats.busy++;
    }
    up->got_bytes = up->in_body = false;
    sxe_http_parser_init(&up->parser);
    client->stats.reused += up->reused;
    return send_request(up);
}

/* Opens a new connection for call in a free slot. @return 0 or -errno. */
static int open_for(sxe_http_client_t *client, struct sxe_http_call *call)
{
    struct upstream *up = client->ups;
    int rc;

    while (up->state != UP_FREE) { /* the caller knows one is free */
        up++;
    }
    rc = sxe_connect(client->loop, &up->conn, (const struct sockaddr *)&client->address,
                     client->address_len, NULL, 0, &up_handlers, up);
    if (rc < 0) {
        up->conn = NULL;
        return rc;
    }
    up->state = UP_CONNECTING;
    up->reused = false;
    up->call = call;
    call->up = up;
    client->stats.open++;
    client->stats.connects++;
    return 0;
}

static void queue_add(sxe_http_client_t *client, struct sxe_http_call *call, bool front)
{
    if (front) {
        call->next = client->queue_head;
        *(client->queue_head != NULL ? &client->queue_head->prev : &client->queue_tail) = call;
        client->queue_head = call;
    } else {
        call->prev = client->queue_tail;
        *(client->queue_tail != NULL ? &client->queue_tail->next : &client->queue_head) = call;
        client->queue_tail = call;
    }
    call->queued = true;
    client->stats.queued++;
}

/* Gives waiting calls the connections that are idle, or may be opened. */
static void dispatch(sxe_http_client_t *client)
{
    int rc;

    while (client->queue_head != NULL) {
        struct sxe_http_call *call = client->queue_head;
        if (client->idle != UINT32_MAX) {
            struct upstream *up = &client->ups[client->idle];
            client->idle = up->next_idle;
            queue_remove(client, call);
            if ((rc = send_on(up, call)) < 0) {
                up_fail(up, call, rc);
            }
        } else if (client->stats.open < client->options.connections) {
            queue_remove(client, call);
            if ((rc = open_for(client, call)) < 0) {
                call_fail(call, rc);
            }
        } else {
            return;
        }
    }
}

static bool bad_text(const char *text)
{
    return text == NULL || *text == '\0' || strpbrk(text, "\r\n ") != NULL;
}

/*
 * Starts a call: on an idle connection, or a new one, or in the queue. Nothing of it is reported
 * through its callbacks from here: a failure now is the return value.
 */
static int submit(sxe_http_client_t *client, const struct sxe_http_client_request *request,
                  enum call_kind kind, const void *callback, void *arg, sxe_http_call_t **out)
{
    const char *method = request->method != NULL ? request->method : "GET";
    int rc = 0;

    if (client->free_calls == NULL && client->calls_untouched < client->calls_count) {
        struct sxe_http_call *fresh = &client->calls[client->calls_untouched++];
        fresh->client = client;
        sxe_timer_init(&fresh->timer, on_timer, fresh);
        client->free_calls = fresh;
    }
    struct sxe_http_call *call = client->free_calls;

    if (!SXE_CHECK(!bad_text(method) && !bad_text(request->target) &&
                   (request->host == NULL || strpbrk(request->host, "\r\n") == NULL) &&
                   (request->body != NULL || request->body_len == 0) && callback != NULL)) {
        return -EINVAL;
    }
    bool must_queue =
        client->idle == UINT32_MAX && client->stats.open == client->options.connections;
    if (call == NULL || (must_queue && client->stats.queued == client->options.queue)) {
        client->stats.refused++;
        return -ENOBUFS;
    }
    if ((rc = sxe_timer_start(client->loop, &call->timer, client->options.timeout, 0)) < 0) {
        return rc;
    }
    client->free_calls = call->next;
    call->request = *request;
    call->request.method = method;
    call->kind = kind;
    call->done = kind == CALL_FETCH ? *(const sxe_http_client_done_t *)callback : NULL;
    call->handlers = kind == CALL_STREAM ? callback : NULL;
    call->arg = arg;
    call->up = NULL;
    call->prev = call->next = NULL;
    call->in_use = true;
    call->queued = call->retried = call->paused = call->idempotent = false;
    call->head_request = strcmp(method, "HEAD") == 0;
    for (size_t i = 0; i < sizeof(idempotent_methods) / sizeof(idempotent_methods[0]); i++) {
        call->idempotent |= strcmp(method, idempotent_methods[i]) == 0;
    }
    if (client->idle != UINT32_MAX) {
        struct upstream *up = &client->ups[client->idle];
        client->idle = up->next_idle;
        if ((rc = send_on(up, call)) < 0) {
            up->call = NULL;
            sxe_conn_close(up->conn);
        }
    } else if (!must_queue) {
        rc = open_for(client, call);
    } else {
        queue_add(client, call, false);
    }
    if (rc < 0) {
        call->up = NULL;
        call_free(call);
        return rc;
    }
    if (out != NULL) {
        *out = call;
    }
    return 0;
}

int sxe_http_client_fetch(sxe_http_client_t *client, const struct sxe_http_client_request *request,
                          sxe_http_client_done_t done, void *arg, sxe_http_call_t **call)
{
    return submit(client, request, CALL_FETCH, done != NULL ? &done : NULL, arg, call);
}

int sxe_http_client_stream(sxe_http_client_t *client, const struct sxe_http_client_request *request,
                           const struct sxe_http_client_handlers *handlers, void *arg,
                           sxe_http_call_t **call)
{
    return submit(client, request, CALL_STREAM, handlers, arg, call);
}

/* Why a connection's close ends the call on it. */
static int close_error(enum sxe_close_reason reason, int err)
{
    switch (reason) {
    case SXE_CLOSE_ERROR:
        return err != 0 ? -err : -ECONNRESET;
    case SXE_CLOSE_TIMEOUT:
        return -ETIMEDOUT;
    case SXE_CLOSE_OVERFLOW:
        return -EMSGSIZE; /* a head larger than the loop's buffer_size */
    case SXE_CLOSE_NO_BUFFER:
        return -ENOBUFS;
    case SXE_CLOSE_SHUTDOWN:
        return -ECANCELED;
    default:
        return -ECONNRESET;
    }
}

/* The connection is back from a whole response: to the pool, or closed if it cannot carry more. */
static void up_release(struct upstream *up, bool paused)
{
    sxe_http_client_t *client = up->client;

    client->stats.busy--;
    up->call = NULL;
    up->reused = true;
    up->state = UP_IDLE;
    if (!up->keep_alive) {
        sxe_conn_close(up->conn); /* on_close frees the slot */
        return;
    }
    if (paused) {
        (void)sxe_conn_resume(up->conn);
    }
    up->next_idle = client->idle;
    client->idle = (uint32_t)(up - client->ups);
    dispatch(client);
}

/*
 * The call's response is whole: its connection goes back to the pool first (a callback that asks
 * again may reuse it), then the caller hears.
 */
static void call_complete(struct upstream *up, struct sxe_http_call *call, bool on_conn)
{
    sxe_http_client_t *client = up->client;

    client->stats.requests++;
    call->up = NULL;
    sxe_timer_stop(client->loop, &call->timer);
    if (call->kind == CALL_STREAM) {
        if (on_conn) {
            up_release(up, call->paused);
        }
        if (call->handlers->on_done != NULL) {
            call->handlers->on_done(call, 0, call->arg);
        }
        call_free(call);
        return;
    }
    struct sxe_http_parser parser;
    struct sxe_http_response response;
    uint32_t head_len = up->head_len;
    size_t body_len = up->store_len - head_len;

    /*
     * The store stays the connection's: a callback that asks again may reuse the connection, but
     * nothing is read into its store before the callback returns. A fiber's reply takes it.
     */
    if (on_conn) {
        up_release(up, call->paused);
    }
    sxe_http_parser_init(&parser);
    (void)sxe_http_parse_response_head(&parser, up->store, head_len, &client->stream_limits,
                                       call->head_request, &response);
    call->store_of = up;
    call->done(call, 0, &response, up->store + head_len, body_len, call->arg);
    if (up->store_size > STORE_KEPT) { /* a large one is not kept for the next */
        free(up->store);
        up->store = NULL;
        up->store_size = 0;
    }
    call_free(call);
}

/* Appends to the connection's store for a gathered response. @return 0, or -EMSGSIZE. */
static int store(struct upstream *up, const char *data, size_t len)
{
    size_t most = up->head_len + up->client->options.limits.body_bytes;

    if (up->store_len + len > most) {
        return -EMSGSIZE;
    }
    if (up->store_len + len > up->store_size) {
        size_t size = up->store_size ? up->store_size : 4096;
        while (size < up->store_len + len) {
            size *= 2;
        }
        size = size < most ? size : most;
        char *grown = realloc(up->store, size);
        if (grown == NULL) {
            return -ENOMEM;
        }
        up->store = grown;
        up->store_size = size;
    }
    memcpy(up->store + up->store_len, data, len);
    up->store_len += len;
    return 0;
}

/* A protocol failure: the call fails, the connection closes (never reused). */
static void up_fail(struct upstream *up, struct sxe_http_call *call, int err)
{
    if (err == -EPROTO) {
        SXE_LOG_WARN("a malformed response from %s to %s %s; closing the connection",
                     up->client->host, call->request.method, call->request.target);
    }
    up->call = NULL;
    sxe_conn_close(up->conn);
    call_fail(call, err);
}

/* A response head was read: say so, or start gathering. @return false if the call ended. */
static bool head_read(struct upstream *up, struct sxe_http_call *call, const char *head,
                      size_t head_len, const struct sxe_http_response *response)
{
    int rc;

    up->in_body = true;
    up->until_close = response->until_close;
    up->keep_alive = response->keep_alive;
    if (call->kind == CALL_FETCH) {
        up->store_len = 0;
        up->head_len = (uint32_t)head_len;
        if ((rc = store(up, head, head_len)) < 0) {
            up_fail(up, call, rc);
            return false;
        }
        return true;
    }
    if (call->handlers->on_head != NULL) {
        call->handlers->on_head(call, response, call->arg);
    }
    return up->call == call;
}

/* Body bytes: gathered, or handed on. @return false if the call ended. */
static bool body_read(struct upstream *up, struct sxe_http_call *call, const char *data, size_t len)
{
    int rc;

    if (len == 0) {
        return true;
    }
    if (call->kind == CALL_FETCH) {
        if ((rc = store(up, data, len)) < 0) {
            up_fail(up, call, rc);
            return false;
        }
        return true;
    }
    if (call->handlers->on_body != NULL) {
        call->handlers->on_body(call, data, len, call->arg);
    }
    return up->call == call;
}

/*
 * Reads the response of the connection's call: interim 1xx heads skipped, the head, the body in
 * pieces. @return as on_read: what was read; *whole is set when the response ended, and the call
 * is still the connection's unless it ended (then the return is len and nothing more is done).
 */
static size_t read_response(struct upstream *up, struct sxe_http_call *call, const char *data,
                            size_t len, bool *whole)
{
    sxe_http_client_t *client = up->client;
    size_t at = 0;
    long rc;

    while (at < len && !call->paused) {
        if (!up->in_body) {
            struct sxe_http_response response;
            rc =
                sxe_http_parse_response_head(&up->parser, data + at, len - at,
                                             &client->stream_limits, call->head_request, &response);
            if (rc == 0) {
                return at;
            }
            if (rc < 0 || response.status == 101) { /* no request of ours asks to switch */
                up_fail(up, call, rc < 0 ? (int)rc : -EPROTO);
                return len;
            }
            at += (size_t)rc;
            if (response.status < 200) {
                continue;
            }
            if (!head_read(up, call, data + at - (size_t)rc, (size_t)rc, &response)) {
                return len;
            }
            if (!response.has_body) {
                *whole = true;
                return at;
            }
        } else if (up->until_close) {
            size_t from = at;
            at = len;
            if (!body_read(up, call, data + from, len - from)) {
                return len;
            }
        } else {
            struct sxe_http_body body;
            if ((rc = sxe_http_parse_body(&up->parser, data + at, len - at, &client->stream_limits,
                                          &body)) < 0) {
                up_fail(up, call, -EPROTO);
                return len;
            }
            at += (size_t)rc;
            if (!body_read(up, call, body.data, body.len)) {
                return len;
            }
            if (body.done) {
                *whole = true;
                return at;
            }
        }
    }
    return at;
}

/* The upstream was heard from: the call's silence counts again from now. */
static void rearm(struct sxe_http_call *call)
{
    /* The timer runs from submit() to the call's end, so restarting it cannot fail. */
    int rc = sxe_timer_start(call->client->loop, &call->timer, call->client->options.timeout, 0);
    SXE_ASSERT(rc == 0);
    (void)rc;
}

static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    struct upstream *up = sxe_conn_user(conn);
    struct sxe_http_call *call = up->call;
    sxe_http_client_t *client = up->client;
    bool whole = false;

    if (call == NULL) {
        SXE_LOG_WARN("%zu bytes from %s that no request asked for; closing the connection", len,
                     client->host);
        sxe_conn_close(conn);
        return len;
    }
    up->got_bytes = true;
    rearm(call);
    size_t at = read_response(up, call, data, len, &whole);
    if (!whole || up->call != call) {
        return at;
    }
    if (at < len) { /* a whole response, then bytes nobody asked for */
        SXE_LOG_WARN("%zu bytes from %s after a whole response; closing the connection", len - at,
                     client->host);
        up->keep_alive = false;
    }
    call_complete(up, call, true);
    return len;
}

static void on_connect(sxe_conn_t *conn)
{
    struct upstream *up = sxe_conn_user(conn);
    struct sxe_http_call *call = up->call;
    int rc;

    up->client->stats.busy++;
    up->state = UP_BUSY;
    if (call == NULL) { /* its call ended while it connected: into the pool */
        up->keep_alive = true;
        up_release(up, false);
    } else if ((rc = send_on(up, call)) < 0) {
        up_fail(up, call, rc);
    }
}

/* Takes the connection out of the idle stack. */
static void idle_remove(sxe_http_client_t *client, struct upstream *up)
{
    uint32_t index = (uint32_t)(up - client->ups);

    for (uint32_t *link = &client->idle; *link != UINT32_MAX;
         link = &client->ups[*link].next_idle) {
        if (*link == index) {
            *link = up->next_idle;
            return;
        }
    }
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    struct upstream *up = sxe_conn_user(conn);
    sxe_http_client_t *client = up->client;
    struct sxe_http_call *call = up->call;

    if (up->state == UP_IDLE) {
        idle_remove(client, up);
    } else if (up->state == UP_BUSY) {
        client->stats.busy--;
    }
    client->stats.open--;
    up->conn = NULL;
    up->call = NULL;
    up->state = UP_FREE;
    if (call != NULL) {
        call->up = NULL;
        if (up->in_body && up->until_close && reason == SXE_CLOSE_PEER) {
            call_complete(up, call, false); /* the close ends the body */
        } else if (!up->got_bytes && up->reused && call->idempotent && !call->retried &&
                   !client->options.no_retry && reason != SXE_CLOSE_TIMEOUT) {
            SXE_LOG_DEBUG("the pooled connection to %s closed under %s %s; sending it again",
                          client->host, call->request.method, call->request.target);
            call->retried = true;
            client->stats.retried++;
            queue_add(client, call, true);
        } else {
            call_fail(call, close_error(reason, err));
        }
    }
    dispatch(client);
}

static void on_timer(sxe_timer_t *timer, void *arg)
{
    struct sxe_http_call *call = arg;
    struct upstream *up = call->up;

    (void)timer;
    if (call->paused &&
        sxe_timer_start(call->client->loop, &call->timer, call->client->options.timeout, 0) == 0) {
        return; /* its reader holds it back, not the upstream */
    }
    if (up != NULL && up->state == UP_CONNECTING) {
        up->call = NULL; /* the connection may still serve the next call */
    } else if (up != NULL) {
        up->call = NULL;
        sxe_conn_close(up->conn);
    }
    call_fail(call, -ETIMEDOUT);
}

void sxe_http_call_pause(sxe_http_call_t *call)
{
    if (!call->paused) {
        call->paused = true;
        if (call->up != NULL && call->up->state == UP_BUSY) {
            (void)sxe_conn_pause(call->up->conn);
        }
    }
}

void sxe_http_call_resume(sxe_http_call_t *call)
{
    if (call->paused) {
        call->paused = false;
        rearm(call);
        if (call->up != NULL && call->up->state == UP_BUSY) {
            (void)sxe_conn_resume(call->up->conn);
        }
    }
}

void sxe_http_call_cancel(sxe_http_call_t *call)
{
    struct upstream *up = call->up;

    if (call->queued) {
        queue_remove(call->client, call);
    }
    if (up != NULL) {
        up->call = NULL;
        if (up->state != UP_CONNECTING) {
            sxe_conn_close(up->conn);
        }
    }
    call->up = NULL;
    call_free(call);
}

char *sxe__http_call_take_store(sxe_http_call_t *call)
{
    struct upstream *up = call->store_of;
    char *store = up->store;

    up->store = NULL;
    up->store_len = up->store_size = 0;
    return store;
}

void sxe_http_client_stats(const sxe_http_client_t *client, struct sxe_http_client_stats *stats)
{
    *stats = client->stats;
}
