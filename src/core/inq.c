/*
 * Held input. A completion backend (io_uring) receives a connection's bytes whether or not it can
 * take them: while it is paused, or while its output is backed up (sxe_conn_backed_up()), a turn
 * can bring more than its buffer holds. Those bytes are held, in order, and the backend is told to
 * stop receiving for the connection until they have all been offered. A readiness backend never
 * needs this: it leaves unwanted bytes in the socket.
 *
 * A piece stays where it landed, in the backend's buffer (keep), while the backend has buffers to
 * spare; past that it is copied into the loop's I/O buffers, several pieces to a buffer, and the
 * backend's buffer goes back at once. So connections that hold a little each (a client that sends
 * a few bytes behind a request whose answer it does not read) cannot use up the backend's buffers
 * and have the others closed: they use the buffers every connection may have.
 */
#include <string.h>

#include "io.h"
#include "loop.h"
#include "outq.h"

/* Links a new piece at the tail: @return it, or NULL if the loop or the connection has no room. */
static struct sxe__held *link_piece(struct sxe_conn *conn, uint32_t *tail_link, unsigned count,
                                    struct sxe__held piece)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t slot = loop->held_free;

    if (slot == SXE_NONE || count >= SXE__HELD_PER_CONN) {
        return NULL;
    }
    loop->held_free = loop->held[slot].next;
    piece.next = SXE_NONE;
    loop->held[slot] = piece;
    *tail_link = slot;
    return &loop->held[slot];
}

/* The bytes after a copied piece's end that its buffer still has room for. */
static size_t room_after(sxe_loop_t *loop, const struct sxe__held *piece)
{
    const char *end = sxe__buffer_at(loop, piece->buffer) + sxe__buffer_size(loop, piece->buffer);

    return (size_t)(end - (piece->data + piece->len));
}

/* Copies the bytes behind the tail, filling its buffer, then fresh ones: false if none is left. */
static bool copy(struct sxe_conn *conn, struct sxe__held *tail, uint32_t *tail_link, unsigned count,
                 const char *data, size_t len)
{
    sxe_loop_t *loop = conn->loop;

    while (len > 0) {
        if (tail == NULL || tail->buffer == SXE_NONE || room_after(loop, tail) == 0) {
            uint32_t buffer = sxe__buffer_take(loop);
            struct sxe__held *fresh;

            if (buffer == SXE_NONE) {
                return false;
            }
            fresh = link_piece(
                conn, tail_link, count++,
                (struct sxe__held){.data = sxe__buffer_at(loop, buffer), .buffer = buffer});
            if (fresh == NULL) {
                sxe__buffer_give(loop, buffer);
                return false;
            }
            tail = fresh;
            tail_link = &tail->next;
        }
        size_t room = room_after(loop, tail);
        size_t part = len < room ? len : room;
        memcpy((char *)(uintptr_t)tail->data + tail->len, data, part);
        tail->len += (uint32_t)part;
        data += part;
        len -= part;
    }
    return true;
}

bool sxe__inq_hold(struct sxe_conn *conn, const char *data, size_t len)
{
    sxe_loop_t *loop = conn->loop;
    struct sxe__held *tail = NULL;
    unsigned count = 0;

    /* The tail is found by walking: a connection holds a few pieces, and the slot stays small. */
    uint32_t *link = &conn->held_head;
    while (*link != SXE_NONE) {
        tail = &loop->held[*link];
        link = &tail->next;
        count++;
    }
    if (tail != NULL && tail->buffer != SXE_NONE && room_after(loop, tail) >= len) {
        return copy(conn, tail, link, count, data, len); /* it fits behind the last copy */
    }
    if (count < SXE__HELD_PER_CONN && loop->held_free != SXE_NONE && loop->io->keep(loop, data)) {
        (void)link_piece(
            conn, link, count,
            (struct sxe__held){.data = data, .len = (uint32_t)len, .buffer = SXE_NONE});
        return true;
    }
    return copy(conn, tail, link, count, data, len);
}

void sxe__inq_put_back(struct sxe_conn *conn, const struct sxe__held *piece, size_t taken)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t slot = loop->held_free; /* the one sxe__inq_take just freed */

    loop->held_free = loop->held[slot].next;
    loop->held[slot] = *piece;
    loop->held[slot].data += taken;
    loop->held[slot].len -= (uint32_t)taken;
    loop->held[slot].next = conn->held_head;
    conn->held_head = slot;
}

bool sxe__inq_take(struct sxe_conn *conn, struct sxe__held *piece)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t slot = conn->held_head;

    if (slot == SXE_NONE) {
        return false;
    }
    *piece = loop->held[slot];
    conn->held_head = loop->held[slot].next;
    loop->held[slot].next = loop->held_free;
    loop->held_free = slot;
    return true;
}

void sxe__inq_release(sxe_loop_t *loop, const struct sxe__held *piece)
{
    if (piece->buffer != SXE_NONE) {
        sxe__buffer_give(loop, piece->buffer);
    } else {
        loop->io->release(loop, piece->data);
    }
}

void sxe__inq_drop(struct sxe_conn *conn)
{
    struct sxe__held piece;

    while (sxe__inq_take(conn, &piece)) {
        sxe__inq_release(conn->loop, &piece);
    }
}
