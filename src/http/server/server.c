/*
 * The HTTP/1.1 server module: requests read with the parser, routed to handlers, answered in
 * order.
 *
 * A request's bytes stay in the connection's buffer, unconsumed, until the request has been
 * answered: its head (which the request's pointers point into) and its body. So a body arrives
 * whole with its request, pipelined requests wait their turn in the buffer, and nothing is copied,
 * except a chunked body, which is decoded into the server's scratch area when it is complete.
 * A handler answers before it returns, or holds its request (request.c), and then the next request
 * is not parsed until the held one is answered: responses stay in request order. While a
 * connection's output is backed up (a write left high_water bytes queued: sxe_conn_backed_up())
 * the next pipelined request waits, its bytes unread in the buffer or the socket, until the output
 * drains.
 *
 * State per connection is a small struct in an array sized like the loop's connection table.
 */
#define SXE_LOG_MODULE http_log
#include "sxe/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/http.h"
#include "sxe/loop.h"
#include "server.h"

static struct sxe_log_module http_log = SXE_LOG_MODULE_INIT(HTTP);

static bool method_is(const struct sxe_http_request_head *request, const char *method)
{
    size_t len = strlen(method);
    return request->method_len == len && memcmp(request->method, method, len) == 0;
}

static bool route_method_matches(const struct route *route,
                                 const struct sxe_http_request_head *request)
{
    if (route->method[0] == '\0' || method_is(request, route->method)) {
        return true;
    }
    return strcmp(route->method, "GET") == 0 && method_is(request, "HEAD");
}

/*
 * The path the request is routed by, and its handler reads: the target's up to any '?',
 * normalized (path.c), so that no spelling of a path reaches a route it does not start with.
 * Nearly every path is normal already and is used where it lies; another is written into the
 * server's scratch for it. "*" (OPTIONS) is itself. @return 0, or 400 for a path that climbs
 * above the root or holds a malformed escape.
 */
static int route_path(sxe_http_server_t *server, const struct sxe_http_request_head *request,
                      const char **path, size_t *path_len)
{
    const char *query = memchr(request->target, '?', request->target_len);
    size_t raw_len = query ? (size_t)(query - request->target) : request->target_len;

    *path = request->target;
    *path_len = raw_len;
    if (request->target[0] != '/' || sxe_http_path_is_normal(request->target, raw_len)) {
        return 0;
    }
    ssize_t normal = sxe_http_path_normalize(request->target, raw_len, server->path_scratch,
                                             (size_t)server->config.limits.request_line + 1);
    if (normal < 0) {
        SXE_LOG_DEBUG("refusing the path %.*s: %s", (int)raw_len, request->target,
                      normal == -EACCES ? "it climbs above the root" : "a malformed escape");
        return 400;
    }
    *path = server->path_scratch;
    *path_len = (size_t)normal;
    return 0;
}

static bool route_covers(const struct route *route, const char *path, size_t path_len, bool *exact)
{
    *exact = route->path_len == path_len && memcmp(route->path, path, path_len) == 0;
    return *exact || (route->prefix && route->path_len <= path_len &&
                      memcmp(route->path, path, route->path_len) == 0);
}

/*
 * Finds the route for the request's path and method: the longest match, an exact one before a
 * prefix. *others is set when routes for the path take other methods only (405, or OPTIONS).
 */
static const struct route *find_route(sxe_http_server_t *server,
                                      const struct sxe_http_request_head *request, const char *path,
                                      size_t path_len, bool *others)
{
    const struct route *best = NULL;
    bool best_exact = false;

    *others = false;
    for (unsigned i = 0; i < server->config.route_count; i++) {
        const struct route *route = &server->config.routes[i];
        bool exact;
        if (!route_covers(route, path, path_len, &exact)) {
            continue;
        }
        if (!route_method_matches(route, request)) {
            *others = true;
            continue;
        }
        if (best == NULL || (exact && !best_exact) ||
            (exact == best_exact && route->path_len > best->path_len)) {
            best = route;
            best_exact = exact;
        }
    }
    return best;
}

bool sxe__http_streams(sxe_http_server_t *server, const struct sxe_http_request_head *request)
{
    const char *path;
    size_t path_len;
    bool others;
    const struct route *route = route_path(server, request, &path, &path_len) == 0
                                    ? find_route(server, request, path, path_len, &others)
                                    : NULL;
    return route != NULL && route->stream;
}

