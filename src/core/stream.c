/*
 * Byte streams (TCP and Unix): the read path, and the send path under the writes (write.c).
 *
 * Input. A readiness backend says a stream is readable, and it is read into the loop's
 * scratch area; a completion backend (io_uring) hands over bytes it received into buffers of its
 * own. Either way the callback sees them where they landed, and only what it leaves unconsumed is
 * copied into a buffer of the connection's own, where later input is appended. So a connection
 * that consumes whole messages (the usual case) never holds a buffer between events, and idle
 * connections cost their table entry alone.
 *
 * Output. A write goes straight to the socket when nothing is queued. What the socket does not
 * take goes to the output queue (outq.c), sent as the socket drains (an edge-triggered
 * SXE__IO_OUT). Inside on_read writes are only queued, and one send takes all of them after it
 * returns. A completion backend sends from the queue after the call has returned: the connection
 * is SENDING until it says how much went, and the queue stays put until then.
 *
 * TLS. A TLS stream's plain bytes are queued apart and sealed into conn->out as it empties, and its
 * reads open records (transport.h); the rest of this file treats it as any stream.
 */
#define SXE_LOG_MODULE stream_log
#include "sxe/log.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

#include "loop.h"
#include "outq.h"
#include "sys.h"
#include "transport.h"

static struct sxe_log_module stream_log = SXE_LOG_MODULE_INIT(STREAM);

/* Reads taken from one connection per turn before others get a chance. */
#define READS_PER_TURN 4

static void want_input(struct sxe_conn *conn, bool input);

int sxe__stream_check_writable(const struct sxe_conn *conn)
{
    if (!sxe__conn_is_open(conn) || conn->kind != SXE__KIND_STREAM ||
        (conn->flags & SXE__CONN_CLOSE_SENT) ||
        (conn->io_kind == SXE__IO_TLS && (conn->lists & SXE__LIST_SHUT)) || /* close_notify went */
        (sxe_pool_state(conn->loop->conn_pool, sxe__conn_index(conn)) == SXE__CONN_CONNECTING)) {
        return -EPIPE;
    }
    return conn->failed_err != 0 ? -conn->failed_err : 0;
}

/* The queue is empty: shut our side down or tell the program, as it asked. */
static void drained(struct sxe_conn *conn)
{
    if (conn->flags & SXE__CONN_CLOSE_PENDING) {
        return; /* closed: the program hears no more of it */
    }
    if (conn->flags & SXE__CONN_SHUTDOWN) {
        if (conn->io_kind == SXE__IO_TLS && sxe__tls_notify(conn)) {
            sxe__stream_flush(conn); /* close_notify first: this comes back once it is sent */
            return;
        }
        conn->flags &= (uint16_t)~SXE__CONN_SHUTDOWN;
        sxe__sys.shutdown(conn->fd, SHUT_WR);
    }
    if (conn->flags & SXE__CONN_NOTIFY_DRAIN) {
        conn->flags &= (uint16_t)~SXE__CONN_NOTIFY_DRAIN;
        if (conn->handlers->on_drained != NULL) {
            conn->handlers->on_drained(conn);
        }
    }
    if (conn->held_head != SXE_NONE || (conn->flags & SXE__CONN_EOF_PENDING)) {
        sxe__conn_ready_later(conn); /* held input, then the end, are offered from there */
    }
}

/* Sends from the head of the queue: a file range with sendfile, else the leading bytes. */
static ssize_t send_head(struct sxe_conn *conn, bool *file)
{
    sxe_loop_t *loop = conn->loop;

    *file = sxe__outq_head_is_file(conn, &conn->out);
    if (*file) {
        struct sxe__segment *segment = &loop->segments[conn->out.head];
        ssize_t sent =
            sxe__sys.sendfile(conn->fd, segment->file_fd, &segment->offset, segment->remaining);
        return sent >= 0 ? sent : -errno;
    }
    struct iovec iov[SXE__GATHER_MAX];
    bool before_file;
    int count = sxe__outq_gather(conn, &conn->out, iov, &before_file);
    /* Bytes followed by a file (a response head) wait to leave with the file's first bytes. */
    int flags = MSG_NOSIGNAL | (before_file ? MSG_MORE : 0);
    return loop->io->send(loop, conn->fd, sxe__conn_tag(conn), iov, count, flags);
}

