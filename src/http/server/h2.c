/*
 * HTTP/2: a connection whose first bytes are the preface (over TLS, after ALPN chose h2; in
 * cleartext, with prior knowledge: h2c) gets a libnghttp2 session, which reads the frames, decodes
 * the fields (HPACK), keeps the flow control and checks each request as RFC 9113 §8 wants
 * (pseudo-fields, connection-specific fields, a content-length that matches its DATA). Each
 * stream's request is gathered (its fields copied, its body up to its route's limit) and, once
 * complete, dispatched in a slot as over HTTP/1.1, so routes, handlers, held requests and fibers do
 * not know which version carried it. A streamed route's request is dispatched at its head, and its
 * body goes to the reader as it takes it, the client held back by flow control (h2_body.c); the
 * window of a gathered body is given back as it comes. Many streams are open at once; a held one is
 * enlisted on its connection, so the connection's close cancels it, and a reset of its stream
 * cancels it alone. An "Upgrade: h2c" is not taken: the request is answered over HTTP/1.1 (RFC 9113
 * §3.1 removed that upgrade).
 */
#define SXE_LOG_MODULE http_log
#include "sxe/log.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "h2.h"
#include "sxe/clock.h"

static struct sxe_log_module http_log = SXE_LOG_MODULE_INIT(HTTP);

/* A stream's fields and body grow from this many bytes, doubling. */
#define H2_FIELD_ROOM_MIN 256

/* The session's memory, counted against the connection's (nghttp2_mem). */
static void *mem_malloc(size_t size, void *user)
{
    return sxe__h2_alloc(user, size);
}

static void mem_free(void *p, void *user)
{
    sxe__h2_free(user, p);
}

static void *mem_calloc(size_t count, size_t size, void *user)
{
    void *p = count != 0 && size > SIZE_MAX / count ? NULL : sxe__h2_alloc(user, count * size);
    return p != NULL ? memset(p, 0, count * size) : NULL;
}

static void *mem_realloc(void *p, size_t size, void *user)
{
    return sxe__h2_realloc(user, p, size);
}

/* Answers a stream itself (a refusal): the rest of its request is dropped. */
static void refuse(struct h2_stream *stream, int status)
{
    sxe_http_server_t *server = stream->h2->server;

    if (stream->streamed) {
        sxe__h2_body_forget(stream); /* what its reader did not take holds nothing back now */
    }
    sxe__h2_free(stream->h2, stream->body); /* the rest is dropped as it comes */
    stream->body = NULL;
    stream->body_len = stream->body_room = stream->body_at = 0;
    stream->refused = true;
    server->h2_answering = stream;
    sxe__http_refuse(server, stream->h2->conn, status, NULL, NULL);
    server->h2_answering = NULL;
}

/*
 * Appends bytes to a stream's growing buffer (its fields, or its body), at most limit in all. A
 * buffer that is part of the stream's own allocation (its first fields) is left, not freed.
 */
static int append(struct h2 *h2, char **buf, size_t *len, size_t *room, const void *bytes,
                  size_t count, size_t limit, const char *inside)
{
    if (*len + count > limit) {
        return -E2BIG;
    }
    if (*len + count > *room) {
        size_t grown = *room ? *room : H2_FIELD_ROOM_MIN;
        while (grown < *len + count) {
            grown *= 2;
        }
        grown = grown < limit ? grown : limit;
        char *bigger = sxe__h2_alloc(h2, grown);
        if (bigger == NULL) {
            return -ENOBUFS;
        }
        if (*len > 0) {
            memcpy(bigger, *buf, *len);
        }
        if (*buf != inside) {
            sxe__h2_free(h2, *buf);
        }
        *buf = bigger;
        *room = grown;
    }
    memcpy(*buf + *len, bytes, count);
    *len += count;
    return 0;
}

/*
 * Frames that make the server work and carry no request: PING and SETTINGS (not their ACKs),
 * PRIORITY, and DATA that is empty and does not end its stream. nghttp2 limits the answers to
 * PINGs and SETTINGS that pile up unread, not the frames, and the others not at all: a client that
 * sends them without end costs CPU for nothing (CVE-2019-9512, -9515, -9518). Past CHATTER_MAX of
 * them within a second, the connection ends with ENHANCE_YOUR_CALM. (WINDOW_UPDATE is not counted:
 * a client downloading fast sends many.)
 */
