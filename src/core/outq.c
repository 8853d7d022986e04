/*
 * The output queue. What the socket does not take at once is kept as a list of segments:
 * - bytes copied into one of the loop's buffers, several segments in a row sharing a buffer;
 * - the caller's own memory, sent without a copy (sxe_conn_write_ref);
 * - a file range, sent with sendfile.
 * Memory and file segments may carry a release callback, called once when the segment goes.
 *
 * Bytes queued behind memory or a file go on in the buffer before it if it has room, so pipelined
 * heads with bodies by reference share buffers as copies would. That segment hands the buffer
 * over: exactly one segment owns a buffer, the last one in it, and gives it back when it goes.
 */
#define SXE_LOG_MODULE outq_log
#include "sxe/log.h"

#include <errno.h>
#include <string.h>

#include "outq.h"
#include "sys.h"

static struct sxe_log_module outq_log = SXE_LOG_MODULE_INIT(OUTQ);

char *sxe__buffer_at(sxe_loop_t *loop, uint32_t buffer)
{
    if (buffer >= loop->options.buffers) {
        return loop->large +
               (size_t)(buffer - loop->options.buffers) * loop->options.large_buffer_size;
    }
    return loop->buffers + (size_t)buffer * loop->options.buffer_size;
}

uint32_t sxe__buffer_size(const sxe_loop_t *loop, uint32_t buffer)
{
    return buffer >= loop->options.buffers ? loop->options.large_buffer_size
                                           : loop->options.buffer_size;
}

uint32_t sxe__buffer_take(sxe_loop_t *loop)
{
    return loop->buffers_free > 0 ? loop->buffer_free[--loop->buffers_free] : SXE_NONE;
}

uint32_t sxe__buffer_take_large(sxe_loop_t *loop)
{
    return loop->large_free_count > 0 ? loop->large_free[--loop->large_free_count] : SXE_NONE;
}

void sxe__buffer_give(sxe_loop_t *loop, uint32_t buffer)
{
    if (buffer >= loop->options.buffers) {
        loop->large_free[loop->large_free_count++] = buffer;
        return;
    }
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
        sxe__buffer_give(loop, loop->segments[segment].buffer);
    }
    loop->segments[segment].next = loop->segment_free;
    loop->segment_free = segment;
    loop->segments_free++;
}

static bool is_file(const struct sxe__segment *segment)
{
    return segment->buffer == SXE_NONE && segment->file_fd >= 0;
}

bool sxe__outq_head_is_file(const struct sxe_conn *conn, const struct sxe__queue *queue)
{
    return queue->head != SXE_NONE && is_file(&conn->loop->segments[queue->head]);
}

