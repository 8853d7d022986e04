/**
 * @file sxe/conn.h
 * @brief Connections: TCP (IPv4, IPv6) and Unix streams, listeners, connects, socketpairs, output
 * with backpressure, fd passing.
 */
#ifndef SXE_CONN_H
#define SXE_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "sxe/error.h"
#include "sxe/loop.h"
#include "sxe/tls.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Why a connection closed, as on_close reports it. */
enum sxe_close_reason {
    SXE_CLOSE_LOCAL,      /**< sxe_conn_close() was called. */
    SXE_CLOSE_PEER,       /**< The peer closed (end of stream, no on_eof handler). */
    SXE_CLOSE_ERROR,      /**< A socket error; err says which. */
    SXE_CLOSE_TIMEOUT,    /**< Idle, read, write or connect timeout. */
    SXE_CLOSE_EVICTED,    /**< The oldest idle connection, closed to make room for a new one. */
    SXE_CLOSE_NO_BUFFER,  /**< Input or output needed a buffer and none was free. */
    SXE_CLOSE_OVERFLOW,   /**< A message grew past buffer_size without being consumed. */
    SXE_CLOSE_SHUTDOWN,   /**< The loop stopped (signal or sxe_loop_destroy). */
    SXE_CLOSE_HANDED_OFF, /**< The connection was passed to another process. */
};

/** A short name for a close reason, for logs ("peer", "timeout", ...). */
const char *sxe_close_reason_name(enum sxe_close_reason reason);

/**
 * What happens on a connection. Every member may be NULL. For a listener, these handlers are
 * given to each connection it accepts.
 */
struct sxe_conn_handlers {
    /** An accepted connection is ready, or an outgoing connect completed. */
    void (*on_connect)(sxe_conn_t *conn);

    /**
     * Input arrived. data holds what earlier calls left unconsumed followed by the new bytes.
     * @return How many bytes, from the start, the callback consumed; the rest are kept and
     *         offered again with the next input. The value is ignored if the callback closed the
     *         connection. Keeping more than buffer_size bytes moves the input to a large buffer
     *         (sxe_loop_options.large_buffers), if the loop has one free; keeping more than the
     *         largest buffer holds calls on_overflow, or without it closes the connection
     *         (SXE_CLOSE_OVERFLOW).
     */
    size_t (*on_read)(sxe_conn_t *conn, const char *data, size_t len);

    /**
     * The peer shut down its sending side. Without this handler the connection closes
     * (SXE_CLOSE_PEER); with it the connection stays open for writing until closed.
     */
    void (*on_eof)(sxe_conn_t *conn);

    /** Queued output has all been sent (after a write that queued anything, or that left the
     * output backed up: sxe_conn_backed_up()). */
    void (*on_drained)(sxe_conn_t *conn);

    /**
     * The connection closed. err is the errno for SXE_CLOSE_ERROR, else 0. It is closed for the
     * program (writes are refused); its user pointer is still readable. Called once per
     * connection, never from inside another of its callbacks: a close asked for in a callback
     * (sxe_conn_close(), a failed write) ends once that callback has returned to the loop.
     */
    void (*on_close)(sxe_conn_t *conn, enum sxe_close_reason reason, int err);

    /**
     * The connection timed out (idle, read, write or connect). Called just before sxe closes it
     * (SXE_CLOSE_TIMEOUT), so the callback may write a last message, such as an HTTP 408; what
     * the socket does not take at once is dropped.
     */
    void (*on_timeout)(sxe_conn_t *conn);

    /**
     * A datagram arrived on a UDP socket; from is the sender. Truncated datagrams (larger than
     * buffer_size) are dropped and counted.
     */
    void (*on_datagram)(sxe_conn_t *conn, const char *data, size_t len, const struct sockaddr *from,
                        socklen_t from_len);

    /**
     * A Unix stream connection received a file descriptor (see sxe_conn_send_fd()). The callback
     * owns fd: adopt it with sxe_conn_adopt() or close it. Only for connections made with
     * SXE_LISTEN_RECEIVE_FDS or sxe_conn_pair(..., SXE_LISTEN_RECEIVE_FDS). A message of another
     * sender's may carry several: each comes in the order sent, up to 8 a message (the kernel
     * closes any more).
     */
    void (*on_fd)(sxe_conn_t *conn, int fd);