#define CHATTER_MAX 1000

static bool chattered(struct h2 *h2, const nghttp2_frame_hd *hd)
{
    bool idle =
        hd->type == NGHTTP2_PRIORITY ||
        ((hd->type == NGHTTP2_PING || hd->type == NGHTTP2_SETTINGS) &&
         !(hd->flags & NGHTTP2_FLAG_ACK)) ||
        (hd->type == NGHTTP2_DATA && hd->length == 0 && !(hd->flags & NGHTTP2_FLAG_END_STREAM));
    if (!idle) {
        return false;
    }
    uint64_t now = sxe_loop_now(sxe_conn_loop(h2->conn));
    if (now - h2->chatter_since >= SXE_NS_PER_SEC) {
        h2->chatter_since = now;
        h2->chatter = 0;
    }
    if (++h2->chatter <= CHATTER_MAX) {
        return false;
    }
    SXE_LOG_INFO("HTTP/2: a client sent more than %u frames in a second with no request in them: "
                 "ENHANCE_YOUR_CALM",
                 CHATTER_MAX);
    h2->calm = true;
    return true;
}

/*
 * A HEADERS frame on a stream the session does not have, below the highest the client opened:
 * RFC 9113 §5.1.1 wants a connection error (PROTOCOL_ERROR), which nghttp2 leaves to its user (it
 * cannot tell a stream closed from one never opened, and ignores the frame). A stream reset a
 * moment ago is let be: frames already in flight on it are to be ignored (§5.4.2).
 */
static int on_begin_frame(nghttp2_session *session, const nghttp2_frame_hd *hd, void *user)
{
    struct h2 *h2 = user;

    if (chattered(h2, hd)) {
        return NGHTTP2_ERR_CALLBACK_FAILURE; /* GOAWAY with ENHANCE_YOUR_CALM (sxe__h2_read) */
    }
    if (hd->type != NGHTTP2_HEADERS || hd->stream_id > h2->last_id ||
        nghttp2_session_find_stream(session, hd->stream_id) != NULL) {
        return 0;
    }
    for (size_t i = 0; i < sizeof(h2->reset) / sizeof(h2->reset[0]); i++) {
        if (h2->reset[i] == hd->stream_id) {
            return 0;
        }
    }
    SXE_LOG_DEBUG("HTTP/2: HEADERS on stream %d, closed or skipped; closing the connection",
                  hd->stream_id);
    return NGHTTP2_ERR_CALLBACK_FAILURE; /* GOAWAY with PROTOCOL_ERROR (sxe__h2_read) */
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
    struct h2 *h2 = user;

    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0;
    }
    h2->last_id = frame->hd.stream_id;
    struct h2_stream *stream = sxe__h2_alloc(h2, sizeof(*stream) + H2_FIELD_ROOM_MIN);
    if (stream == NULL) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset */
    }
    *stream = (struct h2_stream){.h2 = h2,
                                 .id = frame->hd.stream_id,
                                 .began = sxe_loop_now(sxe_conn_loop(h2->conn)),
                                 .next = h2->all,
                                 .fields = (char *)(stream + 1), /* a head's first fields */
                                 .fields_room = H2_FIELD_ROOM_MIN};
    if (h2->all != NULL) {
        h2->all->prev = stream;
    }
    h2->all = stream;
    return nghttp2_session_set_stream_user_data(session, stream->id, stream);
}

/* Appends bytes to a stream's fields, as its head's limit allows. */
static int add_to_fields(struct h2_stream *stream, const void *bytes, size_t count)
{
    size_t len = stream->fields_len, room = stream->fields_room;
    int rc = append(stream->h2, &stream->fields, &len, &room, bytes, count,
                    stream->h2->server->config.limits.header_bytes, (const char *)(stream + 1));

    stream->fields_len = (uint32_t)len;
    stream->fields_room = (uint32_t)room;
    return rc;
}

