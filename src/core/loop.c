/*
 * The event loop: its options, its backend, one turn of waiting and dispatching, timers, and a
 * clean stop on signals. The connection layer (conn.c) builds the loop with sxe__loop_open and
 * sits above it: the loop calls a slot's own callback for each event, and the layer's hooks
 * (struct sxe__loop_layer) between and after them, and knows nothing else of connections.
 *
 * Backend. One of those behind the contract in io.h, chosen by io.c: the program's choice
 * (options.backend) or, if it leaves it alone, the environment's (SXE_BACKEND).
 *
 * Time. The loop reads the clock once after each wait and hands that "now" to everything in the
 * turn: timers, the connection table's state timeouts and sxe_loop_now().
 */
#define SXE_LOG_MODULE loop_log
#include "sxe/log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/signalfd.h>

#include "loop.h"
#include "sxe/clock.h"
#include "sys.h"

static struct sxe_log_module loop_log = SXE_LOG_MODULE_INIT(LOOP);

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
    if (options->handshake_timeout == 0) {
        options->handshake_timeout = 10 * SXE_NS_PER_SEC;
    }
}

static bool options_are_valid(const struct sxe_loop_options *options)
{
    return options->buffer_size >= 64 && options->buffer_size <= (1u << 30) &&
           options->high_water <= options->write_limit &&
           (uint64_t)options->buffers * options->buffer_size <= (1ULL << 40) &&
           options->events <= (1u << 20) && (unsigned)options->backend <= SXE_BACKEND_AUTO &&
           (options->large_buffers == 0 ||
            (options->large_buffer_size > options->buffer_size &&
             options->large_buffer_size <= (1u << 30) &&
             (uint64_t)options->large_buffers * options->large_buffer_size <= (1ULL << 40) &&
             (uint64_t)options->buffers + options->large_buffers < SXE_NONE));
}

int sxe__loop_open(sxe_loop_t *loop, const struct sxe_loop_options *options)
{
    int rc;

    loop->options = options != NULL ? *options : (struct sxe_loop_options){0};
    loop->signal_fd = loop->reserve_fd = loop->wake_fd = -1;
    apply_defaults(&loop->options);
    if (!SXE_CHECK(options_are_valid(&loop->options))) {
        return -EINVAL;
    }
    loop->heap = calloc(loop->options.timers, sizeof(*loop->heap));
    loop->events = calloc(loop->options.events, sizeof(*loop->events));
    if (loop->heap == NULL || loop->events == NULL) {
        return -ENOMEM;
    }
    loop->now = sxe_clock_mono_ns();
    if ((rc = sxe__io_open(loop)) < 0) {
        loop->io = NULL;
        return rc;
    }
    loop->reserve_fd = sxe__sys.open("/dev/null", O_RDONLY | O_CLOEXEC, 0);
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
    return 0;
}

void sxe__loop_close(sxe_loop_t *loop)
{
    sxe__fd_watch_close(loop);
    sxe__wake_close(loop);
    if (loop->signal_fd >= 0) {
        sxe__sys.close(loop->signal_fd);
    }
    if (loop->reserve_fd >= 0) {
        sxe__sys.close(loop->reserve_fd);
    }
    if (loop->io != NULL) {
        loop->io->close(loop);
    }
    free(loop->heap);
    free(loop->events);
}

const struct sxe_loop_options *sxe_loop_options(const sxe_loop_t *loop)
{
    return &loop->options;
}

const char *sxe_loop_backend(const sxe_loop_t *loop)
{
    return loop->io->name;
}

uint64_t sxe_loop_now(const sxe_loop_t *loop)
{
    return loop->now;
}

void sxe_loop_stop(sxe_loop_t *loop)
{
    loop->stop = true;
}

