/*
 * Connections when the system says no: accept, read, write, connect and io_uring completions
 * failing through the system call seam, short sends, epoll interrupted, stale and waiting to the
 * nanosecond, a reused slot, and misuse of closed connections. Harness: conn_test.h.
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

/* accept4 faults: each is survived, and the next client is served. */
static void test_accept_faults(void **state)
{
    static const int errors[] = {EMFILE, ENFILE, ENOBUFS, ECONNABORTED, EINTR, ENOMEM};
    struct sxe_test_capture capture;

    (void)state;
    sxe_test_skip_on_uring("it fails accept4, which the kernel does for io_uring");
    start_server(NULL, NULL, &server_handlers);
    sxe_test_capture_start(&capture);
    for (unsigned i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        unsigned before = seen.connects;
        sxe__sys_fail(SXE_SYS_accept4, 1, 1, errors[i]);
        int fd = client();
        if (errors[i] == EMFILE || errors[i] == ENFILE) {
            /* The pending connection is shed through the reserve fd. */
            expect_closed(fd);
            close(fd);
            fd = client();
        }
        want_connects = before + 1;
        pump_until(connects_reached);
        send_all(fd, request, sizeof(request) - 1);
        expect_reply(fd, 1);
        close(fd);
    }
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "accept failed"));
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.accept_errors, 5); /* EINTR is retried, not an error */
}

/*
 * A request on fd whose one call (recv or send) fails with err, once: the call is made once, and
 * the connection closes with that error. @return a new client, connected, in fd's place.
 */
static int closed_by(int fd, enum sxe__sys_call call, int err)
{
    unsigned closes = seen.closes;

    sxe__sys_fail(call, 1, 1, err);
    send_all(fd, request, sizeof(request) - 1);
    pump(); /* over loopback the request is there at once: one turn reads and answers it */
    assert_int_equal(sxe__sys_calls(call), 1);
    assert_int_equal(seen.closes, closes + 1);
    assert_int_equal(seen.last_reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.last_err, err);
    expect_closed(fd);
    close(fd);
    fd = client();
    want_connects = seen.connects + 1;
    pump_until(connects_reached);
    return fd;
}

/*
 * read faults: EINTR is retried; any other error, numbered below it (EPERM) or above it
 * (ECONNRESET), is not read again: it closes that connection only, with that error.
 */
static void test_read_faults(void **state)
{
    static const int errors[] = {EPERM, ECONNRESET};

    (void)state;
    sxe_test_skip_on_uring("it fails recv, which the kernel does for io_uring");
    start_server(NULL, NULL, &server_handlers);
    int a = client();
    int b = client();
    want_connects = 2;
    pump_until(connects_reached);

    sxe__sys_fail(SXE_SYS_recv, 1, 1, EINTR);
    send_all(a, request, sizeof(request) - 1);
    expect_reply(a, 1);

    for (unsigned i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        a = closed_by(a, SXE_SYS_recv, errors[i]);
    }

    send_all(b, request, sizeof(request) - 1);
    expect_reply(b, 1);
    close(a);
    close(b);
}

static unsigned short_write_calls;

static ssize_t send_five_bytes(int fd, const void *buf, size_t len, int flags)
{
    short_write_calls++;
    return send(fd, buf, len < 5 ? len : 5, flags);
}

static unsigned gathered_calls; /* sendmsg calls with more than one buffer */

static ssize_t sendmsg_five_bytes(int fd, const struct msghdr *message, int flags)
{
    short_write_calls++;
    gathered_calls += message->msg_iovlen > 1;
    size_t len = message->msg_iov[0].iov_len;
    return send(fd, message->msg_iov[0].iov_base, len < 5 ? len : 5, flags);
}

/*
 * Replies gathered inside on_read that span buffers go out in one sendmsg; sends that take five
 * bytes at a time still deliver them whole and in order.
 */
