/*
 * TLS streams (transport_tls.c) against OpenSSL's own client, verifying the certificate: the
 * handshake, echo, large bodies by reference and files sealed as the socket drains, close_notify
 * both ways, protocol versions and ALPN, hostile and broken peers, and faults through the seam.
 * Harness: tls_test.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop.h"
#include "sxe/conn.h"
#include "sxe/loop.h"
#include "sxe/tls.h"
#include "sxe_test.h"
#include "sys.h"
#include "tls_test.h"

#define BIG (1024 * 1024)

static sxe_loop_t *loop;
static sxe_tls_t *tls;
static sxe_conn_t *listener;
static int port;
static char *big; /* BIG bytes of a pattern, sent by reference */
static char file_path[64];
static int file_fd = -1; /* the same pattern's first FILE_LEN bytes */
#define FILE_LEN   (300 * 1000 + 7)
#define SMALL_FILE 4096

static struct {
    unsigned connects, closes, eofs, timeouts;
    enum sxe_close_reason reason;
    int err;
    char input[4096];
    size_t input_len;
    const char *greeting; /* written by on_connect, before the handshake */
    int sendfile_rc;
    unsigned released;
    bool shut_at_connect; /* on_connect shuts the connection down, before its handshake */
    size_t reads[64];     /* the sizes the file's preads asked for (reads_counted of them) */
    unsigned reads_counted;
} seen;

/* send and sendmsg through the seam: the first send of more than a record finds the socket full. */
static bool full_once;

/* Whether a send of len bytes is refused as full (EAGAIN): the first longer than a record. */
static bool refused_as_full(size_t len)
{
    if (len > 16384 + 256 && !full_once) {
        full_once = true;
        errno = EAGAIN;
        return true;
    }
    return false;
}

static ssize_t send_full_once(int fd, const void *data, size_t len, int flags)
{
    return refused_as_full(len) ? -1 : send(fd, data, len, flags);
}

static ssize_t sendmsg_full_once(int fd, const struct msghdr *message, int flags)
{
    size_t len = 0;

    for (size_t i = 0; i < message->msg_iovlen; i++) {
        len += message->msg_iov[i].iov_len;
    }
    return refused_as_full(len) ? -1 : sendmsg(fd, message, flags);
}

/* pread through the seam, its sizes recorded. */
static ssize_t pread_recorded(int fd, void *into, size_t len, off_t offset)
{
    if (seen.reads_counted < sizeof(seen.reads) / sizeof(seen.reads[0])) {
        seen.reads[seen.reads_counted] = len;
    }
    seen.reads_counted++;
    return pread(fd, into, len, offset);
}

/* Releases the body of "release": the next bytes follow from here, as a stream's would. */
static void write_more(void *arg)
{
    sxe_conn_t *conn = arg;

    seen.released++;
    assert_int_equal(sxe_conn_write(conn, "done\n", 5), 0);
}

static void on_connect(sxe_conn_t *conn)
{
    seen.connects++;
    if (seen.shut_at_connect) {
        assert_int_equal(sxe_conn_shutdown(conn), 0); /* no session yet: no close_notify */
    }
    if (seen.greeting != NULL) {
        assert_int_equal(sxe_conn_write(conn, seen.greeting, strlen(seen.greeting)), 0);
    }
}

/* Commands, one a line: "big" (1 MB by reference, then the file), "bye" (answers, closes when
 * sent), "shut" (answers, shuts down); anything else is echoed. */
