/*
 * The io_uring floor: the least a C program can do on this kernel to answer HTTP/1.1 keep-alive
 * requests, each with the same canned "Hello World\n", through io_uring. It is what sxe's io_uring
 * backend is measured against. Usage: uring-floor PORT (it listens on 127.0.0.1).
 *
 * What it does:
 * - One thread and one ring, set up SINGLE_ISSUER | DEFER_TASKRUN: the kernel does the ring's
 *   completion work only inside this thread's io_uring_enter, in batches, and never interrupts
 *   it to do so. The ring's own descriptor is registered, so an enter skips the descriptor lookup.
 * - One multishot accept puts each new connection straight into a free slot of a registered
 *   ("fixed") file table. No connection ever gets a descriptor in the process' table, and every
 *   later operation names its slot (IOSQE_FIXED_FILE), which spares the kernel a file lookup and a
 *   reference count per operation. The table holds as many slots as the process may open files.
 * - One multishot receive per connection, armed once, into a ring of provided buffers. Where the
 *   kernel has receive bundles (6.10), one completion carries everything that was waiting on the
 *   socket however many buffers it fills. The floor counts the request ends in it ("\r\n\r\n",
 *   also when one is split between receives), gives the buffers back at once, and queues one send
 *   of that many replies from a static buffer: nothing is copied per request.
 * - A send that succeeds posts no completion (IOSQE_CQE_SKIP_SUCCESS). MSG_WAITALL makes the
 *   kernel finish a short send itself, so a send either completes silently or fails; a failure
 *   shuts the connection down. A connection that ends (its receive's last completion) is closed in
 *   its fixed slot (close_direct), again with no completion when that succeeds.
 * - Each turn of the loop is one io_uring_enter: it submits everything the last turn queued and
 *   waits for the next completions. Nothing else enters the kernel while it serves (but a second
 *   enter when a burst fills the submission queue: 8192 entries).
 *
 * Why nothing cheaper is possible for a C program here: the kernel must take in each request's
 * bytes and send out its reply, and that is all this floor asks of it. There is no system call per
 * request or per connection (one enter serves a whole batch), no readiness step before a receive
 * (the receive is armed once and runs when data arrives), no file lookup, one completion per
 * receive and per accepted connection but none for a send or a close that succeeds, and no copy
 * in user space. What is left out, and why:
 * - SQPOLL would save the enter by having a kernel thread poll the queue, but that thread burns a
 *   core; on this 2-core machine it would take the load generator's.
 * - Zero-copy send pins pages and posts a second (notification) completion per send. For an
 *   81-byte reply that costs more than the copy it saves, and loopback copies the data anyway.
 * - IORING_SETUP_NO_SQARRAY (6.6) would save one load per submission, but Debian 12's liburing
 *   2.3 writes the submission array when it maps the ring, so it cannot map such a ring.
 * - Buffers consumed bit by bit (IOU_PBUF_RING_INC, 6.12) would pack small receives into fewer
 *   pages: less memory, the same work.
 * - COOP_TASKRUN and TASKRUN_FLAG add nothing to DEFER_TASKRUN for this loop: DEFER_TASKRUN already
 *   keeps all completion work inside the enter, and TASKRUN_FLAG only tells a loop that looks at
 *   completions without entering that it must enter; this loop enters every turn.
 *
 * A floor, not a server: no timeouts, no limits but the file table, no parsing beyond counting
 * request ends. Its memory is the receive buffers (16384 of 512 B with bundles, 8 MB, enough for
 * a receive on each of 10,000 connections at once), the rings and a few bytes per file slot.
 * Replies stay in order as long as a client reads them: a send waits in the kernel only when the
 * socket's buffer is full, and a later send could then overtake it, which a client with fewer
 * replies outstanding than a socket buffer holds (any load generator) never causes. Built only
 * where liburing is installed (liburing-dev).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Kernel UAPI values that Debian 12's liburing 2.3 headers predate (include/uapi/linux/io_uring.h):
 * receive bundles came in 6.10, with a feature bit to probe for them. */
#ifndef IORING_RECVSEND_BUNDLE
#define IORING_RECVSEND_BUNDLE (1U << 4)
#endif
#ifndef IORING_FEAT_RECVSEND_BUNDLE
#define IORING_FEAT_RECVSEND_BUNDLE (1U << 14)
#endif