/* Where a pseudo-field's value is kept, by its name; NULL for one not kept (:scheme). */
static uint32_t *pseudo(struct h2_stream *stream, const uint8_t *name, size_t len)
{
    return len == 7 && memcmp(name, ":method", 7) == 0        ? stream->method
           : len == 5 && memcmp(name, ":path", 5) == 0        ? stream->target
           : len == 10 && memcmp(name, ":authority", 10) == 0 ? stream->authority
                                                              : NULL;
}

/* Whether a host field may come with the request: an authority, the only one, and the same as
 * :authority if that came (RFC 9113 §8.3.1): two names would let two servers disagree on which
 * host a request is for. */
static bool host_agrees(const struct h2_stream *stream, const uint8_t *value, size_t len)
{
    const char *fields = stream->fields;

    if (!sxe_http_host_valid((const char *)value, len)) {
        return false;
    }
    for (uint32_t at = stream->regular_at; at < stream->fields_len;) { /* a host field before */
        size_t name_len = strlen(fields + at), value_len = strlen(fields + at + name_len + 1);
        if (name_len == 4 && memcmp(fields + at, "host", 4) == 0) {
            return false;
        }
        at += (uint32_t)(name_len + value_len + 2);
    }
    return stream->authority[1] == 0 ||
           (stream->authority[1] == len &&
            strncasecmp(fields + stream->authority[0], (const char *)value, len) == 0);
}

/*
 * A field of a request's head, checked by the session already (names in lower case, no
 * connection-specific ones, pseudo-fields first and once each). Trailers are not kept. Past a
 * limit the request is answered at once (414, 431), and the rest of it is dropped.
 */
static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t name_len, const uint8_t *value, size_t value_len, uint8_t flags,
                     void *user)
{
    struct h2_stream *stream = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    const struct sxe_http_limits *limits = &((struct h2 *)user)->server->config.limits;
    int rc = 0;

    (void)flags;
    if (stream == NULL || frame->headers.cat != NGHTTP2_HCAT_REQUEST || stream->refused) {
        return 0;
    }
    if (name_len > 0 && name[0] == ':') { /* the session put these first */
        uint32_t *kept = pseudo(stream, name, name_len);
        if (kept == stream->target && value_len + 1 > limits->request_line) {
            refuse(stream, 414);
            return 0;
        }
        if (kept == stream->authority && !sxe_http_host_valid((const char *)value, value_len)) {
            refuse(stream, 400); /* as a Host field that is not one is over HTTP/1.1 */
            return 0;
        }
        if (kept != NULL && (rc = add_to_fields(stream, value, value_len)) == 0) {
            kept[0] = stream->fields_len - (uint32_t)value_len;
            kept[1] = (uint32_t)value_len;
        }
        stream->regular_at = stream->fields_len;
    } else if (name_len == 4 && memcmp(name, "host", 4) == 0 &&
               !host_agrees(stream, value, value_len)) {
        refuse(stream, 400);
        return 0;
    } else if (stream->field_count == limits->header_count) {
        rc = -E2BIG;
    } else if ((rc = add_to_fields(stream, name, name_len)) == 0 &&
               (rc = add_to_fields(stream, "", 1)) == 0 &&
               (rc = add_to_fields(stream, value, value_len)) == 0 &&
               (rc = add_to_fields(stream, "", 1)) == 0) {
        stream->field_count++;
    }
    if (rc < 0) {
        refuse(stream, rc == -E2BIG ? 431 : 503);
    }
    return 0;
}

/*
 * A streamed body that cannot go on (too large, too slow, no memory): answered with status if its
 * answer has not begun, and its holder cancelled; else its stream is reset, which cancels it.
 */
static void refuse_streamed(struct h2_stream *stream, struct slot *held, int status)
{
    struct h2 *h2 = stream->h2;

    if (held != NULL && held->http.status != 0) {
        stream->refused = true; /* the rest is dropped, without a reset for each piece */
        sxe__h2_reset(stream);
        return;
    }
    refuse(stream, status);
    if (held != NULL) {
        stream->slot = NULL;
        held->http.h2 = NULL; /* its answer was given for it */
        sxe__http_defer_cancel_one(h2->server, h2->conn, held);
    }
}

