/*
 * Client certificates (mutual TLS) for server contexts: the authorities asked for and trusted,
 * and the session context that binds a session to them. A session resumed by ticket skips the
 * certificate check, so it must resume only where the same check was made: the session context
 * is a digest of the client CA file's bytes and of whether a certificate is required, and OpenSSL
 * resumes no session made under another (another CA file, none at all, or optional where it is
 * now required), with any server that shares the ticket keys, and across a reload.
 */
#define SXE_LOG_MODULE tls_log
#include "sxe/log.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <string.h>

#include "sys.h"
#include "tls_context.h"

static struct sxe_log_module tls_log = SXE_LOG_MODULE_INIT(TLS);

/* The most a CertificateRequest's list of authorities' names holds (a 2-byte length). */
#define NAMES_MOST 65535

/* The session context of the CA file at path, as required or optional, into context.
 * @return 0 or -errno (logged). */
static int digest(const char *path, bool optional, struct tls_session_context *context)
{
    static const char label[] = "sxe client CA";
    unsigned char bytes[16384];
    unsigned len = 0;
    ssize_t got = 0;
    int fd = sxe__sys.open(path, O_RDONLY | O_CLOEXEC, 0);
    EVP_MD_CTX *sha = fd >= 0 ? EVP_MD_CTX_new() : NULL;
    bool ok = sha != NULL && EVP_DigestInit_ex(sha, EVP_sha256(), NULL) == 1 &&
              EVP_DigestUpdate(sha, label, sizeof(label)) == 1 &&
              EVP_DigestUpdate(sha, optional ? "o" : "r", 1) == 1;
    int err = fd < 0 ? errno : 0;

    while (ok && (got = sxe__sys.read(fd, bytes, sizeof(bytes))) != 0) {
        if (got < 0 && errno != EINTR) {
            err = errno;
            break;
        }
        ok = got < 0 || EVP_DigestUpdate(sha, bytes, (size_t)got) == 1;
    }
    ok = ok && err == 0 && EVP_DigestFinal_ex(sha, context->bytes, &len) == 1;
    context->len = ok ? len : 0;
    EVP_MD_CTX_free(sha);
    if (fd >= 0) {
        sxe__sys.close(fd);
    }
    if (!ok) {
        SXE_LOG_ERROR("TLS client CA file %s: %s", path,
                      sxe_strerror(err != 0 ? err : ENOMEM)); /* GCOVR_EXCL_BR_LINE */
        return err != 0 ? -err : -ENOMEM;
    }
    return 0;
}

/* The bytes names take in a CertificateRequest: each name's DER and its 2-byte length. */
static size_t names_size(const STACK_OF(X509_NAME) * names)
{
    size_t size = 0;

    for (int i = 0; i < sk_X509_NAME_num(names); i++) {
        int len = i2d_X509_NAME(sk_X509_NAME_value(names, i), NULL);
        size += 2 + (size_t)(len > 0 ? len : 0);
    }
    return size;
}

int sxe__tls_clients_ask(SSL_CTX *ctx, const char *ca, bool optional,
                         struct tls_session_context *context)
{
    int rc = digest(ca, optional, context);
    STACK_OF(X509_NAME) *names = rc == 0 ? SSL_load_client_CA_file(ca) : NULL;
    size_t size = names != NULL ? names_size(names) : 0;

    if (rc < 0) {
        return rc;
    }
    if (names == NULL || size > NAMES_MOST || !SSL_CTX_load_verify_locations(ctx, ca, NULL)) {
        if (size > NAMES_MOST) {
            SXE_LOG_ERROR("TLS client CA file %s: the names of its %d authorities take %zu bytes, "
                          "more than the %d a handshake carries",
                          ca, sk_X509_NAME_num(names), size, NAMES_MOST);
        } else {
            SXE_LOG_ERROR("TLS client CA file %s: no PEM certificate in it", ca);
            sxe__tls_log_openssl(SXE_LOG_LEVEL_ERROR, "TLS client CA file");
        }
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        ERR_clear_error();
        return -EPROTO;
    }
    /* An intermediate in the file is trusted as it is: an operator may trust one issuer without
     * its root and every other issuer under that root. */
    X509_STORE_set_flags(SSL_CTX_get_cert_store(ctx), X509_V_FLAG_PARTIAL_CHAIN);
    SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (optional ? 0 : SSL_VERIFY_FAIL_IF_NO_PEER_CERT),
                       NULL);
    SSL_CTX_set_session_id_context(ctx, context->bytes, context->len);
    return 0;
}

void sxe__tls_clients_share(SSL_CTX *named, SSL_CTX *ctx, const struct tls_session_context *context)
{
    int mode = SSL_CTX_get_verify_mode(ctx);

    SSL_CTX_set_session_id_context(named, context->bytes, context->len);
    if (mode & SSL_VERIFY_PEER) {
        SSL_CTX_set1_cert_store(named, SSL_CTX_get_cert_store(ctx));
        SSL_CTX_set_client_CA_list(named, SSL_dup_CA_list(SSL_CTX_get_client_CA_list(ctx)));
        SSL_CTX_set_verify(named, mode, NULL);
    }
}
