/* A connection's peer address as text, found once per connection (peer.c). */
#ifndef SXE_HTTPD_PEER_H
#define SXE_HTTPD_PEER_H

#include <sxe/conn.h>

/*
 * The connection's peer IP address as text, or NULL when it has none (a Unix socket) or it cannot
 * be read: a system call for the connection's first ask only, kept per thread by the connection's
 * slot and id (the access log and the proxy ask for every request). Valid until the next call.
 */
const char *peer_text(sxe_conn_t *conn);

/* Frees the calling thread's table (its loop has stopped). */
void peer_text_free(void);

#endif
