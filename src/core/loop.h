/*
 * Loop internals, shared by the core's files and with tests:
 * - loop.c: the loop's turn, "now", signals and the backend (io.h); it knows slots and their
 *   callbacks, never what a connection does;
 * - timer.c: the timer heap;
 * - conn.c: the connection table and a connection's life (sxe_loop_create builds both);
 * - outq.c: a connection's output queue;
 * - stream.c, listen.c, udp.c, fdpass.c: the kinds of slot, each with its own callback; write.c,
 *   the writes of streams; transport_tls.c (transport.h), TLS under them.
 */
#ifndef SXE_LOOP_INTERNAL_H
#define SXE_LOOP_INTERNAL_H

#include <stdbool.h>

#include "io.h"
#include "sxe/conn.h"
#include "sxe/loop.h"
#include "sxe/pool.h"
#include "sxe/timer.h"

#define SXE_NONE UINT32_MAX

/* How long a closed connection's last send may wait for the peer, without a write_timeout. */
#define SXE__CLOSING_TIMEOUT (5 * 1000000000ULL)

/* Datagrams taken per recvmmsg call; the loop's scratch area holds this many buffers. */
#define SXE__UDP_BATCH 8

/*
 * A connection's state in the connection table's pool. Each state is a queue ordered by last
 * activity, and the timed ones carry the loop's timeouts, so "close what has idled too long" is
 * O(1) per connection closed.
 */
enum sxe__conn_state {
    SXE__CONN_FREE,
    SXE__CONN_IDLE,        /* open, nothing pending: idle_timeout */
    SXE__CONN_READING,     /* holds part of a message: read_timeout */
    SXE__CONN_WRITING,     /* has output queued: write_timeout */
    SXE__CONN_CONNECTING,  /* outgoing connect under way: connect_timeout */
    SXE__CONN_LISTENING,   /* listeners and UDP sockets: no timeout */
    SXE__CONN_CLOSING,     /* closed, but the backend still sends from its queue: write_timeout,
                              or SXE__CLOSING_TIMEOUT without one */
    SXE__CONN_HELD,        /* its input kept by the program (sxe_conn_keep): no timeout */
    SXE__CONN_HANDSHAKING, /* a TLS stream before its handshake ends: handshake_timeout, from the
                              accept, whatever it reads or writes meanwhile */
    SXE__CONN_STATE_COUNT
};

enum sxe__conn_kind {
    SXE__KIND_STREAM,
    SXE__KIND_LISTENER,
    SXE__KIND_UDP,
};

#define SXE__CONN_EOF          0x01u /* the peer shut down its side */
#define SXE__CONN_SHUTDOWN     0x02u /* shut our side down once the queue drains */
#define SXE__CONN_RECEIVE_FDS  0x04u /* stream that carries fds, not bytes */
#define SXE__CONN_EVICT_IDLE   0x08u /* listener: evict the oldest idle when full */
#define SXE__CONN_NOTIFY_DRAIN 0x10u /* call on_drained when the queue empties */
#define SXE__CONN_RESUMED      0x20u /* offer kept input, then read to the end (sxe_conn_resume) */
#define SXE__CONN_CORKED       0x40u /* in on_read: writes queue, and one send takes them after */
/* on_read consumed, or the program wrote TLS plain bytes, since the last settle */
#define SXE__CONN_PROGRESS      0x80u
#define SXE__CONN_CLOSE_SENT    0x100u /* close once the queue drains (sxe_conn_close_when_sent) */
#define SXE__CONN_PAUSED        0x200u /* not reading: input stays in the socket (sxe_conn_pause) */
#define SXE__CONN_SENDING       0x400u /* a send is pending in the backend: the queue stays put */
#define SXE__CONN_CLOSE_PENDING 0x800u /* closed, but a pending send still holds its queue */
#define SXE__CONN_EOF_PENDING   0x1000u /* the stream ended while paused: said after kept input */
#define SXE__CONN_HOLDING       0x2000u /* input is held (inq.c): the backend was told to stop */
#define SXE__CONN_NO_OUT        0x4000u /* writability is not watched until a write must wait */
#define SXE__CONN_KEPT          0x8000u /* on_read kept its input itself: deliver moves none */

