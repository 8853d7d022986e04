/*
 * The HTTP client (sxe/http_client.h): a pool of keep-alive connections to one upstream, calls
 * queued for them in a table of fixed size, and the handlers of its connections. Responses are
 * read in client_read.c, requests written in client_write.c.
 *
 * A connection ("upstream") is free, connecting, idle (in the pool, on a stack so the warmest is
 * reused first) or busy with its calls. A call is queued (a FIFO list), or on a connection, from
 * its request's first byte to its response's last. Every call runs its own timer, restarted by each
 * read of its response, so a silent upstream fails it with -ETIMEDOUT wherever it waits.
 *
 * Pipelining (options.pipeline > 1): the first idempotent request of a turn that takes a connection
 * which has carried a whole response corks it, and the turn's next idempotent requests join it
 * until it holds options.pipeline; a timer of 0 ns, which runs once the turn's events are handled,
 * uncorks it, so the batch leaves in one send and its answers come back in few reads. The calls
 * behind the first were not started: when the connection ends under them they are queued again.
 */
#define SXE_LOG_MODULE client_log
#include "sxe/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/clock.h"
#include "client.h"

static struct sxe_log_module client_log = SXE_LOG_MODULE_INIT(HTTP_CLIENT);

#define PIPELINE_MOST 64 /* options.pipeline's bound */

static const char *const idempotent_methods[] = {"GET",    "HEAD",    "PUT",
                                                 "DELETE", "OPTIONS", "TRACE"};

static void on_connect(sxe_conn_t *conn);
static size_t on_read(sxe_conn_t *conn, const char *data, size_t len);
static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err);
static void on_timeout(sxe_conn_t *conn);
static void on_timer(sxe_timer_t *timer, void *arg);
static void on_flush(sxe_timer_t *timer, void *arg);

static const struct sxe_conn_handlers up_handlers = {.on_connect = on_connect,
                                                     .on_read = on_read,
                                                     .on_drained = sxe__http_client_on_drained,
                                                     .on_timeout = on_timeout,
                                                     .on_close = on_close};

int sxe_http_client_create(sxe_http_client_t **client_out, sxe_loop_t *loop, const char *address,
                           const struct sxe_http_client_options *options)
{
    struct sxe_http_client_options defaults = {0};
    sxe_http_client_t *client;

    *client_out = NULL;
    if (!SXE_CHECK(loop != NULL && address != NULL &&
                   (options == NULL || options->pipeline <= PIPELINE_MOST))) {
        return -EINVAL;
    }
    if ((client = calloc(1, sizeof(*client))) == NULL) {
        return -ENOMEM;
    }
    sxe_timer_init(&client->flush, on_flush, client);
    client->options = options != NULL ? *options : defaults;
    struct sxe_http_client_options *o = &client->options;
    o->connections = o->connections ? o->connections : 64;
    o->queue = o->queue ? o->queue : 256;
    o->timeout = o->timeout ? o->timeout : 30 * SXE_NS_PER_SEC;
    o->pipeline = o->pipeline > 1 && !o->no_retry ? o->pipeline : 1;
    struct sxe_http_limits *limits = &o->limits;
    limits->request_line = limits->request_line ? limits->request_line : 8192;
    limits->header_bytes = limits->header_bytes ? limits->header_bytes : 16384;
    limits->header_count = limits->header_count ? limits->header_count : 100;
    limits->body_bytes = limits->body_bytes ? limits->body_bytes : 1 << 20;
    client->stream_limits = *limits;
    client->stream_limits.body_bytes = UINT64_MAX;
    client->loop = loop;
    client->calls_count = o->connections * o->pipeline + o->queue;
    client->ups = calloc(o->connections, sizeof(*client->ups));
    client->calls = calloc(client->calls_count, sizeof(*client->calls));
    int rc = client->ups == NULL || client->calls == NULL
                 ? -ENOMEM
                 : sxe__http_client_upstream(client, address);
    if (rc < 0) {
        sxe_http_client_destroy(client);
        return rc;
    }
    client->idle = client->flush_head = UINT32_MAX;
    for (uint32_t i = 0; i < o->connections; i++) {
        client->ups[i].client = client;
    }
    *client_out = client;
    return 0;
}