/* Adds method to an Allow list of at most size bytes, unless it is there already. */
static void allow_add(char *allow, size_t size, const char *method)
{
    size_t len = strlen(allow), method_len = strlen(method);

    for (const char *at = allow; (at = strstr(at, method)) != NULL; at += method_len) {
        if ((at == allow || at[-1] == ' ') && (at[method_len] == ',' || at[method_len] == '\0')) {
            return;
        }
    }
    if (len + method_len + 3 <= size) {
        snprintf(allow + len, size - len, "%s%s", len ? ", " : "", method);
    }
}

/*
 * The Allow header (RFC 9110 §10.2.1) for a path, or for the whole server (path NULL: OPTIONS *):
 * the methods of the routes that name theirs, HEAD with GET, and OPTIONS, which the module answers.
 */
static void allow_header(sxe_http_server_t *server, const char *path, size_t path_len, char *out,
                         size_t size)
{
    char allow[240] = "";

    for (unsigned i = 0; i < server->config.route_count; i++) {
        const struct route *route = &server->config.routes[i];
        bool exact;
        if (route->method[0] == '\0' ||
            (path != NULL && !route_covers(route, path, path_len, &exact))) {
            continue;
        }
        allow_add(allow, sizeof(allow), route->method);
        if (strcmp(route->method, "GET") == 0) {
            allow_add(allow, sizeof(allow), "HEAD");
        }
    }
    allow_add(allow, sizeof(allow), "OPTIONS");
    snprintf(out, size, "Allow: %s\r\n", allow);
}

/*
 * A request no route takes by its method: OPTIONS is answered with what the path (or, for "*",
 * the server) allows; another method gets 405 with the same list, or 404 where nothing routes.
 */
static void answer_unrouted(sxe_http_server_t *server, sxe_conn_t *conn,
                            const struct sxe_http_request_head *request, const char *path,
                            size_t path_len, bool others)
{
    bool asterisk = request->target_len == 1 && request->target[0] == '*';
    char allow[HTTP_REFUSE_EXTRA]; /* "Allow: " and a list of at most 239 bytes, CRLF, NUL */

    if (!others && !asterisk) {
        sxe__http_refuse(server, conn, 404, request, NULL);
        return;
    }
    allow_header(server, asterisk ? NULL : path, path_len, allow, sizeof(allow));
    if (!method_is(request, "OPTIONS")) {
        sxe__http_refuse(server, conn, 405, request, allow);
        return;
    }
    sxe_http_t http = {.server = server,
                       .conn = conn,
                       .request = request,
                       .keep_alive = request->keep_alive,
                       .body_unread = request->has_body, /* answered at its head */
                       .began = sxe_loop_now(sxe_conn_loop(conn)),
                       .h2 = server->h2_answering};
    if (sxe_http_start(&http, 200, allow, 0) == 0) {
        (void)sxe_http_finish(&http);
    }
}

/* After an answer the server gave itself: whether the connection is still open. */
static enum sxe__dispatched answered(sxe_conn_t *conn)
{
    return sxe_conn_closed(conn) ? SXE__CLOSED : SXE__ANSWERED;
}

/*
 * Runs the handler of the request parsed into slot (the next free one), or answers it itself
 * (404, 405, OPTIONS); streamed: at its head, its body unread.
 */
enum sxe__dispatched sxe__http_dispatch(sxe_http_server_t *server, sxe_conn_t *conn,
                                        struct slot *slot, const char *body, size_t body_len,
                                        bool streamed)
{
    const struct sxe_http_request_head *request = &slot->request;
    const char *path;
    size_t path_len;
    int refused = route_path(server, request, &path, &path_len);
    if (refused != 0) {
        sxe__http_refuse(server, conn, refused, request, NULL);
        return answered(conn);
    }
    bool others;
    const struct route *route = find_route(server, request, path, path_len, &others);
    if (route == NULL) {
        answer_unrouted(server, conn, request, path, path_len, others);
        return answered(conn);
    }

    sxe_http_t *http = &slot->http;
    *http = (sxe_http_t){.server = server,
                         .conn = conn,
                         .began = sxe_loop_now(sxe_conn_loop(conn)),
                         .request = request,
                         .body = body,
                         .body_len = body_len,
                         .head_only = method_is(request, "HEAD"),
                         .keep_alive = request->keep_alive,
                         .stream = route->stream,
                         .path = path,
                         .path_len = path_len,
                         .prefix_len = (uint16_t)route->path_len,
                         .body_unread = streamed,
                         .h2 = server->h2_answering};
    sxe__http_slot_take(server, slot);
    if (route->fiber) {
        if (!sxe__http_run_fiber(server, http, route)) {
            sxe__http_slot_release(server, slot); /* answered 503 */
            return answered(conn);
        }
    } else {
        route->handler(http, route->arg);
    }
    if (sxe_conn_closed(conn)) {
        if (http->held) {
            sxe__http_defer_drop(server, slot);
        } else {
            sxe__http_log(http); /* unless its answer was finished first */
            sxe__http_slot_release(server, slot);
        }
        return SXE__CLOSED; /* by the handler */
    }
    if (http->held) {
        return SXE__HELD; /* not finished: its slot stays (sxe__http_defer_keep) */
    }
    if (http->status == 0) {
        SXE_LOG_ERROR("the handler for %.*s did not answer; answering 500",
                      (int)request->target_len, request->target);
        http->keep_alive = false;
        sxe_http_respond(http, 500, "text/plain", "500 Internal Server Error\n", 26);
    } else if (!http->finished) {
        sxe_http_finish(http);
    }
    sxe__http_slot_release(server, slot);
    return SXE__ANSWERED; /* it was open after the handler; a write that fails closes it later */
}

