/*
 * Connections: the connection table (a pool), accepting, connecting, the read and write paths,
 * closing, UDP and fd passing.
 *
 * Input. A read lands in the loop's scratch area, and the callback sees it there. Only what the
 * callback leaves unconsumed is copied into a buffer of the connection's own, and the next read
 * appends to that buffer. So a connection that consumes whole messages (the usual case) never
 * holds a buffer between events, and idle connections cost their table entry alone.
 *
 * Output. A write goes straight to the socket. What the socket does not take is copied into
 * buffers and queued as segments; sendfile ranges and the caller's own memory (sxe_conn_write_ref)
 * are queued as segments without a buffer, and their release callbacks run when they go. The
 * queue is sent as the socket drains (edge-triggered EPOLLOUT). A connection's pool state says
 * what it waits for (IDLE, READING, WRITING), and the pool's per-state timeouts enforce the
 * loop's idle, read and write timeouts.
 */
#define SXE_LOG_MODULE conn_log
#include "sxe/log.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/uio.h>

#include "loop.h"
#include "sys.h"

static struct sxe_log_module conn_log = SXE_LOG_MODULE_INIT(CONN);

/* Linux 4.2 and later; glibc's headers do not name it. */
#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

/* Reads taken from one connection per turn before others get a chance. */
#define READS_PER_TURN 4

/* Segments sent with one sendmsg: sixteen pipelined heads, each with a body by reference. */
#define GATHER_MAX 32

/* References up to this long are copied when queued: a copy costs less than a queue entry. */
#define REF_COPY_MAX 1024

/* The most fds one recvmsg accepts on a fd-passing connection. */
#define FDS_PER_MESSAGE 8

static const char *const close_reason_names[] = {"local",    "peer",     "error",
                                                 "timeout",  "evicted",  "no buffer",
                                                 "overflow", "shutdown", "handed off"};

const char *sxe_close_reason_name(enum sxe_close_reason reason)
{
    return (unsigned)reason < sizeof(close_reason_names) / sizeof(close_reason_names[0])
               ? close_reason_names[reason]
               : "?";
}

static char *buffer_at(sxe_loop_t *loop, uint32_t buffer)
{
    return loop->buffers + (size_t)buffer * loop->options.buffer_size;
}

static uint32_t buffer_take(sxe_loop_t *loop)
{
    return loop->buffers_free > 0 ? loop->buffer_free[--loop->buffers_free] : SXE_NONE;
}

static void buffer_give(sxe_loop_t *loop, uint32_t buffer)
{
    loop->buffer_free[loop->buffers_free++] = buffer;
}

/* Takes a free segment; the caller has checked segments_free. */
static uint32_t segment_take(sxe_loop_t *loop)
{
    uint32_t segment = loop->segment_free;

    loop->segment_free = loop->segments[segment].next;
    loop->segments[segment].next = SXE_NONE;
    loop->segments_free--;
    return segment;
}

/* Frees a segment and its buffer, if it has one and is the buffer's last segment. */
static void segment_give(sxe_loop_t *loop, uint32_t segment)
{
    if (loop->segments[segment].buffer != SXE_NONE && loop->segments[segment].owns) {
        buffer_give(loop, loop->segments[segment].buffer);
    }
    loop->segments[segment].next = loop->segment_free;
    loop->segment_free = segment;
    loop->segments_free++;
}

/* A file range: sent with sendfile, never gathered with bytes. */
static bool is_file(const struct sxe__segment *segment)
{
    return segment->buffer == SXE_NONE && segment->file_fd >= 0;
}

/* Frees the segment at the head of the queue, closing or releasing what it held. */
static void pop_segment(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t head = conn->queue_head;
    struct sxe__segment *segment = &loop->segments[head];
    sxe_conn_release_t release = segment->release;
    void *release_arg = segment->release_arg;

    conn->queue_head = segment->next;
    if (conn->queue_head == SXE_NONE) {
        conn->queue_tail = SXE_NONE;
    } else if (loop->segments[conn->queue_head].buffer == SXE_NONE &&
               loop->segments[conn->queue_head].start == head) {
        loop->segments[conn->queue_head].start = SXE_NONE; /* its buffer segment is gone */
    }
    if (is_file(segment) && segment->close_fd) {
        sxe__sys.close(segment->file_fd);
    }
    segment->release = NULL;
    segment_give(loop, head);
    if (release != NULL) {
        release(release_arg);
    }
}

static bool is_open(const struct sxe_conn *conn)
{
    return conn->fd >= 0;
}

/*
 * Puts the connection on the ready list: it is read again after the others have had a turn. If
 * its slot is still listed for the connection that had it before, that entry serves this one.
 */
static void ready_later(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;

    if (conn->lists & SXE__LIST_READY) {
        conn->lists &= (uint8_t)~SXE__LIST_STALE;
        return;
    }
    conn->lists |= SXE__LIST_READY;
    conn->ready_next = loop->ready_head;
    loop->ready_head = conn->index;
}

/*
 * Puts the connection in the pool state that says what it waits for, stamped now. Called after
 * every event on it, so the state's queue stays ordered by last activity.
 */
static void settle(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;
    unsigned from = (unsigned)sxe_pool_state(loop->conn_pool, conn->index);
    unsigned to;

    if (from == SXE__CONN_CONNECTING || from == SXE__CONN_LISTENING) {
        return;
    }
    to = conn->queue_head != SXE_NONE ? SXE__CONN_WRITING
         : conn->input_len > 0        ? SXE__CONN_READING
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
    sxe_pool_set_state(loop->conn_pool, conn->index, from, to, loop->now);
}

/* Takes a free slot, closing the oldest idle connection for it if evict is set. */
static struct sxe_conn *slot_take(sxe_loop_t *loop, unsigned state, bool evict)
{
    uint32_t index = sxe_pool_set_oldest_state(loop->conn_pool, SXE__CONN_FREE, state, loop->now);

