/*
 * The other kinds of connection and ways in: UDP and its errors, Unix sockets, socket pairs and
 * half-close, adopted descriptors and hand-off between loops, sendfile and its errors, IPv6,
 * listen errors, stopping on a signal, 10,000 connections at once, and accepts in batches. Harness:
 * conn_test.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io_uring.h"
#include "loop.h"
#include "pool.h"
#include "sxe/clock.h"
#include "sxe/udp.h"
#include "sxe_test.h"
#include "sys.h"

#include "conn_test.h"

/* UDP: a batch of datagrams is echoed; one too large for a buffer is dropped and counted. */
static void echo_datagram(sxe_conn_t *socket, const char *data, size_t len,
                          const struct sockaddr *from, socklen_t from_len)
{
    seen.requests++;
    assert_int_equal(sxe_udp_send(socket, data, len, from, from_len), 0);
}

static void test_udp(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_datagram = echo_datagram};
    struct sxe_loop_options options = {.buffer_size = 1024};
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(address);
    sxe_conn_t *udp;
    char big[2000] = {0};

    (void)state;
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    assert_int_equal(
        sxe_udp_bind(loop, &udp, (struct sockaddr *)&address, sizeof(address), &handlers, NULL), 0);
    assert_int_equal(sxe_conn_local(udp, (struct sockaddr *)&address, &len), 0);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof(address)), 0);
    for (int i = 0; i < 20; i++) {
        char text[16];
        int n = snprintf(text, sizeof(text), "dgram %d", i);
        assert_int_equal(send(fd, text, (size_t)n, 0), n);
    }
    assert_int_equal(send(fd, big, sizeof(big), 0), (ssize_t)sizeof(big));
    want_requests = 20;
    pump_until(requests_reached);
    for (int i = 0; i < 20; i++) {
        char text[16], got[64];
        int n = snprintf(text, sizeof(text), "dgram %d", i);
        assert_int_equal(recv(fd, got, sizeof(got), 0), n);
        assert_memory_equal(got, text, (size_t)n);
    }
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.datagrams_dropped, 1);
    assert_int_equal(sxe_conn_write(udp, "x", 1), -EPIPE);
    close(fd);
}

/* Unix stream sockets: the same API as TCP. */
static void test_unix_stream(void **state)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    sxe_conn_t *unix_listener;

    (void)state;
    snprintf(address.sun_path, sizeof(address.sun_path), "/tmp/sxe-test-%d.sock", (int)getpid());
    unlink(address.sun_path);
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_conn_listen(loop, &unix_listener, (struct sockaddr *)&address,
                                     sizeof(address), NULL, &server_handlers, NULL),
                     0);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof(address)), 0);
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    close(fd);
    unlink(address.sun_path);
}

/* A socketpair in one loop; half-close with on_eof; shutdown after queued output. */
/* The first side to see the end replies and shuts down in turn. */
static void reply_at_eof(sxe_conn_t *conn)
{
    if (++seen.eofs == 1) {
        assert_int_equal(sxe_conn_write(conn, "bye", 3), 0);
        assert_int_equal(sxe_conn_shutdown(conn), 0);
    }
}

static void test_pair_and_half_close(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = on_connect,
                                                      .on_read = record_input,
                                                      .on_eof = reply_at_eof,
                                                      .on_close = on_close};
    sxe_conn_t *a, *b;

    (void)state;
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_conn_pair(loop, &a, &b, 0, &handlers, NULL), 0);
    want_connects = 2;
    pump_until(connects_reached);
    assert_int_equal(sxe_conn_write(a, "hello", 5), 0);
    assert_int_equal(sxe_conn_shutdown(a), 0); /* a is done sending */
    pump();
    /* b saw the bytes, then the end: it replied "bye" and shut down too. */
    assert_int_equal(seen.eofs, 2);
    assert_memory_equal(seen.input, "hellobye", 8);
    assert_int_equal(sxe_conn_shutdown(a), 0);
    sxe_conn_close(a);
    sxe_conn_close(a); /* idempotent */
    sxe_conn_close(b);
    assert_int_equal(seen.closes, 2);
    assert_int_equal(sxe_conn_write(a, "x", 1), -EPIPE);
}

