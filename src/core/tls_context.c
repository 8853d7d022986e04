/*
 * TLS contexts with OpenSSL 3 (sxe/tls.h): a server's certificate and settings, a certificate per
 * server name (SNI), and a client's authorities. transport_tls.c makes the sessions.
 */
#define SXE_LOG_MODULE tls_log
#include "sxe/log.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sys.h"
#include "tls_context.h"

static struct sxe_log_module tls_log = SXE_LOG_MODULE_INIT(TLS);

/* The TLS 1.2 suites by default: forward secrecy and AEAD only, ECDSA first. */
#define DEFAULT_CIPHERS                                                                            \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"     \
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

/* Logs what OpenSSL says went wrong, after what, and empties its queue of errors. */
void sxe__tls_log_openssl(enum sxe_log_level level, const char *what)
{
    unsigned long code = ERR_peek_last_error();
    char reason[256];

    ERR_error_string_n(code, reason, sizeof(reason));
    ERR_clear_error();
    SXE_LOG(level, "%s: %s", what, code != 0 ? reason : "no reason given");
}
bool sxe_tls_available(void)
{
    return true;
}

/* ALPN: h2 when the context offers it (sxe_tls_server_offer_h2()) and the client does, else
 * http/1.1 when the client offers it; else no protocol is named. */
static int select_protocol(SSL *ssl, const unsigned char **out, unsigned char *out_len,
                           const unsigned char *offered, unsigned offered_len, void *arg)
{
    static const unsigned char both[] = "\x02h2\x08http/1.1";
    const sxe_tls_t *tls = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    const unsigned char *ours = tls != NULL && tls->h2 ? both : both + 3;
    unsigned ours_len = tls != NULL && tls->h2 ? sizeof(both) - 1 : sizeof(both) - 4;

    (void)arg;
    return SSL_select_next_proto((unsigned char **)(uintptr_t)out, out_len, ours, ours_len, offered,
                                 offered_len) == OPENSSL_NPN_NEGOTIATED
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

/* What every context holds, server's or client's, with more_options: TLS 1.2 and 1.3 only, no
 * renegotiation or compression, no record buffers while idle, records read ahead (fewer reads). */
static void set_common(SSL_CTX *ctx, uint64_t more_options)
{
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | more_options);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_read_ahead(ctx, 1);
}

/* Loads a certificate (and its chain) and its key into ctx. @return 0, -errno or -EPROTO. */
static int load_pair(SSL_CTX *ctx, const char *certificate, const char *key)
{
    int rc;

    if ((rc = readable(certificate, "certificate")) < 0 || (rc = readable(key, "key")) < 0) {
        return rc;
    }
    if (!SSL_CTX_use_certificate_chain_file(ctx, certificate)) {
        SXE_LOG_ERROR("TLS certificate %s: not a PEM certificate chain", certificate);
        sxe__tls_log_openssl(SXE_LOG_LEVEL_ERROR, "TLS certificate");
        return -EPROTO;
    }
    if (!SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) ||
        !SSL_CTX_check_private_key(ctx)) {
        SXE_LOG_ERROR("TLS key %s: not a PEM key, or not the key of certificate %s", key,
                      certificate);
        sxe__tls_log_openssl(SXE_LOG_LEVEL_ERROR, "TLS key");
        return -EPROTO;
    }
    return 0;
}

/* Loads the certificate, its key and the settings into ctx, and its session context into
 * *context. @return 0, -errno or -EPROTO. */
static int configure(SSL_CTX *ctx, const struct sxe_tls_options *options,
                     struct tls_session_context *context)
{
    int rc;

    set_common(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF); /* tickets resume sessions */
    /* A session resumes only under the client-certificate check it was made under (none here;
     * tls_clients.c's digest of the CA file with one). */
    *context = (struct tls_session_context){.bytes = "sxe", .len = 3};
    SSL_CTX_set_session_id_context(ctx, context->bytes, context->len);
    SSL_CTX_set_alpn_select_cb(ctx, select_protocol, NULL);
    const char *ciphers = options->ciphers != NULL ? options->ciphers : DEFAULT_CIPHERS;
    if (!SSL_CTX_set_cipher_list(ctx, ciphers)) {
        sxe__tls_log_openssl(SXE_LOG_LEVEL_ERROR, "TLS ciphers: none known");
        return -EPROTO;
    }
    if ((rc = load_pair(ctx, options->certificate, options->key)) < 0 ||
        (options->client_ca != NULL &&
         (rc = sxe__tls_clients_ask(ctx, options->client_ca, options->client_certificate_optional,
                                    context)) < 0) ||
        (options->ocsp_response != NULL &&
         (rc = sxe__tls_ocsp_load(ctx, options->ocsp_response)) < 0)) {
        return rc;
    }
    return 0;
}

