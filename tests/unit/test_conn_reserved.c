/*
 * Connections whose address comes later (sxe_conn_reserve(), sxe_conn_connect_reserved()) and
 * connections failed by the program (sxe_conn_fail()): a reserved connection connects, to IPv4 or
 * IPv6, keeping its descriptor's number; closes, times out and fails as any connection does; is
 * still reserved after a connect that could not begin; moves on to another address when a
 * connect with a plan is refused; counts in the table; and the calls refuse what is not theirs.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/loop.h"
#include "sxe/tls.h"
#include "sxe_test.h"
#include "sys.h"

static sxe_loop_t *loop;

static struct {
    int connects, closes, err, bytes;
    enum sxe_close_reason reason;
} seen;

static void on_connect(sxe_conn_t *conn)
{
    seen.connects++;
    assert_int_equal(sxe_conn_write(conn, "hello", 5), 0);
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    (void)conn;
    seen.closes++;
    seen.reason = reason;
    seen.err = err;
}

static const struct sxe_conn_handlers client_handlers = {.on_connect = on_connect,
                                                         .on_close = on_close};

static size_t server_read(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)conn, (void)data;
    seen.bytes += (int)len;
    return len;
}

static const struct sxe_conn_handlers server_handlers = {.on_read = server_read};

static int setup(void **state)
{
    struct sxe_loop_options options = {.connections = 8, .connect_timeout = SXE_NS_PER_SEC};

    (void)state;
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_loop_destroy(loop);
    return 0;
}

/* A listener at host (an IPv4 or IPv6 address) on a free port; its address into *at. */
static void listen_at(const char *host, struct sockaddr_storage *at, socklen_t *len)
{
    sxe_conn_t *listener;
    char text[64];

    snprintf(text, sizeof(text), strchr(host, ':') != NULL ? "[%s]:0" : "%s:0", host);
    assert_int_equal(sxe_address_parse(text, -1, at, len), 0);
    assert_int_equal(
        sxe_conn_listen(loop, &listener, (struct sockaddr *)at, *len, NULL, &server_handlers, NULL),
        0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)at, len), 0);
}

static void run_until(const int *counter, int count)
{
    for (int turn = 0; turn < 300 && *counter < count; turn++) {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
    assert_int_equal(*counter, count);
}

/* Reserved, then connected to IPv4 and to IPv6 (a socket of another family, at the same
 * number); bytes written at on_connect arrive. */
static void test_a_reserved_connection_connects(void **state)
{
    const char *hosts[] = {"127.0.0.1", "::1"};
    struct sockaddr_storage at;
    socklen_t len;
    sxe_conn_t *conn;

    (void)state;
    for (int i = 0; i < 2; i++) {
        listen_at(hosts[i], &at, &len);
        assert_int_equal(sxe_conn_reserve(loop, &conn, &client_handlers, NULL), 0);
        int fd = sxe_conn_fd(conn);
        assert_true(fd >= 0);
        assert_int_equal(sxe_conn_write(conn, "x", 1), -EPIPE); /* not up yet */
        /* Its socket is a placeholder: what would act on it waits for on_connect. */
        assert_int_equal(sxe_conn_pause(conn), -ENOTCONN);
        assert_int_equal(sxe_conn_resume(conn), -ENOTCONN);
        assert_int_equal(sxe_conn_set_nodelay(conn), -ENOTCONN);
        assert_int_equal(sxe_conn_connect_reserved(conn, (struct sockaddr *)&at, len, NULL), 0);
        assert_int_equal(sxe_conn_fd(conn), fd);
        run_until(&seen.connects, i + 1);
        run_until(&seen.bytes, 5 * (i + 1));
        struct sockaddr_storage peer;
        socklen_t peer_len = sizeof(peer);
        assert_int_equal(sxe_conn_peer(conn, (struct sockaddr *)&peer, &peer_len), 0);
        assert_int_equal(peer.ss_family, at.ss_family);
        sxe_conn_close(conn);
    }
    assert_int_equal(seen.closes, 2);
}

/* Closed, timed out or failed before an address came: on_close says which; the slots are free. */
static void test_a_reserved_connection_ends_as_any(void **state)
{
    struct sxe_loop_stats stats;
    sxe_conn_t *conn;

    (void)state;
    assert_int_equal(sxe_conn_reserve(loop, &conn, &client_handlers, NULL), 0);
    sxe_conn_close(conn); /* outside a turn: at once */
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.reason, SXE_CLOSE_LOCAL);
    assert_int_equal(sxe_conn_reserve(loop, &conn, &client_handlers, NULL), 0);
    sxe_conn_fail(conn, ENOENT);
    assert_int_equal(seen.reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.err, ENOENT);
    assert_int_equal(sxe_conn_reserve(loop, &conn, &client_handlers, NULL), 0);
    uint64_t began = sxe_clock_mono_ns();
    run_until(&seen.closes, 3); /* connect_timeout: a second */
    assert_int_equal(seen.reason, SXE_CLOSE_TIMEOUT);
    assert_true(sxe_clock_mono_ns() - began >= SXE_NS_PER_SEC / 2);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.open, 0);
    assert_int_equal(seen.connects, 0);
}