static void test_short_sends_across_buffers(void **state)
{
    struct sxe_loop_options options = {.buffer_size = 64}; /* a reply is 41 bytes */
    char requests[4 * sizeof(request)] = "";

    (void)state;
    sxe_test_skip_on_uring("it shortens sendmsg, which io_uring submits");
    start_server(&options, NULL, &server_handlers);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);
    sxe__sys.send = send_five_bytes;
    sxe__sys.sendmsg = sendmsg_five_bytes;
    for (int i = 0; i < 4; i++) {
        strcat(requests, request);
    }
    send_all(fd, requests, strlen(requests));
    expect_reply(fd, 4);
    assert_true(gathered_calls > 0);
    close(fd);
}

/*
 * write faults: partial writes and EAGAIN queue the rest; EINTR is sent again at once; any other
 * error, numbered below EINTR (EPERM) or above it (EPIPE), is not sent again: it closes the
 * connection after the callback, with that error.
 */
static void test_write_faults(void **state)
{
    static const int errors[] = {EPERM, EPIPE};

    (void)state;
    sxe_test_skip_on_uring("it fails and shortens send, which io_uring submits");
    start_server(NULL, NULL, &server_handlers);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);

    /* Every send sends five bytes at most: the reply still arrives whole. */
    sxe__sys.send = send_five_bytes;
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    assert_true(short_write_calls >= (sizeof(reply) - 1) / 5);
    sxe__sys_reset();

    /* EAGAIN at once: queued, then sent. */
    sxe__sys_fail(SXE_SYS_send, 1, 1, EAGAIN);
    send_all(fd, request, sizeof(request) - 1);
    pump();
    send_all(fd, request, sizeof(request) - 1); /* the next input retries the flush */
    expect_reply(fd, 2);

    /* EINTR: the reply is sent again at once. */
    sxe__sys_fail(SXE_SYS_send, 1, 1, EINTR);
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    assert_int_equal(sxe__sys_calls(SXE_SYS_send), 2);

    /* The connection closes once on_read has returned, with the error. */
    for (unsigned i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        fd = closed_by(fd, SXE_SYS_send, errors[i]);
    }
    close(fd);
}

/*
 * A write outside on_read, with nothing queued, goes straight to send. An interrupted send
 * (EINTR) is sent again and the bytes arrive; any other failure, numbered below EINTR (EPERM,
 * a firewall's answer) or above it (ECONNRESET), is not sent again: the write returns it and the
 * connection closes with it.
 */
static void test_direct_send_faults(void **state)
{
    static const int errors[] = {EPERM, ECONNRESET};

    (void)state;
    start_server(NULL, NULL, &server_handlers);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);
    sxe__sys_fail(SXE_SYS_send, 1, 1, EINTR);
    assert_int_equal(sxe_conn_write(seen.last_conn, "now", 3), 0);
    assert_int_equal(sxe__sys_calls(SXE_SYS_send), 2);
    expect_bytes(fd, "now", 3);
    close(fd);
    want_closes = 1;
    pump_until(closes_reached);

    for (unsigned i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        fd = client();
        want_connects = seen.connects + 1;
        pump_until(connects_reached);
        sxe__sys_fail(SXE_SYS_send, 1, 1, errors[i]);
        assert_int_equal(sxe_conn_write(seen.last_conn, "lost", 4), -errors[i]);
        assert_int_equal(sxe__sys_calls(SXE_SYS_send), 1);
        want_closes = seen.closes + 1;
        pump_until(closes_reached);
        assert_int_equal(seen.last_reason, SXE_CLOSE_ERROR);
        assert_int_equal(seen.last_err, errors[i]);
        expect_closed(fd);
        close(fd);
    }
}

/* Consumes everything; a connection whose input starts with 'A' answers, through a failing send. */
static int failing_fd = -1;

static ssize_t send_fails_on_a(int fd, const void *buf, size_t len, int flags)
{
    if (fd == failing_fd) {
        errno = EPIPE;
        return -1;
    }
    return send(fd, buf, len, flags);
}

