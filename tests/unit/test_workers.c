/*
 * Workers (sxe/workers.h): each spread mode over real sockets, processes and threads, a worker
 * killed and restarted, a full worker passed over, the CPU steering, clean stops, and the faults
 * of starting (fork, pthread_create, socketpair, signalfd) through the system call seam. The
 * supervisor runs in a forked child (it blocks and reads signals); the test is the client and
 * reads the workers' counters from the set's shared memory.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sxe_test.h"
#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/loop.h"
#include "sxe/workers.h"
#include "sys.h"

struct behaviour {
    unsigned fail;    /* workers whose index is below this fail their start */
    long slow_ms;     /* every worker's start takes this long: connections pile up meanwhile */
    bool fill_first;  /* worker 0 fills its table before it listens */
    bool hang;        /* every worker's start waits for a signal that never comes: never stops */
    bool spare_first; /* with hang: worker 0 serves, and stops when told */
};

/* Every request ("?") is answered with the index of the worker that read it. */
static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    sxe_worker_t *worker = sxe_conn_user(conn);
    char reply[16];
    int n = snprintf(reply, sizeof(reply), "%u\n", sxe_worker_index(worker));

    (void)data;
    for (size_t i = 0; i < len; i++) {
        (void)sxe_conn_write(conn, reply, (size_t)n);
        sxe_worker_count(worker, 1, (uint64_t)n);
    }
    return len;
}

static const struct sxe_conn_handlers handlers = {.on_read = on_read};

static int start(sxe_worker_t *worker, void *arg)
{
    const struct behaviour *behaviour = arg;

    if (sxe_worker_index(worker) < behaviour->fail) {
        return -EIO;
    }
    if (behaviour->slow_ms > 0) {
        nanosleep(&(struct timespec){.tv_sec = behaviour->slow_ms / 1000,
                                     .tv_nsec = behaviour->slow_ms % 1000 * 1000000},
                  NULL);
    }
    while (behaviour->hang && !(behaviour->spare_first && sxe_worker_index(worker) == 0)) {
        pause();
    }
    if (behaviour->fill_first && sxe_worker_index(worker) == 0) {
        sxe_conn_t *a, *b;
        int pair[2];
        while (sxe_conn_pair(sxe_worker_loop(worker), &a, &b, 0, &handlers, worker) == 0) {
        }
        /* A slot may be left over: a connection of its own takes it (the other end stays open). */
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0 &&
            sxe_conn_adopt(sxe_worker_loop(worker), &a, pair[0], &handlers, worker) < 0) {
            close(pair[1]); /* there was no slot left */
        }
    }
    return sxe_worker_listen(worker, 0, &handlers, worker);
}

struct server {
    sxe_workers_t *set;
    pid_t pid;
    int port;
    struct behaviour behaviour;
    int log_fd; /* where the server's log goes, if not 0 (stderr) */
};

static void server_start(struct server *server, const struct sxe_workers_options *options)
{
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

    assert_int_equal(sxe_workers_create(&server->set, options), 0);
    assert_int_equal(
        sxe_workers_listen(server->set, (struct sockaddr *)&address, sizeof(address), NULL), 0);
    server->port = sxe_workers_port(server->set, 0);
    assert_true(server->port > 0);
    server->pid = fork();
    assert_true(server->pid >= 0);
    if (server->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no server behind */
        if (server->log_fd > 0) {
            dup2(server->log_fd, STDERR_FILENO);
        }
        int rc = sxe_workers_run(server->set, start, NULL, &server->behaviour);
        _exit(rc == 0 ? 0 : rc == -ECHILD ? 10 : 11);
    }
}

static void sleep_ms(long ms)
{
    nanosleep(&(struct timespec){.tv_nsec = ms * 1000000}, NULL);
}

