/*
 * The io_uring backend's ring: made with io_uring_setup and mapped here (no liburing: every system
 * call goes through the seam), and the ring of provided buffers that receives land in, registered
 * with the kernel and refilled with one store of its tail per turn.
 */
#define SXE_LOG_MODULE uring_log
#include "sxe/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "io.h"
#include "io_uring.h"
#include "loop.h"
#include "sys.h"

static struct sxe_log_module uring_log = SXE_LOG_MODULE_INIT(URING);

static unsigned buffer_count = 512;
static unsigned buffer_size = 2048;

void sxe__io_uring_set_buffers(unsigned count, unsigned size)
{
    buffer_count = count == 0 ? 512 : count;
    buffer_size = size == 0 ? 2048 : size;
}

/* Gives back every buffer returned since the last wait: one release store publishes them all. */
void sxe__uring_give_back(struct uring *uring)
{
    unsigned mask = uring->buf_count - 1;
    uint16_t tail = uring->buf_tail;

    if (uring->returning_count == 0) {
        return;
    }
    for (unsigned i = 0; i < uring->returning_count; i++) {
        uint16_t id = uring->returning[i];
        struct io_uring_buf *buf = &uring->buf_ring->bufs[tail & mask];
        /* Field by field: the first entry's resv field is the ring's tail. */
        buf->addr = (uintptr_t)(uring->buf_memory + (size_t)id * uring->buf_size);
        buf->len = uring->buf_size;
        buf->bid = id;
        tail++;
    }
    __atomic_store_n(&uring->buf_ring->tail, tail, __ATOMIC_RELEASE);
    uring->buf_tail = tail;
    uring->returning_count = 0;
}

void sxe__uring_give_back_later(struct uring *uring, unsigned id)
{
    if (SXE_NEVER(id >= uring->buf_count || uring->returning_count == uring->buf_count)) {
        return;
    }
    uring->returning[uring->returning_count++] = (uint16_t)id;
}

/* The id of the provided buffer that data points into. */
static void *map_ring(struct uring *uring, size_t len, off_t offset)
{
    void *addr = sxe__sys.mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                               uring->ring_fd, offset);
    return addr == MAP_FAILED ? NULL : addr;
}

static void *map_anonymous(size_t len, int flags)
{
    void *addr = sxe__sys.mmap(NULL, len, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    return addr == MAP_FAILED ? NULL : addr;
}

static int setup_rings(struct uring *uring)
{
    /* Disabled until the first io_uring_enter: the single issuer is the thread that runs the
     * loop, which need not be the one that made it (a server makes its workers' loops first). */
    struct io_uring_params params = {.flags = IORING_SETUP_SINGLE_ISSUER |
                                              IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL |
                                              IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED,
                                     .cq_entries = CQ_ENTRIES};

    uring->ring_fd = sxe__sys.io_uring_setup(SQ_ENTRIES, &params);
    if (uring->ring_fd < 0) {
        return -errno;
    }
    if ((params.features & FEATURES_NEEDED) != FEATURES_NEEDED) {
        SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN, "io_uring: the kernel lacks features 0x%x",
                     FEATURES_NEEDED & ~params.features);
        return -ENOSYS;
    }
    size_t sq_len = params.sq_off.array + params.sq_entries * sizeof(unsigned);
    size_t cq_len = params.cq_off.cqes + params.cq_entries * sizeof(struct io_uring_cqe);
    uring->rings_len = sq_len > cq_len ? sq_len : cq_len;
    uring->rings = map_ring(uring, uring->rings_len, (off_t)IORING_OFF_SQ_RING);
    if (uring->rings == NULL) {
        return -errno;
    }
    uring->sqes_len = params.sq_entries * sizeof(struct io_uring_sqe);
    uring->sqes = map_ring(uring, uring->sqes_len, (off_t)IORING_OFF_SQES);
    if (uring->sqes == NULL) {
        return -errno;
    }
    char *rings = uring->rings;
    uring->sq_head = (unsigned *)(rings + params.sq_off.head);
    uring->sq_tail = (unsigned *)(rings + params.sq_off.tail);
    uring->sq_mask = *(unsigned *)(rings + params.sq_off.ring_mask);
    uring->sq_entries = params.sq_entries;
    uring->sq_queued = *uring->sq_tail;
    uring->cq_head = (unsigned *)(rings + params.cq_off.head);
    uring->cq_tail = (unsigned *)(rings + params.cq_off.tail);
    uring->cq_mask = *(unsigned *)(rings + params.cq_off.ring_mask);
    uring->cqes = (struct io_uring_cqe *)(rings + params.cq_off.cqes);
    /* SQE i always sits in slot i, so the index array is filled once. */
    unsigned *sq_array = (unsigned *)(rings + params.sq_off.array);
    for (unsigned i = 0; i < params.sq_entries; i++) {
        sq_array[i] = i;
    }
    return 0;
}