static size_t consume_and_answer_a(sxe_conn_t *conn, const char *data, size_t len)
{
    if (data[0] == 'A' && failing_fd < 0) {
        failing_fd = sxe_conn_fd(conn);
        assert_true(sxe_conn_write(conn, reply, sizeof(reply) - 1) >= 0);
    }
    seen.input_len += len;
    return len;
}

/*
 * Two busy connections in one turn, both left on the ready list (more input than a turn reads);
 * the second one's write fails. Only it closes, and the first is read to the end: a slot on the
 * ready and the failed lists at once once linked both through one field, so closing the failed
 * one went on to close the other and dropped it from the ready list.
 */
static void test_failed_write_on_a_ready_connection_spares_the_others(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = consume_and_answer_a, .on_close = on_close};
    struct sxe_loop_options options = {.buffer_size = 1024};
    static char input[16 * 1024];

    (void)state;
    sxe_test_skip_on_uring("it fails send, which io_uring submits");
    start_server(&options, NULL, &handlers);
    int b = client();
    int a = client();
    want_connects = 2;
    pump_until(connects_reached);
    sxe__sys.send = send_fails_on_a;
    memset(input, 'B', sizeof(input));
    send_all(b, input, sizeof(input));
    memset(input, 'A', sizeof(input));
    send_all(a, input, sizeof(input));
    for (int i = 0; i < 50 && (seen.closes == 0 || seen.input_len < sizeof(input)); i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
    }
    pump();
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.last_err, EPIPE);
    /* All of b's input arrived, whatever a's failure cut short. */
    assert_true(seen.input_len >= sizeof(input));
    char byte;
    assert_int_equal(recv(b, &byte, 1, MSG_DONTWAIT), -1); /* b is still open, nothing sent */
    assert_int_equal(errno, EAGAIN);
    failing_fd = -1;
    close(a);
    close(b);
}

/* An outgoing connection's on_connect: was the socket really connected? */
static unsigned early_connects, real_connects;

static void check_connected(sxe_conn_t *conn)
{
    struct sockaddr_in peer;
    socklen_t len = sizeof(peer);

    if (getpeername(sxe_conn_fd(conn), (struct sockaddr *)&peer, &len) == 0) {
        real_connects++;
    } else {
        early_connects++;
    }
}

/* 'A' input: remembered. 'B' input: closes A (its slot is free once B's on_read returns). 'C'
 * input: connects out, which takes A's slot, the only free one. */
static sxe_conn_t *conn_a;
static struct sockaddr_in stuck_address; /* a listener whose accept queue is full */

static size_t close_a_and_connect(sxe_conn_t *conn, const char *data, size_t len)
{
    static const struct sxe_conn_handlers outgoing = {.on_connect = check_connected};

    if (data[0] == 'A') {
        conn_a = conn;
    } else if (data[0] == 'B' && conn_a != NULL) {
        sxe_conn_close(conn_a);
        conn_a = NULL;
    } else if (data[0] == 'C') {
        assert_int_equal(sxe_conn_connect(sxe_conn_loop(conn), &seen.adopted,
                                          (struct sockaddr *)&stuck_address, sizeof(stuck_address),
                                          NULL, &outgoing, NULL),
                         0);
    }
    return len;
}

/*
 * A connection left on the ready list closes, and a new one takes its slot later in the turn: the
 * new one is not read on the old one's behalf. Here it is a connect still under way (its SYN
 * waits on a full accept queue), which a read event would have declared connected.
 */
