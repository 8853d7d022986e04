/*
 * The WebSocket module's own structures and helpers, shared by its files, which call one another
 * one way only, from the top down:
 *
 *   server.c     the sets (made, destroyed) and the handlers of every socket's connection
 *   client.c     a client's connect and handshake (its 101 checked)
 *   send.c       the program's calls: routes, accepting, sending, broadcasting, closing
 *   input.c      a socket's input: frames read into messages and handed out
 *   watch.c      messages under way, held to message_timeout and message_rate
 *   socket.c     a socket's life: opened, its groups, its frames sent, closing
 *   handshake.c, deflate.c, reader.c, frame.c, sha1.c: the protocol's pieces, calling none above
 *
 * Only the public API is used below this: no core internals.
 */
#ifndef SXE_WEBSOCKET_INTERNAL_H
#define SXE_WEBSOCKET_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sxe/conn.h"
#include "sxe/http.h"
#include "sxe/resolve.h"
#include "sxe/timer.h"
#include "sxe/websocket.h"

#define SXE__WS_CONTINUATION 0x0
#define SXE__WS_CLOSE        0x8
#define SXE__WS_PING         0x9
#define SXE__WS_PONG         0xa
#define SXE__WS_RSV1         0x40 /* or'ed into an opcode to write: a compressed message */

/* The most a message of most bytes takes deflated: deflate adds a little to what does not
 * compress (zlib's deflateBound is about 0.03% and 13 bytes); the limit is on the inflated size. */
#define SXE__WS_DEFLATED_MOST(most) ((most) + ((most) >> 10) + 64)

#define SXE__WS_HEAD_MAX  14 /* 2, 8 bytes of length, 4 of mask */
#define SXE__WS_PROTOCOLS 16 /* sub-protocol names a server knows */
#define SXE__WS_ROUTES    16
#define SXE__WS_TARGETS   8 /* the requests a client set sends: path, host and protocols */

/* A frame's head (RFC 6455 §5.2). */
struct sxe__ws_frame {
    bool fin;
    uint8_t rsv;    /* the three reserved bits, 0 unless an extension says otherwise */
    uint8_t opcode; /* 0x0 continuation, 0x1 text, 0x2 binary, 0x8 close, 0x9 ping, 0xa pong */
    bool masked;
    uint8_t mask[4];
    uint64_t len; /* of the payload */
    size_t head;  /* bytes of the head: 2 to 14 */
};

/*
 * Reads a frame's head at data. @return its length (the payload follows), 0 if more bytes are
 * needed, or -1 if it cannot be one (a 64-bit length with its top bit set).
 */
int sxe__ws_frame_head(const uint8_t *data, size_t len, struct sxe__ws_frame *frame);

/* Writes an unmasked frame's head (a server's) to out; mask, if not NULL, masks it (a client's).
 * @return its length. */
size_t sxe__ws_frame_encode(uint8_t out[SXE__WS_HEAD_MAX], bool fin, unsigned opcode, uint64_t len,
                            const uint8_t *mask);

/* XORs len bytes with mask, the first of them being byte offset of the payload. */
void sxe__ws_unmask(uint8_t *data, size_t len, const uint8_t mask[4], size_t offset);

/* The reading side of a socket: a message under way, joined at the front of the input. */
struct sxe__ws_reader {
    uint32_t assembled; /* bytes of a fragmented message joined at the front of the input */
    uint32_t checked;   /* of those, the text checked as UTF-8 */
    uint8_t message;    /* the type of a fragmented message under way, or 0 */
    bool client;        /* reading a server's frames: they must not be masked */
    bool deflate;       /* permessage-deflate was agreed: RSV1 marks a compressed message */
    bool compressed;    /* the message under way is compressed (its text is checked inflated) */
};

/* What sxe__ws_read() found. */
enum {
    SXE__WS_MORE,     /* the next frame is not whole yet */
    SXE__WS_FRAGMENT, /* a fragment, joined: nothing to hand out */
    SXE__WS_MESSAGE,  /* a whole message: event's opcode (1, 2), data and len */
    SXE__WS_CONTROL,  /* a control frame: event's opcode (8, 9, 10), data and len */
    SXE__WS_ERROR,    /* the peer broke the protocol: event's code and error */
};