static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    size_t room = sizeof(seen.input) - seen.input_len;
    memcpy(seen.input + seen.input_len, data, len < room ? len : room);
    seen.input_len += len < room ? len : room;
    if (len == 4 && memcmp(data, "big\n", 4) == 0) {
        assert_int_equal(sxe_conn_write_ref(conn, big, BIG, NULL, NULL), 0);
        seen.sendfile_rc = sxe_conn_sendfile(conn, file_fd, 0, FILE_LEN);
    } else if (len == 4 && memcmp(data, "bye\n", 4) == 0) {
        assert_int_equal(sxe_conn_write(conn, "bye\n", 4), 0);
        assert_int_equal(sxe_conn_close_when_sent(conn), 0);
    } else if (len == 5 && memcmp(data, "shut\n", 5) == 0) {
        assert_int_equal(sxe_conn_write(conn, "shut\n", 5), 0);
        assert_int_equal(sxe_conn_shutdown(conn), 0);
        assert_int_equal(sxe_conn_write(conn, "more", 4), -EPIPE); /* close_notify is queued */
    } else if (len == 5 && memcmp(data, "file\n", 5) == 0) {       /* a head, then its file */
        sxe__sys_count(SXE_SYS_send);
        sxe__sys_count(SXE_SYS_sendmsg);
        assert_int_equal(sxe_conn_write(conn, "head\n", 5), 0);
        seen.sendfile_rc = sxe_conn_sendfile(conn, file_fd, 0, SMALL_FILE);
    } else if (len == 8 && memcmp(data, "release\n", 8) == 0) {
        assert_int_equal(sxe_conn_write_ref(conn, big, BIG, write_more, conn), 0);
    } else if (len == 8 && memcmp(data, "reffile\n", 8) == 0) { /* one record holds both */
        assert_int_equal(sxe_conn_write_ref(conn, big, 2000, write_more, conn), 0);
        seen.sendfile_rc = sxe_conn_sendfile(conn, file_fd, 0, SMALL_FILE);
    } else if (len == 5 && (memcmp(data, "long\n", 5) == 0 || memcmp(data, "full\n", 5) == 0)) {
        sxe__sys.pread = pread_recorded; /* "full": the first batch's send finds the socket full */
        if (data[1] == 'u') {
            sxe__sys.send = send_full_once;
            sxe__sys.sendmsg = sendmsg_full_once;
            full_once = false;
        }
        seen.sendfile_rc = sxe_conn_sendfile(conn, file_fd, 0, FILE_LEN);
    } else if (len == 3 && memcmp(data, "fd\n", 3) == 0) {
        assert_int_equal(sxe_conn_send_fd(conn, 0), -ENOTSUP); /* a byte would go unsealed */
        assert_int_equal(sxe_conn_hand_off(conn, conn), -ENOTSUP);
        assert_int_equal(sxe_conn_write(conn, data, len), 0);
    } else {
        assert_int_equal(sxe_conn_write(conn, data, len), 0);
    }
    return len;
}

static void on_eof(sxe_conn_t *conn)
{
    seen.eofs++;
    sxe_conn_close(conn);
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    (void)conn;
    seen.closes++;
    seen.reason = reason;
    seen.err = err;
}

static void on_timeout(sxe_conn_t *conn)
{
    (void)conn;
    seen.timeouts++;
}

static const struct sxe_conn_handlers handlers = {.on_connect = on_connect,
                                                  .on_read = on_read,
                                                  .on_eof = on_eof,
                                                  .on_close = on_close,
                                                  .on_timeout = on_timeout};

static int group_setup(void **state)
{
    (void)state;
    tls_test_files_make();
    big = malloc(BIG);
    assert_non_null(big);
    for (size_t i = 0; i < BIG; i++) {
        big[i] = (char)('a' + (i * 7 + i / 251) % 26);
    }
    strcpy(file_path, "/tmp/sxe-tls-file-XXXXXX");
    file_fd = mkstemp(file_path);
    assert_true(file_fd >= 0);
    assert_int_equal(write(file_fd, big, FILE_LEN), FILE_LEN);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tls_test_files_remove();
    close(file_fd);
    unlink(file_path);
    free(big);
    return 0;
}