/* conn->out of a TLS stream is empty: seals the next plain bytes into it. @return whether it did;
 * if it could not, the connection fails. */
static bool sealed(struct sxe_conn *conn)
{
    int rc = sxe__tls_seal(conn);

    if (rc < 0) {
        sxe__conn_fail_later(conn, rc == -ENOBUFS ? SXE_CLOSE_NO_BUFFER : SXE_CLOSE_ERROR, -rc);
    }
    return rc > 0;
}

void sxe__stream_flush(struct sxe_conn *conn)
{
    while (conn->failed_err == 0 && (conn->flags & SXE__CONN_SENDING) == 0) {
        if (conn->out.head == SXE_NONE) {
            if (conn->io_kind != SXE__IO_TLS || !sealed(conn)) {
                break;
            }
            continue; /* (a release callback the seal ran may have written since) */
        }
        bool file;
        ssize_t sent = send_head(conn, &file);
        if (sent == SXE__IO_PENDING) {
            conn->flags |= SXE__CONN_SENDING; /* the queue stays put until SXE__IO_SENT */
            return;
        }
        if (sent < 0) {
            if (sent == -EINTR) {
                continue;
            }
            if (sent != -EAGAIN) {
                sxe__conn_fail_later(conn, SXE_CLOSE_ERROR, (int)-sent);
            } else if (conn->io_kind == SXE__IO_TLS) {
                sxe__tls_crowded(conn); /* the socket is full: seal a record at a time */
            }
            break;
        }
        if (sent == 0 && file) {
            /* The file ended before the range did (truncated under us): fail the connection. */
            sxe__conn_fail_later(conn, SXE_CLOSE_ERROR, EIO);
            return;
        }
        sxe__outq_advance(conn, &conn->out, (size_t)sent, file);
    }
    if (conn->queued == 0 && conn->failed_err == 0) {
        drained(conn); /* (a TLS stream's plain bytes wait for its handshake) */
    }
    sxe__stream_wait_writable(conn);
}

/*
 * Output waits with no send under way (a sendfile or a write found the socket full): a stream that
 * does not watch writability yet (accepted on a completion backend, which sends in the ring and
 * needs it only then) starts now.
 */
void sxe__stream_wait_writable(struct sxe_conn *conn)
{

    if ((conn->flags & SXE__CONN_NO_OUT) && conn->out.head != SXE_NONE &&
        (conn->flags & SXE__CONN_SENDING) == 0 && conn->failed_err == 0) {
        conn->flags &= (uint16_t)~SXE__CONN_NO_OUT;
        want_input(conn, (conn->flags & (SXE__CONN_PAUSED | SXE__CONN_HOLDING)) == 0);
    }
}

int sxe__stream_check_open(const struct sxe_conn *conn)
{
    if (!SXE_CHECK(conn != NULL)) {
        return -EINVAL;
    }
    if (!sxe__conn_is_open(conn) || conn->kind != SXE__KIND_STREAM) {
        return -EPIPE;
    }
    return conn->io_kind == SXE__IO_RESERVED ? -ENOTCONN : 0; /* no socket of its own yet */
}

/* Tells the backend whether the stream wants input, as pause and resume change it. */
static void want_input(struct sxe_conn *conn, bool input)
{
    sxe_loop_t *loop = conn->loop;
    unsigned wanted = SXE__STREAM_WANTS | SXE__IO_MODIFY;

    if ((conn->flags & SXE__CONN_RECEIVE_FDS) || conn->io_kind == SXE__IO_TLS) {
        wanted &= ~SXE__IO_RECV; /* it reads for itself */
    }
    if (conn->flags & SXE__CONN_NO_OUT) {
        wanted &= ~SXE__IO_OUT;
    }
    if (!input) {
        wanted &= ~(SXE__IO_IN | SXE__IO_RECV);
    }
    if (loop->io->watch(loop, conn->fd, sxe__conn_tag(conn), wanted) < 0) {
        sxe__conn_fail_later(conn, SXE_CLOSE_ERROR, ENOMEM); /* GCOVR_EXCL_LINE: logged there */
    }
}

