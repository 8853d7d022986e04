/*
 * Listeners and connects: listening sockets and their accepts, outgoing connects, socketpairs and
 * adopted sockets. A listener's callback accepts: a readiness backend says the listener is ready,
 * and a batch is accepted here; a completion backend hands over each connection it accepted.
 * A connect, a socketpair or an adopted socket waits in CONNECTING until its first event, so that
 * on_connect always runs from the loop; its callback then hands the slot to its stream kind.
 */
#define SXE_LOG_MODULE listen_log
#include "sxe/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "loop.h"
#include "sys.h"
#include "transport.h"

static struct sxe_log_module listen_log = SXE_LOG_MODULE_INIT(LISTEN);

/* Linux 4.2 and later; glibc's headers do not name it. */
#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

static void listener_io(struct sxe_conn *listener, const struct sxe__io_event *event);
static void connect_io(struct sxe_conn *conn, const struct sxe__io_event *event);

/* Registers the callbacks of the kinds this file makes: listeners, connects and their streams. */
static void register_kinds(sxe_loop_t *loop)
{
    loop->callbacks[SXE__IO_LISTENER] = listener_io;
    loop->callbacks[SXE__IO_CONNECT] = connect_io;
    loop->callbacks[SXE__IO_RESERVED] = connect_io; /* never called: it is not watched */
    loop->callbacks[SXE__IO_PLANNED] = connect_io;
    loop->callbacks[SXE__IO_STREAM] = sxe__stream_io;
    loop->callbacks[SXE__IO_FDPASS] = sxe__fdpass_io;
    loop->callbacks[SXE__IO_TLS] = sxe__stream_io;
}

/* EMFILE or ENFILE: the pending connection cannot be accepted, but it can be shed. */
static void shed_with_reserve_fd(struct sxe_conn *listener)
{
    sxe_loop_t *loop = listener->loop;

    if (loop->reserve_fd < 0) {
        return;
    }
    sxe__sys.close(loop->reserve_fd);
    int fd = sxe__sys.accept4(listener->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) {
        sxe__sys.close(fd);
    }
    loop->reserve_fd = sxe__sys.open("/dev/null", O_RDONLY | O_CLOEXEC, 0);
}

/*
 * An accept failed with err. @return true if the next one may succeed at once (the peer gave up in
 * the backlog, or a signal came), false if the listener should wait for the next turn.
 */
static bool accept_failed(struct sxe_conn *listener, int err)
{
    if (err == EAGAIN) {
        return false;
    }
    if (err == EINTR) {
        return true;
    }
    listener->loop->stats.accept_errors++;
    if (err == ECONNABORTED || err == EPROTO) {
        return true;
    }
    SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR, "accept failed: %s; shedding and retrying",
                 sxe_strerror(-err));
    if (err == EMFILE || err == ENFILE) {
        shed_with_reserve_fd(listener);
    }
    return false; /* out of a resource: try again next turn */
}

/*
 * Attaches conn, just taken, to fd, an accepted socket (with a TLS session of tls on it, if not
 * NULL). @return false if it could not (fd closed, the slot given back).
 */
static bool attach_accepted(struct sxe_conn *conn, int fd, sxe_tls_t *tls, bool fds,
                            const struct sxe_conn_handlers *handlers, void *user)
{
    sxe_loop_t *loop = conn->loop;

    /* An fd channel, and a TLS stream, read for themselves: a completion backend says when. */
    unsigned wanted = fds || tls ? SXE__STREAM_WANTS & ~SXE__IO_RECV : SXE__STREAM_WANTS;
    /* A completion backend sends in the ring: writability is watched only once a write waits. */
    bool no_out = loop->io->kind == SXE__IO_COMPLETION && !fds;
    if (no_out) {
        wanted &= ~SXE__IO_OUT;
    }
    uint8_t io_kind = fds ? SXE__IO_FDPASS : tls ? SXE__IO_TLS : SXE__IO_STREAM;
    if (tls && sxe__tls_accept(tls, conn) < 0) {
        sxe__conn_untake(conn); /* GCOVR_EXCL_LINE: out of memory (logged) */
        sxe__sys.close(fd);     /* GCOVR_EXCL_LINE */
        return false;           /* GCOVR_EXCL_LINE */
    }
    if (sxe__conn_attach(conn, fd, SXE__KIND_STREAM, io_kind, wanted, handlers, user) < 0) {
        if (tls) {
            sxe__tls_close(conn);
        }
        return false;
    }
    if (fds) {
        conn->flags |= SXE__CONN_RECEIVE_FDS;
    }
    if (no_out) {
        conn->flags |= SXE__CONN_NO_OUT;
    }
    return true;
}