/*
 * A connection on descriptor 0, as an inetd-style program gets it on its standard input, is
 * adopted and served like any other.
 */
static void test_adopt_descriptor_zero(void **state)
{
    int pair[2], saved_stdin = dup(0);

    (void)state;
    assert_true(saved_stdin > 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    assert_int_equal(dup2(pair[0], 0), 0);
    close(pair[0]);
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_conn_adopt(loop, &seen.adopted, 0, &server_handlers, NULL), 0);
    send_all(pair[1], request, sizeof(request) - 1);
    expect_reply(pair[1], 1);
    sxe_conn_close(seen.adopted);
    close(pair[1]);
    assert_int_equal(dup2(saved_stdin, 0), 0);
    close(saved_stdin);
}

/* Handing a live TCP connection over a Unix socket pair, and serving it on the other side. */
static sxe_conn_t *receiver;

static void adopt_fd(sxe_conn_t *conn, int fd)
{
    (void)conn;
    assert_int_equal(sxe_conn_adopt(loop, &seen.adopted, fd, &server_handlers, NULL), 0);
}

static void test_hand_off(void **state)
{
    static const struct sxe_conn_handlers channel = {.on_fd = adopt_fd};
    sxe_conn_t *sender;

    (void)state;
    start_server(NULL, NULL, &server_handlers);
    assert_int_equal(
        sxe_conn_pair(loop, &sender, &receiver, SXE_LISTEN_RECEIVE_FDS, &channel, NULL), 0);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);
    sxe_conn_t *accepted = seen.last_conn;
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    pump();
    pump();
    assert_int_equal(sxe_conn_hand_off(accepted, sender), 0);
    assert_int_equal(seen.last_reason, SXE_CLOSE_HANDED_OFF);
    pump();
    assert_non_null(seen.adopted);
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    assert_int_equal(seen.requests, 2);
    close(fd);
}

/* sendfile: a file range goes out after queued bytes. */
static void send_file(sxe_conn_t *conn)
{
    assert_int_equal(sxe_conn_sendfile(conn, file_fd, 0, 0), 0); /* nothing: not an EOF error */
    assert_int_equal(sxe_conn_write(conn, "head:", 5), 0);
    assert_true(sxe_conn_sendfile(conn, file_fd, 2, 100000) >= 0);
    assert_true(sxe_conn_write(conn, ":tail", 5) >= 0);
}

static void test_sendfile(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = send_file};
    static char content[100002];
    static char expected[100010];
    char path[] = "/tmp/sxe-test-sendfile-XXXXXX";

    (void)state;
    for (size_t i = 0; i < sizeof(content); i++) {
        content[i] = (char)('a' + i % 26);
    }
    file_fd = mkstemp(path);
    assert_true(file_fd >= 0);
    unlink(path);
    assert_int_equal(write(file_fd, content, sizeof(content)), (ssize_t)sizeof(content));
    memcpy(expected, "head:", 5);
    memcpy(expected + 5, content + 2, 100000);
    memcpy(expected + 100005, ":tail", 5);
    start_server(NULL, NULL, &handlers);
    int fd = client();
    char got[sizeof(expected)];
    size_t have = 0;
    uint64_t give_up = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;
    while (have < sizeof(expected)) {
        pump();
        ssize_t n = recv(fd, got + have, sizeof(got) - have, MSG_DONTWAIT);
        if (n > 0) {
            have += (size_t)n;
        }
        assert_true(sxe_clock_mono_ns() < give_up);
    }
    assert_memory_equal(got, expected, sizeof(expected));
    close(fd);
    close(file_fd);
}

/*
 * Owned files: several queued behind a small socket buffer at once, each closed by sxe when its
 * bytes are sent; the rest closed with the connection; one not queued closed at once.
 */
static int owned[3];

static bool is_closed(int fd)
{
    return fcntl(fd, F_GETFD) < 0 && errno == EBADF;
}

