/**
 * @file sxe/tls.h
 * @brief TLS (1.2 and 1.3, with OpenSSL 3) for stream connections.
 *
 * A TLS context holds a certificate and its key. A listener given one (sxe_listen_options.tls)
 * makes every connection it accepts speak TLS: the handshake is read and written like any other
 * bytes, never blocking the loop, and on_read, sxe_conn_write(), sxe_conn_sendfile() and the rest
 * carry plain bytes as on any connection: the records are sealed and opened under them. A file sent
 * on a TLS connection is read (pread) and sealed a few records (64 KB) at a time as the socket
 * drains.
 *
 * @code
 * sxe_tls_t *tls;
 * struct sxe_tls_options tls_options = {.certificate = "site.pem", .key = "site.key"};
 * if (sxe_tls_server_create(&tls, &tls_options) < 0) {
 *     return 1; // the reason is logged: a missing file, a key that does not match
 * }
 * struct sxe_listen_options options = {.tls = tls};
 * sxe_conn_t *listener;
 * int rc = sxe_conn_listen_at(loop, &listener, "127.0.0.1:8443", &options, &handlers, NULL);
 * @endcode
 *
 * sxe is built with TLS when OpenSSL's headers are found (Debian's libssl-dev); without them
 * sxe_tls_available() is false and sxe_tls_server_create() fails with -ENOTSUP.
 */
#ifndef SXE_TLS_H
#define SXE_TLS_H

#include <stdbool.h>
#include <stdint.h>

#include "sxe/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A TLS context: a certificate, its key and the protocol settings, shared by connections. */
typedef struct sxe_tls sxe_tls_t;

/** What a server's TLS context is made from. Every string is read by the create call only. */
struct sxe_tls_options {
    /** PEM file: the certificate, then the chain up to (not including) the root. Required. */
    const char *certificate;
    /** PEM file: the certificate's private key (not encrypted). Required. */
    const char *key;
    /**
     * TLS 1.2 cipher suites in OpenSSL's list format; NULL for the default: ECDHE with AES-GCM or
     * ChaCha20-Poly1305 only (forward secrecy, AEAD). TLS 1.3's suites are OpenSSL's defaults.
     */
    const char *ciphers;
    /**
     * No session tickets: every connection makes a full handshake. (By default a client may resume
     * its session with a ticket the server sealed, under keys every worker shares.)
     */
    bool no_tickets;
    /**
     * A file of 32 bytes or more (`openssl rand 80 > FILE`) the ticket keys are derived from:
     * servers (and restarts) given the same file resume each other's sessions. NULL: a secret
     * made at create, shared by the threads and the worker processes forked after it.
     */
    const char *ticket_key_file;
    /** ns each period's ticket keys are used for (1 h): a ticket opens in its period and the
     * next, never later, a session resumes for two periods after its full handshake at most, and
     * the keys change without a restart. */
    uint64_t ticket_period;
    /**
     * PEM file of the certificate authorities whose certificates clients must show (mutual TLS):
     * a client that shows none, or one that does not verify against them, fails the handshake
     * (logged at INFO). A handler reads the verified subject with sxe_conn_peer_subject(). NULL:
     * clients are asked for none. Read at create (a file whose authorities' names exceed what a
     * handshake carries, 64 KB, is refused: -EPROTO); an intermediate in it is trusted as it is;
     * the names given with sxe_tls_server_add_name() ask for the same. Sessions are bound to the
     * file's bytes and to client_certificate_optional: a session made under another check (none,
     * another file, optional) is never resumed here, and one whose client certificate has
     * expired is not resumed either.
     */
    const char *client_ca;
    /** With client_ca: a client may show no certificate (one it shows must still verify). */
    bool client_certificate_optional;
    /**
     * A DER OCSP response for the certificate (`openssl ocsp -respout FILE`), stapled to every
     * handshake whose client asks for one. Read at create (and by the create a reload makes):
     * one that is not a successful response, with nothing after it, for this certificate, saying
     * it is good, not made in the future, and signed by its issuer (when the chain carries the
     * issuer) is refused (-EPROTO, logged); one past its next update is logged at WARN and
     * stapled no more. NULL: nothing stapled.
     */
    const char *ocsp_response;
};

/** The longest server name sxe_tls_server_add_name() takes (a DNS name's limit). */
#define SXE_TLS_NAME_MAX 253

/** What a client's TLS context is made from (sxe_tls_client_create()). */
struct sxe_tls_client_options {
    /** PEM file of the certificate authorities to trust; NULL: the system's (Debian's
     * ca-certificates, /etc/ssl/certs). */
    const char *ca_file;
    /**
     * Check no server certificate: anyone on the path can read and change what is sent. For
     * tests and load generators against self-signed servers; the create logs a warning.
     */
    bool no_verify;
    /**
     * Resume no sessions: every connection makes a full handshake (a load generator measuring
     * them). By default the latest session each server gives is kept, for each of the last 16
     * server names, and offered to the next connection to that name (the name its certificate
     * is checked for, never another's).
     */
    bool no_resume;
    /** PEM files of a certificate and its key to show a server that asks for one (mutual TLS);
     * both or neither. */
    const char *certificate;
    const char *key;
};

