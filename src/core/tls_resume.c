/*
 * A client context's sessions, kept to resume (tls_context.h): the latest session a server gave,
 * for each of the last RESUMABLE_MOST servers (a name and a port), offered again to the next
 * connection to that server. A resumed handshake skips the certificate and the signature: a TLS 1.3
 * client pays one key exchange instead of a full handshake, and the server less still.
 *
 * A session is kept under the name its certificate was checked for (its SNI name, or its IP
 * address), so it is offered only to a server that proved that name: never to another upstream
 * that happens to share the context. Connections of a context may run on several threads (the
 * loops of HTTP workers), so the sessions are under a lock, taken once per handshake.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls_context.h"

#define RESUMABLE_MOST 16
#define KEY_MAX        (SXE_TLS_NAME_MAX + 7) /* a name, a space and a port, and the NUL */

static int port_index = -1; /* the port a client session connects to, in its ex_data */
static pthread_once_t port_once = PTHREAD_ONCE_INIT;

static void port_index_make(void)
{
    port_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

struct tls_resumable {
    char name[KEY_MAX]; /* the server's name, "" for one no name was checked for */
    SSL_SESSION *session;
};

struct sxe__tls_sessions {
    pthread_mutex_t lock;
    unsigned next; /* the entry the next new name replaces, round robin */
    struct tls_resumable kept[RESUMABLE_MOST];
};

/* The key a session of ssl is kept under: its SNI name, else the IP address its certificate was
 * checked for, else "" (a context that checks nothing); then its port (two services of a host
 * are two servers). */
static void name_of(SSL *ssl, char name[KEY_MAX])
{
    const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    bool checked = SSL_get_verify_mode(ssl) != SSL_VERIFY_NONE; /* then an IP address is set */
    char *ip = sni == NULL && checked ? X509_VERIFY_PARAM_get1_ip_asc(SSL_get0_param(ssl)) : NULL;

    snprintf(name, KEY_MAX, "%s %u",
             sni != NULL  ? sni
             : ip != NULL ? ip
                          : "",
             (unsigned)(uintptr_t)SSL_get_ex_data(ssl, port_index));
    OPENSSL_free(ip);
}

/* The entry kept for name, or NULL. Under the lock. */
static struct tls_resumable *kept_for(struct sxe__tls_sessions *sessions, const char *name)
{
    for (unsigned i = 0; i < RESUMABLE_MOST; i++) {
        if (sessions->kept[i].session != NULL && strcmp(sessions->kept[i].name, name) == 0) {
            return &sessions->kept[i];
        }
    }
    return NULL;
}

/* OpenSSL's word that a server gave a session (TLS 1.3: a ticket after the handshake). */
static int session_given(SSL *ssl, SSL_SESSION *session)
{
    struct sxe__tls_sessions *sessions =
        ((sxe_tls_t *)SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)))->sessions;
    char name[KEY_MAX];

    /* A copy: OpenSSL marks a connection's own session not to be resumed when the connection
     * ends without close_notify, as sxe_conn_close() ends it. */
    SSL_SESSION *copy = SSL_SESSION_is_resumable(session) ? SSL_SESSION_dup(session) : NULL;
    if (copy == NULL) {
        return 0;
    }
    name_of(ssl, name);
    pthread_mutex_lock(&sessions->lock);
    struct tls_resumable *entry = kept_for(sessions, name);
    if (entry == NULL) {
        entry = &sessions->kept[sessions->next];
        sessions->next = (sessions->next + 1) % RESUMABLE_MOST;
        snprintf(entry->name, sizeof(entry->name), "%s", name);
    }
    SSL_SESSION_free(entry->session);
    entry->session = copy;
    pthread_mutex_unlock(&sessions->lock);
    return 0; /* OpenSSL keeps its own */
}

int sxe__tls_sessions_make(sxe_tls_t *tls)
{
    if ((tls->sessions = calloc(1, sizeof(*tls->sessions))) == NULL) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: out of memory */
    }
    pthread_mutex_init(&tls->sessions->lock, NULL);
    pthread_once(&port_once, port_index_make);
    SSL_CTX_set_app_data(tls->ctx, tls);
    SSL_CTX_set_session_cache_mode(tls->ctx,
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(tls->ctx, session_given);
    return 0;
}

void sxe__tls_sessions_offer(sxe_tls_t *tls, SSL *ssl, const struct sockaddr *server)
{
    char name[KEY_MAX];

    if (tls->sessions == NULL) {
        return; /* no_resume */
    }
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)server;
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)server;
    uint16_t port = ntohs(server->sa_family == AF_INET6 ? v6->sin6_port : v4->sin_port);
    SSL_set_ex_data(ssl, port_index, (void *)(uintptr_t)port);
    name_of(ssl, name);
    pthread_mutex_lock(&tls->sessions->lock);
    struct tls_resumable *entry = kept_for(tls->sessions, name);
    SSL_SESSION *copy = entry != NULL ? SSL_SESSION_dup(entry->session) : NULL;
    if (copy != NULL) { /* a copy again: this connection may end without close_notify too */
        SSL_set_session(ssl, copy);
        SSL_SESSION_free(copy);
    }
    pthread_mutex_unlock(&tls->sessions->lock);
}

void sxe__tls_sessions_free(sxe_tls_t *tls)
{
    if (tls->sessions != NULL) {
        for (unsigned i = 0; i < RESUMABLE_MOST; i++) {
            SSL_SESSION_free(tls->sessions->kept[i].session);
        }
        pthread_mutex_destroy(&tls->sessions->lock);
        free(tls->sessions);
        tls->sessions = NULL;
    }
}