static void test_a_reused_slot_is_not_read_for_its_old_connection(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = close_a_and_connect, .on_close = on_close};
    struct sxe_loop_options options = {.connections = 4, .buffer_size = 1024};
    static char input[16 * 1024];
    socklen_t len = sizeof(stuck_address);

    (void)state;
    int stuck = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    stuck_address =
        (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(stuck, (struct sockaddr *)&stuck_address, sizeof(stuck_address)), 0);
    assert_int_equal(listen(stuck, 0), 0);
    assert_int_equal(getsockname(stuck, (struct sockaddr *)&stuck_address, &len), 0);
    int filler = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(filler, (struct sockaddr *)&stuck_address, sizeof(stuck_address)), 0);

    start_server(&options, NULL, &handlers);
    int a = client();
    int b = client();
    int c = client();
    want_connects = 3;
    pump_until(connects_reached);
    memset(input, 'A', sizeof(input)); /* more than a turn reads: a stays on the ready list */
    send_all(a, input, sizeof(input));
    wait_until_acknowledged(a);
    send_all(b, "B", 1);
    wait_until_acknowledged(b);
    send_all(c, "C", 1);
    /* All of it in the server's sockets before the turn: it reads a 4 times, then b, then c. */
    wait_until_acknowledged(c);
    for (int i = 0; i < 50 && seen.adopted == NULL; i++) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
    }
    assert_non_null(seen.adopted);
    pump();
    assert_int_equal(early_connects, 0);
    assert_int_equal(seen.closes, 1);
    sxe_conn_close(seen.adopted);
    close(filler);
    close(stuck);
    close(a);
    close(b);
    close(c);
}

/* The wait is interrupted (EINTR): the turn is empty and the loop goes on. */
static void test_epoll_wait_eintr(void **state)
{
    (void)state;
    sxe_test_skip_on_uring("epoll_pwait2 (io_uring_enter faults: test_io_uring)");
    start_server(NULL, NULL, &server_handlers);
    sxe__sys_fail(SXE_SYS_epoll_pwait2, 1, 2, EINTR);
    assert_int_equal(sxe_loop_run_once(loop, 0), 0);
    assert_int_equal(sxe_loop_run_once(loop, 0), 0);
    int fd = client();
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    sxe__sys_fail(SXE_SYS_epoll_pwait2, 1, 1, EBADF);
    assert_int_equal(sxe_loop_run_once(loop, 0), -EBADF);
    close(fd);
}

/* A timer's wait as epoll_pwait2 sees it: whole nanoseconds, not rounded to milliseconds. */
static struct timespec last_timeout;
static int last_timeout_null;

static int epoll_pwait2_recording(int epfd, struct epoll_event *events, int max,
                                  const struct timespec *timeout, const sigset_t *mask)
{
    last_timeout_null = timeout == NULL;
    if (timeout != NULL) {
        last_timeout = *timeout;
    }
    return epoll_pwait2(epfd, events, max, timeout, mask);
}

static int last_timeout_ms;

static int epoll_wait_recording(int epfd, struct epoll_event *events, int max, int timeout)
{
    last_timeout_ms = timeout;
    return epoll_wait(epfd, events, max, timeout);
}

static void fire(sxe_timer_t *timer, void *arg)
{
    (void)timer;
    (*(int *)arg)++;
}

