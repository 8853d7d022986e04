/*
 * TLS peers that show each other certificates, and what a server shows changing under it:
 * client certificates asked for (required, optional), the verified subject a handler reads
 * (sxe_conn_peer_subject), a sxe client that shows one; OCSP responses stapled from a file, and
 * the files refused, or unreadable through the seam; a context's certificates replaced while
 * connections made under the old go on, and tickets sealed before still opening. On both backends.
 */
#include <errno.h>
#include <openssl/ocsp.h>
#include <string.h>

#include "loop.h"
#include "sxe/conn.h"
#include "sxe/loop.h"
#include "sys.h"
#include "sxe_test.h"
#include "tls_test.h"

static sxe_loop_t *loop;
static sxe_tls_t *server_tls, *client_tls;
static sxe_conn_t *listener;
static struct sockaddr_in address = {.sin_family = AF_INET};
static size_t subject_room = 128; /* the buffer the server reads the subject into */
static char ocsp_file[64];

/* The server: answers each read with what sxe_conn_peer_subject() says ("none" for -ENOENT, "small"
 * for -ENOSPC), '|', and the bytes. */
static size_t answer(sxe_conn_t *conn, const char *data, size_t len)
{
    char subject[128], line[160];
    int rc = sxe_conn_peer_subject(conn, subject, subject_room);
    int n = snprintf(line, sizeof(line), "%s|",
                     rc >= 0         ? subject
                     : rc == -ENOENT ? "none"
                     : rc == -ENOSPC ? "small"
                                     : "?");

    assert_true(rc < 0 || (size_t)rc == strlen(subject));
    assert_int_equal(sxe_conn_write(conn, line, (size_t)n), 0);
    assert_int_equal(sxe_conn_write(conn, data, len), 0);
    return len;
}

static const struct sxe_conn_handlers server_handlers = {.on_read = answer};

/* A loop with a listener of options (NULL: plain). */
static void listen_with(const struct sxe_tls_options *options)
{
    socklen_t address_len = sizeof(address);

    if (options != NULL) {
        assert_int_equal(sxe_tls_server_create(&server_tls, options), 0);
    }
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_conn_listen_at(loop, &listener, "127.0.0.1:0",
                                        &(struct sxe_listen_options){.tls = server_tls},
                                        &server_handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&address, &address_len), 0);
}

/* What an OpenSSL client showing certificate (NULL: none) gets back for "hi": expected (a byte,
 * and the end, read for "": the end comes first). */
static void assert_answer(const char *certificate, const char *key, const char *expected)
{
    struct tls_client client = {.port = ntohs(address.sin_port),
                                .certificate = certificate,
                                .key = key,
                                .send = "hi",
                                .expect = expected[0] != '\0' ? strlen(expected) : 1};

    tls_client_run(loop, &client);
    assert_int_equal(client.got_len, strlen(expected));
    assert_memory_equal(client.got, expected, client.got_len);
    tls_client_free(&client);
}

static int teardown(void **state)
{
    (void)state;
    if (loop != NULL) {
        assert_int_equal(sxe__conn_validate(loop), 0);
        sxe_loop_destroy(loop);
        loop = NULL;
    }
    sxe_tls_destroy(server_tls);
    sxe_tls_destroy(client_tls);
    server_tls = client_tls = NULL;
    subject_room = 128;
    sxe__sys_reset();
    return 0;
}

/* Required: the certificate of an authority in the CA file is taken and its subject read; none,
 * or another's, fails the handshake and the handler sees nothing. */
static void test_client_certificate_required(void **state)
{
    struct sxe_test_capture capture;

    (void)state;
    listen_with(&(struct sxe_tls_options){
        .certificate = tls_certificate, .key = tls_key, .client_ca = tls_certificate});
    assert_answer(tls_certificate, tls_key, "CN=localhost|hi");
    sxe_test_capture_start(&capture);
    assert_answer(NULL, NULL, "");
    assert_answer(tls_other_certificate, tls_other_key, "");
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "TLS handshake failed"));
    subject_room = 12; /* "CN=localhost" and its NUL need 13 */
    assert_answer(tls_certificate, tls_key, "small|hi");
    subject_room = 13;
    assert_answer(tls_certificate, tls_key, "CN=localhost|hi");
}

