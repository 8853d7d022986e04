/*
 * The io_uring floor: bench/epoll-floor.c's job done through io_uring, to measure what an io_uring
 * backend could take off a request. One thread, one ring (single issuer, completions run only when
 * the loop asks), a multishot accept, a multishot receive per connection into a ring of provided
 * buffers, and one send of all the replies a receive completes, from a static buffer. Each turn
 * of the loop is one io_uring_enter: it submits every send and re-arm of the last turn and waits
 * for the next completions. No timeouts, no limits, partial sends not handled: a floor, not a
 * server. Built only where liburing is installed (liburing-dev).
 * Usage: uring-floor PORT
 */
#define _GNU_SOURCE
#include <liburing.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUFFERS      4096 /* provided receive buffers, a power of 2 */
#define BUFFER_SIZE  2048
#define GROUP        0
#define KIND_ACCEPT  1ULL
#define KIND_RECEIVE 2ULL
#define KIND_SEND    3ULL
#define REPLIES_MAX  64

static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                            "Content-Length: 12\r\n\r\nHello World\n";

static struct io_uring ring;
static struct io_uring_buf_ring *buffers;
static char *buffer_memory;
static char replies[REPLIES_MAX * (sizeof(reply) - 1)];

static struct io_uring_sqe *sqe_get(void)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

    if (sqe == NULL) { /* the submission queue is full: hand it to the kernel and go on */
        io_uring_submit(&ring);
        sqe = io_uring_get_sqe(&ring);
    }
    return sqe;
}

static void receive(int fd)
{
    struct io_uring_sqe *sqe = sqe_get();

    io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = GROUP;
    io_uring_sqe_set_data64(sqe, KIND_RECEIVE << 32 | (unsigned)fd);
}

static void give_back(unsigned id)
{
    io_uring_buf_ring_add(buffers, buffer_memory + (size_t)id * BUFFER_SIZE, BUFFER_SIZE, id,
                          io_uring_buf_ring_mask(BUFFERS), 0);
    io_uring_buf_ring_advance(buffers, 1);
}

static void received(int fd, struct io_uring_cqe *cqe)
{
    if (cqe->res <= 0) {
        if (cqe->res != -ENOBUFS) {
            close(fd); /* the peer went, or the receive failed */
            return;
        }
    } else {
        unsigned id = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        const char *in = buffer_memory + (size_t)id * BUFFER_SIZE, *end = in + cqe->res;
        size_t count = 0;
        for (const char *at = in;
             count < REPLIES_MAX && (at = memmem(at, (size_t)(end - at), "\r\n\r\n", 4)) != NULL;
             at += 4) {
            count++;
        }
        give_back(id);
        if (count > 0) {
            struct io_uring_sqe *sqe = sqe_get();
            io_uring_prep_send(sqe, fd, replies, count * (sizeof(reply) - 1), MSG_NOSIGNAL);
            io_uring_sqe_set_data64(sqe, KIND_SEND << 32 | (unsigned)fd);
        }
    }
    if ((cqe->flags & IORING_CQE_F_MORE) == 0) {
        receive(fd); /* the multishot receive ended (out of buffers): arm it again */
    }
}

int main(int argc, char **argv)
{
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_port = htons(argc > 1 ? atoi(argv[1]) : 8080),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct io_uring_params params = {.flags = IORING_SETUP_SINGLE_ISSUER |
                                              IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE,
                                     .cq_entries = 65536};
    int one = 1, rc, listener = socket(AF_INET, SOCK_STREAM, 0);

    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(listener, (struct sockaddr *)&address, sizeof(address)) < 0 ||
        listen(listener, SOMAXCONN) < 0) {
        perror("uring-floor: listen");
        return 1;
    }
    if ((rc = io_uring_queue_init_params(4096, &ring, &params)) < 0) {
        fprintf(stderr, "uring-floor: io_uring_queue_init: %s\n", strerror(-rc));
        return 1;
    }
    /* The provided-buffer ring, registered by hand: Debian 12's liburing 2.3 has no setup call. */
    buffer_memory = malloc((size_t)BUFFERS * BUFFER_SIZE);
    buffers = mmap(NULL, BUFFERS * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buffers == MAP_FAILED || buffer_memory == NULL) {
        perror("uring-floor: buffers");
        return 1;
    }
    io_uring_buf_ring_init(buffers);
    struct io_uring_buf_reg registration = {
        .ring_addr = (unsigned long)buffers, .ring_entries = BUFFERS, .bgid = GROUP};
    if ((rc = io_uring_register_buf_ring(&ring, &registration, 0)) < 0) {
        fprintf(stderr, "uring-floor: provided buffers: %s\n", strerror(-rc));
        return 1;
    }
    for (unsigned id = 0; id < BUFFERS; id++) {
        give_back(id);
    }
    for (size_t i = 0; i < REPLIES_MAX; i++) {
        memcpy(replies + i * (sizeof(reply) - 1), reply, sizeof(reply) - 1);
    }
    struct io_uring_sqe *sqe = sqe_get();
    io_uring_prep_multishot_accept(sqe, listener, NULL, NULL, 0);
    io_uring_sqe_set_data64(sqe, KIND_ACCEPT << 32);

    for (;;) {
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;

        if ((rc = io_uring_submit_and_wait(&ring, 1)) < 0 && rc != -EINTR) {
            fprintf(stderr, "uring-floor: io_uring_enter: %s\n", strerror(-rc));
            return 1;
        }
        io_uring_for_each_cqe(&ring, head, cqe)
        {
            uint64_t data = io_uring_cqe_get_data64(cqe);
            int fd = (int)(data & 0xffffffffu);
            seen++;
            switch (data >> 32) {
            case KIND_ACCEPT:
                if (cqe->res >= 0) {
                    receive(cqe->res);
                }
                if ((cqe->flags & IORING_CQE_F_MORE) == 0) {
                    sqe = sqe_get();
                    io_uring_prep_multishot_accept(sqe, listener, NULL, NULL, 0);
                    io_uring_sqe_set_data64(sqe, KIND_ACCEPT << 32);
                }
                break;
            case KIND_RECEIVE:
                received(fd, cqe);
                break;
            default: /* a send: a failure shows up as the receive's end */
                break;
            }
        }
        io_uring_cq_advance(&ring, seen);
    }
}