    if (index == SXE_POOL_NONE && evict) {
        uint32_t victim = sxe_pool_oldest(loop->conn_pool, SXE__CONN_IDLE, NULL);
        if (victim != SXE_POOL_NONE) {
            loop->stats.evicted++;
            sxe__conn_close_reason(&loop->conns[victim], SXE_CLOSE_EVICTED, 0);
            index = sxe_pool_set_oldest_state(loop->conn_pool, SXE__CONN_FREE, state, loop->now);
        }
    }
    if (index == SXE_POOL_NONE) {
        loop->stats.table_full++;
        SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR,
                     "connection table full (%u): refusing connections; raise "
                     "options.connections or listen with SXE_LISTEN_EVICT_IDLE",
                     loop->options.connections);
        return NULL;
    }
    struct sxe_conn *conn = &loop->conns[index];
    conn->flags = 0;
    conn->input_buffer = SXE_NONE;
    conn->input_len = 0;
    conn->queue_head = conn->queue_tail = SXE_NONE;
    conn->queued = 0;
    conn->failed_err = 0;
    return conn;
}

static void slot_give(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;
    unsigned state = (unsigned)sxe_pool_state(loop->conn_pool, conn->index);

    sxe_pool_set_state(loop->conn_pool, conn->index, state, SXE__CONN_FREE, loop->now);
}

/* Registers fd for the connection; on failure closes fd and frees the slot. */
static int attach(struct sxe_conn *conn, int fd, uint8_t kind,
                  const struct sxe_conn_handlers *handlers, void *user)
{
    sxe_loop_t *loop = conn->loop;
    struct epoll_event event = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET};

    conn->fd = fd;
    conn->kind = kind;
    conn->handlers = handlers;
    conn->user = user;
    if (kind == SXE__KIND_LISTENER) {
        event.events = EPOLLIN; /* level-triggered: batches of accepts cannot lose a wake-up */
    } else if (kind == SXE__KIND_UDP) {
        event.events = EPOLLIN | EPOLLET;
    }
    event.data.u64 = sxe__conn_tag(conn);
    if (sxe__sys.epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, fd, &event) < 0) {
        int rc = -errno;
        SXE_LOG_ERROR("cannot watch fd %d: %s", fd, sxe_strerror(rc));
        sxe__sys.close(fd);
        conn->fd = -1;
        conn->generation++;
        slot_give(conn);
        return rc;
    }
    return 0;
}

/*
 * Gives the socket fd a slot in state, registers it and sets *conn_out. On failure fd is closed
 * and the slot, if one was taken, is free again.
 */
static int add_conn(sxe_loop_t *loop, sxe_conn_t **conn_out, int fd, unsigned state, uint8_t kind,
                    uint16_t flags, const struct sxe_conn_handlers *handlers, void *user)
{
    int rc;

    struct sxe_conn *conn = slot_take(loop, state, false);
    if (conn == NULL) {
        sxe__sys.close(fd);
        return -ENOBUFS;
    }
    conn->flags = flags;
    if ((rc = attach(conn, fd, kind, handlers, user)) < 0) {
        return rc;
    }
    *conn_out = conn;
    return 0;
}

/* Drops the connection's buffers and queue, and returns what they held. */
static void release_io(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;

    if (conn->input_buffer != SXE_NONE) {
        buffer_give(loop, conn->input_buffer);
        conn->input_buffer = SXE_NONE;
    }
    conn->input_len = 0;
    while (conn->queue_head != SXE_NONE) {
        pop_segment(conn);
    }
    conn->queued = 0;
}

void sxe__conn_close_reason(struct sxe_conn *conn, enum sxe_close_reason reason, int err)
{
    sxe_loop_t *loop = conn->loop;

    if (!is_open(conn)) {
        return;
    }
    uint32_t previous_id = sxe_log_set_id(conn->index);
    SXE_LOG_DEBUG("close: %s%s%s", sxe_close_reason_name(reason), err ? ": " : "",
                  err ? sxe_strerror(err) : "");
    sxe__sys.close(conn->fd);
    conn->fd = -1;
    conn->generation++;
    if (conn->lists & SXE__LIST_READY) {
        conn->lists |= SXE__LIST_STALE; /* a new connection in this slot is not read for it */
    }
    release_io(conn);
    loop->stats.closed++;
    if (reason == SXE_CLOSE_TIMEOUT) {
        loop->stats.timeouts++;
    }
    if (conn->handlers != NULL && conn->handlers->on_close != NULL) {
        conn->handlers->on_close(conn, reason, err);
    }
    slot_give(conn);
    sxe_log_set_id(previous_id);
}

void sxe_conn_close(sxe_conn_t *conn)
{
    sxe__conn_close_reason(conn, SXE_CLOSE_LOCAL, 0);
}

/*
 * A write failed (or found no buffer) inside some callback: the connection is closed once that
 * callback has returned, so no callback ever runs on a connection that closed under it.
 */
static int fail_later(struct sxe_conn *conn, enum sxe_close_reason reason, int err)
{
    if (conn->failed_err == 0) {
        conn->failed_err = err;
        conn->failed_reason = (uint8_t)reason;
        if ((conn->lists & SXE__LIST_FAILED) == 0) {
            conn->lists |= SXE__LIST_FAILED;
            conn->failed_next = conn->loop->failed_head;
            conn->loop->failed_head = conn->index;
        }
    }
    return -err;
}

void sxe__conn_close_failed(sxe_loop_t *loop)
{
    while (loop->failed_head != SXE_NONE) {
        struct sxe_conn *conn = &loop->conns[loop->failed_head];
        loop->failed_head = conn->failed_next;
        conn->lists &= (uint8_t)~SXE__LIST_FAILED;
        if (conn->failed_err != 0) { /* 0: closed since, and the slot given to another */
            sxe__conn_close_reason(conn, conn->failed_reason,
                                   conn->failed_reason == SXE_CLOSE_ERROR ? conn->failed_err : 0);
        }
    }
}

void sxe__conn_timed_out(sxe_pool_t *pool, uint32_t index, void *arg)
{
    sxe_loop_t *loop = arg;
    struct sxe_conn *conn = &loop->conns[index];

    (void)pool;
    if (conn->handlers->on_timeout != NULL) {
        uint32_t previous_id = sxe_log_set_id(conn->index);
        conn->handlers->on_timeout(conn); /* a last word, such as HTTP's 408 */
        sxe_log_set_id(previous_id);
    }
    sxe__conn_close_reason(conn, SXE_CLOSE_TIMEOUT, 0);
}

