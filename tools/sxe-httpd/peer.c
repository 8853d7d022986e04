/*
 * sxe-httpd's peer addresses as text: see peer.h.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <sxe/loop.h>

#include "peer.h"

struct peer {
    uint64_t conn_id; /* whose text this is, + 1 (0: none yet) */
    char text[INET6_ADDRSTRLEN];
};

static __thread struct peer *peers; /* by connection slot */
static __thread uint32_t peer_count;
static __thread struct peer uncached; /* when the table could not be made */

const char *peer_text(sxe_conn_t *conn)
{
    if (peers == NULL && peer_count == 0) {
        uint32_t count = sxe_loop_options(sxe_conn_loop(conn))->connections;
        peers = calloc(count, sizeof(*peers)); /* pages touched only as slots are used */
        peer_count = peers != NULL ? count : 1;
    }
    struct peer *peer = peers != NULL ? &peers[sxe_conn_index(conn) % peer_count] : &uncached;
    struct sockaddr_storage address;
    socklen_t len = sizeof(address);

    if (peer->conn_id == sxe_conn_id(conn) + 1) {
        return peer->text[0] != '\0' ? peer->text : NULL;
    }
    peer->conn_id = sxe_conn_id(conn) + 1;
    peer->text[0] = '\0';
    if (sxe_conn_peer(conn, (struct sockaddr *)&address, &len) == 0 &&
        (address.ss_family == AF_INET || address.ss_family == AF_INET6)) {
        const void *ip = address.ss_family == AF_INET6
                             ? (const void *)&((struct sockaddr_in6 *)&address)->sin6_addr
                             : (const void *)&((struct sockaddr_in *)&address)->sin_addr;
        if (inet_ntop(address.ss_family, ip, peer->text, sizeof(peer->text)) == NULL) {
            peer->text[0] = '\0'; /* GCOVR_EXCL_LINE: the buffer fits any address */
        }
    }
    return peer->text[0] != '\0' ? peer->text : NULL;
}

void peer_text_free(void)
{
    free(peers);
    peers = NULL;
    peer_count = 0;
}
