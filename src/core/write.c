/*
 * The writes of byte streams: copies, memory by reference and file ranges, sent at once when
 * nothing is queued before them and the connection is not corked (inside on_read), else queued
 * (outq.c) for stream.c's flush to send as the socket drains. A TLS stream's bytes are queued as
 * plain bytes, sealed into records as its output empties (transport.h).
 */
#define SXE_LOG_MODULE write_log
#include "sxe/log.h"

#include <errno.h>
#include <sys/socket.h>

#include "loop.h"
#include "outq.h"
#include "sys.h"
#include "transport.h"

/* References up to this long are copied when queued: a copy costs less than a queue entry. */
#define REF_COPY_MAX 1024

static struct sxe_log_module write_log = SXE_LOG_MODULE_INIT(STREAM); /* stream.c's, by name */

/*
 * A write was accepted: on_drained is asked for when output waits in the queue, or, while writes
 * are corked (gathered for one send), once it is backed up. The test for that is
 * sxe_conn_backed_up()'s, written out here on the write path.
 */
static int write_result(struct sxe_conn *conn)
{
    if (conn->queued >= conn->loop->options.high_water ||
        (conn->out.head != SXE_NONE && (conn->flags & SXE__CONN_CORKED) == 0)) {
        conn->flags |= SXE__CONN_NOTIFY_DRAIN;
    }
    return 0;
}

/*
 * Bytes now queued on a TLS stream (its plain queue): outside on_read they are sealed and sent at
 * once, as far as the socket takes them. @return as a write.
 */
static int queued_plain(struct sxe_conn *conn)
{
    conn->flags |= SXE__CONN_PROGRESS; /* the program's bytes: a sign of life, unlike a record's */
    if ((conn->flags & SXE__CONN_CORKED) == 0) {
        sxe__stream_flush(conn);
        if (conn->failed_err != 0) {
            return -conn->failed_err;
        }
        sxe__conn_settle(conn);
    }
    return write_result(conn);
}

/*
 * Sends from *bytes straight to the socket until all *len are gone or it is full, moving both on.
 * Only with nothing queued, so nothing is pending in the backend either.
 * @return 0, or the error the connection now fails with.
 */
static int send_now(struct sxe_conn *conn, const char **bytes, size_t *len)
{
    size_t wanted = *len;

    while (*len > 0) {
        ssize_t sent = sxe__sys.send(conn->fd, *bytes, *len, MSG_NOSIGNAL);
        if (sent < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno != EAGAIN) {
                return sxe__conn_fail_later(conn, SXE_CLOSE_ERROR, errno);
            }
            break;
        }
        *bytes += sent;
        *len -= (size_t)sent;
    }
    if (*len < wanted) {
        /* Bytes went out: the connection is busy, not idle, whatever it reads. A connection that
         * only sends (an upload to an upstream, a tunnel's quiet side) would otherwise be timed
         * out, or evicted, by the age of its last read. */
        sxe__conn_settle(conn);
    }
    return 0;
}

int sxe_conn_write(sxe_conn_t *conn, const void *data, size_t len)
{
    sxe_loop_t *loop = conn->loop;
    const char *bytes = data;
    int rc;

    if ((rc = sxe__stream_check_writable(conn)) < 0) {
        return rc;
    }
    if (conn->queued + len > loop->options.write_limit) {
        return -ENOBUFS;
    }
    if (conn->io_kind == SXE__IO_TLS) {
        struct sxe__queue *plain = sxe__tls_plain(conn);
        if (!sxe__outq_can_append(conn, plain, len + SXE__TLS_RESERVE)) {
            return -ENOBUFS;
        }
        sxe__outq_append(conn, plain, bytes, len);
        return queued_plain(conn);
    }
    if ((conn->flags & SXE__CONN_CORKED) && sxe__outq_can_append(conn, &conn->out, len)) {
        /* Inside on_read: gather the replies to this input and send them with one call. */
        sxe__outq_append(conn, &conn->out, bytes, len);
        return write_result(conn);
    }
    if (conn->flags & SXE__CONN_CORKED) {
        sxe__stream_flush(conn); /* out of buffers while corked: send what is gathered first */
    }
    if (conn->out.head != SXE_NONE && !sxe__outq_can_append(conn, &conn->out, len)) {
        return -ENOBUFS;
    }
    if (conn->out.head == SXE_NONE) {
        if ((rc = send_now(conn, &bytes, &len)) < 0 || len == 0) {
            return rc;
        }
        if (!sxe__outq_can_append(conn, &conn->out, len)) {
            /* Part is sent and the rest has nowhere to go: the stream cannot be completed. */
            loop->stats.no_buffer++;
            SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR,
                         "no free buffer to queue output: closing connections; raise %s (%u)",
                         sxe_log_setting("options.buffers"), loop->options.buffers);
            return sxe__conn_fail_later(conn, SXE_CLOSE_NO_BUFFER, ENOBUFS);
        }
    }
    sxe__outq_append(conn, &conn->out, bytes, len);
    sxe__conn_settle(conn);
    sxe__stream_wait_writable(conn);
    return write_result(conn);
}

