/**
 * @file sxe/udp.h
 * @brief UDP sockets: datagrams in batches through on_datagram (sxe/conn.h), sent one at a time.
 */
#ifndef SXE_UDP_H
#define SXE_UDP_H

#include <stddef.h>
#include <sys/socket.h>

#include "sxe/conn.h"
#include "sxe/error.h"
#include "sxe/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Binds a UDP socket (IPv4 or IPv6). Datagrams arrive through on_datagram, received in batches.
 */
SXE_MUST_CHECK int sxe_udp_bind(sxe_loop_t *loop, sxe_conn_t **socket,
                                const struct sockaddr *address, socklen_t address_len,
                                const struct sxe_conn_handlers *handlers, void *user);

/** Sends one datagram. @return 0, or -errno (-EAGAIN when the socket buffer is full). */
int sxe_udp_send(sxe_conn_t *socket, const void *data, size_t len, const struct sockaddr *to,
                 socklen_t to_len);

#ifdef __cplusplus
}
#endif

#endif
