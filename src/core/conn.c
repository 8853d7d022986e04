/*
 * The connection table and a connection's life: sxe_loop_create builds the table (a pool of
 * slots, the I/O buffers and the output segments) and then the loop (loop.c); slots are taken,
 * registered with the backend, settled in the pool state that says what they wait for, and
 * closed. The kinds of slot (stream.c, listen.c, udp.c, fdpass.c) sit on top.
 *
 * Closing. A close asked for inside a turn (sxe_conn_close(), or a write that failed) makes the
 * connection closed for the program at once: sxe__conn_is_open() is false, so writes are refused
 * and no handler of it runs. The close ends (on_close, then the slot is freed) once the callback
 * that asked for it has returned to the loop (the closing list, sxe__conn_end_closes). So the
 * connection a callback was given stays valid to its end, and its slot is never given to another
 * under it: no caller checks a generation after a callback. Outside a turn, a close ends at once.
 * A connection closed while the backend still sends from its queue (io_uring) stays in the
 * CLOSING state, its socket shut down, until the backend is done with the queue.
 */
#define SXE_LOG_MODULE conn_log
#include "sxe/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "loop.h"
#include "outq.h"
#include "sys.h"
#include "transport.h"

static struct sxe_log_module conn_log = SXE_LOG_MODULE_INIT(CONN);

static const char *const conn_state_names[] = {"FREE",    "IDLE",       "READING",
                                               "WRITING", "CONNECTING", "LISTENING",
                                               "CLOSING", "HELD",       "HANDSHAKING"};

static const char *const close_reason_names[] = {"local",    "peer",     "error",
                                                 "timeout",  "evicted",  "no buffer",
                                                 "overflow", "shutdown", "handed off"};

const char *sxe_close_reason_name(enum sxe_close_reason reason)
{
    return (unsigned)reason < sizeof(close_reason_names) / sizeof(close_reason_names[0])
               ? close_reason_names[reason]
               : "?";
}

bool sxe__conn_is_open(const struct sxe_conn *conn)
{
    return conn->fd >= 0 && (conn->flags & SXE__CONN_CLOSE_PENDING) == 0 &&
           (conn->close_reason & SXE__CLOSE_LATER) == 0;
}

void sxe__conn_offer_later(struct sxe_conn *conn)
{
    bool listed = (conn->lists & SXE__LIST_READY) != 0;

    conn->flags |= SXE__CONN_RESUMED;
    sxe__conn_ready_later(conn);
    if (!listed) {
        conn->lists |= SXE__LIST_OFFER;
    }
}

void sxe__conn_ready_later(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;

    /* If the slot is still listed for the connection that had it before, that entry serves. */
    conn->lists &= (uint8_t)~SXE__LIST_OFFER; /* whoever asks now wants a read */
    if (conn->lists & SXE__LIST_READY) {
        conn->lists &= (uint8_t)~SXE__LIST_STALE;
        return;
    }
    conn->lists |= SXE__LIST_READY;
    conn->ready_next = loop->ready_head;
    loop->ready_head = sxe__conn_index(conn);
}

void sxe__conn_settle(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;
    unsigned from = (unsigned)sxe_pool_state(loop->conn_pool, sxe__conn_index(conn));
    unsigned to;

    if (from == SXE__CONN_CONNECTING || from == SXE__CONN_LISTENING || from == SXE__CONN_CLOSING ||
        from == SXE__CONN_HELD) {
        return;
    }
    /* A TLS stream is handshaking until its handshake ends, whatever it reads or writes (its clock
     * runs from the accept); part way through a record, it is reading a message. */
    bool tls = conn->io_kind == SXE__IO_TLS;
    if (tls && sxe__tls_handshaking(conn)) {
        return; /* it was accepted HANDSHAKING, and stays so until the end */
    }
    to = conn->out.head != SXE_NONE                               ? SXE__CONN_WRITING
         : conn->input_len > 0 || (tls && sxe__tls_partial(conn)) ? SXE__CONN_READING
                                                                  : SXE__CONN_IDLE;
    /*
     * A partial message keeps the time its first byte arrived until the callback consumes
     * something: bytes trickled in one at a time must not keep a message alive forever.
     */
    bool progressed = (conn->flags & SXE__CONN_PROGRESS) != 0;
    conn->flags &= (uint16_t)~SXE__CONN_PROGRESS;
    if (from == SXE__CONN_READING && to == SXE__CONN_READING && !progressed) {
        return;
    }
    /* Nor do TLS records that bring the program nothing (a KeyUpdate, an empty record, one still
     * coming) or what the session answers them with: an idle connection stays idle, keeping its
     * time, until the program reads or writes a byte (a KeyUpdate a second kept it open). */
    if (tls && from == SXE__CONN_IDLE && !progressed &&
        (to != SXE__CONN_READING || conn->input_len == 0)) {
        return;
    }
    sxe_pool_set_state(loop->conn_pool, sxe__conn_index(conn), from, to, loop->now);
}