/* Says an accepted conn is there (on_connect), and reads what came with it. */
static void greet_accepted(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t previous_id = sxe_log_set_id(sxe__conn_index(conn));
    if (conn->handlers->on_connect != NULL) {
        conn->handlers->on_connect(conn);
        sxe__conn_end_closes(loop);
    }
    /*
     * A client sends its request as soon as it is connected, so by the time it is accepted the
     * request is usually there: a readiness backend reads it now, as h2o does, and a connection
     * that is answered and closed at once never waits for a turn. (A completion backend's receive
     * is submitted with this turn's, and finds the bytes there.)
     */
    if (loop->io->kind == SXE__IO_READINESS && sxe__conn_is_open(conn)) {
        loop->callbacks[conn->io_kind](conn, &(struct sxe__io_event){.events = SXE__IO_IN});
        sxe__conn_end_closes(loop);
    }
    sxe_log_set_id(previous_id);
}

/*
 * Gives an accepted socket a slot and says so with on_connect. @return false if the listener
 * closed meanwhile (an evicted connection's on_close may close it).
 */
static bool take_accepted(struct sxe_conn *listener, int fd)
{
    sxe_loop_t *loop = listener->loop;

    sxe_tls_t *tls = loop->tls != NULL ? sxe__tls_listening(listener) : NULL;
    struct sxe_conn *conn = sxe__conn_take(loop, tls ? SXE__CONN_HANDSHAKING : SXE__CONN_IDLE,
                                           (listener->flags & SXE__CONN_EVICT_IDLE) != 0);
    if (!sxe__conn_is_open(listener)) {
        /* GCOVR_EXCL_START: an evicted connection's on_close closed the listener */
        if (conn != NULL) {
            sxe__conn_untake(conn);
        }
        sxe__sys.close(fd);
        return false;
        /* GCOVR_EXCL_STOP */
    }
    if (conn == NULL) {
        sxe__sys.close(fd);
        return true;
    }
    if (attach_accepted(conn, fd, tls, (listener->flags & SXE__CONN_RECEIVE_FDS) != 0,
                        listener->handlers, listener->user)) {
        loop->stats.accepted++;
        greet_accepted(conn);
    }
    return sxe__conn_is_open(listener);
}

static void listener_io(struct sxe_conn *listener, const struct sxe__io_event *event)
{
    if (event->events & SXE__IO_ACCEPT) { /* the backend accepted it */
        if (event->result >= 0) {
            take_accepted(listener, event->result);
            return;
        }
        /* A failure ends the backend's accepting: ask again, after shedding what it can. */
        accept_failed(listener, -event->result);
        sxe_loop_t *loop = listener->loop;
        if (sxe__conn_is_open(listener) && !loop->stopping && /* a drain stopped it */
            loop->io->watch(loop, listener->fd, sxe__conn_tag(listener),
                            SXE__IO_IN | SXE__IO_ACCEPT | SXE__IO_MODIFY) < 0) {
            sxe__conn_close_reason(listener, SXE_CLOSE_ERROR, ENOMEM); /* GCOVR_EXCL_LINE: no SQE */
        }
        return;
    }
    for (unsigned accepted = 0; accepted < listener->accept_batch;) {
        int fd = sxe__sys.accept4(listener->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (accept_failed(listener, errno)) {
                continue;
            }
            return;
        }
        accepted++;
        if (!take_accepted(listener, fd)) {
            return;
        }
    }
}

/* Makes a non-blocking socket, or returns -errno. */
static int make_socket(int family, int type)
{
    int fd = sxe__sys.socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    return fd < 0 ? -errno : fd;
}

static int set_option(int fd, int level, int name, int value, const char *what)
{
    if (sxe__sys.setsockopt(fd, level, name, &value, sizeof(value)) < 0) {
        int rc = -errno;
        SXE_LOG_DEBUG("cannot set %s: %s", what, sxe_strerror(rc));
        return rc;
    }
    return 0;
}