    /**
     * The input kept filled the connection's buffer and on_read consumed none of it: a message
     * larger than the connection can hold (a line too long, say). errno says which: EMSGSIZE, it
     * outgrew the largest buffer the loop has (buffer_size, or large_buffer_size); ENOBUFS, it
     * outgrew buffer_size and every large buffer was in use (a full table: a retry may fit). The
     * input is dropped and reading stops; the callback may write a last answer (an HTTP 413 or
     * 503, "ERR line too long"), and the connection then closes once it is sent (on_close says
     * SXE_CLOSE_LOCAL), unless the callback closed it itself, or shut it down
     * (sxe_conn_shutdown()): then reading goes on, and on_read may drop what the peer still sends
     * until it closes (so that a peer still sending does not have the answer reset under it).
     * Without this handler the connection closes at once (SXE_CLOSE_OVERFLOW).
     */
    void (*on_overflow)(sxe_conn_t *conn);

    /**
     * Optional: a few words on what the connection is doing, for an operator's list of
     * connections (the control socket's "connections", sxe/workers.h): the request under way,
     * say. Writes them, NUL-terminated, into out (size bytes); called on the loop's thread,
     * between callbacks. @return their length.
     */
    size_t (*describe)(const sxe_conn_t *conn, char *out, size_t size);
};

/** Listener options. A NULL pointer takes every default. */
struct sxe_listen_options {
    int backlog;           /**< listen(2) backlog (SOMAXCONN when 0). */
    unsigned flags;        /**< SXE_LISTEN_* below. */
    int fastopen_queue;    /**< TCP_FASTOPEN queue length, with SXE_LISTEN_FASTOPEN (16). */
    int defer_accept_secs; /**< TCP_DEFER_ACCEPT seconds, with SXE_LISTEN_DEFER_ACCEPT (1). */
    uint32_t accept_batch; /**< Most connections accepted per readiness event (64). */
    /**
     * TLS for every connection accepted (sxe/tls.h), or NULL for plain ones. The context must
     * outlive the listener and its connections.
     */
    sxe_tls_t *tls;
};

#define SXE_LISTEN_REUSEPORT    0x01u /**< SO_REUSEPORT: several loops may listen on one port. */
#define SXE_LISTEN_FASTOPEN     0x02u /**< TCP_FASTOPEN. */
#define SXE_LISTEN_DEFER_ACCEPT 0x04u /**< TCP_DEFER_ACCEPT: wake only when data arrives. */
#define SXE_LISTEN_EVICT_IDLE   0x08u /**< When the table is full, close the oldest idle one. */
#define SXE_LISTEN_RECEIVE_FDS  0x10u /**< Unix: connections may receive fds (on_fd). */
#define SXE_LISTEN_V6ONLY       0x20u /**< IPv6: do not also accept IPv4-mapped peers. */

/**
 * Listens on a TCP (IPv4 or IPv6) or Unix stream address.
 * @param listener  Set to the listening socket's entry in the connection table.
 * @param options   NULL for defaults.
 * @param handlers  Given to every accepted connection; must outlive them.
 * @param user      The user pointer of the listener; accepted connections start with it too.
 * @return 0, -ENOBUFS if the table is full, or -errno from socket, setsockopt, bind or listen
 *         (-EADDRINUSE: the port is taken).
 */
SXE_MUST_CHECK int sxe_conn_listen(sxe_loop_t *loop, sxe_conn_t **listener,
                                   const struct sockaddr *address, socklen_t address_len,
                                   const struct sxe_listen_options *options,
                                   const struct sxe_conn_handlers *handlers, void *user);

/**
 * Parses an address as a person writes it: "IPv4:PORT", "[IPv6]:PORT", "localhost:PORT"
 * (127.0.0.1) or ":PORT" (every IPv4 address). With default_port 0 to 65535 the port may be left
 * out ("127.0.0.1", "::1", "[::1]", "localhost"); with -1 it is required. One parser for the
 * library and its programs: sxe_conn_listen_at(), sxe_http_server_listen(),
 * sxe_http_client_create(), sxe-httpd --listen and sxe-http -i.
 * @return 0, or -EINVAL for text that is none of these, or a port that is not 0 to 65535 in digits.
 */