/*
 * A request with a body, at its head: one that no route takes (404, 405, or an OPTIONS) is
 * answered now, as is one whose body is too large (413); a streamed route's handler runs now. The
 * body of a request answered at its head is never kept: it would hold a buffer, a large one
 * perhaps, for nothing, until the header timeout. @return 0 to go on reading the body whole; 1
 * when answered at once, or refused (the connection closes); -1 when held and kept.
 */
static int route_at_head(sxe_http_server_t *server, sxe_conn_t *conn, struct slot *slot,
                         const char *data, size_t len, const char *at, int head)
{
    struct sxe_http_request_head *request = &slot->request;
    const char *path;
    size_t path_len;
    bool others;
    int refused = route_path(server, request, &path, &path_len);
    if (refused != 0) { /* before its body is read: it would be read for nothing */
        sxe__http_refuse(server, conn, refused, request, NULL);
        return 1;
    }
    const struct route *route = find_route(server, request, path, path_len, &others);
    if (route == NULL) { /* its body will not be read: the connection closes after the answer */
        request->keep_alive = false;
        answer_unrouted(server, conn, request, path, path_len, others);
        return 1;
    }
    uint64_t most = route != NULL && route->stream ? server->config.stream_body_bytes
                                                   : server->config.limits.body_bytes;
    if (!request->chunked && request->content_length > most) {
        sxe__http_refuse(server, conn, 413, request, NULL);
        return 1;
    }
    if (!route->stream) {
        return 0;
    }
    if (sxe__http_dispatch(server, conn, slot, NULL, 0, true) == SXE__HELD &&
        sxe__http_defer_keep(server, conn, data, len, at, (size_t)head, 0)) {
        return -1;
    }
    return 1;
}

/*
 * The requests in this input, in order: each head parsed once, its body waited for, the request
 * dispatched, until the input ends, the output backs up or the connection closes. Longer than 80
 * lines because those steps share the loop's position and the connection's state; each is a call.
 */