/* A connect that cannot begin (a source address this host lacks) leaves it reserved: the next
 * address is tried on the same connection. */
static void test_a_connect_that_cannot_begin_leaves_it_reserved(void **state)
{
    struct sockaddr_in nowhere = {.sin_family = AF_INET};
    struct sockaddr_storage at;
    socklen_t len;
    sxe_conn_t *conn;

    (void)state;
    inet_pton(AF_INET, "192.0.2.1", &nowhere.sin_addr); /* TEST-NET-1: not this host's */
    listen_at("127.0.0.1", &at, &len);
    assert_int_equal(sxe_conn_reserve(loop, &conn, &client_handlers, NULL), 0);
    struct sxe_connect_options from = {.source = (struct sockaddr *)&nowhere,
                                       .source_len = sizeof(nowhere)};
    assert_int_equal(sxe_conn_connect_reserved(conn, (struct sockaddr *)&at, len, &from),
                     -EADDRNOTAVAIL);
    sxe__sys_fail(SXE_SYS_connect, 1, 1, ENETUNREACH);
    assert_int_equal(sxe_conn_connect_reserved(conn, (struct sockaddr *)&at, len, NULL),
                     -ENETUNREACH);
    sxe_tls_t *tls; /* a TLS session that cannot be made (no server name) refuses first too */
    if (sxe_tls_client_create(&tls, NULL) == 0) {
        struct sxe_connect_options nameless = {.tls = tls, .server_name = ""};
        assert_int_equal(sxe_conn_connect_reserved(conn, (struct sockaddr *)&at, len, &nameless),
                         -EINVAL);
        /* A session made, then a connect that cannot begin: the session goes, it stays. */
        struct sxe_connect_options named = {.tls = tls, .server_name = "localhost"};
        sxe__sys_fail(SXE_SYS_connect, 1, 1, ENETUNREACH);
        assert_int_equal(sxe_conn_connect_reserved(conn, (struct sockaddr *)&at, len, &named),
                         -ENETUNREACH);
        sxe__sys_fail(SXE_SYS_dup3, 1, 1, ENOMEM); /* the new socket cannot take its number */
        assert_int_equal(sxe_conn_connect_reserved(conn, (struct sockaddr *)&at, len, &named),
                         -ENOMEM);
        sxe_tls_destroy(tls);
    }
    sxe__sys_fail(SXE_SYS_dup3, 1, 1, ENOMEM);
    assert_int_equal(sxe_conn_connect_reserved(conn, (struct sockaddr *)&at, len, NULL), -ENOMEM);
    assert_int_equal(seen.closes, 0);
    assert_int_equal(sxe_conn_connect_reserved(conn, (struct sockaddr *)&at, len, NULL), 0);
    run_until(&seen.connects, 1);
    sxe__sys_reset();
}

