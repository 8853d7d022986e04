/*
 * The event loop: creation of all of its memory, one turn of waiting and dispatching, timeouts,
 * and a clean stop on signals.
 *
 * Backend. Connections are registered once, edge-triggered for input and output together, and
 * never modified: a connection costs one epoll_ctl in its life, and the loop needs no batch of
 * interest changes per turn. Listeners are level-triggered so that accepting in bounded batches
 * cannot lose a wake-up. Each registration carries the slot's index and generation; an event for
 * a generation that has since closed is dropped.
 *
 * Time. The loop reads the clock once after each wait and hands that "now" to everything in the
 * turn: timers, the connection table's state timeouts and sxe_loop_now().
 */
#define SXE_LOG_MODULE loop_log
#include "sxe/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>

#include "loop.h"
#include "sxe/clock.h"
#include "sys.h"

static struct sxe_log_module loop_log = SXE_LOG_MODULE_INIT(LOOP);

static const char *const conn_state_names[] = {"FREE",    "IDLE",       "READING",
                                               "WRITING", "CONNECTING", "LISTENING"};

static void apply_defaults(struct sxe_loop_options *options)
{
    if (options->connections == 0) {
        options->connections = 1024;
    }
    if (options->buffers == 0) {
        options->buffers = options->connections / 4 + 16;
    }
    if (options->buffer_size == 0) {
        options->buffer_size = 16384;
    }
    if (options->write_limit == 0) {
        options->write_limit = 4 * options->buffer_size;
    }
    if (options->high_water == 0) {
        options->high_water = options->write_limit / 2;
    }
    if (options->timers == 0) {
        options->timers = 64;
    }
    if (options->events == 0) {
        options->events = 256;
    }
}

static bool options_are_valid(const struct sxe_loop_options *options)
{
    return options->buffer_size >= 64 && options->buffer_size <= (1u << 30) &&
           options->high_water <= options->write_limit &&
           (uint64_t)options->buffers * options->buffer_size <= (1ULL << 40) &&
           options->events <= (1u << 20);
}