/* Body bytes of a streamed request: kept for its reader, within its limit and the body rate. */
static void streamed_data(struct h2_stream *stream, const uint8_t *data, size_t len)
{
    sxe_http_server_t *server = stream->h2->server;
    struct slot *held = sxe__h2_holder(stream);
    int rc;

    stream->body_seen += len;
    if (held == NULL) {
        rc = 0; /* answered: dropped */
    } else if (stream->body_seen > stream->body_limit) {
        rc = 413;
    } else if (sxe__http_body_too_slow(server, held, len)) {
        SXE_LOG_INFO("a streamed body for %.*s came at under %u bytes a second: answering 408",
                     (int)held->request.target_len, held->request.target, server->config.body_rate);
        rc = 408;
    } else if ((rc = sxe__h2_body_came(stream, data, len)) == 0) {
        sxe__h2_body_feed(stream);
        return;
    } else {
        rc = 503;
    }
    (void)nghttp2_session_consume(stream->h2->session, stream->id, len); /* not kept: given back */
    if (rc != 0) {
        refuse_streamed(stream, held, rc);
    }
}

/*
 * Body bytes of a request: fed to its reader if its route streams (h2_body.c), else gathered up to
 * its limit (body_coming; past it, 413). The session gives no window back by itself: a gathered
 * body's and a dropped one's go back at once.
 */
static int on_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                   size_t len, void *user)
{
    struct h2_stream *stream = nghttp2_session_get_stream_user_data(session, id);
    struct h2 *h2 = user;

    (void)flags;
    if (stream != NULL && stream->streamed && !stream->refused) {
        streamed_data(stream, data, len);
        return 0;
    }
    (void)nghttp2_session_consume(session, id, len);
    if (stream == NULL || stream->refused) {
        return 0;
    }
    int rc = append(h2, &stream->body, &stream->body_len, &stream->body_room, data, len,
                    stream->body_limit, NULL);
    if (rc < 0) {
        refuse(stream, rc == -E2BIG ? 413 : 503);
    }
    return 0;
}

/* The request as the handler reads it, pointing into the stream's own copy of its fields. */
static void request_head(struct h2_stream *stream, struct sxe_http_request_head *request)
{
    const char *fields = stream->fields;

    *request = (struct sxe_http_request_head){.method = fields + stream->method[0],
                                              .method_len = stream->method[1],
                                              .target = fields + stream->target[0],
                                              .target_len = stream->target[1],
                                              .minor_version = 1,
                                              .content_length = stream->body_len,
                                              .has_body = stream->body_len > 0,
                                              .keep_alive = true};
    if (stream->streamed) { /* its body is to come: as long as its field says, or to END_STREAM */
        request->has_body = true;
        request->content_length = stream->content_length >= 0 ? stream->content_length : 0;
        request->chunked = stream->content_length < 0;
    }
    if (stream->authority[1] > 0) {
        request->host = fields + stream->authority[0];
        request->host_len = stream->authority[1];
        request->host_count = 1;
    }
    for (uint32_t at = stream->regular_at; at < stream->fields_len;) {
        struct sxe_http_header *header = &request->headers[request->header_count++];
        header->name = fields + at;
        header->name_len = strlen(header->name);
        header->value = header->name + header->name_len + 1;
        header->value_len = strlen(header->value);
        at += (uint32_t)(header->name_len + header->value_len + 2);
        if (request->host == NULL && header->name_len == 4 &&
            memcmp(header->name, "host", 4) == 0) {
            request->host = header->value;
            request->host_len = header->value_len;
            request->host_count = 1;
        }
    }
}

/*
 * A request is complete, or its head is and its route streams its body: dispatched in a slot as
 * over HTTP/1.1 (its answer goes to the stream). A CONNECT has no path: tunnels are not served
 * (501), as over HTTP/1.1.
 */