void sxe__conn_close_all(sxe_loop_t *loop, bool listeners_only)
{
    for (unsigned state = SXE__CONN_IDLE; state < SXE__CONN_STATE_COUNT; state++) {
        struct sxe_pool_walker walker;
        uint32_t index;

        sxe_pool_walker_init(&walker, loop->conn_pool, state);
        while ((index = sxe_pool_walker_next(&walker)) != SXE_POOL_NONE) {
            if (!listeners_only || loop->conns[index].kind == SXE__KIND_LISTENER) {
                sxe__conn_close_reason(&loop->conns[index], SXE_CLOSE_SHUTDOWN, 0);
            }
        }
    }
}

uint32_t sxe__conn_writing(sxe_loop_t *loop)
{
    return sxe_pool_count(loop->conn_pool, SXE__CONN_WRITING);
}

/*
 * Drops from the head of the queue what a send of sent bytes finished: a sendfile sends from the
 * head segment only (and moved its offset itself), a send from the leading byte segments (buffers
 * and memory).
 */
static void advance(struct sxe_conn *conn, size_t sent, bool file)
{
    struct sxe__segment *segments = conn->loop->segments;

    if (file) {
        segments[conn->queue_head].remaining -= sent;
        if (segments[conn->queue_head].remaining == 0) {
            pop_segment(conn);
        }
        return;
    }
    while (sent > 0) {
        struct sxe__segment *segment = &segments[conn->queue_head];
        bool buffer = segment->buffer != SXE_NONE;
        size_t held = buffer ? segment->end - segment->start : segment->remaining;
        size_t done = sent < held ? sent : held;
        if (buffer) {
            segment->start += (uint32_t)done;
        } else {
            segment->data += done;
            segment->remaining -= done;
        }
        sent -= done;
        if (done < held) {
            return;
        }
        pop_segment(conn);
    }
}

/* Sends queued segments until the queue is empty or the socket is full. */
static void flush(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;

    while (conn->queue_head != SXE_NONE && conn->failed_err == 0) {
        struct sxe__segment *segment = &loop->segments[conn->queue_head];
        ssize_t sent;

        bool file = is_file(segment);
        if (file) {
            sent =
                sxe__sys.sendfile(conn->fd, segment->file_fd, &segment->offset, segment->remaining);
        } else {
            struct iovec iov[GATHER_MAX];
            int count = 0;
            uint32_t at = conn->queue_head;
            for (; at != SXE_NONE && count < GATHER_MAX && !is_file(&loop->segments[at]);
                 at = loop->segments[at].next) {
                const struct sxe__segment *bytes = &loop->segments[at];
                if (bytes->buffer != SXE_NONE) {
                    iov[count].iov_base = buffer_at(loop, bytes->buffer) + bytes->start;
                    iov[count++].iov_len = bytes->end - bytes->start;
                } else {
                    iov[count].iov_base = (void *)bytes->data;
                    iov[count++].iov_len = bytes->remaining;
                }
            }
            /* Bytes followed by a file (a response head) wait to leave with the file's first bytes.
             */
            int flags =
                MSG_NOSIGNAL | (at != SXE_NONE && is_file(&loop->segments[at]) ? MSG_MORE : 0);
            if (count == 1) {
                sent = sxe__sys.send(conn->fd, iov[0].iov_base, iov[0].iov_len, flags);
            } else {
                struct msghdr message = {.msg_iov = iov, .msg_iovlen = (size_t)count};
                sent = sxe__sys.sendmsg(conn->fd, &message, flags);
            }
        }
        if (sent < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno != EAGAIN) {
                fail_later(conn, SXE_CLOSE_ERROR, errno);
            }
            return;
        }
        if (sent == 0 && file) {
            /* The file ended before the range did (truncated under us): fail the connection. */
            fail_later(conn, SXE_CLOSE_ERROR, EIO);
            return;
        }
        conn->queued -= (uint64_t)sent;
        advance(conn, (size_t)sent, file);
    }
    if (conn->queue_head != SXE_NONE || conn->failed_err != 0) {
        return;
    }
    if (conn->flags & SXE__CONN_SHUTDOWN) {
        conn->flags &= (uint16_t)~SXE__CONN_SHUTDOWN;
        sxe__sys.shutdown(conn->fd, SHUT_WR);
    }
    if (conn->flags & SXE__CONN_NOTIFY_DRAIN) {
        conn->flags &= (uint16_t)~SXE__CONN_NOTIFY_DRAIN;
        if (conn->handlers->on_drained != NULL) {
            conn->handlers->on_drained(conn);
        }
    }
}

/*
 * The buffer segment whose buffer the next queued bytes may go on filling: the tail, or, behind a
 * file range or memory, the buffer segment just before it. NULL if there is none.
 */
static struct sxe__segment *last_buffer(const struct sxe_conn *conn)
{
    struct sxe__segment *segments = conn->loop->segments;

    if (conn->queue_tail == SXE_NONE) {
        return NULL;
    }
    struct sxe__segment *tail = &segments[conn->queue_tail];
    return tail->buffer != SXE_NONE  ? tail
           : tail->start != SXE_NONE ? &segments[tail->start]
                                     : NULL;
}