struct sxe__ws_event {
    unsigned opcode;
    bool compressed; /* a message: its bytes are deflated, and its text not yet checked */
    uint8_t *data;
    size_t len;
    unsigned code;
    const char *error;
};

/*
 * Reads the frame at data + *at (len bytes in all, the joined message at the front) and, if it is
 * whole, moves *at past it. Messages are at most most bytes. @return SXE__WS_*, with event set.
 */
int sxe__ws_read(struct sxe__ws_reader *reader, uint8_t *data, size_t len, size_t *at, size_t most,
                 struct sxe__ws_event *event);

/* After the reads of one input, up to at: the bytes on_read consumes (the joined part is moved up
 * to be kept). */
size_t sxe__ws_read_done(const struct sxe__ws_reader *reader, uint8_t *data, size_t at);

/* Whether a close code may be sent in a close frame (RFC 6455 §7.4). */
bool sxe__ws_code_valid(unsigned code);

void sxe__sha1(const void *data, size_t len, uint8_t digest[20]);
size_t sxe__base64(const void *data, size_t len, char *out);
bool sxe__ws_key_valid(const char *key, size_t len);

enum ws_state {
    WS_FREE,
    WS_CONNECTING, /* a client's: its handshake is sent, the server's 101 awaited */
    WS_OPEN,
    WS_CLOSING, /* our close frame sent: waiting for the peer's (close_timeout) */
    WS_DONE,    /* closed for the program (on_close called): the TCP connection ends */
};

/* One socket, in a table indexed like the loop's connections. */
struct sxe_ws {
    sxe_ws_server_t *server;
    sxe_conn_t *conn;
    void *user;
    struct sxe__ws_reader reader;
    uint32_t group;
    uint32_t group_prev; /* links in the group's list: table indices, or UINT32_MAX */
    uint32_t group_next;
    /* One of three, by the socket's state: a socket is on the closing list only once it is
     * closing, its messages are watched only while it is open, and a client has a key only while
     * it connects. Each costs no memory beside the others'. */
    union {
        struct {
            uint32_t closing_next; /* links in the list of sockets waiting for a close frame */
            uint32_t closing_prev;
            uint64_t close_deadline;
        };
        struct {
            uint32_t way_next; /* links in the list of messages under way (watch.c) */
            uint32_t way_prev;
            uint64_t way_since; /* when the message under way began (loop time) */
        };
        uint8_t nonce[16]; /* a connecting client's handshake key, before it can be closing */
    };
    uint8_t state;    /* enum ws_state */
    uint8_t protocol; /* index into the server's protocol names, or 0xff for none */
    uint8_t target;   /* a client's: index into the set's handshake requests */
    uint8_t deflate;  /* permessage-deflate: the window bits we keep to, or 0 */
    bool pinged;      /* a keep-alive ping has gone unanswered */
    bool under_way;   /* an open socket's message has begun and not ended: on the way list */
    uint8_t large;    /* its message outgrew an ordinary buffer: its place in large[] + 1, or 0 */
};

/* A message in a large buffer, held to options.message_rate (watch.c). */
struct sxe__ws_large {
    uint32_t socket; /* its index in the table */
    uint64_t since;  /* when its window began: it outgrew an ordinary buffer, or the last ended */
    uint64_t start;  /* its bytes then */
    uint64_t bytes;  /* its bytes now */
};

/* A broadcast frame, sent by reference to many sockets: free when refs falls to 0. */
struct broadcast {
    uint32_t refs;
    uint32_t len;
    uint8_t *frame;
};

struct route {
    sxe_ws_server_t *server;
    char protocols[256];
};