static void test_epoll_waits_to_the_nanosecond(void **state)
{
    sxe_timer_t timer;
    int fired = 0;

    (void)state;
    sxe_test_skip_on_uring("epoll_pwait2 (io_uring waits with its own timespec)");
    sxe__sys_clock_fake(SXE_NS_PER_SEC, SXE_NS_PER_SEC);
    start_server(NULL, NULL, &server_handlers);
    assert_true(sxe_loop_run_once(loop, 0) >= 0); /* the loop's now is the fake clock's */
    sxe__sys.epoll_pwait2 = epoll_pwait2_recording;
    sxe_timer_init(&timer, fire, &fired);
    assert_int_equal(sxe_timer_start(loop, &timer, 250 * SXE_NS_PER_USEC, 0), 0);
    assert_true(sxe_loop_run_once(loop, SXE_NS_PER_SEC) >= 0);
    assert_false(last_timeout_null);
    assert_int_equal(last_timeout.tv_sec, 0);
    assert_int_equal(last_timeout.tv_nsec, 250000); /* exactly, not rounded up to 1 ms */
    assert_int_equal(fired, 0);                     /* the fake clock has not moved */
    sxe__sys_clock_advance(250 * SXE_NS_PER_USEC - 1);
    assert_true(sxe_loop_run_once(loop, SXE_NS_PER_SEC) >= 0);
    assert_int_equal(last_timeout.tv_nsec, 1);
    sxe__sys_clock_advance(1);
    assert_true(sxe_loop_run_once(loop, SXE_NS_PER_SEC) >= 0);
    assert_int_equal(last_timeout.tv_nsec, 0); /* due: a poll */
    assert_int_equal(fired, 1);
    assert_true(sxe_loop_run_once(loop, 2 * SXE_NS_PER_SEC + 5) >= 0);
    assert_int_equal(last_timeout.tv_sec, 2);
    assert_int_equal(last_timeout.tv_nsec, 5);

    /* No epoll_pwait2 (a kernel before 5.11): epoll_wait in milliseconds, from then on. */
    sxe__sys_fail(SXE_SYS_epoll_pwait2, 1, 1, ENOSYS);
    sxe__sys.epoll_wait = epoll_wait_recording;
    assert_int_equal(sxe_timer_start(loop, &timer, 250 * SXE_NS_PER_USEC, 0), 0);
    assert_true(sxe_loop_run_once(loop, SXE_NS_PER_SEC) >= 0);
    assert_int_equal(last_timeout_ms, 1); /* 250 us, rounded up to 1 ms */
    assert_int_equal(fired, 1);
    sxe__sys_clock_advance(250 * SXE_NS_PER_USEC);
    last_timeout_null = -1;
    assert_true(sxe_loop_run_once(loop, SXE_NS_PER_SEC) >= 0);
    assert_int_equal(fired, 2);
    assert_int_equal(last_timeout_null, -1); /* epoll_pwait2 not asked again */
    assert_int_equal(last_timeout_ms, 0);    /* the timer was due: a poll */
    /* 1 ms and 1 ns is waited as 2 ms: rounded up, so a timer never wakes the loop early. */
    assert_int_equal(sxe_timer_start(loop, &timer, SXE_NS_PER_MSEC + 1, 0), 0);
    assert_true(sxe_loop_run_once(loop, SXE_NS_PER_SEC) >= 0);
    assert_int_equal(last_timeout_ms, 2);
    assert_int_equal(fired, 2);
}

/* An event for a slot that closed and was reused is dropped, not delivered to the new user. */
static struct epoll_event stale_event;

static int epoll_wait_stale(int epfd, struct epoll_event *events, int max,
                            const struct timespec *timeout, const sigset_t *mask)
{
    (void)epfd;
    (void)max;
    (void)timeout;
    (void)mask;
    events[0] = stale_event;
    return 1;
}

static void test_stale_events_are_dropped(void **state)
{
    struct sxe_loop_options options = {.connections = 3};

    (void)state;
    sxe_test_skip_on_uring("it forges an epoll event (io_uring stale completions: test_io_uring)");
    start_server(&options, NULL, &server_handlers);
    int a = client();
    want_connects = 1;
    pump_until(connects_reached);
    sxe_conn_t *first = seen.last_conn;
    stale_event = (struct epoll_event){.events = EPOLLIN, .data.u64 = sxe_conn_id(first)};
    sxe_conn_close(first);
    /* Free slots are reused oldest first: the third connection gets the first one's slot. */
    int other = client();
    int b = client();
    want_connects = 3;
    pump_until(connects_reached);
    assert_ptr_equal(seen.last_conn, first); /* the same slot, a new generation */

    sxe__sys.epoll_pwait2 = epoll_wait_stale;
    assert_int_equal(sxe_loop_run_once(loop, 0), 1);
    sxe__sys_reset();
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.stale_events, 1);
    send_all(b, request, sizeof(request) - 1);
    expect_reply(b, 1);
    close(a);
    close(b);
    close(other);
}

