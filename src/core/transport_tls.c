/*
 * TLS with OpenSSL 3: the transport of TLS streams (transport.h); tls_context.c makes the contexts.
 *
 * Each TLS connection has a session (SSL) whose BIO is ours: its reads call recv through the seam,
 * its writes append records to conn->out. OpenSSL reads ahead (one recv takes as much as its
 * buffer holds) and frees its buffers while a connection is idle (SSL_MODE_RELEASE_BUFFERS). The
 * loop's TLS state, made by its first TLS listener, is a slot per connection (the session, or a
 * listener's context, and the plain queue) and a staging area where queued plain bytes are
 * gathered to be sealed.
 */
#define SXE_LOG_MODULE tls_log
#include "sxe/log.h"

#include <errno.h>
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outq.h"
#include "sxe/tls.h"
#include "sys.h"
#include "tls_context.h"
#include "transport.h"

static struct sxe_log_module tls_log = SXE_LOG_MODULE_INIT(TLS);

/* The largest record's plain bytes (RFC 8446 5.1), and what sealing one may add to them. */
#define RECORD_MAX      16384
#define RECORD_OVERHEAD 256

/*
 * Records sealed at once for one send, while the socket takes what it is given and the loop has
 * buffers to spare: a megabyte leaves in 18 sends, most of four records, instead of 64 of one (5%
 * less CPU here), as much is read per pread, and conn->out holds about the default write_limit
 * (64 KB) at most. A connection whose socket was full seals one record at a time until one leaves
 * whole (a slow reader holds a record's buffers, not a batch's), and a quarter of the loop's
 * buffers are kept for others.
 */
#define BATCH_RECORDS 4

_Static_assert(SXE__TLS_RESERVE == RECORD_MAX + RECORD_OVERHEAD,
               "a write leaves room for the record sealed_most() asks for");

#define SLOT_NOTIFIED 0x01u /* close_notify is queued (or there is no session to close) */
#define SLOT_EMPTIED  0x02u /* the last recv found the socket empty, or at its end */
#define SLOT_FAILED   0x04u /* the session broke (a fatal alert): no close_notify may follow */
#define SLOT_EOF      0x08u /* recv said the peer's FIN came: OpenSSL asks (BIO_CTRL_EOF) */
#define SLOT_SEALING  0x10u /* a record of the program's bytes is being written: no limit */
#define SLOT_DONE     0x20u /* the handshake ended (a fatal alert later makes OpenSSL forget) */
#define SLOT_JUDGED   0x40u /* the server answered its ClientHello (or the session is a client's) */
#define SLOT_LARGE    0x80u /* it declared a large ClientHello: one of the loop's large_hellos */

/*
 * A handshake message that declares more than a record holds makes OpenSSL reserve and clear the
 * size it declares (a ClientHello: up to 128 KB) as soon as its header comes: a client that sends
 * 16 KB and waits holds 150 KB of the server's memory until handshake_timeout, where one that
 * declares less holds 50 KB. Browsers' hellos are 2 KB, so such hellos are rare: a loop reads at
 * most LARGE_HELLOS_MOST at once, and refuses the next until one ends. Until the server answers
 * the hello (a ServerHello that is not a HelloRetryRequest: after it, OpenSSL takes only small
 * messages), every record the client sends is followed and every handshake message header in
 * them read, however records split them and whatever other records come between.
 */
#define LARGE_HELLO       16384
#define LARGE_HELLOS_MOST 16

struct tls_slot {
    SSL *ssl;                /* a connection's session, or NULL */
    sxe_tls_t *context;      /* a listener's context, or NULL */
    struct sxe__queue plain; /* plain bytes waiting to be sealed */
    int err;                 /* the socket's error that stopped the BIO, or 0 */
    uint8_t flags;           /* SLOT_* */
    /* Following the client's records until the hello is answered (SLOT_JUDGED): */
    uint8_t record_type;      /* the record's content type (22: handshake) */
    uint8_t head_len;         /* bytes of head (a record's header, 5) read */
    uint8_t message_head_len; /* bytes of message_head (a handshake message's header, 4) read */
    uint8_t head[5];
    uint8_t message_head[4];
    bool crowded;          /* the socket was full since the last seal: a record at a time */
    uint16_t record_left;  /* bytes of the record's content still to come */
    uint32_t message_left; /* bytes of the handshake message's body still to come */
};

