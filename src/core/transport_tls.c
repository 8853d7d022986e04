/*
 * TLS with OpenSSL 3: contexts (sxe/tls.h), and the transport of TLS streams (transport.h).
 *
 * Each TLS connection has a session (SSL) whose BIO is ours: its reads call recv through the seam,
 * its writes append records to conn->out. OpenSSL reads ahead (one recv takes as much as its
 * buffer holds) and frees its buffers while a connection is idle (SSL_MODE_RELEASE_BUFFERS). The
 * loop's TLS state, made by its first TLS listener, is a slot per connection (the session, or a
 * listener's context, and the plain queue) and a staging area where queued plain bytes are
 * gathered into one record.
 */
#define SXE_LOG_MODULE tls_log
#include "sxe/log.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "outq.h"
#include "sxe/tls.h"
#include "sys.h"
#include "transport.h"

static struct sxe_log_module tls_log = SXE_LOG_MODULE_INIT(TLS);

/* The largest record's plain bytes (RFC 8446 5.1), and what sealing one may add to them. */
#define RECORD_MAX      16384
#define RECORD_OVERHEAD 256

/* The TLS 1.2 suites by default: forward secrecy and AEAD only, ECDSA first. */
#define DEFAULT_CIPHERS                                                                            \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"     \
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

/* A certificate for a server name (SNI): "www.example.com", or "*.example.com" for one label. */
struct tls_name {
    char name[SXE_TLS_NAME_MAX + 1]; /* compared without regard to case */
    SSL_CTX *ctx;
};

struct sxe_tls {
    SSL_CTX *ctx;           /* the default: for a client that names no server, or one not here */
    bool client;            /* sxe_tls_client_create()'s: for connections made, not accepted */
    bool no_verify;         /* a client's that checks no certificate */
    struct tls_name *names; /* sxe_tls_server_add_name()'s, in the order added */
    unsigned name_count;
};

#define SLOT_NOTIFIED 0x01u /* close_notify is queued (or there is no session to close) */
#define SLOT_EMPTIED  0x02u /* the last recv found the socket empty, or at its end */
#define SLOT_FAILED   0x04u /* the session broke (a fatal alert): no close_notify may follow */
#define SLOT_EOF      0x08u /* recv said the peer's FIN came: OpenSSL asks (BIO_CTRL_EOF) */
#define SLOT_SEALING  0x10u /* a record of the program's bytes is being written: no limit */

struct tls_slot {
    SSL *ssl;                /* a connection's session, or NULL */
    sxe_tls_t *context;      /* a listener's context, or NULL */
    struct sxe__queue plain; /* plain bytes waiting to be sealed */
    int err;                 /* the socket's error that stopped the BIO, or 0 */
    uint8_t flags;           /* SLOT_* */
};

struct sxe__tls_loop {
    struct tls_slot *slots; /* options.connections of them, by slot index */
    char *stage;            /* queued plain bytes gathered for one record */
    size_t stage_size;
};

static struct tls_slot *slot_of(const struct sxe_conn *conn)
{
    return &conn->loop->tls->slots[sxe__conn_index(conn)];
}

/* Logs what OpenSSL says went wrong, after what, and empties its queue of errors. */
static void log_openssl(enum sxe_log_level level, const char *what)
{
    unsigned long code = ERR_peek_last_error();
    char reason[256];

    ERR_error_string_n(code, reason, sizeof(reason));
    ERR_clear_error();
    SXE_LOG(level, "%s: %s", what, code != 0 ? reason : "no reason given");
}

/* The BIO: reads take the socket's bytes through the seam, writes queue records to send. */

static int bio_read(BIO *bio, char *into, int len)
{
    struct sxe_conn *conn = BIO_get_data(bio);
    struct tls_slot *slot = slot_of(conn);
    ssize_t got;

    BIO_clear_retry_flags(bio);
    while ((got = sxe__sys.recv(conn->fd, into, (size_t)len, 0)) < 0 && errno == EINTR) {
    }
    slot->flags = (uint8_t)((slot->flags & ~SLOT_EMPTIED) | (got < len ? SLOT_EMPTIED : 0) |
                            (got == 0 ? SLOT_EOF : 0));
    if (got < 0 && errno == EAGAIN) {
        BIO_set_retry_read(bio);
    } else if (got < 0) {
        slot->err = errno;
    }
    return (int)got;
}