/* Connect failures reported at once: no socket, no source address, no route. */
static void test_connect_errors(void **state)
{
    struct sockaddr_in source = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002)};
    sxe_conn_t *conn;

    (void)state;
    start_server(NULL, NULL, &server_handlers);
    sxe__sys_fail(SXE_SYS_socket, 1, 1, EMFILE);
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&server_address,
                                      sizeof(server_address), NULL, &server_handlers, NULL),
                     -EMFILE);
    sxe__sys_fail(SXE_SYS_bind, 1, 1, EADDRNOTAVAIL);
    assert_int_equal(
        sxe_conn_connect(loop, &conn, (struct sockaddr *)&server_address, sizeof(server_address),
                         &(struct sxe_connect_options){.source = (struct sockaddr *)&source,
                                                       .source_len = sizeof(source)},
                         &server_handlers, NULL),
        -EADDRNOTAVAIL);
    sxe__sys_fail(SXE_SYS_connect, 1, 1, ENETUNREACH);
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&server_address,
                                      sizeof(server_address), NULL, &server_handlers, NULL),
                     -ENETUNREACH);
    /* getsockopt failing when the connect completes: reported as the connect's error. */
    sxe__sys_fail(SXE_SYS_getsockopt, 1, 1, ENOTSOCK);
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&server_address,
                                      sizeof(server_address), NULL, &server_handlers, NULL),
                     0);
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_err, ENOTSOCK);
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.open, 2); /* the listener, and the server side of the last connect */
}

/* Calls on closed or unsuitable connections fail cleanly. */
static void test_misuse_of_closed_connections(void **state)
{
    struct sockaddr_in address;
    socklen_t len = sizeof(address);

    (void)state;
    start_server(NULL, NULL, &server_handlers);
    int fd = client();
    want_connects = 1;
    pump_until(connects_reached);
    sxe_conn_t *conn = seen.last_conn;
    sxe_conn_set_user(conn, &seen);
    assert_ptr_equal(sxe_conn_user(conn), &seen);
    assert_int_equal(sxe_conn_index(conn), (uint32_t)sxe_conn_id(conn));
    sxe_conn_close(conn);
    assert_int_equal(sxe_conn_peer(conn, (struct sockaddr *)&address, &len), -EBADF);
    assert_int_equal(sxe_conn_local(conn, (struct sockaddr *)&address, &len), -EBADF);
    assert_int_equal(sxe_conn_sendfile(conn, 0, 0, 1), -EPIPE);
    assert_int_equal(sxe_conn_shutdown(conn), -EPIPE);
    assert_int_equal(sxe_conn_send_fd(conn, 0), -EPIPE);
    assert_int_equal(
        sxe_udp_send(conn, "x", 1, (struct sockaddr *)&server_address, sizeof(server_address)),
        -EBADF);
    assert_int_equal(sxe_conn_hand_off(listener, conn), -EPIPE);
    assert_int_equal(sxe_conn_pause(conn), -EPIPE);
    assert_int_equal(sxe_conn_resume(conn), -EPIPE);
    assert_int_equal(sxe_conn_pause(listener), -EPIPE);
    close(fd);

    sxe__sys_fail(SXE_SYS_fcntl, 1, 1, EBADF);
    int spare = dup(0);
    assert_int_equal(sxe_conn_adopt(loop, &conn, spare, &server_handlers, NULL), -EBADF);
    assert_int_equal(fcntl(spare, F_GETFD), -1); /* adopt closed it */
    sxe__sys_fail(SXE_SYS_socketpair, 1, 1, EMFILE);
    sxe_conn_t *a, *b;
    assert_int_equal(sxe_conn_pair(loop, &a, &b, 0, &server_handlers, NULL), -EMFILE);
}