/*
 * Queues a file range and sends what the socket takes. With own, the connection owns fd from here:
 * closed when its segment goes (sent, or the connection closed), or now if it is not queued.
 * release, if set, is called at the same moments.
 */
static int queue_file(struct sxe_conn *conn, int fd, off_t offset, size_t len, bool own,
                      sxe_conn_release_t release, void *arg)
{
    sxe_loop_t *loop = conn->loop;
    int rc = sxe__stream_check_writable(conn);

    if (rc == 0 && !SXE_CHECK(fd >= 0)) {
        rc = -EBADF;
    }
    if (rc < 0 || len == 0 || loop->segments_free == 0) {
        if (own && fd >= 0) {
            sxe__sys.close(fd);
        }
        if (release != NULL) {
            release(arg);
        }
        /* A zero-length range queues nothing: a zero-length sendfile would read as EOF. */
        return rc < 0 ? rc : len == 0 ? write_result(conn) : -ENOBUFS;
    }
    struct sxe__queue *queue = conn->io_kind == SXE__IO_TLS ? sxe__tls_plain(conn) : &conn->out;
    struct sxe__segment *segment = sxe__outq_link(conn, queue, len, release, arg);
    segment->file_fd = fd;
    segment->close_fd = own;
    segment->offset = offset;
    sxe__stream_flush(conn);
    if (conn->failed_err != 0) {
        return -conn->failed_err;
    }
    sxe__conn_settle(conn);
    if (conn->out.head != SXE_NONE) {
        /* The flush above ran even inside on_read: what is left waits for the socket, however
         * soon it drains, and on_drained must say when (write_result leaves corked writes out). */
        conn->flags |= SXE__CONN_NOTIFY_DRAIN;
    }
    return write_result(conn);
}

int sxe_conn_sendfile(sxe_conn_t *conn, int fd, off_t offset, size_t len)
{
    return queue_file(conn, fd, offset, len, false, NULL, NULL);
}

int sxe_conn_sendfile_and_close(sxe_conn_t *conn, int fd, off_t offset, size_t len)
{
    return queue_file(conn, fd, offset, len, true, NULL, NULL);
}

int sxe_conn_sendfile_ref(sxe_conn_t *conn, int fd, off_t offset, size_t len,
                          sxe_conn_release_t release, void *arg)
{
    return queue_file(conn, fd, offset, len, false, release, arg);
}

int sxe_conn_write_ref(sxe_conn_t *conn, const void *data, size_t len, sxe_conn_release_t release,
                       void *arg)
{
    sxe_loop_t *loop = conn->loop;
    const char *bytes = data;
    int rc = sxe__stream_check_writable(conn);
    bool tls = conn->io_kind == SXE__IO_TLS;
    struct sxe__queue *queue = tls ? sxe__tls_plain(conn) : &conn->out;

    if (rc == 0 && !SXE_CHECK(data != NULL || len == 0)) {
        rc = -EINVAL;
    }
    if (rc == 0 && len > 0 && loop->segments_free == 0) {
        rc = -ENOBUFS;
    }
    /* Outside on_read, with nothing queued before them, the bytes go to the socket at once. */
    if (rc == 0 && !tls && !(conn->flags & SXE__CONN_CORKED) && conn->out.head == SXE_NONE) {
        rc = send_now(conn, &bytes, &len);
    }
    bool copy = rc == 0 && len > 0 && len <= REF_COPY_MAX &&
                sxe__outq_can_append(conn, queue, len + (tls ? SXE__TLS_RESERVE : 0));
    if (copy) {
        sxe__outq_append(conn, queue, bytes, len);
        len = 0;
    }
    if (rc < 0 || len == 0) {
        if (release != NULL) {
            release(arg);
        }
        if (copy && tls) {
            return queued_plain(conn);
        }
        if (copy && !(conn->flags & SXE__CONN_CORKED)) {
            sxe__conn_settle(conn);
            sxe__stream_wait_writable(conn);
        }
        return rc < 0 ? rc : write_result(conn);
    }
    sxe__outq_link(conn, queue, len, release, arg)->data = bytes;
    if (tls) {
        return queued_plain(conn);
    }
    if (!(conn->flags & SXE__CONN_CORKED)) {
        sxe__conn_settle(conn);
        sxe__stream_wait_writable(conn);
    }
    return write_result(conn);
}