/* In close_reason: closed by a callback in this turn; on_close and the slot's end wait for the
 * callback to return (sxe__conn_end_closes). */
#define SXE__CLOSE_LATER 0x80u

/*
 * The loop's lists a slot is on. Kept apart from flags, and not reset when the slot is reused: a
 * connection can close, and its slot go to a new one, while the slot is still linked in a list.
 */
#define SXE__LIST_READY   0x01u /* on the ready list, through ready_next */
#define SXE__LIST_CLOSING 0x02u /* on the closing list, through closing_next */
#define SXE__LIST_STALE   0x04u /* on the ready list for a connection that has closed since */
#define SXE__LIST_OFFER   0x08u /* on the ready list only to offer kept input: no read */
#define SXE__LIST_HUP     0x10u /* the peer's end was reported (an edge that will not come again) */
/* Not lists, but marks cleared when a slot is taken (not when it is freed, like the lists): */
#define SXE__LIST_UNREAD   0x40u /* reading stopped, input left in the socket (kept input full) */
#define SXE__LIST_OUTBOUND 0x80u /* the program opened it (sxe_conn_connect): never evicted */
#define SXE__LIST_SHUT                                                                             \
    0x20u /* not a list: sxe_conn_shutdown() was called (overflow() reads on)                      \
           */

/*
 * A queued piece of output: bytes in one of the loop's buffers, a file range (sendfile), or the
 * caller's own memory, sent without a copy. A file range or memory may carry a release callback,
 * called once when the segment goes (sent, or dropped with its connection).
 */
struct sxe__segment {
    uint32_t next;    /* next segment of the connection, or SXE_NONE */
    uint32_t buffer;  /* buffer index, or SXE_NONE for a file range or memory */
    uint32_t start;   /* buffer: first unsent byte in the buffer; file or memory: the buffer
                         segment just before it, whose buffer may have room, or SXE_NONE */
    uint32_t end;     /* buffer: one past the last */
    int file_fd;      /* file: the caller's fd; -1 for memory */
    bool close_fd;    /* file: the connection owns file_fd and closes it when it goes */
    bool owns;        /* buffer: the last segment in the buffer, which gives it back when it goes */
    off_t offset;     /* file: next byte to send */
    size_t remaining; /* file or memory: bytes left */
    const char *data; /* memory: next byte to send */
    sxe_conn_release_t release; /* file or memory: called when the segment goes, or NULL */
    void *release_arg;
};

/* A list of segments, oldest first (outq.h). */
struct sxe__queue {
    uint32_t head; /* the first segment, or SXE_NONE */
    uint32_t tail;
};

struct sxe_conn;

/* A kind's callback for the events of its slot, registered in loop->callbacks by its module. */
typedef void (*sxe__io_cb_t)(struct sxe_conn *conn, const struct sxe__io_event *event);

/* The kinds of slot by their callback: each module registers its own before it makes a slot. */
enum sxe__io_kind {
    SXE__IO_STREAM,   /* stream.c: byte streams */
    SXE__IO_LISTENER, /* listen.c: accepts */
    SXE__IO_UDP,      /* udp.c: datagrams */
    SXE__IO_FDPASS,   /* fdpass.c: fd channels */
    SXE__IO_CONNECT,  /* listen.c: a connect's first event */
    SXE__IO_TLS,      /* stream.c, its bytes through transport_tls.c: TLS streams */
    SXE__IO_RESERVED, /* listen.c: a connect whose address is to come (never watched) */
    SXE__IO_PLANNED,  /* listen.c: a connect's first event, with a plan (loop->plans) */
    SXE__IO_KIND_COUNT
};