int sxe_conn_pause(sxe_conn_t *conn)
{
    int rc;

    if ((rc = sxe__stream_check_open(conn)) < 0) {
        return rc;
    }
    if ((conn->flags & SXE__CONN_PAUSED) == 0) {
        conn->flags = (uint16_t)((conn->flags | SXE__CONN_PAUSED) & ~SXE__CONN_RESUMED);
        want_input(conn, false);
    }
    if (conn->out.head != SXE_NONE) {
        conn->flags |= SXE__CONN_NOTIFY_DRAIN; /* the natural moment to resume */
    }
    return 0;
}

int sxe_conn_resume(sxe_conn_t *conn)
{
    int rc;

    if ((rc = sxe__stream_check_open(conn)) < 0) {
        return rc;
    }
    if (conn->flags & SXE__CONN_PAUSED) {
        /* Kept input is offered from the ready list; the backend, watching input again, reports
         * what waits in the socket as a new event. */
        conn->flags = (uint16_t)((conn->flags & ~SXE__CONN_PAUSED) | SXE__CONN_RESUMED);
        if ((conn->flags & SXE__CONN_HOLDING) == 0) {
            want_input(conn, true); /* else once what is held has been offered */
        }
        sxe__conn_ready_later(conn);
    }
    return 0;
}

size_t sxe_conn_queued(const sxe_conn_t *conn)
{
    return (size_t)conn->queued;
}

bool sxe_conn_backed_up(const sxe_conn_t *conn)
{
    return conn->queued >= conn->loop->options.high_water;
}

int sxe_conn_set_nodelay(sxe_conn_t *conn)
{
    int one = 1;

    if (!sxe__conn_is_open(conn)) {
        return -EPIPE;
    }
    if (conn->io_kind == SXE__IO_RESERVED) {
        return -ENOTCONN; /* its socket is a placeholder, replaced when the connect begins */
    }
    return sxe__sys.setsockopt(conn->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ? -errno
                                                                                          : 0;
}

int sxe_conn_shutdown(sxe_conn_t *conn)
{
    int rc;

    if ((rc = sxe__stream_check_writable(conn)) < 0) {
        return rc;
    }
    conn->lists |= SXE__LIST_SHUT;
    if (conn->io_kind == SXE__IO_TLS && conn->queued == 0) {
        sxe__tls_notify(conn); /* close_notify, then the socket's end once it is sent */
    }
    if (conn->queued != 0) {
        conn->flags |= SXE__CONN_SHUTDOWN;
        if ((conn->flags & SXE__CONN_CORKED) == 0) {
            sxe__stream_flush(conn); /* (TLS: close_notify may be all there is to send) */
        }
        return 0;
    }
    return sxe__sys.shutdown(conn->fd, SHUT_WR) < 0 ? -errno : 0;
}

bool sxe__stream_closed_when_sent(struct sxe_conn *conn)
{
    if ((conn->flags & SXE__CONN_CLOSE_SENT) == 0 || conn->queued != 0 || conn->failed_err != 0) {
        return false;
    }
    if (conn->io_kind == SXE__IO_TLS && sxe__tls_notify(conn)) {
        sxe__stream_flush(conn); /* close_notify goes first, as far as the socket takes it */
        if (conn->queued != 0 || conn->failed_err != 0) {
            return false;
        }
    }
    sxe__conn_close_reason(conn, SXE_CLOSE_LOCAL, 0);
    return true;
}

int sxe_conn_close_when_sent(sxe_conn_t *conn)
{
    int rc;

    if ((rc = sxe__stream_check_writable(conn)) < 0) {
        return rc;
    }
    conn->flags |= SXE__CONN_CLOSE_SENT;
    conn->flags &= (uint16_t)~SXE__CONN_SHUTDOWN; /* the close ends our side anyway */
    if ((conn->flags & SXE__CONN_CORKED) == 0) {
        sxe__stream_closed_when_sent(conn); /* in on_read, the flush after it returns closes */
    }
    return 0;
}

/*
 * A read that returned got <= 0 (errno set when negative): the end of the stream (on_eof), an
 * error (close), or nothing yet. @return true if interrupted: read again.
 */
static bool read_again(struct sxe_conn *conn, ssize_t got)
{
    if (got == 0) {
        sxe__stream_eof(conn);
        return false;
    }
    if (errno == EINTR) {
        return true;
    }
    if (errno != EAGAIN) {
        sxe__conn_close_reason(conn, SXE_CLOSE_ERROR, errno);
    }
    return false;
}

void sxe__stream_eof(struct sxe_conn *conn)
{
    if (conn->handlers->on_eof == NULL) {
        sxe__conn_close_reason(conn, SXE_CLOSE_PEER, 0);
    } else if ((conn->flags & SXE__CONN_EOF) == 0) {
        conn->flags |= SXE__CONN_EOF;
        conn->handlers->on_eof(conn);
    }
}

/*
 * Bytes a completion backend received. Without kept input they are offered where they are; else
 * they are appended to the connection's buffer, as much as fits at a time, and offered from there.
 * @return how many were taken: fewer than len if the connection paused (or closed) on the way.
 */
static size_t received(struct sxe_conn *conn, const char *data, size_t len)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t size = loop->options.buffer_size;
    size_t taken = 0;

    if (conn->input_buffer == SXE_NONE && len <= size) {
        sxe__stream_deliver(conn, (char *)(uintptr_t)data, len);
        return len;
    }
    while (taken < len) {
        if (conn->input_buffer == SXE_NONE &&
            (conn->input_buffer = sxe__buffer_take(loop)) == SXE_NONE) {
            loop->stats.no_buffer++;
            sxe__conn_close_reason(conn, SXE_CLOSE_NO_BUFFER, 0);
            return taken;
        }
        if (conn->input_len == sxe__buffer_size(loop, conn->input_buffer) &&
            !sxe__stream_grow(conn)) {
            return taken;
        }
        size = sxe__buffer_size(loop, conn->input_buffer);
        size_t part = len - taken < size - conn->input_len ? len - taken : size - conn->input_len;
        memcpy(sxe__buffer_at(loop, conn->input_buffer) + conn->input_len, data + taken, part);
        conn->input_len += (uint32_t)part;
        taken += part;
        if (!sxe__stream_deliver(conn, sxe__buffer_at(loop, conn->input_buffer), conn->input_len) ||
            (conn->flags & (SXE__CONN_PAUSED | SXE__CONN_RESUMED))) {
            break; /* resumed: kept input is offered first, from the next turn */
        }
    }
    return taken;
}