/* Stops the server with SIGTERM, within 10 s (or fails, killing it). @return its exit status. */
static int server_stop(struct server *server)
{
    int status;
    pid_t reaped = 0;

    kill(server->pid, SIGTERM);
    for (int waited = 0; waited < 1000 && (reaped = waitpid(server->pid, &status, WNOHANG)) == 0;
         waited++) {
        sleep_ms(10);
    }
    if (reaped != server->pid) {
        kill(server->pid, SIGKILL);
        fail_msg("the server did not stop within 10 s of SIGTERM");
    }
    sxe_workers_destroy(server->set);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int client(int port)
{
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval timeout = {.tv_sec = 5};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof(address)), 0);
    return fd;
}

static int client6(int port)
{
    struct sockaddr_in6 address = {.sin6_family = AF_INET6,
                                   .sin6_port = htons((uint16_t)port),
                                   .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int fd = socket(AF_INET6, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof(address)), 0);
    return fd;
}

/* Asks which worker serves fd. @return its index, or -1 if none answers. */
static int ask(int fd)
{
    char reply[16] = {0};

    if (write(fd, "?", 1) != 1) {
        return -1;
    }
    ssize_t got = read(fd, reply, sizeof(reply) - 1);
    return got > 0 ? atoi(reply) : -1;
}

/* Waits up to 5 s for worker index's counters to satisfy done(stats, want). */
static bool wait_stats(sxe_workers_t *set, unsigned index,
                       bool (*done)(const struct sxe_worker_stats *stats, uint64_t want),
                       uint64_t want)
{
    struct sxe_worker_stats stats;

    for (int i = 0; i < 500; i++) {
        sxe_workers_stats(set, index, &stats);
        if (done(&stats, want)) {
            return true;
        }
        sleep_ms(10);
    }
    fprintf(stderr, "worker %u: open %u connections %llu table_full %llu, not %llu\n", index,
            stats.open, (unsigned long long)stats.connections, (unsigned long long)stats.table_full,
            (unsigned long long)want);
    return false;
}

static bool open_is(const struct sxe_worker_stats *stats, uint64_t want)
{
    return stats->open == want;
}

static bool restarted(const struct sxe_worker_stats *stats, uint64_t want)
{
    return stats->restarts == want;
}

static void test_reuseport_processes_spread_count_and_stop(void **state)
{
    struct server server = {0};
    int fds[64], served[2] = {0};

    (void)state;
    server_start(&server, &(struct sxe_workers_options){.count = 2});
    for (int i = 0; i < 64; i++) {
        fds[i] = client(server.port);
        int index = ask(fds[i]);
        assert_true(index == 0 || index == 1);
        served[index]++;
    }
    assert_true(served[0] > 0 && served[1] > 0); /* the kernel's hash uses both */
    assert_true(wait_stats(server.set, 0, open_is, (uint64_t)served[0]));
    assert_true(wait_stats(server.set, 1, open_is, (uint64_t)served[1]));
    for (unsigned w = 0; w < 2; w++) {
        struct sxe_worker_stats stats;
        sxe_workers_stats(server.set, w, &stats);
        assert_int_equal(stats.connections, served[w]);
        assert_int_equal(stats.requests, served[w]);
        assert_int_equal(stats.bytes, 2 * served[w]);
        assert_true(stats.pid > 0 && stats.pid != server.pid);
    }
    assert_int_equal(server_stop(&server), 0);
    for (int i = 0; i < 64; i++) {
        char byte;
        assert_int_equal(read(fds[i], &byte, 1), 0); /* closed by the stop, cleanly */
        close(fds[i]);
    }
}

/* Hand-off spreads held connections evenly (threads here), and the stop ends every thread. */
static void test_hand_off_threads_spread_evenly(void **state)
{
    struct server server = {0};
    int fds[40], served[2] = {0};

    (void)state;
    server_start(&server, &(struct sxe_workers_options){.count = 2,
                                                        .kind = SXE_WORKERS_THREADS,
                                                        .spread = SXE_SPREAD_HAND_OFF});
    for (int i = 0; i < 40; i++) {
        fds[i] = client(server.port);
        int index = ask(fds[i]);
        assert_true(index == 0 || index == 1);
        served[index]++;
    }
    assert_in_range(served[0], 18, 22); /* within 10% of even */
    assert_true(wait_stats(server.set, 0, open_is, (uint64_t)served[0]));
    assert_true(wait_stats(server.set, 1, open_is, (uint64_t)served[1]));
    for (int i = 0; i < 40; i++) {
        close(fds[i]);
    }
    assert_int_equal(server_stop(&server), 0);
}

