/*
 * Session tickets' keys. A ticket is the session, sealed by the server (AES-256-CBC and
 * HMAC-SHA256, as OpenSSL's own tickets are) and kept by the client, who shows it to resume. The
 * keys are not kept anywhere: each period's keys are derived from a secret and the period's number
 * (HMAC-SHA256 of the secret over a label and the number), so every process that holds the secret
 * seals and opens the same tickets without talking to the others, and the keys change each period
 * without a restart. The secret is made at the context's creation (shared by threads and by the
 * worker processes forked after it), or read from a file that several servers share. A ticket
 * sealed in one period opens in the next too (and is then sealed anew), never later.
 */
#define SXE_LOG_MODULE tls_log
#include "sxe/log.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sys.h"
#include "tls_context.h"

static struct sxe_log_module tls_log = SXE_LOG_MODULE_INIT(TLS);

#define TICKET_NAME 16 /* bytes of a key's name, which the ticket carries in clear */
#define TICKET_KEY  32 /* bytes of the AES key, and of the HMAC key */

/* Derives one of period's keys: HMAC-SHA256(secret, label and the period, big-endian). */
static bool derive(const sxe_tls_t *tls, char label, uint64_t period, unsigned char out[32])
{
    unsigned char input[9] = {(unsigned char)label};
    size_t len = 0;

    for (int i = 0; i < 8; i++) {
        input[1 + i] = (unsigned char)(period >> (56 - 8 * i));
    }
    return EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, tls->ticket_secret,
                     sizeof(tls->ticket_secret), input, sizeof(input), out, 32, &len) != NULL &&
           len == 32;
}

/* Sets cipher and mac to period's keys (encrypt: 1 to seal, 0 to open). @return success. */
static bool keys_set(const sxe_tls_t *tls, uint64_t period, const unsigned char *iv,
                     EVP_CIPHER_CTX *cipher, EVP_MAC_CTX *mac, int encrypt)
{
    unsigned char aes[TICKET_KEY], hmac[TICKET_KEY];
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, hmac, sizeof(hmac)),
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_end()};

    bool ok = derive(tls, 'a', period, aes) && derive(tls, 'h', period, hmac) &&
              EVP_CipherInit_ex(cipher, EVP_aes_256_cbc(), NULL, aes, iv, encrypt) == 1 &&
              EVP_MAC_CTX_set_params(mac, params) == 1;
    OPENSSL_cleanse(aes, sizeof(aes));
    OPENSSL_cleanse(hmac, sizeof(hmac));
    return ok;
}

/* Finds or makes the key for name: @return as ticket_key(). */
static int ticket_key_of(const sxe_tls_t *tls, unsigned char name[TICKET_NAME], unsigned char *iv,
                         EVP_CIPHER_CTX *cipher, EVP_MAC_CTX *mac, int encrypt)
{
    uint64_t period = sxe_clock_wall_ns() / tls->ticket_period;
    unsigned char named[32];

    if (encrypt) {
        if (!derive(tls, 'n', period, named) || RAND_bytes(iv, EVP_MAX_IV_LENGTH) != 1) {
            return -1; /* GCOVR_EXCL_LINE: OpenSSL out of memory, or of randomness */
        }
        memcpy(name, named, TICKET_NAME);
        return keys_set(tls, period, iv, cipher, mac, 1) ? 1 : -1;
    }
    for (uint64_t back = 0; back < 2 && back <= period; back++) {
        if (derive(tls, 'n', period - back, named) && memcmp(name, named, TICKET_NAME) == 0) {
            return !keys_set(tls, period - back, iv, cipher, mac, 0) ? -1 : back == 0 ? 1 : 2;
        }
    }
    return 0;
}

/* OpenSSL's ticket callback: @return 1 (this period's key), 2 (the last period's: seal anew), 0
 * (no key of ours: a full handshake), -1 (an error). The secret is read under the context's lock,
 * as a reload may change it on another thread. */
static int ticket_key(SSL *ssl, unsigned char name[TICKET_NAME], unsigned char *iv,
                      EVP_CIPHER_CTX *cipher, EVP_MAC_CTX *mac, int encrypt)
{
    sxe_tls_t *tls = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));

    pthread_mutex_lock(&tls->lock);
    int rc = ticket_key_of(tls, name, iv, cipher, mac, encrypt);
    pthread_mutex_unlock(&tls->lock);
    return rc;
}

/* When a ticket is sealed: a session from a full handshake is stamped with its time (wall
 * seconds), which the tickets of its resumptions carry on. */
static int ticket_made(SSL *ssl, void *arg)
{
    SSL_SESSION *session = SSL_get0_session(ssl);
    void *stamp;
    size_t len = 0;

    (void)arg;
    if (session != NULL && (!SSL_SESSION_get0_ticket_appdata(session, &stamp, &len) || len != 8)) {
        uint64_t now = sxe_clock_wall_ns() / SXE_NS_PER_SEC;
        return SSL_SESSION_set1_ticket_appdata(session, &now, sizeof(now));
    }
    return 1;
}

