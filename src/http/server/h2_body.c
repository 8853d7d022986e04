/*
 * HTTP/2 request bodies that stream (routes made with SXE_HTTP_ROUTE_STREAM): the handler runs at
 * the request's head, and its body's DATA goes to the reader in pieces as it takes them
 * (sxe_http_body_stream(), sxe_http_body_read()). What the reader has not taken waits in the
 * stream's buffer, and the client's window is given back only as the reader takes: a reader that
 * pauses holds its client back by flow control, as TCP does over HTTP/1.1, and a stream's buffer
 * never outgrows its window. The connection's window is given back as DATA comes, so that one slow
 * reader does not hold back the connection's other streams, until its streams together keep more
 * than UNREAD_MAX untaken: then the whole connection waits for its readers.
 */
#include <string.h>

#include "h2.h"
#include "sxe/timer.h"

#define UNREAD_MAX (1024u * 1024)

/* A stream's buffer larger than this is freed once its reader has taken all of it. */
#define BODY_ROOM_KEPT (16u * 1024)

/* Unread bytes taken, or dropped: the connection's window owed for them goes back once it can. */
static void unread_less(struct h2 *h2, size_t bytes)
{
    h2->unread -= bytes;
    if (h2->owed > 0 && h2->unread <= UNREAD_MAX) {
        (void)nghttp2_session_consume_connection(h2->session, h2->owed);
        h2->owed = 0;
    }
}

int sxe__h2_body_came(struct h2_stream *stream, const uint8_t *data, size_t len)
{
    struct h2 *h2 = stream->h2;

    if (stream->body_at > 0) { /* what was taken goes: the rest moves to the front */
        memmove(stream->body, stream->body + stream->body_at, stream->body_len - stream->body_at);
        stream->body_len -= stream->body_at;
        stream->body_at = 0;
    }
    if (stream->body_len + len > stream->body_room) {
        size_t room = stream->body_room ? stream->body_room : 4096;
        while (room < stream->body_len + len) {
            room *= 2;
        }
        char *bigger = sxe__h2_realloc(h2, stream->body, room);
        if (bigger == NULL) {
            return -ENOBUFS;
        }
        stream->body = bigger;
        stream->body_room = room;
    }
    memcpy(stream->body + stream->body_len, data, len);
    stream->body_len += len;
    h2->unread += len;
    if (h2->unread <= UNREAD_MAX) {
        (void)nghttp2_session_consume_connection(h2->session, len);
    } else {
        h2->owed += len;
    }
    return 0;
}

/*
 * Hands out what the reader takes, in one pass. The session is kept busy meanwhile, so that an
 * answer the reader gives is sent after the pass, and the stream, which an answer may end, lives
 * until then. A reader may also close the connection, which frees the stream at once.
 */
void sxe__h2_body_feed(struct h2_stream *stream)
{
    struct h2 *h2 = stream->h2;
    sxe_conn_t *conn = h2->conn;
    sxe_http_server_t *server = h2->server;
    struct slot *held = sxe__h2_holder(stream);
    bool busy = h2->busy;
    size_t want;

    if (held == NULL || held->feeding) {
        return;
    }
    h2->busy = held->feeding = true;
    while (!stream->body_told && (want = sxe__http_body_wanted(held)) > 0) {
        size_t have = stream->body_len - stream->body_at;
        if (have == 0 && !stream->body_ended) {
            break;
        }
        size_t give = have < want ? have : want;
        const char *piece = stream->body != NULL ? stream->body + stream->body_at : "";
        stream->body_at += give;
        if (give > 0) {
            (void)nghttp2_session_consume_stream(h2->session, stream->id, give);
            unread_less(h2, give);
        }
        if (stream->body_ended && give == have) {
            stream->body_told = true;
            held->streaming = false;
            held->http.body_unread = false;
        }
        if (held->http.status == 0) { /* a body still arriving is progress: the deadline waits */
            int restarted =
                sxe_timer_start(server->loop, &held->deadline, server->config.response_timeout, 0);
            (void)restarted; /* it runs already: no new timer is taken */
        }
        sxe__http_body_hand(held, piece, give, stream->body_told);
        if (sxe_conn_closed(conn)) {
            return; /* closed by the reader: the session and its streams are gone */
        }
        if (sxe__h2_holder(stream) != held) {
            held = NULL; /* answered, or cancelled: the rest is dropped as it comes */
            break;
        }
    }
    if (held != NULL) {
        held->feeding = false;
        held->rate_restart = held->rate_restart || stream->body_at < stream->body_len;
    }
    if (stream->body_at == stream->body_len && stream->body_room > BODY_ROOM_KEPT) {
        sxe__h2_free(h2, stream->body); /* all taken: a large buffer is not held for nothing */
        stream->body = NULL;
        stream->body_len = stream->body_at = stream->body_room = 0;
    }
    h2->busy = busy;
    if (!busy) {
        sxe__h2_flush(h2); /* the windows given back, and any answer */
    }
}

void sxe__h2_body_offer(struct slot *held)
{
    if (held->http.h2->streamed) {
        sxe__h2_body_feed(held->http.h2);
    }
}

void sxe__h2_body_forget(struct h2_stream *stream)
{
    struct h2 *h2 = stream->h2;

    unread_less(h2, stream->body_len - stream->body_at);
    stream->body_at = stream->body_len;
}
