/*
 * fd channels: Unix stream connections that carry descriptors (SCM_RIGHTS) instead of bytes, and
 * handing a connection over one of them to another process or loop. A channel is a stream kind of
 * its own: its callback receives descriptors with recvmsg, since control messages do not fit a
 * backend's receive buffers, and shares the stream's write path.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "loop.h"
#include "sxe/log.h"
#include "sys.h"

/* The most fds one recvmsg accepts. */
#define FDS_PER_MESSAGE 8

/* Reads one message: its bytes are markers; the fds go to on_fd. */
static ssize_t receive_fds(struct sxe_conn *conn, char *into, size_t size)
{
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int) * FDS_PER_MESSAGE)];
    } control;
    struct iovec iov = {.iov_base = into, .iov_len = size};
    struct msghdr message = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = &control,
                             .msg_controllen = sizeof(control)};

    ssize_t got = sxe__sys.recvmsg(conn->fd, &message, MSG_CMSG_CLOEXEC);
    for (struct cmsghdr *header = got > 0 ? CMSG_FIRSTHDR(&message) : NULL; header != NULL;
         header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
            if (conn->handlers->on_fd != NULL && sxe__conn_is_open(conn)) {
                conn->handlers->on_fd(conn, fd);
            } else {
                sxe__sys.close(fd);
            }
        }
    }
    return got;
}

/* One message (sxe__read_one_t): read on while the channel is open. */
static ssize_t receive_one(struct sxe_conn *conn, uint32_t events, bool *more)
{
    ssize_t got = receive_fds(conn, conn->loop->scratch, conn->loop->options.buffer_size);

    (void)events;
    *more = got > 0 && sxe__conn_is_open(conn);
    return got;
}

void sxe__fdpass_io(struct sxe_conn *conn, const struct sxe__io_event *event)
{
    if (sxe__stream_sent_or_closed(conn, event)) {
        return;
    }
    if ((event->events & (SXE__IO_IN | SXE__IO_HUP | SXE__IO_ERR)) &&
        (conn->flags & SXE__CONN_PAUSED) == 0) {
        conn->flags &= (uint16_t)~SXE__CONN_RESUMED;
        sxe__stream_read_turn(conn, receive_one, 0); /* until it is empty */
    }
    if (sxe__conn_is_open(conn) && (event->events & SXE__IO_OUT)) {
        sxe__stream_flush(conn);
        sxe__stream_closed_when_sent(conn);
    }
    if (sxe__conn_is_open(conn)) {
        sxe__conn_settle(conn);
    }
}

int sxe__fdpass_send(int channel, int fd, int flags)
{
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    char marker = 'F';
    struct iovec iov = {.iov_base = &marker, .iov_len = 1};
    struct msghdr message = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = &control,
                             .msg_controllen = sizeof(control)};

    struct cmsghdr *header = &control.header; /* the first header: the buffer is aligned for it */
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &fd, sizeof(int));
    for (;;) {
        if (sxe__sys.sendmsg(channel, &message, MSG_NOSIGNAL | flags) == 1) {
            return 0;
        }
        if (errno != EINTR) {
            return -errno;
        }
    }
}

int sxe_conn_send_fd(sxe_conn_t *conn, int fd)
{
    int rc = sxe__stream_check_writable(conn);

    if (rc == 0 && conn->io_kind == SXE__IO_TLS) {
        rc = -ENOTSUP; /* its marker byte would go out unsealed */
    }
    return rc < 0 ? rc : sxe__fdpass_send(conn->fd, fd, 0);
}

int sxe_conn_hand_off(sxe_conn_t *conn, sxe_conn_t *via)
{
    int rc;

    if ((rc = sxe__stream_check_writable(conn)) < 0) {
        return rc;
    }
    if (conn->io_kind == SXE__IO_TLS) {
        return -ENOTSUP; /* its session stays here: the socket alone would be no use there */
    }
    if (conn->flags & SXE__CONN_SENDING) {
        return -EBUSY; /* the backend is still sending from its queue */
    }
    if ((rc = sxe_conn_send_fd(via, conn->fd)) < 0) {
        return rc;
    }
    /* The socket lives on in the other process (or fd): closing ours alone would leave it
     * watched here, since the kernel forgets a socket only when its last descriptor closes. */
    conn->loop->io->forget(conn->loop, conn->fd, false);
    sxe__conn_close_reason(conn, SXE_CLOSE_HANDED_OFF, 0);
    return 0;
}