/* Appends bytes to the queue; the caller has checked that buffers and the limit allow it. */
static void enqueue_bytes(struct sxe_conn *conn, const char *data, size_t len)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t size = loop->options.buffer_size;

    while (len > 0) {
        struct sxe__segment *tail =
            conn->queue_tail != SXE_NONE ? &loop->segments[conn->queue_tail] : NULL;
        if (tail == NULL || tail->buffer == SXE_NONE || tail->end == size) {
            /* Behind a file range or memory, the bytes go on in the buffer before it, if it has
             * room: pipelined heads with bodies by reference share buffers as copies would. That
             * segment hands the buffer over to the new one, which gives it back when it goes. */
            struct sxe__segment *before = last_buffer(conn);
            uint32_t segment = segment_take(loop);
            struct sxe__segment *fresh = &loop->segments[segment];
            if (before != NULL && before != tail && before->end < size) {
                fresh->buffer = before->buffer;
                fresh->start = fresh->end = before->end;
                before->owns = false;
            } else {
                fresh->buffer = buffer_take(loop);
                fresh->start = fresh->end = 0;
            }
            fresh->owns = true;
            if (tail != NULL) {
                tail->next = segment;
            } else {
                conn->queue_head = segment;
            }
            conn->queue_tail = segment;
            tail = &loop->segments[segment];
        }
        size_t room = size - tail->end;
        size_t part = len < room ? len : room;
        memcpy(buffer_at(loop, tail->buffer) + tail->end, data, part);
        tail->end += (uint32_t)part;
        conn->queued += part;
        data += part;
        len -= part;
    }
}

/* Buffers needed to queue len more bytes, counting the room left in the tail buffer. */
static uint64_t buffers_needed(const struct sxe_conn *conn, size_t len)
{
    const sxe_loop_t *loop = conn->loop;
    const struct sxe__segment *last = last_buffer(conn);
    size_t room = last != NULL ? loop->options.buffer_size - last->end : 0;

    return len <= room ? 0
                       : (len - room + loop->options.buffer_size - 1) / loop->options.buffer_size;
}

static int write_result(struct sxe_conn *conn)
{
    if (conn->queued >= conn->loop->options.high_water) {
        conn->flags |= SXE__CONN_NOTIFY_DRAIN;
        return SXE_CONN_FULL;
    }
    if (conn->queue_head != SXE_NONE && (conn->flags & SXE__CONN_CORKED) == 0) {
        conn->flags |= SXE__CONN_NOTIFY_DRAIN;
    }
    return 0;
}

static int check_writable(const struct sxe_conn *conn)
{
    if (!is_open(conn) || conn->kind != SXE__KIND_STREAM || (conn->flags & SXE__CONN_CLOSE_SENT) ||
        (sxe_pool_state(conn->loop->conn_pool, conn->index) == SXE__CONN_CONNECTING)) {
        return -EPIPE;
    }
    return conn->failed_err != 0 ? -conn->failed_err : 0;
}

/* Whether the free buffers and segments can take len more queued bytes. */
static bool can_queue(const struct sxe_conn *conn, size_t len)
{
    uint64_t needed = buffers_needed(conn, len);
    return needed <= conn->loop->buffers_free && needed <= conn->loop->segments_free;
}

/*
 * Sends from *bytes straight to the socket until all *len are gone or it is full, moving both on.
 * @return 0, or the error the connection now fails with.
 */
static int send_now(struct sxe_conn *conn, const char **bytes, size_t *len)
{
    while (*len > 0) {
        ssize_t sent = sxe__sys.send(conn->fd, *bytes, *len, MSG_NOSIGNAL);
        if (sent < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == EAGAIN ? 0 : fail_later(conn, SXE_CLOSE_ERROR, errno);
        }
        *bytes += sent;
        *len -= (size_t)sent;
    }
    return 0;
}

int sxe_conn_write(sxe_conn_t *conn, const void *data, size_t len)
{
    sxe_loop_t *loop = conn->loop;
    const char *bytes = data;
    int rc;

    if ((rc = check_writable(conn)) < 0) {
        return rc;
    }
    if (conn->queued + len > loop->options.write_limit) {
        return -ENOBUFS;
    }
    if ((conn->flags & SXE__CONN_CORKED) && can_queue(conn, len)) {
        /* Inside on_read: gather the replies to this input and send them with one call. */
        enqueue_bytes(conn, bytes, len);
        return write_result(conn);
    }
    if (conn->flags & SXE__CONN_CORKED) {
        flush(conn); /* out of buffers while corked: send what is gathered, then write through */
    }
    if (conn->queue_head != SXE_NONE && !can_queue(conn, len)) {
        return -ENOBUFS;
    }
    if (conn->queue_head == SXE_NONE) {
        if ((rc = send_now(conn, &bytes, &len)) < 0 || len == 0) {
            return rc;
        }
        if (!can_queue(conn, len)) {
            /* Part is sent and the rest has nowhere to go: the stream cannot be completed. */
            loop->stats.no_buffer++;
            SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR,
                         "no free buffer to queue output: closing connections; raise "
                         "options.buffers (%u)",
                         loop->options.buffers);
            return fail_later(conn, SXE_CLOSE_NO_BUFFER, ENOBUFS);
        }
    }
    enqueue_bytes(conn, bytes, len);
    settle(conn);
    return write_result(conn);
}

/*
 * Takes a segment without a buffer, for memory (the caller sets data) or a file range (the caller
 * sets file_fd, close_fd and offset), and links it at the tail of the queue, noting the buffer
 * segment before it (see enqueue_bytes). The caller has checked segments_free.
 */
static struct sxe__segment *link_segment(struct sxe_conn *conn, size_t len,
                                         sxe_conn_release_t release, void *arg)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t index = segment_take(loop);
    struct sxe__segment *segment = &loop->segments[index];
    bool after_buffer =
        conn->queue_tail != SXE_NONE && loop->segments[conn->queue_tail].buffer != SXE_NONE;

    segment->buffer = SXE_NONE;
    segment->start = after_buffer ? conn->queue_tail : SXE_NONE;
    segment->file_fd = -1;
    segment->close_fd = false;
    segment->remaining = len;
    segment->release = release;
    segment->release_arg = arg;
    if (conn->queue_tail != SXE_NONE) {
        loop->segments[conn->queue_tail].next = index;
    } else {
        conn->queue_head = index;
    }
    conn->queue_tail = index;
    conn->queued += len;
    return segment;
}

/*
 * Queues a file range and sends what the socket takes. With own, the connection owns fd from here:
 * closed when its segment goes (sent, or the connection closed), or now if it is not queued.
 * release, if set, is called at the same moments.
 */
