/*
 * Session tickets' keys (src/core/tls_tickets.c), against OpenSSL's client: contexts given the same
 * key file resume each other's sessions, and no other context does; keys change each period (the
 * wall clock faked through the seam), and a ticket opens in its period and the next, never later;
 * key files that cannot serve are refused, saying why.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "loop.h"
#include "sxe/conn.h"
#include "sxe/loop.h"
#include "sys.h"
#include "sxe_test.h"
#include "tls_test.h"
#include <openssl/rand.h>

#define CONTEXTS 4

static sxe_loop_t *loop;
static sxe_tls_t *contexts[CONTEXTS];
static char key_file[64] = "/tmp/sxe-tls-tickets-XXXXXX";
static char other_key_file[64] = "/tmp/sxe-tls-tickets-other-XXXXXX";
static char short_key_file[64] = "/tmp/sxe-tls-tickets-short-XXXXXX";

static size_t echo(sxe_conn_t *conn, const char *data, size_t len)
{
    assert_int_equal(sxe_conn_write(conn, data, len), 0);
    return len;
}

static const struct sxe_conn_handlers handlers = {.on_read = echo};

static void file_write(char *path, size_t len)
{
    unsigned char bytes[80];
    int fd = mkstemp(path);

    assert_true(fd >= 0 && len <= sizeof(bytes));
    assert_int_equal(RAND_bytes(bytes, (int)len), 1);
    assert_int_equal(write(fd, bytes, len), (ssize_t)len);
    close(fd);
}

static int group_setup(void **state)
{
    (void)state;
    tls_test_files_make();
    file_write(key_file, 80);
    file_write(other_key_file, 80);
    file_write(short_key_file, 31);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tls_test_files_remove();
    unlink(key_file);
    unlink(other_key_file);
    unlink(short_key_file);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (loop != NULL) {
        sxe_loop_destroy(loop);
        loop = NULL;
    }
    for (unsigned i = 0; i < CONTEXTS; i++) {
        sxe_tls_destroy(contexts[i]);
        contexts[i] = NULL;
    }
    sxe__sys_reset();
    return 0;
}

/* A context of the localhost certificate with options' tickets, and a listener of it. */
static int listen_with(unsigned which, const char *file, uint64_t period)
{
    struct sxe_tls_options options = {.certificate = tls_certificate,
                                      .key = tls_key,
                                      .ticket_key_file = file,
                                      .ticket_period = period};
    struct sockaddr_in address = {.sin_family = AF_INET};
    socklen_t address_len = sizeof(address);
    sxe_conn_t *listener;

    if (loop == NULL) {
        assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    }
    assert_int_equal(sxe_tls_server_create(&contexts[which], &options), 0);
    assert_int_equal(sxe_conn_listen_at(loop, &listener, "127.0.0.1:0",
                                        &(struct sxe_listen_options){.tls = contexts[which]},
                                        &handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&address, &address_len), 0);
    return ntohs(address.sin_port);
}

/* A connection to port, resuming resume if not NULL. @return whether it was resumed; *kept is
 * the session it had (free it), if kept is not NULL. */
static bool resumes(int port, SSL_SESSION *resume, SSL_SESSION **kept)
{
    struct tls_client client = {.port = port, .send = "hi\n", .expect = 3, .resume = resume};

    tls_client_run(loop, &client);
    assert_true(client.handshake_ok);
    assert_int_equal(client.got_len, 3);
    assert_non_null(client.kept);
    if (kept != NULL) {
        *kept = client.kept;
        client.kept = NULL; /* the caller's now */
    }
    tls_client_free(&client);
    return client.resumed;
}

static void test_a_key_file_shared(void **state)
{
    SSL_SESSION *session;

    (void)state;
    int first = listen_with(0, key_file, 0);
    int same_file = listen_with(1, key_file, 0);
    int other_file = listen_with(2, other_key_file, 0);
    int no_file = listen_with(3, NULL, 0);
    assert_false(resumes(first, NULL, &session));
    assert_true(resumes(first, session, NULL));     /* by the server that sealed it */
    assert_true(resumes(same_file, session, NULL)); /* and by another with the same file */
    assert_false(resumes(other_file, session, NULL));
    assert_false(resumes(no_file, session, NULL));
    SSL_SESSION_free(session);
}

