/*
 * A connection's output queues: copies in the loop's buffers, the caller's memory by reference, and
 * file ranges, in order. A connection has one, conn->out, which goes to the socket; under TLS a
 * second holds the plain bytes waiting to be sealed into records (transport_tls.c). conn->queued
 * counts the bytes of both. It makes no system call of its own except to close a file the
 * connection owns when its segment goes.
 */
#ifndef SXE_OUTQ_H
#define SXE_OUTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

#include "loop.h"

/* Segments sent with one gather: sixteen pipelined heads, each with a body by reference. */
#define SXE__GATHER_MAX 32

char *sxe__buffer_at(sxe_loop_t *loop, uint32_t buffer);

/* A buffer's size: buffer_size, or large_buffer_size for a large one. */
uint32_t sxe__buffer_size(const sxe_loop_t *loop, uint32_t buffer);

/* A free buffer's index, or SXE_NONE when none is free. */
uint32_t sxe__buffer_take(sxe_loop_t *loop);

/* A free large buffer's index (for input only), or SXE_NONE when none is free. */
uint32_t sxe__buffer_take_large(sxe_loop_t *loop);

/* Gives back a buffer of either kind. */
void sxe__buffer_give(sxe_loop_t *loop, uint32_t buffer);

/* Whether the free buffers and segments can take len more bytes copied to queue. */
bool sxe__outq_can_append(const struct sxe_conn *conn, const struct sxe__queue *queue, size_t len);

/* Copies len bytes to the tail of queue; the caller has checked sxe__outq_can_append. */
void sxe__outq_append(struct sxe_conn *conn, struct sxe__queue *queue, const char *data,
                      size_t len);

/*
 * Links a segment without a buffer at the tail, for memory (the caller sets data) or a file range
 * (the caller sets file_fd, close_fd and offset). release, if set, is called once when it goes.
 * The caller has checked that a segment is free (loop->segments_free).
 */
struct sxe__segment *sxe__outq_link(struct sxe_conn *conn, struct sxe__queue *queue, size_t len,
                                    sxe_conn_release_t release, void *arg);

/* Whether the head segment is a file range (sent with sendfile, never gathered). */
bool sxe__outq_head_is_file(const struct sxe_conn *conn, const struct sxe__queue *queue);

/*
 * Fills iov with the leading byte segments (buffers and memory), at most SXE__GATHER_MAX, and
 * sets *before_file if a file range follows them. @return the number of entries.
 */
int sxe__outq_gather(const struct sxe_conn *conn, const struct sxe__queue *queue, struct iovec *iov,
                     bool *before_file);

/*
 * Drops from the head what a send of sent bytes finished: a sendfile sends from the head segment
 * only (and moved its offset itself), a gathered send from the leading byte segments.
 */
void sxe__outq_advance(struct sxe_conn *conn, struct sxe__queue *queue, size_t sent, bool file);

/* Drops the whole queue, closing or releasing what its segments held. */
void sxe__outq_drop(struct sxe_conn *conn, struct sxe__queue *queue);

/*
 * Checks the connection's queues: links end at the tail, queued is the sum of the segments' bytes,
 * each segment is a buffer range, memory or a file, and a buffer is owned by exactly one segment.
 * sealing is a TLS stream's queue of plain bytes (transport.h), or NULL.
 * @return 0, or -EUCLEAN after logging the first broken invariant.
 */
int sxe__outq_validate(const struct sxe_conn *conn, const struct sxe__queue *sealing);

#endif