/*
 * The connection a new one may take the place of: the oldest idle one that a peer opened. One the
 * program opened itself (an upstream waiting for its answer, say) is never evicted: it is the
 * program's work, not a client's idleness. The look is bounded: past EVICT_LOOK idle connections
 * of the program's own, none is evicted. @return its index, or SXE_POOL_NONE.
 */
#define EVICT_LOOK 64

static void close_now(struct sxe_conn *conn, enum sxe_close_reason reason, int err);

static uint32_t evictable(sxe_loop_t *loop)
{
    struct sxe_pool_walker walker;
    uint32_t index;

    sxe_pool_walker_init(&walker, loop->conn_pool, SXE__CONN_IDLE);
    for (unsigned looked = 0;
         looked < EVICT_LOOK && (index = sxe_pool_walker_next(&walker)) != SXE_POOL_NONE;
         looked++) {
        if ((loop->conns[index].lists & SXE__LIST_OUTBOUND) == 0 &&
            sxe__conn_is_open(&loop->conns[index])) {
            return index;
        }
    }
    return SXE_POOL_NONE;
}

struct sxe_conn *sxe__conn_take(sxe_loop_t *loop, unsigned state, bool evict)
{
    uint32_t index = sxe_pool_set_oldest_state(loop->conn_pool, SXE__CONN_FREE, state, loop->now);

    if (index == SXE_POOL_NONE && evict) {
        uint32_t victim = evictable(loop);
        if (victim != SXE_POOL_NONE) {
            loop->stats.evicted++;
            close_now(&loop->conns[victim], SXE_CLOSE_EVICTED, 0); /* its slot is needed now */
            index = sxe_pool_set_oldest_state(loop->conn_pool, SXE__CONN_FREE, state, loop->now);
        }
    }
    if (index == SXE_POOL_NONE) {
        loop->stats.table_full++;
        SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR,
                     "connection table full (%u): refusing connections; raise %s or use %s",
                     loop->options.connections, sxe_log_setting("options.connections"),
                     sxe_log_setting("SXE_LISTEN_EVICT_IDLE"));
        return NULL;
    }
    struct sxe_conn *conn = &loop->conns[index];
    conn->flags = 0;
    conn->lists &= (uint8_t) ~(SXE__LIST_SHUT | SXE__LIST_OUTBOUND | SXE__LIST_UNREAD);
    conn->input_buffer = SXE_NONE;
    conn->input_len = 0;
    conn->out.head = conn->out.tail = SXE_NONE;
    conn->held_head = SXE_NONE;
    conn->queued = 0;
    conn->failed_err = 0;
    conn->close_reason = 0;
    return conn;
}

static void slot_give(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;
    unsigned state = (unsigned)sxe_pool_state(loop->conn_pool, sxe__conn_index(conn));

    sxe_pool_set_state(loop->conn_pool, sxe__conn_index(conn), state, SXE__CONN_FREE, loop->now);
}

void sxe__conn_untake(struct sxe_conn *conn)
{
    slot_give(conn);
}

void sxe__conn_hold(struct sxe_conn *conn, int fd, uint8_t kind, uint8_t io_kind,
                    const struct sxe_conn_handlers *handlers, void *user)
{
    conn->fd = fd;
    conn->lists &= (uint8_t)~SXE__LIST_HUP; /* the slot's last connection's end is not this one's */
    conn->kind = kind;
    conn->io_kind = io_kind;
    conn->handlers = handlers;
    conn->user = user;
}