/* Periods of 100 s, then the default hour, on a faked wall clock starting at a period's edge: a
 * ticket opens in its period and the next, not after, and a session resumes for two periods after
 * its full handshake, however often it is renewed. */
static void test_keys_change_each_period(void **state)
{
    const uint64_t given[] = {100 * SXE_NS_PER_SEC, 0};
    const uint64_t start = 498693ULL * 3600 * SXE_NS_PER_SEC; /* an hour's edge, and 100 s's */
    SSL_SESSION *session, *renewed;

    (void)state;
    for (unsigned i = 0; i < sizeof(given) / sizeof(given[0]); i++) {
        uint64_t period = given[i] != 0 ? given[i] : 3600 * SXE_NS_PER_SEC;
        sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, start);
        int port = listen_with(i, NULL, given[i]);
        assert_false(resumes(port, NULL, &session));
        sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, start + period / 2);
        assert_true(resumes(port, session, NULL)); /* the same period */
        sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, start + period + period / 2);
        assert_true(resumes(port, session, &renewed)); /* the next: opened, and sealed anew */
        sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, start + 2 * period - period / 10);
        assert_true(resumes(port, renewed, NULL)); /* the one sealed in the last period opens */
        sxe__sys_clock_fake(1000 * SXE_NS_PER_SEC, start + 2 * period + period / 2);
        assert_false(resumes(port, session, NULL)); /* two periods on: no longer */
        assert_false(resumes(port, renewed, NULL)); /* nor its renewal: the session is too old */
        SSL_SESSION_free(session);
        SSL_SESSION_free(renewed);
    }
}

/*
 * A key file that is missing, short or unreadable fails the server's creation with why. A read of
 * it failing with an errno below EINTR's (EPERM) or above it (EIO) is not read again: the creation
 * returns that error; an interrupted read (EINTR) is read again, and the server is made.
 */
static void test_key_file_errors(void **state)
{
    static const int read_errors[] = {EPERM, EIO};
    const struct sxe_tls_options options = {
        .certificate = tls_certificate, .key = tls_key, .ticket_key_file = key_file};
    struct sxe_test_capture capture;
    sxe_tls_t *made = (sxe_tls_t *)&made;

    (void)state;
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_tls_server_create(
                         &made, &(struct sxe_tls_options){.certificate = tls_certificate,
                                                          .key = tls_key,
                                                          .ticket_key_file = "/nonexistent/keys"}),
                     -ENOENT);
    assert_null(made);
    assert_int_equal(
        sxe_tls_server_create(&made, &(struct sxe_tls_options){.certificate = tls_certificate,
                                                               .key = tls_key,
                                                               .ticket_key_file = short_key_file}),
        -EINVAL);
    for (size_t i = 0; i < sizeof(read_errors) / sizeof(read_errors[0]); i++) {
        sxe__sys_fail(SXE_SYS_read, 1, 1, read_errors[i]);
        assert_int_equal(sxe_tls_server_create(&made, &options), -read_errors[i]);
        assert_int_equal(sxe__sys_calls(SXE_SYS_read), 1);
    }
    sxe__sys_fail(SXE_SYS_read, 1, 1, EINTR);
    assert_int_equal(sxe_tls_server_create(&made, &options), 0);
    assert_int_equal(sxe__sys_calls(SXE_SYS_read), 2);
    sxe_tls_destroy(made);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "TLS ticket key file /nonexistent/keys"));
    assert_non_null(strstr(capture.text, "fewer than 32 bytes"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_a_key_file_shared, teardown),
        cmocka_unit_test_teardown(test_keys_change_each_period, teardown),
        cmocka_unit_test_teardown(test_key_file_errors, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
