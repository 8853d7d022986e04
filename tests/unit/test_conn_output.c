/*
 * Output and input under pressure: no buffer for input or output, large bursts, shutdown and
 * close with output queued, writes by reference, pause and resume. Input a paused or backed-up
 * connection cannot take yet: test_conn_held.c. Harness: conn_test.h.
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
#include "sxe/timer.h"
#include "sxe/udp.h"
#include "sxe_test.h"
#include "sys.h"

#include "conn_test.h"

/* No free buffer for partial input: that connection closes, the others go on. */
static void test_no_buffer_for_input(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = consume_in_threes, .on_close = on_close};
    struct sxe_loop_options options = {.buffers = 1, .buffer_size = 1024};
    struct sxe_test_capture capture;

    (void)state;
    start_server(&options, NULL, &handlers);
    int a = client();
    int b = client();
    want_connects = 2;
    pump_until(connects_reached);
    send_all(a, "xx", 2); /* a keeps 2 bytes: the only buffer */
    pump();
    sxe_test_capture_start(&capture);
    send_all(b, "yy", 2);
    want_closes = 1;
    pump_until(closes_reached);
    sxe_test_capture_stop();
    assert_int_equal(seen.last_reason, SXE_CLOSE_NO_BUFFER);
    assert_int_equal(seen.last_err, 0); /* err is for SXE_CLOSE_ERROR only */
    assert_non_null(strstr(capture.text, "no free buffer to keep partial input"));
    send_all(a, "x", 1); /* a completes its three and goes on */
    pump();
    assert_memory_equal(seen.input, "xxx", 3);
    close(a);
    close(b);
}

/* No free buffer for what the socket did not take: the connection closes after the callback. */
static void flood(sxe_conn_t *conn)
{
    static char big[200000];
    int small = 4096;

    seen.connects++;
    assert_int_equal(setsockopt(sxe_conn_fd(conn), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
                     0);
    /* The loop's only buffer is taken, so the remainder cannot be queued. */
    conn->loop->buffers_free = 0;
    assert_int_equal(sxe_conn_write(conn, big, sizeof(big)), -ENOBUFS);
    conn->loop->buffers_free = 1;
}

static void test_no_buffer_for_output(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = flood, .on_close = on_close};
    struct sxe_loop_options options = {.buffers = 1, .buffer_size = 65536};

    (void)state;
    start_server(&options, NULL, &handlers);
    int fd = client_with_window(4096);
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.last_reason, SXE_CLOSE_NO_BUFFER);
    assert_int_equal(seen.last_err, 0); /* err is for SXE_CLOSE_ERROR only */
    struct sxe_loop_stats stats;
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.no_buffer, 1);
    close(fd);
}

/* A burst larger than READS_PER_TURN buffers is read over several turns, in order, whole. */
static void test_large_burst_is_read_over_turns(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_read = record_input};
    struct sxe_loop_options options = {.buffer_size = 256};
    char burst[4000];

    (void)state;
    start_server(&options, NULL, &handlers);
    int fd = client();
    for (size_t i = 0; i < sizeof(burst); i++) {
        burst[i] = (char)('A' + i % 26);
    }
    send_all(fd, burst, sizeof(burst));
    uint64_t give_up = sxe_clock_mono_ns() + 2 * SXE_NS_PER_SEC;
    while (seen.input_len < sizeof(burst)) {
        assert_true(sxe_loop_run_once(loop, SXE_NS_PER_MSEC) >= 0);
        assert_true(sxe_clock_mono_ns() < give_up);
    }
    assert_memory_equal(seen.input, burst, sizeof(burst));
    close(fd);
}

/* Reads until the server ends the stream, turning its loop, for 5 s at most; returns the count. */
static size_t receive_to_end(int fd)
{
    static char got[250000];
    size_t have = 0;
    uint64_t give_up = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;

    for (;;) {
        pump();
        ssize_t n = recv(fd, got + have, sizeof(got) - have, MSG_DONTWAIT);
        if (n == 0) {
            return have;
        }
        if (n > 0) {
            have += (size_t)n;
        }
        assert_true(sxe_clock_mono_ns() < give_up);
    }
}