#define SQ_ENTRIES  8192
#define CQ_ENTRIES  65536
#define BUFFERS     16384 /* provided receive buffers, a power of 2: one each for 10,000 receives */
#define GROUP       0
#define FILES_MAX   65536
#define REPLIES_MAX 256 /* replies in one send; more go in linked sends */

enum kind { KIND_ACCEPT = 1, KIND_RECEIVE, KIND_SEND, KIND_SHUTDOWN, KIND_CLOSE };

/* A connection, by fixed slot. generation tells a completion of a slot's earlier connection from
 * one of its current connection; matched is how much of "\r\n\r\n" the last receive ended with. */
struct conn {
    unsigned generation;
    unsigned char matched;
};

static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                            "Content-Length: 12\r\n\r\nHello World\n";
#define REPLY_LEN (sizeof(reply) - 1)

static struct io_uring ring;
static struct io_uring_buf_ring *buffers;
static char *buffer_memory;
static unsigned buffer_size;       /* 512 B with bundles (several fill one receive), else 2 KB */
static unsigned short buffer_head; /* the ring position of the next buffer the kernel fills */
static unsigned buffers_returned;  /* this turn's, made visible to the kernel before the enter */
static bool bundles;
static struct conn *conns;
static unsigned files;
static int listener;
static char replies[REPLIES_MAX * REPLY_LEN];

static uint64_t user_data(enum kind kind, unsigned slot)
{
    return (uint64_t)kind << 56 | (uint64_t)(conns[slot].generation & 0xffffff) << 32 | slot;
}

/* Makes the buffers this turn gave back visible to the kernel. */
static void buffers_publish(void)
{
    io_uring_buf_ring_advance(buffers, (int)buffers_returned);
    buffers_returned = 0;
}

/* Makes room for count submissions, handing the queue to the kernel first if it is too full (a
 * burst of more accepts or replies than it holds: an extra enter, never the usual case). */
static void sqes_reserve(unsigned count)
{
    if (io_uring_sq_space_left(&ring) < count) {
        buffers_publish();
        io_uring_submit(&ring);
    }
}

static struct io_uring_sqe *sqe_get(void)
{
    sqes_reserve(1);
    return io_uring_get_sqe(&ring);
}

static void accept_arm(void)
{
    struct io_uring_sqe *sqe = sqe_get();

    io_uring_prep_multishot_accept_direct(sqe, listener, NULL, NULL, 0);
    io_uring_sqe_set_data64(sqe, (uint64_t)KIND_ACCEPT << 56);
}

static void receive_arm(unsigned slot)
{
    struct io_uring_sqe *sqe = sqe_get();

    io_uring_prep_recv_multishot(sqe, (int)slot, NULL, 0, 0);
    sqe->flags |= IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
    sqe->buf_group = GROUP;
    if (bundles) {
        sqe->ioprio |= IORING_RECVSEND_BUNDLE;
    }
    io_uring_sqe_set_data64(sqe, user_data(KIND_RECEIVE, slot));
}

/* Closes the slot's connection. Its generation moves on, so a failed send of it that completes
 * later is not taken for the next connection in the slot. */
static void conn_close(unsigned slot)
{
    struct io_uring_sqe *sqe = sqe_get();

    conns[slot].generation++;
    io_uring_prep_close_direct(sqe, slot);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(sqe, (uint64_t)KIND_CLOSE << 56);
}

/* Queues count replies, in sends of up to REPLIES_MAX linked so that they go out in order. */
static void answer(unsigned slot, unsigned count)
{
    sqes_reserve((count + REPLIES_MAX - 1) / REPLIES_MAX);
    while (count > 0) {
        unsigned now = count < REPLIES_MAX ? count : REPLIES_MAX;
        struct io_uring_sqe *sqe = sqe_get();

        count -= now;
        io_uring_prep_send(sqe, (int)slot, replies, now * REPLY_LEN, MSG_WAITALL);
        sqe->flags |= IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS | (count > 0 ? IOSQE_IO_LINK : 0);
        io_uring_sqe_set_data64(sqe, user_data(KIND_SEND, slot));
    }
}