/* A worker whose table is full is passed over: every connection goes to the other, none lost. */
static void test_hand_off_passes_over_a_full_worker(void **state)
{
    struct server server = {.behaviour = {.fill_first = true}};
    int fds[30];

    (void)state;
    server_start(&server, &(struct sxe_workers_options){.count = 2,
                                                        .spread = SXE_SPREAD_HAND_OFF,
                                                        .loop = {.connections = 64}});
    assert_true(wait_stats(server.set, 0, open_is, 63)); /* its table, less its channel */
    for (int i = 0; i < 30; i++) {
        fds[i] = client(server.port);
        assert_int_equal(ask(fds[i]), 1);
    }
    struct sxe_worker_stats stats;
    sxe_workers_stats(server.set, 0, &stats);
    assert_int_equal(stats.connections, 0); /* none was passed to it */
    assert_true(stats.table_full >= 1);     /* the fill's last tries */
    for (int i = 0; i < 30; i++) {
        close(fds[i]);
    }
    assert_int_equal(server_stop(&server), 0);
}

/*
 * A burst larger than the workers' channels hold (a few hundred passed fds each) while neither
 * worker reads them: the supervisor stops accepting until a channel has room, and the rest wait in
 * the kernel's backlog. None is dropped.
 */
static void test_hand_off_burst_waits_for_room(void **state)
{
    struct server server = {.behaviour = {.slow_ms = 500}};
    enum { BURST = 1500 };
    static int fds[BURST];

    (void)state;
    server_start(&server, &(struct sxe_workers_options){.count = 2,
                                                        .spread = SXE_SPREAD_HAND_OFF,
                                                        .loop = {.connections = 2000}});
    for (int i = 0; i < BURST; i++) {
        fds[i] = client(server.port);
    }
    for (int i = 0; i < BURST; i++) {
        int index = ask(fds[i]);
        assert_true(index == 0 || index == 1);
        close(fds[i]);
    }
    assert_int_equal(server_stop(&server), 0);
}

/* A worker process killed with -9: the other's connections live on; the set restarts it. */
static void test_killed_worker_is_restarted(void **state)
{
    struct server server = {0};
    int held[2] = {-1, -1};
    struct sxe_worker_stats before, after;

    (void)state;
    server_start(&server, &(struct sxe_workers_options){.count = 2});
    for (int i = 0; i < 64 && (held[0] < 0 || held[1] < 0); i++) {
        int fd = client(server.port);
        int index = ask(fd);
        assert_true(index == 0 || index == 1);
        if (held[index] < 0) {
            held[index] = fd;
        } else {
            close(fd);
        }
    }
    assert_true(held[0] >= 0 && held[1] >= 0);
    unsigned supervisor_fds = sxe_test_open_fds_of(server.pid);
    sxe_workers_stats(server.set, 0, &before);
    assert_int_equal(kill(before.pid, SIGKILL), 0);
    assert_int_equal(ask(held[1]), 1); /* worker 1 and its connection serve on */
    assert_int_equal(ask(held[0]), -1);
    assert_true(wait_stats(server.set, 0, restarted, 1));
    sxe_workers_stats(server.set, 0, &after);
    assert_true(after.pid > 0 && after.pid != before.pid);
    assert_true(after.connections >= before.connections); /* counts go on */
    bool zero_again = false;
    for (int i = 0; i < 64 && !zero_again; i++) {
        int fd = client(server.port);
        zero_again = ask(fd) == 0; /* its socket waited in the group: no connection lost */
        close(fd);
    }
    assert_true(zero_again);
    assert_int_equal(ask(held[1]), 1);
    /* The ended worker's channels were closed, the new one's made: the supervisor holds as many
     * descriptors as before. */
    assert_int_equal(sxe_test_open_fds_of(server.pid), supervisor_fds);
    close(held[0]);
    close(held[1]);
    assert_int_equal(server_stop(&server), 0);
}