SXE_MUST_CHECK int sxe_address_parse(const char *text, int default_port,
                                     struct sockaddr_storage *address, socklen_t *len);

/**
 * Copies the host of an address written as sxe_address_parse() reads it, without its brackets or
 * its port, into host (size bytes with the NUL): "[::1]:443" gives "::1", "localhost:80"
 * "localhost". It is the name a TLS client checks the certificate for (struct
 * sxe_connect_options.server_name).
 * @return 0, or -EINVAL if it does not fit in size bytes.
 */
SXE_MUST_CHECK int sxe_address_host(const char *text, char *host, size_t size);

/**
 * The port of an IPv4 or IPv6 socket address (not NULL), in host order.
 * @return 0 to 65535, or -EAFNOSUPPORT for an address of another family.
 */
int sxe_address_port(const struct sockaddr *address);

/**
 * sxe_conn_listen() on an address given as text (see sxe_address_parse(); the port is required):
 * sxe_conn_listen_at(loop, &listener, "127.0.0.1:8080", NULL, &handlers, NULL).
 * @return as sxe_conn_listen(), or -EINVAL for an address that does not parse.
 */
SXE_MUST_CHECK int sxe_conn_listen_at(sxe_loop_t *loop, sxe_conn_t **listener, const char *address,
                                      const struct sxe_listen_options *options,
                                      const struct sxe_conn_handlers *handlers, void *user);

/**
 * A connect that may go on to another address when one fails from the loop: sxe_resolve_connect()
 * tries a name's addresses in turn with one. Given in the options of sxe_conn_connect() or
 * sxe_conn_connect_reserved(), it must live until ended() is called for the last time, once for
 * each connect begun with it, as that connect ends:
 * - connected: err is 0, before on_connect;
 * - failed (ECONNREFUSED, EHOSTUNREACH, ...), or not connected within the loop's connect_timeout
 *   (ETIMEDOUT): err says why, and the connection is reserved again (as after sxe_conn_reserve()).
 *   ended() may begin the next connect with sxe_conn_connect_reserved(), with the plan in its
 *   options (that connect has connect_timeout of its own); if it begins none, the connection
 *   fails (on_close: SXE_CLOSE_ERROR with err, or SXE_CLOSE_TIMEOUT) unless ended() failed it;
 * - closed meanwhile (by the program, its timeout, the loop's stop or destruction): err says why
 *   (ECANCELED when the program closed it) and sxe_conn_closed() is true: the plan is done with.
 * A connect that cannot begin (its call's error) does not call it.
 */
struct sxe_connect_plan {
    void (*ended)(struct sxe_connect_plan *plan, sxe_conn_t *conn, int err);
};

/** How a connection is made. Zeroed fields (or NULL options) take the defaults. */
struct sxe_connect_options {
    /** Local address to bind first (NULL: any), for example one of several 127.0.0.x. */
    const struct sockaddr *source;
    socklen_t source_len;
    /**
     * A client TLS context (sxe_tls_client_create()): the connection speaks TLS, as a client. Its
     * handshake starts once the connect completes, right after on_connect; what the program
     * writes meanwhile waits for its end. A certificate the context does not trust for
     * server_name fails the handshake: on_close with SXE_CLOSE_ERROR and EPROTO, and the log
     * says why. The context must outlive the connection.
     */
    sxe_tls_t *tls;
    /**
     * With tls: the server's name, sent by SNI and checked against its certificate: a host name,
     * or an IP address in text (checked against the certificate's IP addresses, and not sent).
     * Required unless the context was made with no_verify.
     */
    const char *server_name;
    /** NULL, or what to do when the connect fails from the loop (struct sxe_connect_plan). */
    struct sxe_connect_plan *plan;
};