/* Counts the request ends ("\r\n\r\n") in len bytes at data. *matched carries how much of one the
 * bytes before ended with, in and out, so an end split between receives is counted once. */
static unsigned request_ends(const char *data, size_t len, unsigned char *matched)
{
    static const char end[] = "\r\n\r\n";
    unsigned count = 0;
    size_t at = 0;

    while (*matched > 0 && at < len) { /* finish the end the last receive began, byte by byte */
        char c = data[at++];
        if (c != end[*matched]) {
            *matched = c == '\r';
        } else if (++*matched == 4) {
            count++;
            *matched = 0;
        }
    }
    if (*matched > 0) {
        return count;
    }
    for (const char *found; (found = memmem(data + at, len - at, end, 4)) != NULL;) {
        count++;
        at = (size_t)(found - data) + 4;
    }
    /* The longest start of an end that the rest ends with: "\r\n\r", "\r\n" or "\r". */
    size_t rest = len - at;
    const char *tail = data + len;
    if (rest >= 3 && memcmp(tail - 3, end, 3) == 0) {
        *matched = 3;
    } else if (rest >= 2 && memcmp(tail - 2, end, 2) == 0) {
        *matched = 2;
    } else {
        *matched = rest >= 1 && tail[-1] == '\r';
    }
    return count;
}

/* Reads a receive's bytes and gives their buffers back; returns how many requests they end.
 * The bytes fill whole buffers in the order the buffer ring holds them, the last one partly
 * (the kernel's contract for bundles; without bundles a receive fills one buffer). Each buffer
 * goes back into the ring position it was taken from, so positions and buffers stay paired.
 * Kernels 6.10 to 6.14.8 could append a second receive to a short first one in one bundle, which
 * breaks that contract: the check of the first buffer then stops the floor at the next receive. */
static unsigned take(const struct io_uring_cqe *cqe, struct conn *conn)
{
    unsigned mask = BUFFERS - 1, count = 0;
    size_t left = (size_t)cqe->res;

    if (buffers->bufs[buffer_head & mask].bid != cqe->flags >> IORING_CQE_BUFFER_SHIFT) {
        fprintf(stderr, "uring-floor: the kernel used buffers out of ring order\n");
        exit(1);
    }
    while (left > 0) {
        unsigned id = buffers->bufs[buffer_head & mask].bid;
        char *buffer = buffer_memory + (size_t)id * buffer_size;
        size_t len = left < buffer_size ? left : buffer_size;

        count += request_ends(buffer, len, &conn->matched);
        io_uring_buf_ring_add(buffers, buffer, buffer_size, (unsigned short)id, (int)mask,
                              (int)buffers_returned++);
        buffer_head++;
        left -= len;
    }
    return count;
}

static void received(const struct io_uring_cqe *cqe, unsigned slot)
{
    if (cqe->flags & IORING_CQE_F_BUFFER) {
        unsigned count = take(cqe, &conns[slot]);
        if (count > 0) {
            answer(slot, count);
        }
    }
    if (cqe->flags & IORING_CQE_F_MORE) {
        return;
    }
    /* The multishot receive ended: for want of buffers or completion room, or a bundle that
     * emptied the buffer ring (arm it again), or because the connection did (close it). */
    if (cqe->res > 0 || cqe->res == -ENOBUFS) {
        receive_arm(slot);
    } else {
        conn_close(slot);
    }
}

/* A send failed (only failures complete). The connection is shut down, which ends its receive,
 * whose last completion closes it. A send of an earlier connection in the slot is ignored. */
static void send_failed(uint64_t data, unsigned slot)
{
    if (((data >> 32) & 0xffffff) != (conns[slot].generation & 0xffffff)) {
        return;
    }
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_shutdown(sqe, (int)slot, SHUT_RDWR);
    sqe->flags |= IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(sqe, (uint64_t)KIND_SHUTDOWN << 56);
}

