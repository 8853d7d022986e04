/*
 * The io_uring backend's insides, shared by io_uring.c (requests and completions) and
 * io_uring_ring.c (the ring and its provided buffers), and the settings tests change. The backend
 * itself is sxe__io_uring, declared in io.h.
 */
#ifndef SXE_IO_URING_H
#define SXE_IO_URING_H

#include <linux/io_uring.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "loop.h"

#define SQ_ENTRIES   1024u
#define CQ_ENTRIES   (8 * SQ_ENTRIES)
#define WATCH_MAX    (1u << 20) /* fds from this on are refused: -EMFILE */
#define SEQ_MASK     0xffffffu  /* a watch entry's sequence number has 24 bits */
#define ARENA_MSGS   256        /* sendmsg headers queued per turn */
#define ARENA_IOVS   4096       /* and their iovecs */
#define BUFFER_GROUP 0
#define BUFFERS_MAX  32768u /* the most entries a provided-buffer ring may have */

/*
 * What the design rests on: one mmap for both rings, completions kept when the CQ is full, SQE
 * data (a sendmsg's msghdr) copied by the time io_uring_enter returns, and a timeout on the wait.
 */
#define FEATURES_NEEDED                                                                            \
    (IORING_FEAT_SINGLE_MMAP | IORING_FEAT_NODROP | IORING_FEAT_SUBMIT_STABLE | IORING_FEAT_EXT_ARG)

/* The kinds of request, in each request's user_data: seq << 40 | op << 32 | fd. */
enum op { OP_RECV = 1, OP_ACCEPT, OP_POLL_IN, OP_POLL_OUT, OP_SEND, OP_CANCEL };
#define OP_BIT(op) (1u << (op))

#define WATCHED 0x01u /* the fd is watched */
#define FED     0x02u /* its receive got bytes in this reap: it is on the fed list */
#define STARVED 0x04u /* and then ran out of buffers: armed again once the reap is done */

/* What the backend knows of one fd. */
struct watch {
    uint64_t tag;
    uint32_t seq : 24;  /* bumped by forget: requests of an earlier watcher are stale */
    uint32_t armed : 8; /* OP_BIT of each request in flight, the send included */
    uint16_t wanted;    /* SXE__IO_*, as given to watch */
    uint8_t cancelling; /* OP_BIT of each armed request whose cancel is queued */
    uint8_t flags;      /* WATCHED, FED, STARVED */
};

_Static_assert(sizeof(struct watch) == 16, "a watch entry is 16 bytes: the table has 2^20");

struct uring {
    int ring_fd;
    bool enabled; /* the ring starts disabled: enabled by the thread that first enters it */
    void *rings;  /* the SQ and CQ rings, one mapping */
    size_t rings_len;
    struct io_uring_sqe *sqes;
    size_t sqes_len;
    unsigned *sq_head; /* the kernel's: SQEs it has taken */
    unsigned *sq_tail; /* ours: published at each io_uring_enter */
    unsigned sq_mask;
    unsigned sq_entries;
    unsigned sq_queued; /* the tail as far as SQEs are filled in */
    unsigned *cq_head;
    unsigned *cq_tail;
    unsigned cq_mask;
    struct io_uring_cqe *cqes;

    struct io_uring_buf_ring *buf_ring;
    size_t buf_ring_len;
    char *buf_memory; /* buf_count x buf_size */
    size_t buf_memory_len;
    unsigned buf_count;
    unsigned buf_size;
    uint16_t buf_tail;
    unsigned returning_count;
    unsigned kept_count; /* buffers held by watchers past a wait (keep) */
    uint16_t *returning; /* buffer ids to give back at the next wait: buf_count of them */
    unsigned fed_count;
    int *fed; /* fds whose receive got bytes in this reap: buf_count of them */

    struct watch *watches; /* WATCH_MAX, touched only where fds are */

    unsigned msgs_used;
    unsigned iovs_used;
    struct msghdr msgs[ARENA_MSGS];
    struct iovec iovs[ARENA_IOVS];
};

/* io_uring_ring.c: makes the ring and its buffers in loop->io_state, and frees them. */
int sxe__uring_open(sxe_loop_t *loop);
void sxe__uring_close(sxe_loop_t *loop);

/* Gives every buffer returned since the last wait back to the kernel: one store of the tail. */
void sxe__uring_give_back(struct uring *uring);

/* Returns buffer id at the next sxe__uring_give_back. */
void sxe__uring_give_back_later(struct uring *uring, unsigned id);

/*
 * Sets the provided receive buffers that the next open makes: count buffers (a power of 2, at
 * most 32768) of size bytes each. Loops already open keep theirs. 0, 0 restores the defaults,
 * 512 buffers of 2048 bytes.
 */
void sxe__io_uring_set_buffers(unsigned count, unsigned size);

#endif