/* CPU steering: a connection made on CPU c goes to worker c. */
static void test_cpu_steering(void **state)
{
    struct server server = {0};
    cpu_set_t old, one;

    (void)state;
    if (sxe_workers_cpus() < 2) {
        sxe_test_skip_or_fail_in_ci("fewer than 2 CPUs"); /* GCOVR_EXCL_LINE: CI has two */
    }
    server_start(&server,
                 &(struct sxe_workers_options){.count = 2, .spread = SXE_SPREAD_REUSEPORT_CPU});
    sched_getaffinity(0, sizeof(old), &old);
    for (int cpu = 0, tried = 0; cpu < CPU_SETSIZE && tried < 2; cpu++) {
        if (!CPU_ISSET(cpu, &old)) {
            continue;
        }
        tried++;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
        for (int i = 0; i < 16; i++) {
            int fd = client(server.port);
            assert_int_equal(ask(fd), cpu % 2); /* the program: the CPU modulo the count */
            close(fd);
        }
    }
    sched_setaffinity(0, sizeof(old), &old);
    assert_int_equal(server_stop(&server), 0);
}

/* Workers whose start fails end and are not restarted: with none left, run says -ECHILD. */
/*
 * A worker that does not stop (its start never returns) is killed once drain_ns and a second of
 * grace have passed since the stop, the kill is logged, and the run ends.
 */
/* kill() through the seam, saying so instead when it is asked to signal init or every process. */
static int kill_no_init(pid_t pid, int sig)
{
    if (pid <= 1) {
        dprintf(STDERR_FILENO, "asked to kill pid %d\n", (int)pid);
        return 0;
    }
    return kill(pid, sig);
}

/* Worker 0 stops when told and worker 1 never does: only worker 1 is killed, by its own pid. */
static void test_a_worker_that_does_not_stop_is_killed(void **state)
{
    char path[] = "/tmp/sxe-test-workers-log-XXXXXX";
    struct server server = {.behaviour = {.hang = true, .spare_first = true}};
    struct sxe_worker_stats stats;
    char log[4096] = "";

    (void)state;
    server.log_fd = mkstemp(path);
    assert_true(server.log_fd > 0);
    unlink(path);
    sxe__sys.kill = kill_no_init; /* the supervisor, forked, has this seam */
    server_start(&server,
                 &(struct sxe_workers_options){.count = 2, .drain_ns = 100 * SXE_NS_PER_MSEC});
    for (int i = 0; i < 500 && (sxe_workers_stats(server.set, 1, &stats), stats.pid == 0); i++) {
        sleep_ms(10);
    }
    assert_true(stats.pid > 0);
    uint64_t stop = sxe_clock_mono_ns();
    server_stop(&server);
    sxe__sys_reset();
    uint64_t took_ms = (sxe_clock_mono_ns() - stop) / SXE_NS_PER_MSEC;
    assert_true(took_ms >= 1000 && took_ms < 10000); /* 100 ms to drain and 1 s of grace */
    assert_int_equal(kill((pid_t)stats.pid, 0), -1); /* gone: killed and reaped */
    assert_true(pread(server.log_fd, log, sizeof(log) - 1, 0) > 0);
    assert_non_null(strstr(log, "worker 1 did not stop in time: killing it"));
    assert_null(strstr(log, "worker 0 did not stop")); /* it ended: nothing of it is signalled */
    assert_null(strstr(log, "asked to kill pid"));
    close(server.log_fd);
}

static int hangup_pipe[2];

/* The SIGHUP hook, in whichever process runs it: a byte down the pipe. */
static void mark_hangup(void *arg)
{
    assert_int_equal(write(hangup_pipe[1], arg, 1), 1);
}