/* Whether received input must wait: paused, output backed up, or older input still held. */
static bool must_hold(const struct sxe_conn *conn)
{
    return (conn->flags & SXE__CONN_PAUSED) || conn->held_head != SXE_NONE ||
           conn->queued >= conn->loop->options.high_water;
}

/* Holds received bytes (inq.c) and tells the backend to stop receiving until they are offered. */
static void hold(struct sxe_conn *conn, const char *data, size_t len)
{
    if (!sxe__inq_hold(conn, data, len)) {
        /* It sends far more than it reads, or the backend has few buffers left for others. */
        conn->loop->stats.no_buffer++;
        SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN,
                     "no room to hold input a connection cannot take yet: closing it (a peer "
                     "that sends and does not read)");
        sxe__conn_close_reason(conn, SXE_CLOSE_NO_BUFFER, 0);
        return;
    }
    if ((conn->flags & SXE__CONN_HOLDING) == 0) {
        conn->flags |= SXE__CONN_HOLDING;
        want_input(conn, false);
    }
}

/*
 * Offers held input, oldest first, while the connection can take it, and has the backend receive
 * again once none is left. @return false if the connection closed meanwhile.
 */
static bool offer_held(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;
    struct sxe__held piece;

    while ((conn->flags & SXE__CONN_PAUSED) == 0 && conn->queued < loop->options.high_water &&
           sxe__inq_take(conn, &piece)) {
        size_t taken = received(conn, piece.data, piece.len);
        if (!sxe__conn_is_open(conn)) {
            sxe__inq_release(loop, &piece);
            return false;
        }
        if (taken < piece.len) {
            sxe__inq_put_back(conn, &piece, taken); /* paused inside the piece */
            break;
        }
        sxe__inq_release(loop, &piece);
    }
    if (conn->held_head == SXE_NONE && (conn->flags & SXE__CONN_HOLDING) &&
        (conn->flags & SXE__CONN_PAUSED) == 0) {
        conn->flags &= (uint16_t)~SXE__CONN_HOLDING;
        want_input(conn, true);
    }
    return true;
}