/**
 * Connects to a TCP or Unix stream address without blocking. on_connect runs when it completes;
 * on_close (SXE_CLOSE_ERROR with err ECONNREFUSED, or SXE_CLOSE_TIMEOUT) when it fails.
 * @param options  NULL for defaults: see struct sxe_connect_options (a source address, TLS).
 * @return 0, -ENOBUFS if the table is full, -EINVAL for a server context or a missing
 *         server_name with tls (asserts in debug builds), -ENOMEM (the loop's first plan), or
 *         -errno from socket, bind or connect.
 */
SXE_MUST_CHECK int sxe_conn_connect(sxe_loop_t *loop, sxe_conn_t **conn,
                                    const struct sockaddr *address, socklen_t address_len,
                                    const struct sxe_connect_options *options,
                                    const struct sxe_conn_handlers *handlers, void *user);

/**
 * Takes a slot for an outgoing TCP connection whose address is not known yet: a name being
 * resolved (sxe_resolve_connect() in sxe/resolve.h does this). The connection exists from now on,
 * as one whose connect is under way: the loop's connect_timeout runs from here, writes fail with
 * -EPIPE, and sxe_conn_close(), sxe_conn_fail(), a stop or a timeout close it as they close any
 * connection (on_close follows). Its descriptor (sxe_conn_fd()) is a placeholder until the connect
 * begins, when the connecting socket takes its number: options set on it are lost, and
 * sxe_conn_pause(), sxe_conn_resume() and sxe_conn_set_nodelay() say -ENOTCONN meanwhile (call
 * them from on_connect). Start it with sxe_conn_connect_reserved().
 * @return 0, -ENOBUFS if the table is full, -EINVAL (asserts in debug builds), or -errno from
 *         socket (the slot holds one descriptor meanwhile).
 */
SXE_MUST_CHECK int sxe_conn_reserve(sxe_loop_t *loop, sxe_conn_t **conn,
                                    const struct sxe_conn_handlers *handlers, void *user);

/**
 * Begins the connect of a reserved connection (sxe_conn_reserve()) to address: on_connect or
 * on_close follow, from the loop, as after sxe_conn_connect(), and its descriptor keeps its
 * number. options are sxe_conn_connect()'s (a source address, TLS and its server name).
 * @return 0; or, when it could not begin, the error, and the connection is still reserved (for
 *         another address, or sxe_conn_fail()): -errno from socket, bind or connect (a family the
 *         host lacks, a network it cannot reach), -EINVAL for a TLS server name the session cannot
 *         take; -EINVAL if conn is not reserved or is closed (asserts in debug builds), -ENOMEM
 *         (the loop's first plan).
 */
SXE_MUST_CHECK int sxe_conn_connect_reserved(sxe_conn_t *conn, const struct sockaddr *address,
                                             socklen_t address_len,
                                             const struct sxe_connect_options *options);

/**
 * Makes a connected pair of Unix stream connections (socketpair), both in this loop.
 * @param flags  0 or SXE_LISTEN_RECEIVE_FDS (both ends may receive fds).
 */
SXE_MUST_CHECK int sxe_conn_pair(sxe_loop_t *loop, sxe_conn_t **a, sxe_conn_t **b, unsigned flags,
                                 const struct sxe_conn_handlers *handlers, void *user);

/**
 * Adopts a connected stream socket made elsewhere, for example one received with on_fd. sxe
 * makes it non-blocking and owns it from now on (closes it on failure too).
 */
SXE_MUST_CHECK int sxe_conn_adopt(sxe_loop_t *loop, sxe_conn_t **conn, int fd,
                                  const struct sxe_conn_handlers *handlers, void *user);

/**
 * Writes to a connection. Bytes go to the socket at once; what the socket cannot take is queued
 * and sent as it drains.
 * Backpressure: after a write that returned 0, sxe_conn_backed_up() says whether the caller
 * should stop writing and wait for on_drained.
 * @return 0 when everything was sent or queued; -ENOBUFS when accepting it would pass write_limit
 *         or no buffer is free (nothing was accepted); -EPIPE (or another -errno) when the
 *         connection is closed or failing.
 */
int sxe_conn_write(sxe_conn_t *conn, const void *data, size_t len);

/**
 * Sends len bytes of the file fd from offset with sendfile(2), after anything already queued.
 * The caller keeps fd open until on_drained (or on_close). @return as sxe_conn_write().
 */