struct sxe_ws_server {
    struct sxe_conn_handlers handlers; /* every socket's: how one finds its server */
    struct sxe_ws_handlers program;    /* the program's */
    struct sxe_ws_options options;
    sxe_http_server_t *http;
    sxe_loop_t *loop;
    struct sxe_ws *sockets; /* one per connection of the loop */
    uint32_t socket_count;
    uint32_t *group_heads;
    struct broadcast *broadcasts;
    uint8_t *broadcast_memory;
    sxe_timer_t close_timer; /* the first socket of the closing list's deadline */
    uint32_t closing_head, closing_tail;
    /* Messages under way (watch.c): a list in the order they began, those in large buffers. */
    uint32_t way_head, way_tail;
    sxe_timer_t watch_timer;
    struct sxe__ws_large *large;
    uint32_t large_count, large_capacity;
    uint32_t large_above; /* bytes past which input is in a large buffer: the loop's buffer_size */
    char protocol_names[SXE__WS_PROTOCOLS][32];
    unsigned protocol_count;
    struct route routes[SXE__WS_ROUTES];
    unsigned route_count;
    char targets[SXE__WS_TARGETS][512]; /* clients' handshake requests, each but for its key */
    unsigned target_count;
    uint64_t random; /* clients' masks and keys (sxe__ws_random()) */
    uint32_t doomed; /* destroyed: the closes still to end before its memory goes (server.c) */
    struct sxe__ws_deflate *deflate; /* shared compression (deflate.c), with options.deflate */
    struct sxe_ws_server_stats stats;
};

/* A set of client sockets: a server's table, timers and handlers without routes or an HTTP
 * server. Its set is its first member, so a client and its set are one allocation. */
struct sxe_ws_client {
    struct sxe_ws_server set;
    sxe_resolver_t *own_resolver; /* for names, without options.resolver (made the first time) */
    sxe_tls_t *own_tls;           /* for wss:// URLs, without options.tls */
};

/* The socket's index in its set's table (and its connection's in the loop). */
static inline uint32_t sxe__ws_index(const struct sxe_ws *ws)
{
    return (uint32_t)(ws - ws->server->sockets);
}

/* The next of the set's random numbers (a client's masks and keys): splitmix64, seeded by
 * sxe__ws_seed(). */