/* The earliest moment something is due: a timer, a connection timeout or the end of a drain. */
static uint64_t next_deadline(sxe_loop_t *loop, uint64_t deadline)
{
    uint64_t timer = sxe__timer_next(loop);

    if (loop->ready_head != SXE_NONE) {
        return loop->now; /* input is waiting to be read: do not block */
    }
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

static void begin_stop(sxe_loop_t *loop, uint64_t drain_ns, bool draining);

/* A signal's place in loop->on_signal: SIGHUP 0, SIGUSR1 1, SIGUSR2 2; 3 for any other. */
static unsigned signal_slot(int signo)
{
    return signo == SIGHUP ? 0 : signo == SIGUSR1 ? 1 : signo == SIGUSR2 ? 2 : 3;
}

/* The signals that came: SIGHUP, SIGUSR1 and SIGUSR2 to the program's hooks, SIGINT or SIGTERM to
 * a clean stop, SIGQUIT to a drain. */
static void take_signals(sxe_loop_t *loop)
{
    struct signalfd_siginfo info;
    int stop_signal = 0;

    while (sxe__sys.read(loop->signal_fd, &info, sizeof(info)) == (ssize_t)sizeof(info)) {
        int signo = (int)info.ssi_signo;
        unsigned hook = signal_slot(signo);
        if (hook == 3) {
            stop_signal = signo;
        } else if (loop->on_signal[hook].hook != NULL) {
            loop->on_signal[hook].hook(loop->on_signal[hook].arg);
        } else {
            SXE_LOG_INFO("%s: nothing here reopens or reloads on it; ignored", hook == 0 ? "SIGHUP"
                                                                               : hook == 1
                                                                                   ? "SIGUSR1"
                                                                                   : "SIGUSR2");
        }
    }
    if (loop->stopping || stop_signal == 0) {
        return;
    }
    SXE_LOG_INFO("signal %d: %s", stop_signal, stop_signal == SIGQUIT ? "draining" : "stopping");
    begin_stop(loop, loop->drain_ns, stop_signal == SIGQUIT);
}

/* The signals the loop reads: those that stop it, SIGHUP, and SIGUSR1 and SIGUSR2 if hooked. */
static void loop_signals(const sxe_loop_t *loop, sigset_t *signals)
{
    sigemptyset(signals);
    sigaddset(signals, SIGINT);
    sigaddset(signals, SIGTERM);
    sigaddset(signals, SIGQUIT);
    sigaddset(signals, SIGHUP);
    if (loop->on_signal[1].hook != NULL) {
        sigaddset(signals, SIGUSR1);
    }
    if (loop->on_signal[2].hook != NULL) {
        sigaddset(signals, SIGUSR2);
    }
}

int sxe_loop_on_signal(sxe_loop_t *loop, int signo, void (*hook)(void *arg), void *arg)
{
    unsigned i = signal_slot(signo);
    sigset_t signals;

    if (!SXE_CHECK(loop != NULL && i < 3)) {
        return -EINVAL;
    }
    loop->on_signal[i].hook = hook;
    loop->on_signal[i].arg = arg;
    if (loop->signal_fd < 0 || hook == NULL) {
        return 0; /* read from sxe_loop_stop_on_signals() on (a removed one stays blocked) */
    }
    sigemptyset(&signals);
    sigaddset(&signals, signo);
    int rc = sxe__sys.pthread_sigmask(SIG_BLOCK, &signals, NULL);
    if (rc != 0) {
        return -rc; /* GCOVR_EXCL_LINE: fails only for an invalid "how", a constant here. */
    }
    loop_signals(loop, &signals);
    return sxe__sys.signalfd(loop->signal_fd, &signals, 0) < 0 ? -errno : 0;
}

void sxe_loop_on_hangup(sxe_loop_t *loop, void (*hook)(void *arg), void *arg)
{
    loop->on_signal[0].hook = hook; /* SIGHUP is always read: no mask to change */
    loop->on_signal[0].arg = arg;
}

int sxe_loop_at_stop(sxe_loop_t *loop, void (*hook)(void *arg), void *arg)
{
    for (unsigned i = 0; i < SXE__AT_STOP_MAX; i++) {
        if (hook == NULL && loop->at_stop[i].hook != NULL && loop->at_stop[i].arg == arg) {
            loop->at_stop[i].hook = NULL;
            return 0;
        }
        if (hook != NULL && loop->at_stop[i].hook == NULL) {
            loop->at_stop[i].hook = hook;
            loop->at_stop[i].arg = arg;
            return 0;
        }
    }
    return hook == NULL ? -ENOENT : -ENOBUFS;
}

/* Begins a stop: the protocols' goodbyes, the listeners closed, the deadline set. */
static void begin_stop(sxe_loop_t *loop, uint64_t drain_ns, bool draining)
{
    SXE_LOG_INFO("%s for up to %llu ms",
                 draining ? "draining: accepting no more, letting the connections finish"
                          : "stopping: closing listeners and draining output",
                 (unsigned long long)(drain_ns / SXE_NS_PER_MSEC));
    for (unsigned i = 0; i < SXE__AT_STOP_MAX; i++) {
        if (loop->at_stop[i].hook != NULL) {
            loop->at_stop[i].hook(loop->at_stop[i].arg);
        }
    }
    if (draining) {
        loop->layer->quiet_listeners(loop);
    } else {
        loop->layer->close_all(loop, true);
    }
    /* Draining, a connection between requests gets a second to send its next (which its protocol
     * answers as its last), then goes. */
    uint64_t *idle = &loop->timeouts[SXE__CONN_IDLE];
    if (draining && (*idle == 0 || *idle > SXE__DRAIN_IDLE_NS)) {
        *idle = SXE__DRAIN_IDLE_NS;
        (void)sxe_pool_set_timeout(loop->conn_pool, SXE__CONN_IDLE, *idle);
    }
    loop->stopping = true;
    loop->draining = draining;
    loop->stop_deadline = loop->now + drain_ns;
}

void sxe_loop_shutdown(sxe_loop_t *loop, uint64_t drain_ns)
{
    if (!loop->stopping && !loop->stop) {
        begin_stop(loop, drain_ns, false);
    }
}

void sxe_loop_drain(sxe_loop_t *loop, uint64_t drain_ns)
{
    if (!loop->stopping && !loop->stop) {
        begin_stop(loop, drain_ns, true);
    }
}

/* Whether a stop under way is done: output sent (and, draining, the accepted connections
 * closed by their protocols), or its time is up. */
static bool stopped(sxe_loop_t *loop)
{
    if (loop->now >= loop->stop_deadline) {
        return true;
    }
    return loop->layer->writing(loop) == 0 && (!loop->draining || loop->layer->serving(loop) == 0);
}

void sxe__loop_drop_events(sxe_loop_t *loop, uint64_t tag)
{
    /* One generation back: never the slot's again (it only grows), so they count as stale. */
    uint64_t stale = tag - ((uint64_t)1 << 32);

    for (int i = 0; i < loop->event_count; i++) {
        if (loop->events[i].tag == tag) {
            loop->events[i].tag = stale;
        }
    }
}

/* Hands each event to its slot's callback; events for a slot reused since are dropped. */
static void dispatch(sxe_loop_t *loop, int count)
{
    loop->event_count = count;
    for (int i = 0; i < count; i++) {
        const struct sxe__io_event *event = &loop->events[i];
        if (event->tag >= SXE__LOOP_TAGS) {
            if (event->tag == SXE__SIGNAL_TAG) {
                take_signals(loop);
            } else if (event->tag == SXE__WAKE_TAG) {
                sxe__wake_take(loop);
            } else {
                sxe__fd_watch_event(loop, event);
            }
            loop->layer->after_event(loop);
            continue;
        }
        struct sxe_conn *conn = &loop->conns[(uint32_t)event->tag];
        if (conn->generation != (uint32_t)(event->tag >> 32) || conn->fd < 0) {
            loop->stats.stale_events++;
            if ((event->events & SXE__IO_ACCEPT) && event->result >= 0) {
                sxe__sys.close(event->result); /* accepted for a listener closed this turn */
            }
            continue;
        }
        uint32_t previous_id = sxe_log_set_id(sxe__conn_index(conn));
        loop->callbacks[conn->io_kind](conn, event);
        sxe_log_set_id(previous_id);
        loop->layer->after_event(loop);
    }
    loop->event_count = 0;
}

int sxe_loop_run_once(sxe_loop_t *loop, uint64_t timeout_ns)
{
    loop->now = sxe_clock_mono_ns();
    uint64_t deadline = timeout_ns > UINT64_MAX - loop->now ? UINT64_MAX : loop->now + timeout_ns;

    int count = loop->io->wait(loop, next_deadline(loop, deadline), loop->events,
                               (int)loop->options.events);
    if (count < 0) {
        return count;
    }
    loop->now = sxe_clock_mono_ns();
    loop->turns++; /* closes asked for by callbacks end when each callback has returned */
    dispatch(loop, count);
    loop->layer->end_turn(loop);
    sxe__timer_run(loop);
    loop->layer->after_event(loop);

    if (loop->stopping && stopped(loop)) {
        loop->layer->close_all(loop, false);
        loop->layer->after_event(loop);
        loop->stopping = loop->draining = false;
        loop->stop = true;
    }
    if (loop->turn_hook != NULL) {
        loop->turn_hook(loop, loop->turn_arg);
        loop->layer->after_event(loop);
    }
    loop->turns--;
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
    sigset_t signals;
    int rc;

    if (loop->signal_fd >= 0) {
        loop->drain_ns = drain_ns;
        return 0;
    }
    loop_signals(loop, &signals);
    if ((rc = sxe__sys.pthread_sigmask(SIG_BLOCK, &signals, NULL)) != 0) {
        return -rc; /* GCOVR_EXCL_LINE: fails only for an invalid "how", a constant here. */
    }
    int fd = sxe__sys.signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        SXE_LOG_ERROR("cannot create a signalfd: %s", sxe_strerror(rc));
        return rc;
    }
    if ((rc = loop->io->watch(loop, fd, SXE__SIGNAL_TAG, SXE__IO_IN)) < 0) {
        SXE_LOG_ERROR("cannot watch the signalfd: %s", sxe_strerror(rc));
        sxe__sys.close(fd);
        return rc;
    }
    loop->signal_fd = fd;
    loop->drain_ns = drain_ns;
    return 0;
}
