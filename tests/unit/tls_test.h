/*
 * The harness of the TLS tests: certificates made for the run (ECDSA P-256, self-signed, one for
 * "localhost" and one for "other.test" and "*.wild.test"), and an OpenSSL client in a thread of its
 * own, blocking, so the test's thread turns the loop meanwhile (tls_client_run). Static inline, so
 * a test program that does not use a helper is not warned about it.
 */
#ifndef SXE_TLS_TEST_H
#define SXE_TLS_TEST_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/tls.h"
#include "sxe_test.h"

/* The files of the run's certificate and key, and of a key that is not the certificate's: the
 * other certificate's. */
static char tls_certificate[64] = "/tmp/sxe-tls-cert-XXXXXX";
static char tls_key[64] = "/tmp/sxe-tls-key-XXXXXX";
static char tls_other_key[64] = "/tmp/sxe-tls-other-XXXXXX";
static char tls_other_certificate[64] = "/tmp/sxe-tls-other-cert-XXXXXX";

/* Makes a key and writes it to a file made from the template path. */
static inline EVP_PKEY *tls_test_key(char *path)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    int fd = mkstemp(path);
    FILE *file = fd >= 0 ? fdopen(fd, "w") : NULL;

    assert_non_null(key);
    assert_non_null(file);
    assert_true(PEM_write_PrivateKey(file, key, NULL, NULL, 0, NULL, NULL));
    fclose(file);
    return key;
}

/* Writes a self-signed certificate of key for common_name and the names san lists. */
static inline void tls_test_certificate(char *path, EVP_PKEY *key, const char *common_name,
                                        const char *san_names)
{
    X509 *cert = X509_new();
    assert_non_null(cert);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME *name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)common_name, -1, -1,
                               0);
    X509_set_issuer_name(cert, name);
    X509_EXTENSION *san = X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name, san_names);
    assert_non_null(san);
    X509_add_ext(cert, san, -1);
    X509_EXTENSION_free(san);
    assert_true(X509_sign(cert, key, EVP_sha256()) > 0);
    int fd = mkstemp(path);
    FILE *file = fd >= 0 ? fdopen(fd, "w") : NULL;
    assert_non_null(file);
    assert_true(PEM_write_X509(file, cert));
    fclose(file);
    X509_free(cert);
}

/* Writes the run's certificates and keys (call once, from the group's setup). */
static inline void tls_test_files_make(void)
{
    EVP_PKEY *key = tls_test_key(tls_key);
    EVP_PKEY *other = tls_test_key(tls_other_key);
    tls_test_certificate(tls_certificate, key, "localhost", "DNS:localhost");
    tls_test_certificate(tls_other_certificate, other, "other.test",
                         "DNS:other.test,DNS:*.wild.test");
    EVP_PKEY_free(key);
    EVP_PKEY_free(other);
}

static inline void tls_test_files_remove(void)
{
    unlink(tls_other_certificate);
    unlink(tls_certificate);
    unlink(tls_key);
    unlink(tls_other_key);
}

/* A group's setup and teardown that need nothing but the run's certificates and keys. */
static inline int tls_test_group_setup(void **state)
{
    (void)state;
    tls_test_files_make();
    return 0;
}

static inline int tls_test_group_teardown(void **state)
{
    (void)state;
    tls_test_files_remove();
    return 0;
}

/* What a client does, and what it saw. */
struct tls_client {
    int port;
    int max_version;      /* TLS1_2_VERSION...: the highest it offers (0: OpenSSL's) */
    uint8_t max_fragment; /* asks for records this small (TLSEXT_max_fragment_length_*), or 0 */
    int min_version;      /* the lowest (0: OpenSSL's) */
    bool offer_alpn;      /* offers h2 and http/1.1 */
    bool plain;           /* sends its bytes without TLS */
    bool notify;          /* sends close_notify after its bytes */
    const char *send;     /* what it sends once connected */
    size_t send_len;      /* its length (0: strlen) */
    size_t expect;        /* reads until it has this many bytes, or the end */
    char *got;            /* what it read (malloc'ed, expect + 1 bytes) */
    size_t got_len;
    bool handshake_ok;       /* the handshake completed, and the certificate was verified */
    bool close_notified;     /* the end was the server's close_notify */
    bool ended;              /* the server ended the stream (close_notify or FIN) */
    char protocol[16];       /* the ALPN protocol chosen, or "" */
    const char *server_name; /* asked for by SNI and verified (NULL: "localhost"; "": none) */
    char subject[64];        /* the common name of the certificate the server showed */
    bool ticket;             /* the server gave a session ticket (by the end of the reads) */
    unsigned trickle_ms;     /* plain: sends a byte at a time, this far apart */
    SSL_SESSION *resume;     /* a session to resume (the caller's), or NULL */
    SSL_SESSION *kept;       /* the session it had, to resume later (tls_client_free frees it) */
    bool resumed;            /* the server resumed the session */
    size_t sent;             /* plain: the bytes the server took before it closed */
    int version;             /* the protocol version agreed */
    const char *certificate; /* a certificate (and key) to show a server that asks, or NULL */
    const char *key;
    bool ask_status;  /* asks for the certificate's OCSP status */
    long stapled_len; /* the bytes of the OCSP response stapled (-1: none) */
    volatile int done;
    pthread_t thread;
};