static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    sxe_http_server_t *server = sxe__http_server_of(conn);
    struct http_conn *state = sxe__http_state(server, conn);
    size_t used = 0;

    if (state->framed) {
        return sxe__h2_read(server, conn, data, len);
    }
    if (!state->h1 && len > 0) {
        /* The connection's first bytes: HTTP/2 if they are its preface (h2c with prior knowledge:
         * a part of it waits for the rest), or whatever they are when the client chose h2 by ALPN
         * (its session refuses a wrong preface with GOAWAY); else HTTP/1.1 from now on. */
        bool alpn_h2 = sxe_conn_alpn_is(conn, "h2");
        size_t part = len < SXE__H2_PREFACE_LEN ? len : SXE__H2_PREFACE_LEN;
        if (alpn_h2 || memcmp(data, SXE__H2_PREFACE, part) == 0) {
            if (!alpn_h2 && part < SXE__H2_PREFACE_LEN) {
                return 0;
            }
            if (sxe__h2_begin(server, conn)) {
                return sxe__h2_read(server, conn, data, len);
            }
        }
        state->h1 = true;
    }
    if (state->first != 0 && sxe__http_upload_active(server, state)) {
        return sxe__http_upload_feed(server, conn, (char *)(uintptr_t)data, len);
    }
    if (state->first != 0) { /* a request waits for its answer: the next waits behind it */
        state->waiting = true;
        (void)sxe_conn_pause(conn);
        return 0;
    }
    if (state->skip != 0) { /* a held request was answered: its bytes go now */
        used = state->skip;
        state->skip = 0;
    }
    if (state->switch_to != NULL) { /* it was answered 101: the rest is the new protocol's */
        sxe__http_switch(server, conn);
        return used;
    }
    while (used < len && !state->closing) {
        /* Parsed into the slot the request will have (request.c); nothing is copied. */
        struct slot *slot = sxe__http_slot_next(server);
        struct sxe_http_request_head *request = &slot->request;
        const char *at = data + used;
        size_t left = len - used;
        struct sxe_http_parser reparse;
        int head;

        if (state->head_len == 0 && state->full) {
            /* The output is backed up (a large file, or many answers): the next request waits,
             * and the socket is not read, until it drains. */
            state->paused = true;
            (void)sxe_conn_pause(conn);
            break;
        }
        if (state->head_len == 0) {
            head = sxe_http_parse_request_head(&state->parser, at, left,
                                               server->config.has_stream_routes
                                                   ? &server->config.head_limits
                                                   : &server->config.limits,
                                               request);
            if (head == 0) {
                break;
            }
            if (head < 0) {
                sxe__http_refuse(server, conn, sxe_http_parser_status(&state->parser), NULL, NULL);
                break;
            }
        } else {
            /* A body is being read: the head was parsed in an earlier call; parse it again here,
             * where its bytes now are, to point the request at them. */
            sxe_http_parser_init(&reparse);
            head = sxe_http_parse_request_head(&reparse, at, left, &server->config.limits, request);
        }
        if (request->minor_version == 1 && request->host_count != 1) {
            sxe__http_refuse(server, conn, 400, request, NULL);
            break;
        }
        if (request->tunnel) {
            sxe__http_refuse(server, conn, 501, request, NULL); /* no tunnels here */
            break;
        }
        if (state->head_len == 0 && request->has_body) {
            int streamed = route_at_head(server, conn, slot, data, len, at, head);
            if (streamed < 0) {
                return 0; /* held, its input kept: the return is not used */
            }
            if (streamed > 0) {
                /* Answered at once, with a close: the rest of the body, still to come, is read
                 * and dropped until the client closes (not closed when sent: it still sends). */
                return len;
            }
        }
        if (!request->has_body) {
            enum sxe__dispatched what = sxe__http_dispatch(server, conn, slot, NULL, 0, false);
            state->parser = (struct sxe_http_parser){0};
            if (what == SXE__HELD) {
                if (sxe__http_defer_keep(server, conn, data, len, at, (size_t)head, 0)) {
                    return 0; /* kept: the return is not used */
                }
                what = answered(conn); /* in its handler, or cancelled: its holder may close */
            }
            used += (size_t)head;
            if (what == SXE__CLOSED) {
                return len; /* switched, and closed by the new protocol, or closed by its handler */
            }
            if (state->switch_to != NULL) { /* answered 101: the rest is the new protocol's */
                sxe__http_switch(server, conn);
                return used;
            }
            continue;
        }

        /* The body must be here whole before the request is answered. */
        state->head_len = (uint32_t)head;
        sxe__http_send_continue(state, conn, request);
        struct sxe_http_body piece = {0};
        while (!piece.done && (size_t)head + state->body_offset < left) {
            long taken = sxe_http_parse_body(&state->parser, at + head + state->body_offset,
                                             left - (size_t)head - state->body_offset,
                                             &server->config.limits, &piece);
            if (taken < 0) {
                sxe__http_refuse(server, conn, sxe_http_parser_status(&state->parser), request,
                                 NULL);
                return len;
            }
            state->body_offset += (uint32_t)taken;
        }
        if (!piece.done) {
            break;
        }
        size_t body_len =
            request->chunked
                ? sxe__http_decode_chunked(server, at, head, state->body_offset, server->scratch)
                : state->body_offset;
        enum sxe__dispatched what = sxe__http_dispatch(
            server, conn, slot, request->chunked ? server->scratch : at + head, body_len, false);
        size_t request_len = (size_t)head + state->body_offset;
        state->head_len = 0;
        state->body_offset = 0;
        state->continued = false;
        state->parser = (struct sxe_http_parser){0};
        if (what == SXE__HELD) {
            if (sxe__http_defer_keep(server, conn, data, len, at, (size_t)head,
                                     request_len - (size_t)head)) {
                return 0;
            }
            what = answered(conn);
        }
        used += request_len;
        if (what == SXE__CLOSED) {
            return len;
        }
    }
    if (!state->closing) {
        if (used > 0) {
            sxe__http_set_nodelay(state, conn); /* answered, and staying open for more */
        }
        return used;
    }
    if (used == len && !state->linger) {
        /* The client asked to close and sent nothing after: close as soon as the answer is out,
         * without the half-close and the wait for its end of stream. A client that may still be
         * sending (a body we did not read) is read to its end instead: a close now would reset
         * the connection under the answer. */
        (void)sxe_conn_close_when_sent(conn);
    }
    return len;
}