/* Optional: none is taken (no subject); one shown must still verify. */
static void test_client_certificate_optional(void **state)
{
    struct sxe_test_capture capture;

    (void)state;
    listen_with(&(struct sxe_tls_options){.certificate = tls_certificate,
                                          .key = tls_key,
                                          .client_ca = tls_certificate,
                                          .client_certificate_optional = true});
    assert_answer(NULL, NULL, "none|hi");
    assert_answer(tls_certificate, tls_key, "CN=localhost|hi");
    sxe_test_capture_start(&capture);
    assert_answer(tls_other_certificate, tls_other_key, "");
    sxe_test_capture_stop();
}

/* Not asked for: a client's certificate is neither requested nor read; a plain connection has
 * no subject. */
static void test_no_subject_unless_asked(void **state)
{
    struct tls_client client = {.plain = true, .send = "hi", .expect = 7};

    (void)state;
    listen_with(&(struct sxe_tls_options){.certificate = tls_certificate, .key = tls_key});
    assert_answer(tls_certificate, tls_key, "none|hi");
    teardown(NULL);
    listen_with(NULL);
    client.port = ntohs(address.sin_port);
    tls_client_run(loop, &client);
    assert_string_equal(client.got, "none|hi");
    tls_client_free(&client);
}

/* A sxe client that shows a certificate: the server reads the client's subject, the client the
 * server's. */
static struct {
    char input[128];
    size_t input_len;
    char server_subject[64];
    unsigned closes;
    int err;
} seen;

static void client_connect(sxe_conn_t *conn)
{
    assert_int_equal(sxe_conn_write(conn, "hello", 5), 0);
}

static size_t client_read(sxe_conn_t *conn, const char *data, size_t len)
{
    size_t take = len < sizeof(seen.input) - 1 - seen.input_len
                      ? len
                      : sizeof(seen.input) - 1 - seen.input_len;

    memcpy(seen.input + seen.input_len, data, take);
    seen.input_len += take;
    (void)!sxe_conn_peer_subject(conn, seen.server_subject, sizeof(seen.server_subject));
    return len;
}

static void client_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    (void)conn, (void)reason;
    seen.closes++;
    seen.err = err;
}

static const struct sxe_conn_handlers client_handlers = {
    .on_connect = client_connect, .on_read = client_read, .on_close = client_close};

/* Connects with client_tls and turns the loop until expected has come back (or the close). */
static sxe_conn_t *connect_until(size_t expected)
{
    sxe_conn_t *conn;
    uint64_t deadline = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;

    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&address, sizeof(address),
                                      &(struct sxe_connect_options){.tls = client_tls,
                                                                    .server_name = "localhost"},
                                      &client_handlers, NULL),
                     0);
    while (seen.input_len < expected && seen.closes == 0) {
        assert_true(sxe_clock_mono_ns() < deadline);
        assert_true(sxe_loop_run_once(loop, 10 * 1000000ULL) >= 0);
    }
    return conn;
}

static void test_sxe_client_shows_a_certificate(void **state)
{
    struct sxe_test_capture capture;

    (void)state;
    listen_with(&(struct sxe_tls_options){
        .certificate = tls_certificate, .key = tls_key, .client_ca = tls_certificate});
    assert_int_equal(
        sxe_tls_client_create(&client_tls,
                              &(struct sxe_tls_client_options){.ca_file = tls_certificate,
                                                               .certificate = tls_certificate,
                                                               .key = tls_key}),
        0);
    sxe_conn_close(connect_until(18));
    assert_string_equal(seen.input, "CN=localhost|hello");
    assert_string_equal(seen.server_subject, "CN=localhost");
    sxe_tls_destroy(client_tls);
    assert_int_equal(sxe_tls_client_create(
                         &client_tls, &(struct sxe_tls_client_options){.ca_file = tls_certificate}),
                     0);
    sxe_test_capture_start(&capture);
    connect_until(1);
    for (int turns = 0; turns < 100 && seen.closes == 0; turns++) {
        assert_true(sxe_loop_run_once(loop, 10 * 1000000ULL) >= 0);
    }
    sxe_test_capture_stop();
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.input_len, 0);
}

