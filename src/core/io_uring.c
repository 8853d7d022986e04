/*
 * The io_uring event backend: completions instead of readiness (the contract is in io.h).
 *
 * One ring per loop, made for the one thread that runs the loop: SINGLE_ISSUER and
 * DEFER_TASKRUN, so the kernel does a request's work (receiving, posting its completion) only when
 * this thread asks for completions, never on another CPU behind the loop's back. The ring is made
 * disabled, and the first thread that enters it (the one that runs the loop) becomes its only
 * issuer: from any other, io_uring_enter fails with EEXIST. SQPOLL is never used: a kernel
 * thread spinning per loop costs a core. watch, forget and send make no system call; they queue
 * SQEs, and wait() submits them and waits for completions in one io_uring_enter. Only a full SQ
 * is submitted on the spot.
 *
 * What a watcher wants becomes requests that stay armed ("multishot"): a receive into a ring of
 * provided buffers, an accept, or a poll. A multishot request ends now and then on its own (the
 * buffer ring ran dry, an error, the end of the stream); it is armed again while it is wanted. A
 * multishot poll reports changes (edge-triggered); a one-shot poll armed again after each
 * completion reports for as long as the condition holds (level-triggered), because the new one is
 * submitted only at the next wait, after the watcher has had its turn.
 *
 * Received bytes stay in the provided buffer they landed in, lent to the caller until the next
 * wait, which gives every lent buffer back to the kernel with one store of the ring's tail. When
 * the buffers run out, a receive ends with ENOBUFS and is armed again without a word: the bytes
 * are still in the socket. Receives that got nothing in a turn are armed again before those that
 * got some, so one connection that floods cannot keep the buffers from the others.
 *
 * Each fd has an entry in a table indexed by fd, and every request carries the fd, its kind and
 * the entry's sequence number in its user_data. forget() bumps the sequence, so whatever the
 * kernel still posts for an earlier watcher is recognised as stale and dropped, after handing
 * back what it holds (a buffer, an accepted connection). Requests are cancelled by user_data; a
 * request is never armed again while its cancel is in flight, so a cancel cannot hit its
 * successor.
 */
#define SXE_LOG_MODULE uring_log
#include "sxe/log.h"

#include <errno.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "io.h"
#include "io_uring.h"
#include "loop.h"
#include "sxe/clock.h"
#include "sys.h"

static struct sxe_log_module uring_log = SXE_LOG_MODULE_INIT(URING);

/*
 * The kernel's opcode of each kind, as the seam's view of a completion names it (a sendmsg is
 * named IORING_OP_SEND too).
 */
static const uint8_t opcodes[] = {
    [OP_RECV] = IORING_OP_RECV,        [OP_ACCEPT] = IORING_OP_ACCEPT,
    [OP_POLL_IN] = IORING_OP_POLL_ADD, [OP_POLL_OUT] = IORING_OP_POLL_ADD,
    [OP_SEND] = IORING_OP_SEND,        [OP_CANCEL] = IORING_OP_ASYNC_CANCEL};

static uint64_t user_data(int fd, unsigned op, uint32_t seq)
{
    return (uint64_t)(seq & SEQ_MASK) << 40 | (uint64_t)op << 32 | (uint32_t)fd;
}

/* The requests that carry out what a watcher wants. */
static unsigned ops_wanted(unsigned wanted)
{
    unsigned ops = 0;

    if (wanted & SXE__IO_IN) {
        if (wanted & SXE__IO_RECV) {
            ops |= OP_BIT(OP_RECV);
        } else if (wanted & SXE__IO_ACCEPT) {
            ops |= OP_BIT(OP_ACCEPT);
        } else {
            ops |= OP_BIT(OP_POLL_IN);
        }
    }
    if (wanted & SXE__IO_OUT) {
        ops |= OP_BIT(OP_POLL_OUT);
    }
    return ops;
}

static unsigned unsubmitted(const struct uring *uring)
{
    return uring->sq_queued - __atomic_load_n(uring->sq_head, __ATOMIC_ACQUIRE);
}

/*
 * Publishes the queued SQEs and enters the kernel. Once the kernel has taken every SQE, it has
 * copied their msghdrs (IORING_FEAT_SUBMIT_STABLE), so the arena starts over.
 * @return what io_uring_enter returned, or -errno.
 */