/* A loop with a listener of the context tls on a loopback port. */
static void start_with_tls(const struct sxe_loop_options *options)
{
    struct sockaddr_in address = {.sin_family = AF_INET};
    socklen_t address_len = sizeof(address);

    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, options), 0);
    assert_int_equal(sxe_conn_listen_at(loop, &listener, "127.0.0.1:0",
                                        &(struct sxe_listen_options){.tls = tls}, &handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&address, &address_len), 0);
    port = ntohs(address.sin_port);
}

/* A loop with a TLS listener of the localhost certificate on a loopback port. */
static void start(const struct sxe_loop_options *options)
{
    struct sxe_tls_options tls_options = {.certificate = tls_certificate, .key = tls_key};

    assert_int_equal(sxe_tls_server_create(&tls, &tls_options), 0);
    start_with_tls(options);
}

/* Starts the server (start()) and runs client against it to its end. */
static void serve(struct tls_client *client, const struct sxe_loop_options *options)
{
    start(options);
    client->port = port;
    tls_client_run(loop, client);
}

static int teardown(void **state)
{
    (void)state;
    if (loop != NULL) {
        assert_int_equal(sxe__conn_validate(loop), 0);
        sxe_loop_destroy(loop);
        loop = NULL;
    }
    sxe_tls_destroy(tls);
    tls = NULL;
    sxe__sys_reset();
    return 0;
}

/* The handshake (TLS 1.3, the certificate verified), then bytes both ways, then the client's
 * close_notify, right behind its bytes, with its socket left open: the server hears the end of the
 * stream (and closes). */
static void test_echo_over_tls_1_3(void **state)
{
    struct tls_client client = {.send = "hello\n", .expect = 100, .notify = true};

    (void)state;
    serve(&client, NULL);
    assert_true(client.handshake_ok);
    assert_int_equal(client.version, TLS1_3_VERSION);
    assert_true(client.ended); /* the server closed: it heard the end */
    assert_int_equal(client.got_len, 6);
    assert_memory_equal(client.got, "hello\n", 6);
    assert_string_equal(client.protocol, ""); /* none offered, none named */
    assert_int_equal(seen.connects, 1);
    assert_int_equal(seen.eofs, 1); /* its close_notify is the end of the stream */
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.reason, SXE_CLOSE_LOCAL);
    tls_client_free(&client);
}

/* A certificate per server name (SNI): exact names in any case, a wildcard for one label, and the
 * default for no name or another; each connection echoes as usual. */
static void test_server_names(void **state)
{
    static const struct {
        const char *asked, *shown;
        bool verified;
    } cases[] = {{NULL, "localhost", true},
                 {"other.test", "other.test", true},
                 {"OTHER.Test", "other.test", true},
                 {"a.wild.test", "other.test", true},
                 {"b.a.wild.test", "localhost", false},
                 {"wild.test", "localhost", false},
                 {"", "localhost", true},
                 {"nowhere.test", "localhost", false},
                 /* The same name, absolute; OpenSSL's client check is what fails on the dot. */
                 {"other.test.", "other.test", false}};
    struct sxe_tls_options other = {.certificate = tls_other_certificate, .key = tls_other_key};

    (void)state;
    assert_int_equal(
        sxe_tls_server_create(
            &tls, &(struct sxe_tls_options){.certificate = tls_certificate, .key = tls_key}),
        0);
    assert_int_equal(sxe_tls_server_add_name(tls, "other.test", &other), 0);
    assert_int_equal(sxe_tls_server_add_name(tls, "*.wild.test", &other), 0);
    start_with_tls(NULL);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct tls_client client = {
            .port = port, .server_name = cases[i].asked, .send = "hi\n", .expect = 3};
        tls_client_run(loop, &client);
        assert_string_equal(client.subject, cases[i].shown);
        assert_int_equal(client.handshake_ok, cases[i].verified);
        assert_int_equal(client.got_len, 3);
        assert_true(client.ticket); /* resumption is the default context's, whichever is shown */
        tls_client_free(&client);
    }
}

