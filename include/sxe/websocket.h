/**
 * @file sxe/websocket.h
 * @brief WebSocket (RFC 6455) on the HTTP module: the handshake, messages, close, broadcast.
 *
 * A chat room is a handshake route, a message callback and a broadcast:
 *
 *     static void on_message(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
 *     {
 *         sxe_ws_server_broadcast(sxe_ws_server_of(ws), 0, type, data, len, NULL);
 *     }
 *     static const struct sxe_ws_handlers chat = {.on_message = on_message};
 *     ...
 *     if (sxe_http_server_create(&server, NULL, NULL) < 0 ||
 *         sxe_ws_server_create(&ws, server, &chat, NULL) < 0 ||
 *         sxe_ws_server_route(ws, "/chat", NULL) < 0 ||
 *         sxe_http_server_listen(server, "127.0.0.1:8080") < 0)
 *         return 1;
 *     return sxe_http_server_run(server);
 *
 * The handshake (RFC 6455 §4.2): a GET with Upgrade: websocket, Connection: upgrade, a
 * Sec-WebSocket-Key of 16 bytes in Base64 and Sec-WebSocket-Version: 13 is answered 101 with
 * Sec-WebSocket-Accept, and the connection leaves the HTTP module for this one. A request that is
 * not a WebSocket handshake is answered 426 (with Sec-WebSocket-Version: 13), a malformed one 400.
 * The route may choose a sub-protocol from those the client offers.
 *
 * Messages arrive whole: text or binary, in one frame or fragmented, with control frames (ping,
 * pong, close) between the fragments. A message waits in the connection's buffer and is unmasked
 * there: a message that fits one frame is handed to on_message where it lies, without a copy; the
 * fragments of a fragmented one are joined in place. Messages larger than the loop's buffer_size
 * grow in its large buffers (sxe_loop_options.large_buffers), up to options.message_bytes: past it
 * the socket is closed with 1009; when every large buffer is holding another socket's message, with
 * 1013 (try again later). The HTTP server's options.large_bodies sets how many there are. Text
 * is checked to be UTF-8 as each frame arrives, and a socket that sends invalid UTF-8 is closed
 * with 1007 at the first frame that has it. A frame that breaks the protocol (not masked, reserved
 * bits or opcodes, a control frame fragmented or over 125 bytes, a continuation out of place)
 * closes the socket with 1002.
 *
 * Closing: either side sends a close frame with a code and a reason, the other answers with one,
 * and the server closes the TCP connection. sxe_ws_close() starts it; a peer that does not answer
 * within options.close_timeout is cut off. on_close is called once for every socket that opened,
 * whichever side closed it and however (1006 when the connection ended without a close frame).
 *
 * Sending: sxe_ws_send() to one socket, sxe_ws_server_broadcast() to every socket of a group,
 * encoding the frame once and sending it by reference to all. A socket whose peer reads too slowly
 * (more than options.queue_bytes queued) is closed with 1008, or, with options.drop_when_full, its
 * messages are dropped and counted until it catches up.
 *
 * Keep-alive: a socket silent for the loop's idle_timeout is pinged; if it is still silent after
 * another idle_timeout, it is closed (1006 to on_close). All memory is fixed when the server is
 * made: a table of the loop's connections, small per-socket state, and options.broadcasts frames
 * for broadcasts in flight.
 *
 * One loop: the WebSocket server runs on the HTTP server's loop (an HTTP server with workers is
 * not supported yet: sxe_ws_server_create() refuses it). Callbacks run on the loop's thread, and
 * every sxe_ws_*() call must be made there.
 */
#ifndef SXE_WEBSOCKET_H
#define SXE_WEBSOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sxe/error.h"
#include "sxe/http.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One open WebSocket. Valid from on_open until on_close returns. */
typedef struct sxe_ws sxe_ws_t;

/** The WebSocket sockets of one loop: their handlers, options, table and groups. */
typedef struct sxe_ws_server sxe_ws_server_t;

/** A set of client sockets on one loop (sxe_ws_client_create()). */
typedef struct sxe_ws_client sxe_ws_client_t;

/** A message's type. */
enum sxe_ws_type {
    SXE_WS_TEXT = 1,   /**< UTF-8 text (checked). */
    SXE_WS_BINARY = 2, /**< Bytes. */
};

