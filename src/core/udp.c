/*
 * UDP sockets: datagrams received in batches of SXE__UDP_BATCH with recvmmsg into the loop's
 * scratch area (one buffer_size slice each), sent one at a time with sendto. Both backends only
 * say a socket is readable (edge-triggered); the batches are read here.
 */
#define SXE_LOG_MODULE udp_log
#include "sxe/log.h"

#include <errno.h>
#include <sys/socket.h>

#include "loop.h"
#include "sxe/udp.h"
#include "sys.h"

static struct sxe_log_module udp_log = SXE_LOG_MODULE_INIT(UDP);

static void udp_io(struct sxe_conn *conn, const struct sxe__io_event *event)
{
    sxe_loop_t *loop = conn->loop;
    struct mmsghdr messages[SXE__UDP_BATCH];
    struct iovec iov[SXE__UDP_BATCH];
    struct sockaddr_storage from[SXE__UDP_BATCH];

    (void)event;
    for (;;) {
        for (unsigned i = 0; i < SXE__UDP_BATCH; i++) {
            iov[i] = (struct iovec){loop->scratch + (size_t)i * loop->options.buffer_size,
                                    loop->options.buffer_size};
            messages[i].msg_hdr = (struct msghdr){.msg_name = &from[i],
                                                  .msg_namelen = sizeof(from[i]),
                                                  .msg_iov = &iov[i],
                                                  .msg_iovlen = 1};
        }
        int count = sxe__sys.recvmmsg(conn->fd, messages, SXE__UDP_BATCH, 0, NULL);
        if (count < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno != EAGAIN) {
                SXE_LOG_WARN("recvmmsg failed: %s", sxe_strerror(-errno));
            }
            return;
        }
        for (int i = 0; i < count; i++) {
            if (messages[i].msg_hdr.msg_flags & MSG_TRUNC) {
                loop->stats.datagrams_dropped++;
                continue;
            }
            if (conn->handlers->on_datagram != NULL) {
                conn->handlers->on_datagram(conn, iov[i].iov_base, messages[i].msg_len,
                                            (struct sockaddr *)&from[i],
                                            messages[i].msg_hdr.msg_namelen);
                if (!sxe__conn_is_open(conn)) {
                    return;
                }
            }
        }
        if (count < SXE__UDP_BATCH) {
            return;
        }
    }
}

int sxe_udp_bind(sxe_loop_t *loop, sxe_conn_t **socket_out, const struct sockaddr *address,
                 socklen_t address_len, const struct sxe_conn_handlers *handlers, void *user)
{
    int rc;

    if (!SXE_CHECK(loop != NULL && socket_out != NULL && address != NULL && handlers != NULL)) {
        return -EINVAL;
    }
    int fd = sxe__sys.socket(address->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    if (sxe__sys.bind(fd, address, address_len) < 0) {
        rc = -errno;
        SXE_LOG_DEBUG("cannot bind a UDP socket: %s", sxe_strerror(rc));
        sxe__sys.close(fd);
        return rc;
    }
    loop->callbacks[SXE__IO_UDP] = udp_io;
    return sxe__conn_add(loop, socket_out, fd, SXE__CONN_LISTENING, SXE__KIND_UDP, 0, SXE__IO_UDP,
                         handlers, user, false);
}

int sxe_udp_send(sxe_conn_t *socket, const void *data, size_t len, const struct sockaddr *to,
                 socklen_t to_len)
{
    if (!sxe__conn_is_open(socket) || socket->kind != SXE__KIND_UDP) {
        return -EBADF;
    }
    for (;;) {
        if (sxe__sys.sendto(socket->fd, data, len, 0, to, to_len) >= 0) {
            return 0;
        }
        if (errno != EINTR) {
            return -errno;
        }
    }
}
