/*
 * A build without OpenSSL: no TLS context can be made, so no connection is ever TLS and the
 * transport's entry points are never reached (transport.h).
 */
#include <errno.h>

#include "sxe/tls.h"
#include "transport.h"

bool sxe_tls_available(void)
{
    return false;
}

int sxe_tls_server_create(sxe_tls_t **tls, const struct sxe_tls_options *options)
{
    (void)options;
    if (tls != NULL) {
        *tls = NULL;
    }
    return -ENOTSUP;
}

int sxe_tls_server_add_name(sxe_tls_t *tls, const char *name, const struct sxe_tls_options *options)
{
    (void)tls, (void)name, (void)options;
    return -ENOTSUP;
}

int sxe_tls_client_create(sxe_tls_t **tls, const struct sxe_tls_client_options *options)
{
    (void)options;
    if (tls != NULL) {
        *tls = NULL;
    }
    return -ENOTSUP;
}

int sxe__tls_connect(struct sxe_conn *conn, sxe_tls_t *tls, const char *server_name,
                     const struct sockaddr *server)
{
    (void)conn, (void)tls, (void)server_name, (void)server;
    return -ENOTSUP;
}

bool sxe__tls_client(const struct sxe_conn *conn)
{
    (void)conn;
    return false;
}

int sxe__tls_start(struct sxe_conn *conn)
{
    (void)conn;
    return -ENOTSUP;
}

int sxe_tls_server_offer_h2(sxe_tls_t *tls)
{
    (void)tls;
    return -ENOTSUP;
}

int sxe_tls_server_replace(sxe_tls_t *tls, sxe_tls_t *fresh)
{
    (void)tls, (void)fresh;
    return -ENOTSUP;
}

bool sxe_conn_alpn_is(const sxe_conn_t *conn, const char *protocol)
{
    (void)conn, (void)protocol;
    return false; /* no connection is TLS */
}

int sxe_conn_peer_subject(const sxe_conn_t *conn, char *subject, size_t size)
{
    (void)conn;
    if (subject != NULL && size > 0) {
        subject[0] = '\0';
    }
    return -ENOENT; /* no connection is TLS */
}

void sxe_tls_destroy(sxe_tls_t *tls)
{
    (void)tls;
}

const struct sxe__queue *sxe__transport_queue(const struct sxe_conn *conn)
{
    (void)conn;
    return NULL;
}

int sxe__tls_prepare(sxe_loop_t *loop, sxe_tls_t *tls)
{
    (void)loop, (void)tls;
    return -ENOTSUP;
}

int sxe__tls_listen(struct sxe_conn *listener, sxe_tls_t *tls)
{
    (void)listener, (void)tls;
    return -ENOTSUP;
}

void sxe__tls_loop_free(sxe_loop_t *loop)
{
    (void)loop;
}

/* Never reached: no loop has TLS state, and no connection is TLS. */
sxe_tls_t *sxe__tls_listening(const struct sxe_conn *listener)
{
    (void)listener;
    return NULL;
}

int sxe__tls_accept(sxe_tls_t *tls, struct sxe_conn *conn)
{
    (void)tls, (void)conn;
    return -ENOTSUP;
}

ssize_t sxe__tls_read(struct sxe_conn *conn, char *into, size_t room)
{
    (void)conn, (void)into, (void)room;
    errno = ENOTSUP;
    return -1;
}

bool sxe__tls_more(const struct sxe_conn *conn)
{
    (void)conn;
    return false;
}

struct sxe__queue *sxe__tls_plain(struct sxe_conn *conn)
{
    return &conn->out;
}

void sxe__tls_crowded(struct sxe_conn *conn)
{
    (void)conn;
}

int sxe__tls_seal(struct sxe_conn *conn)
{
    (void)conn;
    return 0;
}

bool sxe__tls_partial(const struct sxe_conn *conn)
{
    (void)conn;
    return false;
}

bool sxe__tls_handshaking(const struct sxe_conn *conn)
{
    (void)conn;
    return false;
}

bool sxe__tls_notify(struct sxe_conn *conn)
{
    (void)conn;
    return false;
}

void sxe__tls_close(struct sxe_conn *conn)
{
    (void)conn;
}