void sxe__stream_read_turn(struct sxe_conn *conn, sxe__read_one_t read_one, uint32_t events)
{
    for (int reads = 0; reads < READS_PER_TURN; reads++) {
        bool more = false;
        ssize_t got = read_one(conn, events, &more);
        if (got > 0) {
            if (more) {
                continue;
            }
            return;
        }
        if (read_again(conn, got)) {
            reads--;
            continue;
        }
        return;
    }
    /* The socket may hold more: come back after the others have had a turn. */
    sxe__conn_ready_later(conn);
}

/* One read into the connection's input, and its delivery (sxe__read_one_t). */
static ssize_t read_one(struct sxe_conn *conn, uint32_t events, bool *more)
{
    sxe_loop_t *loop = conn->loop;
    bool own = conn->input_buffer != SXE_NONE;
    size_t held = own ? conn->input_len : 0;
    size_t size = own ? sxe__buffer_size(loop, conn->input_buffer) : loop->options.buffer_size;

    if (held == size) {
        if (!sxe__stream_grow(conn)) {
            return 1; /* no room, and no larger buffer: it closed, or overflowed (answered) */
        }
        size = sxe__buffer_size(loop, conn->input_buffer);
    }
    char *base = own ? sxe__buffer_at(loop, conn->input_buffer) : loop->scratch;
    bool tls = conn->io_kind == SXE__IO_TLS;
    ssize_t got = tls ? sxe__tls_read(conn, base + held, size - held)
                      : sxe__sys.recv(conn->fd, base + held, size - held, 0);
    if (tls && conn->queued != 0) {
        int err = errno;
        sxe__stream_flush(conn); /* the handshake's answer, or plain bytes waiting for its end */
        if (!sxe__conn_is_open(conn) || sxe__stream_closed_when_sent(conn)) {
            return 1; /* on_drained closed it, or it closes now that all is sent */
        }
        errno = err;
    }
    if (got <= 0) {
        return got;
    }
    if (!sxe__stream_deliver(conn, base, held + (size_t)got) || (conn->flags & SXE__CONN_PAUSED)) {
        return got;
    }
    if (conn->flags & SXE__CONN_RESUMED) {
        /* Kept input is to be offered first (new handlers take what the old left): it comes
         * next turn, and the reading after it, the end of the stream too. */
        sxe__conn_ready_later(conn);
        return got;
    }
    /* A short read emptied the socket, unless its end is known to follow (no edge would). Under
     * TLS, the socket was emptied if the last read of it was short and no opened bytes wait. */
    *more =
        (size_t)got == size - held || (events & SXE__IO_HUP) != 0 || (tls && sxe__tls_more(conn));
    return got;
}

/*
 * The socket is readable (a readiness backend): read it and offer what came, READS_PER_TURN
 * reads at most, until a short read empties it, or until a pause. Edge-triggered: a read that
 * fills the buffer reads again, as the socket may hold more, unless the peer has shut down
 * (SXE__IO_HUP): then no edge follows, so read on to the end. That edge may have come in a turn
 * whose reads stopped early (a pause, READS_PER_TURN), so it is remembered.
 */
static void readable(struct sxe_conn *conn, uint32_t events)
{
    if (events & SXE__IO_HUP) {
        conn->lists |= SXE__LIST_HUP;
    }
    sxe__stream_read_turn(conn, read_one,
                          events | ((conn->lists & SXE__LIST_HUP) ? SXE__IO_HUP : 0u));
}

/*
 * Input for the connection: received bytes, the end of the stream, or readiness to read (which,
 * when the backend receives for the stream, is the ready list's turn to offer what waits).
 */