struct sxe__tls_loop {
    struct tls_slot *slots; /* options.connections of them, by slot index */
    char *stage;            /* queued plain bytes gathered to be sealed at once */
    size_t record_size;     /* the most plain bytes a record takes: RECORD_MAX, or buffer_size */
    size_t stage_size;      /* BATCH_RECORDS of them */
    uint32_t large_hellos;  /* ClientHellos longer than their first record, being read */
};

static struct tls_slot *slot_of(const struct sxe_conn *conn)
{
    return &conn->loop->tls->slots[sxe__conn_index(conn)];
}

/* A handshake message of the client declares size bytes: counted among the large, or refused.
 * @return 0, or -1 (err EMSGSIZE) for one more than LARGE_HELLOS_MOST. */
static int declared(struct sxe_conn *conn, struct tls_slot *slot, size_t size)
{
    struct sxe__tls_loop *tls = conn->loop->tls;

    if (size <= LARGE_HELLO || (slot->flags & SLOT_LARGE)) {
        return 0; /* small, or its connection counts already */
    }
    if (tls->large_hellos >= LARGE_HELLOS_MOST) {
        conn->loop->stats.large_hellos_refused++;
        SXE_LOG_ONCE(
            SXE_LOG_LEVEL_WARN,
            "TLS ClientHello of %zu bytes refused: %u larger than a record are being read, "
            "the most at once (said once; the loop's large_hellos_refused counts them)",
            size, tls->large_hellos);
        slot->err = EMSGSIZE;
        return -1;
    }
    tls->large_hellos++;
    slot->flags |= SLOT_LARGE;
    return 0;
}

/* Takes len of the bytes at *data (a handshake record's content) into the handshake messages'
 * heads and bodies, moving *data on. @return as declared(). */