int sxe__conn_attach(struct sxe_conn *conn, int fd, uint8_t kind, uint8_t io_kind, unsigned wanted,
                     const struct sxe_conn_handlers *handlers, void *user)
{
    sxe_loop_t *loop = conn->loop;
    int rc;

    sxe__conn_hold(conn, fd, kind, io_kind, handlers, user);
    if ((rc = loop->io->watch(loop, fd, sxe__conn_tag(conn), wanted)) < 0) {
        sxe__sys.close(fd);
        conn->fd = -1;
        conn->generation++;
        slot_give(conn);
        return rc;
    }
    return 0;
}

int sxe__conn_add(sxe_loop_t *loop, sxe_conn_t **conn_out, int fd, unsigned state, uint8_t kind,
                  uint16_t flags, uint8_t io_kind, const struct sxe_conn_handlers *handlers,
                  void *user, bool evict)
{
    static const unsigned wanted[] = {
        [SXE__KIND_STREAM] = SXE__STREAM_WANTS,
        [SXE__KIND_LISTENER] = SXE__IO_IN | SXE__IO_ACCEPT, /* level: batches lose no wake-up */
        [SXE__KIND_UDP] = SXE__IO_IN | SXE__IO_EDGE,
    };
    int rc;

    struct sxe_conn *conn = sxe__conn_take(loop, state, evict);
    if (conn == NULL) {
        sxe__sys.close(fd);
        return -ENOBUFS;
    }
    conn->flags = flags;
    unsigned wants = wanted[kind];
    if (flags & SXE__CONN_RECEIVE_FDS) {
        wants &= ~SXE__IO_RECV; /* descriptors come with recvmsg, not in the backend's buffers */
    }
    if ((rc = sxe__conn_attach(conn, fd, kind, io_kind, wants, handlers, user)) < 0) {
        return rc;
    }
    *conn_out = conn;
    return 0;
}

/* Gives back the connection's input buffer and queue, closes its fd and frees its slot. */
static void finish_close(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;

    loop->io->forget(loop, conn->fd, true);
    conn->fd = -1;
    conn->flags &= (uint16_t) ~(SXE__CONN_CLOSE_PENDING | SXE__CONN_SENDING);
    if (conn->input_buffer != SXE_NONE) {
        sxe__buffer_give(loop, conn->input_buffer);
        conn->input_buffer = SXE_NONE;
    }
    conn->input_len = 0;
    if (loop->tls != NULL) {
        sxe__tls_close(conn);
    }
    sxe__outq_drop(conn, &conn->out);
    if (conn->held_head != SXE_NONE) {
        sxe__inq_drop(conn);
    }
    conn->close_reason = 0;
    conn->failed_err = 0;
    conn->generation++;
    slot_give(conn);
}

struct sxe_connect_plan *sxe__conn_plan_take(struct sxe_conn *conn)
{
    struct sxe_connect_plan *plan = conn->loop->plans[sxe__conn_index(conn)];

    conn->loop->plans[sxe__conn_index(conn)] = NULL;
    conn->io_kind = SXE__IO_CONNECT;
    return plan;
}