/* Frees the segment at the head of the queue, closing or releasing what it held. */
static void pop_segment(sxe_loop_t *loop, struct sxe__queue *queue)
{
    uint32_t head = queue->head;
    struct sxe__segment *segment = &loop->segments[head];
    sxe_conn_release_t release = segment->release;
    void *release_arg = segment->release_arg;

    queue->head = segment->next;
    if (queue->head == SXE_NONE) {
        queue->tail = SXE_NONE;
    } else if (loop->segments[queue->head].buffer == SXE_NONE &&
               loop->segments[queue->head].start == head) {
        loop->segments[queue->head].start = SXE_NONE; /* its buffer segment is gone */
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

void sxe__outq_drop(struct sxe_conn *conn, struct sxe__queue *queue)
{
    struct sxe__segment *segments = conn->loop->segments;

    while (queue->head != SXE_NONE) {
        const struct sxe__segment *head = &segments[queue->head];
        conn->queued -= head->buffer != SXE_NONE ? head->end - head->start : head->remaining;
        pop_segment(conn->loop, queue);
    }
}

void sxe__outq_advance(struct sxe_conn *conn, struct sxe__queue *queue, size_t sent, bool file)
{
    struct sxe__segment *segments = conn->loop->segments;

    conn->queued -= sent;
    if (file) {
        segments[queue->head].remaining -= sent;
        if (segments[queue->head].remaining == 0) {
            pop_segment(conn->loop, queue);
        }
        return;
    }
    while (sent > 0) {
        struct sxe__segment *segment = &segments[queue->head];
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
        pop_segment(conn->loop, queue);
    }
}

int sxe__outq_gather(const struct sxe_conn *conn, const struct sxe__queue *queue, struct iovec *iov,
                     bool *before_file)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t at = queue->head;
    int count = 0;

    for (; at != SXE_NONE && count < SXE__GATHER_MAX && !is_file(&loop->segments[at]);
         at = loop->segments[at].next) {
        const struct sxe__segment *bytes = &loop->segments[at];
        if (bytes->buffer != SXE_NONE) {
            iov[count].iov_base = sxe__buffer_at(loop, bytes->buffer) + bytes->start;
            iov[count++].iov_len = bytes->end - bytes->start;
        } else {
            iov[count].iov_base = (void *)bytes->data;
            iov[count++].iov_len = bytes->remaining;
        }
    }
    *before_file = at != SXE_NONE && is_file(&loop->segments[at]);
    return count;
}

/*
 * The buffer segment whose buffer the next queued bytes may go on filling: the tail, or, behind a
 * file range or memory, the buffer segment just before it. NULL if there is none.
 */
static struct sxe__segment *last_buffer(const sxe_loop_t *loop, const struct sxe__queue *queue)
{
    struct sxe__segment *segments = loop->segments;

    if (queue->tail == SXE_NONE) {
        return NULL;
    }
    struct sxe__segment *tail = &segments[queue->tail];
    return tail->buffer != SXE_NONE  ? tail
           : tail->start != SXE_NONE ? &segments[tail->start]
                                     : NULL;
}

/* Links segment at the tail of the queue. */
static void link_tail(sxe_loop_t *loop, struct sxe__queue *queue, uint32_t segment)
{
    if (queue->tail != SXE_NONE) {
        loop->segments[queue->tail].next = segment;
    } else {
        queue->head = segment;
    }
    queue->tail = segment;
}

void sxe__outq_append(struct sxe_conn *conn, struct sxe__queue *queue, const char *data, size_t len)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t size = loop->options.buffer_size;

    while (len > 0) {
        struct sxe__segment *tail = queue->tail != SXE_NONE ? &loop->segments[queue->tail] : NULL;
        if (tail == NULL || tail->buffer == SXE_NONE || tail->end == size) {
            struct sxe__segment *before = last_buffer(loop, queue);
            uint32_t segment = segment_take(loop);
            struct sxe__segment *fresh = &loop->segments[segment];
            if (before != NULL && before != tail && before->end < size) {
                fresh->buffer = before->buffer; /* the buffer is handed over: see the top */
                fresh->start = fresh->end = before->end;
                before->owns = false;
            } else {
                fresh->buffer = sxe__buffer_take(loop);
                fresh->start = fresh->end = 0;
            }
            fresh->owns = true;
            link_tail(loop, queue, segment);
            tail = fresh;
        }
        size_t room = size - tail->end;
        size_t part = len < room ? len : room;
        memcpy(sxe__buffer_at(loop, tail->buffer) + tail->end, data, part);
        tail->end += (uint32_t)part;
        conn->queued += part;
        data += part;
        len -= part;
    }
}

bool sxe__outq_can_append(const struct sxe_conn *conn, const struct sxe__queue *queue, size_t len)
{
    const sxe_loop_t *loop = conn->loop;
    const struct sxe__segment *last = last_buffer(loop, queue);
    size_t room = last != NULL ? loop->options.buffer_size - last->end : 0;
    uint64_t needed =
        len <= room ? 0 : (len - room + loop->options.buffer_size - 1) / loop->options.buffer_size;

    return needed <= loop->buffers_free && needed <= loop->segments_free;
}