/* Makes a context of options into *ctx. @return 0, -ENOMEM, or configure()'s error. */
static int context_make(SSL_CTX **ctx, const struct sxe_tls_options *options,
                        struct tls_session_context *context)
{
    SSL_CTX *made = SSL_CTX_new(TLS_server_method());
    int rc;

    if (made == NULL) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: out of memory */
    }
    if ((rc = configure(made, options, context)) < 0) {
        SSL_CTX_free(made);
        return rc;
    }
    *ctx = made;
    return 0;
}

int sxe_tls_server_create(sxe_tls_t **tls, const struct sxe_tls_options *options)
{
    int rc;

    if (!SXE_CHECK(tls != NULL && options != NULL && options->certificate != NULL &&
                   options->key != NULL)) {
        return -EINVAL;
    }
    *tls = NULL;
    sxe_tls_t *made = calloc(1, sizeof(*made));
    if (made == NULL) {
        free(made); /* GCOVR_EXCL_LINE: out of memory */
        return -ENOMEM;
    }
    pthread_mutex_init(&made->lock, NULL);
    if ((rc = context_make(&made->ctx, options, &made->session_context)) < 0) {
        sxe_tls_destroy(made);
        return rc;
    }
    SSL_CTX_set_app_data(made->ctx, made); /* ALPN's, and the tickets' */
    if ((rc = sxe__tls_tickets(made, options)) < 0) {
        sxe_tls_destroy(made);
        return rc;
    }
    *tls = made;
    return 0;
}

int sxe_tls_server_offer_h2(sxe_tls_t *tls)
{
    if (!SXE_CHECK(tls != NULL && !tls->client)) {
        return -EINVAL;
    }
    tls->h2 = true;
    return 0;
}

int sxe_tls_client_create(sxe_tls_t **tls, const struct sxe_tls_client_options *options)
{
    static const struct sxe_tls_client_options defaults;
    static const unsigned char offered[] = "\x08http/1.1";

    options = options != NULL ? options : &defaults;
    if (!SXE_CHECK(tls != NULL && (options->certificate == NULL) == (options->key == NULL))) {
        return -EINVAL;
    }
    *tls = NULL;
    int rc = options->ca_file != NULL ? readable(options->ca_file, "CA file") : 0;
    sxe_tls_t *made = rc == 0 ? calloc(1, sizeof(*made)) : NULL;
    if (rc < 0 || made == NULL || (made->ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
        free(made);
        return rc < 0 ? rc : -ENOMEM;
    }
    made->client = true;
    made->no_verify = options->no_verify;
    pthread_mutex_init(&made->lock, NULL);
    /* Not SSL_OP_IGNORE_UNEXPECTED_EOF: a server's FIN without close_notify may be an attacker
     * cutting a close-delimited body short, so it is an error (EPROTO) here, not an end. */
    set_common(made->ctx, 0);
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
        sxe__tls_log_openssl(SXE_LOG_LEVEL_ERROR, "TLS CA file");
        sxe_tls_destroy(made);
        return -EPROTO;
    }
    if (options->certificate != NULL &&
        (rc = load_pair(made->ctx, options->certificate, options->key)) < 0) {
        sxe_tls_destroy(made);
        return rc;
    }
    if (!options->no_resume && (rc = sxe__tls_sessions_make(made)) < 0) {
        sxe_tls_destroy(made); /* GCOVR_EXCL_LINE: out of memory */
        return rc;             /* GCOVR_EXCL_LINE */
    }
    *tls = made;
    return 0;
}