int sxe_conn_sendfile(sxe_conn_t *conn, int fd, off_t offset, size_t len);

/**
 * The same, and the connection owns fd from this call: it is closed once its bytes are sent, when
 * the connection closes, or at once if nothing was queued (an error, or len 0). Several files may
 * be queued at a time, each closed in turn. @return as sxe_conn_write().
 */
int sxe_conn_sendfile_and_close(sxe_conn_t *conn, int fd, off_t offset, size_t len);

/** Closes a descriptor the caller was given to own, when it cannot be used (a module's tidy-up). */
void sxe_fd_close(int fd);

/**
 * Called once the bytes passed to sxe_conn_write_ref() or sxe_conn_sendfile_ref() are no longer
 * needed: all sent, or dropped because the connection closed or the call failed. It runs inside
 * the loop (or inside the call that queued them) and must not call back into the connection.
 */
typedef void (*sxe_conn_release_t)(void *arg);

/**
 * Sends len bytes at data without copying them: for memory that outlives the call, such as a
 * cache's. The caller keeps the bytes unchanged until release(arg) (release may be NULL for memory
 * that never changes). Inside on_read they are gathered with the replies written before and
 * after; elsewhere what the socket takes goes at once. Like file ranges, they need no buffer and
 * are not refused for write_limit, but they count as queued: for high_water, and for the
 * write_limit of the copies written after them.
 * release is called exactly once, before this returns when nothing stays queued (everything
 * sent, an error, or len 0). Up to 1 KB that would be queued is copied instead, which costs less
 * than a queue entry, and released at once. @return as sxe_conn_write().
 */
int sxe_conn_write_ref(sxe_conn_t *conn, const void *data, size_t len, sxe_conn_release_t release,
                       void *arg);

/**
 * sxe_conn_sendfile() that says when it is done with fd: release(arg) is called exactly once,
 * when the range is sent, the connection closes, or before this returns if nothing was queued.
 * @return as sxe_conn_write().
 */
int sxe_conn_sendfile_ref(sxe_conn_t *conn, int fd, off_t offset, size_t len,
                          sxe_conn_release_t release, void *arg);

/** Bytes queued and not yet sent. */
size_t sxe_conn_queued(const sxe_conn_t *conn);

/**
 * Whether the connection's output is backed up: high_water bytes or more queued
 * (sxe_loop_options). Check it after each write that returned 0 (sxe_conn_write() and the other
 * writes, which return as it does): when true, stop writing until on_drained, which follows once
 * the queue has all been sent (a write that backs it up asks for on_drained). Cheap: a comparison.
 */
bool sxe_conn_backed_up(const sxe_conn_t *conn);

/**
 * Stops reading from the connection: new bytes stay in the socket, where TCP's window holds the
 * peer back, and on_read is not called until sxe_conn_resume(). For a handler that cannot take
 * more work yet, typically because its output is backed up: it pauses inside on_read and returns
 * what it consumed, the rest being kept. If output is queued, on_drained follows once it has all
 * gone, which is where to resume. Timeouts go on as before. A stream connection only.
 * @return 0; -EPIPE if the connection is closed or not a stream.
 */
int sxe_conn_pause(sxe_conn_t *conn);

/**
 * Reads again after sxe_conn_pause(), from the loop's next turn: on_read is first offered the
 * input kept from before, whether or not more has arrived, then whatever the socket holds.
 * Safe anywhere, on_drained included; resuming a connection that is not paused does nothing.
 * @return 0; -EPIPE if the connection is closed or not a stream.
 */
int sxe_conn_resume(sxe_conn_t *conn);

/**
 * Gathers the writes that follow into one send, as writes inside on_read are, until
 * sxe_conn_uncork(): for a message written from a timer or another connection's callback, whose
 * pieces should leave together. @return true if this corked it (pair it with sxe_conn_uncork());
 * false if it was corked already (inside its on_read, say) or is not an open stream.
 */
bool sxe_conn_cork(sxe_conn_t *conn);

/** Sends what was gathered since sxe_conn_cork() returned true. */
void sxe_conn_uncork(sxe_conn_t *conn);