static int queue_file(struct sxe_conn *conn, int fd, off_t offset, size_t len, bool own,
                      sxe_conn_release_t release, void *arg)
{
    sxe_loop_t *loop = conn->loop;
    int rc = check_writable(conn);

    if (rc == 0 && !SXE_CHECK(fd >= 0)) {
        rc = -EBADF;
    }
    if (rc < 0 || len == 0 || loop->segments_free == 0) {
        if (own) {
            sxe__sys.close(fd);
        }
        if (release != NULL) {
            release(arg);
        }
        /* A zero-length range queues nothing: a zero-length sendfile would read as EOF. */
        return rc < 0 ? rc : len == 0 ? write_result(conn) : -ENOBUFS;
    }
    struct sxe__segment *segment = link_segment(conn, len, release, arg);
    segment->file_fd = fd;
    segment->close_fd = own;
    segment->offset = offset;
    flush(conn);
    if (conn->failed_err != 0) {
        return -conn->failed_err;
    }
    settle(conn);
    if (conn->queue_head != SXE_NONE) {
        /* The flush above ran even inside on_read: what is left waits for the socket, however
         * soon it drains, and on_drained must say when (write_result leaves corked writes out). */
        conn->flags |= SXE__CONN_NOTIFY_DRAIN;
    }
    return write_result(conn);
}

int sxe_conn_sendfile(sxe_conn_t *conn, int fd, off_t offset, size_t len)
{
    return queue_file(conn, fd, offset, len, false, NULL, NULL);
}

int sxe_conn_sendfile_and_close(sxe_conn_t *conn, int fd, off_t offset, size_t len)
{
    return queue_file(conn, fd, offset, len, true, NULL, NULL);
}

int sxe_conn_sendfile_ref(sxe_conn_t *conn, int fd, off_t offset, size_t len,
                          sxe_conn_release_t release, void *arg)
{
    return queue_file(conn, fd, offset, len, false, release, arg);
}

int sxe_conn_write_ref(sxe_conn_t *conn, const void *data, size_t len, sxe_conn_release_t release,
                       void *arg)
{
    sxe_loop_t *loop = conn->loop;
    const char *bytes = data;
    int rc = check_writable(conn);

    if (rc == 0 && !SXE_CHECK(data != NULL || len == 0)) {
        rc = -EINVAL;
    }
    if (rc == 0 && len > 0 && loop->segments_free == 0) {
        rc = -ENOBUFS;
    }
    /* Outside on_read, with nothing queued before them, the bytes go to the socket at once. */
    if (rc == 0 && !(conn->flags & SXE__CONN_CORKED) && conn->queue_head == SXE_NONE) {
        rc = send_now(conn, &bytes, &len);
    }
    bool copy = rc == 0 && len > 0 && len <= REF_COPY_MAX && can_queue(conn, len);
    if (copy) {
        enqueue_bytes(conn, bytes, len);
        len = 0;
    }
    if (rc < 0 || len == 0) {
        if (release != NULL) {
            release(arg);
        }
        if (copy && !(conn->flags & SXE__CONN_CORKED)) {
            settle(conn);
        }
        return rc < 0 ? rc : write_result(conn);
    }
    link_segment(conn, len, release, arg)->data = bytes;
    if (!(conn->flags & SXE__CONN_CORKED)) {
        settle(conn);
    }
    return write_result(conn);
}

/* sxe_conn_pause() and sxe_conn_resume() take open stream connections. */
static int check_pausable(const struct sxe_conn *conn)
{
    if (!SXE_CHECK(conn != NULL)) {
        return -EINVAL;
    }
    return is_open(conn) && conn->kind == SXE__KIND_STREAM ? 0 : -EPIPE;
}

int sxe_conn_pause(sxe_conn_t *conn)
{
    int rc;

    if ((rc = check_pausable(conn)) < 0) {
        return rc;
    }
    conn->flags |= SXE__CONN_PAUSED;
    if (conn->queue_head != SXE_NONE) {
        conn->flags |= SXE__CONN_NOTIFY_DRAIN; /* the natural moment to resume */
    }
    return 0;
}

int sxe_conn_resume(sxe_conn_t *conn)
{
    int rc;

    if ((rc = check_pausable(conn)) < 0) {
        return rc;
    }
    if (conn->flags & SXE__CONN_PAUSED) {
        conn->flags = (uint16_t)((conn->flags & ~SXE__CONN_PAUSED) | SXE__CONN_RESUMED);
        ready_later(conn);
    }
    return 0;
}

size_t sxe_conn_queued(const sxe_conn_t *conn)
{
    return (size_t)conn->queued;
}

int sxe_conn_shutdown(sxe_conn_t *conn)
{
    int rc;

    if ((rc = check_writable(conn)) < 0) {
        return rc;
    }
    if (conn->queue_head != SXE_NONE) {
        conn->flags |= SXE__CONN_SHUTDOWN;
        return 0;
    }
    return sxe__sys.shutdown(conn->fd, SHUT_WR) < 0 ? -errno : 0;
}

/* Closes a connection that asked to close once its queue was sent, if it now is. */
static bool closed_when_sent(struct sxe_conn *conn)
{
    if ((conn->flags & SXE__CONN_CLOSE_SENT) == 0 || conn->queue_head != SXE_NONE ||
        conn->failed_err != 0) {
        return false;
    }
    sxe__conn_close_reason(conn, SXE_CLOSE_LOCAL, 0);
    return true;
}

int sxe_conn_close_when_sent(sxe_conn_t *conn)
{
    int rc;

    if ((rc = check_writable(conn)) < 0) {
        return rc;
    }
    conn->flags |= SXE__CONN_CLOSE_SENT;
    conn->flags &= (uint16_t)~SXE__CONN_SHUTDOWN; /* the close ends our side anyway */
    if ((conn->flags & SXE__CONN_CORKED) == 0) {
        closed_when_sent(conn); /* in on_read, the flush after it returns closes */
    }
    return 0;
}

/*
 * Hands len bytes of input (data, which is either the scratch area or the connection's buffer)
 * to on_read, and keeps what it leaves. Returns false if the connection closed meanwhile.
 */
