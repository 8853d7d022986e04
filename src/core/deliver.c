/*
 * A stream's input handed to on_read, and the buffers that keep what it leaves: an ordinary one,
 * or, for a message that outgrows it, a large one (sxe_loop_options.large_buffers), and back; a
 * message no buffer can hold overflows (on_overflow). The reads themselves are in stream.c.
 */
#define SXE_LOG_MODULE stream_log
#include "sxe/log.h"

#include <errno.h>
#include <string.h>

#include "loop.h"
#include "outq.h"

static struct sxe_log_module stream_log = SXE_LOG_MODULE_INIT(STREAM);

/*
 * Hands len bytes of input (data: the scratch area, a backend's buffer or the connection's own
 * buffer) to on_read, and keeps what it leaves. Returns false if the connection closed meanwhile.
 */
bool sxe__stream_deliver(struct sxe_conn *conn, char *data, size_t len)
{
    sxe_loop_t *loop = conn->loop;
    size_t consumed = len;

    if (conn->handlers->on_read != NULL) {
        conn->flags |= SXE__CONN_CORKED;
        consumed = conn->handlers->on_read(conn, data, len);
    }
    if (!sxe__conn_is_open(conn)) {
        return false;
    }
    conn->flags &= (uint16_t)~SXE__CONN_CORKED;
    bool placed = (conn->flags & SXE__CONN_KEPT) != 0; /* sxe_conn_keep() placed the input */
    conn->flags &= (uint16_t)~SXE__CONN_KEPT;
    if (consumed > 0 && !placed) {
        conn->flags |= SXE__CONN_PROGRESS;
    }
    if (conn->queued != 0) { /* in conn->out, or a TLS stream's plain bytes */
        sxe__stream_flush(conn);
        if (!sxe__conn_is_open(conn)) {
            return false; /* on_drained closed it */
        }
        if (conn->queued != 0) {
            conn->flags |= SXE__CONN_NOTIFY_DRAIN;
        }
    }
    if (sxe__stream_closed_when_sent(conn)) {
        return false;
    }
    if (placed) {
        return true;
    }
    if (consumed >= len) {
        if (conn->input_buffer != SXE_NONE) {
            sxe__buffer_give(loop, conn->input_buffer);
            conn->input_buffer = SXE_NONE;
        }
        conn->input_len = 0;
        return true;
    }
    size_t kept = len - consumed;
    if (conn->input_buffer >= loop->options.buffers && conn->input_buffer != SXE_NONE &&
        kept <= loop->options.buffer_size && loop->buffers_free > 0) {
        /* The large message is gone: what is left goes back to an ordinary buffer, so the large
         * one is free for the next. */
        sxe__buffer_give(loop, conn->input_buffer);
        conn->input_buffer = sxe__buffer_take(loop);
    }
    if (conn->input_buffer == SXE_NONE) {
        if ((conn->input_buffer = sxe__buffer_take(loop)) == SXE_NONE) {
            loop->stats.no_buffer++;
            SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR,
                         "no free buffer to keep partial input: closing connections; raise %s (%u)",
                         sxe_log_setting("options.buffers"), loop->options.buffers);
            sxe__conn_close_reason(conn, SXE_CLOSE_NO_BUFFER, 0);
            return false;
        }
    }
    memmove(sxe__buffer_at(loop, conn->input_buffer), data + consumed, kept);
    conn->input_len = (uint32_t)kept;
    return true;
}

/*
 * The kept input filled the buffer and on_read took none of it, and no larger buffer can take it
 * (err: EMSGSIZE, none is larger; ENOBUFS, none is free). With on_overflow the program answers it
 * (a 413, an error line): the input goes, reading stops, and the connection closes once the answer
 * is sent. Without, it closes at once.
 */
static void overflow(struct sxe_conn *conn, int err)
{
    sxe_loop_t *loop = conn->loop;

    if (conn->handlers->on_overflow == NULL) {
        SXE_LOG_WARN("a message grew past its buffer (%u bytes) unconsumed",
                     sxe__buffer_size(loop, conn->input_buffer));
        sxe__conn_close_reason(conn, SXE_CLOSE_OVERFLOW, 0);
        return;
    }
    sxe__buffer_give(loop, conn->input_buffer);
    conn->input_buffer = SXE_NONE;
    conn->input_len = 0;
    errno = err;
    conn->handlers->on_overflow(conn);
    if (sxe__conn_is_open(conn) && (conn->lists & SXE__LIST_SHUT) == 0) {
        (void)sxe_conn_pause(conn);
        (void)sxe_conn_close_when_sent(conn);
    }
}

/*
 * The kept input filled its buffer and on_read took none of it. A message that outgrew an ordinary
 * buffer moves, once, to a large one if the loop has one free (sxe_loop_options.large_buffers);
 * else the connection overflows. Input the program kept (sxe_conn_keep()) neither moves nor
 * overflows: the program holds pointers into it, so reading just waits until it lets go, and the
 * peer is held back by TCP. @return true if the input has room to grow now.
 */
bool sxe__stream_grow(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t large;

    if (sxe_pool_state(loop->conn_pool, sxe__conn_index(conn)) == SXE__CONN_HELD) {
        conn->lists |= SXE__LIST_UNREAD; /* sxe_conn_unkeep() offers the input, and reads on */
        return false;
    }
    if (conn->input_buffer >= loop->options.buffers || loop->options.large_buffers == 0) {
        overflow(conn, EMSGSIZE);
        return false;
    }
    if ((large = sxe__buffer_take_large(loop)) == SXE_NONE) {
        loop->stats.no_large_buffer++;
        SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN,
                     "no free large buffer for a message over %u bytes: refusing it; raise %s (%u)",
                     loop->options.buffer_size, sxe_log_setting("options.large_buffers"),
                     loop->options.large_buffers);
        overflow(conn, ENOBUFS);
        return false;
    }
    memcpy(sxe__buffer_at(loop, large), sxe__buffer_at(loop, conn->input_buffer), conn->input_len);
    sxe__buffer_give(loop, conn->input_buffer);
    conn->input_buffer = large;
    return true;
}