static void send_owned_files(sxe_conn_t *conn)
{
    int small = 4096;

    seen.connects++;
    seen.last_conn = conn;
    assert_int_equal(setsockopt(sxe_conn_fd(conn), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
                     0);
    for (int i = 0; i < 3; i++) {
        owned[i] = dup(file_fd);
        assert_true(sxe_conn_sendfile_and_close(conn, owned[i], 0, 100000) >= 0);
    }
    assert_false(is_closed(owned[2])); /* queued behind a full socket */
    int unqueued = dup(file_fd);
    assert_int_equal(sxe_conn_sendfile_and_close(conn, unqueued, 0, 0), 0); /* nothing to send */
    assert_true(is_closed(unqueued));
}

static void test_sendfile_and_close(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = send_owned_files,
                                                      .on_close = on_close};
    struct sxe_loop_options options = {.buffer_size = 16384, .write_limit = 1 << 20};
    char path[] = "/tmp/sxe-test-owned-XXXXXX";
    static char block[100000];

    (void)state;
    file_fd = mkstemp(path);
    assert_true(file_fd >= 0);
    unlink(path);
    assert_int_equal(write(file_fd, block, sizeof(block)), (ssize_t)sizeof(block));
    start_server(&options, NULL, &handlers);

    /* Read the first file's bytes and a little more: the first is closed, the last is not. */
    int fd = client_with_window(8192);
    size_t have = 0;
    uint64_t give_up = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;
    while (have < 110000) {
        pump();
        ssize_t n = recv(fd, block, sizeof(block), MSG_DONTWAIT);
        have += n > 0 ? (size_t)n : 0;
        assert_true(sxe_clock_mono_ns() < give_up);
    }
    assert_true(is_closed(owned[0]));
    assert_false(is_closed(owned[2]));

    /* The peer goes: the connection closes, and with it the files still queued. */
    close(fd);
    want_closes = 1;
    pump_until(closes_reached);
    assert_true(is_closed(owned[1]) && is_closed(owned[2]));

    /* On a closed connection nothing is queued, and the file is closed at once. */
    int late = dup(file_fd);
    assert_int_equal(sxe_conn_sendfile_and_close(seen.last_conn, late, 0, 10), -EPIPE);
    assert_true(is_closed(late));
    close(file_fd);
}

/* sendfile failures: the file ends early (EIO), or sendfile itself fails. */
static void send_short_file(sxe_conn_t *conn)
{
    seen.connects++;
    assert_true(sxe_conn_sendfile(conn, file_fd, 0, 1000) < 0);
}

static void test_sendfile_errors(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = send_short_file,
                                                      .on_close = on_close};
    char path[] = "/tmp/sxe-test-short-XXXXXX";

    (void)state;
    file_fd = mkstemp(path);
    assert_true(file_fd >= 0);
    unlink(path);
    assert_int_equal(write(file_fd, "short", 5), 5);
    start_server(NULL, NULL, &handlers);
    int fd = client();
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.last_err, EIO);
    close(fd);

    sxe__sys_fail(SXE_SYS_sendfile, 1, 1, EBADF);
    fd = client();
    want_closes = 2;
    pump_until(closes_reached);
    assert_int_equal(seen.last_err, EBADF);
    close(fd);
    close(file_fd);
}

/* IPv6 on ::1. */
static void test_ipv6(void **state)
{
    struct sockaddr_in6 address = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    struct sxe_listen_options options = {.flags = SXE_LISTEN_V6ONLY | SXE_LISTEN_REUSEPORT |
                                                  SXE_LISTEN_DEFER_ACCEPT | SXE_LISTEN_FASTOPEN,
                                         .backlog = 16};
    socklen_t len = sizeof(address);
    sxe_conn_t *v6;

    (void)state;
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_conn_listen(loop, &v6, (struct sockaddr *)&address, sizeof(address),
                                     &options, &server_handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(v6, (struct sockaddr *)&address, &len), 0);
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof(address)), 0);
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    close(fd);
}