/* A client context's certificate that cannot be used is refused at create. */
static void test_client_certificate_errors(void **state)
{
    struct sxe_test_capture capture;
    sxe_tls_t *made = (sxe_tls_t *)&made;

    (void)state;
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_tls_client_create(
                         &made, &(struct sxe_tls_client_options){.certificate = "/nonexistent.pem",
                                                                 .key = tls_key}),
                     -ENOENT);
    assert_null(made);
    assert_int_equal(sxe_tls_client_create(
                         &made, &(struct sxe_tls_client_options){.certificate = tls_certificate,
                                                                 .key = tls_other_key}),
                     -EPROTO);
    assert_int_equal(
        sxe_tls_server_create(&made, &(struct sxe_tls_options){.certificate = tls_certificate,
                                                               .key = tls_key,
                                                               .client_ca = "/nonexistent-ca.pem"}),
        -ENOENT);
    assert_int_equal(
        sxe_tls_server_create(&made, &(struct sxe_tls_options){.certificate = tls_certificate,
                                                               .key = tls_key,
                                                               .client_ca = tls_key}),
        -EPROTO);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "certificate /nonexistent.pem"));
    assert_non_null(strstr(capture.text, "client CA file /nonexistent-ca.pem"));
    assert_non_null(strstr(capture.text, "no PEM certificate"));
}

/* How ocsp_write() makes a response beyond its arguments (all 0: the usual). */
static struct {
    long this_update;  /* seconds from now */
    bool other_signer; /* signed by the other certificate's key, not the issuer's */
    size_t trailing;   /* bytes of junk after it */
} ocsp_knobs;

/* Reads a PEM certificate or key. */
static X509 *pem_certificate(const char *path)
{
    FILE *in = fopen(path, "r");
    X509 *cert = PEM_read_X509(in, NULL, NULL, NULL);

    fclose(in);
    return cert;
}

static EVP_PKEY *pem_key(const char *path)
{
    FILE *in = fopen(path, "r");
    EVP_PKEY *key = PEM_read_PrivateKey(in, NULL, NULL, NULL);

    fclose(in);
    return key;
}

/* Writes to ocsp_file an OCSP response of status: a successful one says cert_status for the
 * certificate id names, signed by signer's key, next update next_update seconds on (none if 0),
 * as ocsp_knobs say (then reset). */
static void ocsp_response_write(int status, int cert_status, OCSP_CERTID *id, X509 *signer,
                                EVP_PKEY *key, long next_update)
{
    OCSP_BASICRESP *basic = OCSP_BASICRESP_new();
    ASN1_TIME *now = X509_gmtime_adj(NULL, ocsp_knobs.this_update);
    ASN1_TIME *next = X509_gmtime_adj(NULL, next_update);

    assert_non_null(OCSP_basic_add1_status(basic, id, cert_status, 0, now, now,
                                           next_update != 0 ? next : NULL));
    assert_true(OCSP_basic_sign(basic, signer, key, EVP_sha256(), NULL, 0));
    OCSP_RESPONSE *response =
        OCSP_response_create(status, status == OCSP_RESPONSE_STATUS_SUCCESSFUL ? basic : NULL);
    unsigned char *der = NULL;
    int len = i2d_OCSP_RESPONSE(response, &der);
    FILE *out = fopen(ocsp_file, "w");
    assert_true(len > 0 && fwrite(der, 1, (size_t)len, out) == (size_t)len);
    for (size_t i = 0; i < ocsp_knobs.trailing; i++) {
        fputc('x', out);
    }
    fclose(out);
    OPENSSL_free(der);
    OCSP_RESPONSE_free(response);
    OCSP_BASICRESP_free(basic);
    ASN1_TIME_free(now);
    ASN1_TIME_free(next);
    memset(&ocsp_knobs, 0, sizeof(ocsp_knobs));
}

/* Writes an OCSP response of status (a successful one saying cert_status for a certificate of
 * serial serial issued by the localhost certificate, signed by its key, next update next_update
 * seconds on, none if 0) to ocsp_file, as ocsp_knobs say. */