static inline uint64_t sxe__ws_random(sxe_ws_server_t *server)
{
    uint64_t z = (server->random += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/*
 * The socket has no message under way any more: off watch.c's list and its table of large
 * buffers. Inline because a socket's closing (socket.c), below watch.c, takes it off too.
 */
static inline void sxe__ws_unwatch(struct sxe_ws *ws)
{
    sxe_ws_server_t *server = ws->server;

    if (ws->large != 0) {
        struct sxe__ws_large *entry = &server->large[ws->large - 1];
        *entry = server->large[--server->large_count]; /* the last takes its place */
        if (entry->socket != sxe__ws_index(ws)) {
            server->sockets[entry->socket].large = ws->large;
        }
        ws->large = 0;
    }
    if (!ws->under_way) {
        return;
    }
    ws->under_way = false;
    if (ws->way_prev != UINT32_MAX) {
        server->sockets[ws->way_prev].way_next = ws->way_next;
    } else {
        server->way_head = ws->way_next;
    }
    if (ws->way_next != UINT32_MAX) {
        server->sockets[ws->way_next].way_prev = ws->way_prev;
    } else {
        server->way_tail = ws->way_prev;
    }
    ws->way_next = ws->way_prev = UINT32_MAX; /* the links are the closing list's again: on none */
}

/* client.c: a client's connection is up: its handshake goes out. */
void sxe__ws_client_connected(struct sxe_ws *ws);

/* client.c: the server's answer to a client's handshake, then frames. @return bytes consumed. */
size_t sxe__ws_client_read(struct sxe_ws *ws, uint8_t *data, size_t len);

/* client.c: seeds the set's random numbers (sxe__ws_random()). */
void sxe__ws_seed(sxe_ws_server_t *server);

/* send.c: the index of a sub-protocol's name in the set's table, added if new; 0xff for none;
 * -ENOBUFS when the table is full. */
int sxe__ws_protocol_index(sxe_ws_server_t *server, const char *protocol);

/* input.c: the frames in len bytes at data, read and handed out. @return the bytes consumed. */
size_t sxe__ws_frames(struct sxe_ws *ws, uint8_t *data, size_t len);

/* watch.c: after a read, pending bytes of a message under way are kept (0: none), and whether a
 * whole message was delivered in it. */
void sxe__ws_watch(struct sxe_ws *ws, size_t pending, bool delivered);
int sxe__ws_watch_init(sxe_ws_server_t *server, const struct sxe_loop_options *loop);
void sxe__ws_watch_fini(sxe_ws_server_t *server);

/* socket.c: the socket opens: linked in group 0, counted, on_open called. */
void sxe__ws_opened(struct sxe_ws *ws);

/* socket.c: a handshake answered 101 on conn: the socket opens (on_open). */
int sxe__ws_open(sxe_ws_server_t *server, sxe_conn_t *conn, unsigned protocol, unsigned deflate);

/* socket.c: moves the socket to another group's list. */
void sxe__ws_group_move(struct sxe_ws *ws, uint32_t group);

/* socket.c: queues a whole frame, masked if the socket is a client's. @return as
 * sxe_conn_write(). */
int sxe__ws_write(struct sxe_ws *ws, unsigned opcode, const void *data, size_t len);

/* socket.c: queues a close frame with code (0: none) and reason. */
void sxe__ws_send_close(struct sxe_ws *ws, unsigned code, const char *reason, size_t reason_len);

/* socket.c: tells the program the socket closed, once: from then on it is not the program's. */
void sxe__ws_report_close(struct sxe_ws *ws, unsigned code, const char *reason, size_t reason_len);

/* socket.c: ends the socket with a close code of ours (1002, 1007, 1008, 1009) and why. */
void sxe__ws_fail(struct sxe_ws *ws, unsigned code, const char *why);

/* socket.c: sends our close frame and waits for the peer's (close_timeout). */
void sxe__ws_start_close(struct sxe_ws *ws, unsigned code, const char *reason, size_t reason_len);

/* socket.c: the peer's close frame came, with its payload: answered, the program told. */
void sxe__ws_closed_by_peer(struct sxe_ws *ws, const uint8_t *payload, size_t len);

/* socket.c: takes the socket off the list of those waiting for a close frame, if it is on it. */
void sxe__ws_closing_remove(struct sxe_ws *ws);

/* socket.c: the close timer's callback (arg: the set): the sockets whose close_timeout has
 * passed are cut off. */
void sxe__ws_closing_expired(sxe_timer_t *timer, void *arg);

/* handshake.c: answers the handshake with 101, or refuses it. @return 0, or -EPROTO if refused. */
int sxe__ws_handshake(sxe_http_t *http, const char *protocol, const char *extensions,
                      const struct sxe_conn_handlers *to);

/* deflate.c: the shared streams and scratch areas of permessage-deflate. */
int sxe__ws_deflate_create(sxe_ws_server_t *server);
void sxe__ws_deflate_destroy(sxe_ws_server_t *server);

/*
 * deflate.c: the first permessage-deflate offer of the request that can be taken, answered in
 * answer. @return the window bits we keep to (9 to 15), or 0 for none taken.
 */
int sxe__ws_deflate_negotiate(const struct sxe_http_request_head *request, char *answer,
                              size_t size);

/* deflate.c: a message compressed with a window of bits (the block's tail left off), or NULL
 * when compressing would not make it smaller. Valid until the next call. */
const uint8_t *sxe__ws_deflate(sxe_ws_server_t *server, unsigned bits, const void *data, size_t len,
                               size_t *out_len);

/* deflate.c: a message inflated, or NULL with *code 1009 (past message_bytes) or 1007 (not
 * deflate). Valid until the next call. */
const uint8_t *sxe__ws_inflate(sxe_ws_server_t *server, const uint8_t *data, size_t len,
                               size_t *out_len, unsigned *code);

/* handshake.c: whether the header fields called name hold token, in their comma lists. */
bool sxe__ws_has_token(const struct sxe_http_header *headers, unsigned count, const char *name,
                       const char *token, size_t token_len);

#endif