static bool deliver(struct sxe_conn *conn, char *data, size_t len)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t generation = conn->generation;
    size_t consumed = len;

    if (conn->handlers->on_read != NULL) {
        conn->flags |= SXE__CONN_CORKED;
        consumed = conn->handlers->on_read(conn, data, len);
    }
    if (conn->generation != generation) {
        return false;
    }
    conn->flags &= (uint16_t)~SXE__CONN_CORKED;
    if (consumed > 0) {
        conn->flags |= SXE__CONN_PROGRESS;
    }
    if (conn->queue_head != SXE_NONE) {
        flush(conn);
        if (conn->queue_head != SXE_NONE) {
            conn->flags |= SXE__CONN_NOTIFY_DRAIN;
        }
    }
    if (closed_when_sent(conn)) {
        return false;
    }
    if (consumed >= len) {
        if (conn->input_buffer != SXE_NONE) {
            buffer_give(loop, conn->input_buffer);
            conn->input_buffer = SXE_NONE;
        }
        conn->input_len = 0;
        return true;
    }
    size_t kept = len - consumed;
    if (conn->input_buffer == SXE_NONE) {
        if ((conn->input_buffer = buffer_take(loop)) == SXE_NONE) {
            loop->stats.no_buffer++;
            SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR,
                         "no free buffer to keep partial input: closing connections; raise "
                         "options.buffers (%u)",
                         loop->options.buffers);
            sxe__conn_close_reason(conn, SXE_CLOSE_NO_BUFFER, 0);
            return false;
        }
    }
    memmove(buffer_at(loop, conn->input_buffer), data + consumed, kept);
    conn->input_len = (uint32_t)kept;
    return true;
}

/* Reads a fd-passing connection: its bytes are markers; the fds go to on_fd. */
static ssize_t receive_fds(struct sxe_conn *conn, char *into, size_t size)
{
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int) * FDS_PER_MESSAGE)];
    } control;
    struct iovec iov = {.iov_base = into, .iov_len = size};
    struct msghdr message = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = &control,
                             .msg_controllen = sizeof(control)};

    ssize_t got = sxe__sys.recvmsg(conn->fd, &message, MSG_CMSG_CLOEXEC);
    for (struct cmsghdr *header = got > 0 ? CMSG_FIRSTHDR(&message) : NULL; header != NULL;
         header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
            if (conn->handlers->on_fd != NULL && is_open(conn)) {
                conn->handlers->on_fd(conn, fd);
            } else {
                sxe__sys.close(fd);
            }
        }
    }
    return got;
}

/*
 * Reads until the socket is empty, READS_PER_TURN times at most, delivering each read. A short
 * read means the socket is empty, and new bytes will bring a new edge, unless the peer has also
 * shut down (events carry EPOLLRDHUP or EPOLLHUP): then no edge follows, so read on to the end.
 */
static void readable(struct sxe_conn *conn, uint32_t events)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t size = loop->options.buffer_size;

    if (conn->flags & SXE__CONN_PAUSED) {
        return; /* the bytes wait in the socket, and TCP's window holds the peer back */
    }
    if (conn->flags & SXE__CONN_RESUMED) {
        conn->flags &= (uint16_t)~SXE__CONN_RESUMED;
        events |= EPOLLRDHUP; /* edges that came while paused are gone: read on to the end */
        if (conn->input_len > 0 &&
            (!deliver(conn, buffer_at(loop, conn->input_buffer), conn->input_len) ||
             (conn->flags & SXE__CONN_PAUSED))) {
            return;
        }
    }
    for (int reads = 0; reads < READS_PER_TURN; reads++) {
        bool own = conn->input_buffer != SXE_NONE;
        char *base = own ? buffer_at(loop, conn->input_buffer) : loop->scratch;
        size_t held = own ? conn->input_len : 0;

        if (held == size) {
            SXE_LOG_WARN("a message grew past buffer_size (%u bytes) unconsumed", size);
            sxe__conn_close_reason(conn, SXE_CLOSE_OVERFLOW, 0);
            return;
        }
        ssize_t got = conn->flags & SXE__CONN_RECEIVE_FDS
                          ? receive_fds(conn, base + held, size - held)
                          : sxe__sys.recv(conn->fd, base + held, size - held, 0);
        if (got > 0) {
            if (conn->flags & SXE__CONN_RECEIVE_FDS) {
                if (!is_open(conn)) {
                    return;
                }
                continue;
            }
            if (!deliver(conn, base, held + (size_t)got) || (conn->flags & SXE__CONN_PAUSED)) {
                return;
            }
            if ((size_t)got < size - held && (events & (EPOLLRDHUP | EPOLLHUP)) == 0) {
                return;
            }
            continue;
        }
        if (got == 0) {
            if (conn->handlers->on_eof == NULL) {
                sxe__conn_close_reason(conn, SXE_CLOSE_PEER, 0);
            } else if ((conn->flags & SXE__CONN_EOF) == 0) {
                conn->flags |= SXE__CONN_EOF;
                conn->handlers->on_eof(conn);
            }
            return;
        }
        if (errno == EAGAIN) {
            return;
        }
        if (errno == EINTR) {
            reads--;
            continue;
        }
        sxe__conn_close_reason(conn, SXE_CLOSE_ERROR, errno);
        return;
    }
    /* The socket may hold more: come back after the others have had a turn. */
    ready_later(conn);
}

static void finish_connect(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;
    int err = 0;
    socklen_t len = sizeof(err);

    if (sxe__sys.getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
        err = errno;
    }
    if (err != 0) {
        sxe__conn_close_reason(conn, SXE_CLOSE_ERROR, err);
        return;
    }
    sxe_pool_set_state(loop->conn_pool, conn->index, SXE__CONN_CONNECTING, SXE__CONN_IDLE,
                       loop->now);
    loop->stats.connected++;
    if (conn->handlers->on_connect != NULL) {
        conn->handlers->on_connect(conn);
    }
}