struct sxe__segment *sxe__outq_link(struct sxe_conn *conn, struct sxe__queue *queue, size_t len,
                                    sxe_conn_release_t release, void *arg)
{
    sxe_loop_t *loop = conn->loop;
    uint32_t index = segment_take(loop);
    struct sxe__segment *segment = &loop->segments[index];
    bool after_buffer = queue->tail != SXE_NONE && loop->segments[queue->tail].buffer != SXE_NONE;

    segment->buffer = SXE_NONE;
    segment->start = after_buffer ? queue->tail : SXE_NONE;
    segment->file_fd = -1;
    segment->close_fd = false;
    segment->remaining = len;
    segment->release = release;
    segment->release_arg = arg;
    link_tail(loop, queue, index);
    conn->queued += len;
    return segment;
}

/* Logs a broken invariant of conn's queue and returns -EUCLEAN. */
#define BROKEN(conn, ...)                                                                          \
    ({                                                                                             \
        SXE_LOG_ERROR("output queue of connection %u: " __VA_ARGS__);                              \
        -EUCLEAN;                                                                                  \
    })

/* Checks one of conn's queues and adds the bytes it holds to *bytes. @return 0 or -EUCLEAN. */
static int validate_queue(const struct sxe_conn *conn, const struct sxe__queue *queue,
                          uint64_t *bytes_out)
{
    const sxe_loop_t *loop = conn->loop;
    uint32_t total = loop->options.buffers + loop->options.connections;
    uint64_t bytes = 0;
    uint32_t last = SXE_NONE;
    uint32_t count = 0;

    for (uint32_t at = queue->head; at != SXE_NONE; at = loop->segments[at].next) {
        const struct sxe__segment *segment = &loop->segments[at];
        if (at >= total || ++count > total) {
            return BROKEN(conn, "segment %u out of range or a cycle", sxe__conn_index(conn), at);
        }
        if (segment->buffer != SXE_NONE) {
            if (segment->buffer >= loop->options.buffers || segment->start > segment->end ||
                segment->end > loop->options.buffer_size) {
                return BROKEN(conn, "buffer segment %u spans %u..%u of buffer %u",
                              sxe__conn_index(conn), at, segment->start, segment->end,
                              segment->buffer);
            }
            bytes += segment->end - segment->start;
        } else {
            if (segment->file_fd < 0 && segment->data == NULL && segment->remaining > 0) {
                return BROKEN(conn, "memory segment %u has no data", sxe__conn_index(conn), at);
            }
            if (segment->start != SXE_NONE && loop->segments[segment->start].buffer == SXE_NONE) {
                return BROKEN(conn, "segment %u follows %u, not a buffer", sxe__conn_index(conn),
                              at, segment->start);
            }
            bytes += segment->remaining;
        }
        if (segment->buffer != SXE_NONE && !segment->owns) {
            /* A buffer handed over: a later segment of this queue holds it and owns it. */
            bool found = false;
            for (uint32_t later = segment->next; later != SXE_NONE && !found;
                 later = loop->segments[later].next) {
                found =
                    loop->segments[later].buffer == segment->buffer && loop->segments[later].owns;
            }
            if (!found) {
                return BROKEN(conn, "segment %u handed buffer %u to no one", sxe__conn_index(conn),
                              at, segment->buffer);
            }
        }
        last = at;
    }
    if (last != queue->tail) {
        return BROKEN(conn, "tail is %u, the last segment %u", sxe__conn_index(conn), queue->tail,
                      last);
    }
    *bytes_out += bytes;
    return 0;
}

int sxe__outq_validate(const struct sxe_conn *conn, const struct sxe__queue *sealing)
{
    uint64_t bytes = 0;
    int rc;

    if ((rc = validate_queue(conn, &conn->out, &bytes)) < 0 ||
        (sealing != NULL && (rc = validate_queue(conn, sealing, &bytes)) < 0)) {
        return rc;
    }
    if (bytes != conn->queued) {
        return BROKEN(conn, "holds %llu bytes, counts %llu", sxe__conn_index(conn),
                      (unsigned long long)bytes, (unsigned long long)conn->queued);
    }
    return 0;
}