/* Closes now: on_close runs, then the slot is freed, or waits for a pending send to end. */
static void close_now(struct sxe_conn *conn, enum sxe_close_reason reason, int err)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t previous_id = sxe_log_set_id(sxe__conn_index(conn));

    conn->close_reason = (uint8_t)reason | SXE__CLOSE_LATER; /* closed to on_close, too */
    SXE_LOG_DEBUG("close: %s%s%s", sxe_close_reason_name(reason), err ? ": " : "",
                  err ? sxe_strerror(err) : "");
    if (conn->lists & SXE__LIST_READY) {
        conn->lists |= SXE__LIST_STALE; /* a new connection in this slot is not read for it */
    }
    loop->stats.closed++;
    if (reason == SXE_CLOSE_TIMEOUT) {
        loop->stats.timeouts++;
    }
    bool sending = (conn->flags & SXE__CONN_SENDING) != 0;
    if (sending) {
        /* The backend reads the queue until its send completes. The bytes it holds go out, as
         * bytes a readiness backend's send took would; the slot goes when the send has ended
         * (sxe__stream_io), or, for a peer that does not read, at the CLOSING timeout. */
        conn->flags |= SXE__CONN_CLOSE_PENDING;
        unsigned state = (unsigned)sxe_pool_state(loop->conn_pool, sxe__conn_index(conn));
        sxe_pool_set_state(loop->conn_pool, sxe__conn_index(conn), state, SXE__CONN_CLOSING,
                           loop->now);
    }
    if (conn->io_kind == SXE__IO_PLANNED) { /* a connect's plan hears it is over */
        struct sxe_connect_plan *plan = sxe__conn_plan_take(conn);
        plan->ended(plan, conn,
                    reason == SXE_CLOSE_TIMEOUT ? ETIMEDOUT
                    : err != 0                  ? err
                                                : ECANCELED);
    }
    if (conn->handlers != NULL && conn->handlers->on_close != NULL) {
        conn->handlers->on_close(conn, reason, err);
    }
    if (!sending) {
        finish_close(conn);
    }
    sxe_log_set_id(previous_id);
}

/* Puts a connection on the closing list, once. */
static void closing_list_add(struct sxe_conn *conn)
{
    if ((conn->lists & SXE__LIST_CLOSING) == 0) {
        conn->lists |= SXE__LIST_CLOSING;
        conn->closing_next = conn->loop->closing_head;
        conn->loop->closing_head = sxe__conn_index(conn);
    }
}

/*
 * Inside a turn, the connection is closed for the program at once (sxe__conn_is_open() is false:
 * writes are refused, no callback comes), and the close ends when the callback that asked for it
 * has returned to the loop; outside one (before the loop runs, or as it is destroyed) at once.
 */
void sxe__conn_close_reason(struct sxe_conn *conn, enum sxe_close_reason reason, int err)
{
    if (!sxe__conn_is_open(conn)) {
        return;
    }
    if (conn->loop->turns == 0) {
        close_now(conn, reason, err);
        return;
    }
    conn->close_reason = (uint8_t)reason | SXE__CLOSE_LATER;
    if (reason == SXE_CLOSE_ERROR) {
        conn->failed_err = err;
    }
    closing_list_add(conn);
}

void sxe__conn_closing_done(struct sxe_conn *conn)
{
    finish_close(conn);
}

void sxe_conn_close(sxe_conn_t *conn)
{
    sxe__conn_close_reason(conn, SXE_CLOSE_LOCAL, 0);
}

void sxe_conn_fail(sxe_conn_t *conn, int err)
{
    if (SXE_CHECK(conn != NULL && err > 0)) {
        sxe__conn_close_reason(conn, SXE_CLOSE_ERROR, err);
    }
}

int sxe__conn_fail_later(struct sxe_conn *conn, enum sxe_close_reason reason, int err)
{
    if (conn->failed_err == 0) {
        conn->failed_err = err;
        conn->close_reason = (uint8_t)reason;
        closing_list_add(conn);
    }
    return -err;
}

/*
 * Ends the close asked for on a connection: closed by the program, or a write failed; neither if
 * the close has ended since (at once, outside a turn, or an eviction or a timeout: the slot is
 * free, or its send still pending).
 */
static void end_close(struct sxe_conn *conn)
{
    enum sxe_close_reason reason = conn->close_reason & ~SXE__CLOSE_LATER;
    bool ends = (conn->close_reason & SXE__CLOSE_LATER)
                    ? conn->fd >= 0 && (conn->flags & SXE__CONN_CLOSE_PENDING) == 0
                    : conn->failed_err != 0 && sxe__conn_is_open(conn);

    if (ends) {
        close_now(conn, reason, reason == SXE_CLOSE_ERROR ? conn->failed_err : 0);
    }
}

void sxe__conn_end_closes(sxe_loop_t *loop)
{
    while (loop->closing_head != SXE_NONE) {
        struct sxe_conn *conn = &loop->conns[loop->closing_head];
        loop->closing_head = conn->closing_next;
        conn->lists &= (uint8_t)~SXE__LIST_CLOSING;
        end_close(conn);
    }
}

