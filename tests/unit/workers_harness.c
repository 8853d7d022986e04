/*
 * The workers' tests' harness: workers_harness.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sxe_test.h"
#include "sxe/conn.h"
#include "sxe/loop.h"
#include "workers_harness.h"

void sleep_ms(long ms)
{
    nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000}, NULL);
}

/* Every request ("?") is answered with the index of the worker that read it; "s" first stalls the
 * worker's loop for STALL_MS. */
static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    sxe_worker_t *worker = sxe_conn_user(conn);
    char reply[16];
    /* (a loop's callback knows its worker without being told: 999 would fail every test) */
    int n = snprintf(reply, sizeof(reply), "%u\n",
                     sxe_worker_current() == worker ? sxe_worker_index(worker) : 999u);

    for (size_t i = 0; i < len; i++) {
        if (data[i] == 's') {
            sleep_ms(STALL_MS);
        }
        (void)sxe_conn_write(conn, reply, (size_t)n);
        sxe_worker_count(worker, 1, (uint64_t)n);
    }
    return len;
}

static const struct sxe_conn_handlers handlers = {.on_read = on_read};

int start_worker(sxe_worker_t *worker, void *arg)
{
    const struct behaviour *behaviour = arg;

    if (sxe_worker_current() != worker) {
        return -EFAULT; /* the start runs as its worker */
    }
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

void server_start(struct server *server, const struct sxe_workers_options *options)
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
        int rc = sxe_workers_run(server->set, start_worker, NULL, &server->behaviour);
        sxe_test_exit(rc == 0 ? 0 : rc == -ECHILD ? 10 : 11);
    }
}

int server_wait(struct server *server)
{
    int status = 0;
    pid_t reaped = 0;

    for (int waited = 0; waited < 1000 && (reaped = waitpid(server->pid, &status, WNOHANG)) == 0;
         waited++) {
        sleep_ms(10);
    }
    if (reaped != server->pid) {
        kill(server->pid, SIGKILL);
        fail_msg("the server did not stop within 10 s");
    }
    sxe_workers_destroy(server->set);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int server_stop(struct server *server)
{
    kill(server->pid, SIGTERM);
    return server_wait(server);
}

int client(int port)
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

int client6(int port)
{
    struct sockaddr_in6 address = {.sin6_family = AF_INET6,
                                   .sin6_port = htons((uint16_t)port),
                                   .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int fd = socket(AF_INET6, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof(address)), 0);
    return fd;
}

int ask(int fd)
{
    char reply[16] = {0};

    if (write(fd, "?", 1) != 1) {
        return -1;
    }
    ssize_t got = read(fd, reply, sizeof(reply) - 1);
    return got > 0 ? atoi(reply) : -1;
}

bool wait_stats(sxe_workers_t *set, unsigned index,
                bool (*done)(const struct sxe_worker_stats *stats, uint64_t want), uint64_t want)
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

bool open_is(const struct sxe_worker_stats *stats, uint64_t want)
{
    return stats->open == want;
}

bool restarted(const struct sxe_worker_stats *stats, uint64_t want)
{
    return stats->restarts == want;
}