static void ocsp_write(int status, int cert_status, long serial, long next_update)
{
    X509 *cert = pem_certificate(tls_certificate);
    X509 *signer =
        pem_certificate(ocsp_knobs.other_signer ? tls_other_certificate : tls_certificate);
    EVP_PKEY *key = pem_key(ocsp_knobs.other_signer ? tls_other_key : tls_key);
    ASN1_INTEGER *number = ASN1_INTEGER_new();

    ASN1_INTEGER_set(number, serial);
    OCSP_CERTID *id = OCSP_cert_id_new(EVP_sha1(), X509_get_subject_name(cert),
                                       X509_get0_pubkey_bitstr(cert), number);
    ocsp_response_write(status, cert_status, id, signer, key, next_update);
    OCSP_CERTID_free(id);
    ASN1_INTEGER_free(number);
    EVP_PKEY_free(key);
    X509_free(signer);
    X509_free(cert);
}

static long file_size(const char *path)
{
    FILE *file = fopen(path, "r");

    assert_non_null(file);
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fclose(file);
    return size;
}

/* What a client that asks for the status is stapled: @return its length, or -1 for none. */
static long stapled(bool ask)
{
    struct tls_client client = {.port = ntohs(address.sin_port), .ask_status = ask};

    tls_client_run(loop, &client);
    assert_true(client.handshake_ok);
    tls_client_free(&client);
    return client.stapled_len;
}

static void test_ocsp_stapled(void **state)
{
    struct sxe_test_capture capture;

    (void)state;
    ocsp_write(OCSP_RESPONSE_STATUS_SUCCESSFUL, V_OCSP_CERTSTATUS_GOOD, 1, 3600);
    listen_with(&(struct sxe_tls_options){
        .certificate = tls_certificate, .key = tls_key, .ocsp_response = ocsp_file});
    assert_int_equal(stapled(true), file_size(ocsp_file));
    assert_int_equal(stapled(false), -1);
    teardown(NULL);
    ocsp_write(OCSP_RESPONSE_STATUS_SUCCESSFUL, V_OCSP_CERTSTATUS_GOOD, 1, -60); /* stale */
    sxe_test_capture_start(&capture);
    listen_with(&(struct sxe_tls_options){
        .certificate = tls_certificate, .key = tls_key, .ocsp_response = ocsp_file});
    assert_int_equal(stapled(true), -1);
    assert_int_equal(stapled(true), -1);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "past its next update, so not stapled"));
    const char *said = strstr(capture.text, "no longer stapled"); /* once for this response */
    assert_non_null(said);
    assert_null(strstr(said + 1, "no longer stapled"));
}

/* A response that is not for this certificate, says it is revoked, or is no response: refused. */
static void test_ocsp_refused(void **state)
{
    static const struct {
        int status, cert_status;
        long serial;
        int rc;
        const char *said;
        long this_update;
        bool other_signer;
        size_t trailing;
    } cases[] = {
        {OCSP_RESPONSE_STATUS_SUCCESSFUL, V_OCSP_CERTSTATUS_GOOD, 2, -EPROTO, "not a response for",
         0, false, 0},
        {OCSP_RESPONSE_STATUS_SUCCESSFUL, V_OCSP_CERTSTATUS_REVOKED, 1, -EPROTO, "revoked", 0,
         false, 0},
        {OCSP_RESPONSE_STATUS_SUCCESSFUL, V_OCSP_CERTSTATUS_UNKNOWN, 1, -EPROTO, "does not know", 0,
         false, 0},
        {OCSP_RESPONSE_STATUS_TRYLATER, 0, 1, -EPROTO, "not a successful OCSP response", 0, false,
         0},
        {OCSP_RESPONSE_STATUS_SUCCESSFUL, V_OCSP_CERTSTATUS_GOOD, 1, -EPROTO, "in the future", 3600,
         false, 0},
        {OCSP_RESPONSE_STATUS_SUCCESSFUL, V_OCSP_CERTSTATUS_GOOD, 1, -EPROTO, "signature", 0, true,
         0},
        {OCSP_RESPONSE_STATUS_SUCCESSFUL, V_OCSP_CERTSTATUS_GOOD, 1, -EPROTO, "bytes after", 0,
         false, 100},
    };
    struct sxe_test_capture capture;
    struct sxe_tls_options options = {
        .certificate = tls_certificate, .key = tls_key, .ocsp_response = ocsp_file};

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ocsp_knobs.this_update = cases[i].this_update;
        ocsp_knobs.other_signer = cases[i].other_signer;
        ocsp_knobs.trailing = cases[i].trailing;
        ocsp_write(cases[i].status, cases[i].cert_status, cases[i].serial, 7200);
        sxe_test_capture_start(&capture);
        assert_int_equal(sxe_tls_server_create(&server_tls, &options), cases[i].rc);
        sxe_test_capture_stop();
        assert_non_null(strstr(capture.text, cases[i].said));
        assert_null(server_tls);
    }
    FILE *out = fopen(ocsp_file, "w");
    fputs("not DER", out);
    fclose(out);
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_tls_server_create(&server_tls, &options), -EPROTO);
    assert_int_equal(truncate(ocsp_file, 64 * 1024 + 1), 0);
    assert_int_equal(sxe_tls_server_create(&server_tls, &options), -EFBIG);
    options.ocsp_response = "/nonexistent.der";
    assert_int_equal(sxe_tls_server_create(&server_tls, &options), -ENOENT);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "not a DER OCSP response"));
    assert_non_null(strstr(capture.text, "larger than 64 KB"));
    assert_non_null(strstr(capture.text, "/nonexistent.der"));
}