/* On epoll, the backend refusing to watch the connecting socket: it fails, from the loop. */
static void test_a_connect_the_backend_cannot_watch(void **state)
{
    struct sockaddr_storage at;
    socklen_t len;
    sxe_conn_t *conn;

    (void)state;
    if (sxe_test_uring()) {
        skip(); /* io_uring's watches are its own table's, not a system call's */
    }
    listen_at("127.0.0.1", &at, &len);
    assert_int_equal(sxe_conn_reserve(loop, &conn, &client_handlers, NULL), 0);
    sxe__sys_fail(SXE_SYS_epoll_ctl, 1, 1, ENOMEM);
    assert_int_equal(sxe_conn_connect_reserved(conn, (struct sockaddr *)&at, len, NULL), 0);
    sxe__sys_reset();
    assert_int_equal(seen.closes, 0); /* not from inside the call */
    run_until(&seen.closes, 1);
    assert_int_equal(seen.reason, SXE_CLOSE_ERROR);
    assert_int_equal(seen.err, ENOMEM);
}

/* What a plan (struct sxe_connect_plan) heard, and what it does when a connect fails. */
static struct {
    int calls, errs[4];
    bool closed[4];
    enum { PLAN_NOTHING, PLAN_FAIL, PLAN_NEXT } action;
    struct sockaddr_storage next;
    socklen_t next_len;
} planned;

static void plan_ended(struct sxe_connect_plan *plan, sxe_conn_t *conn, int err)
{
    int call = planned.calls++;

    assert_true(call < 4);
    planned.errs[call] = err;
    planned.closed[call] = sxe_conn_closed(conn);
    if (err == 0 || sxe_conn_closed(conn)) {
        return;
    }
    assert_int_equal(sxe_conn_write(conn, "x", 1), -EPIPE); /* reserved again */
    if (planned.action == PLAN_FAIL) {
        sxe_conn_fail(conn, EHOSTDOWN);
    } else if (planned.action == PLAN_NEXT) { /* once */
        struct sxe_connect_options again = {.plan = plan};
        planned.action = PLAN_NOTHING;
        assert_int_equal(sxe_conn_connect_reserved(conn, (struct sockaddr *)&planned.next,
                                                   planned.next_len, &again),
                         0);
    }
}

static struct sxe_connect_plan plan = {.ended = plan_ended};

/* A port of 127.0.0.1 that refuses connects: a socket bound to it, never listening. @return the
 * socket, for the caller to close. */
static int refusing_at(struct sockaddr_storage *at, socklen_t *len)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&any, sizeof(any)), 0);
    *len = sizeof(*at);
    assert_int_equal(getsockname(fd, (struct sockaddr *)at, len), 0);
    return fd;
}

/* A listener on 127.0.0.1 that never answers another connect: its queue (of one) is full, so it
 * drops their SYNs. Its address into *at, the two connects that fill it into fillers. @return it.
 */
static int unanswering_at(struct sockaddr_storage *at, socklen_t *len, int fillers[2])
{
    int fd = refusing_at(at, len);

    assert_int_equal(listen(fd, 0), 0);
    for (int i = 0; i < 2; i++) {
        fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        (void)connect(fillers[i], (struct sockaddr *)at, *len);
    }
    return fd;
}

static void unanswering_close(int fd, const int fillers[2])
{
    close(fillers[0]);
    close(fillers[1]);
    close(fd);
}

/* A connect refused from the loop, with a plan: the plan moves it on to another address (on the
 * same descriptor's number) and it connects; a plan that begins nothing leaves it to fail with the
 * refusal; a plan may fail it with an error of its own. */