static void timed_out(sxe_pool_t *pool, uint32_t index, void *arg)
{
    sxe_loop_t *loop = arg;
    struct sxe_conn *conn = &loop->conns[index];

    if (sxe_pool_state(pool, index) == SXE__CONN_CLOSING) {
        /* A closed connection's last send waited too long: shutting the socket ends it, and
         * its completion frees the slot. */
        sxe__sys.shutdown(conn->fd, SHUT_RDWR);
        sxe_pool_touch(pool, index, loop->now);
        return;
    }
    /* A planned connect too slow: its plan may try the next address, with a time of its own. */
    if (conn->io_kind == SXE__IO_PLANNED && loop->plan_next(conn, ETIMEDOUT)) {
        if (sxe__conn_is_open(conn)) {
            sxe_pool_touch(pool, index, loop->now);
        } else {
            end_close(conn); /* failed by its plan: the pool's walk needs the slot moved */
        }
        return;
    }
    /* A handshake too slow: the program has nothing to say on a stream it has not heard from. */
    if (conn->handlers->on_timeout != NULL &&
        sxe_pool_state(pool, index) != SXE__CONN_HANDSHAKING) {
        uint32_t previous_id = sxe_log_set_id(sxe__conn_index(conn));
        conn->handlers->on_timeout(conn); /* a last word, such as HTTP's 408 */
        sxe_log_set_id(previous_id);
        if (!sxe__conn_is_open(conn)) {
            end_close(conn); /* closed by the callback: the pool's walk needs the slot moved */
            return;
        }
        if (sxe_pool_time(pool, index) == loop->now) {
            return; /* kept: it touched the connection */
        }
    }
    close_now(conn, SXE_CLOSE_TIMEOUT, 0); /* at once: the pool's walk needs the slot moved */
}

/* Offers input again to the connections that may hold more than they were given. */
static void read_ready(sxe_loop_t *loop)
{
    static const struct sxe__io_event again = {.events = SXE__IO_IN},
                                      offer = {.events = SXE__IO_KEPT};
    uint32_t index = loop->ready_head;

    loop->ready_head = SXE_NONE;
    while (index != SXE_NONE) {
        struct sxe_conn *conn = &loop->conns[index];
        index = conn->ready_next;
        bool stale = conn->lists & SXE__LIST_STALE;
        bool offer_only = conn->lists & SXE__LIST_OFFER;
        conn->lists &= (uint8_t) ~(SXE__LIST_READY | SXE__LIST_STALE | SXE__LIST_OFFER);
        if (!stale && sxe__conn_is_open(conn)) {
            loop->callbacks[conn->io_kind](conn, offer_only ? &offer : &again);
            sxe__conn_end_closes(loop);
        }
    }
}

static void end_turn(sxe_loop_t *loop)
{
    read_ready(loop);
    sxe_pool_check_timeouts(loop->conn_pool, loop->now, timed_out, loop);
    sxe__conn_end_closes(loop);
}

/*
 * Closes the listeners, or every connection. A connection closed already while a send is under
 * way is shut down, so that the send ends and its completion frees the slot; when the loop is
 * being destroyed, the backend goes too, and the slot is freed at once.
 */
static void close_all(sxe_loop_t *loop, bool listeners_only, bool destroying)
{
    for (unsigned state = SXE__CONN_IDLE; state < SXE__CONN_STATE_COUNT; state++) {
        struct sxe_pool_walker walker;
        uint32_t index;

        sxe_pool_walker_init(&walker, loop->conn_pool, state);
        while ((index = sxe_pool_walker_next(&walker)) != SXE_POOL_NONE) {
            struct sxe_conn *conn = &loop->conns[index];
            if (state == SXE__CONN_CLOSING && destroying) {
                finish_close(conn);
            } else if (state == SXE__CONN_CLOSING && !listeners_only) {
                sxe__sys.shutdown(conn->fd, SHUT_RDWR);
            } else if (!listeners_only || conn->kind == SXE__KIND_LISTENER) {
                sxe__conn_close_reason(conn, SXE_CLOSE_SHUTDOWN, 0);
            }
        }
    }
}

