/*
 * A sxe-http worker: a child process with its own loop and its share of the connections.
 *
 * It opens them in batches, reports, and waits at the barrier until every connection of every
 * worker is up. Then, closed loop, each connection keeps DEPTH requests outstanding; with -R, the
 * worker sends on a fixed schedule, the m-th request of the worker due at m / rate seconds after
 * the barrier, on connection m mod count, whether or not earlier answers have come (what comes
 * due within a tick goes out at once, early). Latency is timed from when a request was due (or
 * sent, if earlier), so a stalled server cannot hide its stall by slowing the sender (coordinated
 * omission); the time from the actual send is kept beside it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <sxe/sxe.h>

#include "worker.h"

struct worker worker;

#if defined(SXE_COVERAGE)
void __gcov_dump(void); /* libgcov's: writes this process's counters */
#endif

/* Ends the worker process. _exit skips the flush of coverage counters, so a coverage build
 * writes them first: the workers' lines count too. */
void __attribute__((noreturn)) worker_exit(int status)
{
#if defined(SXE_COVERAGE)
    __gcov_dump();
#endif
    _exit(status);
}

/* The CPU time this worker process has taken, in ns. */
uint64_t cpu_now(void)
{
    struct timespec now;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return (uint64_t)now.tv_sec * SXE_NS_PER_SEC + (uint64_t)now.tv_nsec;
}

/* -R: when the worker's m-th request is due: m periods after the barrier. */
static uint64_t due_of(double m)
{
    return worker.start_ns + (uint64_t)(m * worker.period_ns);
}

/* When request k of a client was due: the worker's m-th request goes to client m mod count. */
uint64_t due_at(const struct client *client, uint64_t k)
{
    return due_of((double)k * (double)worker.count + (double)(client - worker.clients));
}

static void send_message(enum message_kind kind, const void *data, size_t len, const void *more,
                         size_t more_len)
{
    struct message_head head = {.kind = kind, .len = (uint32_t)(len + more_len)};
    write_all(worker.up, &head, sizeof(head));
    write_all(worker.up, data, len);
    write_all(worker.up, more, more_len);
}

/* Sends the second being counted (ending at now, the last perhaps shorter), and starts the next. */
static void send_interval(uint64_t now)
{
    uint64_t begin = worker.window_ns + worker.interval_index * SXE_NS_PER_SEC;
    struct interval interval = {.index = worker.interval_index,
                                .ns = now > begin ? now - begin : 0,
                                .queries = worker.results.queries - worker.interval_queries,
                                .errors = results_errors(&worker.results) - worker.interval_errors,
                                .max = worker.interval.max};
    interval.cell_count = histogram_cells(&worker.interval, worker.cells);
    send_message(MESSAGE_INTERVAL, &interval, sizeof(interval), worker.cells,
                 interval.cell_count * sizeof(*worker.cells));
    memset(&worker.interval, 0, sizeof(worker.interval));
    worker.interval_index++;
    worker.interval_queries = worker.results.queries;
    worker.interval_errors = results_errors(&worker.results);
}

/* The next -U target: in turn by weight, or drawn at random by weight. */
static uint64_t pick_target(void)
{
    uint64_t total = config.weight_ends[config.targets - 1];
    uint64_t draw;

    if (config.random) {
        worker.random ^= worker.random << 13;
        worker.random ^= worker.random >> 7;
        worker.random ^= worker.random << 17;
        draw = worker.random % total;
    } else {
        draw = worker.turn++ % total;
    }
    uint64_t low = 0, high = config.targets - 1; /* the first target whose weights end past draw */
    while (low < high) {
        uint64_t middle = low + (high - low) / 2;
        if (config.weight_ends[middle] > draw) {
            high = middle;
        } else {
            low = middle + 1;
        }
    }
    return low;
}