static void test_a_plan_moves_a_refused_connect_on(void **state)
{
    struct sxe_connect_options options = {.plan = &plan};
    struct sockaddr_storage refusing;
    socklen_t refusing_len;
    sxe_conn_t *conn;

    (void)state;
    int bound = refusing_at(&refusing, &refusing_len);
    memset(&planned, 0, sizeof(planned));
    listen_at("127.0.0.1", &planned.next, &planned.next_len);
    planned.action = PLAN_NEXT;
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&refusing, refusing_len,
                                      &options, &client_handlers, NULL),
                     0);
    int fd = sxe_conn_fd(conn);
    run_until(&seen.bytes, 5);
    assert_int_equal(sxe_conn_fd(conn), fd);
    assert_int_equal(planned.calls, 2);
    assert_int_equal(planned.errs[0], ECONNREFUSED);
    assert_int_equal(planned.errs[1], 0); /* connected */
    assert_int_equal(seen.connects, 1);
    assert_int_equal(seen.closes, 0);
    /* Reserved connections whose plans begin nothing, and fail it. */
    for (int action = PLAN_NOTHING; action <= PLAN_FAIL; action++) {
        planned.action = action;
        planned.calls = 0;
        assert_int_equal(sxe_conn_reserve(loop, &conn, &client_handlers, NULL), 0);
        assert_int_equal(
            sxe_conn_connect_reserved(conn, (struct sockaddr *)&refusing, refusing_len, &options),
            0);
        run_until(&seen.closes, action + 1);
        assert_int_equal(seen.reason, SXE_CLOSE_ERROR);
        assert_int_equal(seen.err, action == PLAN_FAIL ? EHOSTDOWN : ECONNREFUSED);
        assert_int_equal(planned.calls, 1);
    }
    /* Moved on to an address that refuses too: no connect is seen, whatever the backend still
     * posted for the first socket. */
    planned.action = PLAN_NEXT;
    planned.calls = 0;
    planned.next = refusing;
    planned.next_len = refusing_len;
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&refusing, refusing_len,
                                      &options, &client_handlers, NULL),
                     0);
    run_until(&seen.closes, 3);
    assert_int_equal(seen.err, ECONNREFUSED);
    assert_int_equal(planned.calls, 2);
    assert_int_equal(seen.connects, 1);
    /* Moved on to an address that does not answer (a listener whose queue is full drops the
     * SYN): what the backend still posted for the refused socket is not taken for the new one. */
    int fillers[2], full = unanswering_at(&planned.next, &planned.next_len, fillers);
    planned.action = PLAN_NEXT;
    planned.calls = 0;
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&refusing, refusing_len,
                                      &options, &client_handlers, NULL),
                     0);
    for (int turn = 0; turn < 10; turn++) {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
    assert_int_equal(planned.calls, 1);
    assert_int_equal(seen.connects, 1); /* still connecting */
    sxe_conn_close(conn);
    assert_int_equal(planned.calls, 2);
    assert_int_equal(planned.errs[1], ECANCELED);
    unanswering_close(full, fillers);
    close(bound);
}

/* A planned connect not up within connect_timeout (a listener whose queue is full drops its SYN):
 * the plan moves it on, and the next address has a time of its own; a plan that begins nothing
 * leaves it to time out, as does a slot that cannot be reserved again. */
static void test_a_plan_moves_a_slow_connect_on(void **state)
{
    struct sxe_loop_options quick = {.connections = 8, .connect_timeout = 100 * SXE_NS_PER_MSEC};
    struct sxe_connect_options options = {.plan = &plan};
    struct sockaddr_storage silent;
    socklen_t silent_len;
    sxe_conn_t *conn;

    (void)state;
    sxe_loop_destroy(loop);
    assert_int_equal(sxe_loop_create(&loop, &quick), 0);
    int fillers[2], full = unanswering_at(&silent, &silent_len, fillers);
    memset(&planned, 0, sizeof(planned));
    listen_at("127.0.0.1", &planned.next, &planned.next_len);
    planned.action = PLAN_NEXT;
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&silent, silent_len, &options,
                                      &client_handlers, NULL),
                     0);
    run_until(&seen.bytes, 5);
    assert_int_equal(planned.calls, 2);
    assert_int_equal(planned.errs[0], ETIMEDOUT);
    assert_int_equal(planned.errs[1], 0);
    assert_int_equal(seen.closes, 0);
    for (int i = 0; i < 3; i++) { /* nothing next; no socket to reserve it again; failed by it */
        planned.calls = 0;
        planned.action = i == 2 ? PLAN_FAIL : PLAN_NOTHING;
        assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&silent, silent_len,
                                          &options, &client_handlers, NULL),
                         0);
        if (i == 1) {
            sxe__sys_fail(SXE_SYS_socket, 1, 1, EMFILE);
        }
        run_until(&seen.closes, i + 1);
        sxe__sys_reset();
        assert_int_equal(seen.reason, i == 2 ? SXE_CLOSE_ERROR : SXE_CLOSE_TIMEOUT);
        assert_int_equal(planned.calls, 1);
        assert_int_equal(planned.errs[0], ETIMEDOUT);
        assert_int_equal(planned.closed[0], i == 1);
    }
    assert_int_equal(seen.err, EHOSTDOWN);
    unanswering_close(full, fillers);
}