/* The marks that came down the pipe within wait_ms. */
static int hangups_within(long wait_ms)
{
    char marks[16];
    int count = 0;

    for (long waited = 0; waited <= wait_ms; waited += 10, sleep_ms(10)) {
        ssize_t got = read(hangup_pipe[0], marks, sizeof(marks));
        count += got > 0 ? (int)got : 0;
    }
    return count;
}

/* SIGHUP to the supervisor: the hook runs in it and once in each worker process (threads: once,
 * in the supervisor's), and the set serves on until SIGTERM. */
static void test_sighup_reaches_every_process_and_stops_nothing(void **state)
{
    static const enum sxe_workers_kind kinds[] = {SXE_WORKERS_PROCESSES, SXE_WORKERS_THREADS};
    static char mark[] = "h";

    (void)state;
    for (unsigned k = 0; k < 2; k++) {
        struct server server = {0};
        struct sxe_workers_options options = {
            .count = 2, .kind = kinds[k], .on_hangup = mark_hangup, .hangup_arg = mark};
        assert_int_equal(pipe2(hangup_pipe, O_NONBLOCK), 0);
        server_start(&server, &options);
        int fd = client(server.port);
        assert_true(ask(fd) >= 0); /* up: its signals are read */
        for (int round = 0; round < 2; round++) {
            assert_int_equal(kill(server.pid, SIGHUP), 0);
            assert_int_equal(hangups_within(300), kinds[k] == SXE_WORKERS_PROCESSES ? 3 : 1);
            assert_true(ask(fd) >= 0);
        }
        close(fd);
        assert_int_equal(server_stop(&server), 0);
        close(hangup_pipe[0]);
        close(hangup_pipe[1]);
    }
}

static void test_failed_starts_end_the_set(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        struct server server = {.behaviour = {.fail = 2}};
        int status;
        server_start(&server, &(struct sxe_workers_options){.count = 2,
                                                            .kind = (enum sxe_workers_kind)kind});
        assert_int_equal(waitpid(server.pid, &status, 0), server.pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 10);
        sxe_workers_destroy(server.set);
    }
}

/*
 * The hand-off supervisor, forked with one failure armed in its seam: an interrupted accept4 or
 * poll (EINTR) is called again without a word; an accept4 failing otherwise, with an errno below
 * EINTR's (EPERM, a firewall's) or above it (EMFILE), is logged once and tried again on the next
 * turn. Each time the connection is served, and the set stops cleanly.
 */
static void test_hand_off_accept_and_poll_failures(void **state)
{
    static const struct {
        enum sxe__sys_call call;
        int err;
        const char *logged; /* NULL: no "accept failed" line */
    } faults[] = {
        {SXE_SYS_accept4, EINTR, NULL},
        {SXE_SYS_accept4, EPERM, "accept failed: Operation not permitted"},
        {SXE_SYS_accept4, EMFILE, "accept failed: Too many open files"},
        {SXE_SYS_poll, EINTR, NULL},
    };

    (void)state;
    for (unsigned i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
        char path[] = "/tmp/sxe-test-workers-log-XXXXXX";
        struct server server = {.log_fd = mkstemp(path)};
        static char log[1 << 20]; /* room for every line, tracing included */
        assert_true(server.log_fd > 0);
        unlink(path);
        memset(log, 0, sizeof(log));
        sxe__sys_fail(faults[i].call, 1, 1, faults[i].err);
        server_start(&server, &(struct sxe_workers_options){.count = 2,
                                                            .kind = SXE_WORKERS_THREADS,
                                                            .spread = SXE_SPREAD_HAND_OFF});
        sxe__sys_reset();
        int fd = client(server.port);
        int index = ask(fd);
        assert_true(pread(server.log_fd, log, sizeof(log) - 1, 0) >= 0); /* written before */
        bool said = strstr(log, "accept failed") != NULL;
        if (index < 0 || index > 1 || said != (faults[i].logged != NULL) ||
            (said && strstr(log, faults[i].logged) == NULL)) {
            fail_msg("errno %d: served by %d, log: %s", faults[i].err, index, log);
        }
        close(fd);
        assert_int_equal(server_stop(&server), 0);
        close(server.log_fd);
    }
}