static void on_connect(sxe_conn_t *conn)
{
    sxe_http_server_t *server = sxe__http_server_of(conn);

    *sxe__http_state(server, conn) = (struct http_conn){.id = sxe_conn_id(conn)};
}

/*
 * A held request answered 101 whose bytes this module has yet to consume (next turn): the
 * connection's events are the new protocol's already. @return its handlers, or NULL.
 */
static const struct sxe_conn_handlers *switching(sxe_conn_t *conn)
{
    return sxe__http_state(sxe__http_server_of(conn), conn)->switch_to;
}

static void on_drained(sxe_conn_t *conn)
{
    sxe_http_server_t *server = sxe__http_server_of(conn);
    struct http_conn *state = sxe__http_state(server, conn);
    const struct sxe_conn_handlers *to = switching(conn);

    if (to != NULL) {
        if (to->on_drained != NULL) {
            to->on_drained(conn);
        }
        return;
    }
    state->full = false;
    sxe__http_defer_drained(server, conn); /* a held response streaming out sends more */
    if (state->paused) {
        state->paused = false;
        (void)sxe_conn_resume(conn); /* the requests that waited come next turn */
    } else if (state->peer_done) {
        sxe_conn_close(conn);
    }
}

/* The client is done sending: close once the answers it is owed have gone out. */
static void on_eof(sxe_conn_t *conn)
{
    struct http_conn *state = sxe__http_state(sxe__http_server_of(conn), conn);

    if (state->switch_to != NULL && state->switch_to->on_eof != NULL) {
        state->switch_to->on_eof(conn);
        return;
    }
    state->peer_done = true;
    if (sxe_conn_queued(conn) == 0 || state->first != 0) { /* gone: nobody waits for the answer */
        sxe_conn_close(conn);
    }
}

/* A request that did not arrive in time gets a 408; an idle connection just closes. */
static void on_timeout(sxe_conn_t *conn)
{
    sxe_http_server_t *server = sxe__http_server_of(conn);
    struct http_conn *state = sxe__http_state(server, conn);

    if (state->switch_to != NULL) {
        if (state->switch_to->on_timeout != NULL) {
            state->switch_to->on_timeout(conn);
        }
        return;
    }
    if (!state->closing && (state->head_len != 0 || sxe_http_parser_busy(&state->parser))) {
        sxe__http_refuse(server, conn, 408, NULL, NULL);
    }
}

/*
 * A request outgrew the connection's buffer: its body needed a large buffer (limits.body_bytes
 * beyond what an ordinary one holds) and every one was taken, a 503 the client may retry; or it
 * outgrew the largest (chunked framing heavier than the slack, or a head larger than the loop's
 * buffer), a 413 or 431. The client may still be sending: the answer goes, and the rest is read
 * and dropped until it closes, so the answer is not reset under it.
 */
static void on_overflow(sxe_conn_t *conn)
{
    sxe_http_server_t *server = sxe__http_server_of(conn);
    struct http_conn *state = sxe__http_state(server, conn);
    int err = errno;

    if (state->switch_to != NULL) {
        if (state->switch_to->on_overflow != NULL) {
            state->switch_to->on_overflow(conn);
        }
        return;
    }
    if (err == ENOBUFS) { /* counted by the loop: sxe_loop_stats().no_large_buffer */
        sxe__http_refuse(server, conn, 503, NULL, "Retry-After: 1\r\n");
    } else {
        sxe__http_refuse(server, conn, state->head_len != 0 ? 413 : 431, NULL, NULL);
    }
    state->head_len = 0;
    state->body_offset = 0;
}