/* no_tickets: no session ticket is given, so every connection makes a full handshake. */
static void test_no_tickets(void **state)
{
    struct tls_client client = {.send = "hi\n", .expect = 3};

    (void)state;
    assert_int_equal(
        sxe_tls_server_create(&tls, &(struct sxe_tls_options){.certificate = tls_certificate,
                                                              .key = tls_key,
                                                              .no_tickets = true}),
        0);
    start_with_tls(NULL);
    client.port = port;
    tls_client_run(loop, &client);
    assert_true(client.handshake_ok);
    assert_int_equal(client.got_len, 3);
    assert_false(client.ticket);
    tls_client_free(&client);
}

/* A peer that ends with its FIN and no close_notify (as most do) ends the stream too: on_eof, not
 * an error. */
static void test_end_without_close_notify(void **state)
{
    struct tls_client client = {.send = "hello\n", .expect = 6};

    (void)state;
    serve(&client, NULL);
    assert_int_equal(client.got_len, 6);
    assert_int_equal(seen.eofs, 1);
    assert_int_equal(seen.reason, SXE_CLOSE_LOCAL);
    tls_client_free(&client);
}

/* A release callback run while a body is sealed writes what follows it: sent after it, once (on
 * io_uring the seal and that write's send must not both send). */
static void test_release_callback_writes(void **state)
{
    struct tls_client client = {.send = "release\n", .expect = BIG + 5};

    (void)state;
    serve(&client, NULL);
    assert_int_equal(seen.released, 1);
    assert_int_equal(client.got_len, BIG + 5);
    assert_memory_equal(client.got, big, BIG);
    assert_memory_equal(client.got + BIG, "done\n", 5);
    tls_client_free(&client);
}

/* A handshake that stops part way: handshake_timeout closes it. */
static void test_stalled_handshake_times_out(void **state)
{
    struct tls_client client = {.plain = true, .send = "\x16\x03\x01", .expect = 1};

    (void)state;
    serve(&client, &(struct sxe_loop_options){.handshake_timeout = 200 * 1000000ULL});
    assert_true(client.ended);
    assert_int_equal(client.got_len, 0);
    assert_int_equal(seen.reason, SXE_CLOSE_TIMEOUT);
    assert_int_equal(seen.timeouts, 0); /* on_timeout is not asked: nothing was read yet */
    tls_client_free(&client);
}

/* A client that connects and says nothing is closed by handshake_timeout, not idle_timeout. */
static void test_silent_client_times_out(void **state)
{
    struct tls_client client = {.plain = true, .expect = 1};
    uint64_t began = sxe_clock_mono_ns();

    (void)state;
    serve(&client, &(struct sxe_loop_options){.handshake_timeout = 200 * 1000000ULL,
                                              .idle_timeout = 60 * SXE_NS_PER_SEC});
    assert_true(client.ended);
    assert_int_equal(seen.reason, SXE_CLOSE_TIMEOUT);
    assert_true(sxe_clock_mono_ns() - began < 5 * SXE_NS_PER_SEC);
    tls_client_free(&client);
}

/* A handshake trickled in a byte at a time is closed when handshake_timeout has passed since the
 * accept: the bytes coming do not restart its clock, as they would restart read_timeout's. */
static void test_trickled_handshake_times_out(void **state)
{
    static const char hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
                                "0123456789012345678901234567890123456789";
    struct tls_client client = {
        .plain = true, .send = hello, .send_len = sizeof(hello) - 1, .trickle_ms = 20, .expect = 1};

    (void)state;
    serve(&client, &(struct sxe_loop_options){.handshake_timeout = 300 * 1000000ULL,
                                              .read_timeout = 100 * 1000000ULL});
    assert_int_equal(seen.reason, SXE_CLOSE_TIMEOUT);
    assert_true(client.sent > 5);                 /* it outlived several of read_timeout */
    assert_true(client.sent < sizeof(hello) - 1); /* and was cut before the end */
    tls_client_free(&client);
}

/* Neither a descriptor nor the connection itself can be passed over TLS: refused; it goes on. A
 * second TLS listener on the loop shares its TLS state. */