/* The plan has been called calls times, the last with err, on a closed connection. */
static void heard_closed(int calls, int err)
{
    assert_int_equal(planned.calls, calls);
    assert_int_equal(planned.errs[calls - 1], err);
    assert_true(planned.closed[calls - 1]);
}

/* A planned connect closed by the program, or by the loop's end; and one refused when its slot
 * cannot be reserved again (no socket, or none that takes the number): the plan hears each once,
 * closed. */
static void test_a_plan_hears_its_connect_closed(void **state)
{
    struct sxe_connect_options options = {.plan = &plan};
    struct sockaddr_storage at, refusing;
    socklen_t len, refusing_len;
    sxe_conn_t *conn;

    (void)state;
    memset(&planned, 0, sizeof(planned));
    listen_at("127.0.0.1", &at, &len);
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&at, len, &options,
                                      &client_handlers, NULL),
                     0);
    sxe_conn_close(conn);
    heard_closed(1, ECANCELED);
    int bound = refusing_at(&refusing, &refusing_len);
    planned.action = PLAN_NEXT; /* never reached: the slot cannot be reserved again */
    const enum sxe__sys_call calls[] = {SXE_SYS_socket, SXE_SYS_dup3};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&refusing, refusing_len,
                                          &options, &client_handlers, NULL),
                         0);
        sxe__sys_fail(calls[i], 1, 1, i == 0 ? EMFILE : ENOMEM);
        run_until(&seen.closes, 2 + i);
        sxe__sys_reset();
        assert_int_equal(seen.err, ECONNREFUSED);
        heard_closed(2 + i, ECONNREFUSED);
    }
    close(bound);
    assert_int_equal(sxe_conn_connect(loop, &conn, (struct sockaddr *)&at, len, &options,
                                      &client_handlers, NULL),
                     0);
    sxe_loop_destroy(loop);
    heard_closed(4, ECANCELED);
    struct sxe_loop_options again = {.connections = 8};
    assert_int_equal(sxe_loop_create(&loop, &again), 0); /* for the teardown */
}

/* The table full, and no socket to hold the slot: refused, nothing taken. */
static void test_a_reservation_refused(void **state)
{
    sxe_conn_t *conns[9], *conn;
    int taken = 0, rc;

    (void)state;
    while (taken < 9 && (rc = sxe_conn_reserve(loop, &conns[taken], &client_handlers, NULL)) == 0) {
        taken++;
    }
    assert_int_equal(rc, -ENOBUFS);
    assert_true(taken >= 1 && taken <= 8);
    for (int i = 0; i < taken; i++) {
        sxe_conn_close(conns[i]);
    }
    sxe__sys_fail(SXE_SYS_socket, 1, 1, EMFILE);
    assert_int_equal(sxe_conn_reserve(loop, &conn, &client_handlers, NULL), -EMFILE);
    sxe__sys_reset();
    assert_int_equal(seen.closes, taken);
    assert_int_equal(sxe_conn_reserve(loop, &conn, &client_handlers, NULL), 0);
}