static void datagrams(struct sxe_conn *conn)
{
    sxe_loop_t *loop = conn->loop;
    struct mmsghdr messages[SXE__UDP_BATCH];
    struct iovec iov[SXE__UDP_BATCH];
    struct sockaddr_storage from[SXE__UDP_BATCH];
    uint32_t generation = conn->generation;

    for (;;) {
        for (unsigned i = 0; i < SXE__UDP_BATCH; i++) {
            iov[i] = (struct iovec){loop->scratch + (size_t)i * loop->options.buffer_size,
                                    loop->options.buffer_size};
            messages[i].msg_hdr = (struct msghdr){.msg_name = &from[i],
                                                  .msg_namelen = sizeof(from[i]),
                                                  .msg_iov = &iov[i],
                                                  .msg_iovlen = 1};
        }
        int count = sxe__sys.recvmmsg(conn->fd, messages, SXE__UDP_BATCH, 0, NULL);
        if (count < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno != EAGAIN) {
                SXE_LOG_WARN("recvmmsg failed: %s", sxe_strerror(-errno));
            }
            return;
        }
        for (int i = 0; i < count; i++) {
            if (messages[i].msg_hdr.msg_flags & MSG_TRUNC) {
                loop->stats.datagrams_dropped++;
                continue;
            }
            if (conn->handlers->on_datagram != NULL) {
                conn->handlers->on_datagram(conn, iov[i].iov_base, messages[i].msg_len,
                                            (struct sockaddr *)&from[i],
                                            messages[i].msg_hdr.msg_namelen);
                if (conn->generation != generation) {
                    return;
                }
            }
        }
        if (count < SXE__UDP_BATCH) {
            return;
        }
    }
}

static void accept_batch(struct sxe_conn *listener);

void sxe__conn_dispatch(sxe_loop_t *loop, struct sxe_conn *conn, uint32_t events)
{
    uint32_t generation = conn->generation;
    uint32_t previous_id = sxe_log_set_id(conn->index);

    switch (conn->kind) {
    case SXE__KIND_LISTENER:
        accept_batch(conn);
        break;
    case SXE__KIND_UDP:
        datagrams(conn);
        break;
    default:
        if (sxe_pool_state(loop->conn_pool, conn->index) == SXE__CONN_CONNECTING) {
            finish_connect(conn);
            break;
        }
        if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
            readable(conn, events);
        }
        if (conn->generation == generation && (events & EPOLLOUT)) {
            flush(conn);
            closed_when_sent(conn);
        }
        if (conn->generation == generation) {
            settle(conn);
        }
        break;
    }
    sxe_log_set_id(previous_id);
}

void sxe__conn_read_ready(sxe_loop_t *loop)
{
    uint32_t index = loop->ready_head;

    loop->ready_head = SXE_NONE;
    while (index != SXE_NONE) {
        struct sxe_conn *conn = &loop->conns[index];
        index = conn->ready_next;
        bool stale = conn->lists & SXE__LIST_STALE;
        conn->lists &= (uint8_t) ~(SXE__LIST_READY | SXE__LIST_STALE);
        if (!stale && is_open(conn)) {
            sxe__conn_dispatch(loop, conn, EPOLLIN);
            sxe__conn_close_failed(loop);
        }
    }
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

static void accept_batch(struct sxe_conn *listener)
{
    sxe_loop_t *loop = listener->loop;
    uint32_t generation = listener->generation;

    for (unsigned accepted = 0; accepted < listener->accept_batch;) {
        int fd = sxe__sys.accept4(listener->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int err = errno;
            if (err == EAGAIN) {
                return;
            }
            if (err == EINTR) {
                continue;
            }
            loop->stats.accept_errors++;
            if (err == ECONNABORTED || err == EPROTO) {
                continue; /* the peer gave up in the backlog: the next one may be fine */
            }
            SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR, "accept4 failed: %s; shedding and retrying",
                         sxe_strerror(-err));
            if (err == EMFILE || err == ENFILE) {
                shed_with_reserve_fd(listener);
            }
            return; /* out of a resource: try again next turn */
        }
        struct sxe_conn *conn =
            slot_take(loop, SXE__CONN_IDLE, (listener->flags & SXE__CONN_EVICT_IDLE) != 0);
        if (listener->generation != generation) {
            sxe__sys.close(fd); /* GCOVR_EXCL_LINE: an evicted connection's on_close closed us */
            return;             /* GCOVR_EXCL_LINE */
        }
        if (conn == NULL) {
            sxe__sys.close(fd);
            continue;
        }
        accepted++;
        if (attach(conn, fd, SXE__KIND_STREAM, listener->handlers, listener->user) < 0) {
            continue;
        }
        loop->stats.accepted++;
        if (listener->flags & SXE__CONN_RECEIVE_FDS) {
            conn->flags |= SXE__CONN_RECEIVE_FDS;
        }
        if (conn->handlers->on_connect != NULL) {
            uint32_t previous_id = sxe_log_set_id(conn->index);
            conn->handlers->on_connect(conn);
            sxe_log_set_id(previous_id);
            sxe__conn_close_failed(loop);
        }
        if (listener->generation != generation) {
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
        SXE_LOG_ERROR("cannot set %s: %s", what, sxe_strerror(rc));
        return rc;
    }
    return 0;
}

static int listen_socket(const struct sockaddr *address, socklen_t address_len,
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
        SXE_LOG_ERROR("cannot bind: %s", sxe_strerror(rc));
    }
    if (rc == 0 && sxe__sys.listen(fd, options->backlog > 0 ? options->backlog : SOMAXCONN) < 0) {
        rc = -errno;
        SXE_LOG_ERROR("cannot listen: %s", sxe_strerror(rc));
    }
    if (rc < 0) {
        sxe__sys.close(fd);
        return rc;
    }
    return fd;
}

int sxe_listen(sxe_loop_t *loop, sxe_conn_t **listener, const struct sockaddr *address,
               socklen_t address_len, const struct sxe_listen_options *options,
               const struct sxe_conn_handlers *handlers, void *user)
{
    static const struct sxe_listen_options defaults;
    static const struct sxe_conn_handlers no_handlers;
    int rc;

    if (!SXE_CHECK(loop != NULL && listener != NULL && address != NULL)) {
        return -EINVAL;
    }
    options = options != NULL ? options : &defaults;
    int fd = listen_socket(address, address_len, options);
    if (fd < 0) {
        return fd;
    }
    uint16_t flags = (options->flags & SXE_LISTEN_EVICT_IDLE ? SXE__CONN_EVICT_IDLE : 0) |
                     (options->flags & SXE_LISTEN_RECEIVE_FDS ? SXE__CONN_RECEIVE_FDS : 0);
    if ((rc = add_conn(loop, listener, fd, SXE__CONN_LISTENING, SXE__KIND_LISTENER, flags,
                       handlers ? handlers : &no_handlers, user)) < 0) {
        return rc;
    }
    (*listener)->accept_batch =
        (uint16_t)(options->accept_batch > 0 && options->accept_batch < 65535
                       ? options->accept_batch
                       : 64);
    return 0;
}