static void dispatch(struct h2_stream *stream)
{
    struct h2 *h2 = stream->h2;
    sxe_http_server_t *server = h2->server;

    stream->dispatched = true;
    if (stream->target[1] == 0) {
        refuse(stream, 501);
        return;
    }
    struct slot *slot = sxe__http_slot_next(server);
    request_head(stream, &slot->request);
    server->h2_answering = stream;
    enum sxe__dispatched what =
        stream->streamed
            ? sxe__http_dispatch(server, h2->conn, slot, NULL, 0, true)
            : sxe__http_dispatch(server, h2->conn, slot, stream->body, stream->body_len, false);
    server->h2_answering = NULL;
    if (what != SXE__HELD) {
        return;
    }
    server->running = NULL;
    if (slot->http.finished) { /* answered before its handler returned */
        sxe__http_slot_release(server, slot);
        return;
    }
    stream->slot = slot; /* enlisted, so that the connection's close cancels it */
    stream->serial = slot->http.serial;
    sxe__http_enlist(server, sxe__http_state(server, h2->conn), slot);
}

/*
 * A request's head has come, and a body follows: its limit is its route's. A streamed route's
 * (SXE_HTTP_ROUTE_STREAM) is options.stream_body_bytes, and its handler runs now.
 */
static void body_coming(struct h2_stream *stream)
{
    sxe_http_server_t *server = stream->h2->server;
    struct sxe_http_request_head request = {.method = stream->fields + stream->method[0],
                                            .method_len = stream->method[1],
                                            .target = stream->fields + stream->target[0],
                                            .target_len = stream->target[1]};

    stream->body_limit = server->config.limits.body_bytes;
    stream->streamed = server->config.has_stream_routes && stream->target[1] > 0 &&
                       sxe__http_streams(server, &request);
    if (stream->streamed) {
        stream->body_limit = server->config.stream_body_bytes;
    }
    stream->content_length = -1;
    for (uint32_t at = stream->regular_at; at < stream->fields_len;) {
        const char *name = stream->fields + at, *value = name + strlen(name) + 1;
        at += (uint32_t)(value - name) + (uint32_t)strlen(value) + 1;
        if (strcmp(name, "content-length") == 0) { /* the session checked it: digits, matched */
            stream->content_length = (int64_t)strtoull(value, NULL, 10);
        }
    }
    if (stream->content_length > 0 && (uint64_t)stream->content_length > stream->body_limit) {
        refuse(stream, 413); /* now, not after that much has come */
    } else if (stream->streamed) {
        dispatch(stream);
    }
}

static int on_frame(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
    struct h2_stream *stream = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);

    (void)user;
    if (stream != NULL && !stream->refused && frame->hd.type == NGHTTP2_HEADERS &&
        frame->headers.cat == NGHTTP2_HCAT_REQUEST &&
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        body_coming(stream);
    }
    if (stream == NULL || stream->refused ||
        (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        return 0;
    }
    if (stream->streamed) {
        stream->body_ended = true;
        sxe__h2_body_feed(stream);
    } else if (!stream->dispatched) {
        dispatch(stream);
    }
    return 0;
}

/*
 * The request a stream's slot holds, or NULL: the slot it was held in may have been freed since
 * (its answer finished while its last DATA waited for the window) and taken by another request,
 * on this connection or another, which this stream must not touch. A slot's serial names its
 * request.
 */
static struct slot *held_by(struct h2_stream *stream)
{
    struct slot *held = sxe__h2_holder(stream);

    stream->slot = NULL;
    return held;
}

/* A stream reset by either side: frames in flight on it are ignored (on_begin_frame). */
static void remember_reset(struct h2 *h2, int32_t id)
{
    h2->reset[h2->reset_next++ % (sizeof(h2->reset) / sizeof(h2->reset[0]))] = id;
}

/*
 * An answer ended while its request's body was still coming (refused, or answered without it):
 * the client is asked to stop sending it with RST_STREAM NO_ERROR, which leaves the answer whole
 * (RFC 9113 §8.1), rather than spend its window on bytes that are dropped.
 */
static int on_frame_sent(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
    int32_t id = frame->hd.stream_id;

    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        nghttp2_session_get_stream_remote_close(session, id) == 0) {
        remember_reset(user, id);
        return nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR) ==
                       NGHTTP2_ERR_NOMEM
                   ? NGHTTP2_ERR_CALLBACK_FAILURE
                   : 0;
    }
    return 0;
}