int sxe_loop_create(sxe_loop_t **loop_out, const struct sxe_loop_options *options)
{
    struct sxe_loop_options settings = options != NULL ? *options : (struct sxe_loop_options){0};
    sxe_loop_t *loop;
    int rc = -ENOMEM;

    apply_defaults(&settings);
    if (!SXE_CHECK(loop_out != NULL && options_are_valid(&settings))) {
        return -EINVAL;
    }
    if ((loop = calloc(1, sizeof(*loop))) == NULL) {
        return -ENOMEM;
    }
    loop->options = settings;
    loop->epoll_fd = loop->signal_fd = loop->reserve_fd = -1;
    loop->buffers = loop->scratch = MAP_FAILED;
    loop->ready_head = loop->failed_head = SXE_NONE;

    struct sxe_pool_options pool_options = {.name = "connections",
                                            .count = settings.connections,
                                            .element_size = sizeof(struct sxe_conn),
                                            .state_count = SXE__CONN_STATE_COUNT,
                                            .state_names = conn_state_names};
    if ((rc = sxe_pool_create(&loop->conn_pool, &pool_options)) < 0) {
        loop->conn_pool = NULL;
        goto fail;
    }
    loop->conns = sxe_pool_array(loop->conn_pool);
    for (uint32_t i = 0; i < settings.connections; i++) {
        loop->conns[i].fd = -1;
        loop->conns[i].index = i;
        loop->conns[i].loop = loop;
    }

    /* Buffers are reserved, not touched: a page costs memory only once a connection uses it. */
    size_t buffers_size = (size_t)settings.buffers * settings.buffer_size;
    loop->scratch_size = (size_t)settings.buffer_size * SXE__UDP_BATCH;
    loop->buffers = sxe__sys.mmap(NULL, buffers_size, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    loop->scratch = sxe__sys.mmap(NULL, loop->scratch_size, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    loop->buffer_free = calloc(settings.buffers, sizeof(*loop->buffer_free));
    loop->segments =
        calloc((size_t)settings.buffers + settings.connections, sizeof(*loop->segments));
    loop->heap = calloc(settings.timers, sizeof(*loop->heap));
    loop->events = calloc(settings.events, sizeof(*loop->events));
    if (loop->buffers == MAP_FAILED || loop->scratch == MAP_FAILED || loop->buffer_free == NULL ||
        loop->segments == NULL || loop->heap == NULL || loop->events == NULL) {
        rc = -ENOMEM;
        goto fail;
    }
    for (uint32_t i = 0; i < settings.buffers; i++) {
        loop->buffer_free[i] = settings.buffers - 1 - i;
    }
    loop->buffers_free = settings.buffers;
    uint32_t segment_count = settings.buffers + settings.connections;
    for (uint32_t i = 0; i < segment_count; i++) {
        loop->segments[i].next = i + 1 < segment_count ? i + 1 : SXE_NONE;
    }
    loop->segment_free = 0;
    loop->segments_free = segment_count;

    if ((loop->epoll_fd = sxe__sys.epoll_create1(EPOLL_CLOEXEC)) < 0) {
        rc = -errno;
        SXE_LOG_ERROR("cannot create an epoll instance: %s", sxe_strerror(rc));
        goto fail;
    }
    loop->reserve_fd = sxe__sys.open("/dev/null", O_RDONLY | O_CLOEXEC, 0);

    loop->timeouts[SXE__CONN_IDLE] = settings.idle_timeout;
    loop->timeouts[SXE__CONN_READING] = settings.read_timeout;
    loop->timeouts[SXE__CONN_WRITING] = settings.write_timeout;
    loop->timeouts[SXE__CONN_CONNECTING] = settings.connect_timeout;
    for (unsigned state = 0; state < SXE__CONN_STATE_COUNT; state++) {
        (void)sxe_pool_set_timeout(loop->conn_pool, state, loop->timeouts[state]);
    }
    /*
     * Writing to a socket the peer has closed raises SIGPIPE, which kills a process by default;
     * sendfile cannot be told MSG_NOSIGNAL. A program that has not chosen what SIGPIPE does gets
     * it ignored, so a vanished peer is an EPIPE for one connection, not the end of the server.
     */
    struct sigaction pipe_action;
    if (sxe__sys.sigaction(SIGPIPE, NULL, &pipe_action) == 0 && pipe_action.sa_handler == SIG_DFL) {
        pipe_action.sa_handler = SIG_IGN;
        sxe__sys.sigaction(SIGPIPE, &pipe_action, NULL);
    }
    loop->now = sxe_clock_mono_ns();
    *loop_out = loop;
    return 0;

fail:
    if (rc == -ENOMEM) {
        SXE_LOG_ERROR("cannot allocate a loop for %u connections and %u buffers of %u bytes",
                      settings.connections, settings.buffers, settings.buffer_size);
    }
    sxe_loop_destroy(loop);
    return rc;
}

void sxe_loop_destroy(sxe_loop_t *loop)
{
    if (loop == NULL) {
        return;
    }
    if (loop->conn_pool != NULL) {
        sxe__conn_close_all(loop, false);
        sxe_pool_destroy(loop->conn_pool);
    }
    if (loop->epoll_fd >= 0) {
        sxe__sys.close(loop->epoll_fd);
    }
    if (loop->signal_fd >= 0) {
        sxe__sys.close(loop->signal_fd);
    }
    if (loop->reserve_fd >= 0) {
        sxe__sys.close(loop->reserve_fd);
    }
    if (loop->buffers != MAP_FAILED) {
        sxe__sys.munmap(loop->buffers, (size_t)loop->options.buffers * loop->options.buffer_size);
    }
    if (loop->scratch != MAP_FAILED) {
        sxe__sys.munmap(loop->scratch, loop->scratch_size);
    }
    free(loop->buffer_free);
    free(loop->segments);
    free(loop->heap);
    free(loop->events);
    free(loop);
}

uint64_t sxe_loop_now(const sxe_loop_t *loop)
{
    return loop->now;
}

void sxe_loop_stop(sxe_loop_t *loop)
{
    loop->stop = true;
}

void sxe_loop_stats(const sxe_loop_t *loop, struct sxe_loop_stats *stats)
{
    *stats = loop->stats;
    stats->open = loop->options.connections - sxe_pool_count(loop->conn_pool, SXE__CONN_FREE);
    stats->buffers_in_use = loop->options.buffers - loop->buffers_free;
}

/* The earliest moment something is due: a timer, a connection timeout or the end of a drain. */
static uint64_t next_deadline(sxe_loop_t *loop, uint64_t deadline)
{
    uint64_t timer = sxe__timer_next(loop);

    if (timer < deadline) {
        deadline = timer;
    }
    for (unsigned state = 0; state < SXE__CONN_STATE_COUNT; state++) {
        uint64_t oldest;
        if (loop->timeouts[state] != 0 &&
            sxe_pool_oldest(loop->conn_pool, state, &oldest) != SXE_POOL_NONE &&
            oldest + loop->timeouts[state] < deadline) {
            /* A connection times out once it has waited longer than the timeout: 1 ns later. */
            deadline = oldest + loop->timeouts[state] + 1;
        }
    }
    if (loop->stopping && loop->stop_deadline < deadline) {
        deadline = loop->stop_deadline;
    }
    return deadline;
}

/* Milliseconds for epoll_wait to reach deadline, rounded up so the loop never wakes early. */
static int wait_ms(const sxe_loop_t *loop, uint64_t deadline)
{
    if (loop->ready_head != SXE_NONE || deadline <= loop->now) {
        return 0;
    }
    if (deadline == UINT64_MAX) {
        return -1;
    }
    uint64_t ms = (deadline - loop->now + SXE_NS_PER_MSEC - 1) / SXE_NS_PER_MSEC;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

static void begin_stop(sxe_loop_t *loop)
{
    struct signalfd_siginfo info;
    int signal_number = 0;

    while (sxe__sys.read(loop->signal_fd, &info, sizeof(info)) == (ssize_t)sizeof(info)) {
        signal_number = (int)info.ssi_signo;
    }
    if (loop->stopping || signal_number == 0) {
        return;
    }
    SXE_LOG_INFO("signal %d: stopping; closing listeners and draining output for up to %llu ms",
                 signal_number, (unsigned long long)(loop->drain_ns / SXE_NS_PER_MSEC));
    sxe__conn_close_all(loop, true);
    loop->stopping = true;
    loop->stop_deadline = loop->now + loop->drain_ns;
}

int sxe_loop_run_once(sxe_loop_t *loop, uint64_t timeout_ns)
{
    loop->now = sxe_clock_mono_ns();
    uint64_t deadline = timeout_ns > UINT64_MAX - loop->now ? UINT64_MAX : loop->now + timeout_ns;
    int timeout_ms = wait_ms(loop, next_deadline(loop, deadline));

    int count =
        sxe__sys.epoll_wait(loop->epoll_fd, loop->events, (int)loop->options.events, timeout_ms);
    if (count < 0) {
        if (errno != EINTR) {
            int rc = -errno;
            SXE_LOG_ERROR("epoll_wait failed: %s", sxe_strerror(rc));
            return rc;
        }
        count = 0;
    }
    loop->now = sxe_clock_mono_ns();

    for (int i = 0; i < count; i++) {
        uint64_t tag = loop->events[i].data.u64;
        if (tag == SXE__SIGNAL_TAG) {
            begin_stop(loop);
            continue;
        }
        struct sxe_conn *conn = &loop->conns[(uint32_t)tag];
        if (conn->generation != (uint32_t)(tag >> 32) || conn->fd < 0) {
            loop->stats.stale_events++;
            continue;
        }
        sxe__conn_dispatch(loop, conn, loop->events[i].events);
        sxe__conn_close_failed(loop);
    }
    sxe__conn_read_ready(loop);
    sxe__timer_run(loop);
    sxe_pool_check_timeouts(loop->conn_pool, loop->now, sxe__conn_timed_out, loop);
    sxe__conn_close_failed(loop);

    if (loop->stopping && (sxe__conn_writing(loop) == 0 || loop->now >= loop->stop_deadline)) {
        sxe__conn_close_all(loop, false);
        loop->stopping = false;
        loop->stop = true;
    }
    return count;
}

int sxe_loop_run(sxe_loop_t *loop)
{
    loop->stop = false;
    while (!loop->stop) {
        int rc = sxe_loop_run_once(loop, UINT64_MAX);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

int sxe_loop_stop_on_signals(sxe_loop_t *loop, uint64_t drain_ns)
{
    struct epoll_event event = {.events = EPOLLIN, .data.u64 = SXE__SIGNAL_TAG};
    sigset_t signals;
    int rc;

    if (loop->signal_fd >= 0) {
        loop->drain_ns = drain_ns;
        return 0;
    }
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    if ((rc = sxe__sys.pthread_sigmask(SIG_BLOCK, &signals, NULL)) != 0) {
        return -rc; /* GCOVR_EXCL_LINE: fails only for an invalid "how", a constant here. */
    }
    int fd = sxe__sys.signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        SXE_LOG_ERROR("cannot create a signalfd: %s", sxe_strerror(rc));
        return rc;
    }
    if (sxe__sys.epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, fd, &event) < 0) {
        rc = -errno;
        SXE_LOG_ERROR("cannot watch the signalfd: %s", sxe_strerror(rc));
        sxe__sys.close(fd);
        return rc;
    }
    loop->signal_fd = fd;
    loop->drain_ns = drain_ns;
    return 0;
}