static void stop_all(sxe_loop_t *loop, bool listeners_only)
{
    close_all(loop, listeners_only, false);
}

/* A drain: the listeners stop accepting, and stay open until the stop. A socket they share with
 * another process (a reload's) keeps what waits in it for that one; and a connection the backend
 * accepted before it heard (io_uring's accepts under way) is served, not dropped. */
static void quiet_listeners(sxe_loop_t *loop)
{
    struct sxe_pool_walker walker;
    uint32_t index;

    sxe_pool_walker_init(&walker, loop->conn_pool, SXE__CONN_LISTENING);
    while ((index = sxe_pool_walker_next(&walker)) != SXE_POOL_NONE) {
        struct sxe_conn *conn = &loop->conns[index];
        if (conn->kind == SXE__KIND_LISTENER && sxe__conn_is_open(conn) &&
            loop->io->watch(loop, conn->fd, sxe__conn_tag(conn), SXE__IO_MODIFY) < 0) {
            sxe__conn_close_reason(conn, SXE_CLOSE_SHUTDOWN, 0); /* GCOVR_EXCL_LINE: no SQE */
        }
    }
}

static uint32_t writing(sxe_loop_t *loop)
{
    return sxe_pool_count(loop->conn_pool, SXE__CONN_WRITING) +
           sxe_pool_count(loop->conn_pool, SXE__CONN_CLOSING);
}

/* Accepted streams still open (not listeners, channels or the program's own connects). A walk
 * of the open ones: called once a turn, and only while a drain waits for them. */
static uint32_t serving(sxe_loop_t *loop)
{
    static const unsigned open_states[] = {SXE__CONN_IDLE, SXE__CONN_READING, SXE__CONN_WRITING,
                                           SXE__CONN_HELD, SXE__CONN_HANDSHAKING};
    uint32_t count = 0;

    for (unsigned s = 0; s < sizeof(open_states) / sizeof(open_states[0]); s++) {
        struct sxe_pool_walker walker;
        uint32_t index;

        sxe_pool_walker_init(&walker, loop->conn_pool, open_states[s]);
        while ((index = sxe_pool_walker_next(&walker)) != SXE_POOL_NONE) {
            const struct sxe_conn *conn = &loop->conns[index];
            count += conn->kind == SXE__KIND_STREAM && (conn->lists & SXE__LIST_OUTBOUND) == 0 &&
                     sxe__conn_is_open(conn);
        }
    }
    return count;
}

static const struct sxe__loop_layer conn_layer = {
    .after_event = sxe__conn_end_closes,
    .end_turn = end_turn,
    .close_all = stop_all,
    .quiet_listeners = quiet_listeners,
    .writing = writing,
    .serving = serving,
};

static size_t large_size(const struct sxe_loop_options *settings)
{
    return (size_t)settings->large_buffers * settings->large_buffer_size;
}

