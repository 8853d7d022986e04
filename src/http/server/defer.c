/*
 * Requests held to answer later (sxe_http_defer()): a request whose handler returns before it is
 * finished keeps its slot (request.c), its bytes stay where they are, and the connection waits
 * for its answer. The connection's input is kept (sxe_conn_keep()) at a stable address in the
 * connection's own buffer, and the parse's pointers are moved there, so nothing is copied. The
 * connection goes on reading, so a client that leaves is seen at once (the holder's on_cancel);
 * bytes of a next request make it pause instead, until the answer is finished. Then the
 * connection's input is let go (sxe_conn_unkeep()), and the next read skips the answered
 * request's bytes and parses what follows. A held request not answered in time is answered 503.
 */
#define SXE_LOG_MODULE http_log
#include "sxe/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/clock.h"
#include "sxe/timer.h"
#include "server.h"

static struct sxe_log_module http_log = SXE_LOG_MODULE_INIT(HTTP);

static void on_deadline(sxe_timer_t *timer, void *arg);
static void cancel(sxe_http_server_t *server, struct slot *held);

int sxe_http_defer(sxe_http_t *http, sxe_http_cancel_t on_cancel, void *arg)
{
    if (!SXE_CHECK(http != NULL && http->server->running != NULL &&
                   http == &http->server->running->http && !http->held && http->status == 0)) {
        return -EINVAL;
    }
    sxe_http_server_t *server = http->server;
    struct slot *held = sxe__http_slot(http);
    if (server->defer_stats.held == server->config.held_max) {
        server->defer_stats.refused++;
        SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR,
                     "all %u held requests are in use: raise %s; refusing to hold more",
                     server->config.held_max, sxe_log_setting("options.deferred"));
        return -ENOBUFS;
    }
    if (http->path == server->path_scratch && http->path != NULL) {
        /* Normalized into the scratch, which the next request reuses: a copy of its own. Only a
         * path that was not normal is copied, so this is rare, and a failure is a 503. */
        if ((held->path = malloc(http->path_len + 1)) == NULL) {
            return -ENOMEM;
        }
        memcpy(held->path, http->path, http->path_len + 1);
    }
    sxe_timer_init(&held->deadline, on_deadline, held);
    if (sxe_timer_start(server->loop, &held->deadline, server->config.response_timeout, 0) < 0) {
        free(held->path);
        held->path = NULL;
        server->defer_stats.refused++;
        return -ENOBUFS; /* the loop's timers are all running */
    }
    held->state = SLOT_HELD;
    held->on_cancel = on_cancel;
    held->arg = arg;
    held->on_drained = NULL;
    held->streaming = http->body_unread;
    held->rate_restart = true;
    held->body_paused = false;
    held->feeding = false;
    held->on_body = NULL;
    held->reader = NULL;
    http->held = true;
    http->path = held->path != NULL ? held->path : http->path;
    server->defer_stats.deferred++;
    server->defer_stats.held++;
    return 0;
}

/*
 * Moves a pointer into the request's old place (len bytes at from) to the same byte in its new one.
 * One that points elsewhere stays: the constant "/" target of an absolute-form request without a
 * path ("GET http://host"), or NULL.
 */
static const char *moved(const char *pointer, const char *from, size_t len, const char *to)
{
    return pointer >= from && pointer < from + len ? to + (pointer - from) : pointer;
}