/* A stream ended: answered, or reset by either side. A request still held is cancelled. */
static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code, void *user)
{
    struct h2 *h2 = user;
    struct h2_stream *stream = nghttp2_session_get_stream_user_data(session, id);

    if (stream == NULL) {
        return 0;
    }
    SXE_LOG_DEBUG("HTTP/2 stream %d closed: %s", id, nghttp2_http2_strerror(error_code));
    if (error_code != NGHTTP2_NO_ERROR) { /* reset: frames in flight on it are ignored */
        remember_reset(h2, id);
    }
    struct slot *held = held_by(stream);
    if (held != NULL) {
        if (!held->http.finished) {
            sxe__http_defer_cancel_one(h2->server, h2->conn, held);
        }
        held->http.h2 = NULL; /* a finished one is freed by its finish, after this */
    }
    *(stream->prev != NULL ? &stream->prev->next : &h2->all) = stream->next;
    if (stream->next != NULL) {
        stream->next->prev = stream->prev;
    }
    if (stream->streamed) {
        sxe__h2_body_forget(stream); /* what its reader did not take holds nothing back now */
    }
    sxe__h2_stream_free(stream);
    return 0;
}

/*
 * Requests still arriving past the header timeout (the loop's read_timeout) get 408, as over
 * HTTP/1.1, and their bodies are let go: a client that trickles many of them, keeping the
 * connection alive with PINGs, holds nothing for long. Checked at each read, over the streams,
 * while the session is busy: the answers go after, and the streams they end are freed then.
 */
static void late(struct h2 *h2)
{
    sxe_loop_t *loop = sxe_conn_loop(h2->conn);
    uint64_t timeout = sxe_loop_options(loop)->read_timeout, now = sxe_loop_now(loop);

    for (struct h2_stream *stream = h2->all; stream != NULL && timeout != 0;
         stream = stream->next) {
        if (!stream->dispatched && !stream->refused && now - stream->began > timeout) {
            SXE_LOG_DEBUG("HTTP/2 stream %d: its request did not all come in time", stream->id);
            refuse(stream, 408);
        }
    }
}

static nghttp2_session_callbacks *callbacks; /* the same for every session: made once */
static nghttp2_option *option;               /* windows given back by us (on_data, h2_body.c) */
static pthread_once_t callbacks_once = PTHREAD_ONCE_INIT;

static void callbacks_make(void)
{
    if (nghttp2_option_new(&option) != 0 || nghttp2_session_callbacks_new(&callbacks) != 0) {
        return; /* GCOVR_EXCL_LINE: out of memory at the first HTTP/2 connection */
    }
    nghttp2_option_set_no_auto_window_update(option, 1);
    nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks, on_begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, on_frame_sent);
}

bool sxe__h2_begin(sxe_http_server_t *server, sxe_conn_t *conn)
{
    struct h2 *h2 = malloc(sizeof(*h2));
    const struct sxe_http2_options *options = &server->config.http2;
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, options->max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, options->window},
        {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, options->max_frame},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, server->config.limits.header_bytes}};

    pthread_once(&callbacks_once, callbacks_make);
    if (options->off || h2 == NULL || callbacks == NULL) {
        free(h2);
        return false;
    }
    *h2 = (struct h2){.server = server, .conn = conn, .memory = malloc_usable_size(h2)};
    server->h2_memory += h2->memory;
    nghttp2_mem mem = {.mem_user_data = h2,
                       .malloc = mem_malloc,
                       .free = mem_free,
                       .calloc = mem_calloc,
                       .realloc = mem_realloc};
    /* The connection's window as large as a stream's, so that one stream can fill its own. */
    if (nghttp2_session_server_new3(&h2->session, callbacks, h2, option, &mem) != 0 ||
        nghttp2_submit_settings(h2->session, NGHTTP2_FLAG_NONE, settings,
                                sizeof(settings) / sizeof(settings[0])) != 0 ||
        nghttp2_session_set_local_window_size(h2->session, NGHTTP2_FLAG_NONE, 0,
                                              (int32_t)options->window) != 0) {
        nghttp2_session_del(h2->session); /* GCOVR_EXCL_LINE: out of memory */
        server->h2_memory -= h2->memory;  /* GCOVR_EXCL_LINE */
        free(h2);                         /* GCOVR_EXCL_LINE */
        return false;                     /* GCOVR_EXCL_LINE */
    }
    struct http_conn *state = sxe__http_state(server, conn);
    state->h2 = h2;
    state->framed = true;
    state->switch_to = &sxe__h2_events;
    SXE_LOG_DEBUG("HTTP/2 (%s)", sxe_conn_alpn_is(conn, "h2") ? "h2 by ALPN" : "h2c");
    return true;
}