/* Makes the connection table, the buffers and the segments, sized by the loop's options. */
static int table_create(sxe_loop_t *loop)
{
    const struct sxe_loop_options *settings = &loop->options;
    struct sxe_pool_options pool_options = {.name = "connections",
                                            .count = settings->connections,
                                            .element_size = sizeof(struct sxe_conn),
                                            .state_count = SXE__CONN_STATE_COUNT,
                                            .state_names = conn_state_names};
    int rc;

    if ((rc = sxe_pool_create(&loop->conn_pool, &pool_options)) < 0) {
        loop->conn_pool = NULL;
        return rc;
    }
    loop->conns = sxe_pool_array(loop->conn_pool);
    for (uint32_t i = 0; i < settings->connections; i++) {
        loop->conns[i].fd = -1;
        loop->conns[i].loop = loop;
        loop->conns[i].input_buffer = SXE_NONE;
        loop->conns[i].out.head = loop->conns[i].out.tail = SXE_NONE;
        loop->conns[i].held_head = SXE_NONE;
    }
    /* Buffers are reserved, not touched: a page costs memory only once a connection uses it. */
    size_t buffers_size = (size_t)settings->buffers * settings->buffer_size;
    loop->scratch_size = (size_t)settings->buffer_size * SXE__UDP_BATCH;
    loop->buffers = sxe__sys.mmap(NULL, buffers_size, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    loop->scratch = sxe__sys.mmap(NULL, loop->scratch_size, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    loop->buffer_free = calloc(settings->buffers, sizeof(*loop->buffer_free));
    if (settings->large_buffers > 0) {
        loop->large = sxe__sys.mmap(NULL, large_size(settings), PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        loop->large_free = calloc(settings->large_buffers, sizeof(*loop->large_free));
        if (loop->large == MAP_FAILED || loop->large_free == NULL) {
            return -ENOMEM;
        }
        for (uint32_t i = 0; i < settings->large_buffers; i++) {
            loop->large_free[i] = settings->buffers + settings->large_buffers - 1 - i;
        }
        loop->large_free_count = settings->large_buffers;
    }
    uint32_t segment_count = settings->buffers + settings->connections;
    loop->segments = calloc(segment_count, sizeof(*loop->segments));
    uint32_t held_count = settings->events * SXE__HELD_PER_EVENT;
    loop->held = calloc(held_count, sizeof(*loop->held));
    if (loop->buffers == MAP_FAILED || loop->scratch == MAP_FAILED || loop->buffer_free == NULL ||
        loop->segments == NULL || loop->held == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < held_count; i++) {
        loop->held[i].next = i + 1 < held_count ? i + 1 : SXE_NONE;
    }
    loop->held_free = 0;
    for (uint32_t i = 0; i < settings->buffers; i++) {
        loop->buffer_free[i] = settings->buffers - 1 - i;
    }
    loop->buffers_free = settings->buffers;
    for (uint32_t i = 0; i < segment_count; i++) {
        loop->segments[i].next = i + 1 < segment_count ? i + 1 : SXE_NONE;
    }
    loop->segment_free = 0;
    loop->segments_free = segment_count;

    loop->timeouts[SXE__CONN_IDLE] = settings->idle_timeout;
    loop->timeouts[SXE__CONN_READING] = settings->read_timeout;
    loop->timeouts[SXE__CONN_WRITING] = settings->write_timeout;
    loop->timeouts[SXE__CONN_CONNECTING] = settings->connect_timeout;
    loop->timeouts[SXE__CONN_HANDSHAKING] = settings->handshake_timeout;
    loop->timeouts[SXE__CONN_CLOSING] =
        settings->write_timeout != 0 ? settings->write_timeout : SXE__CLOSING_TIMEOUT;
    for (unsigned state = 0; state < SXE__CONN_STATE_COUNT; state++) {
        (void)sxe_pool_set_timeout(loop->conn_pool, state, loop->timeouts[state]);
    }
    return 0;
}

int sxe_loop_create(sxe_loop_t **loop_out, const struct sxe_loop_options *options)
{
    sxe_loop_t *loop;
    int rc;

    if (!SXE_CHECK(loop_out != NULL)) {
        return -EINVAL;
    }
    if ((loop = calloc(1, sizeof(*loop))) == NULL) {
        return -ENOMEM;
    }
    loop->buffers = loop->scratch = loop->large = MAP_FAILED;
    loop->ready_head = loop->closing_head = SXE_NONE;
    loop->layer = &conn_layer;
    if ((rc = sxe__loop_open(loop, options)) < 0 || (rc = table_create(loop)) < 0) {
        if (rc == -ENOMEM) {
            SXE_LOG_ERROR("cannot allocate a loop for %u connections and %u buffers of %u bytes "
                          "(%u large of %u)",
                          loop->options.connections, loop->options.buffers,
                          loop->options.buffer_size, loop->options.large_buffers,
                          loop->options.large_buffer_size);
        }
        sxe_loop_destroy(loop);
        return rc;
    }
    *loop_out = loop;
    return 0;
}

void sxe_loop_destroy(sxe_loop_t *loop)
{
    if (loop == NULL) {
        return;
    }
    if (loop->conn_pool != NULL) {
        close_all(loop, false, true);
        sxe_pool_destroy(loop->conn_pool);
    }
    sxe__loop_close(loop);
    if (loop->buffers != MAP_FAILED) {
        sxe__sys.munmap(loop->buffers, (size_t)loop->options.buffers * loop->options.buffer_size);
    }
    if (loop->scratch != MAP_FAILED) {
        sxe__sys.munmap(loop->scratch, loop->scratch_size);
    }
    if (loop->large != MAP_FAILED) {
        sxe__sys.munmap(loop->large, large_size(&loop->options));
    }
    free(loop->plans);
    free(loop->buffer_free);
    free(loop->large_free);
    free(loop->segments);
    free(loop->held);
    sxe__tls_loop_free(loop);
    free(loop);
}

uint32_t sxe__conn_open_count(const sxe_loop_t *loop)
{
    return loop->options.connections - sxe_pool_count(loop->conn_pool, SXE__CONN_FREE) -
           sxe_pool_count(loop->conn_pool, SXE__CONN_CLOSING);
}

void sxe_loop_stats(const sxe_loop_t *loop, struct sxe_loop_stats *stats)
{
    *stats = loop->stats;
    stats->open = sxe__conn_open_count(loop);
    stats->buffers_in_use = loop->options.buffers - loop->buffers_free;
    stats->large_buffers_in_use = loop->options.large_buffers - loop->large_free_count;
}

int sxe_conn_peer(const sxe_conn_t *conn, struct sockaddr *address, socklen_t *address_len)
{
    if (!sxe__conn_is_open(conn)) {
        return -EBADF;
    }
    return sxe__sys.getpeername(conn->fd, address, address_len) < 0 ? -errno : 0;
}

int sxe_conn_local(const sxe_conn_t *conn, struct sockaddr *address, socklen_t *address_len)
{
    if (!sxe__conn_is_open(conn)) {
        return -EBADF;
    }
    return sxe__sys.getsockname(conn->fd, address, address_len) < 0 ? -errno : 0;
}

void sxe_fd_close(int fd)
{
    if (fd >= 0) {
        (void)sxe__sys.close(fd);
    }
}

const struct sxe_conn_handlers *sxe_conn_handlers(const sxe_conn_t *conn)
{
    return conn->handlers;
}

int sxe_conn_set_handlers(sxe_conn_t *conn, const struct sxe_conn_handlers *handlers)
{
    if (!SXE_CHECK(conn != NULL && handlers != NULL) || !sxe__conn_is_open(conn)) {
        return -EINVAL;
    }
    conn->handlers = handlers;
    /* What the old handlers leave (known when their on_read returns) is the new ones' to read:
     * offered from the next turn. */
    sxe__conn_offer_later(conn);
    return 0;
}

int sxe_conn_touch(sxe_conn_t *conn)
{
    if (!sxe__conn_is_open(conn)) {
        return -EINVAL;
    }
    return sxe_pool_touch(conn->loop->conn_pool, sxe__conn_index(conn), conn->loop->now);
}

void *sxe_conn_user(const sxe_conn_t *conn)
{
    return conn->user;
}

void sxe_conn_set_user(sxe_conn_t *conn, void *user)
{
    conn->user = user;
}

sxe_loop_t *sxe_conn_loop(const sxe_conn_t *conn)
{
    return conn->loop;
}

int sxe_conn_fd(const sxe_conn_t *conn)
{
    return sxe__conn_is_open(conn) ? conn->fd : -1;
}

bool sxe_conn_secure(const sxe_conn_t *conn)
{
    return conn->io_kind == SXE__IO_TLS;
}

uint32_t sxe_conn_index(const sxe_conn_t *conn)
{
    return sxe__conn_index(conn);
}

uint64_t sxe_conn_id(const sxe_conn_t *conn)
{
    return sxe__conn_tag(conn);
}

bool sxe_conn_closed(const sxe_conn_t *conn)
{
    return !sxe__conn_is_open(conn);
}

sxe_conn_t *sxe_conn_from_id(sxe_loop_t *loop, uint64_t id)
{
    uint32_t index = (uint32_t)id;

    if (index >= loop->options.connections) {
        return NULL;
    }
    struct sxe_conn *conn = &loop->conns[index];
    return sxe__conn_is_open(conn) && conn->generation == (uint32_t)(id >> 32) ? conn : NULL;
}