/* A certificate for leaf.test of key, serial 7, issued by issuer (signed with issuer_key). */
static X509 *leaf_certificate(EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key)
{
    X509 *cert = X509_new();

    ASN1_INTEGER_set(X509_get_serialNumber(cert), 7);
    X509_gmtime_adj(X509_getm_notBefore(cert), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                               (const unsigned char *)"leaf.test", -1, -1, 0);
    X509_set_issuer_name(cert, X509_get_subject_name(issuer));
    assert_true(X509_sign(cert, issuer_key, EVP_sha256()) > 0);
    return cert;
}

/*
 * A certificate issued by a CA its chain carries (the usual case: a site's certificate, then its
 * intermediate): a response is matched by that issuer's name and key, not the first certificate
 * of the chain's (another comes before it here), and its signature checked against that issuer's.
 */
static void test_ocsp_chained_certificate(void **state)
{
    char chain_path[] = "/tmp/sxe-tls-chain-XXXXXX", key_path[] = "/tmp/sxe-tls-leaf-XXXXXX";
    EVP_PKEY *key = tls_test_key(key_path);
    X509 *ca = pem_certificate(tls_other_certificate), *other = pem_certificate(tls_certificate);
    EVP_PKEY *ca_key = pem_key(tls_other_key), *other_key = pem_key(tls_key);
    X509 *leaf = leaf_certificate(key, ca, ca_key);
    FILE *out = fdopen(mkstemp(chain_path), "w");
    assert_true(PEM_write_X509(out, leaf) && PEM_write_X509(out, other) && PEM_write_X509(out, ca));
    fclose(out);
    struct sxe_tls_options options = {
        .certificate = chain_path, .key = key_path, .ocsp_response = ocsp_file};
    OCSP_CERTID *right = OCSP_cert_to_id(EVP_sha1(), leaf, ca);
    OCSP_CERTID *wrong = OCSP_cert_to_id(EVP_sha1(), leaf, other); /* the same serial */
    struct sxe_test_capture capture;

    (void)state;
    ocsp_response_write(OCSP_RESPONSE_STATUS_SUCCESSFUL, V_OCSP_CERTSTATUS_GOOD, right, ca, ca_key,
                        3600);
    assert_int_equal(sxe_tls_server_create(&server_tls, &options), 0);
    sxe_tls_destroy(server_tls);
    server_tls = NULL;
    sxe_test_capture_start(&capture);
    ocsp_response_write(OCSP_RESPONSE_STATUS_SUCCESSFUL, V_OCSP_CERTSTATUS_GOOD, wrong, ca, ca_key,
                        3600);
    assert_int_equal(sxe_tls_server_create(&server_tls, &options), -EPROTO);
    ocsp_response_write(OCSP_RESPONSE_STATUS_SUCCESSFUL, V_OCSP_CERTSTATUS_GOOD, right, other,
                        other_key, 3600);
    assert_int_equal(sxe_tls_server_create(&server_tls, &options), -EPROTO);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "not a response for this certificate"));
    assert_non_null(strstr(capture.text, "signature does not verify"));
    assert_null(strstr(capture.text, "issuer is not in its chain"));
    OCSP_CERTID_free(right);
    OCSP_CERTID_free(wrong);
    X509_free(leaf);
    X509_free(other);
    X509_free(ca);
    EVP_PKEY_free(other_key);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
    unlink(chain_path);
    unlink(key_path);
}