static void test_no_fd_passing(void **state)
{
    struct tls_client client = {.send = "fd\n", .expect = 3};
    sxe_conn_t *second;

    (void)state;
    serve(&client, NULL);
    assert_memory_equal(client.got, "fd\n", 3);
    assert_int_equal(sxe_conn_listen_at(loop, &second, "127.0.0.1:0",
                                        &(struct sxe_listen_options){.tls = tls}, &handlers, NULL),
                     0);
    tls_client_free(&client);
}

/* The peer's records (here the handshake's answer) are held to write_limit: past it, the
 * connection closes (ENOBUFS) rather than grow. */
static void test_records_past_the_write_limit(void **state)
{
    struct tls_client client = {.send = "x\n", .expect = 2};

    (void)state;
    serve(&client, &(struct sxe_loop_options){.write_limit = 64});
    assert_false(client.handshake_ok);
    assert_int_equal(seen.reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.err, ENOBUFS);
    tls_client_free(&client);
}

/* A shutdown before the handshake ends the socket's side at once: there is no session to close. */
static void test_shutdown_before_the_handshake(void **state)
{
    struct tls_client client = {.send = "x\n", .expect = 2};

    (void)state;
    start(NULL);
    seen.shut_at_connect = true;
    client.port = port;
    tls_client_run(loop, &client);
    assert_false(client.handshake_ok);
    tls_client_free(&client);
}

/* TLS 1.2 is spoken too, and ALPN picks http/1.1 from a client that offers h2 first. */
static void test_tls_1_2_and_alpn(void **state)
{
    struct tls_client client = {
        .send = "ping\n", .expect = 5, .max_version = TLS1_2_VERSION, .offer_alpn = true};

    (void)state;
    serve(&client, NULL);
    assert_true(client.handshake_ok);
    assert_int_equal(client.version, TLS1_2_VERSION);
    assert_string_equal(client.protocol, "http/1.1");
    assert_memory_equal(client.got, "ping\n", 5);
    tls_client_free(&client);
}

/* The file's preads that asked for a batch's worth (more than a record). */
static unsigned batch_reads(void)
{
    unsigned count = 0;

    for (unsigned i = 0; i < seen.reads_counted && i < sizeof(seen.reads) / sizeof(seen.reads[0]);
         i++) {
        count += seen.reads[i] > 16384;
    }
    return count;
}

/* 1 MB by reference and a 300 KB file, through the default 16 KB buffers and a 64 KB write
 * limit: sealed as the socket drains, every byte in order. */
static void test_large_body_and_file(void **state)
{
    struct tls_client client = {.send = "big\n", .expect = BIG + FILE_LEN};

    (void)state;
    serve(&client, NULL);
    assert_int_equal(seen.sendfile_rc, 0);
    assert_int_equal(client.got_len, BIG + FILE_LEN);
    assert_memory_equal(client.got, big, BIG);
    assert_memory_equal(client.got + BIG, big, FILE_LEN);
    tls_client_free(&client);
}

/* Serves the file that command ("long\n", "full\n") asks for: the client gets it whole. */
static void serve_the_file(const char *command, const struct sxe_loop_options *options)
{
    struct tls_client client = {.send = command, .expect = FILE_LEN};

    serve(&client, options);
    assert_int_equal(seen.sendfile_rc, 0);
    assert_int_equal(client.got_len, FILE_LEN);
    assert_memory_equal(client.got, big, FILE_LEN);
    tls_client_free(&client);
}

/* A long file is sealed four records at a time: its first pread asks for a batch's worth. */
static void test_file_sealed_in_batches(void **state)
{
    (void)state;
    serve_the_file("long\n", NULL);
    assert_true(seen.reads[0] > 16384);
    assert_true(seen.reads_counted < FILE_LEN / 16384);
}

/* A loop short of buffers seals a record at a time (it keeps a quarter of them for others), and
 * still sends everything: a pread a record. */