/**
 * From on_read(conn, data, len), for a message the program answers later: consumes the first
 * consumed bytes, and keeps the rest in the connection's own buffer now, where it stays put and
 * writable until on_read next consumes some of it, so pointers into it stay valid. on_read's
 * return value for this call is then ignored. The connection has no timeout while kept (the
 * program keeps its own deadline). Reading goes on: on_read is called again as bytes arrive, with
 * data at the kept bytes and len counting the new ones; return 0 to keep them all, or pause.
 * A connection that closes while kept says so in on_close as always.
 * @param kept  Set to the kept bytes' address, NULL on an error (kept may be NULL).
 * @return 0; -ENOBUFS if no buffer is free (nothing is kept: on_read's return counts as usual),
 *         or -EINVAL outside on_read, for data NULL or consumed past len (asserts in debug
 *         builds).
 */
SXE_MUST_CHECK int sxe_conn_keep(sxe_conn_t *conn, const char *data, size_t len, size_t consumed,
                                 char **kept);

/**
 * Ends sxe_conn_keep(): the connection's timeouts apply again, and on_read is offered the kept
 * input from the loop's next turn (even paused: resume first if you paused it).
 */
void sxe_conn_unkeep(sxe_conn_t *conn);

/**
 * Once queued output is sent, shuts down the sending side (half-close). Reading goes on. On a TLS
 * connection close_notify goes first, and writes after this call are refused (-EPIPE).
 */
int sxe_conn_shutdown(sxe_conn_t *conn);

/**
 * Closes the connection once queued output is sent: at once if nothing is queued (as
 * sxe_conn_close() does), else when the queue drains, or when a write fails or times out. Further
 * writes are refused (-EPIPE). on_close gets SXE_CLOSE_LOCAL. This saves the half-close, the
 * wait for the peer's end of stream and their system calls, but the peer's kernel resets the
 * connection if the peer sends more after the close, which can destroy the output in flight: use
 * it when the peer has said it is done (an HTTP "Connection: close" request read to its end),
 * and sxe_conn_shutdown() otherwise. Inside on_read, the close comes after on_read returns.
 * @return 0; -EPIPE if the connection is closed, already closing, connecting or not a stream;
 *         or the error of a write that has failed (the connection closes after the callback).
 */
int sxe_conn_close_when_sent(sxe_conn_t *conn);

/**
 * Closes the connection now: from this call on it is closed for the program (its id is no longer
 * found, writes are refused with -EPIPE, no handler of it is called but on_close). Inside a
 * callback, on_close (SXE_CLOSE_LOCAL) runs, and the slot is freed, once that callback has
 * returned to the loop, so the connection stays valid to look at until then, and its slot is not
 * given to another meanwhile; outside one (before the loop runs, or after it), on_close runs
 * before this returns. on_close sees the connection closed. Output still queued is dropped on
 * epoll; on io_uring, where a send may already be under way in the kernel, what was queued goes
 * out first if the peer reads it within write_timeout (5 s without one), as if epoll's socket had
 * taken it. Closing a closed connection does nothing.
 */
void sxe_conn_close(sxe_conn_t *conn);

/**
 * Closes the connection as failed, as sxe_conn_close() does, but on_close gets SXE_CLOSE_ERROR
 * and err (a positive errno: ENOENT for a name that does not exist, EPROTO for a peer that broke
 * the protocol). err of 0 or less asserts in debug builds and does nothing in release.
 */
void sxe_conn_fail(sxe_conn_t *conn, int err);

/**
 * Sends fd over the Unix stream connection conn, with one byte of data. The caller still owns fd.
 * @return 0 or -errno (-EAGAIN if the socket buffer is full; -ENOTSUP on a TLS connection).
 */
int sxe_conn_send_fd(sxe_conn_t *conn, int fd);

/**
 * Hands the connection to another process over the Unix stream connection via, then closes it
 * here (SXE_CLOSE_HANDED_OFF). Unconsumed input and queued output are not carried over: hand off
 * between requests. @return 0 or -errno (the connection stays open on failure; -ENOTSUP for a TLS
 * connection, whose session cannot go with its socket).
 */