/** Close codes (RFC 6455 §7.4.1) that sxe uses or reports. */
#define SXE_WS_CLOSE_NORMAL       1000 /**< Done. */
#define SXE_WS_CLOSE_GOING_AWAY   1001 /**< The server stops, or the page goes. */
#define SXE_WS_CLOSE_PROTOCOL     1002 /**< The peer broke the protocol. */
#define SXE_WS_CLOSE_NO_STATUS    1005 /**< A close frame had no code (reported, never sent). */
#define SXE_WS_CLOSE_ABNORMAL     1006 /**< It ended without a close frame (reported). */
#define SXE_WS_CLOSE_INVALID_DATA 1007 /**< Text that is not UTF-8. */
#define SXE_WS_CLOSE_POLICY       1008 /**< The peer reads too slowly (options.queue_bytes). */
#define SXE_WS_CLOSE_TOO_BIG      1009 /**< A message over options.message_bytes. */
#define SXE_WS_CLOSE_SERVER_ERROR 1011 /**< The server could not go on. */
#define SXE_WS_CLOSE_TRY_AGAIN    1013 /**< No buffer free for a large message: try later. */

/** What happens on a socket. Every member may be NULL. */
struct sxe_ws_handlers {
    /** The handshake was answered 101: the socket is open. */
    void (*on_open)(sxe_ws_t *ws);

    /**
     * A whole message. data is valid until the callback returns (it lies in the connection's
     * buffer); copy what must outlive it. Text is valid UTF-8 and not NUL-terminated.
     */
    void (*on_message)(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len);

    /**
     * The socket closed: code and reason are the peer's close frame's (SXE_WS_CLOSE_NO_STATUS and
     * an empty reason if it had none), or the code the server closed with (1002, 1007, 1008, 1009,
     * or the program's sxe_ws_close()), or SXE_WS_CLOSE_ABNORMAL if the connection just ended.
     * Called once; the handle is gone when it returns. Sends from here fail.
     */
    void (*on_close)(sxe_ws_t *ws, int code, const char *reason, size_t reason_len);
};

/** Options. Zero fields take the defaults shown. */
struct sxe_ws_options {
    uint32_t message_bytes; /**< Largest message taken whole (1 MiB); past it, 1009. */
    uint32_t queue_bytes;   /**< Most bytes queued to one socket (1 MiB); past it, 1008. */
    bool drop_when_full;    /**< Past queue_bytes, drop messages (counted) instead of closing. */
    uint64_t close_timeout; /**< ns to wait for the peer's close frame (5 s). */
    /**
     * ns a message may take to arrive whole from its first byte, fragments and all (30 s); past
     * it, 1008. Pings and pongs keep an idle socket open, not a message that has stalled.
     */
    uint64_t message_timeout;
    /**
     * Once a message outgrows the loop's buffer_size (it then holds one of the few large buffers),
     * the bytes per second it must keep coming at, over every window of three to four seconds from
     * then (16384); else 1008, and the buffer is let go at once.
     */
    uint32_t message_rate;
    bool no_ping;             /**< Do not ping silent sockets: close them at idle_timeout. */
    uint32_t groups;          /**< Groups of sxe_ws_server_broadcast() (16); sockets start in 0. */
    uint32_t broadcasts;      /**< Broadcast frames in flight at once (64; a client set: 0). */
    uint32_t broadcast_bytes; /**< Largest broadcast message (65536). */
    /**
     * permessage-deflate (RFC 7692), taken when a client offers it: messages of 32 bytes or more
     * are sent compressed when that makes them smaller, and compressed ones are inflated before
     * on_message (up to message_bytes inflated: past it, 1009). Every message stands alone (no
     * context takeover either way), so one compressor serves every socket: a socket's compression
     * state is one byte. Broadcasts go uncompressed.
     */
    bool deflate;
    /**
     * A client set's TLS context (sxe_tls_client_create()): its sockets connect over TLS (wss),
     * each server's certificate checked for the host of the address given to
     * sxe_ws_client_connect(). A server's sockets speak TLS when its HTTP listener does.
     */
    sxe_tls_t *tls;
    /**
     * A client set's resolver (sxe/resolve.h) for the names in addresses given to
     * sxe_ws_client_connect(); NULL: the set makes its own the first time a name is given.
     */
    struct sxe_resolver *resolver;
};