static void test_few_buffers_one_record_a_seal(void **state)
{
    (void)state;
    serve_the_file("long\n", &(struct sxe_loop_options){.buffers = 5});
    assert_true(seen.reads_counted >= FILE_LEN / 16384);
    assert_int_equal(batch_reads(), 0);
}

/* A send that finds the socket full makes the next seal a single record (a slow reader holds a
 * record's buffers, not a batch's). On epoll, whose sends are system calls. */
static void test_full_socket_one_record_a_seal(void **state)
{
    (void)state;
    serve_the_file("full\n", NULL);
    if (!sxe_test_uring()) {
        assert_true(full_once);
        assert_true(seen.reads_counted >= 2);
        assert_true(seen.reads[0] > 16384); /* a batch, whose send found the socket full */
        assert_int_equal(seen.reads[1], 16384);
    }
}

/* A release callback that writes, run by a seal whose record also holds the start of a file: its
 * bytes follow the whole file, and no byte of the file goes twice. */
static void test_release_callback_before_a_file(void **state)
{
    struct tls_client client = {.send = "reffile\n", .expect = 2000 + SMALL_FILE + 5};

    (void)state;
    serve(&client, NULL);
    assert_int_equal(seen.released, 1);
    assert_int_equal(client.got_len, 2000 + SMALL_FILE + 5);
    assert_memory_equal(client.got, big, 2000);
    assert_memory_equal(client.got + 2000, big, SMALL_FILE);
    assert_memory_equal(client.got + 2000 + SMALL_FILE, "done\n", 5);
    tls_client_free(&client);
}

/* A client that asks for records of 512 bytes (RFC 6066) gets them, however many a batch makes
 * (debug builds assert that the sealed bytes stay within what was checked for). */
static void test_small_records(void **state)
{
    struct tls_client client = {
        .send = "big\n", .expect = BIG + FILE_LEN, .max_fragment = TLSEXT_max_fragment_length_512};

    (void)state;
    serve(&client, &(struct sxe_loop_options){.buffers = 40});
    assert_int_equal(client.got_len, BIG + FILE_LEN);
    assert_memory_equal(client.got, big, BIG);
    assert_memory_equal(client.got + BIG, big, FILE_LEN);
    tls_client_free(&client);
}

/* A head written before a small file: one record holds both, and one send takes it (on epoll,
 * whose sends are system calls). */
static void test_head_then_file(void **state)
{
    struct tls_client client = {.send = "file\n", .expect = 5 + SMALL_FILE};

    (void)state;
    serve(&client, NULL);
    assert_int_equal(seen.sendfile_rc, 0);
    assert_int_equal(client.got_len, 5 + SMALL_FILE);
    assert_memory_equal(client.got, "head\n", 5);
    assert_memory_equal(client.got + 5, big, SMALL_FILE);
    if (!sxe_test_uring()) {
        assert_int_equal(sxe__sys_calls(SXE_SYS_send) + sxe__sys_calls(SXE_SYS_sendmsg), 1);
    }
    tls_client_free(&client);
}

/* The same with buffers smaller than a record (a record spans two), and over TLS 1.2. */
static void test_small_buffers(void **state)
{
    struct tls_client client = {
        .send = "big\n", .expect = BIG + FILE_LEN, .max_version = TLS1_2_VERSION};

    (void)state;
    serve(&client, &(struct sxe_loop_options){.buffer_size = 4096, .buffers = 64});
    assert_int_equal(seen.sendfile_rc, 0);
    assert_int_equal(client.got_len, BIG + FILE_LEN);
    assert_memory_equal(client.got + BIG, big, FILE_LEN);
    tls_client_free(&client);
}

/* close_when_sent: the answer, then close_notify, then the end. */
static void test_close_when_sent_notifies(void **state)
{
    struct tls_client client = {.send = "bye\n", .expect = 100};

    (void)state;
    serve(&client, NULL);
    assert_int_equal(client.got_len, 4);
    assert_true(client.close_notified);
    assert_int_equal(seen.reason, SXE_CLOSE_LOCAL);
    tls_client_free(&client);
}