/*
 * When a ticket is opened: its session resumes only within two ticket periods of its full
 * handshake (OpenSSL renews a session's time with each ticket, so without this a client that
 * comes back often would never make a full handshake again), and never with a peer certificate
 * that has expired since (a client's certificate is checked at the full handshake only).
 */
static SSL_TICKET_RETURN ticket_opened(SSL *ssl, SSL_SESSION *session, const unsigned char *name,
                                       size_t name_len, SSL_TICKET_STATUS status, void *arg)
{
    sxe_tls_t *tls = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    void *stamp;
    size_t len = 0;
    uint64_t made;

    (void)name, (void)name_len, (void)arg;
    if (status == SSL_TICKET_FATAL_ERR_MALLOC || status == SSL_TICKET_FATAL_ERR_OTHER) {
        return SSL_TICKET_RETURN_ABORT; /* GCOVR_EXCL_LINE: out of memory */
    }
    if (status != SSL_TICKET_SUCCESS && status != SSL_TICKET_SUCCESS_RENEW) {
        return SSL_TICKET_RETURN_IGNORE_RENEW; /* none, or not ours: a full handshake */
    }
    pthread_mutex_lock(&tls->lock);
    uint64_t most = 2 * tls->ticket_period / SXE_NS_PER_SEC;
    pthread_mutex_unlock(&tls->lock);
    X509 *peer = SSL_SESSION_get0_peer(session);
    time_t now = (time_t)(sxe_clock_wall_ns() / SXE_NS_PER_SEC);
    if (!SSL_SESSION_get0_ticket_appdata(session, &stamp, &len) || len != sizeof(made) ||
        (memcpy(&made, stamp, sizeof(made)), (uint64_t)now > made + most) ||
        (peer != NULL && X509_cmp_time(X509_get0_notAfter(peer), &now) <= 0)) {
        return SSL_TICKET_RETURN_IGNORE_RENEW;
    }
    return status == SSL_TICKET_SUCCESS_RENEW ? SSL_TICKET_RETURN_USE_RENEW : SSL_TICKET_RETURN_USE;
}

/* The secret of a key file: the SHA-256 of its bytes, of which there must be 32 or more. */
static int secret_read(sxe_tls_t *tls, const char *path)
{
    unsigned char bytes[4096];
    ssize_t got;
    int fd = sxe__sys.open(path, O_RDONLY | O_CLOEXEC, 0);

    if (fd < 0) {
        int err = errno;
        SXE_LOG_ERROR("TLS ticket key file %s: %s", path, sxe_strerror(err));
        return -err;
    }
    while ((got = sxe__sys.read(fd, bytes, sizeof(bytes))) < 0 && errno == EINTR) {
    }
    int err = got < 0 ? errno : 0;
    sxe__sys.close(fd);
    if (got < 32) {
        SXE_LOG_ERROR("TLS ticket key file %s: %s", path,
                      got < 0 ? sxe_strerror(err)
                              : "fewer than 32 bytes (make it with `openssl "
                                "rand 80 > FILE`)");
        return got < 0 ? -err : -EINVAL;
    }
    unsigned int len = 0;
    bool ok = EVP_Digest(bytes, (size_t)got, tls->ticket_secret, &len, EVP_sha256(), NULL) == 1;
    OPENSSL_cleanse(bytes, sizeof(bytes));
    return ok ? 0 : -ENOMEM; /* GCOVR_EXCL_LINE: OpenSSL out of memory */
}

int sxe__tls_tickets(sxe_tls_t *tls, const struct sxe_tls_options *options)
{
    int rc;

    if (options->no_tickets) { /* TLS 1.2's tickets; and TLS 1.3 sends none at all */
        SSL_CTX_set_options(tls->ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(tls->ctx, 0);
        return 0;
    }
    tls->ticket_period = options->ticket_period ? options->ticket_period : 3600 * SXE_NS_PER_SEC;
    if (options->ticket_key_file != NULL) {
        if ((rc = secret_read(tls, options->ticket_key_file)) < 0) {
            return rc;
        }
        tls->ticket_file = true;
    } else if (RAND_bytes(tls->ticket_secret, sizeof(tls->ticket_secret)) != 1) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: no randomness to be had */
    }
    /* A session lives as long as its ticket can be opened: the rest of this period and the next. */
    long lifetime = (long)(tls->ticket_period / SXE_NS_PER_SEC);
    SSL_CTX_set_timeout(tls->ctx, lifetime > 0 ? lifetime : 1);
    SSL_CTX_set_app_data(tls->ctx, tls);
    SSL_CTX_set_tlsext_ticket_key_evp_cb(tls->ctx, ticket_key);
    SSL_CTX_set_session_ticket_cb(tls->ctx, ticket_made, ticket_opened, NULL);
    return 0;
}
