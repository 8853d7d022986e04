/*
 * OCSP stapling from a file: a server context's handshakes whose client asks for the status of
 * the certificate get the DER response the operator fetched (`openssl ocsp -respout FILE`), so
 * the client need not ask the authority itself. The response is read and checked once, when the
 * context is made (a reload makes a new one): a successful response and nothing after it, for this
 * certificate (its issuer's name and key and its serial number, when the chain carries the
 * issuer; else the serial number alone), saying it is good, made no later than now (5 minutes'
 * leeway), and signed by the issuer or a responder it made. Each context that has one keeps it in
 * its ex_data, so it lives and dies with the context (a name's context staples its own, after SNI
 * chose it).
 */
#define SXE_LOG_MODULE tls_log
#include "sxe/log.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ocsp.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sxe/clock.h"
#include "sys.h"
#include "tls_context.h"

static struct sxe_log_module tls_log = SXE_LOG_MODULE_INIT(TLS);

#define OCSP_MOST (64 * 1024) /* bytes of a response file: real ones are 1-4 KB */

struct stapled {
    time_t next_update; /* when the response goes stale (0: it names no next update) */
    bool warned;        /* that it has gone stale (said once for each response read) */
    size_t len;
    unsigned char der[];
};

static int ex_index = -1;
static pthread_once_t ex_once = PTHREAD_ONCE_INIT;

static void stapled_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                         void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    free(ptr);
}

static void ex_index_make(void)
{
    ex_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, stapled_free);
}

/* The status callback: staples ctx's response, unless it has gone stale. */
static int staple(SSL *ssl, void *arg)
{
    struct stapled *stapled = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ex_index);
    time_t now = (time_t)(sxe_clock_wall_ns() / SXE_NS_PER_SEC);

    (void)arg;
    if (stapled == NULL) {
        return SSL_TLSEXT_ERR_NOACK; /* GCOVR_EXCL_LINE: a name's context without one */
    }
    if (stapled->next_update != 0 && now > stapled->next_update) {
        if (!__atomic_exchange_n(&stapled->warned, true, __ATOMIC_RELAXED)) {
            SXE_LOG_WARN("TLS OCSP response past its next update: no longer stapled (fetch a new "
                         "one and reload; said once for this response)");
        }
        return SSL_TLSEXT_ERR_NOACK;
    }
    unsigned char *copy = OPENSSL_memdup(stapled->der, stapled->len); /* OpenSSL frees it */
    if (copy == NULL || !SSL_set_tlsext_status_ocsp_resp(ssl, copy, (long)stapled->len)) {
        OPENSSL_free(copy);          /* GCOVR_EXCL_LINE: out of memory */
        return SSL_TLSEXT_ERR_NOACK; /* GCOVR_EXCL_LINE */
    }
    return SSL_TLSEXT_ERR_OK;
}

/* Reads the file at path into a stapled of its own. @return it, or NULL with *rc -errno or
 * -EFBIG (logged). */
static struct stapled *file_read(const char *path, int *rc)
{
    int fd = sxe__sys.open(path, O_RDONLY | O_CLOEXEC, 0);
    struct stapled *stapled = fd >= 0 ? malloc(sizeof(*stapled) + OCSP_MOST + 1) : NULL;
    int err = fd < 0 ? errno : stapled == NULL ? ENOMEM : 0;
    size_t len = 0;

    while (err == 0 && len <= OCSP_MOST) {
        ssize_t got = sxe__sys.read(fd, stapled->der + len, OCSP_MOST + 1 - len);
        if (got == 0) {
            break;
        }
        len += got > 0 ? (size_t)got : 0;
        err = got < 0 && errno != EINTR ? errno : 0;
    }
    if (fd >= 0) {
        sxe__sys.close(fd);
    }
    err = err == 0 && len > OCSP_MOST ? EFBIG : err;
    if (err != 0) {
        SXE_LOG_ERROR("TLS OCSP response %s: %s", path,
                      err == EFBIG ? "larger than 64 KB: not an OCSP response" : sxe_strerror(err));
        free(stapled);
        *rc = -err;
        return NULL;
    }
    stapled->len = len;
    stapled->next_update = 0;
    stapled->warned = false;
    return stapled;
}

/* The certificate in ctx's chain that issued cert (cert itself if it is self-issued), or NULL. */
static X509 *issuer_of(SSL_CTX *ctx, X509 *cert)
{
    STACK_OF(X509) *chain = NULL;

    if (X509_check_issued(cert, cert) == X509_V_OK) {
        return cert;
    }
    SSL_CTX_get0_chain_certs(ctx, &chain);
    for (int i = 0; i < sk_X509_num(chain); i++) {
        if (X509_check_issued(sk_X509_value(chain, i), cert) == X509_V_OK) {
            return sk_X509_value(chain, i);
        }
    }
    return NULL;
}

/* Whether id names cert: its issuer's name and key (hashed as id hashes them) and its serial
 * number, or with no issuer at hand its serial number alone. */