/*
 * The client CA file and the OCSP response are read through the seam: a read interrupted (EINTR)
 * is read again, and the server is made; one failing with an errno below EINTR's (EPERM) or above
 * it (EIO) is not read again: the creation fails with that error, and says which file.
 */
static void test_file_read_faults(void **state)
{
    static const int errors[] = {EINTR, EPERM, EIO};
    const struct {
        struct sxe_tls_options options;
        const char *said;
    } files[] = {
        {{.certificate = tls_certificate, .key = tls_key, .client_ca = tls_certificate},
         "TLS client CA file"},
        {{.certificate = tls_certificate, .key = tls_key, .ocsp_response = ocsp_file},
         "TLS OCSP response"},
    };
    struct sxe_test_capture capture;
    char expected[256];

    (void)state;
    ocsp_write(OCSP_RESPONSE_STATUS_SUCCESSFUL, V_OCSP_CERTSTATUS_GOOD, 1, 3600);
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        const char *path = f == 0 ? tls_certificate : ocsp_file;
        for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
            sxe__sys_fail(SXE_SYS_read, 1, 1, errors[i]);
            sxe_test_capture_start(&capture);
            int rc = sxe_tls_server_create(&server_tls, &files[f].options);
            sxe_test_capture_stop();
            if (errors[i] == EINTR) {
                assert_int_equal(rc, 0);
                assert_int_equal(sxe__sys_calls(SXE_SYS_read), 3); /* EINTR, the file, its end */
                sxe_tls_destroy(server_tls);
                server_tls = NULL;
                continue;
            }
            assert_int_equal(rc, -errors[i]);
            assert_int_equal(sxe__sys_calls(SXE_SYS_read), 1);
            snprintf(expected, sizeof(expected), "%s %s: %s", files[f].said, path,
                     sxe_strerror(errors[i]));
            assert_non_null(strstr(capture.text, expected));
        }
    }
}

/* What an OpenSSL client asking for name (NULL: none) is shown, and whether it resumed. */
static void shown(const char *name, SSL_SESSION *resume, const char *expected, bool resumed)
{
    struct tls_client client = {.port = ntohs(address.sin_port),
                                .server_name = name != NULL ? name : "",
                                .resume = resume,
                                .send = "x",
                                .expect = 6};

    tls_client_run(loop, &client);
    assert_string_equal(client.subject, expected);
    assert_int_equal(client.resumed, resumed);
    tls_client_free(&client);
}

/* Replaced: new handshakes show the new certificates (the default, and a name's), a connection
 * made before goes on, a ticket sealed before still opens. */
static void test_replace(void **state)
{
    struct tls_client first = {.port = 0, .server_name = "", .send = "x", .expect = 6};
    sxe_tls_t *fresh;

    (void)state;
    listen_with(&(struct sxe_tls_options){.certificate = tls_certificate, .key = tls_key});
    assert_int_equal(
        sxe_tls_client_create(&client_tls, &(struct sxe_tls_client_options){.no_verify = true}), 0);
    sxe_conn_t *before = connect_until(10);
    assert_string_equal(seen.input, "none|hello");
    first.port = ntohs(address.sin_port);
    tls_client_run(loop, &first);
    assert_string_equal(first.subject, "localhost");

    assert_int_equal(sxe_tls_server_create(
                         &fresh, &(struct sxe_tls_options){.certificate = tls_other_certificate,
                                                           .key = tls_other_key}),
                     0);
    assert_int_equal(sxe_tls_server_add_name(
                         fresh, "localhost",
                         &(struct sxe_tls_options){.certificate = tls_certificate, .key = tls_key}),
                     0);
    assert_int_equal(sxe_tls_server_replace(server_tls, fresh), 0);
    shown(NULL, NULL, "other.test", false);
    shown("localhost", NULL, "localhost", false);
    shown(NULL, first.kept, "localhost", true); /* a resumed session keeps what it was made with */

    assert_int_equal(sxe_conn_write(before, "again", 5), 0);
    uint64_t deadline = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;
    while (seen.input_len < 20 && seen.closes == 0) {
        assert_true(sxe_clock_mono_ns() < deadline);
        assert_true(sxe_loop_run_once(loop, 10 * 1000000ULL) >= 0);
    }
    assert_string_equal(seen.input, "none|hellonone|again");
    sxe_conn_close(before);
    tls_client_free(&first);
}