static inline int tls_test_connect(int port)
{
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&address, sizeof(address)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline void tls_client_read(struct tls_client *client, SSL *ssl)
{
    while (client->got_len < client->expect) {
        size_t got = 0;
        if (SSL_read_ex(ssl, client->got + client->got_len, client->expect - client->got_len,
                        &got)) {
            client->got_len += got;
            continue;
        }
        int error = SSL_get_error(ssl, 0);
        client->close_notified = error == SSL_ERROR_ZERO_RETURN;
        client->ended = true;
        break;
    }
}

static inline void *tls_client_main(void *arg)
{
    struct tls_client *client = arg;
    size_t send_len = client->send_len ? client->send_len : client->send ? strlen(client->send) : 0;
    int fd = tls_test_connect(client->port);

    client->got = calloc(1, client->expect + 1);
    if (fd < 0 || client->got == NULL) {
        __atomic_store_n(&client->done, 1, __ATOMIC_RELEASE);
        return NULL;
    }
    if (client->plain) {
        size_t piece = client->trickle_ms > 0 ? 1 : send_len;
        while (client->sent < send_len &&
               send(fd, client->send + client->sent, piece, MSG_NOSIGNAL) == (ssize_t)piece) {
            client->sent += piece;
            usleep(client->trickle_ms * 1000u);
        }
        if (client->sent == send_len) {
            ssize_t got;
            while (client->got_len < client->expect &&
                   (got = recv(fd, client->got + client->got_len, client->expect - client->got_len,
                               0)) > 0) {
                client->got_len += (size_t)got;
            }
            client->ended = true;
        }
        close(fd);
        __atomic_store_n(&client->done, 1, __ATOMIC_RELEASE);
        return NULL;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_security_level(ctx, 0); /* so that TLS 1.1 can be offered, and refused */
    if (client->max_version) {
        SSL_CTX_set_max_proto_version(ctx, client->max_version);
    }
    if (client->min_version) {
        SSL_CTX_set_min_proto_version(ctx, client->min_version);
    }
    SSL_CTX_load_verify_locations(ctx, tls_certificate, NULL);
    SSL_CTX_load_verify_locations(ctx, tls_other_certificate, NULL);
    /* With a name of its own the client goes on past a certificate of another name, to say so. */
    SSL_CTX_set_verify(ctx, client->server_name == NULL ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    if (client->certificate != NULL) {
        SSL_CTX_use_certificate_file(ctx, client->certificate, SSL_FILETYPE_PEM);
        SSL_CTX_use_PrivateKey_file(ctx, client->key, SSL_FILETYPE_PEM);
    }
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (client->max_fragment) {
        SSL_set_tlsext_max_fragment_length(ssl, client->max_fragment);
    }
    if (client->ask_status) {
        SSL_set_tlsext_status_type(ssl, TLSEXT_STATUSTYPE_ocsp);
    }
    if (client->resume != NULL) {
        SSL_set_session(ssl, client->resume);
    }
    const char *server_name = client->server_name != NULL ? client->server_name : "localhost";
    if (server_name[0] != '\0') {
        SSL_set_tlsext_host_name(ssl, server_name);
        SSL_set1_host(ssl, server_name);
    }
    if (client->offer_alpn) {
        static const unsigned char offered[] = "\x02h2\x08http/1.1";
        SSL_set_alpn_protos(ssl, offered, sizeof(offered) - 1);
    }
    if (SSL_connect(ssl) == 1) {
        client->handshake_ok = SSL_get_verify_result(ssl) == X509_V_OK;
        client->version = SSL_version(ssl);
        const unsigned char *stapled;
        client->stapled_len = SSL_get_tlsext_status_ocsp_resp(ssl, &stapled);
        X509 *shown = SSL_get1_peer_certificate(ssl);
        if (shown != NULL) {
            X509_NAME_get_text_by_NID(X509_get_subject_name(shown), NID_commonName, client->subject,
                                      sizeof(client->subject));
            X509_free(shown);
        }
        const unsigned char *protocol;
        unsigned protocol_len;
        SSL_get0_alpn_selected(ssl, &protocol, &protocol_len);
        if (protocol_len > 0 && protocol_len < sizeof(client->protocol)) {
            memcpy(client->protocol, protocol, protocol_len);
        }
        size_t written;
        if (send_len == 0 || SSL_write_ex(ssl, client->send, send_len, &written)) {
            if (client->notify) {
                SSL_shutdown(ssl);
            }
            tls_client_read(client, ssl);
            client->ticket = SSL_SESSION_has_ticket(SSL_get_session(ssl));
            client->resumed = SSL_session_reused(ssl);
            client->kept = SSL_get1_session(ssl);
            /* Ended without close_notify, OpenSSL would mark the session not to be resumed. */
            SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN);
        }
    }
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    ERR_clear_error();
    __atomic_store_n(&client->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Runs client against the loop's server until it is done (the test fails after 10 s). */
static inline void tls_client_run(sxe_loop_t *loop, struct tls_client *client)
{
    uint64_t deadline = sxe_clock_mono_ns() + 10 * 1000000000ULL;

    assert_int_equal(pthread_create(&client->thread, NULL, tls_client_main, client), 0);
    while (!__atomic_load_n(&client->done, __ATOMIC_ACQUIRE)) {
        assert_true(sxe_clock_mono_ns() < deadline);
        assert_true(sxe_loop_run_once(loop, 10 * 1000000ULL) >= 0);
    }
    pthread_join(client->thread, NULL);
    for (int turns = 0; turns < 3; turns++) { /* the server's side of the end, if it follows */
        assert_true(sxe_loop_run_once(loop, 1000000ULL) >= 0);
    }
}

static inline void tls_client_free(struct tls_client *client)
{
    free(client->got);
    client->got = NULL;
    SSL_SESSION_free(client->kept);
    client->kept = NULL;
}

#endif