/* Sends count requests (or WebSocket messages) in one write, and notes when. */
void send_queries(struct client *client, unsigned count)
{
    if (count == 0) {
        return;
    }
    for (unsigned i = 0; config.ws_path != NULL && i < count; i++) {
        if (sxe_ws_send(client->ws, SXE_WS_BINARY, config.requests, config.ws_size) < 0) {
            return; /* a slow reader's socket closes; on_close counts it */
        }
    }
    if (config.ws_path == NULL) {
        const char *data = worker.burst;
        size_t len = count * config.request_max;
        if (worker.burst == NULL) {
            len = 0;
            for (unsigned i = 0; i < count; i++) {
                uint64_t target = pick_target();
                size_t size = config.offsets[target + 1] - config.offsets[target];
                memcpy(worker.scratch + len, config.requests + config.offsets[target], size);
                len += size;
            }
            data = worker.scratch;
        }
        /* The burst never changes: a large one (an upload's body) goes by reference, as many
         * connections' copies of it would take more buffers than the loop has. */
        int rc = data == worker.burst && len > REQUEST_BY_REFERENCE
                     ? sxe_conn_write_ref(client->conn, data, len, NULL, NULL)
                     : sxe_conn_write(client->conn, data, len);
        if (rc < 0) {
            return; /* a failed write closes the connection; on_close counts it */
        }
    }
    uint64_t now = sxe_loop_now(worker.loop);
    for (unsigned i = 0; i < count; i++) {
        client->ring[(client->sent + i) & worker.ring_mask] = now;
    }
    client->sent += count;
    worker.results.sent += count;
}

/* -R: sends what is owed, as far as the cap allows. */
void send_owed(struct client *client)
{
    uint64_t room = config.pipeline - (client->sent - client->done);
    unsigned count = (unsigned)(client->owed < room ? client->owed : room);

    client->owed -= count;
    send_queries(client, count);
}

/* Stops sending: closes the connections with nothing outstanding; the rest close when answered. */
void stop_sending(void)
{
    worker.stop_sending = true;
    worker.results.cpu_ns = cpu_now() - worker.cpu_start;
    for (uint64_t i = 0; i < worker.count; i++) {
        struct client *client = &worker.clients[i];
        if (client->conn != NULL && !client->finished && client->done == client->sent &&
            client->owed == 0) {
            close_done(client);
        }
    }
}

/*
 * -R: every request due by the next tick goes to its connection's owed count, then each is sent.
 * Sending early by up to a tick (1 ms by default, --tick) lets one wake-up send a batch: a
 * wake-up costs more than a send. A request sent before it was due is timed from its send.
 */
static void send_due(uint64_t now)
{
    uint64_t total = config.duration_ns ? UINT64_MAX : config.queries * worker.count;
    uint64_t end = config.duration_ns ? worker.window_ns + config.duration_ns : UINT64_MAX;

    if (worker.next_due >= end) {
        total = worker.scheduled; /* the next would be due after the run */
    }
    while (worker.next_due <= now + config.tick_ns && worker.scheduled < total) {
        struct client *client = &worker.clients[worker.scheduled % worker.count];
        if ((client->conn != NULL || client->reopen != 0) && !client->finished) {
            if (client->sent + client->owed - client->done >= config.pipeline) {
                worker.results.errors[ERR_CAP]++; /* it waits for an answer, late */
            }
            client->owed++;
            if (!client->owing) {
                client->owing = true;
                client->next_owing = worker.owing_head;
                worker.owing_head = (uint32_t)(client - worker.clients);
            }
        }
        worker.scheduled++;
        worker.next_due = due_of((double)worker.scheduled);
        if (worker.next_due >= end) {
            total = worker.scheduled;
        }
    }
    while (worker.owing_head != NONE) {
        struct client *client = &worker.clients[worker.owing_head];
        worker.owing_head = client->next_owing;
        client->owing = false;
        if (client->conn != NULL && client->reopen == 0) { /* a reopening one sends on connect */
            send_owed(client);
        }
    }
    if (worker.scheduled >= total && !worker.stop_sending) {
        stop_sending();
    }
}