static void replace_itself(void *arg)
{
    (void)arg;
    assert_int_equal(
        sxe_tls_server_create(
            &server_tls, &(struct sxe_tls_options){.certificate = tls_certificate, .key = tls_key}),
        0);
    assert_int_equal(sxe_tls_server_replace(server_tls, server_tls), -EINVAL);
}

static void replace_with_a_client_context(void *arg)
{
    (void)arg;
    replace_itself(NULL);
    teardown(NULL);
    assert_int_equal(
        sxe_tls_server_create(
            &server_tls, &(struct sxe_tls_options){.certificate = tls_certificate, .key = tls_key}),
        0);
    assert_int_equal(sxe_tls_client_create(&client_tls, NULL), 0);
    assert_int_equal(sxe_tls_server_replace(server_tls, client_tls), -EINVAL);
}

static void test_replace_invalid_use(void **state)
{
    static void (*const uses[])(void *) = {replace_itself, replace_with_a_client_context};

    (void)state;
    for (size_t i = 0; i < sizeof(uses) / sizeof(uses[0]); i++) {
#ifdef SXE_DEBUG
        const char *const expected[] = {"assertion failed: ", "tls != fresh", NULL};
        sxe_test_expect_abort(uses[i], NULL, expected);
#else
        uses[i](NULL);
        teardown(NULL);
#endif
    }
}

/* A listener on loop of its own context (for sessions), returning its port. */
static int listen_also(sxe_tls_t **tls, const struct sxe_tls_options *options)
{
    sxe_conn_t *also;
    struct sockaddr_in bound;
    socklen_t bound_len = sizeof(bound);

    assert_int_equal(sxe_tls_server_create(tls, options), 0);
    assert_int_equal(sxe_conn_listen_at(loop, &also, "127.0.0.1:0",
                                        &(struct sxe_listen_options){.tls = *tls}, &server_handlers,
                                        NULL),
                     0);
    assert_int_equal(sxe_conn_local(also, (struct sockaddr *)&bound, &bound_len), 0);
    return ntohs(bound.sin_port);
}

/* A client that shows the localhost certificate to port, offering resume: whether it was
 * answered, and whether it resumed; the session it had into *kept (if not NULL). */
static bool resumes(int port, SSL_SESSION *resume, SSL_SESSION **kept, bool *answered)
{
    struct tls_client client = {.port = port,
                                .certificate = tls_certificate,
                                .key = tls_key,
                                .resume = resume,
                                .send = "hi",
                                .expect = 1};

    tls_client_run(loop, &client);
    *answered = client.got_len == 1;
    if (kept != NULL) {
        *kept = client.kept;
        client.kept = NULL;
    }
    tls_client_free(&client);
    return client.resumed;
}

/* A session resumes only under the client-certificate check it was made under: not where one is
 * required if it was made where none was asked (the ticket keys shared by a file), nor after a
 * reload changed the authorities; nor, made with a certificate that has expired since. */
