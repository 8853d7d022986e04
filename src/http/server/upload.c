/*
 * Streamed request bodies (SXE_HTTP_ROUTE_STREAM): the handler runs when the head has arrived,
 * holds the request (request.c; a fiber route's is held for it), and takes the body in pieces as
 * they arrive, by callback (sxe_http_body_stream()) or from its fiber (sxe_http_body_read()).
 *
 * Where the bytes are: the held request's head leads the connection's kept input (request.c), and
 * its pointers point there. Body bytes that arrive behind it are parsed (chunked framing removed)
 * and handed out where they lie; then the head is moved up over them, to just before what is left,
 * and on_read consumes what lies before it, so the core's compaction brings the head back to the
 * front of the buffer, where its pointers expect it. A head is a few hundred bytes: moving it once
 * per read costs less than copying the pieces, and a body of any size passes through one buffer.
 * When nobody takes more (paused, or no fiber waiting) the connection is paused, and TCP holds the
 * client back until someone does.
 */
#define SXE_LOG_MODULE http_log
#include "sxe/log.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "server.h"
#include "sxe/clock.h"

static struct sxe_log_module http_log = SXE_LOG_MODULE_INIT(HTTP);

/* The client sent a malformed or oversized body: 400 or 413 if no answer started, and it goes. */
static void malformed(sxe_http_server_t *server, sxe_conn_t *conn, struct slot *held, int status)
{
    SXE_LOG_DEBUG("a streamed body for %.*s was refused: %d", (int)held->request.target_len,
                  held->request.target, status);
    if (held->http.status != 0) {
        sxe_conn_close(conn); /* the answer is under way: cut it off; on_close cancels the holder */
        return;
    }
    held->request.keep_alive = false;
    sxe__http_refuse(server, conn, status, &held->request, NULL);
    sxe__http_defer_cancel(server, conn);
    sxe_conn_unkeep(conn); /* the closing connection's timeouts apply again */
}

bool sxe__http_upload_active(sxe_http_server_t *server, const struct http_conn *state)
{
    return server->slots[state->first - 1].streaming;
}

/*
 * Longer than 80 lines on purpose: one pass over the kept input, handing out pieces while someone
 * takes them, and each hand-off may answer, cancel or close, which the pass must see at once.
 */
size_t sxe__http_upload_feed(sxe_http_server_t *server, sxe_conn_t *conn, char *data, size_t len)
{
    struct http_conn *state = sxe__http_state(server, conn);
    uint32_t slot = state->first;
    struct slot *held = &server->slots[slot - 1];
    uint64_t serial = held->http.serial;
    size_t head = held->head_len, at = head;
    struct sxe_http_body piece = {0};
    size_t want;

    held->feeding = true;
    while (at < len && !piece.done && (want = sxe__http_body_wanted(held)) > 0) {
        size_t give = len - at < want ? len - at : want;
        long taken = sxe_http_parse_body(&state->parser, data + at, give,
                                         &server->config.stream_limits, &piece);
        if (taken < 0) {
            held->feeding = false;
            malformed(server, conn, held, sxe_http_parser_status(&state->parser));
            return len;
        }
        at += (size_t)taken;
        if (!piece.done && sxe__http_body_too_slow(server, held, (size_t)taken)) {
            held->feeding = false;
            SXE_LOG_INFO("a streamed body for %.*s came at under %u bytes a second: answering 408",
                         (int)held->request.target_len, held->request.target,
                         server->config.body_rate);
            malformed(server, conn, held, 408);
            return len;
        }
        if (piece.len == 0 && !piece.done) {
            continue; /* framing only */
        }
        if (piece.done) {
            held->streaming = false;
            held->http.body_unread = false;
        }
        if (held->http.status == 0) { /* a body still arriving is progress: the deadline waits */
            int restarted =
                sxe_timer_start(server->loop, &held->deadline, server->config.response_timeout,
                                0); /* it runs already: no new timer is taken */
            (void)restarted;
        }
        sxe__http_body_hand(held, piece.data, piece.len, piece.done);
        if (sxe_conn_closed(conn)) {
            return len; /* closed by the reader: on_close cancelled its request */
        }
        if (state->first != slot || held->http.serial != serial) {
            break; /* answered: the connection moves on (or closes, if the body was not all read) */
        }
    }
    bool live = state->first == slot && held->http.serial == serial;
    if (live) {
        held->feeding = false;
    }
    size_t consumed = at - head;
    if (consumed > 0) { /* the head moves up, and the core's compaction brings it back to data */
        memmove(data + consumed, data, head);
    }
    if (live && at < len) {
        /* Body bytes nobody takes yet (the client waits, held back by TCP), or a next request
         * behind the body (it waits for the answer). */
        held->rate_restart = true; /* the client is not the slow one now */
        state->waiting = true;
        (void)sxe_conn_pause(conn);
    }
    return consumed;
}

/*
 * Offers the kept input again from the loop's next turn, if the feed stopped for want of a taker;
 * over HTTP/2, what the stream keeps goes to the taker at once, within this call.
 */