static void complete(const struct io_uring_cqe *cqe)
{
    uint64_t data = io_uring_cqe_get_data64(cqe);
    unsigned slot = (unsigned)(data & 0xffffffffu);

    switch ((enum kind)(data >> 56)) {
    case KIND_ACCEPT:
        if (cqe->res >= 0 && (unsigned)cqe->res < files) {
            conns[cqe->res].matched = 0;
            receive_arm((unsigned)cqe->res);
        }
        if ((cqe->flags & IORING_CQE_F_MORE) == 0) {
            accept_arm();
        }
        break;
    case KIND_RECEIVE:
        received(cqe, slot);
        break;
    case KIND_SEND:
        send_failed(data, slot);
        break;
    default: /* a failed shutdown or close: the connection is gone either way */
        break;
    }
}

/* The ring, its registered descriptor, the fixed file table and the provided-buffer ring. */
static int ring_setup(void)
{
    struct io_uring_params params = {.flags = IORING_SETUP_SINGLE_ISSUER |
                                              IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE,
                                     .cq_entries = CQ_ENTRIES};
    struct rlimit limit;
    int rc;

    if ((rc = io_uring_queue_init_params(SQ_ENTRIES, &ring, &params)) < 0) {
        fprintf(stderr, "uring-floor: io_uring_queue_init: %s\n", strerror(-rc));
        return -1;
    }
    bundles = (params.features & IORING_FEAT_RECVSEND_BUNDLE) != 0;
    buffer_size = bundles ? 512 : 2048;
    if ((rc = io_uring_register_ring_fd(&ring)) < 0) {
        fprintf(stderr, "uring-floor: registering the ring: %s\n", strerror(-rc));
        return -1;
    }
    /* The kernel refuses a table larger than the open-file limit. */
    files = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < FILES_MAX
                ? (unsigned)limit.rlim_cur
                : FILES_MAX;
    conns = calloc(files, sizeof(*conns));
    if (conns == NULL || (rc = io_uring_register_files_sparse(&ring, files)) < 0) {
        fprintf(stderr, "uring-floor: %u fixed files: %s\n", files, strerror(conns ? -rc : ENOMEM));
        return -1;
    }
    /* The provided-buffer ring, registered by hand: liburing 2.3 has no setup call for it. */
    buffer_memory = malloc((size_t)BUFFERS * buffer_size);
    buffers = mmap(NULL, BUFFERS * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buffers == MAP_FAILED || buffer_memory == NULL) {
        perror("uring-floor: buffers");
        return -1;
    }
    io_uring_buf_ring_init(buffers);
    struct io_uring_buf_reg registration = {
        .ring_addr = (unsigned long)buffers, .ring_entries = BUFFERS, .bgid = GROUP};
    if ((rc = io_uring_register_buf_ring(&ring, &registration, 0)) < 0) {
        fprintf(stderr, "uring-floor: provided buffers: %s\n", strerror(-rc));
        return -1;
    }
    for (unsigned id = 0; id < BUFFERS; id++) {
        io_uring_buf_ring_add(buffers, buffer_memory + (size_t)id * buffer_size, buffer_size,
                              (unsigned short)id, BUFFERS - 1, (int)id);
    }
    io_uring_buf_ring_advance(buffers, BUFFERS);
    return 0;
}

int main(int argc, char **argv)
{
    int port = argc > 1 ? atoi(argv[1]) : 8080, one = 1;
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_port = htons((unsigned short)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

    listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(listener, (struct sockaddr *)&address, sizeof(address)) < 0 ||
        listen(listener, SOMAXCONN) < 0) {
        perror("uring-floor: listen");
        return 1;
    }
    if (ring_setup() < 0) {
        return 1;
    }
    for (size_t i = 0; i < REPLIES_MAX; i++) {
        memcpy(replies + i * REPLY_LEN, reply, REPLY_LEN);
    }
    fprintf(stderr,
            "uring-floor: port %d, %u fixed files, %u buffers of %u B, receive bundles %s\n", port,
            files, BUFFERS, buffer_size, bundles ? "on" : "off (kernel before 6.10)");
    accept_arm();

    for (;;) {
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        int rc;

        buffers_publish();
        if ((rc = io_uring_submit_and_wait(&ring, 1)) < 0 && rc != -EINTR && rc != -EBUSY) {
            fprintf(stderr, "uring-floor: io_uring_enter: %s\n", strerror(-rc));
            return 1;
        }
        io_uring_for_each_cqe(&ring, head, cqe)
        {
            complete(cqe);
            seen++;
        }
        io_uring_cq_advance(&ring, seen);
    }
}