/* shutdown: the answer, close_notify, and the socket's end; the connection stays open to read. */
static void test_shutdown_notifies(void **state)
{
    struct tls_client client = {.send = "shut\n", .expect = 100};

    (void)state;
    serve(&client, NULL);
    assert_int_equal(client.got_len, 5);
    assert_true(client.close_notified);
    tls_client_free(&client);
}

/* What on_connect writes, before the handshake, is sealed once it is done, and comes first. */
static void test_write_before_the_handshake(void **state)
{
    struct tls_client client = {.send = "after\n", .expect = 12};

    (void)state;
    start(NULL);
    seen.greeting = "hello\n";
    client.port = port;
    tls_client_run(loop, &client);
    assert_int_equal(client.got_len, 12);
    assert_memory_equal(client.got, "hello\nafter\n", 12);
    tls_client_free(&client);
}

/* A client that offers only TLS 1.1 is refused with an alert; the server closes (EPROTO) and
 * says why in one line. */
static void test_old_protocol_refused(void **state)
{
    struct tls_client client = {
        .expect = 1, .max_version = TLS1_1_VERSION, .min_version = TLS1_VERSION};
    struct sxe_test_capture capture;

    (void)state;
    start(NULL);
    client.port = port;
    sxe_test_capture_start(&capture);
    tls_client_run(loop, &client);
    sxe_test_capture_stop();
    assert_false(client.handshake_ok);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.err, EPROTO);
    assert_non_null(strstr(capture.text, "TLS handshake failed"));
    assert_non_null(strstr(capture.text, "unsupported protocol"));
    tls_client_free(&client);
}

/* Plain HTTP to a TLS port: told so in plain HTTP, as nginx does, then closed (EPROTO); the log
 * says what it was. */
static void test_plain_text_refused(void **state)
{
    struct tls_client client = {.plain = true, .send = "GET / HTTP/1.1\r\n\r\n", .expect = 1000};
    struct sxe_test_capture capture;

    (void)state;
    start(NULL);
    client.port = port;
    sxe_test_capture_start(&capture);
    tls_client_run(loop, &client);
    sxe_test_capture_stop();
    assert_true(client.ended);
    assert_int_equal(seen.reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.err, EPROTO);
    assert_non_null(strstr(capture.text, "http request"));
    assert_non_null(strstr(client.got, "HTTP/1.1 400 Bad Request\r\n"));
    const char *body = strstr(client.got, "\r\n\r\n");
    assert_non_null(body);
    assert_string_equal(body + 4, "400 Bad Request: plain HTTP sent to a TLS port\n");
    assert_non_null(strstr(client.got, "Content-Length: 47\r\n"));
    tls_client_free(&client);
}

/* Bytes that are not TLS and not HTTP: a clean close, no answer. */
static void test_garbage_closed_without_an_answer(void **state)
{
    struct tls_client client = {.plain = true, .send = "HELO there\r\n\r\n", .expect = 1000};
    struct sxe_test_capture capture;

    (void)state;
    start(NULL);
    client.port = port;
    sxe_test_capture_start(&capture);
    tls_client_run(loop, &client);
    sxe_test_capture_stop();
    assert_true(client.ended);
    assert_int_equal(client.got_len, 0);
    assert_int_equal(seen.reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.err, EPROTO);
    tls_client_free(&client);
}

/* A socket error during the handshake closes with it, through the seam, whether its number is
 * below EINTR's (EPERM) or above it (ECONNRESET); an interrupted read (EINTR) is read again. */