bool sxe__http_defer_keep(sxe_http_server_t *server, sxe_conn_t *conn, const char *data, size_t len,
                          const char *at, size_t head, size_t body_len)
{
    struct slot *held = server->running;
    struct http_conn *state = sxe__http_state(server, conn);
    struct sxe_http_request_head *request = &held->request;

    server->running = NULL;
    if (held->http.finished) { /* answered before its handler returned */
        sxe__http_slot_release(server, held);
        return false;
    }
    char *kept;
    if (sxe_conn_keep(conn, data, len, (size_t)(at - data), &kept) < 0) { /* it cannot wait */
        SXE_LOG_ERROR("no buffer to hold a request in: answering 503");
        sxe__http_refuse(server, conn, 503, request, NULL);
        cancel(server, held);
        return false;
    }
    request->method = moved(request->method, at, head, kept);
    request->target = moved(request->target, at, head, kept);
    if (held->path == NULL) { /* the path lies in the target (or is the constant "/") */
        held->http.path = moved(held->http.path, at, head, kept);
    }
    for (unsigned i = 0; i < request->header_count; i++) {
        request->headers[i].name = moved(request->headers[i].name, at, head, kept);
        request->headers[i].value = moved(request->headers[i].value, at, head, kept);
    }
    if (held->streaming) { /* a streamed body: its pieces come as they arrive */
        held->head_len = (uint32_t)head;
    } else if (request->chunked) { /* decoded again, in place, over its own framing */
        held->http.body = kept + head;
        held->http.body_len =
            sxe__http_decode_chunked(server, kept, (int)head, body_len, kept + head);
    } else if (held->http.body != NULL) {
        held->http.body = kept + head;
    }
    sxe__http_enlist(server, state, held);
    state->skip = (uint32_t)(head + body_len);
    if (held->streaming) {
        sxe__http_upload_kept(server, conn, held, kept, len - (size_t)(at - data));
    }
    return true;
}

/* Tells the holder (or will, at its next call) that its request is gone. */
static void cancel(sxe_http_server_t *server, struct slot *held)
{
    sxe__http_log(&held->http); /* a response cut off, or none: 499 */
    server->defer_stats.cancelled++;
    sxe_timer_stop(server->loop, &held->deadline);
    if (held->on_cancel == NULL) {
        held->state = SLOT_ORPHANED;
        sxe__http_upload_cancel(held); /* a fiber reading the body hears it now */
        return;
    }
    held->state = SLOT_CANCELLING; /* calls from the callback itself fail */
    held->on_cancel(&held->http, held->arg);
    sxe__http_slot_release(server, held);
}

void sxe__http_defer_cancel(sxe_http_server_t *server, sxe_conn_t *conn)
{
    struct http_conn *state = sxe__http_state(server, conn);
    struct slot *held;

    while ((held = sxe__http_first(server, state)) != NULL) {
        sxe__http_delist(server, state, held);
        cancel(server, held);
    }
}

void sxe__http_defer_cancel_one(sxe_http_server_t *server, sxe_conn_t *conn, struct slot *held)
{
    sxe__http_delist(server, sxe__http_state(server, conn), held);
    cancel(server, held);
}

void sxe__http_defer_drop(sxe_http_server_t *server, struct slot *held)
{
    server->running = NULL;
    if (held->http.finished || held->http.failed) {
        sxe__http_slot_release(server, held);
    } else {
        cancel(server, held);
    }
}

/* A held request was not answered in time: 503, and the connection closes once it is sent. */
static void on_deadline(sxe_timer_t *timer, void *arg)
{
    struct slot *held = arg;
    sxe_http_server_t *server = held->http.server;
    sxe_conn_t *conn = held->http.conn;

    (void)timer;
    server->defer_stats.timed_out++;
    SXE_LOG_ERROR("the held request for %.*s was not answered within %llu ms: %s",
                  (int)held->request.target_len, held->request.target,
                  (unsigned long long)(server->config.response_timeout / SXE_NS_PER_MSEC),
                  held->http.h2 != NULL    ? (held->http.status == 0 ? "answering 503 on its stream"
                                                                     : "resetting its stream")
                  : held->http.status == 0 ? "answering 503 and closing"
                                           : "closing");
    if (sxe_conn_closed(conn)) {
        return; /* GCOVR_EXCL_LINE: closed in a callback of this turn; its on_close cancels it */
    }
    if (held->http.h2 != NULL) { /* HTTP/2: the stream alone ends; its close cancels the hold */
        if (held->http.status == 0) {
            held->http.logged = true;
            server->h2_answering = held->http.h2;
            sxe__http_refuse(server, conn, 503, &held->request, NULL);
            server->h2_answering = NULL;
        } else {
            sxe__h2_reset(held->http.h2);
        }
        return;
    }
    if (held->http.status == 0) {
        held->request.keep_alive = false;
        held->http.logged = true; /* the log sees the 503's handle instead */
        sxe__http_refuse(server, conn, 503, &held->request, NULL);
    }
    sxe_conn_unkeep(conn);
    if (sxe_conn_close_when_sent(conn) < 0) {
        sxe_conn_close(conn);
    }
}