/* An entry in the connection table: an element of the loop's pool. */
struct sxe_conn {
    sxe_loop_t *loop;
    const struct sxe_conn_handlers *handlers;
    void *user;
    int fd;              /* -1 when the slot is free or the connection closed */
    uint32_t generation; /* bumped at every close: stale events and ids no longer match */
    uint8_t kind;
    uint8_t close_reason; /* why it closes at the end of the callback, SXE__CLOSE_LATER with it */
    uint16_t flags;
    uint32_t input_buffer; /* buffer holding unconsumed input, or SXE_NONE */
    uint32_t input_len;    /* bytes of it */
    struct sxe__queue out; /* what goes to the socket, in order (outq.h) */
    uint32_t ready_next;   /* link in the loop's ready list */
    uint16_t accept_batch;
    uint8_t lists;      /* SXE__LIST_* */
    uint8_t io_kind;    /* enum sxe__io_kind: whose callback gets its events */
    uint32_t held_head; /* input received but not yet offered (inq.c), or SXE_NONE */
    uint64_t queued;    /* bytes queued */
    int failed_err;     /* a write failed with this errno: it closes at the end of the callback */
    uint32_t closing_next; /* link in the loop's closing list */
};

_Static_assert(sizeof(struct sxe_conn) == 80, "a connection's slot is 80 bytes: mind the padding");

/* A piece of received input held in the backend's buffer until its connection can take it. */
struct sxe__held {
    const char *data;
    uint32_t len;
    uint32_t next;   /* the connection's next held piece, or the free list's next */
    uint32_t buffer; /* the loop's I/O buffer it was copied into, or SXE_NONE: the backend's */
};

/* What the loop asks of the connection layer above it; set by sxe_loop_create. */
struct sxe__loop_layer {
    void (*after_event)(sxe_loop_t *loop); /* close what a callback failed */
    void (*end_turn)(sxe_loop_t *loop);    /* read the ready, time out the idle */
    void (*close_all)(sxe_loop_t *loop, bool listeners_only); /* stop: close them */
    void (*quiet_listeners)(sxe_loop_t *loop); /* drain: the listeners stop accepting */
    uint32_t (*writing)(sxe_loop_t *loop);     /* how many still have output */
    uint32_t (*serving)(sxe_loop_t *loop);     /* accepted streams still open (a drain waits) */
};

#define SXE__AT_STOP_MAX   8
#define SXE__DRAIN_IDLE_NS SXE_NS_PER_SEC /* a drain's idle timeout (sxe_loop_drain()) */

struct sxe_loop {
    const struct sxe__io_backend *io; /* the event backend (io.h) */
    void *io_state;                   /* the backend's own state */
    const struct sxe__loop_layer *layer;
    sxe__io_cb_t callbacks[SXE__IO_KIND_COUNT]; /* each kind's, registered by its module */
    int signal_fd;                              /* -1 unless sxe_loop_stop_on_signals() */
    int reserve_fd; /* kept open so an EMFILE accept can still shed a connection */
    bool stop;
    bool stopping; /* draining after a stop signal */
    bool draining; /* stopping by sxe_loop_drain(): the accepted connections close first */
    uint64_t now;
    uint64_t stop_deadline;
    uint64_t drain_ns;
    struct sxe_loop_options options;

    sxe_pool_t *conn_pool;
    struct sxe_conn *conns;
    uint64_t timeouts[SXE__CONN_STATE_COUNT];

    char *buffers;         /* options.buffers x options.buffer_size, touched only when used */
    uint32_t *buffer_free; /* stack of free buffer indices */
    uint32_t buffers_free;
    /* options.large_buffers x options.large_buffer_size, for input only; a large buffer's index
     * is options.buffers + its place here, so one index names either kind (outq.c). */
    char *large;
    uint32_t *large_free; /* stack of free large buffer indices */
    uint32_t large_free_count;
    char *scratch; /* input lands here first, for connections without a buffer */
    size_t scratch_size;

    struct sxe__held *held; /* options.events * SXE__HELD_PER_EVENT of them (inq.c) */
    uint32_t held_free;     /* free list through next */

    struct sxe__segment *segments;
    uint32_t segment_free;  /* free list through next */
    uint32_t segments_free; /* how many are on it */

    uint32_t ready_head;   /* connections with more input to read next turn */
    uint32_t closing_head; /* connections whose close ends once the callback has returned */
    uint32_t turns;        /* sxe_loop_run_once() calls running: closes wait for their end */