/* Listening on a port in use fails with -EADDRINUSE; the table slot is not lost. */
static void test_listen_errors(void **state)
{
    sxe_conn_t *second;

    (void)state;
    start_server(NULL, NULL, &server_handlers);
    assert_int_equal(sxe_conn_listen(loop, &second, (struct sockaddr *)&server_address,
                                     sizeof(server_address), NULL, &server_handlers, NULL),
                     -EADDRINUSE);
    sxe__sys_fail(SXE_SYS_socket, 1, 1, EMFILE);
    assert_int_equal(sxe_conn_listen(loop, &second, (struct sockaddr *)&server_address,
                                     sizeof(server_address), NULL, &server_handlers, NULL),
                     -EMFILE);
    if (!sxe_test_uring()) { /* io_uring's watch makes no system call */
        sxe__sys_fail(SXE_SYS_epoll_ctl, 1, 1, ENOMEM);
        struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(sxe_conn_listen(loop, &second, (struct sockaddr *)&any, sizeof(any), NULL,
                                         &server_handlers, NULL),
                         -ENOMEM);
    }
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.open, 1);
}

/* SIGTERM: listeners close, queued output gets its drain time, then everything closes. */
static void test_stop_on_signal(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = start_stream, .on_drained = on_drained, .on_close = on_close};
    struct sxe_loop_options options = {.buffer_size = 4096, .write_limit = 65536};

    (void)state;
    stream = (typeof(stream)){.total = 1 << 20};
    start_server(&options, NULL, &handlers);
    assert_int_equal(sxe_loop_stop_on_signals(loop, 200 * SXE_NS_PER_MSEC), 0);
    assert_int_equal(sxe_loop_stop_on_signals(loop, 200 * SXE_NS_PER_MSEC), 0);
    int fd = client(); /* never reads: its output stays queued */
    want_connects = 1;
    pump_until(connects_reached);
    assert_int_equal(sxe_pool_count(loop->conn_pool, SXE__CONN_WRITING), 1);
    kill(getpid(), SIGTERM);
    uint64_t start = sxe_clock_mono_ns();
    assert_int_equal(sxe_loop_run(loop), 0);
    uint64_t took = sxe_clock_mono_ns() - start;
    assert_true(took >= 150 * SXE_NS_PER_MSEC);
    assert_true(took < 2 * SXE_NS_PER_SEC);
    assert_int_equal(seen.last_reason, SXE_CLOSE_SHUTDOWN);
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.open, 0);
    close(fd);
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &signals, NULL);
}

/* 10,000 connections held open at once, each served, from a child process of clients. */
static void test_ten_thousand_connections(void **state)
{
    enum { CLIENTS = 10000 };
    struct sxe_loop_options options = {.connections = CLIENTS + 8, .buffers = 256};
    struct rlimit limit;
    int status;

    (void)state;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &limit), 0);
    if (limit.rlim_max < CLIENTS + 100) {
        sxe_test_skip_or_fail_in_ci("the open-file hard limit is below 10,100");
    }
    limit.rlim_cur = limit.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &limit), 0);
    start_server(&options, NULL, &server_handlers);

    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        static int fds[CLIENTS];
        char got[sizeof(reply)];
        for (int i = 0; i < CLIENTS; i++) {
            fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fds[i] < 0 ||
                connect(fds[i], (struct sockaddr *)&server_address, sizeof(server_address)) < 0) {
                sxe_test_exit(2);
            }
        }
        for (int i = 0; i < CLIENTS; i++) {
            if (send(fds[i], request, sizeof(request) - 1, 0) != sizeof(request) - 1) {
                sxe_test_exit(3);
            }
        }
        for (int i = 0; i < CLIENTS; i++) {
            size_t have = 0;
            while (have < sizeof(reply) - 1) {
                ssize_t n = recv(fds[i], got + have, sizeof(reply) - 1 - have, 0);
                if (n <= 0) {
                    sxe_test_exit(4);
                }
                have += (size_t)n;
            }
            if (memcmp(got, reply, sizeof(reply) - 1) != 0) {
                sxe_test_exit(5);
            }
        }
        sxe_test_exit(0); /* all 10,000 stay open until here */
    }
    uint64_t give_up = sxe_clock_mono_ns() + 60 * SXE_NS_PER_SEC;
    while (waitpid(child, &status, WNOHANG) == 0) {
        assert_true(sxe_loop_run_once(loop, 5 * SXE_NS_PER_MSEC) >= 0);
        assert_true(sxe_clock_mono_ns() < give_up);
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(seen.requests, CLIENTS);
    want_closes = CLIENTS;
    pump_until(closes_reached);
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.accepted, CLIENTS);
    assert_int_equal(stats.table_full, 0);
}