/* A request held on the connection is cancelled. */
static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    sxe_http_server_t *server = sxe__http_server_of(conn);

    struct http_conn *state = sxe__http_state(server, conn);
    const struct sxe_conn_handlers *to = state->switch_to;

    state->id = 0;
    state->switch_to = NULL;
    if (to != NULL) {
        if (to->on_close != NULL) {
            to->on_close(conn, reason, err);
        }
        return;
    }
    sxe__http_defer_cancel(server, conn);
}

/* For the control socket's list of connections: what the connection does, then the oldest
 * request it holds, its method and target (cut to fit; bytes a terminal could take for commands
 * shown as '?'). */
static size_t describe(const sxe_conn_t *conn, char *out, size_t size)
{
    sxe_http_server_t *server = sxe__http_server_of(conn);
    const struct http_conn *state = sxe__http_state(server, (sxe_conn_t *)(uintptr_t)conn);
    const struct slot *slot = sxe__http_first(server, state); /* a held one, HTTP/2's too */
    const char *doing = slot != NULL     ? (slot->streaming ? "body arriving" : "answer under way")
                        : state->full    ? "an answer going out"
                        : state->closing ? "closing after its answer"
                        : state->framed  ? "waiting for a stream"
                        : state->parser.scanned > 0 ? "a request head arriving"
                                                    : "waiting for a request";
    int len = snprintf(out, size, "%s%s%s", state->framed ? "HTTP/2, " : "", doing,
                       slot != NULL ? ": " : "");

    if (slot != NULL && len >= 0 && (size_t)len + 1 < size) {
        const struct sxe_http_request_head *request = &slot->request;
        int more = snprintf(out + len, size - (size_t)len, "%.*s %.*s", (int)request->method_len,
                            request->method, (int)request->target_len, request->target);
        for (int i = len; more > 0 && i < len + more && (size_t)i + 1 < size; i++) {
            unsigned char c = (unsigned char)out[i];
            out[i] = c < 0x20 || c >= 0x7f ? '?' : out[i];
        }
        len += more > 0 ? more : 0;
    }
    return len < 0 ? 0 : (size_t)len < size ? (size_t)len : size - 1;
}

const struct sxe_conn_handlers sxe__http_handlers = {.on_connect = on_connect,
                                                     .describe = describe,
                                                     .on_close = on_close,
                                                     .on_read = on_read,
                                                     .on_eof = on_eof,
                                                     .on_drained = on_drained,
                                                     .on_timeout = on_timeout,
                                                     .on_overflow = on_overflow};

int sxe_http_server_route(sxe_http_server_t *server, const char *method, const char *path,
                          unsigned flags, sxe_http_handler_t handler, void *arg)
{
    int rc;

    if (!SXE_CHECK(server != NULL && path != NULL && handler != NULL &&
                   strlen(path) < sizeof(server->config.routes[0].path) &&
                   (method == NULL || strlen(method) < sizeof(server->config.routes[0].method)) &&
                   (flags & ~(SXE_HTTP_ROUTE_PREFIX | SXE_HTTP_ROUTE_FIBER |
                              SXE_HTTP_ROUTE_STREAM)) == 0)) {
        return -EINVAL;
    }
    if (server->config.route_count == ROUTES_MAX) {
        return -ENOBUFS;
    }
    if ((flags & SXE_HTTP_ROUTE_FIBER) && server->loop != NULL && server->fibers == NULL &&
        (rc = sxe__http_fibers_make(server)) < 0) {
        return rc;
    }
    struct route *route = &server->config.routes[server->config.route_count++];
    snprintf(route->method, sizeof(route->method), "%s", method ? method : "");
    snprintf(route->path, sizeof(route->path), "%s", path);
    route->path_len = strlen(path);
    route->prefix = (flags & SXE_HTTP_ROUTE_PREFIX) != 0;
    route->fiber = (flags & SXE_HTTP_ROUTE_FIBER) != 0;
    route->stream = (flags & SXE_HTTP_ROUTE_STREAM) != 0;
    route->handler = handler;
    route->arg = arg;
    server->config.has_fiber_routes |= route->fiber;
    if (route->stream && !server->config.has_stream_routes) {
        /* Heads are parsed with the larger of the two body limits; each route's is checked after
         * (route_at_head), and a streamed body is parsed with its own. */
        server->config.has_stream_routes = true;
        server->config.stream_limits = server->config.head_limits = server->config.limits;
        server->config.stream_limits.body_bytes = server->config.stream_body_bytes;
        if (server->config.head_limits.body_bytes < server->config.stream_body_bytes) {
            server->config.head_limits.body_bytes = server->config.stream_body_bytes;
        }
    }
    return 0;
}