/* The context for the name a client asked for: exact, else "*." and all but its first label. */
static SSL_CTX *context_named(const sxe_tls_t *tls, const char *asked)
{
    char name[SXE_TLS_NAME_MAX + 2];
    size_t len = strlen(asked);

    if (len == 0 || len > SXE_TLS_NAME_MAX + 1) {
        return NULL;
    }
    memcpy(name, asked, len + 1);
    name[len - 1] = name[len - 1] == '.' ? '\0' : name[len - 1]; /* "example.com." is absolute */
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

/* SNI: the certificate of the name the client asked for, or the default's. The names are read
 * under the lock (a reload may replace them); the session takes a reference to the one chosen. */
static int choose_certificate(SSL *ssl, int *alert, void *arg)
{
    sxe_tls_t *tls = arg;
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);

    pthread_mutex_lock(&tls->lock);
    SSL_CTX *ctx = name != NULL ? context_named(tls, name) : NULL;
    bool failed = ctx != NULL && SSL_set_SSL_CTX(ssl, ctx) == NULL;
    pthread_mutex_unlock(&tls->lock);
    if (failed) {
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
    struct sxe_tls_options own = {.certificate = options->certificate,
                                  .key = options->key,
                                  .ocsp_response = options->ocsp_response};
    struct tls_session_context unused;
    if ((rc = context_make(&added->ctx, &own, &unused)) < 0) {
        return rc;
    }
    sxe__tls_clients_share(added->ctx, tls->ctx, &tls->session_context);
    memcpy(added->name, name, strlen(name) + 1); /* name_valid() held it to the size */
    SSL_CTX_set_app_data(added->ctx, tls); /* a ticket's key is the default's, whichever is shown */
    tls->name_count++;
    SSL_CTX_set_tlsext_servername_callback(tls->ctx, choose_certificate);
    SSL_CTX_set_tlsext_servername_arg(tls->ctx, tls);
    return 0;
}

/* Frees the default context and the names' (sessions that use them hold references of their
 * own). */
static void contexts_free(SSL_CTX *ctx, struct tls_name *names, unsigned name_count)
{
    for (unsigned i = 0; i < name_count; i++) {
        SSL_CTX_free(names[i].ctx);
    }
    free(names);
    SSL_CTX_free(ctx);
}

int sxe_tls_server_replace(sxe_tls_t *tls, sxe_tls_t *fresh)
{
    if (!SXE_CHECK(tls != NULL && fresh != NULL && tls != fresh && !tls->client &&
                   !fresh->client)) {
        return -EINVAL;
    }
    SSL_CTX_set_app_data(fresh->ctx, tls); /* the ticket callback's and the names' context */
    for (unsigned i = 0; i < fresh->name_count; i++) {
        SSL_CTX_set_app_data(fresh->names[i].ctx, tls);
    }
    if (fresh->name_count > 0) {
        SSL_CTX_set_tlsext_servername_arg(fresh->ctx, tls);
    }
    pthread_mutex_lock(&tls->lock);
    SSL_CTX *ctx = tls->ctx;
    struct tls_name *names = tls->names;
    unsigned name_count = tls->name_count;
    tls->ctx = fresh->ctx;
    tls->names = fresh->names;
    tls->name_count = fresh->name_count;
    tls->session_context = fresh->session_context;
    if (fresh->ticket_period != 0 && (fresh->ticket_file || tls->ticket_period == 0)) {
        memcpy(tls->ticket_secret, fresh->ticket_secret, sizeof(tls->ticket_secret));
        tls->ticket_file = fresh->ticket_file;
    }
    tls->ticket_period = fresh->ticket_period != 0 ? fresh->ticket_period : tls->ticket_period;
    pthread_mutex_unlock(&tls->lock);
    contexts_free(ctx, names, name_count);
    fresh->ctx = NULL;
    fresh->names = NULL;
    fresh->name_count = 0;
    sxe_tls_destroy(fresh);
    return 0;
}

void sxe_tls_destroy(sxe_tls_t *tls)
{
    if (tls != NULL) {
        contexts_free(tls->ctx, tls->names, tls->name_count);
        sxe__tls_sessions_free(tls);
        OPENSSL_cleanse(tls->ticket_secret, sizeof(tls->ticket_secret));
        pthread_mutex_destroy(&tls->lock);
        free(tls);
    }
}