static void test_sessions_bound_to_client_checks(void **state)
{
    char keys[] = "/tmp/sxe-tls-peers-keys-XXXXXX";
    int fd = mkstemp(keys);
    sxe_tls_t *open_tls, *fresh;
    SSL_SESSION *anonymous, *shown;
    bool answered;

    (void)state;
    assert_true(fd >= 0 && write(fd, "0123456789abcdef0123456789abcdef0123456789", 42) == 42);
    close(fd);
    listen_with(&(struct sxe_tls_options){.certificate = tls_certificate,
                                          .key = tls_key,
                                          .client_ca = tls_certificate,
                                          .ticket_key_file = keys});
    int required = ntohs(address.sin_port);
    int open_port = listen_also(&open_tls, &(struct sxe_tls_options){.certificate = tls_certificate,
                                                                     .key = tls_key,
                                                                     .ticket_key_file = keys});
    assert_false(resumes(open_port, NULL, &anonymous, &answered));
    assert_true(resumes(open_port, anonymous, NULL, &answered));   /* the keys are shared */
    assert_false(resumes(required, anonymous, &shown, &answered)); /* but not the check */
    assert_true(answered);
    assert_true(resumes(required, shown, NULL, &answered));
    assert_false(resumes(open_port, shown, NULL, &answered));

    assert_int_equal(
        sxe_tls_server_create(&fresh, &(struct sxe_tls_options){.certificate = tls_certificate,
                                                                .key = tls_key,
                                                                .client_ca = tls_other_certificate,
                                                                .ticket_key_file = keys}),
        0);
    assert_int_equal(sxe_tls_server_replace(server_tls, fresh), 0);
    struct sxe_test_capture capture;
    sxe_test_capture_start(&capture);
    assert_false(resumes(required, shown, NULL, &answered)); /* another authority now */
    sxe_test_capture_stop();
    assert_false(answered);
    SSL_SESSION_free(anonymous);
    SSL_SESSION_free(shown);
    sxe_tls_destroy(open_tls);
    unlink(keys);
}

/* The client's certificate expires (an hour after it was made) while its session lives (tickets
 * of 10 h periods): on a faked wall clock, the session resumes before, not after. */
static void test_sessions_end_with_the_client_certificate(void **state)
{
    const uint64_t now = sxe_clock_wall_ns();
    SSL_SESSION *session;
    bool answered;

    (void)state;
    listen_with(&(struct sxe_tls_options){.certificate = tls_certificate,
                                          .key = tls_key,
                                          .client_ca = tls_certificate,
                                          .ticket_period = 36000 * SXE_NS_PER_SEC});
    int port = ntohs(address.sin_port);
    assert_false(resumes(port, NULL, &session, &answered));
    sxe__sys_clock_fake(sxe_clock_mono_ns(), now + 1800 * SXE_NS_PER_SEC);
    assert_true(resumes(port, session, NULL, &answered));
    sxe__sys_clock_fake(sxe_clock_mono_ns(), now + 7200 * SXE_NS_PER_SEC);
    assert_false(resumes(port, session, NULL, &answered));
    sxe__sys_reset();
    SSL_SESSION_free(session);
}

static int group_setup(void **state)
{
    int fd;

    snprintf(ocsp_file, sizeof(ocsp_file), "/tmp/sxe-tls-ocsp-XXXXXX");
    assert_true((fd = mkstemp(ocsp_file)) >= 0);
    close(fd);
    return tls_test_group_setup(state);
}

static int group_teardown(void **state)
{
    unlink(ocsp_file);
    return tls_test_group_teardown(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_client_certificate_required, teardown),
        cmocka_unit_test_teardown(test_client_certificate_optional, teardown),
        cmocka_unit_test_teardown(test_no_subject_unless_asked, teardown),
        cmocka_unit_test_teardown(test_sxe_client_shows_a_certificate, teardown),
        cmocka_unit_test(test_client_certificate_errors),
        cmocka_unit_test_teardown(test_ocsp_stapled, teardown),
        cmocka_unit_test_teardown(test_ocsp_refused, teardown),
        cmocka_unit_test_teardown(test_ocsp_chained_certificate, teardown),
        cmocka_unit_test_teardown(test_file_read_faults, teardown),
        cmocka_unit_test_teardown(test_replace, teardown),
        cmocka_unit_test_teardown(test_sessions_bound_to_client_checks, teardown),
        cmocka_unit_test_teardown(test_sessions_end_with_the_client_certificate, teardown),
        cmocka_unit_test_teardown(test_replace_invalid_use, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
