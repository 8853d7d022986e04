/*
 * The connection table's invariants, checked (sxe__conn_validate(), for tests): every slot's
 * state agrees with its descriptor and lists, every buffer is either free or held by exactly one
 * connection, and every output segment is either queued or free.
 */
#define SXE_LOG_MODULE conn_log
#include "sxe/log.h"

#include <errno.h>
#include <stdlib.h>

#include "base/base.h"
#include "loop.h"
#include "outq.h"
#include "transport.h"

static struct sxe_log_module conn_log = SXE_LOG_MODULE_INIT(CONN);

/* Logs a broken invariant of the table and returns -EUCLEAN. */
#define BROKEN(...)                                                                                \
    ({                                                                                             \
        SXE_LOG_ERROR("connection table: " __VA_ARGS__);                                           \
        -EUCLEAN;                                                                                  \
    })

/* Marks buffer as held in seen; false if it already was. */
static bool hold_once(uint8_t *seen, uint32_t buffer)
{
    bool held = seen[buffer] != 0;
    seen[buffer] = 1;
    return !held;
}

/* Counts the segments of one of conn's queues, and marks the buffers they own as held. */
static int count_queue(const sxe_loop_t *loop, const struct sxe_conn *conn,
                       const struct sxe__queue *queue, uint8_t *seen, uint32_t *segments)
{
    for (uint32_t at = queue->head; at != SXE_NONE; at = loop->segments[at].next) {
        const struct sxe__segment *segment = &loop->segments[at];
        (*segments)++;
        if (segment->buffer != SXE_NONE && segment->owns && !hold_once(seen, segment->buffer)) {
            return BROKEN("buffer %u is held twice (output of %u)", segment->buffer,
                          sxe__conn_index(conn));
        }
    }
    return 0;
}

/* Checks one slot, and marks the buffers it holds in seen. */
static int validate_slot(const sxe_loop_t *loop, const struct sxe_conn *conn, uint8_t *seen,
                         uint32_t *segments)
{
    unsigned state = (unsigned)sxe_pool_state(loop->conn_pool, sxe__conn_index(conn));
    int rc;

    if ((state == SXE__CONN_FREE) != (conn->fd < 0)) {
        return BROKEN("slot %u is %s with fd %d", sxe__conn_index(conn),
                      sxe_pool_state_name(loop->conn_pool, state), conn->fd);
    }
    if ((state == SXE__CONN_CLOSING) != ((conn->flags & SXE__CONN_CLOSE_PENDING) != 0)) {
        return BROKEN("slot %u is %s with flags %#x", sxe__conn_index(conn),
                      sxe_pool_state_name(loop->conn_pool, state), conn->flags);
    }
    if (state == SXE__CONN_FREE) {
        return conn->out.head == SXE_NONE && conn->input_buffer == SXE_NONE &&
                       conn->held_head == SXE_NONE
                   ? 0
                   : BROKEN("free slot %u holds a queue or input", sxe__conn_index(conn));
    }
    if ((conn->input_buffer == SXE_NONE) != (conn->input_len == 0) ||
        (conn->input_buffer != SXE_NONE &&
         (conn->input_buffer >= loop->options.buffers + loop->options.large_buffers ||
          conn->input_len > sxe__buffer_size(loop, conn->input_buffer)))) {
        return BROKEN("slot %u keeps %u bytes of input in buffer %u", sxe__conn_index(conn),
                      conn->input_len, conn->input_buffer);
    }
    if (conn->input_buffer != SXE_NONE && !hold_once(seen, conn->input_buffer)) {
        return BROKEN("buffer %u is held twice (input of %u)", conn->input_buffer,
                      sxe__conn_index(conn));
    }
    if ((rc = sxe__outq_validate(conn, sxe__transport_queue(conn))) < 0) {
        return rc;
    }
    for (uint32_t at = conn->held_head; at != SXE_NONE; at = loop->held[at].next) {
        uint32_t buffer = loop->held[at].buffer;
        if (buffer != SXE_NONE && (buffer >= loop->options.buffers || !hold_once(seen, buffer))) {
            return BROKEN("buffer %u is held twice, or is not one (held input of %u)", buffer,
                          sxe__conn_index(conn));
        }
    }
    const struct sxe__queue *plain = sxe__transport_queue(conn);
    if ((rc = count_queue(loop, conn, &conn->out, seen, segments)) < 0 ||
        (plain != NULL && (rc = count_queue(loop, conn, plain, seen, segments)) < 0)) {
        return rc;
    }
    return 0;
}

int sxe__conn_validate(const sxe_loop_t *loop)
{
    uint32_t segments = 0;
    int rc = 0;

    if ((rc = sxe__pool_validate((sxe_pool_t *)(uintptr_t)loop->conn_pool)) < 0) {
        return rc;
    }
    uint32_t all = loop->options.buffers + loop->options.large_buffers;
    uint8_t *seen = calloc(all + 1, 1);
    if (seen == NULL) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: a test's allocation of a few KB */
    }
    for (uint32_t i = 0; i < loop->options.connections && rc == 0; i++) {
        rc = validate_slot(loop, &loop->conns[i], seen, &segments);
    }
    for (uint32_t i = 0; i < loop->buffers_free && rc == 0; i++) {
        if (loop->buffer_free[i] >= loop->options.buffers ||
            !hold_once(seen, loop->buffer_free[i])) {
            rc = BROKEN("buffer %u is free and held", loop->buffer_free[i]);
        }
    }
    for (uint32_t i = 0; i < loop->large_free_count && rc == 0; i++) {
        if (loop->large_free[i] < loop->options.buffers || !hold_once(seen, loop->large_free[i])) {
            rc = BROKEN("large buffer %u is free and held, or not large", loop->large_free[i]);
        }
    }
    for (uint32_t i = 0; i < all && rc == 0; i++) {
        if (!seen[i]) {
            rc = BROKEN("buffer %u is neither free nor held", i);
        }
    }
    free(seen);
    if (rc == 0 &&
        segments + loop->segments_free != loop->options.buffers + loop->options.connections) {
        rc = BROKEN("%u segments queued and %u free, of %u", segments, loop->segments_free,
                    loop->options.buffers + loop->options.connections);
    }
    return rc;
}
