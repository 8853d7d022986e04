/* sxe-httpd's tunnels: a client's connection and an upstream's, joined after a 101 (tunnel.c). */
#ifndef SXE_HTTPD_TUNNEL_H
#define SXE_HTTPD_TUNNEL_H

#include <sxe/conn.h>

/* Makes the worker's table of tunnels, on its first. @return 0 or -ENOMEM. */
int tunnel_ready(sxe_loop_t *loop);

/*
 * Joins client (answered 101 with sxe_http_upgrade() to tunnel_handlers(), just now) and upstream
 * (handed over by the HTTP client's on_upgrade; its handlers are set here). Both connections' user
 * pointers are the tunnel's from now on. Call tunnel_ready() first.
 */
void tunnel_open(sxe_conn_t *client, sxe_conn_t *upstream);

/* The handlers of both sides of a tunnel: the client's goes to them with sxe_http_upgrade(). */
const struct sxe_conn_handlers *tunnel_handlers(void);

#endif