int sxe_conn_hand_off(sxe_conn_t *conn, sxe_conn_t *via);

/** The peer's address, as getpeername(2). @return 0 or -errno. */
int sxe_conn_peer(const sxe_conn_t *conn, struct sockaddr *address, socklen_t *address_len);

/** The local address, as getsockname(2); use it to learn a port bound as 0. */
int sxe_conn_local(const sxe_conn_t *conn, struct sockaddr *address, socklen_t *address_len);

/** The user pointer given at creation or set since. */
void *sxe_conn_user(const sxe_conn_t *conn);
void sxe_conn_set_user(sxe_conn_t *conn, void *user);

/**
 * The handlers the connection runs with (for an accepted one, its listener's). A protocol module
 * that embeds its handlers in its own state finds that state from any of its connections this
 * way, and leaves the user pointer to the program (the HTTP module does).
 */
const struct sxe_conn_handlers *sxe_conn_handlers(const sxe_conn_t *conn);

/**
 * Hands the connection to other handlers: a protocol switch (HTTP's 101 to WebSocket). Every
 * event from now on goes to handlers (which must outlive the connection); the input the old ones
 * left unconsumed is offered to the new on_read from the loop's next turn.
 * @return 0, or -EINVAL for a closed connection or NULL handlers.
 */
int sxe_conn_set_handlers(sxe_conn_t *conn, const struct sxe_conn_handlers *handlers);

/**
 * Restarts the connection's timeout, as if it had just had activity. Called from on_timeout, it
 * keeps the connection open: it is not closed when on_timeout returns (a keep-alive ping, say).
 * @return 0, or -EINVAL for a closed connection.
 */
int sxe_conn_touch(sxe_conn_t *conn);

/** The connection's loop. */
sxe_loop_t *sxe_conn_loop(const sxe_conn_t *conn);

/** The socket; for options sxe does not wrap. Do not close it or change its blocking mode. */
int sxe_conn_fd(const sxe_conn_t *conn);

/** Whether the connection speaks TLS: accepted on a TLS listener, or connected with a context. */
bool sxe_conn_secure(const sxe_conn_t *conn);

/**
 * The subject of the certificate the peer showed and the handshake verified (a client's, asked
 * for with sxe_tls_options.client_ca; or a server's, to a client context that verifies), as one
 * line in RFC 2253's form ("CN=alice,O=Example"), bytes outside printable ASCII escaped, into
 * subject (size bytes with its NUL).
 * @return its length; -ENOENT for a plain connection, a handshake not yet done, or a peer that
 *         showed no certificate or one not verified; -ENOSPC when size is too small (subject
 *         then holds "").
 */
int sxe_conn_peer_subject(const sxe_conn_t *conn, char *subject, size_t size);

/**
 * Whether the connection is TLS and its handshake chose protocol by ALPN ("h2", "http/1.1").
 * false for a plain connection, or before the handshake has chosen one.
 */
bool sxe_conn_alpn_is(const sxe_conn_t *conn, const char *protocol);

/**
 * Turns Nagle's algorithm off (TCP_NODELAY) on a TCP connection, so a small reply leaves at once.
 * @return 0; -EPIPE if the connection is closed; -errno if the socket refuses (not TCP: harmless).
 */
int sxe_conn_set_nodelay(sxe_conn_t *conn);

/** The connection's slot in the table: the object id in its log lines. */
uint32_t sxe_conn_index(const sxe_conn_t *conn);

/** An id that names this connection and no later user of its slot. */
uint64_t sxe_conn_id(const sxe_conn_t *conn);

/** The connection an id names, or NULL if it has closed. Keep an id, not a pointer, across turns.
 */
sxe_conn_t *sxe_conn_from_id(sxe_loop_t *loop, uint64_t id);

/**
 * Whether the connection has been closed (by the program, the peer, an error or a timeout). A
 * connection a callback was given, or that it closed, may be asked until that callback returns:
 * its slot is not given to another meanwhile. After a call that may close it (a handler, a
 * write), this is the check; across turns, keep its id (sxe_conn_from_id()).
 */
bool sxe_conn_closed(const sxe_conn_t *conn);

#ifdef __cplusplus
}
#endif

#endif