/* Shutdown with output queued: the peer gets all of it, then the end of the stream. */
/* Queues 200,000 bytes of fill behind a 4 KB socket buffer, and asks for a half-close after. */
static void queue_block_then_shutdown(sxe_conn_t *conn, char fill)
{
    static char block[200000];
    int small = 4096;

    memset(block, fill, sizeof(block));
    assert_int_equal(setsockopt(sxe_conn_fd(conn), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
                     0);
    assert_true(sxe_conn_write(conn, block, sizeof(block)) >= 0);
    assert_true(sxe_conn_queued(conn) > 0);
    assert_int_equal(sxe_conn_shutdown(conn), 0);
}

static void write_then_shutdown(sxe_conn_t *conn)
{
    seen.connects++;
    queue_block_then_shutdown(conn, 'z');
}

static void test_shutdown_after_queued_output(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = write_then_shutdown};
    struct sxe_loop_options options = {.buffer_size = 16384, .write_limit = 262144};

    (void)state;
    start_server(&options, NULL, &handlers);
    int fd = client_with_window(8192);
    assert_int_equal(receive_to_end(fd), 200000);
    close(fd);
}

/* Close once sent, from on_read: the peer gets the reply, then the end of the stream, without
 * the server half-closing or reading again; later writes are refused. */
static size_t reply_and_close(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)data;
    assert_true(sxe_conn_write(conn, reply, sizeof(reply) - 1) >= 0);
    assert_int_equal(sxe_conn_close_when_sent(conn), 0);
    assert_int_equal(seen.closes, 0); /* inside on_read: after it returns */
    assert_int_equal(sxe_conn_write(conn, "x", 1), -EPIPE);
    assert_int_equal(sxe_conn_close_when_sent(conn), -EPIPE);
    seen.requests++;
    return len;
}

static void test_close_when_sent_from_on_read(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_read = reply_and_close,
                                                      .on_close = on_close};

    (void)state;
    start_server(NULL, NULL, &handlers);
    sxe__sys_count(SXE_SYS_shutdown);
    sxe__sys_count(SXE_SYS_recv);
    int fd = client();
    send_all(fd, request, sizeof(request) - 1);
    expect_reply(fd, 1);
    expect_closed(fd);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.last_reason, SXE_CLOSE_LOCAL);
    assert_int_equal(sxe__sys_calls(SXE_SYS_shutdown), 0);
    if (!sxe_test_uring()) {                               /* io_uring receives in the kernel */
        assert_int_equal(sxe__sys_calls(SXE_SYS_recv), 1); /* no second read for the peer's end */
    }
    close(fd);
}

/* Outside on_read with nothing queued, the connection is closed at once (its on_close comes when
 * the callback returns); with a queue, and a pending shutdown it supersedes, the close waits for
 * the queue to drain and the peer gets every byte. */
static void close_now_or_when_drained(sxe_conn_t *conn)
{
    seen.connects++;
    if (seen.connects == 1) {
        uint64_t id = sxe_conn_id(conn);
        assert_int_equal(sxe_conn_close_when_sent(conn), 0);
        assert_null(sxe_conn_from_id(sxe_conn_loop(conn), id));
        assert_int_equal(sxe_conn_write(conn, "x", 1), -EPIPE);
        assert_int_equal(seen.closes, 0);
        return;
    }
    queue_block_then_shutdown(conn, 'q');
    assert_int_equal(sxe_conn_close_when_sent(conn), 0);
    assert_int_equal(seen.closes, 1); /* still open: output is queued */
}

static void test_close_when_sent_outside_on_read(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = close_now_or_when_drained,
                                                      .on_close = on_close};
    struct sxe_loop_options options = {.buffer_size = 16384, .write_limit = 262144};

    (void)state;
    start_server(&options, NULL, &handlers);
    sxe__sys_count(SXE_SYS_shutdown);
    int first = client();
    want_connects = 1;
    pump_until(connects_reached);
    expect_closed(first);
    close(first);

    int fd = client_with_window(8192);
    assert_int_equal(receive_to_end(fd), 200000);
    assert_int_equal(seen.closes, 2);
    assert_int_equal(seen.last_reason, SXE_CLOSE_LOCAL);
    assert_int_equal(sxe__sys_calls(SXE_SYS_shutdown), 0);
    close(fd);
}

/*
 * Referenced output (sxe_conn_write_ref, sxe_conn_sendfile_ref): the caller's bytes go without a
 * copy, gathered with the replies around them inside on_read, and each release comes exactly
 * once: at once when nothing stays queued, else when the bytes are sent or the connection closes.
 */
static unsigned released;
static unsigned max_iov; /* the most buffers one sendmsg carried */
static char referenced[1 << 20];
static void (*connect_action)(sxe_conn_t *conn);

static void count_release(void *arg)
{
    (*(unsigned *)arg)++;
}

