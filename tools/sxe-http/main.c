/*
 * sxe-http: an HTTP/1.1 load generator.
 *
 *     sxe-http -i IP -p PORT -n QUERIES_PER_CONNECTION -c CONNECTIONS [options]
 *
 * Worker processes (one per CPU's worth of file descriptors: the per-process limit decides) each
 * open their share of the connections in batches, then wait at a barrier until every connection of
 * every worker is up. Then each connection sends its queries, closed loop (one after another, or
 * DEPTH deep) or on a schedule (-R), checking every response's status and framing (worker.c). The
 * parent gathers what the workers send, each second with --timeline or --latency-log, and
 * reports connect, query and run times and rates, latency percentiles, and errors by kind
 * (report.c).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sxe/sxe.h>

#include "sxe-http.h"

/* Raises the soft limit on open files to the hard one; returns how many a worker may use. */
static uint64_t connections_per_process(void)
{
    struct rlimit limit;

    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur <= FDS_RESERVED) {
        return 1;
    }
    return limit.rlim_cur == RLIM_INFINITY ? 1000000 : limit.rlim_cur - FDS_RESERVED;
}

static void plan(void)
{
    uint64_t per_process = connections_per_process();
    uint64_t needed = (config.connections + per_process - 1) / per_process;

    if (config.workers == 0) {
        config.workers = (unsigned)(needed < 1 ? 1 : needed);
    }
    if (config.workers > WORKERS_MAX || config.workers > config.connections) {
        config.workers =
            (unsigned)(config.connections < WORKERS_MAX ? config.connections : WORKERS_MAX);
    }
    if ((config.connections + config.workers - 1) / config.workers > per_process) {
        fprintf(stderr,
                "sxe-http: -c %llu needs %llu open files per process with %u worker(s), but the "
                "limit is %llu per process (ulimit -n); use -w %llu or more\n",
                (unsigned long long)config.connections,
                (unsigned long long)((config.connections + config.workers - 1) / config.workers),
                config.workers, (unsigned long long)(per_process + FDS_RESERVED),
                (unsigned long long)needed);
        exit(2);
    }
    /* Past about 28,000 connections one source address runs out of ports, and well before that
     * the kernel's search for a free port slows down as the range fills: on loopback, spread over
     * 127.0.0.1, 127.0.0.2, ... with each source's range at most half used, unless the caller
     * chose sources. */
    uint64_t sources_needed =
        (config.connections + PORTS_PER_SOURCE / 2 - 1) / (PORTS_PER_SOURCE / 2);
    struct sockaddr_in *target = (struct sockaddr_in *)&config.target;
    if (config.source_count == 0 && sources_needed > 1 && config.target.ss_family == AF_INET &&
        (ntohl(target->sin_addr.s_addr) >> 24) == 127) {
        for (unsigned i = 0; i < sources_needed && i < SOURCES_MAX; i++) {
            struct sockaddr_in *source = (struct sockaddr_in *)&config.sources[i];
            *source = (struct sockaddr_in){.sin_family = AF_INET,
                                           .sin_addr.s_addr = htonl(0x7f000001 + i)};
        }
        config.source_count =
            (unsigned)(sources_needed < SOURCES_MAX ? sources_needed : SOURCES_MAX);
        config.source_len = sizeof(struct sockaddr_in);
    }
    if (config.source_count > 0 && config.source_count * PORTS_PER_SOURCE < config.connections) {
        fprintf(stderr,
                "sxe-http: warning: %u source address(es) give about %u ports; -c %llu "
                "may run out (add -s addresses)\n",
                config.source_count, config.source_count * PORTS_PER_SOURCE,
                (unsigned long long)config.connections);
    }
}

/*
 * The seconds of the run as the workers send them: second i is complete once every worker has
 * sent it or ended. Complete seconds go to the timeline and the latency log, in order.
 */
struct second {
    struct histogram latency;
    uint64_t queries;
    uint64_t errors;
    uint64_t ns;
};

static struct gather {
    struct second *pending; /* second flushed + i, added up so far */
    size_t pending_size;
    uint64_t flushed;           /* seconds complete and written */
    uint64_t next[WORKERS_MAX]; /* the next second each worker will send */
    bool ended[WORKERS_MAX];    /* the worker sent its results */
    struct timeline_entry *timeline;
    size_t seconds;
    FILE *log;
    uint64_t marks[2]; /* --warmup: when the measured window starts and ends */
    unsigned marked;   /* how many of them were told */
} gather;

/* Opens --latency-log's file before anything is started: a path that cannot be written is a
 * usage error. */
static void log_open(void)
{
    if (config.latency_log != NULL && (gather.log = fopen(config.latency_log, "w")) == NULL) {
        fprintf(stderr, "sxe-http: --latency-log %s: %s\n", config.latency_log, strerror(errno));
        exit(2);
    }
}