/** Counters. */
struct sxe_ws_server_stats {
    uint64_t opened;          /**< Handshakes answered 101. */
    uint64_t refused;         /**< Handshakes refused (400, 426). */
    uint64_t messages_in;     /**< Messages received whole. */
    uint64_t messages_out;    /**< Messages queued (a broadcast counts once per socket). */
    uint64_t dropped;         /**< Messages dropped for a slow reader (options.drop_when_full). */
    uint64_t slow_closed;     /**< Sockets closed with 1008 for a slow reader. */
    uint64_t protocol_errors; /**< Sockets closed with 1002, 1007 or 1009. */
    uint64_t slow_messages;   /**< Sockets closed with 1008: a message too slow to arrive. */
    uint64_t pings;           /**< Keep-alive pings sent. */
    uint32_t open;            /**< Sockets open now. */
};

/**
 * Makes a WebSocket server on http's loop: a table of one small state per connection of the
 * loop, groups, and broadcast frames (options may be NULL). Free it with sxe_ws_server_destroy()
 * after the HTTP server's loop has stopped, before sxe_http_server_destroy().
 * When the loop begins to stop (a stop signal, sxe_loop_shutdown()), every open socket is sent a
 * close frame with 1001 and on_close reports 1001; the frames drain with the rest of the output.
 * @return 0, -EINVAL (http is NULL or has workers), -ENOBUFS (the loop has 8 stop hooks already:
 *         sxe_loop_at_stop()), or -ENOMEM.
 */
SXE_MUST_CHECK int sxe_ws_server_create(sxe_ws_server_t **server, sxe_http_server_t *http,
                                        const struct sxe_ws_handlers *handlers,
                                        const struct sxe_ws_options *options);

/**
 * Closes every open socket (1001, without waiting for answers; on_close is called for each) and
 * frees the server. From one of its loop's callbacks too: what the loop still has to end of its
 * sockets then finds nothing of the server.
 */
void sxe_ws_server_destroy(sxe_ws_server_t *server);

/**
 * Routes GET path on the HTTP server to a handshake. protocols, if not NULL, is the sub-protocols
 * the route speaks, comma-separated, in order of preference: the first one the client offers is
 * chosen (a client that offers none of them is still accepted, with none).
 * @return as sxe_http_server_route().
 */
SXE_MUST_CHECK int sxe_ws_server_route(sxe_ws_server_t *server, const char *path,
                                       const char *protocols);

/**
 * From an HTTP handler: answers the request's WebSocket handshake with 101 and protocol (NULL
 * for none; it must be one the client offered), or with 400 or 426 if it is not one. On success
 * the connection is a WebSocket from now on, and on_open is called before this returns.
 * @param ws  Set to the socket (NULL on an error); may be NULL when the caller needs no handle.
 * @return 0; -EPROTO (refused: the request was answered 400 or 426); -ENOBUFS (the server knows
 *         16 other sub-protocols already, or the name is too long: answered 500); -EINVAL (not
 *         from a handler, or a protocol the client did not offer: answered 500); -EPIPE (on_open
 *         closed it); -ECANCELED (a held request whose client left), or the write's -errno for
 *         the 101.
 */
int sxe_ws_server_accept(sxe_ws_server_t *server, sxe_http_t *http, const char *protocol,
                         sxe_ws_t **ws);

/**
 * Makes a set of client sockets on loop (sxe_ws_client_connect()): the same table, options and
 * handlers as a server's, without routes. Free it with sxe_ws_client_destroy().
 * @return 0, -EINVAL (client, loop or handlers NULL), -ENOBUFS (the loop has 8 stop hooks
 *         already), or -ENOMEM.
 */
SXE_MUST_CHECK int sxe_ws_client_create(sxe_ws_client_t **client, sxe_loop_t *loop,
                                        const struct sxe_ws_handlers *handlers,
                                        const struct sxe_ws_options *options);

/**
 * Closes every socket of the set (1001, without waiting for answers; on_close is called for each,
 * those still connecting or with a name asked too) and frees it, its own resolver and TLS context
 * with it. From one of its loop's callbacks too, as sxe_ws_server_destroy().
 */
void sxe_ws_client_destroy(sxe_ws_client_t *client);

/** The set's counters, as a server's (no broadcasts, refusals or handshakes answered). */
void sxe_ws_client_stats(const sxe_ws_client_t *client, struct sxe_ws_server_stats *stats);