static ssize_t sendmsg_counting(int fd, const struct msghdr *message, int flags)
{
    max_iov = message->msg_iovlen > max_iov ? (unsigned)message->msg_iovlen : max_iov;
    return sendmsg(fd, message, flags);
}

static void act_on_connect(sxe_conn_t *conn)
{
    seen.connects++;
    seen.last_conn = conn;
    if (connect_action != NULL) {
        connect_action(conn);
    }
}

static size_t answer_with_a_reference(sxe_conn_t *conn, const char *data, size_t len)
{
    uint32_t buffers_free = loop->buffers_free;

    (void)data;
    assert_int_equal(sxe_conn_write(conn, "head:", 5), 0);
    assert_int_equal(sxe_conn_write_ref(conn, referenced, 2000, count_release, &released), 0);
    assert_int_equal(released, 0); /* queued, to leave with the replies around it */
    assert_int_equal(sxe_conn_write(conn, ":mid:", 5), 0);
    assert_int_equal(sxe_conn_write_ref(conn, referenced, 2000, count_release, &released), 0);
    assert_int_equal(sxe_conn_write(conn, ":tail", 5), 0);
    /* The copies around the references share one buffer, as they would without them. */
    assert_int_equal(loop->buffers_free, buffers_free - 1);
    /* A short reference is copied, and released at once. */
    assert_int_equal(sxe_conn_write_ref(conn, "!", 1, count_release, &released), 0);
    assert_int_equal(released, 1);
    return len;
}

static void write_now(sxe_conn_t *conn)
{
    assert_int_equal(sxe_conn_write_ref(conn, "now", 3, count_release, &released), 0);
    assert_int_equal(released, 1); /* all sent: released before the call returned */
}