/* Puts the call last on the connection. */
static void up_push(struct sxe__upstream *up, struct sxe_http_call *call)
{
    call->up = up;
    call->up_next = NULL;
    *(up->last != NULL ? &up->last->up_next : &up->first) = call;
    up->last = call;
    up->gets_only = (up->calls == 0 || up->gets_only) && call->plain_get;
    up->calls++;
}

/* Takes any one call off its connection (the client is being destroyed). */
static void up_unlink(struct sxe__upstream *up, struct sxe_http_call *call)
{
    struct sxe_http_call **link = &up->first, *prev = NULL;

    while (*link != call) {
        prev = *link;
        link = &prev->up_next;
    }
    *link = call->up_next;
    up->last = up->last == call ? prev : up->last;
    up->calls--;
    call->up = NULL;
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
                up_unlink(call->up, call);
            }
            sxe__http_call_fail(call, -ECANCELED);
        }
    }
    for (uint32_t i = 0; client->ups != NULL && i < client->options.connections; i++) {
        if (client->ups[i].conn != NULL) {
            sxe_conn_close(client->ups[i].conn);
        }
        free(client->ups[i].store);
    }
    if (client->loop != NULL) {
        sxe_timer_stop(client->loop, &client->flush);
    }
    sxe__http_client_upstream_free(client);
    free(client->calls);
    free(client->ups);
    free(client);
}

/*
 * With pipelining, corks a connection that took a plain GET, so the turn's next ones
 * join it and all leave in one send when the turn ends.
 */
static void batch_start(struct sxe__upstream *up)
{
    sxe_http_client_t *client = up->client;

    if (client->options.pipeline == 1 || !up->reused || !up->gets_only ||
        (!sxe_timer_active(&client->flush) &&
         sxe_timer_start(client->loop, &client->flush, 0, 0) < 0) ||
        !sxe_conn_cork(up->conn)) {
        return;
    }
    up->corked = true;
    if (!up->flush_listed) {
        up->flush_listed = true;
        up->next_flush = client->flush_head;
        client->flush_head = (uint32_t)(up - client->ups);
    }
    client->batch = up;
}

/* The turn's events are handled: every batch leaves. */
static void on_flush(sxe_timer_t *timer, void *arg)
{
    sxe_http_client_t *client = arg;

    (void)timer;
    client->batch = NULL;
    while (client->flush_head != UINT32_MAX) {
        struct sxe__upstream *up = &client->ups[client->flush_head];
        client->flush_head = up->next_flush;
        up->flush_listed = false;
        if (up->corked) {
            up->corked = false;
            sxe_conn_uncork(up->conn);
        }
    }
}

/* Sends the request of the only call on a connected connection, which is busy from here. */
static int start_first(struct sxe__upstream *up)
{
    sxe_http_client_t *client = up->client;

    up->state = SXE__UP_BUSY;
    client->stats.busy++;
    up->got_bytes = up->in_body = false;
    sxe_http_parser_init(&up->parser);
    client->stats.reused += up->reused;
    if (up->first->body_open) { /* the head leaves with the body's first bytes */
        sxe__http_body_begin(up->first);
        return 0;
    }
    batch_start(up);
    return sxe__http_send_request(up, up->first);
}

/* Puts a call on an idle connection and sends its request. */
static int send_on(struct sxe__upstream *up, struct sxe_http_call *call)
{
    up_push(up, call);
    return start_first(up);
}

/* Whether the call may be sent behind this turn's batch. */
static bool may_join(const sxe_http_client_t *client, const struct sxe_http_call *call)
{
    const struct sxe__upstream *up = client->batch;

    return up != NULL && up->corked && up->gets_only && call->plain_get &&
           up->calls < client->options.pipeline;
}

/* Opens a new connection for call in a free slot. @return 0 or -errno. */
static int open_for(sxe_http_client_t *client, struct sxe_http_call *call)
{
    struct sxe__upstream *up = client->ups;
    int rc;

    while (up->state != SXE__UP_FREE) { /* the caller knows one is free */
        up++;
    }
    struct sxe_connect_options secure = {.tls = client->options.tls,
                                         .server_name = client->server_name};
    rc = sxe_conn_connect(client->loop, &up->conn, (const struct sockaddr *)&client->address,
                          client->address_len, client->options.tls != NULL ? &secure : NULL,
                          &up_handlers, up);
    if (rc < 0) {
        up->conn = NULL;
        return rc;
    }
    up->state = SXE__UP_CONNECTING;
    up->reused = false;
    up->first = up->last = NULL;
    up->calls = 0;
    up_push(up, call);
    client->stats.open++;
    client->stats.connects++;
    return 0;
}

