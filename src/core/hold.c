/*
 * Holding a connection's input and gathering its output, for a program that answers later:
 * sxe_conn_keep() and sxe_conn_unkeep() (the input stays put, in the connection's own buffer,
 * with no timeout, until let go), sxe_conn_cork() and sxe_conn_uncork() (writes made outside
 * on_read leave in one send, as those inside it do). See sxe/conn.h.
 */
#include <errno.h>
#include <string.h>

#include "loop.h"
#include "outq.h"
#include "sxe/log.h"

bool sxe_conn_cork(sxe_conn_t *conn)
{
    if (sxe__stream_check_open(conn) < 0 || (conn->flags & SXE__CONN_CORKED)) {
        return false;
    }
    conn->flags |= SXE__CONN_CORKED;
    return true;
}

void sxe_conn_uncork(sxe_conn_t *conn)
{
    if (sxe__stream_check_open(conn) < 0 || (conn->flags & SXE__CONN_CORKED) == 0) {
        return;
    }
    conn->flags &= (uint16_t)~SXE__CONN_CORKED;
    if (conn->queued != 0) { /* as after on_read: one send for what was gathered */
        sxe__stream_flush(conn);
        if (conn->queued != 0) {
            conn->flags |= SXE__CONN_NOTIFY_DRAIN;
        }
        /* Outside its own events, nothing else dates it: a connection that sends is not idle. */
        sxe__conn_settle(conn);
    }
    sxe__stream_closed_when_sent(conn);
}

int sxe_conn_keep(sxe_conn_t *conn, const char *data, size_t len, size_t consumed, char **kept)
{
    sxe_loop_t *loop;

    if (kept != NULL) {
        *kept = NULL;
    }
    if (!SXE_CHECK(conn != NULL && data != NULL && consumed <= len &&
                   (conn->flags & SXE__CONN_CORKED) != 0)) {
        return -EINVAL;
    }
    loop = conn->loop;
    if (conn->input_buffer == SXE_NONE &&
        (conn->input_buffer = sxe__buffer_take(loop)) == SXE_NONE) {
        loop->stats.no_buffer++;
        return -ENOBUFS;
    }
    char *at = sxe__buffer_at(loop, conn->input_buffer);
    memmove(at, data + consumed, len - consumed);
    conn->input_len = (uint32_t)(len - consumed);
    conn->flags |= SXE__CONN_KEPT;
    unsigned state = (unsigned)sxe_pool_state(loop->conn_pool, sxe__conn_index(conn));
    if (state != SXE__CONN_HELD) {
        sxe_pool_set_state(loop->conn_pool, sxe__conn_index(conn), state, SXE__CONN_HELD,
                           loop->now);
    }
    if (kept != NULL) {
        *kept = at;
    }
    return 0;
}

void sxe_conn_unkeep(sxe_conn_t *conn)
{
    sxe_loop_t *loop = conn->loop;
    unsigned index = sxe__conn_index(conn);

    if (sxe__conn_is_open(conn) && sxe_pool_state(loop->conn_pool, index) == SXE__CONN_HELD) {
        sxe_pool_set_state(loop->conn_pool, index, SXE__CONN_HELD,
                           conn->input_len > 0 ? SXE__CONN_READING : SXE__CONN_IDLE, loop->now);
        sxe__conn_settle(conn);
        /* Offer the kept input again, from the next turn, as after a pause; without a read: the
         * socket was watched all along, so what arrives brings an event of its own. Unless
         * reading stopped because the kept input filled its buffer: then read on after it. */
        sxe__conn_offer_later(conn);
        if (conn->lists & SXE__LIST_UNREAD) {
            conn->lists &= (uint8_t)~SXE__LIST_UNREAD;
            sxe__conn_ready_later(conn);
        }
    }
}