static void input(struct sxe_conn *conn, const struct sxe__io_event *event)
{
    sxe_loop_t *loop = conn->loop;

    if (conn->flags & SXE__CONN_RESUMED) {
        /* Offer what was kept while paused before anything newer. */
        conn->flags &= (uint16_t)~SXE__CONN_RESUMED;
        if (conn->input_len > 0 &&
            !sxe__stream_deliver(conn, sxe__buffer_at(loop, conn->input_buffer), conn->input_len)) {
            return;
        }
    }
    if ((conn->held_head != SXE_NONE || (conn->flags & SXE__CONN_HOLDING)) && !offer_held(conn)) {
        return;
    }
    if ((conn->flags & SXE__CONN_EOF_PENDING) && conn->held_head == SXE_NONE &&
        (conn->flags & SXE__CONN_PAUSED) == 0) {
        conn->flags &= (uint16_t)~SXE__CONN_EOF_PENDING;
        sxe__stream_eof(conn);
        return;
    }
    if (event->events & SXE__IO_KEPT) {
        return; /* the ready list offered kept input only (sxe_conn_unkeep) */
    }
    if ((event->events & SXE__IO_RECV) == 0) {
        if ((loop->io->kind == SXE__IO_READINESS || conn->io_kind == SXE__IO_TLS) &&
            (conn->flags & SXE__CONN_PAUSED) == 0) {
            readable(conn, event->events);
        }
        return;
    }
    if (event->result > 0 && must_hold(conn)) {
        hold(conn, event->data, (size_t)event->result);
    } else if (event->result > 0) {
        size_t taken = received(conn, event->data, (size_t)event->result);
        if (taken < (size_t)event->result && sxe__conn_is_open(conn)) {
            hold(conn, event->data + taken, (size_t)event->result - taken);
        }
    } else if (event->result == 0 && ((conn->flags & (SXE__CONN_PAUSED | SXE__CONN_RESUMED)) ||
                                      conn->held_head != SXE_NONE)) {
        conn->flags |= SXE__CONN_EOF_PENDING; /* after the input held or kept before it */
    } else if (event->result == 0) {
        sxe__stream_eof(conn);
    } else {
        sxe__conn_close_reason(conn, SXE_CLOSE_ERROR, -event->result);
    }
}

/*
 * A send the backend completed: the queue moves on by what went, and the rest is sent. A
 * connection closed meanwhile sends what it had queued before the close, as a readiness backend
 * would have sent it at once, and goes when that is done, fails, or times out (conn.c).
 */
static void sent(struct sxe_conn *conn, int result)
{
    conn->flags &= (uint16_t)~SXE__CONN_SENDING;
    if (result >= 0) {
        sxe__outq_advance(conn, &conn->out, (size_t)result, false);
        if (conn->io_kind == SXE__IO_TLS && conn->out.head != SXE_NONE) {
            sxe__tls_crowded(conn); /* the socket took part: seal a record at a time */
        }
    }
    if (conn->flags & SXE__CONN_CLOSE_PENDING) {
        if (result > 0 && conn->out.head != SXE_NONE) {
            sxe__stream_flush(conn);
        }
        if ((conn->flags & SXE__CONN_SENDING) == 0) {
            sxe__conn_closing_done(conn);
        }
        return;
    }
    if (result < 0) {
        sxe__conn_fail_later(conn, SXE_CLOSE_ERROR, -result);
        return;
    }
    sxe__stream_flush(conn);
}

bool sxe__stream_sent_or_closed(struct sxe_conn *conn, const struct sxe__io_event *event)
{
    if (event->events & SXE__IO_SENT) {
        sent(conn, event->result);
        if (!sxe__conn_is_open(conn)) {
            return true;
        }
        return sxe__stream_closed_when_sent(conn);
    }
    return (conn->flags & SXE__CONN_CLOSE_PENDING) != 0; /* only the pending send's end matters */
}

void sxe__stream_io(struct sxe_conn *conn, const struct sxe__io_event *event)
{
    if (sxe__stream_sent_or_closed(conn, event)) {
        return;
    }
    if (event->events & (SXE__IO_IN | SXE__IO_HUP | SXE__IO_ERR | SXE__IO_KEPT)) {
        input(conn, event);
    }
    if (sxe__conn_is_open(conn) && (event->events & SXE__IO_OUT)) {
        sxe__stream_flush(conn);
        sxe__stream_closed_when_sent(conn);
    }
    if (sxe__conn_is_open(conn)) {
        sxe__conn_settle(conn);
    }
}