static void allocate(uint64_t count)
{
    /* An echo whole in one buffer, with room for a frame head and a ping behind it. */
    size_t ws_buffer = config.ws_size + config.ws_size / 512 + 1024;
    struct sxe_loop_options options = {
        .connections = (uint32_t)count + 4,
        /* Over TLS each connection's request is sealed into a record of its own: a buffer each. */
        .buffers = (uint32_t)(config.tls != NULL ? 2 * count + 64 : count / 8 + 64),
        .buffer_size = (uint32_t)(ws_buffer > RESPONSE_HEAD_MAX ? ws_buffer : RESPONSE_HEAD_MAX),
        .write_limit = (uint32_t)(PIPELINE_MAX * config.request_max + RESPONSE_HEAD_MAX),
        .connect_timeout = config.timeout_ns,
        .timers = 4,
    };
    options.high_water = options.write_limit;
    struct sxe_ws_options ws_options = {
        .message_bytes = (uint32_t)config.ws_size, .no_ping = true, .tls = config.tls};

    worker.ring_mask = 1;
    while (worker.ring_mask < config.pipeline) {
        worker.ring_mask <<= 1;
    }
    worker.rings = calloc(count * worker.ring_mask, sizeof(uint64_t));
    worker.ring_mask--;
    worker.clients = calloc(count, sizeof(*worker.clients));
    /* One target: a burst of copies, written as is; several: each write gathered in scratch. */
    char **batch = config.targets == 1 ? &worker.burst : &worker.scratch;
    *batch = config.targets >= 1 ? malloc(config.pipeline * config.request_max) : NULL;
    worker.cells = worker.intervals ? malloc(HISTOGRAM_COUNTS * sizeof(*worker.cells)) : NULL;
    if (worker.clients == NULL || worker.rings == NULL || (config.targets >= 1 && *batch == NULL) ||
        (worker.intervals && !worker.cells) || sxe_loop_create(&worker.loop, &options) < 0 ||
        (config.ws_path != NULL &&
         sxe_ws_client_create(&worker.ws_set, worker.loop, &client_ws_handlers, &ws_options) < 0)) {
        fprintf(stderr, "sxe-http: worker %u cannot allocate %llu connections\n", worker.index,
                (unsigned long long)count);
        worker_exit(3);
    }
    for (unsigned i = 0; worker.burst != NULL && i < config.pipeline; i++) {
        memcpy(worker.burst + i * config.request_max, config.requests, config.request_max);
    }
}

/*
 * --warmup is over: what was answered so far is not counted (its errors are: a server that fails
 * while warming up has failed), and the window's seconds start.
 */
static void start_window(void)
{
    worker.cpu_start = cpu_now();
    worker.counting = true;
    worker.results.sent = 0;
    worker.results.queries = 0;
    memset(&worker.results.latency, 0, sizeof(worker.results.latency));
    memset(&worker.results.service, 0, sizeof(worker.results.service));
    memset(&worker.interval, 0, sizeof(worker.interval));
    worker.interval_queries = 0;
    worker.interval_errors = results_errors(&worker.results);
    worker.last_response_ns = worker.window_ns;
    __atomic_store_n(&worker.progress->queries, 0, __ATOMIC_RELAXED);
}

/* How long the loop may wait: until the window starts, else at most 100 ms. */
static uint64_t wait_at_most(uint64_t now)
{
    uint64_t wait = 100 * SXE_NS_PER_MSEC;

    return !worker.counting && worker.window_ns - now < wait ? worker.window_ns - now : wait;
}