/** Whether this build of sxe has TLS (OpenSSL). */
bool sxe_tls_available(void);

/**
 * Makes a server's TLS context: TLS 1.2 and 1.3 only, renegotiation refused, session tickets on
 * unless options.no_tickets (keys made here: processes forked after this call, and threads, share
 * them), ALPN answering "http/1.1" when the client offers it (and "h2" first once
 * sxe_tls_server_offer_h2() was called). sxe_tls_server_add_name() adds
 * certificates for other server names.
 * @return 0, -ENOTSUP without TLS in this build, -EINVAL (asserts in debug builds) for a NULL
 *         argument or a missing certificate or key name, -errno when a file cannot be read
 *         (-ENOENT, -EACCES), or -EPROTO when OpenSSL refuses what it read (not PEM, a key that
 *         does not match the certificate, a cipher list naming none it knows). Each failure is
 *         logged with the file and OpenSSL's reason.
 */
SXE_MUST_CHECK int sxe_tls_server_create(sxe_tls_t **tls, const struct sxe_tls_options *options);

/**
 * Makes a client's TLS context, for connections sxe_conn_connect() makes (struct
 * sxe_connect_options.tls) and the HTTP client's: TLS 1.2 and 1.3 only, ALPN offering
 * "http/1.1", and the server's certificate checked against the trusted authorities for the name
 * each connection gives (host names and IP addresses; a failure ends the handshake, logged).
 * options may be NULL (the system's authorities). A client context cannot be listened with.
 * @return 0, -ENOTSUP without TLS in this build, -EINVAL (asserts in debug builds) for tls NULL,
 *         -errno when ca_file cannot be read, -EPROTO when it holds no certificate (logged).
 */
SXE_MUST_CHECK int sxe_tls_client_create(sxe_tls_t **tls,
                                         const struct sxe_tls_client_options *options);

/**
 * Gives the server name `name` a certificate of its own (SNI): a client that asks for that name
 * gets this certificate; a client that asks for no name, or for one not added, gets the context's
 * own (the default). "*.example.com" stands for every name one label under example.com (not
 * example.com itself, nor a.b.example.com); an exact name wins over a wildcard. Names are compared
 * without regard to case. Only options' certificate and key are used: the protocol settings and
 * tickets are the context's. Add every name before a listener uses the context.
 * @return 0; -EINVAL for a name that is not a host name (letters, digits, '-' and '.', up to
 *         SXE_TLS_NAME_MAX), nor "*." and one, or a NULL argument (asserts in debug builds);
 *         -EEXIST for a name given a certificate already; -ENOTSUP without TLS; or
 *         sxe_tls_server_create()'s errors for the files (logged).
 */
SXE_MUST_CHECK int sxe_tls_server_add_name(sxe_tls_t *tls, const char *name,
                                           const struct sxe_tls_options *options);

/**
 * Has a server context's ALPN name "h2" (HTTP/2) to clients that offer it, before "http/1.1". The
 * HTTP server module calls this for the contexts it listens with, when sxe is built with HTTP/2
 * (docs/http2.md); a program that serves another protocol with the same context should not. It
 * lasts through sxe_tls_server_replace(). @return 0, -ENOTSUP without TLS in this build, or
 * -EINVAL (asserts in debug builds) for NULL or a client context.
 */
int sxe_tls_server_offer_h2(sxe_tls_t *tls);

/**
 * Replaces tls's certificates and settings with fresh's (a server context made anew from the same
 * or changed files, names added): handshakes that begin after this call show fresh's certificates
 * and ask for its client authorities; connections already made go on with what they began with, on
 * any thread. Tickets go on opening: the keys stay tls's, unless fresh read a ticket_key_file
 * (then its keys are used) or tls had tickets off. A reload makes fresh first, and calls this
 * only if that succeeded: a file that fails leaves the old serving.
 * @return 0 (fresh is freed: do not use it again), or -EINVAL (asserts in debug builds) for a
 *         NULL or client context, or tls == fresh; nothing changes then.
 */
SXE_MUST_CHECK int sxe_tls_server_replace(sxe_tls_t *tls, sxe_tls_t *fresh);

/**
 * Frees a context. Every listener and connection made with it must be closed first (their loops
 * destroyed, or sxe_conn_close() and a turn of the loop). NULL is ignored.
 */
void sxe_tls_destroy(sxe_tls_t *tls);

#ifdef __cplusplus
}
#endif

#endif