static void write_a_megabyte(sxe_conn_t *conn)
{
    int small = 4096;
    assert_int_equal(setsockopt(sxe_conn_fd(conn), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
                     0);
    assert_true(
        sxe_conn_write_ref(conn, referenced, sizeof(referenced), count_release, &released) >= 0);
    assert_int_equal(released, 0);
    assert_true(sxe_conn_queued(conn) > 0);
    /* Copies after it meet write_limit, which counts all that is queued. */
    assert_int_equal(sxe_conn_write(conn, "end", 3), -ENOBUFS);
}

static void send_file_by_ref(sxe_conn_t *conn)
{
    assert_true(sxe_conn_sendfile_ref(conn, file_fd, 0, 5, count_release, &released) >= 0);
}

/* A send fails with EPERM (a firewall's answer, and errno 1): the write says so, and so does the
 * next one, with nothing queued. */
static void write_through_a_failing_send(sxe_conn_t *conn)
{
    sxe__sys_fail(SXE_SYS_send, 1, 1, EPERM);
    assert_int_equal(sxe_conn_write_ref(conn, "lost", 4, count_release, &released), -EPERM);
    assert_int_equal(released, 1);
    assert_int_equal(sxe_conn_write(conn, "more", 4), -EPERM);
    assert_int_equal(sxe_conn_queued(conn), 0);
}

/* Reads len bytes into got, turning the server loop meanwhile. */
static void receive_exactly(int fd, char *got, size_t len)
{
    size_t have = 0;
    uint64_t give_up = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;

    while (have < len) {
        pump();
        ssize_t n = recv(fd, got + have, len - have, MSG_DONTWAIT);
        assert_true(n != 0);
        have += n > 0 ? (size_t)n : 0;
        assert_true(sxe_clock_mono_ns() < give_up);
    }
}

static void test_write_ref(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = act_on_connect, .on_read = answer_with_a_reference, .on_close = on_close};
    static char got[sizeof(referenced)];
    char path[] = "/tmp/sxe-test-ref-XXXXXX";

    (void)state;
    for (size_t i = 0; i < sizeof(referenced); i++) {
        referenced[i] = (char)('a' + i % 26);
    }
    start_server(NULL, NULL, &handlers);

    /* Inside on_read: one sendmsg carries the copies and the referenced bodies between them. */
    sxe__sys.sendmsg = sendmsg_counting;
    int fd = client();
    static char expected[4016];
    memcpy(expected, "head:", 5);
    memcpy(expected + 5, referenced, 2000);
    memcpy(expected + 2005, ":mid:", 5);
    memcpy(expected + 2010, referenced, 2000);
    memcpy(expected + 4010, ":tail!", 6);
    send_all(fd, request, sizeof(request) - 1);
    expect_bytes(fd, expected, 4016);
    assert_int_equal(released, 3);
    if (!sxe_test_uring()) { /* io_uring submits the sendmsg itself */
        assert_int_equal(max_iov, 5);
    }
    close(fd);

    /* Outside on_read, when the socket takes it all. */
    released = 0;
    connect_action = write_now;
    fd = client();
    expect_bytes(fd, "now", 3);
    close(fd);

    /* A megabyte behind a small socket buffer: released once the peer has read it all. */
    released = 0;
    connect_action = write_a_megabyte;
    fd = client_with_window(8192);
    want_connects = seen.connects + 1;
    pump_until(connects_reached);
    assert_int_equal(released, 0);
    receive_exactly(fd, got, sizeof(got));
    assert_memory_equal(got, referenced, sizeof(referenced));
    assert_int_equal(released, 1);
    close(fd);

    /* The peer goes with the megabyte still queued: released with the connection. */
    released = 0;
    fd = client_with_window(8192);
    want_connects = seen.connects + 1;
    pump_until(connects_reached);
    struct linger reset = {.l_onoff = 1, .l_linger = 0};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)), 0);
    close(fd);
    want_closes = seen.closes + 1;
    pump_until(closes_reached);
    assert_int_equal(released, 1);

    /* On a closed connection, or with nothing to send: refused or done, and released at once. */
    released = 0;
    assert_int_equal(sxe_conn_write_ref(seen.last_conn, "x", 1, count_release, &released), -EPIPE);
    assert_int_equal(sxe_conn_sendfile_ref(seen.last_conn, 0, 0, 1, count_release, &released),
                     -EPIPE);
    assert_int_equal(released, 2);

    /* A send that fails: the error, and released. */
    released = 0;
    connect_action = write_through_a_failing_send;
    fd = client();
    want_closes = seen.closes + 1;
    pump_until(closes_reached);
    assert_int_equal(released, 1);
    assert_int_equal(seen.last_err, EPERM);
    close(fd);
    sxe__sys_reset();

    /* A file range: released once sent; an empty one at once. */
    file_fd = mkstemp(path);
    assert_true(file_fd >= 0);
    unlink(path);
    assert_int_equal(write(file_fd, "file!", 5), 5);
    released = 0;
    connect_action = send_file_by_ref;
    fd = client();
    expect_bytes(fd, "file!", 5);
    assert_int_equal(released, 1);
    assert_int_equal(sxe_conn_sendfile_ref(seen.last_conn, file_fd, 0, 0, count_release, &released),
                     0);
    assert_int_equal(sxe_conn_write_ref(seen.last_conn, "", 0, count_release, &released), 0);
    assert_int_equal(sxe_conn_write_ref(seen.last_conn, "y", 1, NULL, NULL), 0); /* no release */
    assert_int_equal(released, 3);
    expect_bytes(fd, "y", 1);
    close(fd);
    close(file_fd);
    connect_action = NULL;
}

/* Answers one request per call, then pauses: the rest waits for sxe_conn_resume(). */
static size_t serve_one_and_pause(sxe_conn_t *conn, const char *data, size_t len)
{
    const char *end = memmem(data, len, "\r\n\r\n", 4);

    if (end == NULL) {
        return 0;
    }
    assert_true(sxe_conn_write(conn, reply, sizeof(reply) - 1) >= 0);
    seen.requests++;
    assert_int_equal(sxe_conn_pause(conn), 0);
    return (size_t)(end - data) + 4;
}

static void count_eof(sxe_conn_t *conn)
{
    seen.eofs++;
    sxe_conn_close(conn);
}

static void count_drain(sxe_conn_t *conn)
{
    (void)conn;
    seen.drains++;
}

/*
 * A paused connection is not read: its bytes wait in the socket, and on_drained says when its
 * queued output has gone. Resuming offers the kept input first, with no new bytes needed, then
 * reads the socket to the end, an end of stream that came while paused included.
 */