/* Faults of starting, run in this process: the error comes back, and what started stops. */
static void test_start_faults(void **state)
{
    static const struct {
        enum sxe__sys_call call;
        unsigned nth;
        int err;
        enum sxe_workers_kind kind;
    } faults[] = {
        {SXE_SYS_fork, 1, EAGAIN, SXE_WORKERS_PROCESSES},
        {SXE_SYS_fork, 2, EAGAIN, SXE_WORKERS_PROCESSES}, /* the first runs, then stops */
        {SXE_SYS_pthread_create, 2, EAGAIN, SXE_WORKERS_THREADS},
        {SXE_SYS_socketpair, 1, EMFILE, SXE_WORKERS_PROCESSES},
        {SXE_SYS_socketpair, 1, EMFILE, SXE_WORKERS_THREADS},
        {SXE_SYS_signalfd, 1, ENOMEM, SXE_WORKERS_PROCESSES},
        {SXE_SYS_poll, 1, ENOMEM, SXE_WORKERS_PROCESSES}, /* the supervisor stops the workers */
        {SXE_SYS_poll, 1, ENOMEM, SXE_WORKERS_THREADS},
        {SXE_SYS_poll, 1, EPERM, SXE_WORKERS_THREADS}, /* below EINTR: not an interruption */
    };
    struct behaviour behaviour = {0};
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

    (void)state;
    for (unsigned i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
        unsigned fds = sxe_test_open_fds();
        sxe_workers_t *set;
        assert_int_equal(
            sxe_workers_create(&set,
                               &(struct sxe_workers_options){.count = 2, .kind = faults[i].kind}),
            0);
        assert_int_equal(
            sxe_workers_listen(set, (struct sockaddr *)&address, sizeof(address), NULL), 0);
        sxe__sys_fail(faults[i].call, faults[i].nth, 1, faults[i].err);
        assert_int_equal(sxe_workers_run(set, start, NULL, &behaviour), -faults[i].err);
        sxe__sys_reset();
        sxe_workers_destroy(set);
        assert_int_equal(sxe_test_open_fds(), fds); /* the set closed every channel it made */
    }
}

#ifdef SXE_DEBUG
static void create_too_many(void *arg)
{
    sxe_workers_t *set;

    (void)arg;
    (void)!sxe_workers_create(&set, &(struct sxe_workers_options){.count = 1000});
}

static void run_without_listener(void *arg)
{
    struct behaviour behaviour = {0};
    sxe_workers_t *set;

    (void)arg;
    (void)!sxe_workers_create(&set, NULL);
    (void)!sxe_workers_run(set, start, NULL, &behaviour);
}
#endif

/* Invalid use: a clear assertion in debug builds, -EINVAL in release. */
static void test_invalid_use(void **state)
{
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    sxe_workers_t *set;

    (void)state;
#ifdef SXE_DEBUG
    const char *const too_many[] = {"assertion failed: out != NULL && options->count", NULL};
    const char *const no_listener[] = {"assertion failed: set != NULL && start != NULL", NULL};
    sxe_test_expect_abort(create_too_many, NULL, too_many);
    sxe_test_expect_abort(run_without_listener, NULL, no_listener);
#else
    struct behaviour behaviour = {0};
    assert_int_equal(sxe_workers_create(&set, &(struct sxe_workers_options){.count = 1000}),
                     -EINVAL);
    assert_int_equal(sxe_workers_create(&set, NULL), 0);
    assert_int_equal(sxe_workers_run(set, start, NULL, &behaviour), -EINVAL); /* no listener */
    sxe_workers_destroy(set);
#endif
    assert_int_equal(sxe_workers_create(&set, NULL), 0);
    assert_int_equal(sxe_workers_count(set), sxe_workers_cpus());
    for (int i = 0; i < 8; i++) {
        assert_int_equal(
            sxe_workers_listen(set, (struct sockaddr *)&address, sizeof(address), NULL), i);
    }
    assert_int_equal(sxe_workers_listen(set, (struct sockaddr *)&address, sizeof(address), NULL),
                     -ENOBUFS);
    assert_int_equal(sxe_workers_port(set, 8), 0);
    sxe_workers_destroy(set);

    /* A port held without SO_REUSEPORT: the set's sockets cannot join it. */
    int holder = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t len = sizeof(address);
    assert_int_equal(bind(holder, (struct sockaddr *)&address, sizeof(address)), 0);
    assert_int_equal(listen(holder, 1), 0);
    getsockname(holder, (struct sockaddr *)&address, &len);
    assert_int_equal(sxe_workers_create(&set, &(struct sxe_workers_options){.count = 2}), 0);
    assert_int_equal(sxe_workers_listen(set, (struct sockaddr *)&address, sizeof(address), NULL),
                     -EADDRINUSE);
    sxe_workers_destroy(set);
    close(holder);
}

