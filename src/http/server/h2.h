/*
 * HTTP/2's own structures, shared by h2.c (the session, reading) and h2_send.c (answers). Built
 * only with libnghttp2; the rest of the server sees them through server.h's declarations.
 */
#ifndef SXE_HTTP_H2_INTERNAL_H
#define SXE_HTTP_H2_INTERNAL_H

#include <nghttp2/nghttp2.h>

#include "server.h"

/* An HTTP/2 connection: its session, and the memory it and its streams hold. */
struct h2 {
    nghttp2_session *session;
    sxe_http_server_t *server;
    sxe_conn_t *conn;
    size_t memory;    /* bytes held by the session and the streams (malloc_usable_size) */
    bool busy;        /* inside the session (a read or a send): answers wait for the flush */
    bool again;       /* a flush was asked for while busy: the one running goes round again */
    bool ending;      /* GOAWAY given and taken: our side is shut, the client's bytes dropped */
    bool drained;     /* a stream that was backed up has given the session all its pieces */
    bool calm;        /* the client chattered past its budget: ENHANCE_YOUR_CALM (h2.c) */
    uint32_t chatter; /* frames that carried no request in the second from chatter_since */
    uint64_t chatter_since; /* the loop's clock */
    int32_t last_id;        /* the highest stream the client opened */
    size_t unread;    /* streamed bodies' bytes kept, not yet taken by their readers (h2_body.c) */
    size_t owed;      /* of those, bytes the connection's window was not given back for yet */
    int32_t reset[8]; /* streams reset lately, whose frames in flight are ignored */
    unsigned reset_next;
    struct h2_stream *all; /* every stream the session has, to free them with it */
};

/* A connection's memory: its session, HPACK tables, streams, requests and copied answers; and
 * the server's, each loop's HTTP/2 connections' together. */
#define SXE__H2_MEMORY_MAX        (16u * 1024 * 1024)
#define SXE__H2_SERVER_MEMORY_MAX (256u * 1024 * 1024)

/* An answer's bytes waiting on its stream at which the stream is backed up: a streamed answer
 * (a proxied body) stops there until they are out, so that a client that reads one stream
 * slowly holds that stream's sender back, not its connection's memory. */
#define SXE__H2_STREAM_HIGH_WATER (64u * 1024)

/* A piece of an answer's body waiting for its stream's window: bytes (copied after the struct, or
 * the caller's), or a file range. */
struct h2_piece {
    struct h2_piece *next;
    const char *data;
    size_t len;
    int fd; /* a file range's, else -1 */
    bool close_fd;
    off_t offset;
    sxe_conn_release_t release;
    void *arg;
};

/*
 * A stream: the request as it arrives (its fields copied, its body gathered), then its answer's
 * body, its pieces taken as the window allows.
 * It outlives its slot when the handler answers at once, and its slot outlives it when the
 * client resets it while the request is held (the holder is told: sxe__http_defer_cancel_one).
 */
struct h2_stream {
    struct h2 *h2;
    struct h2_stream *next, *prev; /* h2->all */
    int32_t id;
    struct slot *slot; /* the request's while it is held, or NULL */
    uint64_t serial;   /* the held request's (its slot's http.serial): the slot may be reused */
    uint64_t began;    /* the loop's clock when its head began */
    /* The request: the pseudo-fields' values as they came, then each field as name NUL value NUL
     * from regular_at on. */
    char *fields;
    uint32_t fields_len;
    uint32_t fields_room;
    uint32_t method[2], target[2], authority[2]; /* where in fields, and how long (0: none) */
    uint32_t regular_at;
    uint32_t field_count;
    bool refused; /* answered while it arrived (too large): the rest is dropped */
    bool dispatched;
    bool streamed;   /* its route streams bodies: dispatched at its head, DATA fed (h2_body.c) */
    bool body_ended; /* the client's END_STREAM came */
    bool body_told;  /* the reader was handed the body's end */
    char *body;      /* gathered whole; or, streamed, the DATA not yet taken, from body_at */
    size_t body_len;
    size_t body_room;
    size_t body_at;
    uint64_t body_seen;     /* streamed: the body's bytes so far */
    uint64_t body_limit;    /* its route's (body_coming) */
    int64_t content_length; /* its content-length field's, or -1 */
    /* The answer: its head's fields, which the session points at until it sends them, and its
     * body's pieces. */
    nghttp2_nv *head;
    struct h2_piece *first, *last;
    bool ended;    /* sxe_http_finish(): the body ends after the pieces */
    bool waiting;  /* the data source found nothing yet: resumed when a piece comes */
    bool backed;   /* its pieces reached SXE__H2_STREAM_HIGH_WATER (sxe_http_backed_up()) */
    bool drained;  /* and then went out: its holder's on_drained is due */
    size_t queued; /* bytes in its pieces */
};

/* h2_send.c: memory counted against the connection's (NULL past its limit). */
void *sxe__h2_alloc(struct h2 *h2, size_t size);
void *sxe__h2_realloc(struct h2 *h2, void *p, size_t size);
void sxe__h2_free(struct h2 *h2, void *p);
/* h2_send.c: sends what the session has, while the connection takes it. Inside the session
 * (busy) it only asks the flush running, or the read's, to go round again. */
void sxe__h2_flush(struct h2 *h2);
/* h2_send.c: frees a stream and its answer's pieces (released as not sent). */
void sxe__h2_stream_free(struct h2_stream *stream);
/* h2_send.c: the request a stream's slot holds (its serial checked), or NULL. */
struct slot *sxe__h2_holder(struct h2_stream *stream);
/* h2_body.c: DATA of a streamed body came: kept, and handed out as its reader takes it. */
int sxe__h2_body_came(struct h2_stream *stream, const uint8_t *data, size_t len);
/* h2_body.c: hands a streamed body's kept DATA (and its end, once come) to its reader. */
void sxe__h2_body_feed(struct h2_stream *stream);
/* h2_body.c: a streamed stream closed: its kept DATA no longer holds the connection back. */
void sxe__h2_body_forget(struct h2_stream *stream);

#endif