/*
 * Opens a new connection for call to the address sxe__http_client_address() has just given, and
 * to the name's next when connecting to one fails at once. @return 0 or the last error.
 */
static int open_known(sxe_http_client_t *client, struct sxe_http_call *call)
{
    int rc;

    while ((rc = open_for(client, call)) < 0 && sxe__http_client_try_next(client, call) &&
           (rc = sxe__http_client_address(client)) == 0) {
    }
    return rc;
}

/* As open_known(), the address found first. @return 0, -EAGAIN while the name is being asked, or
 * the error (the name's, or the last address's). */
static int open_next(sxe_http_client_t *client, struct sxe_http_call *call)
{
    int rc = sxe__http_client_address(client);

    return rc == 0 ? open_known(client, call) : rc;
}

/* Gives waiting calls the connections that are idle, or may be opened. */
void sxe__http_client_dispatch(sxe_http_client_t *client)
{
    int rc;

    while (client->queue_head != NULL) {
        struct sxe_http_call *call = client->queue_head;
        if (client->idle != UINT32_MAX) {
            struct sxe__upstream *up = &client->ups[client->idle];
            client->idle = up->next_idle;
            sxe__http_queue_remove(client, call);
            if ((rc = send_on(up, call)) < 0) {
                sxe__http_up_fail(up, call, rc);
            }
        } else if (client->stats.open < client->options.connections) {
            if ((rc = sxe__http_client_address(client)) == -EAGAIN) {
                return; /* its name is being asked: this goes on when the answer comes */
            }
            sxe__http_queue_remove(client, call);
            if (rc < 0 || (rc = open_known(client, call)) < 0) {
                sxe__http_call_fail(call, rc);
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

/* A call slot for submit(), or NULL. */
static struct sxe_http_call *call_take(sxe_http_client_t *client)
{
    if (client->free_calls == NULL && client->calls_untouched < client->calls_count) {
        struct sxe_http_call *fresh = &client->calls[client->calls_untouched++];
        fresh->client = client;
        sxe_timer_init(&fresh->timer, on_timer, fresh);
        client->free_calls = fresh;
    }
    return client->free_calls;
}

/* Fills in a call taken for a request. */
static void call_init(struct sxe_http_call *call, const struct sxe_http_client_request *request,
                      enum sxe__call_kind kind, const void *callback, void *arg)
{
    call->client->free_calls = call->next;
    call->request = *request;
    call->request.method = request->method != NULL ? request->method : "GET";
    call->kind = kind;
    call->done = kind == SXE__CALL_FETCH ? *(const sxe_http_client_done_t *)callback : NULL;
    call->handlers = kind == SXE__CALL_STREAM ? callback : NULL;
    call->arg = arg;
    call->up = NULL;
    call->up_next = call->prev = call->next = NULL;
    call->in_use = true;
    call->queued = call->retried = call->paused = call->idempotent = call->discard = false;
    call->refused = 0;
    call->head_request = strcmp(call->request.method, "HEAD") == 0;
    for (size_t i = 0; i < sizeof(idempotent_methods) / sizeof(idempotent_methods[0]); i++) {
        call->idempotent |= strcmp(call->request.method, idempotent_methods[i]) == 0;
    }
    call->body_open = call->head_unsent = request->body_streamed;
    call->idempotent &= !request->body_streamed;  /* its body cannot be sent twice */
    call->idempotent &= request->upgrade == NULL; /* nothing may follow it on its connection */
    call->plain_get =
        call->idempotent && request->body_len == 0 && strcmp(call->request.method, "GET") == 0;
    call->writable = call->writable_due = call->wait_drain = call->in_write = false;
    call->body_left = request->body_len;
}

/*
 * Starts a call: behind this turn's batch, on an idle connection, on a new one, or in the queue.
 * Nothing of it is reported through its callbacks from here: a failure now is the return value.
 */
static int submit(sxe_http_client_t *client, const struct sxe_http_client_request *request,
                  enum sxe__call_kind kind, const void *callback, void *arg, sxe_http_call_t **out)
{
    const char *method = request->method != NULL ? request->method : "GET";
    struct sxe_http_call *call = call_take(client);
    int rc = 0;

    if (!SXE_CHECK(
            !bad_text(method) && !bad_text(request->target) &&
            (request->host == NULL || strpbrk(request->host, "\r\n") == NULL) &&
            (request->upgrade == NULL ||
             (request->upgrade[0] != '\0' && strpbrk(request->upgrade, "\r\n") == NULL &&
              kind == SXE__CALL_STREAM && !request->body_streamed && request->body_len == 0 &&
              ((const struct sxe_http_client_handlers *)callback)->on_upgrade != NULL)) &&
            (request->body_streamed
                 ? request->body == NULL && kind == SXE__CALL_STREAM &&
                       ((const struct sxe_http_client_handlers *)callback)->on_writable != NULL
                 : request->body != NULL || request->body_len == 0) &&
            callback != NULL)) {
        return -EINVAL;
    }
    bool must_queue =
        client->idle == UINT32_MAX && client->stats.open == client->options.connections;
    if (call == NULL) {
        client->stats.refused++;
        return -ENOBUFS;
    }
    if ((rc = sxe_timer_start(client->loop, &call->timer, client->options.timeout, 0)) < 0) {
        return rc;
    }
    call_init(call, request, kind, callback, arg);
    struct sxe__upstream *up = client->batch;
    if (may_join(client, call)) {
        up_push(up, call);
        client->stats.reused++;
        client->stats.pipelined++;
        client->batch = up->calls < client->options.pipeline ? up : NULL;
        if ((rc = sxe__http_send_request(up, call)) < 0) {
            up_unlink(up, call);
            sxe_conn_close(up->conn); /* the calls before it are sent again */
        }
    } else if (client->stats.queued == client->options.queue && must_queue) {
        rc = -ENOBUFS; /* nowhere to go, not even behind this turn's batch */
        client->stats.refused++;
    } else if (client->idle != UINT32_MAX) {
        up = &client->ups[client->idle];
        client->idle = up->next_idle;
        if ((rc = send_on(up, call)) < 0) {
            sxe__http_up_pop(up);
            sxe_conn_close(up->conn);
        }
    } else if (!must_queue && (rc = open_next(client, call)) != -EAGAIN) {
        /* on a new connection, or failed */
    } else {
        rc = 0; /* to wait for a connection, or for its name's answer */
        sxe__http_queue_insert(client, call, client->queue_tail);
    }
    if (rc < 0) {
        call->up = NULL;
        sxe__http_call_free(call);
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
    return submit(client, request, SXE__CALL_FETCH, done != NULL ? &done : NULL, arg, call);
}

int sxe_http_client_stream(sxe_http_client_t *client, const struct sxe_http_client_request *request,
                           const struct sxe_http_client_handlers *handlers, void *arg,
                           sxe_http_call_t **call)
{
    return submit(client, request, SXE__CALL_STREAM, handlers, arg, call);
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

/* The connection is free of calls after a whole response: to the pool, or closed. */
static void up_release(struct sxe__upstream *up, bool paused)
{
    sxe_http_client_t *client = up->client;

    client->stats.busy--;
    up->state = SXE__UP_IDLE;
    up->reused = true; /* from here, the upstream may close it while it waits in the pool */
    if (!up->keep_alive) {
        sxe_conn_close(up->conn); /* on_close frees the slot, and queues the calls behind */
        return;
    }
    if (paused) {
        (void)sxe_conn_resume(up->conn);
    }
    up->next_idle = client->idle;
    client->idle = (uint32_t)(up - client->ups);
    sxe__http_client_dispatch(client);
}

/*
 * The upstream answered 101 to the first call, which asked to upgrade: the connection leaves the
 * pool for the call's on_upgrade, and the call ends.
 */
static void up_switched(struct sxe__upstream *up, struct sxe_http_call *call,
                        const struct sxe_http_response_head *response)
{
    sxe_http_client_t *client = up->client;
    sxe_conn_t *conn = up->conn;

    /* The slot is free, as after a close; the connection lives on, the caller's. */
    sxe__http_up_pop(up);
    client->stats.busy--;
    client->stats.open--;
    client->stats.upgraded++;
    client->batch = client->batch == up ? NULL : client->batch;
    up->corked = false;
    up->conn = NULL;
    up->state = SXE__UP_FREE;
    sxe_conn_set_user(conn, NULL); /* on_close knows it is not the pool's */
    sxe_timer_stop(client->loop, &call->timer);
    call->handlers->on_upgrade(call, response, conn, call->arg);
    sxe__http_call_free(call);
    if (!sxe_conn_closed(conn) && sxe_conn_handlers(conn) == &up_handlers) {
        SXE_LOG_WARN("the connection to %s switched for %s %s was not taken; closing it",
                     client->host, call->request.method, call->request.target);
        sxe_conn_close(conn);
    }
    sxe__http_client_dispatch(client); /* its slot may take a queued call */
}

static void on_connect(sxe_conn_t *conn)
{
    struct sxe__upstream *up = sxe_conn_user(conn);
    struct sxe_http_call *call = up->first;
    int rc;

    if (call == NULL) { /* its call ended while it connected: into the pool */
        up->client->stats.busy++;
        up->state = SXE__UP_BUSY;
        up->keep_alive = true;
        up_release(up, false);
    } else if ((rc = start_first(up)) < 0) {
        sxe__http_up_fail(up, call, rc);
    }
}

/*
 * The first call's response is whole: the connection moves on first (to its next call, or to the
 * pool, where a callback that asks again may reuse it), then the caller hears.
 */
static void response_done(struct sxe__upstream *up, struct sxe_http_call *call)
{
    sxe__http_up_pop(up);
    struct sxe_http_call *next = up->first;
    if (next == NULL || !up->keep_alive) {
        /* Not kept alive: the calls behind were not answered; the close sends them again. */
        up_release(up, call->paused);
    } else { /* the pop said the next answer has not begun */
        sxe_http_parser_init(&up->parser);
        if (next->paused && !call->paused) {
            (void)sxe_conn_pause(up->conn);
        } else if (!next->paused && call->paused) {
            (void)sxe_conn_resume(up->conn);
        }
    }
    sxe__http_call_deliver(up, call);
}

/* The responses in this input, each to the call first on the connection, in order. */
static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    struct sxe__upstream *up = sxe_conn_user(conn);
    sxe_http_client_t *client = up->client;
    size_t at = 0;

    while (at < len) {
        struct sxe_http_call *call = up->first;
        struct sxe_http_response_head head;
        bool whole = false, switched = false;

        if (call == NULL || up->state != SXE__UP_BUSY) {
            SXE_LOG_WARN("%zu bytes from %s that no request asked for; closing the connection",
                         len - at, client->host);
            sxe_conn_close(conn);
            return len;
        }
        up->got_bytes = true;
        if (up->in_body) {
            /* Body bytes are progress. Until the final head has come whole, nothing is: interim
             * 1xx heads, or a head a byte at a time, cannot keep a call alive past its timeout. */
            sxe__http_call_rearm(call);
        }
        size_t used =
            sxe__http_read_response(up, call, data + at, len - at, &head, &whole, &switched);
        if (switched) {
            up_switched(up, call, &head);
            return at + used; /* the rest is offered to the new handlers */
        }
        if (up->first != call || up->conn != conn) {
            return len; /* the call ended (failed, or cancelled from a callback) */
        }
        at += used;
        if (!whole) {
            return at;
        }
        if (at < len && call->up_next == NULL) { /* a whole response, then bytes nobody asked for */
            SXE_LOG_WARN("%zu bytes from %s after a whole response; closing the connection",
                         len - at, client->host);
            up->keep_alive = false;
        }
        if (call->body_open) { /* answered before its body was all sent: the rest never goes */
            up->keep_alive = false;
        }
        bool keep = up->keep_alive;
        response_done(up, call);
        if (!keep || up->conn != conn) {
            return len; /* closed, by the response or by a callback */
        }
    }
    return at;
}

/* Takes the connection out of the idle stack. */
static void idle_remove(sxe_http_client_t *client, struct sxe__upstream *up)
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

/*
 * The calls behind the first on a connection that ended were not started: back to the front of
 * the queue, in order, to be sent once more. They joined a batch when they were made, and a call
 * sent again is first on its connection, so none is sent a third time this way.
 */
static void requeue_behind(sxe_http_client_t *client, struct sxe_http_call *call)
{
    struct sxe_http_call *after = NULL;

    while (call != NULL) {
        struct sxe_http_call *next = call->up_next;
        call->up = NULL;
        call->up_next = NULL;
        if (call->discard) {
            sxe__http_call_free(call);
        } else {
            client->stats.retried++;
            call->retried = true;
            sxe__http_queue_insert(client, call, after);
            after = call;
        }
        call = next;
    }
}

/*
 * The loop's timeout for the connection's state: a kept-alive connection idle past the loop's
 * idle timeout closes, but one that owes answers stays, however the loop's timeouts are set (a
 * server's idle timeout, or its drain's second): its calls' own timeout
 * (options.timeout) says how long an answer may take.
 */
static void on_timeout(sxe_conn_t *conn)
{
    const struct sxe__upstream *up = sxe_conn_user(conn);

    if (up != NULL && up->calls > 0) {
        (void)sxe_conn_touch(conn);
    }
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    struct sxe__upstream *up = sxe_conn_user(conn);

    if (up == NULL) {
        return; /* switched protocols (101), and its new owner did not take it */
    }
    sxe_http_client_t *client = up->client;
    struct sxe_http_call *call = up->first;
    bool got_bytes = up->got_bytes;
    bool refused = up->state == SXE__UP_CONNECTING && reason == SXE_CLOSE_ERROR;

    if (up->state == SXE__UP_IDLE) {
        idle_remove(client, up);
    } else if (up->state == SXE__UP_BUSY) {
        client->stats.busy--;
    }
    client->stats.open--;
    client->batch = client->batch == up ? NULL : client->batch;
    up->corked = false;
    up->conn = NULL;
    up->first = up->last = NULL; /* open_for() counts its calls afresh */
    up->state = SXE__UP_FREE;
    if (call != NULL) {
        requeue_behind(client, call->up_next);
        call->up = NULL;
        call->up_next = NULL;
        if (call->discard) {
            sxe__http_call_free(call);
        } else if (up->in_body && up->until_close && reason == SXE_CLOSE_PEER) {
            sxe__http_call_deliver(up, call); /* the close ends the body */
        } else if (!got_bytes && up->reused &&
                   (call->idempotent || (call->body_open && !call->writable)) && !call->retried &&
                   !client->options.no_retry && reason != SXE_CLOSE_TIMEOUT) {
            SXE_LOG_DEBUG("the pooled connection to %s closed under %s %s; sending it again",
                          client->host, call->request.method, call->request.target);
            call->retried = true;
            client->stats.retried++;
            sxe__http_queue_insert(client, call, NULL);
        } else if (refused && sxe__http_client_try_next(client, call)) {
            SXE_LOG_DEBUG("%s refused a connection (%s); trying its next address", client->host,
                          sxe_strerror(-err));
            sxe__http_queue_insert(client, call, NULL);
        } else {
            sxe__http_call_fail(call, close_error(reason, err));
        }
    }
    sxe__http_client_dispatch(client);
}

static void on_timer(sxe_timer_t *timer, void *arg)
{
    struct sxe_http_call *call = arg;
    struct sxe__upstream *up = call->up;
    sxe_http_client_t *client = call->client;

    (void)timer;
    if (call->writable_due) {
        sxe__http_call_writable(call);
        return;
    }
    bool caller_writes = call->body_open && call->writable && !call->wait_drain;
    if ((call->paused || caller_writes || (up != NULL && up->first != call)) &&
        sxe_timer_start(client->loop, &call->timer, client->options.timeout, 0) == 0) {
        return; /* its caller holds it back, or the call ahead of it, not the upstream */
    }
    if (up != NULL && up->state == SXE__UP_CONNECTING) {
        sxe__http_up_pop(up); /* the connection may still serve the next call */
    } else if (up != NULL) {
        sxe__http_up_pop(up);
        sxe_conn_close(up->conn);
    }
    sxe__http_call_fail(call, -ETIMEDOUT);
}

void sxe_http_client_stats(const sxe_http_client_t *client, struct sxe_http_client_stats *stats)
{
    *stats = client->stats;
}