/*
 * UDP errors: binding a port in use, send failures, receive failures. Only EINTR is an
 * interruption to call again: a failure numbered below it (EPERM, from a firewall) or above it
 * (EAGAIN, ENOMEM) is returned from a send after one call, and ends a receive with its reason
 * logged and nothing read.
 */
static void test_udp_errors(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_datagram = echo_datagram};
    static const int send_errors[] = {EPERM, EAGAIN};
    static const int receive_errors[] = {ENOMEM, EPERM};
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(address);
    sxe_conn_t *udp, *second;

    (void)state;
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(
        sxe_udp_bind(loop, &udp, (struct sockaddr *)&address, sizeof(address), &handlers, NULL), 0);
    assert_int_equal(sxe_conn_local(udp, (struct sockaddr *)&address, &len), 0);
    assert_int_equal(
        sxe_udp_bind(loop, &second, (struct sockaddr *)&address, sizeof(address), &handlers, NULL),
        -EADDRINUSE);
    sxe__sys_fail(SXE_SYS_socket, 1, 1, EMFILE);
    assert_int_equal(
        sxe_udp_bind(loop, &second, (struct sockaddr *)&address, sizeof(address), &handlers, NULL),
        -EMFILE);
    sxe__sys_fail(SXE_SYS_sendto, 1, 1, EINTR);
    assert_int_equal(sxe_udp_send(udp, "x", 1, (struct sockaddr *)&address, sizeof(address)), 0);
    assert_int_equal(sxe__sys_calls(SXE_SYS_sendto), 2);
    for (size_t i = 0; i < sizeof(send_errors) / sizeof(send_errors[0]); i++) {
        sxe__sys_fail(SXE_SYS_sendto, 1, 1, send_errors[i]);
        assert_int_equal(sxe_udp_send(udp, "x", 1, (struct sockaddr *)&address, sizeof(address)),
                         -send_errors[i]);
        assert_int_equal(sxe__sys_calls(SXE_SYS_sendto), 1);
    }
    /* Receiving: an interrupted call is retried, a failed one gives up until the next edge. */
    sxe__sys_fail(SXE_SYS_recvmmsg, 1, 1, EINTR);
    want_requests = 1;
    pump_until(requests_reached); /* our own "x" came back to us */
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sxe_test_capture capture;
    for (size_t i = 0; i < sizeof(receive_errors) / sizeof(receive_errors[0]); i++) {
        char expected[128];
        unsigned requests = seen.requests;
        sxe__sys_fail(SXE_SYS_recvmmsg, 1, 1, receive_errors[i]);
        assert_int_equal(sendto(fd, "y", 1, 0, (struct sockaddr *)&address, sizeof(address)), 1);
        sxe_test_capture_start(&capture);
        pump();
        sxe_test_capture_stop();
        snprintf(expected, sizeof(expected), "recvmmsg failed: %s",
                 sxe_strerror(-receive_errors[i]));
        assert_non_null(strstr(capture.text, expected)); /* and why */
        assert_int_equal(seen.requests, requests);
    }
    close(fd);
}

/* The connections this loop has accepted so far. */
static uint64_t accepted_so_far(void)
{
    struct sxe_loop_stats stats;

    sxe_loop_stats(loop, &stats);
    return stats.accepted;
}

/*
 * On epoll a listener takes at most accept_batch connections a readiness event, and the rest on
 * the next: five waiting, a batch of 2 takes two in a turn; 0 or 65,535 and more mean the default
 * (64), which takes all five at once.
 */