/* Records of the program's bytes are sealed only as conn->out empties; the others (alerts,
 * tickets, the handshake) come from the peer's doing, and are held to the connection's limit. */
static int bio_write(BIO *bio, const char *data, int len)
{
    struct sxe_conn *conn = BIO_get_data(bio);
    struct tls_slot *slot = slot_of(conn);

    BIO_clear_retry_flags(bio);
    if (((slot->flags & SLOT_SEALING) == 0 &&
         conn->queued + (size_t)len > conn->loop->options.write_limit) ||
        !sxe__outq_can_append(conn, &conn->out, (size_t)len)) {
        slot->err = ENOBUFS;
        return -1;
    }
    sxe__outq_append(conn, &conn->out, data, (size_t)len);
    return len;
}

static long bio_ctrl(BIO *bio, int command, long number, void *pointer)
{
    (void)number, (void)pointer;
    switch (command) {
    case BIO_CTRL_FLUSH:
        return 1;      /* records are sent by the loop, not on a flush */
    case BIO_CTRL_EOF: /* a FIN without close_notify is the end too (SSL_OP_IGNORE_UNEXPECTED_EOF)
                        */
        return (slot_of(BIO_get_data(bio))->flags & SLOT_EOF) != 0;
    default:
        return 0;
    }
}

static int bio_create(BIO *bio)
{
    BIO_set_init(bio, 1);
    return 1;
}

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static void bio_method_make(void)
{
    BIO_METHOD *method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sxe");

    if (method != NULL &&
        (!BIO_meth_set_read(method, bio_read) || !BIO_meth_set_write(method, bio_write) ||
         !BIO_meth_set_ctrl(method, bio_ctrl) || !BIO_meth_set_create(method, bio_create))) {
        BIO_meth_free(method); /* GCOVR_EXCL_LINE: setting a function pointer does not fail */
        method = NULL;         /* GCOVR_EXCL_LINE */
    }
    bio_method = method;
}

/* Contexts. */

bool sxe_tls_available(void)
{
    return true;
}

/* ALPN: http/1.1 when the client offers it; else no protocol is named. */
static int select_protocol(SSL *ssl, const unsigned char **out, unsigned char *out_len,
                           const unsigned char *offered, unsigned offered_len, void *arg)
{
    static const unsigned char ours[] = "\x08http/1.1";

    (void)ssl, (void)arg;
    return SSL_select_next_proto((unsigned char **)(uintptr_t)out, out_len, ours, sizeof(ours) - 1,
                                 offered, offered_len) == OPENSSL_NPN_NEGOTIATED
               ? SSL_TLSEXT_ERR_OK
               : SSL_TLSEXT_ERR_NOACK;
}

/* Whether path can be opened for reading: -errno (logged) if not, naming what it was for. */
static int readable(const char *path, const char *what)
{
    int fd = sxe__sys.open(path, O_RDONLY | O_CLOEXEC, 0);

    if (fd < 0) {
        int err = errno;
        SXE_LOG_ERROR("TLS %s %s: %s", what, path, sxe_strerror(err));
        return -err;
    }
    sxe__sys.close(fd);
    return 0;
}

/* Loads the certificate, its key and the settings into ctx. @return 0, -errno or -EPROTO. */
static int configure(SSL_CTX *ctx, const struct sxe_tls_options *options)
{
    int rc;

    if ((rc = readable(options->certificate, "certificate")) < 0 ||
        (rc = readable(options->key, "key")) < 0) {
        return rc;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF |
                                 SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF); /* tickets resume sessions */
    SSL_CTX_set_alpn_select_cb(ctx, select_protocol, NULL);
    const char *ciphers = options->ciphers != NULL ? options->ciphers : DEFAULT_CIPHERS;
    if (!SSL_CTX_set_cipher_list(ctx, ciphers)) {
        log_openssl(SXE_LOG_LEVEL_ERROR, "TLS ciphers: none known");
        return -EPROTO;
    }
    if (!SSL_CTX_use_certificate_chain_file(ctx, options->certificate)) {
        SXE_LOG_ERROR("TLS certificate %s: not a PEM certificate chain", options->certificate);
        log_openssl(SXE_LOG_LEVEL_ERROR, "TLS certificate");
        return -EPROTO;
    }
    if (!SSL_CTX_use_PrivateKey_file(ctx, options->key, SSL_FILETYPE_PEM) ||
        !SSL_CTX_check_private_key(ctx)) {
        SXE_LOG_ERROR("TLS key %s: not a PEM key, or not the key of certificate %s", options->key,
                      options->certificate);
        log_openssl(SXE_LOG_LEVEL_ERROR, "TLS key");
        return -EPROTO;
    }
    return 0;
}

