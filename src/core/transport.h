/*
 * Transports: what carries a stream's bytes between stream.c and the socket. The transport calls
 * nothing above it (outq.c and the seam only): stream.c sends what it queues and closes what fails.
 *
 * A plain stream (io kind SXE__IO_STREAM) reads and writes the socket itself (stream.c). A TLS
 * stream (SXE__IO_TLS) goes through transport_tls.c, which seals the program's bytes into records
 * and opens the peer's:
 * - Output. What the program writes goes to a second queue of the connection, its plain bytes
 *   (copies, memory by reference, file ranges: outq.h), and conn->out holds only records, which
 *   stream.c sends as it sends any bytes, on either backend. Whenever conn->out empties, the next
 *   plain bytes are sealed into it, a record or a few (up to 64 KB) at a time (sxe__tls_seal), so a
 *   file or a large body is read and encrypted as the socket drains, and conn->out empty means
 *   all is sent, as on a plain stream. conn->queued counts both queues.
 * - Input. The stream's read (stream.c's read_one) asks sxe__tls_read for plain bytes instead of
 *   calling recv; OpenSSL reads the socket through the seam (a BIO of our own). The handshake runs
 *   inside those reads, and what it writes goes to conn->out. A completion backend does not
 *   receive for TLS streams: it reports readiness, and they read as on epoll.
 * Without OpenSSL (transport_tls_none.c) no connection is ever TLS.
 */
#ifndef SXE_TRANSPORT_H
#define SXE_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "loop.h"

/* Bytes of free buffers a TLS stream's write leaves for sealing: a record's worth, so that plain
 * bytes queued never hold every buffer their own records need. */
#define SXE__TLS_RESERVE (16384 + 256)

/* The plain bytes of a TLS connection waiting to be sealed, or NULL for any other. */
const struct sxe__queue *sxe__transport_queue(const struct sxe_conn *conn);

/* Makes the loop's TLS state, for the server contexts' connections: a listener's, or those a
 * worker set's supervisor passes. @return 0 or -ENOMEM (logged). */
int sxe__tls_prepare(sxe_loop_t *loop, sxe_tls_t *tls);

/* A listener takes tls for its connections (NULL: plain). @return 0 or -ENOMEM (logged). */
int sxe__tls_listen(struct sxe_conn *listener, sxe_tls_t *tls);

/* The context the listener's connections speak TLS with, or NULL. */
sxe_tls_t *sxe__tls_listening(const struct sxe_conn *listener);

/* Starts the server side of a session of tls on conn, accepted (its loop prepared). @return 0 or
 * -ENOMEM. */
int sxe__tls_accept(sxe_tls_t *tls, struct sxe_conn *conn);

/* Starts the client side of a session of tls on conn, to server (its address: its port chooses
 * the session to resume), for server_name (SNI and the certificate's check). @return 0, -EINVAL (a
 * server's context; no name to check; a name that is neither a host name nor an IP address) or
 * -ENOMEM. */
int sxe__tls_connect(struct sxe_conn *conn, sxe_tls_t *tls, const char *server_name,
                     const struct sockaddr *server);

/* Whether conn, connecting, was given a client session (sxe__tls_connect). */
bool sxe__tls_client(const struct sxe_conn *conn);

/* Begins a client's handshake: its hello goes to conn->out, for the caller to flush. @return 0, or
 * a negative errno the connection fails with. */
int sxe__tls_start(struct sxe_conn *conn);

/*
 * Reads and opens records until plain bytes come: up to room of them at into. What the handshake
 * writes is queued in conn->out, for the caller to send. @return how many,
 * 0 at the end of the stream (close_notify, or the peer's FIN), or -1 with errno: EAGAIN (nothing
 * yet; the socket is empty), EPROTO (the peer broke the protocol: logged), or the socket's error.
 */
ssize_t sxe__tls_read(struct sxe_conn *conn, char *into, size_t room);

/* Whether the peer is part way through something: its handshake, or a record not yet whole. After
 * the handshake the connection is reading a message then, and read_timeout applies (conn.c). */
bool sxe__tls_partial(const struct sxe_conn *conn);

/* Whether a TLS stream's handshake has not ended yet: handshake_timeout applies (conn.c). */
bool sxe__tls_handshaking(const struct sxe_conn *conn);

/* Whether a read may find more now: opened bytes kept, or the last read filled its buffer. */
bool sxe__tls_more(const struct sxe_conn *conn);

/* The queue of plain bytes to write to. */
struct sxe__queue *sxe__tls_plain(struct sxe_conn *conn);

/* A send found the socket full (or took part of what it was given): the next seals take a record
 * each until one leaves whole. */
void sxe__tls_crowded(struct sxe_conn *conn);

/*
 * conn->out is empty: seals the next plain bytes (a record, or a few) into it. @return 1 if it did,
 * 0 if none wait (or the handshake is not done), or -errno: ENOBUFS (no buffer for the record:
 * logged), the file's read error, EIO for a file cut short under it.
 */
int sxe__tls_seal(struct sxe_conn *conn);

/* Queues close_notify, once per connection. @return true if it did so now. */
bool sxe__tls_notify(struct sxe_conn *conn);

/* The slot's end (conn.c): frees its session and what its plain queue holds. */
void sxe__tls_close(struct sxe_conn *conn);

/* The loop's end: frees its TLS state. */
void sxe__tls_loop_free(sxe_loop_t *loop);

#endif