static void test_accept_batch(void **state)
{
    static const uint32_t batches[] = {2, 0, 65535};
    enum { WAITING = 5 };

    (void)state;
    sxe_test_skip_on_uring("the backend accepts by itself there, in its own batches");
    for (unsigned b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
        struct sxe_listen_options options = {.accept_batch = batches[b]};
        int fds[WAITING];
        start_server(NULL, &options, &server_handlers);
        for (int i = 0; i < WAITING; i++) {
            fds[i] = sxe_test_client(ntohs(server_address.sin_port));
        }
        uint64_t per_turn = batches[b] == 2 ? 2 : WAITING;
        for (uint64_t want = per_turn;; want += per_turn) { /* 2, 4, 5; or 5 */
            want = want < WAITING ? want : WAITING;
            assert_true(sxe_loop_run_once(loop, 100 * SXE_NS_PER_MSEC) >= 0);
            assert_int_equal(accepted_so_far(), want);
            if (want == WAITING) {
                break;
            }
        }
        for (int i = 0; i < WAITING; i++) {
            close(fds[i]);
        }
        teardown(NULL);
    }
}

/* The user pointer each call that makes a connection is given: the connection keeps it (an
 * accepted one, its listener's), whatever else the call is told. */
static void *connected_user[4];
static unsigned connected_count;

static void note_user(sxe_conn_t *conn)
{
    if (connected_count < 4) {
        connected_user[connected_count++] = sxe_conn_user(conn);
    }
}

static int both_connected(void)
{
    return connected_count >= 2;
}

static void test_user_pointers(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = note_user};
    static char users[8];
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(address);
    sxe_conn_t *udp, *client, *a, *b, *adopted;
    int fds[2];

    (void)state;
    connected_count = 0;
    assert_int_equal(sxe_loop_create(&loop, NULL), 0);
    assert_int_equal(sxe_udp_bind(loop, &udp, (struct sockaddr *)&address, sizeof(address),
                                  &handlers, &users[0]),
                     0);
    assert_ptr_equal(sxe_conn_user(udp), &users[0]);
    assert_int_equal(sxe_conn_listen(loop, &listener, (struct sockaddr *)&address, sizeof(address),
                                     NULL, &handlers, &users[1]),
                     0);
    assert_ptr_equal(sxe_conn_user(listener), &users[1]);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&address, &len), 0);
    assert_int_equal(sxe_conn_connect(loop, &client, (struct sockaddr *)&address, sizeof(address),
                                      NULL, &handlers, &users[2]),
                     0);
    assert_ptr_equal(sxe_conn_user(client), &users[2]);
    pump_until(both_connected);
    /* The accepted connection has its listener's; the client, its own (in either order). */
    assert_true((connected_user[0] == &users[1] && connected_user[1] == &users[2]) ||
                (connected_user[0] == &users[2] && connected_user[1] == &users[1]));
    assert_int_equal(sxe_conn_pair(loop, &a, &b, 0, &handlers, &users[3]), 0);
    assert_ptr_equal(sxe_conn_user(a), &users[3]);
    assert_ptr_equal(sxe_conn_user(b), &users[3]);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    assert_int_equal(sxe_conn_adopt(loop, &adopted, fds[0], &handlers, &users[4]), 0);
    assert_ptr_equal(sxe_conn_user(adopted), &users[4]);
    close(fds[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_udp, teardown),
        cmocka_unit_test_teardown(test_unix_stream, teardown),
        cmocka_unit_test_teardown(test_pair_and_half_close, teardown),
        cmocka_unit_test_teardown(test_adopt_descriptor_zero, teardown),
        cmocka_unit_test_teardown(test_hand_off, teardown),
        cmocka_unit_test_teardown(test_sendfile, teardown),
        cmocka_unit_test_teardown(test_sendfile_and_close, teardown),
        cmocka_unit_test_teardown(test_sendfile_errors, teardown),
        cmocka_unit_test_teardown(test_ipv6, teardown),
        cmocka_unit_test_teardown(test_listen_errors, teardown),
        cmocka_unit_test_teardown(test_stop_on_signal, teardown),
        cmocka_unit_test_teardown(test_ten_thousand_connections, teardown),
        cmocka_unit_test_teardown(test_udp_errors, teardown),
        cmocka_unit_test_teardown(test_accept_batch, teardown),
        cmocka_unit_test_teardown(test_user_pointers, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