static int follow_messages(struct sxe_conn *conn, struct tls_slot *slot, const uint8_t **data,
                           size_t len)
{
    while (len > 0) {
        if (slot->message_left > 0) {
            size_t take = len < slot->message_left ? len : slot->message_left;
            slot->message_left -= (uint32_t)take;
            *data += take;
            len -= take;
            continue;
        }
        size_t take = len < 4u - slot->message_head_len ? len : 4u - slot->message_head_len;
        memcpy(slot->message_head + slot->message_head_len, *data, take);
        slot->message_head_len = (uint8_t)(slot->message_head_len + take);
        *data += take;
        len -= take;
        if (slot->message_head_len == 4) {
            const uint8_t *head = slot->message_head;
            slot->message_left = (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
            slot->message_head_len = 0;
            if (declared(conn, slot, slot->message_left) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* A server's session follows the got bytes at data the client sent (see LARGE_HELLO): records'
 * heads, and the handshake messages in those of type 22. @return as declared(). */
static int judge_hello(struct sxe_conn *conn, struct tls_slot *slot, const char *data, size_t got)
{
    const uint8_t *at = (const uint8_t *)data, *end = at + got;

    while (at < end) {
        size_t left = (size_t)(end - at);
        if (slot->record_left == 0 && slot->head_len < 5) {
            size_t take = left < 5u - slot->head_len ? left : 5u - slot->head_len;
            memcpy(slot->head + slot->head_len, at, take);
            slot->head_len = (uint8_t)(slot->head_len + take);
            at += take;
            if (slot->head_len == 5) {
                slot->record_type = slot->head[0];
                slot->record_left = (uint16_t)(slot->head[3] << 8 | slot->head[4]);
                slot->head_len = 0;
            }
            continue;
        }
        size_t take = left < slot->record_left ? left : slot->record_left;
        slot->record_left = (uint16_t)(slot->record_left - take);
        if (slot->record_type != 22) {
            at += take; /* an alert, a ChangeCipherSpec, early data: passed over */
        } else if (follow_messages(conn, slot, &at, take) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Its large ClientHello no longer holds OpenSSL's memory: the handshake or the connection ended. */
static void large_hello_done(struct sxe_conn *conn, struct tls_slot *slot)
{
    conn->loop->tls->large_hellos--;
    slot->flags &= (uint8_t)~SLOT_LARGE;
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
    } else if (got > 0 && (slot->flags & SLOT_JUDGED) == 0 &&
               judge_hello(conn, slot, into, (size_t)got) < 0) {
        return -1;
    }
    return (int)got;
}

/* Whether a record a server writes answers the client's hello: a ServerHello whose random is not
 * SHA-256("HelloRetryRequest") (RFC 8446 4.1.3), after which another hello may come. */
static bool answers_hello(const char *record, size_t len)
{
    static const unsigned char retry[32] = {0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11,
                                            0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
                                            0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
                                            0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c};

    return len >= 5 + 4 + 2 + sizeof(retry) && record[0] == 22 && record[5] == 2 &&
           memcmp(record + 11, retry, sizeof(retry)) != 0;
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
    if ((slot->flags & SLOT_JUDGED) == 0 && answers_hello(data, (size_t)len)) {
        slot->flags |= SLOT_JUDGED; /* the client's next messages are small, or sealed */
    }
    /* Records the program did not write (the handshake's, tickets, alerts): whoever waits for the
     * queue to empty (an end of stream waiting for what was queued, say) hears when it does. */
    if ((slot->flags & SLOT_SEALING) == 0) {
        conn->flags |= SXE__CONN_NOTIFY_DRAIN;
    }
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

/* The loop's TLS state. */

/* Makes the loop's TLS state on first use. @return 0 or -ENOMEM (logged). */
static int loop_tls(sxe_loop_t *loop)
{
    if (loop->tls != NULL) {
        return 0;
    }
    pthread_once(&bio_once, bio_method_make); /* the BIO the loop's sessions read and write by */
    struct sxe__tls_loop *tls = bio_method != NULL ? calloc(1, sizeof(*tls)) : NULL;
    size_t record_size =
        loop->options.buffer_size < RECORD_MAX ? loop->options.buffer_size : RECORD_MAX;
    size_t stage_size = record_size * BATCH_RECORDS;
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
    tls->record_size = record_size;
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

int sxe__tls_prepare(sxe_loop_t *loop, sxe_tls_t *tls)
{
    if (!SXE_CHECK(!tls->client)) {
        return -EINVAL; /* a client's context has no certificate to show */
    }
    return loop_tls(loop);
}

int sxe__tls_listen(struct sxe_conn *listener, sxe_tls_t *tls)
{
    int rc = sxe__tls_prepare(listener->loop, tls);

    if (rc == 0) {
        slot_of(listener)->context = tls;
    }
    return rc;
}

sxe_tls_t *sxe__tls_listening(const struct sxe_conn *listener)
{
    return slot_of(listener)->context;
}

const struct sxe__queue *sxe__transport_queue(const struct sxe_conn *conn)
{
    return conn->io_kind == SXE__IO_TLS && conn->loop->tls != NULL ? &slot_of(conn)->plain : NULL;
}

struct sxe__queue *sxe__tls_plain(struct sxe_conn *conn)
{
    return &slot_of(conn)->plain;
}

/* ssl, reading and writing conn through our BIO. @return it, or NULL (logged; ssl freed). */
static SSL *session_bio(struct sxe_conn *conn, SSL *ssl)
{
    BIO *bio = BIO_new(bio_method);

    if (bio == NULL) {
        SSL_free(ssl); /* GCOVR_EXCL_LINE: out of memory */
        sxe__tls_log_openssl(SXE_LOG_LEVEL_ERROR,
                             "no memory for a TLS session"); /* GCOVR_EXCL_LINE */
        return NULL;                                         /* GCOVR_EXCL_LINE */
    }
    BIO_set_data(bio, conn);
    SSL_set_bio(ssl, bio, bio);
    return ssl;
}

int sxe__tls_accept(sxe_tls_t *tls, struct sxe_conn *conn)
{
    pthread_mutex_lock(&tls->lock); /* a reload may replace the context on another thread */
    SSL *ssl = SSL_new(tls->ctx);
    pthread_mutex_unlock(&tls->lock);
    ssl = ssl != NULL ? session_bio(conn, ssl) : NULL;
    if (ssl == NULL) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: out of memory */
    }
    SSL_set_accept_state(ssl);
    *slot_of(conn) = (struct tls_slot){.ssl = ssl, .plain = {SXE_NONE, SXE_NONE}};
    return 0;
}

int sxe__tls_connect(struct sxe_conn *conn, sxe_tls_t *tls, const char *server_name,
                     const struct sockaddr *server)
{
    unsigned char ip[16];
    int rc;

    if (!SXE_CHECK(tls->client && (server_name != NULL || tls->no_verify))) {
        return -EINVAL;
    }
    if ((rc = loop_tls(conn->loop)) < 0) {
        return rc; /* GCOVR_EXCL_LINE: out of memory */
    }
    SSL *ssl = SSL_new(tls->ctx);
    ssl = ssl != NULL ? session_bio(conn, ssl) : NULL;
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
    sxe__tls_sessions_offer(tls, ssl, server);
    SSL_set_connect_state(ssl);
    *slot_of(conn) =
        (struct tls_slot){.ssl = ssl, .plain = {SXE_NONE, SXE_NONE}, .flags = SLOT_JUDGED};
    return 0;
}

bool sxe_conn_alpn_is(const sxe_conn_t *conn, const char *protocol)
{
    const unsigned char *chosen = NULL;
    unsigned len = 0;

    if (!SXE_CHECK(conn != NULL && protocol != NULL)) {
        return false;
    }
    SSL *ssl = conn->io_kind == SXE__IO_TLS && conn->loop->tls != NULL ? slot_of(conn)->ssl : NULL;
    if (ssl != NULL) {
        SSL_get0_alpn_selected(ssl, &chosen, &len);
    }
    return chosen != NULL && len == strlen(protocol) && memcmp(chosen, protocol, len) == 0;
}

int sxe_conn_peer_subject(const sxe_conn_t *conn, char *subject, size_t size)
{
    if (!SXE_CHECK(conn != NULL && subject != NULL)) {
        return -EINVAL;
    }
    SSL *ssl = conn->io_kind == SXE__IO_TLS && conn->loop->tls != NULL ? slot_of(conn)->ssl : NULL;
    X509 *peer = ssl != NULL && SSL_is_init_finished(ssl) ? SSL_get0_peer_certificate(ssl) : NULL;
    BIO *bio =
        peer != NULL && SSL_get_verify_result(ssl) == X509_V_OK ? BIO_new(BIO_s_mem()) : NULL;
    char *text;
    int rc = -ENOENT;

    if (size > 0) {
        subject[0] = '\0';
    }
    if (bio != NULL &&
        X509_NAME_print_ex(bio, X509_get_subject_name(peer), 0, XN_FLAG_RFC2253) >= 0) {
        long len = BIO_get_mem_data(bio, &text);
        rc = (size_t)len < size ? (int)len : -ENOSPC;
        if (rc >= 0) {
            memcpy(subject, text, (size_t)len);
            subject[len] = '\0';
        }
    }
    BIO_free(bio);
    return rc;
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
        sxe__tls_log_openssl(SXE_LOG_LEVEL_ERROR, "TLS handshake not begun");
        return slot->err != 0 ? -slot->err : -EPROTO; /* GCOVR_EXCL_STOP */
    }
    return 0;
}

void sxe__tls_close(struct sxe_conn *conn)
{
    struct tls_slot *slot = slot_of(conn);

    sxe__outq_drop(conn, &slot->plain);
    if (slot->flags & SLOT_LARGE) {
        large_hello_done(conn, slot);
    }
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

/* Says why a session broke: a record refused after the handshake, or the handshake, and then
 * whether the peer's certificate failed our check, and why (a client's). */
static void log_failure(const struct tls_slot *slot)
{
    const char *what = slot->flags & SLOT_DONE ? "TLS record refused" : "TLS handshake failed";
    long verified = SSL_get_verify_result(slot->ssl);
    char said[192];

    if (verified != X509_V_OK) {
        snprintf(said, sizeof(said), "%s (the certificate: %s)", what,
                 X509_verify_cert_error_string(verified));
        what = said;
    }
    sxe__tls_log_openssl(SXE_LOG_LEVEL_INFO, what);
}

/* The handshake has just ended: counted, and its large ClientHello (if it was) makes room. */
static void handshake_done(struct sxe_conn *conn, struct tls_slot *slot)
{
    slot->flags |= SLOT_DONE;
    conn->loop->stats.tls_handshakes++;
    conn->loop->stats.tls_resumed += SSL_session_reused(slot->ssl) ? 1 : 0;
    if (slot->flags & SLOT_LARGE) {
        large_hello_done(conn, slot); /* OpenSSL frees its handshake's buffer at the end */
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
    if ((slot->flags & SLOT_DONE) == 0 && SSL_is_init_finished(slot->ssl)) {
        handshake_done(conn, slot);
    }
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
        log_failure(slot);
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
 * The next plain bytes to seal, no more than most: the head segment's own bytes when it holds that
 * many, or is alone; else the leading copies and references gathered into the stage, and when a
 * file range follows them (a response's head, then its file) or leads, as much of the file as the
 * stage still has room for, read after them. @return how many, with *from where they are and
 * *file_part how many of them, at their end, came from the file; or -errno: the file's read error,
 * or EIO for a file that ended before its range did.
 */
static ssize_t next_plain(struct sxe_conn *conn, struct tls_slot *slot, size_t most,
                          const char **from, size_t *file_part)
{
    sxe_loop_t *loop = conn->loop;
    struct sxe__tls_loop *tls = loop->tls;
    struct iovec iov[SXE__GATHER_MAX];
    bool before_file;
    int count = sxe__outq_gather(conn, &slot->plain, iov, &before_file);
    uint32_t at = slot->plain.head;
    size_t len = 0;

    *file_part = 0;
    if (count > 0 && (iov[0].iov_len >= most || (count == 1 && !before_file))) {
        *from = iov[0].iov_base;
        return (ssize_t)(iov[0].iov_len < most ? iov[0].iov_len : most);
    }
    *from = tls->stage;
    for (int i = 0; i < count && len < most; i++, at = loop->segments[at].next) {
        size_t part = iov[i].iov_len < most - len ? iov[i].iov_len : most - len;
        memcpy(tls->stage + len, iov[i].iov_base, part);
        len += part;
    }
    if (!before_file || len == most) {
        return (ssize_t)len;
    }
    const struct sxe__segment *segment = &loop->segments[at]; /* the file range */
    size_t want = segment->remaining < most - len ? segment->remaining : most - len;
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

/* The most bytes len plain bytes take once sealed: RECORD_OVERHEAD a record, which leaves room
 * for a KeyUpdate OpenSSL may send before them, and a peer may have asked for records of as few as
 * 512 bytes (RFC 6066's max_fragment_length). */
static size_t sealed_most(const struct tls_slot *slot, size_t len)
{
    uint8_t mode = SSL_SESSION_get_max_fragment_length(SSL_get0_session(slot->ssl));
    size_t fragment =
        mode >= TLSEXT_max_fragment_length_512 && mode <= TLSEXT_max_fragment_length_4096
            ? (size_t)256 << mode
            : RECORD_MAX;
    size_t records = (len + fragment - 1) / fragment;

    return len + (records > 0 ? records : 1) * RECORD_OVERHEAD;
}

/*
 * How many plain bytes to seal at once. A batch (up to the stage's BATCH_RECORDS records) takes
 * bytes of the plain queue's head segment only, and never its last record's worth: the seal that
 * ends a segment, and so runs its release callback, seals one record, so a callback that writes
 * finds conn->out holding that record at most, not a batch that would take its write past
 * write_limit. Small heads (a response's head, pipelined answers) are gathered into one record. A
 * batch needs a socket that was not full since the last seal, and the loop to keep a quarter of
 * its buffers free beside it.
 */
static size_t batch_size(const struct sxe_conn *conn, struct tls_slot *slot)
{
    const sxe_loop_t *loop = conn->loop;
    const struct sxe__tls_loop *tls = loop->tls;
    const struct sxe__segment *head = &loop->segments[slot->plain.head];
    size_t head_len = head->buffer != SXE_NONE ? head->end - head->start : head->remaining;
    size_t reserve = (size_t)(loop->options.buffers / 4) * loop->options.buffer_size;
    bool crowded = slot->crowded;

    slot->crowded = false; /* until a send of what this seals finds the socket full again */
    if (crowded || head_len <= 2 * tls->record_size ||
        !sxe__outq_can_append(conn, &conn->out, sealed_most(slot, tls->stage_size) + reserve)) {
        return tls->record_size;
    }
    return head_len - tls->record_size < tls->stage_size ? head_len - tls->record_size
                                                         : tls->stage_size;
}

/* Seals the next plain bytes into conn->out, one record or a few. @return as sxe__tls_seal. */
static int seal_one(struct sxe_conn *conn, struct tls_slot *slot)
{
    const char *from;
    size_t file_part;
    size_t written;

    ssize_t len = next_plain(conn, slot, batch_size(conn, slot), &from, &file_part);
    if (len < 0) {
        return (int)len;
    }
    if (!sxe__outq_can_append(conn, &conn->out, sealed_most(slot, (size_t)len))) {
        conn->loop->stats.no_buffer++;
        SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR,
                     "no free buffer to seal TLS records: closing connections (a buffer each while "
                     "a response is sent); raise %s (%u)",
                     sxe_log_setting("options.buffers"), conn->loop->options.buffers);
        return -ENOBUFS;
    }
    ERR_clear_error();
    slot->flags |= SLOT_SEALING;
    uint64_t before = conn->queued;
    int ok = SSL_write_ex(slot->ssl, from, (size_t)len, &written);
    slot->flags &= (uint8_t)~SLOT_SEALING;
    SXE_ASSERT(!ok || conn->queued - before <= sealed_most(slot, (size_t)len));
    if (!ok) {
        /* GCOVR_EXCL_START: the BIO had room (checked above), and the session is established */
        slot->flags |= SLOT_FAILED;
        sxe__tls_log_openssl(SXE_LOG_LEVEL_ERROR, "TLS record not sealed");
        return -EPROTO;
        /* GCOVR_EXCL_STOP */
    }
    /* The bytes went whole (no partial writes without SSL_MODE_ENABLE_PARTIAL_WRITE). The release
     * callbacks the plain queue's advance runs are corked: what one writes waits for the flush
     * that sealed, until this bookkeeping is done (the file range's offset moved). */
    uint16_t corked = conn->flags & SXE__CONN_CORKED;
    conn->flags |= SXE__CONN_CORKED;
    sxe__outq_advance(conn, &slot->plain, written - file_part, false);
    if (file_part > 0) {
        conn->loop->segments[slot->plain.head].offset += (off_t)file_part;
        sxe__outq_advance(conn, &slot->plain, file_part, true);
    }
    conn->flags = (uint16_t)((conn->flags & ~SXE__CONN_CORKED) | corked);
    return 1;
}

void sxe__tls_crowded(struct sxe_conn *conn)
{
    slot_of(conn)->crowded = true;
}

/*
 * A batch at a time: conn->out holds at most one seal's records, up to BATCH_RECORDS (and what the
 * peer's doing adds), so the queued bytes, which count them, say how far the program's own bytes
 * are from being sent, as on a plain stream. A small response is one record anyway (its head, and
 * its body or file, gathered into one), and a large one leaves 64 KB a send.
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