int sxe__listen_probe(const struct sockaddr *address, socklen_t address_len,
                      const struct sxe_listen_options *options)
{
    int fd = make_socket(address->sa_family, SOCK_STREAM);
    int rc = 0;

    if (fd < 0) {
        return fd;
    }
    rc = set_option(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR"); /* TIME_WAIT is no one */
    if (rc == 0 && address->sa_family == AF_INET6) {
        rc = set_option(fd, IPPROTO_IPV6, IPV6_V6ONLY, (options->flags & SXE_LISTEN_V6ONLY) != 0,
                        "IPV6_V6ONLY");
    }
    if (rc == 0 && sxe__sys.bind(fd, address, address_len) < 0) {
        rc = -errno;
        SXE_LOG_DEBUG("the address is taken: %s", sxe_strerror(rc));
    }
    sxe__sys.close(fd);
    return rc;
}

int sxe__listen_socket(const struct sockaddr *address, socklen_t address_len,
                       const struct sxe_listen_options *options)
{
    int fd = make_socket(address->sa_family, SOCK_STREAM);
    int rc = 0;

    if (fd < 0) {
        return fd;
    }
    if (address->sa_family != AF_UNIX) {
        rc = set_option(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
    }
    if (rc == 0 && (options->flags & SXE_LISTEN_REUSEPORT)) {
        rc = set_option(fd, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT");
    }
    if (rc == 0 && address->sa_family == AF_INET6) {
        rc = set_option(fd, IPPROTO_IPV6, IPV6_V6ONLY, (options->flags & SXE_LISTEN_V6ONLY) != 0,
                        "IPV6_V6ONLY");
    }
    if (rc == 0 && (options->flags & SXE_LISTEN_FASTOPEN)) {
        rc = set_option(fd, IPPROTO_TCP, TCP_FASTOPEN,
                        options->fastopen_queue > 0 ? options->fastopen_queue : 16, "TCP_FASTOPEN");
    }
    if (rc == 0 && (options->flags & SXE_LISTEN_DEFER_ACCEPT)) {
        rc = set_option(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT,
                        options->defer_accept_secs > 0 ? options->defer_accept_secs : 1,
                        "TCP_DEFER_ACCEPT");
    }
    if (rc == 0 && sxe__sys.bind(fd, address, address_len) < 0) {
        rc = -errno;
        SXE_LOG_DEBUG("cannot bind: %s", sxe_strerror(rc));
    }
    if (rc == 0 && sxe__sys.listen(fd, options->backlog > 0 ? options->backlog : SOMAXCONN) < 0) {
        rc = -errno;
        SXE_LOG_DEBUG("cannot listen: %s", sxe_strerror(rc));
    }
    if (rc < 0) {
        sxe__sys.close(fd);
        return rc;
    }
    return fd;
}

int sxe__listen_attach(sxe_loop_t *loop, sxe_conn_t **listener, int fd,
                       const struct sxe_listen_options *options,
                       const struct sxe_conn_handlers *handlers, void *user)
{
    static const struct sxe_conn_handlers no_handlers;
    int rc;

    register_kinds(loop);
    uint16_t flags = (options->flags & SXE_LISTEN_EVICT_IDLE ? SXE__CONN_EVICT_IDLE : 0) |
                     (options->flags & SXE_LISTEN_RECEIVE_FDS ? SXE__CONN_RECEIVE_FDS : 0);
    if ((rc = sxe__conn_add(loop, listener, fd, SXE__CONN_LISTENING, SXE__KIND_LISTENER, flags,
                            SXE__IO_LISTENER, handlers ? handlers : &no_handlers, user, false)) <
        0) {
        return rc;
    }
    (*listener)->accept_batch =
        (uint16_t)(options->accept_batch > 0 && options->accept_batch < 65535
                       ? options->accept_batch
                       : 64);
    if (options->tls != NULL && (rc = sxe__tls_listen(*listener, options->tls)) < 0) {
        sxe__conn_close_reason(*listener, SXE_CLOSE_ERROR, -rc); /* GCOVR_EXCL_LINE: no memory */
        *listener = NULL;                                        /* GCOVR_EXCL_LINE */
        return rc;                                               /* GCOVR_EXCL_LINE */
    }
    return 0;
}

int sxe_conn_listen(sxe_loop_t *loop, sxe_conn_t **listener, const struct sockaddr *address,
                    socklen_t address_len, const struct sxe_listen_options *options,
                    const struct sxe_conn_handlers *handlers, void *user)
{
    static const struct sxe_listen_options defaults;

    if (!SXE_CHECK(loop != NULL && listener != NULL && address != NULL)) {
        return -EINVAL;
    }
    options = options != NULL ? options : &defaults;
    int fd = sxe__listen_socket(address, address_len, options);
    if (fd < 0) {
        return fd;
    }
    return sxe__listen_attach(loop, listener, fd, options, handlers, user);
}

/* A connect begun with options' plan, if any, waits for its first event with it, and has
 * connect_timeout of its own (after an address that failed). */
static void plan_attach(struct sxe_conn *conn, const struct sxe_connect_options *options)
{
    if (options->plan != NULL) {
        conn->loop->plans[sxe__conn_index(conn)] = options->plan;
        conn->io_kind = SXE__IO_PLANNED;
        sxe_pool_touch(conn->loop->conn_pool, sxe__conn_index(conn), conn->loop->now);
    }
}

/*
 * The slot of a connect that failed is reserved again: a placeholder takes its descriptor's
 * number, the failed socket goes, and what the turn still holds for it is dropped (a completion
 * backend may have posted more than one completion for it). @return 0 or -errno.
 */
static int reserve_again(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;
    int fd = make_socket(AF_INET, SOCK_STREAM);

    if (fd < 0) {
        return fd;
    }
    loop->io->forget(loop, conn->fd, false);
    int rc = sxe__sys.dup3(fd, conn->fd, O_CLOEXEC) < 0 ? -errno : 0;
    sxe__sys.close(fd);
    if (rc < 0) {
        return rc; /* the failed socket stays, unwatched, until the connection's close */
    }
    sxe__loop_drop_events(loop, sxe__conn_tag(conn));
    if (loop->tls != NULL) {
        sxe__tls_close(conn);
    }
    conn->io_kind = SXE__IO_RESERVED;
    return 0;
}

/*
 * A planned connect failed with err (refused, or too slow: loop->plan_next): its slot is reserved
 * again and its plan told, which may begin the next. @return whether the plan has it (connecting
 * again, or failed by the plan); if not, the caller fails it, and if the slot could not be
 * reserved again the plan is still on it, to hear that close.
 */
static bool plan_next(struct sxe_conn *conn, int err)
{
    struct sxe_connect_plan **slot = &conn->loop->plans[sxe__conn_index(conn)];
    struct sxe_connect_plan *plan = *slot;
    int rc = reserve_again(conn);

    if (rc < 0) {
        SXE_LOG_WARN("cannot reserve a connection again for its next address: %s",
                     sxe_strerror(-rc));
        return false;
    }
    *slot = NULL; /* reserved again: the plan is off it */
    plan->ended(plan, conn, err);
    return conn->io_kind != SXE__IO_RESERVED || !sxe__conn_is_open(conn);
}

/* The loop's table of plans, made for the first. @return 0 or -ENOMEM. */
static int plans_made(sxe_loop_t *loop)
{
    /* Pages of it are touched only for the slots that have had a plan. */
    if (loop->plans == NULL &&
        (loop->plans = calloc(loop->options.connections, sizeof(*loop->plans))) == NULL) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: out of memory */
    }
    loop->plan_next = plan_next;
    return 0;
}

/* The first event of a connect, socketpair or adopted socket: it is connected, or failed. */
static void connect_io(struct sxe_conn *conn, const struct sxe__io_event *event)
{
    sxe_loop_t *loop = conn->loop;
    int err = 0;
    socklen_t len = sizeof(err);

    if ((event->events & SXE__IO_RECV) && event->result < 0) {
        err = -event->result; /* the backend's receive took the socket's error */
    } else if (sxe__sys.getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
        err = errno;
    }
    if (err != 0) {
        if (conn->io_kind != SXE__IO_PLANNED || !plan_next(conn, err)) {
            sxe__conn_close_reason(conn, SXE_CLOSE_ERROR, err);
        }
        return;
    }
    if (conn->io_kind == SXE__IO_PLANNED) {
        struct sxe_connect_plan *plan = sxe__conn_plan_take(conn);
        plan->ended(plan, conn, 0);
        if (!sxe__conn_is_open(conn)) {
            return;
        }
    }
    bool tls = sxe__tls_client(conn);
    sxe_pool_set_state(loop->conn_pool, sxe__conn_index(conn), SXE__CONN_CONNECTING,
                       tls ? SXE__CONN_HANDSHAKING : SXE__CONN_IDLE, loop->now);
    conn->io_kind = conn->flags & SXE__CONN_RECEIVE_FDS ? SXE__IO_FDPASS
                    : tls                               ? SXE__IO_TLS
                                                        : SXE__IO_STREAM;
    loop->stats.connected++;
    if (conn->handlers->on_connect != NULL) {
        conn->handlers->on_connect(conn);
    }
    if (tls && sxe__conn_is_open(conn)) { /* the hello, and what on_connect wrote waits for it */
        int rc = sxe__tls_start(conn);
        if (rc < 0) {
            sxe__conn_close_reason(conn, SXE_CLOSE_ERROR, -rc); /* GCOVR_EXCL_LINE */
            return;                                             /* GCOVR_EXCL_LINE */
        }
        sxe__stream_flush(conn);
    }
    /* Input that came with the connection (a socketpair's peer wrote first) is not lost. */
    if (sxe__conn_is_open(conn) && (event->events & (SXE__IO_IN | SXE__IO_HUP | SXE__IO_RECV))) {
        loop->callbacks[conn->io_kind](
            conn, &(struct sxe__io_event){.tag = event->tag,
                                          .events = event->events & ~SXE__IO_OUT,
                                          .result = event->result,
                                          .data = event->data});
    }
}

/* Takes a slot for a stream socket that waits in CONNECTING for its first event. */
static int add_connecting(sxe_loop_t *loop, sxe_conn_t **conn_out, int fd, uint16_t flags,
                          const struct sxe_conn_handlers *handlers, void *user, bool evict)
{
    register_kinds(loop);
    return sxe__conn_add(loop, conn_out, fd, SXE__CONN_CONNECTING, SXE__KIND_STREAM, flags,
                         SXE__IO_CONNECT, handlers, user, evict);
}

/*
 * A TLS client's session, made before its socket is watched, for readiness only (it reads for
 * itself, as an accepted TLS stream does). On failure the caller still holds the slot.
 */
static int start_tls(struct sxe_conn *conn, int fd, const struct sockaddr *address,
                     const struct sxe_connect_options *options)
{
    int rc;

    /* The handshake's last flight and the program's first bytes leave in two sends: with Nagle's
     * wait, the second waits for the server's ACK of the first, which a server with nothing to
     * say (no new ticket after a resumed handshake) delays 40 ms. */
    (void)set_option(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
    if ((rc = sxe__tls_connect(conn, options->tls, options->server_name, address)) < 0) {
        return rc;
    }
    if ((rc = conn->loop->io->watch(conn->loop, fd, sxe__conn_tag(conn),
                                    SXE__STREAM_WANTS & ~SXE__IO_RECV)) < 0) {
        sxe__tls_close(conn); /* GCOVR_EXCL_LINE: the backend has no room to watch it */
        return rc;            /* GCOVR_EXCL_LINE */
    }
    return 0;
}

/* A TLS client's slot, CONNECTING until its socket's first event. */
static int add_connecting_tls(sxe_loop_t *loop, sxe_conn_t **conn_out, int fd,
                              const struct sockaddr *address,
                              const struct sxe_connect_options *options,
                              const struct sxe_conn_handlers *handlers, void *user)
{
    int rc;

    register_kinds(loop);
    struct sxe_conn *conn = sxe__conn_take(loop, SXE__CONN_CONNECTING, false);
    if (conn == NULL) {
        sxe__sys.close(fd);
        return -ENOBUFS;
    }
    sxe__conn_hold(conn, fd, SXE__KIND_STREAM, SXE__IO_CONNECT, handlers, user);
    if ((rc = start_tls(conn, fd, address, options)) < 0) {
        conn->fd = -1;
        sxe__conn_untake(conn);
        sxe__sys.close(fd);
        return rc;
    }
    *conn_out = conn;
    return 0;
}

/* A socket for address, bound to the options' source if any, its connect begun. @return its
 * descriptor or -errno. */
static int begin_connect(const struct sockaddr *address, socklen_t address_len,
                         const struct sxe_connect_options *options)
{
    const struct sockaddr *source = options->source;
    int fd = make_socket(address->sa_family, SOCK_STREAM);
    int rc;

    if (fd < 0) {
        return fd;
    }
    /*
     * Binding a source address would normally pick a local port at bind time, unique per source
     * address alone, with a linear search: slow, and exhausted at about 28,000 connections per
     * source whatever the destinations. IP_BIND_ADDRESS_NO_PORT leaves the port to connect(),
     * which needs it unique per 4-tuple only.
     */
    if (source != NULL && source->sa_family == AF_INET &&
        set_option(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1, "IP_BIND_ADDRESS_NO_PORT") < 0) {
        sxe__sys.close(fd);
        return -EINVAL;
    }
    if ((source != NULL && sxe__sys.bind(fd, source, options->source_len) < 0) ||
        (sxe__sys.connect(fd, address, address_len) < 0 && errno != EINPROGRESS)) {
        rc = -errno;
        sxe__sys.close(fd);
        return rc;
    }
    return fd;
}

int sxe_conn_connect(sxe_loop_t *loop, sxe_conn_t **conn_out, const struct sockaddr *address,
                     socklen_t address_len, const struct sxe_connect_options *options,
                     const struct sxe_conn_handlers *handlers, void *user)
{
    static const struct sxe_connect_options defaults;
    int rc;

    if (!SXE_CHECK(loop != NULL && conn_out != NULL && address != NULL && handlers != NULL)) {
        return -EINVAL;
    }
    options = options != NULL ? options : &defaults;
    if (options->plan != NULL && (rc = plans_made(loop)) < 0) {
        return rc; /* GCOVR_EXCL_LINE: out of memory */
    }
    int fd = begin_connect(address, address_len, options);
    if (fd < 0) {
        return fd;
    }
    /* Even a connect that completed at once reports through on_connect, from the loop. */
    rc = options->tls != NULL
             ? add_connecting_tls(loop, conn_out, fd, address, options, handlers, user)
             : add_connecting(loop, conn_out, fd, 0, handlers, user, false);
    if (rc == 0) {
        (*conn_out)->lists |= SXE__LIST_OUTBOUND; /* the program's own: an upstream, say */
        plan_attach(*conn_out, options);
    }
    return rc;
}

int sxe_conn_reserve(sxe_loop_t *loop, sxe_conn_t **conn_out,
                     const struct sxe_conn_handlers *handlers, void *user)
{
    if (!SXE_CHECK(loop != NULL && conn_out != NULL && handlers != NULL)) {
        return -EINVAL;
    }
    /* A socket, never watched, holds the slot's descriptor until the address is known: every
     * open slot has one, and the connection's close, timeout and stop need nothing of their own. */
    int fd = make_socket(AF_INET, SOCK_STREAM);
    if (fd < 0) {
        return fd;
    }
    register_kinds(loop);
    struct sxe_conn *conn = sxe__conn_take(loop, SXE__CONN_CONNECTING, false);
    if (conn == NULL) {
        sxe__sys.close(fd);
        return -ENOBUFS;
    }
    sxe__conn_hold(conn, fd, SXE__KIND_STREAM, SXE__IO_RESERVED, handlers, user);
    conn->lists |= SXE__LIST_OUTBOUND;
    *conn_out = conn;
    return 0;
}

int sxe_conn_connect_reserved(sxe_conn_t *conn, const struct sockaddr *address,
                              socklen_t address_len, const struct sxe_connect_options *options)
{
    static const struct sxe_connect_options defaults;
    int rc;

    if (!SXE_CHECK(conn != NULL && address != NULL && sxe__conn_is_open(conn) &&
                   conn->io_kind == SXE__IO_RESERVED)) {
        return -EINVAL;
    }
    options = options != NULL ? options : &defaults;
    if (options->plan != NULL && (rc = plans_made(conn->loop)) < 0) {
        return rc; /* GCOVR_EXCL_LINE: out of memory */
    }
    /* Whatever can refuse comes first, so a refusal leaves it reserved: the TLS session (a server
     * name it cannot take), then the socket, its source and its connect. */
    if (options->tls != NULL &&
        (rc = sxe__tls_connect(conn, options->tls, options->server_name, address)) < 0) {
        return rc;
    }
    int fd = begin_connect(address, address_len, options);
    if (fd < 0) {
        if (options->tls != NULL) {
            sxe__tls_close(conn);
        }
        return fd; /* still reserved: the caller may try another address */
    }
    /* The connecting socket takes the reserved one's number (two system calls, against the
     * resolution that came before them): the slot's descriptor stays what it was. */
    rc = sxe__sys.dup3(fd, conn->fd, O_CLOEXEC) < 0 ? -errno : 0;
    sxe__sys.close(fd);
    if (rc < 0) { /* (onto a descriptor of ours, only for want of kernel memory) */
        if (options->tls != NULL) {
            sxe__tls_close(conn);
        }
        return rc;
    }
    conn->io_kind = SXE__IO_CONNECT;
    plan_attach(conn, options);
    if (options->tls != NULL) { /* see start_tls() */
        (void)set_option(conn->fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
    }
    unsigned wanted = options->tls != NULL ? SXE__STREAM_WANTS & ~SXE__IO_RECV : SXE__STREAM_WANTS;
    if ((rc = conn->loop->io->watch(conn->loop, conn->fd, sxe__conn_tag(conn), wanted)) < 0) {
        (void)sxe__conn_fail_later(conn, SXE_CLOSE_ERROR, -rc); /* on_close, from the loop */
    }
    return 0;
}

/*
 * Takes a slot for a connected stream socket, CONNECTING until its first event, so on_connect
 * runs from the loop, not from here.
 */
static int adopt(sxe_loop_t *loop, sxe_conn_t **conn_out, int fd, unsigned flags,
                 const struct sxe_conn_handlers *handlers, void *user)
{
    return add_connecting(loop, conn_out, fd,
                          flags & SXE_LISTEN_RECEIVE_FDS ? SXE__CONN_RECEIVE_FDS : 0, handlers,
                          user, false);
}

int sxe_conn_pair(sxe_loop_t *loop, sxe_conn_t **a, sxe_conn_t **b, unsigned flags,
                  const struct sxe_conn_handlers *handlers, void *user)
{
    int fds[2];
    int rc;

    if (!SXE_CHECK(loop != NULL && a != NULL && b != NULL && handlers != NULL)) {
        return -EINVAL;
    }
    if (sxe__sys.socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) < 0) {
        return -errno;
    }
    if ((rc = adopt(loop, a, fds[0], flags, handlers, user)) < 0) {
        sxe__sys.close(fds[1]);
        return rc;
    }
    if ((rc = adopt(loop, b, fds[1], flags, handlers, user)) < 0) {
        sxe__conn_close_reason(*a, SXE_CLOSE_LOCAL, 0);
        return rc;
    }
    return 0;
}

int sxe__conn_adopt_passed(sxe_loop_t *loop, sxe_conn_t **conn_out, int fd, bool evict,
                           sxe_tls_t *tls, const struct sxe_conn_handlers *handlers, void *user)
{
    if (tls == NULL) {
        return add_connecting(loop, conn_out, fd, 0, handlers, user, evict);
    }
    /* A TLS stream starts as the listener's would: its session made, its hello read now. */
    register_kinds(loop);
    struct sxe_conn *conn = sxe__conn_take(loop, SXE__CONN_HANDSHAKING, evict);
    if (conn == NULL) {
        sxe__sys.close(fd);
        return -ENOBUFS;
    }
    if (!attach_accepted(conn, fd, tls, false, handlers, user)) {
        return -ENOBUFS;
    }
    *conn_out = conn;
    greet_accepted(conn);
    return 0;
}

int sxe__conn_adopt_channel(sxe_loop_t *loop, sxe_conn_t **conn, int fd,
                            const struct sxe_conn_handlers *handlers, void *user)
{
    return adopt(loop, conn, fd, SXE_LISTEN_RECEIVE_FDS, handlers, user);
}

int sxe_conn_adopt(sxe_loop_t *loop, sxe_conn_t **conn, int fd,
                   const struct sxe_conn_handlers *handlers, void *user)
{
    if (!SXE_CHECK(loop != NULL && conn != NULL && fd >= 0 && handlers != NULL)) {
        return -EINVAL;
    }
    int flags = sxe__sys.fcntl(fd, F_GETFL, 0);
    if (flags < 0 || sxe__sys.fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        int rc = -errno;
        sxe__sys.close(fd);
        return rc;
    }
    return adopt(loop, conn, fd, 0, handlers, user);
}

int sxe_address_port(const struct sockaddr *address)
{
    if (address->sa_family == AF_INET6) {
        return ntohs(((const struct sockaddr_in6 *)(const void *)address)->sin6_port);
    }
    return address->sa_family == AF_INET
               ? ntohs(((const struct sockaddr_in *)(const void *)address)->sin_port)
               : -EAFNOSUPPORT;
}