/* Runs the load from the barrier until every connection is done. */
static void run(void)
{
    sxe_timer_t timeouts;

    worker.start_ns = sxe_clock_mono_ns();
    worker.window_ns = worker.start_ns + config.warmup_ns;
    worker.counting = config.warmup_ns == 0;
    worker.cpu_start = cpu_now();
    worker.last_response_ns = worker.start_ns;
    worker.next_due = worker.start_ns;
    sxe_timer_init(&timeouts, check_timeouts, NULL);
    (void)!sxe_timer_start(worker.loop, &timeouts, 100 * SXE_NS_PER_MSEC, 100 * SXE_NS_PER_MSEC);
    (void)sxe_loop_run_once(worker.loop, 0); /* stamp the loop's now */
    for (uint64_t i = 0; config.rate == 0 && i < worker.count; i++) {
        struct client *client = &worker.clients[i];
        if (client->conn != NULL) {
            uint64_t want = config.duration_ns ? config.pipeline : config.queries;
            send_queries(client, (unsigned)(want < config.pipeline ? want : config.pipeline));
        }
    }
    while (worker.ended < worker.count) {
        uint64_t now = sxe_clock_mono_ns();
        if (!worker.counting && now >= worker.window_ns) {
            start_window();
        }
        /* With -R the schedule ends the run (send_due): a wake-up a little late must not stop
         * the last request due before the end from going out. */
        if (config.duration_ns && config.rate == 0 && !worker.stop_sending &&
            now >= worker.window_ns + config.duration_ns) {
            stop_sending();
        }
        reopen_all();
        if (worker.intervals && worker.counting &&
            now >= worker.window_ns + (worker.interval_index + 1) * SXE_NS_PER_SEC) {
            send_interval(worker.window_ns + (worker.interval_index + 1) * SXE_NS_PER_SEC);
        }
        uint64_t wait = wait_at_most(now);
        if (config.rate > 0 && now >= worker.next_tick) {
            send_due(now);
            worker.next_tick = now + config.tick_ns;
        }
        if (config.rate > 0 && !worker.stop_sending) {
            uint64_t wake = worker.next_due - config.tick_ns;
            wake = wake > worker.next_tick ? wake : worker.next_tick;
            wait = wake <= now ? 0 : wake - now < wait ? wake - now : wait;
        }
        if (sxe_loop_run_once(worker.loop, wait) < 0) {
            worker_exit(3);
        }
    }
    if (!worker.stop_sending) { /* -n: each connection stopped by itself */
        worker.results.cpu_ns = cpu_now() - worker.cpu_start;
    }
    worker.results.query_ns =
        worker.last_response_ns > worker.window_ns ? worker.last_response_ns - worker.window_ns : 0;
    if (worker.intervals && (worker.results.queries > worker.interval_queries ||
                             results_errors(&worker.results) > worker.interval_errors)) {
        /* If the last answer came after the second being counted ended (the loop ended before
         * it looked at the clock again), that second is whole and holds the late answers, as a
         * late look at the clock during the run would have it: it lasts one second, not more. */
        uint64_t end = worker.window_ns + (worker.interval_index + 1) * SXE_NS_PER_SEC;
        send_interval(worker.last_response_ns < end ? worker.last_response_ns : end);
    }
}

void run_worker(unsigned index, uint64_t first, uint64_t count, int up, int down,
                struct progress *progress)
{
    char go;

    worker.index = index;
    worker.first = first;
    worker.count = count;
    worker.up = up;
    worker.progress = progress;
    worker.owing_head = NONE;
    worker.reopen_head = NONE;
    worker.random = 0x9e3779b97f4a7c15ULL * (index + 1);
    worker.turn = first; /* workers start at different targets */
    worker.intervals = config.timeline || config.latency_log != NULL;
    if (config.rate > 0) {
        /* This worker's share of the rate, and wake-ups kept to the microsecond. */
        worker.period_ns = 1e9 * (double)config.connections / (config.rate * (double)count);
        prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    }
    allocate(count);

    uint64_t start = sxe_clock_mono_ns();
    while (worker.settled < worker.count) {
        open_more();
        if (sxe_loop_run_once(worker.loop, 100 * SXE_NS_PER_MSEC) < 0) {
            worker_exit(3);
        }
    }
    worker.results.connect_ns = worker.last_settled_ns > start ? worker.last_settled_ns - start : 0;
    send_message(MESSAGE_CONNECTED, &worker.results, sizeof(worker.results), NULL, 0);
    if (!read_all(down, &go, 1)) {
        worker_exit(0); /* the parent gave up: nothing to run */
    }
    /* The barrier is passed: every connection of every worker is up. */
    run();
    send_message(MESSAGE_DONE, &worker.results, sizeof(worker.results), NULL, 0);
    worker_exit(0);
}

void write_all(int fd, const void *data, size_t len)
{
    const char *bytes = data;

    while (len > 0) {
        ssize_t written = write(fd, bytes, len);
        if (written < 0 && errno == EINTR) {
            continue;
        }
        if (written <= 0) {
            worker_exit(3);
        }
        bytes += written;
        len -= (size_t)written;
    }
}

bool read_all(int fd, void *data, size_t len)
{
    char *bytes = data;

    while (len > 0) {
        ssize_t got = read(fd, bytes, len);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            return false;
        }
        bytes += got;
        len -= (size_t)got;
    }
    return true;
}
