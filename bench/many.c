/*
 * The client side of bench/many: holds many idle keep-alive connections, or keeps a few of them
 * busy at a fixed rate and measures latency from each request's intended send time (so a stall
 * of the server is not hidden by the client waiting for it: no coordinated omission).
 *
 *   many hold -i IP -p PORT -c N -s SRC[,SRC...] -t SECONDS [-r CONNECTS_IN_FLIGHT]
 *       connects N (at most the process's file limit), prints {"connected": N, "seconds": S},
 *       holds them for SECONDS, then prints {"held": N, "lost": K}: K closed by the server.
 *   many pace -i IP -p PORT -c N -R RATE -t SECONDS -u PATH [-s SRC,...]
 *       sends RATE requests a second in turn over N connections for SECONDS, one outstanding per
 *       connection (a request due while one is out waits, and is measured from when it was due),
 *       and prints the latency percentiles as JSON.
 *   many fresh -i IP -p PORT -c MAX_IN_FLIGHT -R RATE -t SECONDS [-s SRC,...]
 *       opens a new connection for each of RATE requests a second (open loop: on schedule, however
 *       slow the answers), measures each from its intended start to the end of its response, and
 *       prints the percentiles as JSON, overall and per worker (by the response's X-Worker
 *       header, which bench/stall's server sends): where a stalled worker's delay lands.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

#define SOURCES_MAX 64
#define DUE_MAX     16 /* requests a connection may have waiting to be sent */

static struct {
    struct sockaddr_in server;
    struct in_addr sources[SOURCES_MAX];
    unsigned source_count;
    unsigned connections;
    double rate;
    double seconds;
    const char *path;
    unsigned in_flight; /* connects under way at once */
} config = {.path = "/", .seconds = 10, .in_flight = 1000};

static unsigned retries; /* connects tried again */

struct conn {
    int fd;
    bool connected;
    bool busy;             /* a request is out */
    uint64_t due[DUE_MAX]; /* intended send times of requests waiting, oldest first */
    unsigned due_count;
    uint64_t sent_due; /* the intended time of the request out */
    char in[1024];
    size_t in_len;
};

static uint64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "many: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Starts a non-blocking connect from source number i. */
static int start_connect(unsigned i)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;

    if (fd < 0) {
        die("socket");
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (config.source_count > 0) {
        struct sockaddr_in source = {.sin_family = AF_INET,
                                     .sin_addr = config.sources[i % config.source_count]};
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&source, sizeof(source)) < 0) {
            die("bind");
        }
    }
    if (connect(fd, (struct sockaddr *)&config.server, sizeof(config.server)) < 0 &&
        errno != EINPROGRESS) {
        die("connect");
    }
    return fd;
}

/* Connects every connection, at most 1,000 in flight. @return the seconds it took. */
static double connect_all(int epoll, struct conn *conns)
{
    uint64_t start = now_ns();
    unsigned started = 0, done = 0, in_flight = 0;
    struct epoll_event events[1024];

    while (done < config.connections) {
        while (started < config.connections && in_flight < config.in_flight) {
            conns[started].fd = start_connect(started);
            struct epoll_event event = {.events = EPOLLOUT, .data.u32 = started};
            epoll_ctl(epoll, EPOLL_CTL_ADD, conns[started].fd, &event);
            started++;
            in_flight++;
        }
        int n = epoll_wait(epoll, events, 1024, 10000);
        if (n <= 0) {
            die("connect timed out");
        }
        for (int e = 0; e < n; e++) {
            struct conn *conn = &conns[events[e].data.u32];
            int err = 0;
            socklen_t len = sizeof(err);
            getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err != 0) { /* a SYN lost to a full backlog: try again, and count it */
                if (++retries > config.connections) {
                    errno = err;
                    die("connect");
                }
                epoll_ctl(epoll, EPOLL_CTL_DEL, conn->fd, NULL);
                close(conn->fd);
                conn->fd = start_connect(events[e].data.u32);
                struct epoll_event again = {.events = EPOLLOUT, .data.u32 = events[e].data.u32};
                epoll_ctl(epoll, EPOLL_CTL_ADD, conn->fd, &again);
                continue;
            }
            conn->connected = true;
            struct epoll_event event = {.events = EPOLLIN, .data.u32 = events[e].data.u32};
            epoll_ctl(epoll, EPOLL_CTL_MOD, conn->fd, &event);
            done++;
            in_flight--;
        }
    }
    return (double)(now_ns() - start) / 1e9;
}