static void test_pause_and_resume(void **state)
{
    static const struct sxe_conn_handlers handlers = {.on_connect = on_connect,
                                                      .on_read = serve_one_and_pause,
                                                      .on_eof = count_eof,
                                                      .on_drained = count_drain,
                                                      .on_close = on_close};
    static const char three[] =
        "GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n";
    char replies[4 * sizeof(reply)];

    (void)state;
    start_server(NULL, NULL, &handlers);
    int fd = client();
    send_all(fd, three, sizeof(three) - 1);
    want_requests = 1;
    pump_until(requests_reached);
    sxe_conn_t *conn = seen.last_conn;
    pump(); /* a completion backend says the reply has gone a turn later */
    assert_int_equal(seen.drains, 1); /* paused with a reply queued: told when it has gone */

    /* Paused with two requests kept: more bytes and an end of stream are left in the socket. */
    send_all(fd, request, sizeof(request) - 1);
    shutdown(fd, SHUT_WR);
    sxe__sys_count(SXE_SYS_recv);
    pump();
    assert_int_equal(seen.requests, 1);
    assert_int_equal(sxe__sys_calls(SXE_SYS_recv), 0);

    /* Each resume answers one more: the two kept ones without a read, then the one that waited. */
    assert_int_equal(sxe_conn_resume(conn), 0);
    pump();
    assert_int_equal(seen.requests, 2);
    assert_int_equal(sxe__sys_calls(SXE_SYS_recv), 0);
    assert_int_equal(sxe_conn_resume(conn), 0);
    assert_int_equal(sxe_conn_resume(conn), 0); /* twice: the same as once */
    pump();
    assert_int_equal(seen.requests, 3);
    assert_int_equal(sxe__sys_calls(SXE_SYS_recv), 0);
    assert_int_equal(seen.eofs, 0);
    assert_int_equal(sxe_conn_resume(conn), 0);
    pump();
    assert_int_equal(seen.requests, 4);
    assert_int_equal(seen.eofs, 0);

    /* The last resume finds the end of stream, though no edge came for it after the pause. */
    assert_int_equal(sxe_conn_resume(conn), 0);
    want_closes = 1;
    pump_until(closes_reached);
    assert_int_equal(seen.eofs, 1);
    size_t got = 0;
    for (ssize_t n = 1; n != 0;) { /* a completion backend sends in the loop's turns */
        pump();
        n = recv(fd, replies + got, sizeof(replies) - got, MSG_DONTWAIT);
        got += n > 0 ? (size_t)n : 0;
        assert_true(n >= 0 || errno == EAGAIN);
    }
    assert_int_equal(got, 4 * (sizeof(reply) - 1));
    close(fd);
}

/*
 * A connection closed while the kernel still sends from its queue (io_uring) is closed for the
 * program at once (on_close, its id no longer found). The bytes the kernel holds still go out, as
 * a readiness backend's sent bytes would; the slot and its buffers come back when that send ends,
 * or, for a peer that never reads, when the CLOSING timeout shuts the socket. The table is sound
 * at every turn. On epoll the close is immediate and the same checks hold.
 */
static size_t reply_big(sxe_conn_t *conn, const char *data, size_t len)
{
    static char big[60000];

    (void)data;
    memset(big, 'x', sizeof(big));
    for (int i = 0; i < 16; i++) {
        assert_true(sxe_conn_write(conn, big, sizeof(big)) >= 0);
    }
    seen.last_conn = conn;
    return len;
}

static void close_with_output_queued(int fd)
{
    struct sxe_loop_stats stats;

    seen.last_conn = NULL;
    send_all(fd, request, sizeof(request) - 1);
    for (int i = 0; i < 20 && seen.last_conn == NULL; i++) {
        pump();
    }
    sxe_conn_t *conn = seen.last_conn;
    assert_non_null(conn);
    uint64_t id = sxe_conn_id(conn);
    assert_true(sxe_conn_queued(conn) > 0);
    unsigned closes = seen.closes;
    sxe_conn_close(conn);
    assert_int_equal(seen.closes, closes + 1);
    assert_null(sxe_conn_from_id(loop, id));
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.open, 1); /* the listener */
    assert_int_equal(sxe__conn_validate(loop), 0);
}

/* A small send buffer, so that the kernel cannot take all of reply_big at once. */
static void connect_small_send_buffer(sxe_conn_t *conn)
{
    int size = 4096;

    assert_int_equal(setsockopt(sxe_conn_fd(conn), SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)), 0);
    on_connect(conn);
}

