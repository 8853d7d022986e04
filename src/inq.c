/*
 * Held input. A completion backend (io_uring) receives a connection's bytes whether or not it can
 * take them: while it is paused, or while its output is backed up (SXE_CONN_FULL), a turn can
 * bring more than its buffer holds. Those bytes stay where they landed, in the backend's buffers
 * (keep), in order, and the backend is told to stop receiving for the connection until they have
 * all been offered. A readiness backend never needs this: it leaves unwanted bytes in the socket.
 */
#include "io.h"
#include "loop.h"

bool sxe__inq_hold(struct sxe_conn *conn, const char *data, size_t len)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t piece = loop->held_free;
    unsigned count = 0;

    /* The tail is found by walking: a connection holds a few pieces, and the slot stays small. */
    uint32_t *link = &conn->held_head;
    while (*link != SXE_NONE) {
        link = &loop->held[*link].next;
        count++;
    }
    if (piece == SXE_NONE || count >= SXE__HELD_PER_CONN || !loop->io->keep(loop, data)) {
        return false;
    }
    loop->held_free = loop->held[piece].next;
    loop->held[piece] = (struct sxe__held){.data = data, .len = (uint32_t)len, .next = SXE_NONE};
    *link = piece;
    return true;
}

void sxe__inq_put_back(struct sxe_conn *conn, const char *data, size_t len)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t piece = loop->held_free; /* the one sxe__inq_take just freed */

    loop->held_free = loop->held[piece].next;
    loop->held[piece] = (struct sxe__held){.data = data, .len = (uint32_t)len, .next = SXE_NONE};
    loop->held[piece].next = conn->held_head;
    conn->held_head = piece;
}

bool sxe__inq_take(struct sxe_conn *conn, const char **data, size_t *len)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t piece = conn->held_head;

    if (piece == SXE_NONE) {
        return false;
    }
    *data = loop->held[piece].data;
    *len = loop->held[piece].len;
    conn->held_head = loop->held[piece].next;
    loop->held[piece].next = loop->held_free;
    loop->held_free = piece;
    return true;
}

void sxe__inq_drop(struct sxe_conn *conn)
{
    const char *data;
    size_t len;

    while (sxe__inq_take(conn, &data, &len)) {
        conn->loop->io->release(conn->loop, data);
    }
}