static int enter(struct uring *uring, unsigned min_complete, unsigned flags,
                 struct io_uring_getevents_arg *arg)
{
    unsigned to_submit = unsubmitted(uring);

    if (!uring->enabled) {
        /* This thread becomes the ring's single issuer: the one that runs the loop. */
        if (sxe__sys.io_uring_register(uring->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0) < 0) {
            return -errno;
        }
        uring->enabled = true;
    }
    __atomic_store_n(uring->sq_tail, uring->sq_queued, __ATOMIC_RELEASE);
    int rc = sxe__sys.io_uring_enter(uring->ring_fd, to_submit, min_complete, flags, arg,
                                     arg != NULL ? sizeof(*arg) : 0);
    if (rc < 0) {
        rc = -errno;
    }
    if (unsubmitted(uring) == 0) {
        uring->msgs_used = 0;
        uring->iovs_used = 0;
    }
    return rc;
}

/* The next SQE, zeroed and queued. A full SQ is submitted first. @return 0 or -errno. */
static int sqe_get(struct uring *uring, struct io_uring_sqe **sqe_out)
{
    if (unsubmitted(uring) == uring->sq_entries) {
        int rc = enter(uring, 0, 0, NULL);
        if (rc < 0) {
            return rc;
        }
        if (unsubmitted(uring) == uring->sq_entries) {
            return -EBUSY;
        }
    }
    struct io_uring_sqe *sqe = &uring->sqes[uring->sq_queued & uring->sq_mask];
    memset(sqe, 0, sizeof(*sqe));
    uring->sq_queued++;
    *sqe_out = sqe;
    return 0;
}

static int arm(struct uring *uring, int fd, struct watch *watch, unsigned op)
{
    struct io_uring_sqe *sqe;
    int rc = sqe_get(uring, &sqe);

    if (rc < 0) {
        return rc;
    }
    sqe->fd = fd;
    sqe->user_data = user_data(fd, op, watch->seq);
    switch (op) {
    case OP_RECV:
        sqe->opcode = IORING_OP_RECV;
        sqe->ioprio = IORING_RECV_MULTISHOT;
        sqe->flags = IOSQE_BUFFER_SELECT;
        sqe->buf_group = BUFFER_GROUP;
        break;
    case OP_ACCEPT:
        sqe->opcode = IORING_OP_ACCEPT;
        sqe->ioprio = IORING_ACCEPT_MULTISHOT;
        sqe->accept_flags = SOCK_NONBLOCK | SOCK_CLOEXEC;
        break;
    default: /* OP_POLL_IN, OP_POLL_OUT */
        sqe->opcode = IORING_OP_POLL_ADD;
        sqe->poll32_events = op == OP_POLL_IN ? POLLIN | POLLRDHUP : POLLOUT;
        sqe->len = watch->wanted & SXE__IO_EDGE ? IORING_POLL_ADD_MULTI : 0;
        break;
    }
    watch->armed |= OP_BIT(op);
    return 0;
}

static int cancel(struct uring *uring, int fd, struct watch *watch, unsigned op)
{
    struct io_uring_sqe *sqe;
    int rc = sqe_get(uring, &sqe);

    if (rc < 0) {
        return rc;
    }
    sqe->opcode = IORING_OP_ASYNC_CANCEL;
    sqe->fd = -1;
    sqe->addr = user_data(fd, op, watch->seq);
    sqe->user_data = user_data(fd, OP_CANCEL, watch->seq);
    watch->cancelling |= OP_BIT(op);
    return 0;
}

/*
 * Brings fd's requests in line with what it wants. A request being cancelled is left alone: when
 * it ends, it is armed again if it is wanted by then. A poll whose edge or level changes is
 * cancelled, and comes back the new way.
 */