/*
 * Listening: IPv6 groups share the first socket's port; a failed getsockname or a kernel that
 * refuses the CPU steering program fails the listen, says why, and leaves no socket open.
 */
static void test_listen_ipv6_and_faults(void **state)
{
    struct sockaddr_in6 six = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    struct sockaddr_in four = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sxe_workers_options cpu = {.count = 2, .spread = SXE_SPREAD_REUSEPORT_CPU};
    struct sxe_test_capture capture;
    unsigned fds = sxe_test_open_fds();
    sxe_workers_t *set;

    (void)state;
    assert_int_equal(sxe_workers_create(&set, &(struct sxe_workers_options){.count = 2}), 0);
    assert_int_equal(sxe_workers_listen(set, (struct sockaddr *)&six, sizeof(six), NULL), 0);
    int port = sxe_workers_port(set, 0);
    assert_true(port > 0);
    int fd = client6(port);
    close(fd);
    sxe_workers_destroy(set);

    assert_int_equal(sxe_workers_create(&set, &(struct sxe_workers_options){.count = 2}), 0);
    sxe__sys_fail(SXE_SYS_getsockname, 1, 1, ENOBUFS);
    assert_int_equal(sxe_workers_listen(set, (struct sockaddr *)&four, sizeof(four), NULL),
                     -ENOBUFS);
    sxe__sys_reset();
    sxe_workers_destroy(set);

    /* The steering program is the last option set: count them on a listen that works. */
    assert_int_equal(sxe_workers_create(&set, &cpu), 0);
    sxe__sys_count(SXE_SYS_setsockopt);
    assert_int_equal(sxe_workers_listen(set, (struct sockaddr *)&four, sizeof(four), NULL), 0);
    unsigned last = sxe__sys_calls(SXE_SYS_setsockopt);
    sxe_workers_destroy(set);
    assert_int_equal(sxe_workers_create(&set, &cpu), 0);
    sxe_test_capture_start(&capture);
    sxe__sys_fail(SXE_SYS_setsockopt, last, 1, EPERM);
    assert_int_equal(sxe_workers_listen(set, (struct sockaddr *)&four, sizeof(four), NULL), -EPERM);
    sxe_test_capture_stop();
    sxe__sys_reset();
    assert_non_null(strstr(capture.text, "cannot steer connections by CPU"));
    assert_int_equal(sxe_workers_port(set, 0), 0);
    sxe_workers_destroy(set);
    /* The group's second socket cannot listen: that error, not the steering's success. */
    assert_int_equal(sxe_workers_create(&set, &cpu), 0);
    sxe__sys_fail(SXE_SYS_listen, 2, 1, EADDRINUSE);
    assert_int_equal(sxe_workers_listen(set, (struct sockaddr *)&four, sizeof(four), NULL),
                     -EADDRINUSE);
    sxe__sys_reset();
    assert_int_equal(sxe_workers_port(set, 0), 0);
    sxe_workers_destroy(set);
    assert_int_equal(sxe_test_open_fds(), fds);
}