/**
 * Opens a WebSocket to address and path, offering protocols (comma-separated, or NULL), from
 * source (NULL: any; one of several 127.0.0.x to pass 28,000 connections). address is
 * "HOST:PORT" (an IP address, localhost or a name, as sxe_resolve_split() reads it; also sent as
 * the Host), or a URL, "ws://HOST[:PORT][/PATH][?QUERY]" or "wss://..." (80 or 443 by default;
 * its authority is the Host; a fragment, "#...", is refused, as RFC 6455 §3 says; wss:// speaks TLS
 * with options.tls, or a context of the set's own that trusts the system's authorities; ws:// does
 * not, even with options.tls). A name is resolved with options.resolver, or the set's own: the
 * socket exists at once, and its connection begins when the answer comes (sxe_resolve_connect()).
 * The handshake goes when the connection is up; the server's 101 is checked (its accept key, a
 * sub-protocol we offered, no extension we did not), then on_open is called. If the name, the
 * connection or the handshake fails, on_close is called with SXE_WS_CLOSE_ABNORMAL (and the error's
 * text) or SXE_WS_CLOSE_PROTOCOL (and why). Frames a client sends are masked (§5.3), so a client
 * set cannot broadcast. Sends before on_open fail with -EPIPE.
 * @param path  the request target, starting with /; NULL with a URL (its path, or /).
 * @param user  the socket's user pointer (sxe_ws_user()), from the start.
 * @return 0 with *ws, -EINVAL (an address that does not parse, a path that does not start with /
 *         or holds a space, a path both in the URL and in path, a request longer than 460
 *         bytes), -ENOBUFS (the table is full, or 8 different paths, hosts and protocol lists are
 *         in use), a failure remembered for the name, or -errno from the connect.
 */
SXE_MUST_CHECK int sxe_ws_client_connect(sxe_ws_client_t *client, sxe_ws_t **ws,
                                         const char *address, const char *path,
                                         const char *protocols, const struct sockaddr *source,
                                         socklen_t source_len, void *user);

/**
 * Sends a message: one frame, queued whole (copied). @return 0; -EPIPE if the socket is closing;
 * -EMSGSIZE past message_bytes; -EILSEQ for text that is not UTF-8 (in debug builds an
 * assertion); -ENOBUFS if the peer reads too slowly (the socket is closing with 1008, or, with
 * drop_when_full, the message was dropped).
 */
int sxe_ws_send(sxe_ws_t *ws, enum sxe_ws_type type, const void *data, size_t len);

/**
 * Sends one message to every open socket of group (but except, if not NULL), encoding the frame
 * once and sending it by reference. Slow readers are handled as by sxe_ws_send().
 * @return how many sockets it was queued to, or -EMSGSIZE past broadcast_bytes, -EILSEQ, -EINVAL
 *         for a group out of range, -ENOBUFS when options.broadcasts are all in flight.
 */
int sxe_ws_server_broadcast(sxe_ws_server_t *server, uint32_t group, enum sxe_ws_type type,
                            const void *data, size_t len, const sxe_ws_t *except);

/** Moves the socket to group (< options.groups). @return 0 or -EINVAL. */
int sxe_ws_join(sxe_ws_t *ws, uint32_t group);

/**
 * Starts the close handshake with code (1000-4999, not one reserved for reports) and a reason of
 * at most 123 bytes: no message is sent or delivered after it. on_close follows when the peer
 * answers, or after options.close_timeout. @return 0, -EINVAL, or -EPIPE if already closing.
 */
int sxe_ws_close(sxe_ws_t *ws, int code, const char *reason);

/** The socket's sub-protocol (an empty string for none). */
const char *sxe_ws_protocol(const sxe_ws_t *ws);

/** The program's pointer for the socket (NULL at first). */
void *sxe_ws_user(const sxe_ws_t *ws);
void sxe_ws_set_user(sxe_ws_t *ws, void *user);

/** The socket's connection (for its peer address, say). */
sxe_conn_t *sxe_ws_conn(const sxe_ws_t *ws);

/** The server the socket belongs to; NULL for a client's socket (sxe_ws_client_connect()). */
sxe_ws_server_t *sxe_ws_server_of(const sxe_ws_t *ws);

/** The server's counters. */
void sxe_ws_server_stats(const sxe_ws_server_t *server, struct sxe_ws_server_stats *stats);

/**
 * Writes the Sec-WebSocket-Accept value for key (RFC 6455 §4.2.2: Base64 of the SHA-1 of the key
 * and the protocol's GUID) to out, NUL-terminated. @return 28, or -EINVAL for a NULL key.
 */
int sxe_ws_accept_key(const char *key, size_t key_len, char out[29]);

#ifdef __cplusplus
}
#endif

#endif