static int apply(struct uring *uring, int fd, struct watch *watch, bool edge_changed)
{
    unsigned wanted = ops_wanted(watch->wanted);

    for (unsigned op = OP_RECV; op <= OP_POLL_OUT; op++) {
        unsigned bit = OP_BIT(op);
        bool stays = (wanted & bit) && !(edge_changed && op >= OP_POLL_IN);
        int rc = 0;
        if ((wanted & bit) && !(watch->armed & bit)) {
            rc = arm(uring, fd, watch, op);
        } else if ((watch->armed & bit) && !stays && !(watch->cancelling & bit)) {
            rc = cancel(uring, fd, watch, op);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

static void uring_forget(sxe_loop_t *loop, int fd, bool close_fd)
{
    struct uring *uring = loop->io_state;

    if (fd >= 0 && (unsigned)fd < WATCH_MAX) {
        struct watch *watch = &uring->watches[fd];
        /* A send still pending is cancelled too: only the loop's teardown forgets one, and the
         * memory it reads goes only after the ring, which cancels it for good, is closed. */
        for (unsigned op = OP_RECV; op <= OP_SEND; op++) {
            if ((watch->armed & ~watch->cancelling & OP_BIT(op)) == 0) {
                continue;
            }
            int rc = cancel(uring, fd, watch, op);
            if (rc < 0) {
                /* The request keeps its socket open, and goes only when the ring does. */
                SXE_LOG_ERROR("io_uring: cannot cancel a request on fd %d: %s", fd,
                              sxe_strerror(rc));
            }
        }
        *watch = (struct watch){.seq = (watch->seq + 1) & SEQ_MASK};
    }
    if (close_fd) {
        (void)sxe__sys.close(fd);
    }
}

static int uring_watch(sxe_loop_t *loop, int fd, uint64_t tag, unsigned wanted)
{
    struct uring *uring = loop->io_state;
    bool modify = (wanted & SXE__IO_MODIFY) != 0;

    if (fd < 0 || (unsigned)fd >= WATCH_MAX) {
        SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN, "io_uring: cannot watch fd %d: the table ends at %u", fd,
                     WATCH_MAX);
        return fd < 0 ? -EBADF : -EMFILE;
    }
    struct watch *watch = &uring->watches[fd];
    if (!SXE_CHECK(((watch->flags & WATCHED) != 0) == modify)) {
        return modify ? -ENOENT : -EEXIST;
    }
    bool edge_changed = modify && ((watch->wanted ^ wanted) & SXE__IO_EDGE) != 0;
    watch->flags |= WATCHED;
    watch->tag = tag;
    watch->wanted = (uint16_t)(wanted & ~SXE__IO_MODIFY);
    int rc = apply(uring, fd, watch, edge_changed);
    if (rc < 0) {
        SXE_LOG_ERROR("io_uring: cannot watch fd %d: %s", fd, sxe_strerror(rc));
        if (!modify) {
            uring_forget(loop, fd, false);
        }
    }
    return rc;
}

static bool arena_has_room(const struct uring *uring, int count)
{
    return count == 1 ||
           (uring->msgs_used < ARENA_MSGS && uring->iovs_used + (unsigned)count <= ARENA_IOVS);
}

/*
 * One send per fd at a time: its result comes as SXE__IO_SENT. A failure to queue it is
 * -ENOBUFS, never -EAGAIN, which would say the socket is full.
 */
static ssize_t uring_send(sxe_loop_t *loop, int fd, uint64_t tag, const struct iovec *iov,
                          int count, int flags)
{
    struct uring *uring = loop->io_state;
    struct io_uring_sqe *sqe;

    if (!SXE_CHECK(fd >= 0 && count >= 1 && count <= ARENA_IOVS)) {
        return -EINVAL;
    }
    if ((unsigned)fd >= WATCH_MAX) {
        return -EMFILE;
    }
    struct watch *watch = &uring->watches[fd];
    if (!SXE_CHECK((watch->armed & OP_BIT(OP_SEND)) == 0)) {
        return -EBUSY;
    }
    if (!arena_has_room(uring, count)) {
        (void)enter(uring, 0, 0, NULL);
    }
    if (!arena_has_room(uring, count) || sqe_get(uring, &sqe) < 0) {
        SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN, "io_uring: cannot queue a send: the kernel takes no SQE");
        return -ENOBUFS;
    }
    sqe->fd = fd;
    sqe->msg_flags = (uint32_t)flags;
    sqe->user_data = user_data(fd, OP_SEND, watch->seq);
    if (count == 1) {
        sqe->opcode = IORING_OP_SEND;
        sqe->addr = (uintptr_t)iov[0].iov_base;
        sqe->len = iov[0].iov_len < UINT32_MAX ? (uint32_t)iov[0].iov_len : UINT32_MAX;
    } else {
        struct msghdr *message = &uring->msgs[uring->msgs_used++];
        struct iovec *copy = &uring->iovs[uring->iovs_used];
        memcpy(copy, iov, (size_t)count * sizeof(*iov));
        uring->iovs_used += (unsigned)count;
        *message = (struct msghdr){.msg_iov = copy, .msg_iovlen = (size_t)count};
        sqe->opcode = IORING_OP_SENDMSG;
        sqe->addr = (uintptr_t)message;
        sqe->len = 1;
    }
    watch->armed |= OP_BIT(OP_SEND);
    if (!(watch->flags & WATCHED)) {
        watch->tag = tag;
    }
    return SXE__IO_PENDING;
}

static unsigned buffer_id(const struct uring *uring, const char *data)
{
    return (unsigned)((size_t)(data - uring->buf_memory) / uring->buf_size);
}

/*
 * A watcher holds data's buffer past the next wait: it is not given back then. At most half the
 * buffers are held at once, so that receiving for every other connection goes on (a receive that
 * finds none left would end and be armed again turn after turn).
 */
static bool uring_keep(sxe_loop_t *loop, const char *data)
{
    struct uring *uring = loop->io_state;
    unsigned id = buffer_id(uring, data);

    if (uring->kept_count >= uring->buf_count / 2) {
        return false;
    }
    for (unsigned i = uring->returning_count; i-- > 0;) {
        if (uring->returning[i] == id) {
            uring->returning[i] = uring->returning[--uring->returning_count];
            uring->kept_count++;
            return true;
        }
    }
    SXE_ASSERT(!"keep: the buffer is not lent");
    return false; /* GCOVR_EXCL_LINE: only a caller's bug gets here */
}

/* A held buffer goes back to the kernel at the next wait. */
static void uring_release(sxe_loop_t *loop, const char *data)
{
    struct uring *uring = loop->io_state;

    uring->kept_count--;
    sxe__uring_give_back_later(uring, buffer_id(uring, data));
}

/* Hands back what a completion holds when no one is to get it. */
static void release(struct uring *uring, const struct io_uring_cqe *cqe, unsigned op)
{
    if (cqe->flags & IORING_CQE_F_BUFFER) {
        sxe__uring_give_back_later(uring, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
    }
    if (op == OP_ACCEPT && cqe->res >= 0) {
        (void)sxe__sys.close(cqe->res);
    }
}

/* A request has ended: armed again if rearm says it may be and its watcher still wants it. */
static void ended(struct uring *uring, int fd, struct watch *watch, unsigned op, bool rearm)
{
    watch->armed &= ~OP_BIT(op);
    watch->cancelling &= ~OP_BIT(op);
    if (!rearm || (ops_wanted(watch->wanted) & OP_BIT(op)) == 0) {
        return;
    }
    int rc = arm(uring, fd, watch, op);
    if (rc < 0) {
        SXE_LOG_ERROR("io_uring: cannot arm fd %d again: %s; it waits for a watch to modify it", fd,
                      sxe_strerror(rc));
    }
}

/*
 * A receive got bytes in this reap. Each such receive holds a buffer that goes back only at the
 * next wait, so the fed list never needs more than buf_count entries.
 */
static void fed(struct uring *uring, int fd, struct watch *watch)
{
    if ((watch->flags & FED) || SXE_NEVER(uring->fed_count == uring->buf_count)) {
        return;
    }
    watch->flags |= FED;
    uring->fed[uring->fed_count++] = fd;
}

/* Arms the receives that ran out of buffers after they got some, behind those that got none. */
static void rearm_fed(struct uring *uring)
{
    for (unsigned i = 0; i < uring->fed_count; i++) {
        int fd = uring->fed[i];
        struct watch *watch = &uring->watches[fd];
        bool starved = (watch->flags & STARVED) != 0;
        watch->flags &= (uint8_t) ~(FED | STARVED);
        if (starved) {
            ended(uring, fd, watch, OP_RECV, true);
        }
    }
    uring->fed_count = 0;
}

static bool received(struct uring *uring, int fd, struct watch *watch,
                     const struct io_uring_cqe *cqe, int result, struct sxe__io_event *event)
{
    bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;

    if (result > 0) {
        unsigned id = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        sxe__uring_give_back_later(uring, id);
        fed(uring, fd, watch);
        *event = (struct sxe__io_event){.tag = watch->tag,
                                        .events = SXE__IO_IN | SXE__IO_RECV,
                                        .result = result,
                                        .data = uring->buf_memory + (size_t)id * uring->buf_size};
        if (!more) {
            ended(uring, fd, watch, OP_RECV, true);
        }
        return true;
    }
    release(uring, cqe, OP_RECV);
    bool cancelled = result == -ECANCELED && (watch->cancelling & OP_BIT(OP_RECV));
    if (!more && result == -ENOBUFS && (watch->flags & FED)) {
        watch->flags |= STARVED;
        return false;
    }
    if (!more && (result == -ENOBUFS || cancelled)) {
        ended(uring, fd, watch, OP_RECV, true);
        return false;
    }
    if (!more) {
        ended(uring, fd, watch, OP_RECV, false);
    }
    *event = (struct sxe__io_event){.tag = watch->tag,
                                    .events =
                                        SXE__IO_IN | SXE__IO_RECV | (result == 0 ? SXE__IO_HUP : 0),
                                    .result = result};
    return true;
}

/* An accept that fails ends; the watcher arms it again with a watch that modifies it. */
static bool accepted(struct uring *uring, int fd, struct watch *watch,
                     const struct io_uring_cqe *cqe, int result, struct sxe__io_event *event)
{
    bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;

    if (result < 0) {
        release(uring, cqe, OP_ACCEPT);
        if (result == -ECANCELED && (watch->cancelling & OP_BIT(OP_ACCEPT))) {
            ended(uring, fd, watch, OP_ACCEPT, true);
            return false;
        }
    }
    if (!more) {
        ended(uring, fd, watch, OP_ACCEPT, result >= 0);
    }
    *event = (struct sxe__io_event){
        .tag = watch->tag, .events = SXE__IO_IN | SXE__IO_ACCEPT, .result = result};
    return true;
}

static uint32_t poll_events(unsigned mask)
{
    uint32_t events = 0;

    if (mask & POLLIN) {
        events |= SXE__IO_IN;
    }
    if (mask & POLLOUT) {
        events |= SXE__IO_OUT;
    }
    if (mask & (POLLRDHUP | POLLHUP)) {
        events |= SXE__IO_HUP;
    }
    if (mask & POLLERR) {
        events |= SXE__IO_ERR;
    }
    return events;
}

/* Readiness no one wants any more (the poll raced its cancel) is not reported. */
static bool polled(struct uring *uring, int fd, struct watch *watch, unsigned op,
                   const struct io_uring_cqe *cqe, int result, struct sxe__io_event *event)
{
    bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
    bool cancelled = result == -ECANCELED && (watch->cancelling & OP_BIT(op));

    if (!more) {
        ended(uring, fd, watch, op, result >= 0 || cancelled);
    }
    if (cancelled || (result >= 0 && (ops_wanted(watch->wanted) & OP_BIT(op)) == 0)) {
        return false;
    }
    uint32_t events = result >= 0 ? poll_events((unsigned)result)
                                  : SXE__IO_ERR | (op == OP_POLL_IN ? SXE__IO_IN : SXE__IO_OUT);
    *event = (struct sxe__io_event){
        .tag = watch->tag, .events = events, .result = result < 0 ? result : 0};
    return true;
}

/* Turns a completion into an event, or into nothing. @return whether event was filled in. */
static bool complete(struct uring *uring, const struct io_uring_cqe *cqe,
                     struct sxe__io_event *event)
{
    int fd = (int)(uint32_t)cqe->user_data;
    unsigned op = (unsigned)(cqe->user_data >> 32) & 0xffu;
    uint32_t seq = (uint32_t)(cqe->user_data >> 40);

    if (SXE_NEVER(op < OP_RECV || op > OP_CANCEL || (uint32_t)fd >= WATCH_MAX)) {
        return false;
    }
    int result = sxe__sys.io_uring_result(opcodes[op], cqe->res);
    if (result < 0) {
        result = -errno;
    }
    /* Whether a cancel found its request shows in the request's own last completion. */
    if (op == OP_CANCEL) {
        return false;
    }
    struct watch *watch = &uring->watches[fd];
    if (watch->seq != seq || (watch->armed & OP_BIT(op)) == 0) {
        release(uring, cqe, op);
        return false;
    }
    switch (op) {
    case OP_RECV:
        return received(uring, fd, watch, cqe, result, event);
    case OP_ACCEPT:
        return accepted(uring, fd, watch, cqe, result, event);
    case OP_SEND:
        watch->armed &= ~OP_BIT(OP_SEND);
        *event =
            (struct sxe__io_event){.tag = watch->tag, .events = SXE__IO_SENT, .result = result};
        return true;
    default: /* OP_POLL_IN, OP_POLL_OUT */
        return polled(uring, fd, watch, op, cqe, result, event);
    }
}

/* Takes completions in order until max events; the rest stay in the CQ for the next wait. */
static int reap(struct uring *uring, struct sxe__io_event *events, int max)
{
    unsigned head = *uring->cq_head;
    unsigned tail = __atomic_load_n(uring->cq_tail, __ATOMIC_ACQUIRE);
    int filled = 0;

    while (head != tail && filled < max) {
        if (complete(uring, &uring->cqes[head & uring->cq_mask], &events[filled])) {
            filled++;
        }
        head++;
    }
    __atomic_store_n(uring->cq_head, head, __ATOMIC_RELEASE);
    rearm_fed(uring);
    return filled;
}

/*
 * Submits what the turn queued and, when the CQ is empty, waits for a completion until deadline.
 * Even without waiting, GETEVENTS runs the deferred work that posts completions. A submission
 * the kernel refuses for now stays in the SQ and goes with the next turn's.
 */
static int submit_and_wait(struct uring *uring, const sxe_loop_t *loop, uint64_t deadline)
{
    bool cq_empty = __atomic_load_n(uring->cq_tail, __ATOMIC_ACQUIRE) == *uring->cq_head;
    struct __kernel_timespec timeout = {0};
    struct io_uring_getevents_arg arg = {0};
    unsigned min_complete = 0;

    if (!cq_empty && unsubmitted(uring) == 0) {
        return 0;
    }
    if (cq_empty && deadline > loop->now) {
        min_complete = 1;
        if (deadline != UINT64_MAX) {
            uint64_t ns = deadline - loop->now;
            timeout.tv_sec = (long long)(ns / SXE_NS_PER_SEC);
            timeout.tv_nsec = (long long)(ns % SXE_NS_PER_SEC);
            arg.ts = (uintptr_t)&timeout;
        }
    }
    int rc = enter(uring, min_complete, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, &arg);
    if (rc >= 0 || rc == -EINTR || rc == -ETIME) {
        return 0;
    }
    if (rc == -EAGAIN || rc == -EBUSY || rc == -ENOMEM) {
        SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN, "io_uring: io_uring_enter: %s; submitting next turn",
                     sxe_strerror(rc));
        return 0;
    }
    SXE_LOG_ERROR("io_uring: io_uring_enter: %s", sxe_strerror(rc));
    return rc;
}

static int uring_wait(sxe_loop_t *loop, uint64_t deadline, struct sxe__io_event *events, int max)
{
    struct uring *uring = loop->io_state;

    sxe__uring_give_back(uring);
    int rc = submit_and_wait(uring, loop, deadline);
    if (rc < 0) {
        return rc;
    }
    return reap(uring, events, max);
}

const struct sxe__io_backend sxe__io_uring = {
    .name = "io_uring",
    .kind = SXE__IO_COMPLETION,
    .open = sxe__uring_open,
    .close = sxe__uring_close,
    .watch = uring_watch,
    .forget = uring_forget,
    .wait = uring_wait,
    .send = uring_send,
    .keep = uring_keep,
    .release = uring_release,
};