/* Invalid uses: each check's clause alone. */
static void reserve_without_a_loop(void)
{
    sxe_conn_t *conn;
    assert_int_equal(sxe_conn_reserve(NULL, &conn, &client_handlers, NULL), -EINVAL);
}

static void reserve_nowhere(void)
{
    sxe_loop_t *own;
    assert_int_equal(sxe_loop_create(&own, NULL), 0);
    assert_int_equal(sxe_conn_reserve(own, NULL, &client_handlers, NULL), -EINVAL);
    sxe_loop_destroy(own);
}

static void reserve_without_handlers(void)
{
    sxe_loop_t *own;
    sxe_conn_t *conn;
    assert_int_equal(sxe_loop_create(&own, NULL), 0);
    assert_int_equal(sxe_conn_reserve(own, &conn, NULL, NULL), -EINVAL);
    sxe_loop_destroy(own);
}

/* A connection that is not reserved (a pair's end), or a reserved one already connecting. */
static void connect_what_is_not_reserved(void)
{
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(9)};
    sxe_loop_t *own;
    sxe_conn_t *conn, *other;

    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(sxe_loop_create(&own, NULL), 0);
    assert_int_equal(sxe_conn_reserve(own, &conn, &client_handlers, NULL), 0);
    assert_int_equal(sxe_conn_connect_reserved(conn, (struct sockaddr *)&to, sizeof(to), NULL), 0);
    assert_int_equal(sxe_conn_connect_reserved(conn, (struct sockaddr *)&to, sizeof(to), NULL),
                     -EINVAL);
    assert_int_equal(sxe_conn_pair(own, &conn, &other, 0, &client_handlers, NULL), 0);
    assert_int_equal(sxe_conn_connect_reserved(conn, (struct sockaddr *)&to, sizeof(to), NULL),
                     -EINVAL);
    sxe_loop_destroy(own);
}

static void connect_to_no_address(void)
{
    sxe_loop_t *own;
    sxe_conn_t *conn;
    assert_int_equal(sxe_loop_create(&own, NULL), 0);
    assert_int_equal(sxe_conn_reserve(own, &conn, &client_handlers, NULL), 0);
    assert_int_equal(sxe_conn_connect_reserved(conn, NULL, 0, NULL), -EINVAL);
    sxe_loop_destroy(own);
}

static void fail_with_no_error(void)
{
    sxe_loop_t *own;
    sxe_conn_t *conn;
    assert_int_equal(sxe_loop_create(&own, NULL), 0);
    assert_int_equal(sxe_conn_reserve(own, &conn, &client_handlers, NULL), 0);
    sxe_conn_fail(conn, 0);
    assert_int_equal(sxe_conn_write(conn, "x", 1), -EPIPE); /* still open, still reserved */
    assert_int_equal(sxe_conn_fd(conn) >= 0, 1);
    sxe_loop_destroy(own);
}

static const struct sxe_test_invalid_use cases[] = {
    {"sxe_conn_reserve() without a loop", reserve_without_a_loop, "loop != NULL"},
    {"sxe_conn_reserve() with nowhere to put it", reserve_nowhere, "conn_out != NULL"},
    {"sxe_conn_reserve() without handlers", reserve_without_handlers, "handlers != NULL"},
    {"sxe_conn_connect_reserved() twice, or of a pair's end", connect_what_is_not_reserved,
     "conn->io_kind == SXE__IO_RESERVED"},
    {"sxe_conn_connect_reserved() to no address", connect_to_no_address, "address != NULL"},
    {"sxe_conn_fail() with no error", fail_with_no_error, "err > 0"},
};

static void test_each_invalid_use(void **state)
{
    (void)state;
    sxe_test_invalid_uses(cases, sizeof(cases) / sizeof(cases[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_reserved_connection_connects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_reserved_connection_ends_as_any, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_connect_that_cannot_begin_leaves_it_reserved, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_reservation_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_connect_the_backend_cannot_watch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_plan_moves_a_refused_connect_on, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_plan_hears_its_connect_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_plan_moves_a_slow_connect_on, setup, teardown),
        cmocka_unit_test(test_each_invalid_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