    sxe_timer_t **heap; /* timers, a binary min-heap on deadline */
    uint32_t heap_len;

    struct sxe__io_event *events;    /* options.events of them, filled by the backend's wait */
    int event_count;                 /* how many the turn's wait filled */
    struct sxe_connect_plan **plans; /* by slot, for SXE__IO_PLANNED; NULL before the first */
    /* listen.c's, set with plans: a planned connect failed with err; whether its plan has it */
    bool (*plan_next)(struct sxe_conn *conn, int err);
    struct sxe__tls_loop *tls; /* TLS state by slot, made by the first TLS listener, or NULL */
    struct sxe_loop_stats stats;

    struct {
        void (*hook)(void *arg);
        void *arg;
    } at_stop[SXE__AT_STOP_MAX]; /* sxe_loop_at_stop() */
    struct {
        void (*hook)(void *arg);
        void *arg;
    } on_signal[3]; /* sxe_loop_on_signal(): SIGHUP, SIGUSR1, SIGUSR2 */
    void (*turn_hook)(sxe_loop_t *loop, void *arg); /* after each turn, or NULL (worker.c) */
    void *turn_arg;
    int wake_fd;                      /* an eventfd the wakers write, -1 until the first (wake.c) */
    struct sxe_loop_waker *wakers;    /* SXE__WAKERS_MAX of them, or NULL before the first */
    int wake_sent;                    /* atomic: the eventfd was written and not yet read */
    struct sxe__fd_watch *fd_watches; /* SXE__FD_WATCHES_MAX, or NULL before the first */
};

/* A connection's slot in the table. */
static inline uint32_t sxe__conn_index(const struct sxe_conn *conn)
{
    return (uint32_t)(conn - conn->loop->conns);
}

/* A slot's tag for the backend: the slot in the low half, its generation in the high half. */
static inline uint64_t sxe__conn_tag(const struct sxe_conn *conn)
{
    return (uint64_t)conn->generation << 32 | sxe__conn_index(conn);
}

#define SXE__SIGNAL_TAG UINT64_MAX
#define SXE__WAKE_TAG   (UINT64_MAX - 1)
#define SXE__WAKERS_MAX 16
/* Outside descriptors (watch_fd.c) have the tags below the wakers': slot i's is SXE__FD_TAG(i). */
#define SXE__FD_WATCHES_MAX 16
#define SXE__FD_TAG(i)      (UINT64_MAX - 2 - (uint64_t)(i))
#define SXE__LOOP_TAGS                                                                             \
    SXE__FD_TAG(SXE__FD_WATCHES_MAX - 1) /* the lowest that is not a connection's */

/* wake.c: a waker's event (its eventfd was read), and its end with the loop. */
void sxe__wake_take(sxe_loop_t *loop);
void sxe__wake_close(sxe_loop_t *loop);

/* watch_fd.c: an outside descriptor's event, and the watches' end with the loop. */
void sxe__fd_watch_event(sxe_loop_t *loop, const struct sxe__io_event *event);
void sxe__fd_watch_close(sxe_loop_t *loop);

/* loop.c: the loop's half of sxe_loop_create and sxe_loop_destroy (conn.c has the table). */
int sxe__loop_open(sxe_loop_t *loop, const struct sxe_loop_options *options);
void sxe__loop_close(sxe_loop_t *loop);

/* conn.c: the connection table and a connection's life. */
struct sxe_conn *sxe__conn_take(sxe_loop_t *loop, unsigned state, bool evict);
/* Frees a slot taken and not attached to a descriptor. */
void sxe__conn_untake(struct sxe_conn *conn);
/* Gives a taken slot its descriptor, kind and handlers, without watching the descriptor. */
void sxe__conn_hold(struct sxe_conn *conn, int fd, uint8_t kind, uint8_t io_kind,
                    const struct sxe_conn_handlers *handlers, void *user);
/* Holds (sxe__conn_hold()) and watches for wanted; on failure closes fd and frees the slot. */
int sxe__conn_attach(struct sxe_conn *conn, int fd, uint8_t kind, uint8_t io_kind, unsigned wanted,
                     const struct sxe_conn_handlers *handlers, void *user);