void sxe__h2_offer(sxe_tls_t *tls)
{
    (void)sxe_tls_server_offer_h2(tls); /* a server context: it cannot fail */
}

void sxe__h2_going_away(sxe_http_server_t *server)
{
    for (uint32_t i = 0; i < server->conn_count; i++) {
        struct http_conn *state = &server->conns[i];
        if (state->framed) {
            (void)nghttp2_submit_goaway(state->h2->session, NGHTTP2_FLAG_NONE, state->h2->last_id,
                                        NGHTTP2_NO_ERROR, NULL, 0);
            sxe__h2_flush(state->h2);
        }
    }
}

size_t sxe__h2_read(sxe_http_server_t *server, sxe_conn_t *conn, const char *data, size_t len)
{
    struct h2 *h2 = sxe__http_state(server, conn)->h2;

    if (h2->ending) {
        return len;
    }
    h2->busy = true; /* answers given meanwhile go in the flush after, which may free streams */
    ssize_t used = nghttp2_session_mem_recv(h2->session, (const uint8_t *)data, len);
    if (used >= 0) {
        late(h2);
    }
    h2->busy = false;
    if (used < 0) { /* the preface was wrong, a flood, out of memory: GOAWAY if it can, and close */
        SXE_LOG_DEBUG("HTTP/2: %s; closing the connection", nghttp2_strerror((int)used));
        bool calm =
            used == NGHTTP2_ERR_FLOODED || used == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS || h2->calm;
        (void)nghttp2_session_terminate_session(h2->session, calm ? NGHTTP2_ENHANCE_YOUR_CALM
                                                                  : NGHTTP2_PROTOCOL_ERROR);
        sxe__h2_flush(h2);
        if (!sxe_conn_closed(conn) && sxe_conn_close_when_sent(conn) < 0) {
            sxe_conn_close(conn); /* GCOVR_EXCL_LINE: a close on its way already */
        }
        return len;
    }
    sxe__h2_flush(h2);
    return len;
}

/* The connection closed: its held requests are cancelled, then its streams and session freed. */
static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    sxe_http_server_t *server = sxe__http_server_of(conn);
    struct http_conn *state = sxe__http_state(server, conn);
    struct h2 *h2 = state->h2;

    (void)reason, (void)err;
    h2->busy = true; /* nothing more is sent */
    sxe__http_defer_cancel(server, conn);
    while (h2->all != NULL) {
        struct h2_stream *stream = h2->all;
        h2->all = stream->next;
        struct slot *held = held_by(stream);
        if (held != NULL) { /* orphaned: cancelled above, its holder not yet told */
            held->http.h2 = NULL;
        }
        sxe__h2_stream_free(stream);
    }
    nghttp2_session_del(h2->session);
    server->h2_memory -= h2->memory;
    free(h2);
    *state = (struct http_conn){0};
}

/* The output drained: more of the answers goes, and held requests that wait for room hear it. */
static void on_drained(sxe_conn_t *conn)
{
    sxe_http_server_t *server = sxe__http_server_of(conn);
    struct http_conn *state = sxe__http_state(server, conn);

    state->full = false;
    sxe__h2_flush(state->h2);
    if (!sxe_conn_backed_up(conn)) {
        sxe__http_defer_drained(server, conn);
    }
}

/* The client is done sending: the connection closes once the answers owed have gone out. */
static void on_eof(sxe_conn_t *conn)
{
    if (sxe_conn_close_when_sent(conn) < 0) {
        sxe_conn_close(conn);
    }
}

const struct sxe_conn_handlers sxe__h2_events = {
    .on_close = on_close, .on_drained = on_drained, .on_eof = on_eof};