static void test_socket_error_in_handshake(void **state)
{
    static const int errors[] = {EINTR, EPERM, ECONNRESET};

    (void)state;
    start(NULL);
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        struct tls_client client = {.port = port, .send = "x\n", .expect = 2};
        sxe__sys_fail(SXE_SYS_recv, 1, 1, errors[i]);
        tls_client_run(loop, &client);
        if (errors[i] == EINTR) {
            assert_int_equal(client.got_len, 2);
        } else {
            assert_false(client.got_len == 2);
            assert_int_equal(seen.reason, SXE_CLOSE_ERROR);
            assert_int_equal(seen.err, errors[i]);
        }
        tls_client_free(&client);
    }
}

/* A file that cannot be read while it is sealed fails the connection with the read's error (the
 * sendfile call says so if it was sealing then), below EINTR's number (EPERM) or above it (EIO);
 * what was sealed before went out in order. An interrupted read (EINTR) is read again. */
static void test_file_read_fails(void **state)
{
    static const int errors[] = {EINTR, EPERM, EIO};

    (void)state;
    start(NULL);
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        struct tls_client client = {.port = port, .send = "big\n", .expect = BIG + FILE_LEN};
        sxe__sys_fail(SXE_SYS_pread, 3, 1, errors[i]);
        tls_client_run(loop, &client);
        assert_memory_equal(client.got, big, BIG);
        if (errors[i] == EINTR) {
            assert_int_equal(seen.sendfile_rc, 0);
            assert_int_equal(client.got_len, BIG + FILE_LEN);
            assert_memory_equal(client.got + BIG, big, FILE_LEN);
        } else {
            assert_true(seen.sendfile_rc == 0 || seen.sendfile_rc == -errors[i]);
            assert_true(client.got_len >= BIG && client.got_len < BIG + FILE_LEN);
            assert_int_equal(seen.reason, SXE_CLOSE_ERROR);
            assert_int_equal(seen.err, errors[i]);
        }
        tls_client_free(&client);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_echo_over_tls_1_3, teardown),
        cmocka_unit_test_teardown(test_end_without_close_notify, teardown),
        cmocka_unit_test_teardown(test_release_callback_writes, teardown),
        cmocka_unit_test_teardown(test_stalled_handshake_times_out, teardown),
        cmocka_unit_test_teardown(test_silent_client_times_out, teardown),
        cmocka_unit_test_teardown(test_trickled_handshake_times_out, teardown),
        cmocka_unit_test_teardown(test_no_fd_passing, teardown),
        cmocka_unit_test_teardown(test_records_past_the_write_limit, teardown),
        cmocka_unit_test_teardown(test_shutdown_before_the_handshake, teardown),
        cmocka_unit_test_teardown(test_tls_1_2_and_alpn, teardown),
        cmocka_unit_test_teardown(test_large_body_and_file, teardown),
        cmocka_unit_test_teardown(test_file_sealed_in_batches, teardown),
        cmocka_unit_test_teardown(test_few_buffers_one_record_a_seal, teardown),
        cmocka_unit_test_teardown(test_full_socket_one_record_a_seal, teardown),
        cmocka_unit_test_teardown(test_release_callback_before_a_file, teardown),
        cmocka_unit_test_teardown(test_small_records, teardown),
        cmocka_unit_test_teardown(test_head_then_file, teardown),
        cmocka_unit_test_teardown(test_small_buffers, teardown),
        cmocka_unit_test_teardown(test_close_when_sent_notifies, teardown),
        cmocka_unit_test_teardown(test_shutdown_notifies, teardown),
        cmocka_unit_test_teardown(test_write_before_the_handshake, teardown),
        cmocka_unit_test_teardown(test_old_protocol_refused, teardown),
        cmocka_unit_test_teardown(test_plain_text_refused, teardown),
        cmocka_unit_test_teardown(test_server_names, teardown),
        cmocka_unit_test_teardown(test_no_tickets, teardown),
        cmocka_unit_test_teardown(test_garbage_closed_without_an_answer, teardown),
        cmocka_unit_test_teardown(test_socket_error_in_handshake, teardown),
        cmocka_unit_test_teardown(test_file_read_fails, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