static int setup_buffers(struct uring *uring)
{
    uring->buf_ring_len = uring->buf_count * sizeof(struct io_uring_buf);
    uring->buf_ring = map_anonymous(uring->buf_ring_len, 0);
    if (uring->buf_ring == NULL) {
        return -errno;
    }
    uring->buf_memory_len = (size_t)uring->buf_count * uring->buf_size;
    uring->buf_memory = map_anonymous(uring->buf_memory_len, 0);
    if (uring->buf_memory == NULL) {
        return -errno;
    }
    struct io_uring_buf_reg registration = {.ring_addr = (uintptr_t)uring->buf_ring,
                                            .ring_entries = uring->buf_count,
                                            .bgid = BUFFER_GROUP};
    if (sxe__sys.io_uring_register(uring->ring_fd, IORING_REGISTER_PBUF_RING, &registration, 1) <
        0) {
        return -errno;
    }
    for (unsigned id = 0; id < uring->buf_count; id++) {
        sxe__uring_give_back_later(uring, id);
    }
    sxe__uring_give_back(uring);
    return 0;
}

static void unmap(void *addr, size_t len)
{
    if (addr != NULL) {
        (void)sxe__sys.munmap(addr, len);
    }
}

void sxe__uring_close(sxe_loop_t *loop)
{
    struct uring *uring = loop->io_state;

    if (uring == NULL) {
        return;
    }
    /* The ring goes first: the kernel keeps its own references to the buffer ring's pages. */
    if (uring->ring_fd >= 0) {
        (void)sxe__sys.close(uring->ring_fd);
    }
    unmap(uring->rings, uring->rings_len);
    unmap(uring->sqes, uring->sqes_len);
    unmap(uring->buf_ring, uring->buf_ring_len);
    unmap(uring->buf_memory, uring->buf_memory_len);
    unmap(uring->watches, WATCH_MAX * sizeof(struct watch));
    free(uring);
    loop->io_state = NULL;
}

int sxe__uring_open(sxe_loop_t *loop)
{
    unsigned count = buffer_count;
    struct uring *uring;
    int rc = -EINVAL;

    loop->io_state = NULL;
    if (count == 0 || count > BUFFERS_MAX || (count & (count - 1)) != 0 || buffer_size == 0) {
        goto fail;
    }
    /* The fed list and the returning ids follow the state, buf_count of each. */
    uring = calloc(1, sizeof(*uring) + count * (sizeof(int) + sizeof(uint16_t)));
    rc = -ENOMEM;
    if (uring == NULL) {
        goto fail;
    }
    uring->ring_fd = -1;
    uring->buf_count = count;
    uring->buf_size = buffer_size;
    uring->fed = (int *)(uring + 1);
    uring->returning = (uint16_t *)(uring->fed + count);
    loop->io_state = uring;
    rc = setup_rings(uring);
    if (rc < 0) {
        goto fail;
    }
    rc = setup_buffers(uring);
    if (rc < 0) {
        goto fail;
    }
    uring->watches = map_anonymous(WATCH_MAX * sizeof(struct watch), MAP_NORESERVE);
    if (uring->watches == NULL) {
        rc = -errno;
        goto fail;
    }
    return 0;

fail:
    SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN, "io_uring: cannot set up: %s", sxe_strerror(rc));
    sxe__uring_close(loop);
    return rc;
}