static int hold(int epoll, struct conn *conns)
{
    struct epoll_event events[1024];
    unsigned lost = 0;
    char scratch[4096];

    double seconds = connect_all(epoll, conns);
    printf("{\"connected\": %u, \"seconds\": %.3f, \"retries\": %u}\n", config.connections, seconds,
           retries);
    fflush(stdout);
    uint64_t end = now_ns() + (uint64_t)(config.seconds * 1e9);
    for (uint64_t now; (now = now_ns()) < end;) {
        int n = epoll_wait(epoll, events, 1024, (int)((end - now) / 1000000 + 1));
        for (int e = 0; e < n; e++) {
            struct conn *conn = &conns[events[e].data.u32];
            if (recv(conn->fd, scratch, sizeof(scratch), 0) <= 0) {
                epoll_ctl(epoll, EPOLL_CTL_DEL, conn->fd, NULL);
                lost++;
            }
        }
    }
    printf("{\"held\": %u, \"lost\": %u}\n", config.connections - lost, lost);
    return lost == 0 ? 0 : 1;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void send_request(struct conn *conn, uint64_t due, const char *request, size_t len)
{
    conn->busy = true;
    conn->sent_due = due;
    if (send(conn->fd, request, len, MSG_NOSIGNAL) != (ssize_t)len) {
        die("send");
    }
}

/* Takes whole responses off conn's input. @return how many, with their latencies stored. */
static unsigned take_responses(struct conn *conn, uint64_t now, uint64_t *latencies, size_t *count,
                               size_t capacity, unsigned *errors)
{
    unsigned taken = 0;

    for (;;) {
        char *end = memmem(conn->in, conn->in_len, "\r\n\r\n", 4);
        if (end == NULL) {
            return taken;
        }
        size_t head = (size_t)(end - conn->in) + 4;
        char *length = memmem(conn->in, head, "Content-Length: ", 16);
        size_t total = head + (length ? strtoul(length + 16, NULL, 10) : 0);
        if (conn->in_len < total) {
            return taken;
        }
        if (memcmp(conn->in, "HTTP/1.1 200", 12) != 0) {
            (*errors)++;
        }
        if (*count < capacity) {
            latencies[(*count)++] = now - conn->sent_due;
        }
        memmove(conn->in, conn->in + total, conn->in_len - total);
        conn->in_len -= total;
        conn->busy = false;
        taken++;
    }
}

static int pace(int epoll, struct conn *conns)
{
    char request[512];
    size_t request_len = (size_t)snprintf(request, sizeof(request),
                                          "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", config.path);
    size_t capacity = (size_t)(config.rate * config.seconds * 1.1) + 1024;
    uint64_t *latencies = malloc(capacity * sizeof(*latencies));
    size_t count = 0;
    unsigned errors = 0, overflow = 0;
    struct epoll_event events[1024];

    connect_all(epoll, conns);
    uint64_t start = now_ns(), end = start + (uint64_t)(config.seconds * 1e9);
    double interval = 1e9 / config.rate;
    uint64_t next = 0; /* the next request's number */
    uint64_t now;
    while ((now = now_ns()) < end || count + overflow < next) {
        for (uint64_t due; (due = start + (uint64_t)((double)next * interval)) <= now && due < end;
             next++) {
            struct conn *conn = &conns[next % config.connections];
            if (!conn->busy) {
                send_request(conn, due, request, request_len);
            } else if (conn->due_count < DUE_MAX) {
                conn->due[conn->due_count++] = due;
            } else {
                overflow++;
            }
        }
        uint64_t due = start + (uint64_t)((double)next * interval);
        struct timespec timeout = {0, due > now ? (long)(due - now) : 0};
        if (now >= end) {
            timeout.tv_nsec = 100000000; /* draining the last responses */
        }
        int n = epoll_pwait2(epoll, events, 1024, &timeout, NULL);
        now = now_ns();
        if (n == 0 && now > end + 5000000000u) {
            break; /* responses that never came */
        }
        for (int e = 0; e < n; e++) {
            struct conn *conn = &conns[events[e].data.u32];
            ssize_t got =
                recv(conn->fd, conn->in + conn->in_len, sizeof(conn->in) - conn->in_len, 0);
            if (got <= 0) {
                die("recv (the server closed a connection)");
            }
            conn->in_len += (size_t)got;
            if (take_responses(conn, now, latencies, &count, capacity, &errors) > 0 &&
                conn->due_count > 0) {
                send_request(conn, conn->due[0], request, request_len);
                memmove(conn->due, conn->due + 1, --conn->due_count * sizeof(conn->due[0]));
            }
        }
    }
    qsort(latencies, count, sizeof(*latencies), compare_u64);
#define PCT(p) (count ? (double)latencies[(size_t)((double)(count - 1) * (p))] / 1000.0 : 0.0)
    printf("{\"connections\": %u, \"rate\": %.0f, \"seconds\": %.1f, \"requests\": %llu, "
           "\"responses\": %zu, \"achieved_rate\": %.1f, \"errors\": %u, \"overflow\": %u, "
           "\"p50_us\": %.1f, \"p99_us\": %.1f, \"p999_us\": %.1f, \"max_us\": %.1f}\n",
           config.connections, config.rate, config.seconds, (unsigned long long)next, count,
           (double)count / config.seconds, errors, overflow, PCT(0.5), PCT(0.99), PCT(0.999),
           PCT(1.0));
    return errors == 0 && overflow == 0 && count == next ? 0 : 1;
}

#define WORKERS_MAX 8

struct sample_set {
    uint64_t *latencies;
    size_t count;
};

static void print_percentiles(const char *name, struct sample_set *set)
{
    uint64_t *l = set->latencies;
    size_t n = set->count;

    qsort(l, n, sizeof(*l), compare_u64);
#define AT(p) (n ? (double)l[(size_t)((double)(n - 1) * (p))] / 1000.0 : 0.0)
    printf("%s{\"responses\": %zu, \"p50_us\": %.1f, \"p99_us\": %.1f, \"p999_us\": %.1f, "
           "\"max_us\": %.1f}",
           name, n, AT(0.5), AT(0.99), AT(0.999), AT(1.0));
#undef AT
}

/* A finished response in slot: its latency, by the worker named in its X-Worker header. */
static bool fresh_response(struct conn *slot, uint64_t now, struct sample_set *all,
                           struct sample_set *workers, size_t capacity)
{
    char *end = memmem(slot->in, slot->in_len, "\r\n\r\n", 4);
    if (end == NULL) {
        return false;
    }
    size_t head = (size_t)(end - slot->in) + 4;
    char *length = memmem(slot->in, head, "Content-Length: ", 16);
    if (slot->in_len < head + (length ? strtoul(length + 16, NULL, 10) : 0)) {
        return false;
    }
    char *worker = memmem(slot->in, head, "X-Worker: ", 10);
    unsigned index = worker ? (unsigned)strtoul(worker + 10, NULL, 10) : WORKERS_MAX;
    if (all->count < capacity) {
        all->latencies[all->count++] = now - slot->sent_due;
    }
    if (index < WORKERS_MAX && workers[index].count < capacity) {
        workers[index].latencies[workers[index].count++] = now - slot->sent_due;
    }
    return true;
}

/* One connection per request, on schedule; conns holds the ones under way (config.connections). */
static int fresh(int epoll, struct conn *conns)
{
    static const char request[] = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    size_t capacity = (size_t)(config.rate * config.seconds * 1.1) + 1024;
    struct sample_set all = {malloc(capacity * sizeof(uint64_t)), 0}, workers[WORKERS_MAX];
    unsigned *idle = malloc(config.connections * sizeof(*idle)), idle_count = 0;
    unsigned errors = 0, overflow = 0, slow = 0;
    struct epoll_event events[1024];

    for (unsigned w = 0; w < WORKERS_MAX; w++) {
        workers[w] = (struct sample_set){malloc(capacity * sizeof(uint64_t)), 0};
    }
    while (idle_count < config.connections) {
        idle[idle_count] = config.connections - 1 - idle_count;
        idle_count++;
    }
    uint64_t start = now_ns(), end = start + (uint64_t)(config.seconds * 1e9), next = 0, now;
    double interval = 1e9 / config.rate;
    while ((now = now_ns()) < end || idle_count < config.connections) {
        for (uint64_t due; (due = start + (uint64_t)((double)next * interval)) <= now && due < end;
             next++) {
            if (idle_count == 0) {
                overflow++;
                continue;
            }
            unsigned i = idle[--idle_count];
            conns[i] = (struct conn){.fd = start_connect((unsigned)next), .sent_due = due};
            struct epoll_event event = {.events = EPOLLOUT, .data.u32 = i};
            epoll_ctl(epoll, EPOLL_CTL_ADD, conns[i].fd, &event);
        }
        uint64_t due = start + (uint64_t)((double)next * interval);
        struct timespec timeout = {0, due > now ? (long)(due - now) : 0};
        if (now >= end) {
            timeout.tv_nsec = 100000000; /* the last responses */
        }
        int n = epoll_pwait2(epoll, events, 1024, &timeout, NULL);
        now = now_ns();
        if (n == 0 && now > end + 5000000000u) {
            break; /* responses that never came */
        }
        for (int e = 0; e < n; e++) {
            unsigned i = events[e].data.u32;
            struct conn *slot = &conns[i];
            bool done = false;
            if (!slot->busy) { /* the connect finished: send the request, wait for the answer */
                int err = 0;
                socklen_t len = sizeof(err);
                getsockopt(slot->fd, SOL_SOCKET, SO_ERROR, &err, &len);
                done = err != 0 || send(slot->fd, request, sizeof(request) - 1, MSG_NOSIGNAL) !=
                                       (ssize_t)sizeof(request) - 1;
                errors += done;
                slot->busy = true;
                struct epoll_event event = {.events = EPOLLIN, .data.u32 = i};
                epoll_ctl(epoll, EPOLL_CTL_MOD, slot->fd, &event);
            } else {
                ssize_t got =
                    recv(slot->fd, slot->in + slot->in_len, sizeof(slot->in) - slot->in_len, 0);
                slot->in_len += got > 0 ? (size_t)got : 0;
                done = got <= 0 || fresh_response(slot, now, &all, workers, capacity);
                errors += got <= 0;
                slow += got > 0 && done && now - slot->sent_due > 10000000u;
            }
            if (done) {
                close(slot->fd); /* also takes it out of the epoll set */
                idle[idle_count++] = i;
            }
        }
    }
    printf("{\"rate\": %.0f, \"seconds\": %.1f, \"requests\": %llu, \"errors\": %u, "
           "\"overflow\": %u, \"over_10ms\": %u, ",
           config.rate, config.seconds, (unsigned long long)next, errors, overflow, slow);
    print_percentiles("\"all\": ", &all);
    printf(", \"workers\": [");
    for (unsigned w = 0; w < WORKERS_MAX && workers[w].count > 0; w++) {
        print_percentiles(w ? ", " : "", &workers[w]);
    }
    printf("]}\n");
    return errors == 0 && overflow == 0 && all.count == next ? 0 : 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: many hold|pace|fresh -i IP -p PORT -c N [-s SRC,...] [-t SECONDS] "
                    "[-R RATE] [-u PATH]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int option;

    if (argc < 2 || (strcmp(argv[1], "hold") != 0 && strcmp(argv[1], "pace") != 0 &&
                     strcmp(argv[1], "fresh") != 0)) {
        usage();
    }
    bool holding = strcmp(argv[1], "hold") == 0;
    config.server.sin_family = AF_INET;
    optind = 2;
    while ((option = getopt(argc, argv, "i:p:c:s:t:R:u:r:")) != -1) {
        switch (option) {
        case 'i':
            if (inet_pton(AF_INET, optarg, &config.server.sin_addr) != 1) {
                usage();
            }
            break;
        case 'p':
            config.server.sin_port = htons((uint16_t)atoi(optarg));
            break;
        case 'c':
            config.connections = (unsigned)atoi(optarg);
            break;
        case 's':
            for (char *source = strtok(optarg, ","); source && config.source_count < SOURCES_MAX;
                 source = strtok(NULL, ",")) {
                if (inet_pton(AF_INET, source, &config.sources[config.source_count++]) != 1) {
                    usage();
                }
            }
            break;
        case 't':
            config.seconds = atof(optarg);
            break;
        case 'R':
            config.rate = atof(optarg);
            break;
        case 'u':
            config.path = optarg;
            break;
        case 'r':
            config.in_flight = (unsigned)atoi(optarg) ? (unsigned)atoi(optarg) : 1;
            break;
        default:
            usage();
        }
    }
    if (config.connections == 0 || config.server.sin_port == 0 || (!holding && config.rate <= 0)) {
        usage();
    }
    struct conn *conns = calloc(config.connections, sizeof(*conns));
    int epoll = epoll_create1(EPOLL_CLOEXEC);
    if (conns == NULL || epoll < 0) {
        die("start");
    }
    if (strcmp(argv[1], "fresh") == 0) {
        return fresh(epoll, conns);
    }
    return holding ? hold(epoll, conns) : pace(epoll, conns);
}