/*
 * A worker thread whose loop cannot be made (no memory for its buffers) ends with the reason and
 * is not restarted: with every worker so, run says -ECHILD, and the supervisor's own calls are
 * unharmed (it maps nothing once running).
 */
static void test_a_worker_without_memory_for_its_loop_ends(void **state)
{
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sxe_test_capture capture;
    struct behaviour behaviour = {0};
    sxe_workers_t *set;

    (void)state;
    assert_int_equal(
        sxe_workers_create(&set,
                           &(struct sxe_workers_options){.count = 2, .kind = SXE_WORKERS_THREADS}),
        0);
    assert_int_equal(sxe_workers_listen(set, (struct sockaddr *)&address, sizeof(address), NULL),
                     0);
    sxe_test_capture_start(&capture);
    sxe__sys_fail(SXE_SYS_mmap, 1, 0, ENOMEM);
    assert_int_equal(sxe_workers_run(set, start, NULL, &behaviour), -ECHILD);
    sxe__sys_reset();
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "worker 0: cannot start: Cannot allocate memory"));
    assert_non_null(strstr(capture.text, "worker 1: cannot start: Cannot allocate memory"));
    sxe_workers_destroy(set);
}

/* close() through the seam, counting the descriptors closed twice (EBADF). */
static unsigned closed_twice;

static int close_counting_twice(int fd)
{
    int rc = close(fd);
    if (rc < 0 && errno == EBADF) {
        __atomic_fetch_add(&closed_twice, 1, __ATOMIC_RELAXED);
    }
    return rc;
}

/*
 * A worker whose table has room for one channel of three: the second's adoption fails (and closes
 * it), the third is never handed over and is closed by the worker. Each descriptor is closed once,
 * none is left open, and the worker ends with the reason.
 */
static void test_a_worker_without_room_for_its_channels_ends(void **state)
{
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sxe_test_capture capture;
    struct behaviour behaviour = {0};
    unsigned fds = sxe_test_open_fds();
    sxe_workers_t *set;

    (void)state;
    assert_int_equal(
        sxe_workers_create(&set, &(struct sxe_workers_options){.count = 1,
                                                               .kind = SXE_WORKERS_THREADS,
                                                               .loop = {.connections = 1}}),
        0);
    for (int l = 0; l < 3; l++) {
        assert_int_equal(
            sxe_workers_listen(set, (struct sockaddr *)&address, sizeof(address), NULL), l);
    }
    closed_twice = 0;
    sxe__sys.close = close_counting_twice;
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_workers_run(set, start, NULL, &behaviour), -ECHILD);
    sxe_test_capture_stop();
    sxe__sys_reset();
    assert_non_null(strstr(capture.text, "worker 0: cannot start: No buffer space available"));
    assert_int_equal(closed_twice, 0);
    sxe_workers_destroy(set);
    assert_int_equal(sxe_test_open_fds(), fds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reuseport_processes_spread_count_and_stop),
        cmocka_unit_test(test_hand_off_threads_spread_evenly),
        cmocka_unit_test(test_hand_off_passes_over_a_full_worker),
        cmocka_unit_test(test_hand_off_burst_waits_for_room),
        cmocka_unit_test(test_killed_worker_is_restarted),
        cmocka_unit_test(test_a_worker_that_does_not_stop_is_killed),
        cmocka_unit_test(test_cpu_steering),
        cmocka_unit_test(test_sighup_reaches_every_process_and_stops_nothing),
        cmocka_unit_test(test_failed_starts_end_the_set),
        cmocka_unit_test(test_hand_off_accept_and_poll_failures),
        cmocka_unit_test(test_start_faults),
        cmocka_unit_test(test_invalid_use),
        cmocka_unit_test(test_listen_ipv6_and_faults),
        cmocka_unit_test(test_a_worker_without_memory_for_its_loop_ends),
        cmocka_unit_test(test_a_worker_without_room_for_its_channels_ends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