/* Takes a slot for fd (evicting the oldest idle connection if asked and full); closes fd on
 * failure. */
int sxe__conn_add(sxe_loop_t *loop, sxe_conn_t **conn_out, int fd, unsigned state, uint8_t kind,
                  uint16_t flags, uint8_t io_kind, const struct sxe_conn_handlers *handlers,
                  void *user, bool evict);
/* Connections open now, listeners and UDP sockets included (sxe_loop_stats' open). */
uint32_t sxe__conn_open_count(const sxe_loop_t *loop);
void sxe__conn_close_reason(struct sxe_conn *conn, enum sxe_close_reason reason, int err);
/* loop.c: the turn's events still to come for tag are dropped (its socket was replaced). */
void sxe__loop_drop_events(sxe_loop_t *loop, uint64_t tag);
/* The plan of a connect that has ended (SXE__IO_PLANNED), taken off it: it is SXE__IO_CONNECT. */
struct sxe_connect_plan *sxe__conn_plan_take(struct sxe_conn *conn);
/* A connection closed while a send was pending: the backend is done with its queue now. */
void sxe__conn_closing_done(struct sxe_conn *conn);
int sxe__conn_fail_later(struct sxe_conn *conn, enum sxe_close_reason reason, int err);
/* Ends the closes asked for since the last call: on_close runs, and the slot is freed (conn.c). */
void sxe__conn_end_closes(sxe_loop_t *loop);
void sxe__conn_ready_later(struct sxe_conn *conn);
/* Offers the kept input again from the next turn, without a read (as after a resume). */
void sxe__conn_offer_later(struct sxe_conn *conn);
void sxe__conn_settle(struct sxe_conn *conn);
bool sxe__conn_is_open(const struct sxe_conn *conn);

/*
 * Checks the connection table: every slot's state agrees with its descriptor, each open
 * connection's queue is sound, and every buffer and segment is free or held exactly once.
 * @return 0, or -EUCLEAN after logging the first broken invariant.
 */
int sxe__conn_validate(const sxe_loop_t *loop);

/* stream.c: the read and write paths of byte streams. */
void sxe__stream_io(struct sxe_conn *conn, const struct sxe__io_event *event);
/* What a stream wants from the backend (io.h). */
#define SXE__STREAM_WANTS (SXE__IO_IN | SXE__IO_OUT | SXE__IO_EDGE | SXE__IO_RECV)
void sxe__stream_flush(struct sxe_conn *conn);
/* Output waits with no send under way: have the backend say when the socket is writable. */
void sxe__stream_wait_writable(struct sxe_conn *conn);
/*
 * Handles a send's completion (SXE__IO_SENT) for a stream or fd channel. @return true if the event
 * needs nothing more: the connection has closed, or was closed already with a send under way.
 */
bool sxe__stream_sent_or_closed(struct sxe_conn *conn, const struct sxe__io_event *event);
/*
 * One read of a readiness backend's socket, and what follows it: returns the read's result
 * (errno set when negative), and when it took bytes, sets *more if the socket may hold more.
 */
typedef ssize_t (*sxe__read_one_t)(struct sxe_conn *conn, uint32_t events, bool *more);
/*
 * Reads the connection with read_one while it says there is more, READS_PER_TURN times at most
 * (then the ready list brings it back next turn); a read's end of stream goes to on_eof, an error
 * closes, EINTR reads again.
 */
void sxe__stream_read_turn(struct sxe_conn *conn, sxe__read_one_t read_one, uint32_t events);
/* deliver.c: hands len bytes at data to on_read and keeps what it leaves; false if it closed. */
bool sxe__stream_deliver(struct sxe_conn *conn, char *data, size_t len);
/* deliver.c: the kept input filled its buffer unconsumed: a larger one, or an overflow. @return
 * true if there is room to read on. */