/* Writes the log's head at the barrier: its intervals' times count from now. */
static void log_start(void)
{
    if (gather.log == NULL) {
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double seconds = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
    char when[64];
    struct tm tm;
    strftime(when, sizeof(when), "%a %b %d %H:%M:%S UTC %Y", gmtime_r(&now.tv_sec, &tm));
    fprintf(gather.log,
            "#[Logged with sxe-http %s: latency in ns from when each request was %s]\n"
            "#[Histogram log format version 1.3]\n"
            "#[StartTime: %.3f (seconds since epoch), %s]\n"
            "#[BaseTime: %.3f (seconds since epoch)]\n"
            "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\","
            "\"Interval_Compressed_Histogram\"\n",
            SXE_VERSION, config.rate > 0 ? "due" : "sent", seconds, when, seconds);
}

/* Writes out every second that all workers have sent. */
static void flush_seconds(void)
{
    for (;;) {
        for (unsigned w = 0; w < config.workers; w++) {
            if (!gather.ended[w] && gather.next[w] <= gather.flushed) {
                return;
            }
        }
        if (gather.pending_size == 0) {
            return;
        }
        const struct second *second = &gather.pending[0];
        gather.timeline = realloc(gather.timeline, (gather.seconds + 1) * sizeof(*gather.timeline));
        if (gather.timeline == NULL) {
            fprintf(stderr, "sxe-http: out of memory for the timeline\n");
            exit(3);
        }
        gather.timeline[gather.seconds++] = (struct timeline_entry){
            .seconds = (double)second->ns / 1e9,
            .queries_per_s = second->ns ? (double)second->queries * 1e9 / (double)second->ns : 0,
            .errors = second->errors,
            .p99_ns = histogram_percentile(&second->latency, 99)};
        if (gather.log != NULL) {
            char *encoded = histogram_encode(&second->latency);
            fprintf(gather.log, "%.3f,%.3f,%.3f,%s\n", (double)gather.flushed,
                    (double)second->ns / 1e9, (double)second->latency.max / 1e6,
                    encoded ? encoded : "");
            free(encoded);
        }
        memmove(&gather.pending[0], &gather.pending[1],
                (gather.pending_size - 1) * sizeof(*gather.pending));
        memset(&gather.pending[gather.pending_size - 1], 0, sizeof(*gather.pending));
        gather.pending_size--;
        gather.flushed++;
    }
}

/* A second from worker w: added to its pending second. */
static bool take_interval(unsigned w, int fd, uint32_t len)
{
    static struct histogram_cell cells[HISTOGRAM_COUNTS];
    struct interval interval;

    if (len < sizeof(interval) || !read_all(fd, &interval, sizeof(interval)) ||
        interval.cell_count > HISTOGRAM_COUNTS ||
        len != sizeof(interval) + interval.cell_count * sizeof(*cells) ||
        !read_all(fd, cells, interval.cell_count * sizeof(*cells)) ||
        interval.index < gather.flushed) {
        return false;
    }
    size_t i = interval.index - gather.flushed;
    if (i >= gather.pending_size) {
        gather.pending = realloc(gather.pending, (i + 1) * sizeof(*gather.pending));
        if (gather.pending == NULL) {
            return false;
        }
        memset(&gather.pending[gather.pending_size], 0,
               (i + 1 - gather.pending_size) * sizeof(*gather.pending));
        gather.pending_size = i + 1;
    }
    struct second *second = &gather.pending[i];
    histogram_add_cells(&second->latency, cells, interval.cell_count);
    if (interval.max > second->latency.max) {
        second->latency.max = interval.max;
    }
    second->queries += interval.queries;
    second->errors += interval.errors;
    second->ns = interval.ns > second->ns ? interval.ns : second->ns;
    gather.next[w] = interval.index + 1;
    flush_seconds();
    return true;
}

/* Reads one message of worker w: false if the worker failed or broke the protocol. */
static bool take_message(unsigned w, int fd, enum message_kind *kind, struct results *results)
{
    struct message_head head;

    if (!read_all(fd, &head, sizeof(head))) {
        return false;
    }
    *kind = head.kind;
    if (head.kind == MESSAGE_INTERVAL) {
        return take_interval(w, fd, head.len);
    }
    return (head.kind == MESSAGE_CONNECTED || head.kind == MESSAGE_DONE) &&
           head.len == sizeof(*results) && read_all(fd, results, sizeof(*results));
}

/* Prints the progress line: queries so far and connections open. */
static void show_progress(const struct progress *progress, uint64_t start)
{
    uint64_t queries = 0, open = 0;

    for (unsigned i = 0; i < config.workers; i++) {
        queries += __atomic_load_n(&progress[i].queries, __ATOMIC_RELAXED);
        open += __atomic_load_n(&progress[i].open, __ATOMIC_RELAXED);
    }
    fprintf(stderr, "progress: %.0f s, %llu queries, %llu connections open\n",
            (double)(sxe_clock_mono_ns() - start) / 1e9, (unsigned long long)queries,
            (unsigned long long)open);
}

/*
 * --warmup: tells stderr when the measured window starts and ends, as the workers count it (each
 * from the go, within a scheduling delay of this clock), or, with all, whatever is left to tell.
 * @return ms until the next, or 1000.
 */
static int tell_marks(bool all)
{
    static const char *const said[] = {"sxe-http: measuring", "sxe-http: measured"};
    uint64_t now = sxe_clock_mono_ns();

    while (config.marks && gather.marked < 2 && (all || now >= gather.marks[gather.marked])) {
        fprintf(stderr, "%s\n", said[gather.marked++]);
        fflush(stderr);
    }
    if (!config.marks || gather.marked == 2) {
        return 1000;
    }
    uint64_t ms = (gather.marks[gather.marked] - now + SXE_NS_PER_MSEC - 1) / SXE_NS_PER_MSEC;
    return ms < 1000 ? (int)ms : 1000;
}

/* Gathers every worker's seconds and results, with a progress line each second on long runs. */
static void gather_results(const int *ups, const struct progress *progress, uint64_t start,
                           struct results *total)
{
    static struct results part;
    uint64_t last_progress = sxe_clock_mono_ns();

    for (unsigned reported = 0; reported < config.workers;) {
        struct pollfd polls[WORKERS_MAX];
        for (unsigned i = 0; i < config.workers; i++) {
            polls[i] = (struct pollfd){.fd = gather.ended[i] ? -1 : ups[i], .events = POLLIN};
        }
        int ready = poll(polls, config.workers, tell_marks(false));
        for (unsigned i = 0; ready > 0 && i < config.workers; i++) {
            enum message_kind kind;
            if (gather.ended[i] || !(polls[i].revents & (POLLIN | POLLHUP))) {
                continue;
            }
            if (!take_message(i, ups[i], &kind, &part)) {
                fprintf(stderr, "sxe-http: worker %u failed\n", i);
                exit(3);
            }
            if (kind == MESSAGE_DONE) {
                results_add(total, &part);
                gather.ended[i] = true;
                reported++;
                flush_seconds();
            }
        }
        if (sxe_clock_mono_ns() - last_progress >= SXE_NS_PER_SEC && reported < config.workers) {
            show_progress(progress, start);
            last_progress = sxe_clock_mono_ns();
        }
    }
    (void)tell_marks(true); /* the window's end, if the workers ended it before this clock did */
}

int main(int argc, char **argv)
{
    static struct results total, part;
    pid_t pids[WORKERS_MAX];
    int ups[WORKERS_MAX], downs[WORKERS_MAX];

    parse_options(argc, argv);
    plan();
    if (config.verbose && config.ws_path == NULL) {
        SXE_LOG_INFO("request, %zu bytes, sent %llu times per connection:", config.offsets[1],
                     (unsigned long long)config.queries);
        SXE_LOG_HEX(SXE_LOG_LEVEL_INFO, config.requests, config.offsets[1]);
    }
    signal(SIGPIPE, SIG_IGN);
    log_open();

    struct progress *progress = mmap(NULL, sizeof(struct progress) * WORKERS_MAX,
                                     PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (progress == MAP_FAILED) {
        perror("sxe-http: mmap");
        return 3;
    }
    uint64_t start = sxe_clock_mono_ns();
    uint64_t first = 0;
    fflush(NULL); /* nothing buffered is written twice by the children */
    for (unsigned i = 0; i < config.workers; i++) {
        int up[2], down[2];
        uint64_t count =
            config.connections / config.workers + (i < config.connections % config.workers ? 1 : 0);
        if (pipe2(up, O_CLOEXEC) < 0 || pipe2(down, O_CLOEXEC) < 0) {
            perror("sxe-http: pipe");
            return 3;
        }
        if ((pids[i] = fork()) == 0) {
            close(up[0]);
            close(down[1]);
            run_worker(i, first, count, up[1], down[0], &progress[i]);
        }
        close(up[1]);
        close(down[0]);
        ups[i] = up[0];
        downs[i] = down[1];
        first += count;
    }

    /* The barrier: every worker reports its connections up, then all are told to go. */
    for (unsigned i = 0; i < config.workers; i++) {
        enum message_kind kind;
        if (!take_message(i, ups[i], &kind, &part) || kind != MESSAGE_CONNECTED) {
            fprintf(stderr, "sxe-http: worker %u failed while connecting\n", i);
            return 3;
        }
    }
    log_start();
    /* Before the go: each worker's window starts no sooner than the mark says. */
    gather.marks[0] = sxe_clock_mono_ns() + config.warmup_ns;
    gather.marks[1] = gather.marks[0] + config.duration_ns;
    for (unsigned i = 0; i < config.workers; i++) {
        write_all(downs[i], "G", 1);
    }
    gather_results(ups, progress, start, &total);
    for (unsigned i = 0; i < config.workers; i++) {
        waitpid(pids[i], NULL, 0);
    }
    if (gather.log != NULL && fclose(gather.log) != 0) {
        fprintf(stderr, "sxe-http: --latency-log %s: %s\n", config.latency_log, strerror(errno));
        return 3;
    }
    report(&total, sxe_clock_mono_ns() - start, gather.timeline, gather.seconds);
    return results_errors(&total) > 0 || total.not_sent > 0 ? 1 : 0;
}