/* Makes a context of options into *ctx. @return 0, -ENOMEM, or configure()'s error. */
static int context_make(SSL_CTX **ctx, const struct sxe_tls_options *options)
{
    int rc;

    if ((*ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: out of memory */
    }
    if ((rc = configure(*ctx, options)) < 0) {
        SSL_CTX_free(*ctx);
        *ctx = NULL;
    }
    return rc;
}

int sxe_tls_server_create(sxe_tls_t **tls, const struct sxe_tls_options *options)
{
    int rc;

    if (!SXE_CHECK(tls != NULL && options != NULL && options->certificate != NULL &&
                   options->key != NULL)) {
        return -EINVAL;
    }
    *tls = NULL;
    pthread_once(&bio_once, bio_method_make);
    sxe_tls_t *made = calloc(1, sizeof(*made));
    if (made == NULL || bio_method == NULL) {
        free(made); /* GCOVR_EXCL_LINE: out of memory */
        return -ENOMEM;
    }
    if ((rc = context_make(&made->ctx, options)) < 0) {
        free(made);
        return rc;
    }
    if (options->no_tickets) { /* TLS 1.2's tickets; and TLS 1.3 sends none at all */
        SSL_CTX_set_options(made->ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(made->ctx, 0);
    }
    *tls = made;
    return 0;
}

int sxe_tls_client_create(sxe_tls_t **tls, const struct sxe_tls_client_options *options)
{
    static const struct sxe_tls_client_options defaults;
    static const unsigned char offered[] = "\x08http/1.1";

    if (!SXE_CHECK(tls != NULL)) {
        return -EINVAL;
    }
    *tls = NULL;
    options = options != NULL ? options : &defaults;
    pthread_once(&bio_once, bio_method_make);
    int rc = options->ca_file != NULL ? readable(options->ca_file, "CA file") : 0;
    sxe_tls_t *made = rc == 0 ? calloc(1, sizeof(*made)) : NULL;
    if (rc < 0 || made == NULL || bio_method == NULL ||
        (made->ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
        free(made);
        return rc < 0 ? rc : -ENOMEM;
    }
    made->client = true;
    made->no_verify = options->no_verify;
    SSL_CTX_set_min_proto_version(made->ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(made->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF |
                                       SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(made->ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_read_ahead(made->ctx, 1);
    SSL_CTX_set_alpn_protos(made->ctx, offered, sizeof(offered) - 1);
    SSL_CTX_set_verify(made->ctx, options->no_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    if (options->no_verify) {
        SXE_LOG_WARN("TLS client: no server certificate is checked (no_verify): anyone on the "
                     "path can read and change what is sent");
    } else if (!(options->ca_file != NULL
                     ? SSL_CTX_load_verify_locations(made->ctx, options->ca_file, NULL)
                     : SSL_CTX_set_default_verify_paths(made->ctx))) {
        SXE_LOG_ERROR("TLS CA file %s: no PEM certificate in it",
                      options->ca_file != NULL ? options->ca_file : "(the system's store)");
        log_openssl(SXE_LOG_LEVEL_ERROR, "TLS CA file");
        sxe_tls_destroy(made);
        return -EPROTO;
    }
    *tls = made;
    return 0;
}

/* The context for the name a client asked for: exact, else "*." and all but its first label. */
static SSL_CTX *context_named(const sxe_tls_t *tls, const char *name)
{
    const char *parent = strchr(name, '.');

    for (unsigned i = 0; i < tls->name_count; i++) {
        if (strcasecmp(tls->names[i].name, name) == 0) {
            return tls->names[i].ctx;
        }
    }
    for (unsigned i = 0; parent != NULL && parent != name && i < tls->name_count; i++) {
        if (tls->names[i].name[0] == '*' && strcasecmp(tls->names[i].name + 1, parent) == 0) {
            return tls->names[i].ctx;
        }
    }
    return NULL;
}

/* SNI: the certificate of the name the client asked for, or the default's. */
static int choose_certificate(SSL *ssl, int *alert, void *arg)
{
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    SSL_CTX *ctx = name != NULL ? context_named(arg, name) : NULL;

    if (ctx != NULL && SSL_set_SSL_CTX(ssl, ctx) == NULL) {
        *alert = SSL_AD_INTERNAL_ERROR; /* GCOVR_EXCL_LINE: out of memory */
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    return SSL_TLSEXT_ERR_OK;
}

/* Whether name is a host name as SNI carries it, or "*." and one. */
static bool name_valid(const char *name)
{
    size_t len = strlen(name), at = strncmp(name, "*.", 2) == 0 ? 2 : 0;

    if (len <= at || len > SXE_TLS_NAME_MAX || name[at] == '.' || name[len - 1] == '.') {
        return false;
    }
    for (; at < len; at++) {
        unsigned char c = (unsigned char)name[at];
        if (!(c == '-' || c == '.' || (c >= '0' && c <= '9') ||
              ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) ||
            (c == '.' && name[at + 1] == '.')) {
            return false;
        }
    }
    return true;
}

int sxe_tls_server_add_name(sxe_tls_t *tls, const char *name, const struct sxe_tls_options *options)
{
    int rc;

    if (!SXE_CHECK(tls != NULL && !tls->client && name != NULL && options != NULL &&
                   options->certificate != NULL && options->key != NULL)) {
        return -EINVAL;
    }
    if (!name_valid(name)) {
        SXE_LOG_ERROR("TLS server name '%s': not a host name, nor '*.' and one", name);
        return -EINVAL;
    }
    for (unsigned i = 0; i < tls->name_count; i++) {
        if (strcasecmp(tls->names[i].name, name) == 0) {
            SXE_LOG_ERROR("TLS server name %s: given a certificate already", name);
            return -EEXIST;
        }
    }
    struct tls_name *names = realloc(tls->names, (tls->name_count + 1) * sizeof(*names));
    if (names == NULL) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: out of memory */
    }
    tls->names = names;
    struct tls_name *added = &names[tls->name_count];
    if ((rc = context_make(&added->ctx, options)) < 0) {
        return rc;
    }
    memcpy(added->name, name, strlen(name) + 1); /* name_valid() held it to the size */
    tls->name_count++;
    SSL_CTX_set_tlsext_servername_callback(tls->ctx, choose_certificate);
    SSL_CTX_set_tlsext_servername_arg(tls->ctx, tls);
    return 0;
}

void sxe_tls_destroy(sxe_tls_t *tls)
{
    if (tls != NULL) {
        for (unsigned i = 0; i < tls->name_count; i++) {
            SSL_CTX_free(tls->names[i].ctx);
        }
        free(tls->names);
        SSL_CTX_free(tls->ctx);
        free(tls);
    }
}

/* The loop's TLS state. */

/* Makes the loop's TLS state on first use. @return 0 or -ENOMEM (logged). */
static int loop_tls(sxe_loop_t *loop)
{
    if (loop->tls != NULL) {
        return 0;
    }
    struct sxe__tls_loop *tls = calloc(1, sizeof(*tls));
    size_t stage_size =
        loop->options.buffer_size < RECORD_MAX ? loop->options.buffer_size : RECORD_MAX;
    if (tls == NULL ||
        (tls->slots = calloc(loop->options.connections, sizeof(*tls->slots))) == NULL ||
        (tls->stage = malloc(stage_size)) == NULL) {
        /* GCOVR_EXCL_START: out of memory */
        if (tls != NULL) {
            free(tls->slots);
        }
        free(tls);
        SXE_LOG_ERROR("no memory for the TLS state of %u connections", loop->options.connections);
        return -ENOMEM;
        /* GCOVR_EXCL_STOP */
    }
    for (uint32_t i = 0; i < loop->options.connections; i++) {
        tls->slots[i].plain.head = tls->slots[i].plain.tail = SXE_NONE;
    }
    tls->stage_size = stage_size;
    loop->tls = tls;
    return 0;
}

void sxe__tls_loop_free(sxe_loop_t *loop)
{
    if (loop->tls != NULL) {
        free(loop->tls->stage);
        free(loop->tls->slots);
        free(loop->tls);
        loop->tls = NULL;
    }
}

int sxe__tls_listen(struct sxe_conn *listener, sxe_tls_t *tls)
{
    if (!SXE_CHECK(!tls->client)) {
        return -EINVAL; /* a client's context has no certificate to show */
    }
    int rc = loop_tls(listener->loop);

    if (rc == 0) {
        slot_of(listener)->context = tls;
    }
    return rc;
}

bool sxe__tls_listening(const struct sxe_conn *listener)
{
    return slot_of(listener)->context != NULL;
}

const struct sxe__queue *sxe__transport_queue(const struct sxe_conn *conn)
{
    return conn->io_kind == SXE__IO_TLS && conn->loop->tls != NULL ? &slot_of(conn)->plain : NULL;
}

struct sxe__queue *sxe__tls_plain(struct sxe_conn *conn)
{
    return &slot_of(conn)->plain;
}

/* A session of ctx for conn, reading and writing through our BIO. @return it, or NULL (logged). */
static SSL *session_make(struct sxe_conn *conn, SSL_CTX *ctx)
{
    SSL *ssl = SSL_new(ctx);
    BIO *bio = ssl != NULL ? BIO_new(bio_method) : NULL;

    if (bio == NULL) {
        SSL_free(ssl); /* GCOVR_EXCL_LINE: out of memory */
        log_openssl(SXE_LOG_LEVEL_ERROR, "no memory for a TLS session"); /* GCOVR_EXCL_LINE */
        return NULL;                                                     /* GCOVR_EXCL_LINE */
    }
    BIO_set_data(bio, conn);
    SSL_set_bio(ssl, bio, bio);
    return ssl;
}

int sxe__tls_accept(const struct sxe_conn *listener, struct sxe_conn *conn)
{
    SSL *ssl = session_make(conn, slot_of(listener)->context->ctx);

    if (ssl == NULL) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: out of memory */
    }
    SSL_set_accept_state(ssl);
    *slot_of(conn) = (struct tls_slot){.ssl = ssl, .plain = {SXE_NONE, SXE_NONE}};
    return 0;
}

int sxe__tls_connect(struct sxe_conn *conn, sxe_tls_t *tls, const char *server_name)
{
    unsigned char ip[16];
    int rc;

    if (!SXE_CHECK(tls->client && (server_name != NULL || tls->no_verify))) {
        return -EINVAL;
    }
    if ((rc = loop_tls(conn->loop)) < 0) {
        return rc; /* GCOVR_EXCL_LINE: out of memory */
    }
    SSL *ssl = session_make(conn, tls->ctx);
    if (ssl == NULL) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: out of memory */
    }
    bool is_ip = server_name != NULL && (inet_pton(AF_INET, server_name, ip) == 1 ||
                                         inet_pton(AF_INET6, server_name, ip) == 1);
    if (server_name != NULL && ((!is_ip && !SSL_set_tlsext_host_name(ssl, server_name)) ||
                                (!tls->no_verify && !(is_ip ? X509_VERIFY_PARAM_set1_ip_asc(
                                                                  SSL_get0_param(ssl), server_name)
                                                            : SSL_set1_host(ssl, server_name))))) {
        SSL_free(ssl);
        SXE_LOG_ERROR("TLS server name '%s': not a host name or an IP address", server_name);
        ERR_clear_error();
        return -EINVAL;
    }
    SSL_set_connect_state(ssl);
    *slot_of(conn) = (struct tls_slot){.ssl = ssl, .plain = {SXE_NONE, SXE_NONE}};
    return 0;
}

bool sxe__tls_client(const struct sxe_conn *conn)
{
    return conn->loop->tls != NULL && slot_of(conn)->ssl != NULL;
}

int sxe__tls_start(struct sxe_conn *conn)
{
    struct tls_slot *slot = slot_of(conn);

    ERR_clear_error();
    slot->err = 0;
    int ok = SSL_do_handshake(slot->ssl);
    if (ok != 1 && SSL_get_error(slot->ssl, ok) != SSL_ERROR_WANT_READ) {
        slot->flags |= SLOT_FAILED; /* GCOVR_EXCL_START: the hello had room (write_limit) */
        log_openssl(SXE_LOG_LEVEL_ERROR, "TLS handshake not begun");
        return slot->err != 0 ? -slot->err : -EPROTO; /* GCOVR_EXCL_STOP */
    }
    return 0;
}

void sxe__tls_close(struct sxe_conn *conn)
{
    struct tls_slot *slot = slot_of(conn);

    sxe__outq_drop(conn, &slot->plain);
    SSL_free(slot->ssl);
    *slot = (struct tls_slot){.plain = {SXE_NONE, SXE_NONE}};
}

/* Reading. */

/* What a client that spoke plain HTTP to a TLS port is told, as nginx tells it, before the close:
 * a person who typed http:// for an https:// address sees why nothing works. The socket's buffer
 * is empty at the first bytes of a connection, so one send takes it all (else it is a clean close,
 * as before); the request itself was read into OpenSSL's buffer, so the close sends a FIN. */
static void answer_plain_http(struct sxe_conn *conn)
{
    static const char answer[] = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
                                 "Content-Length: 47\r\nConnection: close\r\n\r\n"
                                 "400 Bad Request: plain HTTP sent to a TLS port\n";
    int reason = ERR_GET_REASON(ERR_peek_last_error());

    if (reason == SSL_R_HTTP_REQUEST || reason == SSL_R_HTTPS_PROXY_REQUEST) {
        (void)!sxe__sys.send(conn->fd, answer, sizeof(answer) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
}

ssize_t sxe__tls_read(struct sxe_conn *conn, char *into, size_t room)
{
    struct tls_slot *slot = slot_of(conn);
    size_t got = 0;

    ERR_clear_error();
    slot->err = 0;
    int ok = SSL_read_ex(slot->ssl, into, room, &got);
    int error = ok ? SSL_ERROR_NONE : SSL_get_error(slot->ssl, 0);
    /* Small records come one a call: take every one the read brought, while there is room. */
    for (size_t more = 0; ok && got < room && SSL_has_pending(slot->ssl); got += more) {
        if (!SSL_read_ex(slot->ssl, into + got, room - got, &more)) {
            ERR_clear_error(); /* the next read meets what stopped this one */
            break;
        }
    }
    switch (error) {
    case SSL_ERROR_NONE:
        return (ssize_t)got;
    case SSL_ERROR_WANT_READ:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        slot->flags |= SLOT_FAILED;
        ERR_clear_error();
        errno = slot->err != 0 ? slot->err : EPROTO;
        return -1;
    default: /* SSL_ERROR_SSL, or SSL_ERROR_WANT_WRITE: no room for its records (err says) */
        slot->flags |= SLOT_FAILED;
        if (slot->err != 0) {
            ERR_clear_error();
            errno = slot->err;
            return -1;
        }
        answer_plain_http(conn);
        log_openssl(SXE_LOG_LEVEL_INFO, SSL_is_init_finished(slot->ssl) ? "TLS record refused"
                                                                        : "TLS handshake failed");
        errno = EPROTO;
        return -1;
    }
}

bool sxe__tls_handshaking(const struct sxe_conn *conn)
{
    return !SSL_is_init_finished(slot_of(conn)->ssl);
}

bool sxe__tls_partial(const struct sxe_conn *conn)
{
    const struct tls_slot *slot = slot_of(conn);

    return !SSL_is_init_finished(slot->ssl) || SSL_has_pending(slot->ssl);
}

bool sxe__tls_more(const struct sxe_conn *conn)
{
    const struct tls_slot *slot = slot_of(conn);

    /* (a close_notify opened behind the bytes returned is the end, for the next read to say) */
    return (slot->flags & SLOT_EMPTIED) == 0 || SSL_has_pending(slot->ssl) ||
           (SSL_get_shutdown(slot->ssl) & SSL_RECEIVED_SHUTDOWN) != 0;
}

/* Writing. */

/*
 * The plain bytes of the next record, at most stage_size: the head segment's own bytes when it
 * holds that many, or is alone; else the leading copies and references gathered into the stage,
 * and when a file range follows them (a response's head, then its file) or leads, as much of the
 * file as the stage still has room for, read after them. @return how many, with *from where they
 * are and *file_part how many of them, at their end, came from the file; or -errno: the file's
 * read error, or EIO for a file that ended before its range did.
 */
static ssize_t next_plain(struct sxe_conn *conn, struct tls_slot *slot, const char **from,
                          size_t *file_part)
{
    sxe_loop_t *loop = conn->loop;
    struct sxe__tls_loop *tls = loop->tls;
    struct iovec iov[SXE__GATHER_MAX];
    bool before_file;
    int count = sxe__outq_gather(conn, &slot->plain, iov, &before_file);
    uint32_t at = slot->plain.head;
    size_t len = 0;

    *file_part = 0;
    if (count > 0 && (iov[0].iov_len >= tls->stage_size || (count == 1 && !before_file))) {
        *from = iov[0].iov_base;
        return (ssize_t)(iov[0].iov_len < tls->stage_size ? iov[0].iov_len : tls->stage_size);
    }
    *from = tls->stage;
    for (int i = 0; i < count && len < tls->stage_size; i++, at = loop->segments[at].next) {
        size_t part =
            iov[i].iov_len < tls->stage_size - len ? iov[i].iov_len : tls->stage_size - len;
        memcpy(tls->stage + len, iov[i].iov_base, part);
        len += part;
    }
    if (!before_file || len == tls->stage_size) {
        return (ssize_t)len;
    }
    const struct sxe__segment *segment = &loop->segments[at]; /* the file range */
    size_t want =
        segment->remaining < tls->stage_size - len ? segment->remaining : tls->stage_size - len;
    ssize_t got;
    while ((got = sxe__sys.pread(segment->file_fd, tls->stage + len, want, segment->offset)) < 0 &&
           errno == EINTR) {
    }
    if (got <= 0) {
        return got < 0 ? -errno : -EIO;
    }
    *file_part = (size_t)got;
    return (ssize_t)(len + (size_t)got);
}

/* Seals a record of the next plain bytes into conn->out. @return as sxe__tls_seal. */
static int seal_one(struct sxe_conn *conn, struct tls_slot *slot)
{
    const char *from;
    size_t file_part;
    size_t written;

    ssize_t len = next_plain(conn, slot, &from, &file_part);
    if (len < 0) {
        return (int)len;
    }
    if (!sxe__outq_can_append(conn, &conn->out, (size_t)len + RECORD_OVERHEAD)) {
        conn->loop->stats.no_buffer++;
        SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR,
                     "no free buffer to seal TLS records: closing connections; raise %s (%u)",
                     sxe_log_setting("options.buffers"), conn->loop->options.buffers);
        return -ENOBUFS;
    }
    ERR_clear_error();
    slot->flags |= SLOT_SEALING;
    int ok = SSL_write_ex(slot->ssl, from, (size_t)len, &written);
    slot->flags &= (uint8_t)~SLOT_SEALING;
    if (!ok) {
        /* GCOVR_EXCL_START: the BIO had room (checked above), and the session is established */
        slot->flags |= SLOT_FAILED;
        log_openssl(SXE_LOG_LEVEL_ERROR, "TLS record not sealed");
        return -EPROTO;
        /* GCOVR_EXCL_STOP */
    }
    /* The bytes went whole (no partial writes without SSL_MODE_ENABLE_PARTIAL_WRITE). */
    sxe__outq_advance(conn, &slot->plain, written - file_part, false);
    if (file_part > 0) {
        conn->loop->segments[slot->plain.head].offset += (off_t)file_part;
        sxe__outq_advance(conn, &slot->plain, file_part, true);
    }
    return 1;
}

/*
 * One record at a time: conn->out holds at most one of the program's records (and what the peer's
 * doing adds), so the queued bytes, which count it, say how far the program's own bytes are from
 * being sent, as on a plain stream. A small response is one record anyway (its head, and its body
 * or file, gathered into one), and a large one is sent 16 KB a call, as nginx sends its records.
 */
int sxe__tls_seal(struct sxe_conn *conn)
{
    struct tls_slot *slot = slot_of(conn);

    if (slot->plain.head == SXE_NONE || !SSL_is_init_finished(slot->ssl)) {
        return 0; /* nothing to seal, or not yet: the handshake's end flushes them */
    }
    return seal_one(conn, slot);
}

bool sxe__tls_notify(struct sxe_conn *conn)
{
    struct tls_slot *slot = slot_of(conn);

    if (slot->flags & (SLOT_NOTIFIED | SLOT_FAILED)) {
        return false;
    }
    slot->flags |= SLOT_NOTIFIED;
    if (!SSL_is_init_finished(slot->ssl)) {
        return false; /* no session yet: the socket's end says it */
    }
    ERR_clear_error();
    SSL_shutdown(slot->ssl); /* 0: sent, the peer's not yet read; records go to conn->out */
    ERR_clear_error();
    return conn->out.head != SXE_NONE;
}