bool sxe__stream_grow(struct sxe_conn *conn);
/* The peer shut down: on_eof, or a close without it. */
void sxe__stream_eof(struct sxe_conn *conn);
bool sxe__stream_closed_when_sent(struct sxe_conn *conn);
/* An open stream connection (pause, resume, keep, cork take no other): 0, -EPIPE, -ENOTCONN for a
 * reserved one (sxe_conn_reserve()), or -EINVAL for NULL (asserts in debug builds). */
int sxe__stream_check_open(const struct sxe_conn *conn);
int sxe__stream_check_writable(const struct sxe_conn *conn);

/*
 * inq.c: input a completion backend received for a connection that cannot take it yet (paused, or
 * its output backed up), held in order: in the backend's buffers, or copied into the loop's I/O
 * buffers once the backend has none to spare.
 */
#define SXE__HELD_PER_EVENT 4   /* held pieces the loop has room for, per event of a turn */
#define SXE__HELD_PER_CONN  256 /* held pieces one connection may have: more is an overflow */
/* Holds len bytes at data (a RECV event's): @return false if there is no room left. */
bool sxe__inq_hold(struct sxe_conn *conn, const char *data, size_t len);
/* Takes the oldest held piece off; the caller offers it, then releases it. */
bool sxe__inq_take(struct sxe_conn *conn, struct sxe__held *piece);
/* Puts what is left of the piece just taken, past its first taken bytes, back at the head. */
void sxe__inq_put_back(struct sxe_conn *conn, const struct sxe__held *piece, size_t taken);
/* Gives a piece's buffer back (to the backend, or the loop's I/O buffers). */
void sxe__inq_release(sxe_loop_t *loop, const struct sxe__held *piece);
/* Releases every held piece. */
void sxe__inq_drop(struct sxe_conn *conn);

/* listen.c: a listening socket made apart from any loop (for workers), and attaching one. */
int sxe__listen_socket(const struct sockaddr *address, socklen_t address_len,
                       const struct sxe_listen_options *options);
/*
 * Whether no one listens on address: a plain bind (no SO_REUSEPORT, not listening) of a socket
 * closed at once. SO_REUSEPORT lets any process of the same user join a port's group, so a set
 * that is about to make one asks first. @return 0, or -errno of the bind (-EADDRINUSE).
 */
int sxe__listen_probe(const struct sockaddr *address, socklen_t address_len,
                      const struct sxe_listen_options *options);
/* Takes fd, a listening socket, into the loop; on failure fd is closed. */
int sxe__listen_attach(sxe_loop_t *loop, sxe_conn_t **listener, int fd,
                       const struct sxe_listen_options *options,
                       const struct sxe_conn_handlers *handlers, void *user);
/*
 * Adopts fd, a connected non-blocking stream passed from another loop's accept, making room by
 * evicting the oldest idle connection if asked. A plain one is CONNECTING until its first event;
 * one with tls (the loop prepared: sxe__tls_prepare) starts its handshake as a TLS listener's
 * connection does, on_connect first. On failure fd is closed.
 */
int sxe__conn_adopt_passed(sxe_loop_t *loop, sxe_conn_t **conn, int fd, bool evict, sxe_tls_t *tls,
                           const struct sxe_conn_handlers *handlers, void *user);
/* Adopts fd, a connected Unix stream socket, as an fd channel (it receives descriptors). */
int sxe__conn_adopt_channel(sxe_loop_t *loop, sxe_conn_t **conn, int fd,
                            const struct sxe_conn_handlers *handlers, void *user);

/* fdpass.c: fd channels, the stream kind that carries descriptors. */
void sxe__fdpass_io(struct sxe_conn *conn, const struct sxe__io_event *event);
/* Sends fd over the Unix stream channel, with one marker byte (flags: MSG_DONTWAIT...). */
int sxe__fdpass_send(int channel, int fd, int flags);

/* timer.c */
uint64_t sxe__timer_next(const sxe_loop_t *loop);
void sxe__timer_run(sxe_loop_t *loop);

/*
 * Checks the timer heap: each timer's slot names its place and no child fires before its parent.
 * @return 0, or -EUCLEAN after logging the first broken invariant.
 */
int sxe__timer_validate(const sxe_loop_t *loop);

#endif