static bool names_cert(const OCSP_CERTID *id, X509 *cert, X509 *issuer)
{
    ASN1_OBJECT *hash = NULL;
    ASN1_INTEGER *serial = NULL;

    OCSP_id_get0_info(NULL, &hash, NULL, &serial, (OCSP_CERTID *)(uintptr_t)id);
    if (serial == NULL || ASN1_INTEGER_cmp(serial, X509_get0_serialNumber(cert)) != 0) {
        return false;
    }
    const EVP_MD *md = hash != NULL ? EVP_get_digestbyobj(hash) : NULL;
    OCSP_CERTID *mine = issuer != NULL && md != NULL ? OCSP_cert_to_id(md, cert, issuer) : NULL;
    bool same = issuer == NULL || (mine != NULL && OCSP_id_cmp(mine, id) == 0);
    OCSP_CERTID_free(mine);
    return same;
}

/* Whether basic is signed by issuer, or by a responder issuer made for it. */
static bool signed_by(OCSP_BASICRESP *basic, X509 *issuer)
{
    STACK_OF(X509) *certs = sk_X509_new_null();
    X509_STORE *store = X509_STORE_new();
    bool ok = certs != NULL && store != NULL && sk_X509_push(certs, issuer) > 0 &&
              X509_STORE_add_cert(store, issuer) == 1 &&
              X509_STORE_set_flags(store, X509_V_FLAG_PARTIAL_CHAIN) == 1 &&
              OCSP_basic_verify(basic, certs, store, 0) > 0;

    X509_STORE_free(store);
    sk_X509_free(certs);
    return ok;
}

/* What is wrong with a successful response's basic part, for cert of ctx: @return NULL, or why
 * it is refused; its next update into *next_update. */
static const char *judge_basic(OCSP_BASICRESP *basic, SSL_CTX *ctx, X509 *cert,
                               ASN1_GENERALIZEDTIME **next_update)
{
    X509 *issuer = issuer_of(ctx, cert);
    OCSP_SINGLERESP *single = NULL;
    ASN1_GENERALIZEDTIME *this_update = NULL;
    int reason, status = -1;
    time_t soon = (time_t)(sxe_clock_wall_ns() / SXE_NS_PER_SEC) + 300;

    for (int i = 0; single == NULL && i < OCSP_resp_count(basic); i++) {
        single = OCSP_resp_get0(basic, i);
        single = names_cert(OCSP_SINGLERESP_get0_id(single), cert, issuer) ? single : NULL;
    }
    if (single != NULL) {
        status = OCSP_single_get0_status(single, &reason, NULL, &this_update, next_update);
    }
    if (issuer == NULL) {
        SXE_LOG_INFO("TLS OCSP response: the certificate's issuer is not in its chain, so the "
                     "response is matched by serial number and its signature not checked");
    }
    return single == NULL                        ? "not a response for this certificate"
           : status == V_OCSP_CERTSTATUS_REVOKED ? "says the certificate is revoked"
           : status != V_OCSP_CERTSTATUS_GOOD    ? "does not know the certificate's status"
           : this_update == NULL || X509_cmp_time(this_update, &soon) > 0
               ? "made in the future (this machine's clock, or the responder's, is wrong)"
           : issuer != NULL && !signed_by(basic, issuer)
               ? "its signature does not verify against the certificate's issuer"
               : NULL;
}

/* Checks that stapled holds a successful response, nothing after it, for ctx's certificate,
 * that says it is good, and notes when it goes stale. @return NULL, or what is wrong with it. */
static const char *judge(struct stapled *stapled, SSL_CTX *ctx)
{
    const unsigned char *at = stapled->der;
    OCSP_RESPONSE *response = d2i_OCSP_RESPONSE(NULL, &at, (long)stapled->len);
    OCSP_BASICRESP *basic = response != NULL ? OCSP_response_get1_basic(response) : NULL;
    X509 *cert = SSL_CTX_get0_certificate(ctx);
    ASN1_GENERALIZEDTIME *next_update = NULL;
    struct tm tm;
    const char *wrong = response == NULL                    ? "not a DER OCSP response"
                        : at != stapled->der + stapled->len ? "bytes after the OCSP response"
                        : OCSP_response_status(response) != OCSP_RESPONSE_STATUS_SUCCESSFUL
                            ? "not a successful OCSP response"
                        : basic == NULL || cert == NULL
                            ? "not a response for this certificate"
                            : judge_basic(basic, ctx, cert, &next_update);

    if (wrong == NULL && next_update != NULL && ASN1_TIME_to_tm(next_update, &tm)) {
        stapled->next_update = timegm(&tm);
    }
    OCSP_BASICRESP_free(basic);
    OCSP_RESPONSE_free(response);
    return wrong;
}

int sxe__tls_ocsp_load(SSL_CTX *ctx, const char *path)
{
    int rc = 0;
    struct stapled *stapled = file_read(path, &rc);

    if (stapled == NULL) {
        return rc;
    }
    const char *wrong = judge(stapled, ctx);
    pthread_once(&ex_once, ex_index_make);
    if (wrong != NULL || ex_index < 0 || !SSL_CTX_set_ex_data(ctx, ex_index, stapled)) {
        SXE_LOG_ERROR("TLS OCSP response %s: %s", path,
                      wrong != NULL ? wrong : "no memory"); /* GCOVR_EXCL_BR_LINE */
        ERR_clear_error();
        free(stapled);
        return wrong != NULL ? -EPROTO : -ENOMEM;
    }
    if (stapled->next_update != 0 &&
        stapled->next_update < (time_t)(sxe_clock_wall_ns() / SXE_NS_PER_SEC)) {
        SXE_LOG_WARN("TLS OCSP response %s: past its next update, so not stapled", path);
    }
    SSL_CTX_set_tlsext_status_cb(ctx, staple);
    return 0;
}
