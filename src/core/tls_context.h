/*
 * TLS contexts, as the TLS transport sees them (tls_context.c makes them; transport_tls.c makes a
 * session of one for each connection).
 */
#ifndef SXE_CORE_TLS_CONTEXT_H
#define SXE_CORE_TLS_CONTEXT_H

#include <openssl/ssl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdbool.h>
#include <stdint.h>

#include "sxe/log.h"
#include "sxe/tls.h"

/* A certificate for a server name (SNI): "www.example.com", or "*.example.com" for one label. */
struct tls_name {
    char name[SXE_TLS_NAME_MAX + 1]; /* compared without regard to case */
    SSL_CTX *ctx;
};

/* What binds a session to the client-certificate check it was made under (tls_clients.c). */
struct tls_session_context {
    unsigned char bytes[32];
    unsigned len;
};

/*
 * A server's ctx, names and ticket secret may be replaced (sxe_tls_server_replace()) while other
 * threads begin handshakes: lock is held to read or change them. A session holds a reference to
 * each SSL_CTX it uses, so the old ones live on until their last connection ends.
 */
struct sxe_tls {
    pthread_mutex_t lock;
    SSL_CTX *ctx;           /* the default: for a client that names no server, or one not here */
    bool client;            /* sxe_tls_client_create()'s: for connections made, not accepted */
    bool no_verify;         /* a client's that checks no certificate */
    bool ticket_file;       /* the ticket secret was read from a file */
    bool h2;                /* ALPN names h2 first (sxe_tls_server_offer_h2()); kept by replace */
    struct tls_name *names; /* sxe_tls_server_add_name()'s, in the order added */
    unsigned name_count;
    uint64_t ticket_period;             /* ns each set of ticket keys is used for (tls_tickets.c);
                                           0: tickets off, no secret made */
    unsigned char ticket_secret[32];    /* what the ticket keys are derived from */
    struct sxe__tls_sessions *sessions; /* a client's, kept to resume (tls_resume.c), or NULL */
    struct tls_session_context session_context; /* a server's, its names' too */
};

/* Has a client context keep the sessions servers give, to resume. @return 0 or -ENOMEM. */
int sxe__tls_sessions_make(sxe_tls_t *tls);
/* Offers ssl (a new client session, its server's name set, to connect to server) the session kept
 * for that name and server's port. */
void sxe__tls_sessions_offer(sxe_tls_t *tls, SSL *ssl, const struct sockaddr *server);
void sxe__tls_sessions_free(sxe_tls_t *tls);

/* Sets up a server context's session tickets as options say (none, or keys derived from a secret
 * made here or read from options.ticket_key_file). @return 0 or -errno (logged). */
int sxe__tls_tickets(sxe_tls_t *tls, const struct sxe_tls_options *options);

/* Has a server's ctx ask clients for a certificate of an authority in the file at ca (required
 * unless optional), and sets its session context (*context too) to that check's.
 * @return 0, -errno or -EPROTO (logged). */
int sxe__tls_clients_ask(SSL_CTX *ctx, const char *ca, bool optional,
                         struct tls_session_context *context);
/* A name's context asks what the default's asks, under its session context. */
void sxe__tls_clients_share(SSL_CTX *named, SSL_CTX *ctx,
                            const struct tls_session_context *context);

/* Staples the DER OCSP response in the file at path to ctx's handshakes that ask for one, after
 * checking that it is a successful one for ctx's certificate. @return 0 or -errno (logged). */
int sxe__tls_ocsp_load(SSL_CTX *ctx, const char *path);

/* Logs what OpenSSL says went wrong, after what, at level, and empties its queue of errors. */
void sxe__tls_log_openssl(enum sxe_log_level level, const char *what);

#endif