int sxe_connect(sxe_loop_t *loop, sxe_conn_t **conn_out, const struct sockaddr *address,
                socklen_t address_len, const struct sockaddr *source, socklen_t source_len,
                const struct sxe_conn_handlers *handlers, void *user)
{
    int rc;

    if (!SXE_CHECK(loop != NULL && conn_out != NULL && address != NULL && handlers != NULL)) {
        return -EINVAL;
    }
    int fd = make_socket(address->sa_family, SOCK_STREAM);
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
    if (source != NULL && sxe__sys.bind(fd, source, source_len) < 0) {
        rc = -errno;
        sxe__sys.close(fd);
        return rc;
    }
    if (sxe__sys.connect(fd, address, address_len) < 0 && errno != EINPROGRESS) {
        rc = -errno;
        sxe__sys.close(fd);
        return rc;
    }
    /* Even a connect that completed at once reports through on_connect, from the loop. */
    return add_conn(loop, conn_out, fd, SXE__CONN_CONNECTING, SXE__KIND_STREAM, 0, handlers, user);
}

/*
 * Takes a slot for a connected stream socket, CONNECTING until its first EPOLLOUT, so on_connect
 * runs from the loop, not from here.
 */
static int adopt(sxe_loop_t *loop, sxe_conn_t **conn_out, int fd, unsigned flags,
                 const struct sxe_conn_handlers *handlers, void *user)
{
    return add_conn(loop, conn_out, fd, SXE__CONN_CONNECTING, SXE__KIND_STREAM,
                    flags & SXE_LISTEN_RECEIVE_FDS ? SXE__CONN_RECEIVE_FDS : 0, handlers, user);
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

int sxe_udp_bind(sxe_loop_t *loop, sxe_conn_t **socket_out, const struct sockaddr *address,
                 socklen_t address_len, const struct sxe_conn_handlers *handlers, void *user)
{
    int rc;

    if (!SXE_CHECK(loop != NULL && socket_out != NULL && address != NULL && handlers != NULL)) {
        return -EINVAL;
    }
    int fd = make_socket(address->sa_family, SOCK_DGRAM);
    if (fd < 0) {
        return fd;
    }
    if (sxe__sys.bind(fd, address, address_len) < 0) {
        rc = -errno;
        SXE_LOG_ERROR("cannot bind a UDP socket: %s", sxe_strerror(rc));
        sxe__sys.close(fd);
        return rc;
    }
    return add_conn(loop, socket_out, fd, SXE__CONN_LISTENING, SXE__KIND_UDP, 0, handlers, user);
}

int sxe_udp_send(sxe_conn_t *socket, const void *data, size_t len, const struct sockaddr *to,
                 socklen_t to_len)
{
    if (!is_open(socket) || socket->kind != SXE__KIND_UDP) {
        return -EBADF;
    }
    for (;;) {
        if (sxe__sys.sendto(socket->fd, data, len, 0, to, to_len) >= 0) {
            return 0;
        }
        if (errno != EINTR) {
            return -errno;
        }
    }
}

int sxe_conn_send_fd(sxe_conn_t *conn, int fd)
{
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    char marker = 'F';
    struct iovec iov = {.iov_base = &marker, .iov_len = 1};
    struct msghdr message = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = &control,
                             .msg_controllen = sizeof(control)};
    int rc;

    if ((rc = check_writable(conn)) < 0) {
        return rc;
    }
    struct cmsghdr *header = &control.header; /* the first header: the buffer is aligned for it */
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &fd, sizeof(int));
    for (;;) {
        if (sxe__sys.sendmsg(conn->fd, &message, MSG_NOSIGNAL) == 1) {
            return 0;
        }
        if (errno != EINTR) {
            return -errno;
        }
    }
}

int sxe_conn_hand_off(sxe_conn_t *conn, sxe_conn_t *via)
{
    int rc;

    if ((rc = check_writable(conn)) < 0 || (rc = sxe_conn_send_fd(via, conn->fd)) < 0) {
        return rc;
    }
    /* The socket lives on in the other process (or fd): closing ours alone would leave it
     * registered here, since epoll forgets a socket only when its last descriptor closes. */
    sxe__sys.epoll_ctl(conn->loop->epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
    sxe__conn_close_reason(conn, SXE_CLOSE_HANDED_OFF, 0);
    return 0;
}

int sxe_conn_peer(const sxe_conn_t *conn, struct sockaddr *address, socklen_t *address_len)
{
    if (!is_open(conn)) {
        return -EBADF;
    }
    return sxe__sys.getpeername(conn->fd, address, address_len) < 0 ? -errno : 0;
}

int sxe_conn_local(const sxe_conn_t *conn, struct sockaddr *address, socklen_t *address_len)
{
    if (!is_open(conn)) {
        return -EBADF;
    }
    return sxe__sys.getsockname(conn->fd, address, address_len) < 0 ? -errno : 0;
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
    return conn->fd;
}

uint32_t sxe_conn_index(const sxe_conn_t *conn)
{
    return conn->index;
}

uint64_t sxe_conn_id(const sxe_conn_t *conn)
{
    return sxe__conn_tag(conn);
}

sxe_conn_t *sxe_conn_from_id(sxe_loop_t *loop, uint64_t id)
{
    uint32_t index = (uint32_t)id;

    if (index >= loop->options.connections) {
        return NULL;
    }
    struct sxe_conn *conn = &loop->conns[index];
    return is_open(conn) && conn->generation == (uint32_t)(id >> 32) ? conn : NULL;
}