/* Every reason's name, and "?" just past the last and below the first. */
static void test_close_reason_names(void **state)
{
    static const char *const names[] = {
        [SXE_CLOSE_LOCAL] = "local",          [SXE_CLOSE_PEER] = "peer",
        [SXE_CLOSE_ERROR] = "error",          [SXE_CLOSE_TIMEOUT] = "timeout",
        [SXE_CLOSE_EVICTED] = "evicted",      [SXE_CLOSE_NO_BUFFER] = "no buffer",
        [SXE_CLOSE_OVERFLOW] = "overflow",    [SXE_CLOSE_SHUTDOWN] = "shutdown",
        [SXE_CLOSE_HANDED_OFF] = "handed off"};

    (void)state;
    for (int reason = 0; reason <= SXE_CLOSE_HANDED_OFF; reason++) {
        assert_string_equal(sxe_close_reason_name((enum sxe_close_reason)reason), names[reason]);
    }
    assert_string_equal(sxe_close_reason_name((enum sxe_close_reason)(SXE_CLOSE_HANDED_OFF + 1)),
                        "?");
    assert_string_equal(sxe_close_reason_name((enum sxe_close_reason)99), "?");
    assert_string_equal(sxe_close_reason_name((enum sxe_close_reason) - 1), "?");
}

/* io_uring: the next completion of one kernel opcode fails with an errno; the rest pass. */
static unsigned failing_opcode;
static int failing_errno;
static int (*real_result)(unsigned op, int res);

static int result_failing_once(unsigned op, int res)
{
    if (failing_errno != 0 && op == failing_opcode) {
        errno = failing_errno;
        failing_errno = 0;
        return -1;
    }
    return real_result(op, res);
}

static void fail_next_completion(unsigned opcode, int err)
{
    real_result = real_result != NULL ? real_result : sxe__sys.io_uring_result;
    failing_opcode = opcode;
    failing_errno = err;
    sxe__sys.io_uring_result = result_failing_once;
}

/*
 * io_uring: a receive, a send or an accept that the kernel completes with an error. A failed
 * receive or send closes its connection alone, with the error; a failed accept (out of files)
 * is counted, and the listener goes on accepting.
 */
static void test_uring_completion_faults(void **state)
{
    (void)state;
    if (!sxe_test_uring()) {
        print_message("skipped on epoll: io_uring completions (epoll: test_read_faults)\n");
        skip();
    }
    start_server(NULL, NULL, &server_handlers);
    int a = client();
    int b = client();
    want_connects = 2;
    pump_until(connects_reached);

    fail_next_completion(IORING_OP_RECV, ECONNRESET);
    send_all(a, request, sizeof(request) - 1);
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.last_err, ECONNRESET);
    send_all(b, request, sizeof(request) - 1);
    expect_reply(b, 1);

    fail_next_completion(IORING_OP_SEND, EPIPE);
    send_all(b, request, sizeof(request) - 1);
    want_closes = 2;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.last_err, EPIPE);
    close(a);
    close(b);

    struct sxe_loop_stats stats;
    fail_next_completion(IORING_OP_ACCEPT, EMFILE);
    int c = client();
    int d = client();
    want_connects = 3;
    pump_until(connects_reached);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.accept_errors, 1);
    send_all(d, request, sizeof(request) - 1);
    expect_reply(d, 1);
    close(c);
    close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_accept_faults, teardown),
        cmocka_unit_test_teardown(test_read_faults, teardown),
        cmocka_unit_test_teardown(test_write_faults, teardown),
        cmocka_unit_test_teardown(test_direct_send_faults, teardown),
        cmocka_unit_test_teardown(test_epoll_wait_eintr, teardown),
        cmocka_unit_test_teardown(test_epoll_waits_to_the_nanosecond, teardown),
        cmocka_unit_test_teardown(test_stale_events_are_dropped, teardown),
        cmocka_unit_test_teardown(test_connect_errors, teardown),
        cmocka_unit_test_teardown(test_misuse_of_closed_connections, teardown),
        cmocka_unit_test_teardown(test_short_sends_across_buffers, teardown),
        cmocka_unit_test_teardown(test_a_reused_slot_is_not_read_for_its_old_connection, teardown),
        cmocka_unit_test_teardown(test_failed_write_on_a_ready_connection_spares_the_others,
                                  teardown),
        cmocka_unit_test_teardown(test_close_reason_names, teardown),
        cmocka_unit_test_teardown(test_uring_completion_faults, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