static void offer(sxe_http_server_t *server, struct slot *held)
{
    sxe_conn_t *conn = held->http.conn;

    if (sxe_conn_closed(conn) || held->feeding) {
        return; /* closed in this callback, or the feed goes on by itself */
    }
    if (held->http.h2 != NULL) {
        sxe__h2_body_offer(held); /* its stream's DATA, kept until taken */
        return;
    }
    struct http_conn *state = sxe__http_state(server, conn);
    if (state->waiting && state->first == (uint32_t)(held - server->slots) + 1) {
        state->waiting = false;
        (void)sxe_conn_resume(conn);
    }
}

/*
 * Body bytes that came with the head are handed out at once, from where the keep put them (the
 * buffer may be full: nothing more could be read until they are), and the keep is redone past
 * them; if the request was answered meanwhile, its next read skips them along with its head.
 */
void sxe__http_upload_kept(sxe_http_server_t *server, sxe_conn_t *conn, struct slot *held,
                           char *kept, size_t len)
{
    struct http_conn *state = sxe__http_state(server, conn);
    uint32_t slot = state->first;
    uint64_t serial = held->http.serial;

    if (len == held->head_len) {
        return; /* the head alone: the body's bytes come with the next reads */
    }
    size_t consumed = sxe__http_upload_feed(server, conn, kept, len);
    if (sxe_conn_closed(conn) || consumed == 0) {
        return;
    }
    if (state->first == slot && held->http.serial == serial) {
        /* The head, moved, leads the buffer again: the buffer is the connection's own already. */
        (void)!sxe_conn_keep(conn, kept, len, consumed, NULL);
    } else {
        state->skip += (uint32_t)consumed;
    }
}

void sxe__http_upload_cancel(struct slot *held)
{
    sxe_fiber_t *reader = held->reader;

    if (reader == sxe_fiber_self() && reader != NULL) { /* within its own read: it returns */
        held->reader = NULL;
        held->read_got = -ECANCELED;
    } else if (reader != NULL) {
        held->reader = NULL;
        (void)sxe_fiber_wake(reader, -ECANCELED);
    }
}

/* A client that waits for 100 Continue before sending its body gets it, unless answered already. */
static void send_continue(sxe_http_server_t *server, struct slot *held)
{
    sxe_conn_t *conn = held->http.conn;

    if (!sxe_conn_closed(conn) && held->http.status == 0) {
        sxe__http_send_continue(sxe__http_state(server, conn), conn, &held->request);
    }
}

/* The held request of a streamed route, whose body nobody reads yet; or NULL (-EINVAL). */
static struct slot *reading(sxe_http_t *http, int *rc)
{
    if (!SXE_CHECK(http != NULL && sxe__http_is_held(http) && http->stream)) {
        *rc = -EINVAL;
        return NULL;
    }
    if ((*rc = sxe__http_defer_check(http)) < 0) {
        return NULL;
    }
    return sxe__http_slot(http);
}

int sxe_http_body_stream(sxe_http_t *http, sxe_http_body_t on_body, void *arg)
{
    int rc;
    struct slot *held = reading(http, &rc);

    if (held == NULL) {
        return rc;
    }
    if (!SXE_CHECK(on_body != NULL && held->on_body == NULL && held->reader == NULL)) {
        return -EINVAL;
    }
    held->on_body = on_body;
    held->body_arg = arg;
    if (!held->streaming) { /* none, or it came whole: one piece */
        on_body(http, http->body, http->body_len, true, arg);
        return 0;
    }
    send_continue(http->server, held);
    offer(http->server, held);
    return 0;
}

static int set_paused(sxe_http_t *http, bool paused)
{
    int rc;
    struct slot *held = reading(http, &rc);

    if (held == NULL) {
        return rc;
    }
    held->body_paused = paused;
    held->rate_restart = true; /* held back by its reader: the window so far does not count */
    if (!paused) {
        offer(http->server, held);
    }
    return 0;
}

int sxe_http_body_pause(sxe_http_t *held)
{
    return set_paused(held, true);
}

int sxe_http_body_resume(sxe_http_t *held)
{
    return set_paused(held, false);
}

ssize_t sxe_http_body_read(sxe_http_t *http, void *buf, size_t size)
{
    int rc;
    struct slot *held;

    if (sxe_fiber_self() == NULL) {
        return -EPERM;
    }
    if ((held = reading(http, &rc)) == NULL) {
        return rc;
    }
    if (!SXE_CHECK(held->on_body == NULL && held->reader == NULL && (buf != NULL || size == 0))) {
        return -EINVAL;
    }
    if (!held->streaming || size == 0) { /* none, or it came whole: read from where it lies */
        size_t part = size < http->body_len ? size : http->body_len;
        if (part > 0) {
            memcpy(buf, http->body, part);
            http->body += part;
            http->body_len -= part;
        }
        return (ssize_t)part;
    }
    held->reader = sxe_fiber_self();
    held->read_buf = buf;
    held->read_room = size < INT_MAX ? size : INT_MAX;
    send_continue(http->server, held);
    offer(http->server, held);
    if (held->reader == NULL) { /* handed at once (HTTP/2's kept DATA), or cancelled meanwhile */
        return held->read_got;
    }
    return sxe_fiber_wait();
}