static void test_close_while_a_send_is_pending(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = connect_small_send_buffer, .on_read = reply_big, .on_close = on_close};
    struct sxe_loop_stats stats;
    char got[65536];
    size_t total = 0;

    (void)state;
    sxe__sys_clock_fake(100 * SXE_NS_PER_SEC, 0);
    start_server(&(struct sxe_loop_options){.buffer_size = 65536, .write_limit = 1 << 20}, NULL,
                 &handlers);

    /* A reader: what the kernel took arrives, then the end of the stream. */
    int fd = client_with_window(4096);
    close_with_output_queued(fd);
    for (ssize_t n = 1; n > 0;) {
        pump();
        n = recv(fd, got, sizeof(got), 0);
        total += n > 0 ? (size_t)n : 0;
    }
    assert_true(total > 0);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.buffers_in_use, 0);
    close(fd);

    /* A peer that never reads: the CLOSING timeout ends the send. */
    fd = client_with_window(4096);
    close_with_output_queued(fd);
    sxe__sys_clock_advance(SXE__CLOSING_TIMEOUT + 1);
    sxe_loop_stats(loop, &stats);
    for (int i = 0; i < 20 && stats.buffers_in_use > 0; i++) {
        pump();
        sxe_loop_stats(loop, &stats);
    }
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.buffers_in_use, 0);
    assert_int_equal(seen.closes, 2);
    close(fd);
}

/*
 * The peer's end of stream arrives while the connection's output is at high_water: on_eof still
 * comes (it used to wait, on io_uring, for an event that never came).
 */
static size_t reply_40k(sxe_conn_t *conn, const char *data, size_t len)
{
    static char big[40000];

    (void)data;
    assert_true(sxe_conn_write(conn, big, sizeof(big)) >= 0);
    return len;
}

static void test_end_of_stream_behind_a_full_queue(void **state)
{
    static const struct sxe_conn_handlers handlers = {
        .on_connect = on_connect, .on_read = reply_40k, .on_eof = count_eof, .on_close = on_close};
    char got[65536];
    size_t total = 0;

    (void)state;
    start_server(NULL, NULL, &handlers);
    int fd = client();
    send_all(fd, request, sizeof(request) - 1);
    shutdown(fd, SHUT_WR);
    for (ssize_t n = 1; n != 0;) {
        pump();
        n = recv(fd, got, sizeof(got), MSG_DONTWAIT);
        total += n > 0 ? (size_t)n : 0;
        assert_true(n >= 0 || errno == EAGAIN);
    }
    assert_int_equal(total, 40000);
    assert_int_equal(seen.eofs, 1);
    assert_int_equal(seen.closes, 1);
    close(fd);
}

/* Uncorking a connection that is not corked does nothing: a connection whose peer reads nothing
 * is not kept from its write timeout by it (there is nothing to send, so no progress). */
static void uncork_it(sxe_timer_t *timer, void *arg)
{
    (void)timer;
    sxe_conn_uncork(arg);
}

static void test_uncork_of_an_uncorked_connection(void **state)
{
    struct sxe_loop_options options = {.write_timeout = 100 * SXE_NS_PER_MSEC};
    static char block[16384];
    sxe_timer_t timer;

    (void)state;
    start_server(&options, NULL, &server_handlers);
    int fd = client_with_window(4096);
    want_connects = 1;
    pump_until(connects_reached);
    sxe_conn_t *conn = seen.last_conn;
    for (int i = 0; i < 10000 && !sxe_conn_backed_up(conn); i++) {
        assert_true(sxe_conn_write(conn, block, sizeof(block)) >= 0);
    }
    assert_true(sxe_conn_backed_up(conn));
    sxe_timer_init(&timer, uncork_it, conn);
    assert_int_equal(sxe_timer_start(loop, &timer, 20 * SXE_NS_PER_MSEC, 20 * SXE_NS_PER_MSEC), 0);
    uint64_t started = sxe_clock_mono_ns();
    want_closes = 1;
    pump_until(closes_reached);
    sxe_timer_stop(loop, &timer);
    assert_int_equal(seen.last_reason, SXE_CLOSE_TIMEOUT);
    assert_true(sxe_clock_mono_ns() - started < 2 * SXE_NS_PER_SEC);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_no_buffer_for_input, teardown),
        cmocka_unit_test_teardown(test_no_buffer_for_output, teardown),
        cmocka_unit_test_teardown(test_large_burst_is_read_over_turns, teardown),
        cmocka_unit_test_teardown(test_shutdown_after_queued_output, teardown),
        cmocka_unit_test_teardown(test_close_when_sent_from_on_read, teardown),
        cmocka_unit_test_teardown(test_close_when_sent_outside_on_read, teardown),
        cmocka_unit_test_teardown(test_write_ref, teardown),
        cmocka_unit_test_teardown(test_pause_and_resume, teardown),
        cmocka_unit_test_teardown(test_close_while_a_send_is_pending, teardown),
        cmocka_unit_test_teardown(test_end_of_stream_behind_a_full_queue, teardown),
        cmocka_unit_test_teardown(test_uncork_of_an_uncorked_connection, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
