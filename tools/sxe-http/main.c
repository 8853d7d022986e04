/*
 * sxe-http: an HTTP/1.1 load generator.
 *
 *     sxe-http -i IP -p PORT -n QUERIES_PER_CONNECTION -c CONNECTIONS [options]
 *
 * Worker processes (one per CPU's worth of file descriptors: the per-process limit decides) each
 * open their share of the connections in batches, then wait at a barrier until every connection of
 * every worker is up. Then each connection sends its queries one after another over keep-alive
 * (or PIPELINE deep), checking every response's status and framing. The parent gathers and
 * reports connect, query and run times and rates, latency percentiles, and errors by kind.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sxe/sxe.h>

#include "histogram.h"
#include "response.h"

#define PIPELINE_MAX     128
#define SOURCES_MAX      64
#define WORKERS_MAX      64
#define SLOW_CONNECT_NS  SXE_NS_PER_SEC
#define FDS_RESERVED     32 /* per process: stdio, epoll, pipes, reserve fd */
#define PORTS_PER_SOURCE 28000

enum error_kind {
    ERR_CONNECT,
    ERR_READ,
    ERR_WRITE,
    ERR_TIMEOUT,
    ERR_STATUS,
    ERR_LENGTH,
    ERR_KINDS
};
static const char *const error_names[] = {"connect", "read",       "write",
                                          "timeout", "bad status", "bad length"};
static const char *const error_keys[] = {"connect", "read",       "write",
                                         "timeout", "bad_status", "bad_length"};

/* What a worker reports: once after connecting, once at the end. */
struct results {
    uint64_t connected;
    uint64_t slow_connects;
    uint64_t connect_ns; /* from the first connect to the last one settled */
    uint64_t queries;    /* responses received and checked */
    uint64_t not_sent;   /* queries never sent: their connection ended first */
    uint64_t query_ns;   /* from the barrier to the last response */
    uint64_t errors[ERR_KINDS];
    int first_connect_errno;
    struct histogram latency;
};

/* Live counters a worker shares with the parent, for the progress line. */
struct progress {
    uint64_t queries;
    uint64_t open;
};

static struct config {
    struct sockaddr_storage target;
    socklen_t target_len;
    char target_text[64];
    struct sockaddr_storage sources[SOURCES_MAX];
    socklen_t source_len;
    unsigned source_count;
    uint64_t queries; /* per connection (0 in duration mode) */
    uint64_t connections;
    unsigned pipeline;
    unsigned workers;
    uint64_t duration_ns; /* 0: count mode */
    uint64_t timeout_ns;
    unsigned ramp_batch;
    int expect_status;
    bool verbose;
    bool json;
    bool graceful_close;
    bool head;
    char *request;
    size_t request_len;
    const char *ws_path; /* WebSocket mode: each connection a WebSocket to it (NULL: HTTP) */
    size_t ws_size;      /* each query a binary message of so many bytes, echoed */
} config = {.queries = 1,
            .connections = 1,
            .pipeline = 1,
            .timeout_ns = 10 * SXE_NS_PER_SEC,
            .ramp_batch = 1000,
            .expect_status = 200,
            .ws_size = 20};

/* One connection of a worker. */
struct client {
    sxe_conn_t *conn;
    sxe_ws_t *ws; /* in WebSocket mode */
    uint64_t sent;
    uint64_t done;
    uint64_t connect_start;
    uint64_t sent_at[PIPELINE_MAX]; /* ring: when each query in flight was sent */
    unsigned oldest;
    bool connected;
    bool finished;
    bool timed_out;
    struct response_reader reader;
};

static struct worker {
    unsigned index;
    uint64_t first; /* global index of its first connection */
    uint64_t count;
    struct client *clients;
    sxe_loop_t *loop;
    uint64_t settled; /* connections connected or failed */
    uint64_t ended;   /* connections finished or closed */
    uint64_t start_ns;
    uint64_t last_settled_ns;
    uint64_t last_response_ns;
    bool sending;      /* past the barrier */
    bool stop_sending; /* duration over */
    char *burst;       /* config.pipeline copies of the request */
    struct progress *progress;
    struct results results;
    sxe_ws_server_t *ws_set; /* in WebSocket mode */
} worker;

static bool client_wants_more(const struct client *client)
{
    return !worker.stop_sending && (config.duration_ns != 0 || client->sent < config.queries);
}

static void send_queries(struct client *client, unsigned count)
{
    if (count == 0) {
        return;
    }
    for (unsigned i = 0; config.ws_path != NULL && i < count; i++) {
        if (sxe_ws_send(client->ws, SXE_WS_BINARY, worker.burst, config.ws_size) < 0) {
            return; /* a slow reader's socket closes; on_close counts it */
        }
    }
    if (config.ws_path == NULL &&
        sxe_conn_write(client->conn, worker.burst, count * config.request_len) < 0) {
        return; /* a failed write closes the connection; on_close counts it */
    }
    uint64_t now = sxe_loop_now(worker.loop);
    for (unsigned i = 0; i < count; i++) {
        client->sent_at[(client->oldest + client->sent - client->done + i) % PIPELINE_MAX] = now;
    }
    client->sent += count;
}

static void finish(struct client *client)
{
    if (!client->finished) {
        client->finished = true;
        worker.ended++;
    }
}

/*
 * Closes a connection whose work is done. By default with a reset (SO_LINGER 0): a normal close
 * would leave each of our ports in TIME_WAIT for a minute, and a run of 100,000 connections,
 * repeated, would find no free port. -g closes with a FIN instead.
 */
static void close_done(struct client *client)
{
    if (!config.graceful_close) {
        struct linger linger = {.l_onoff = 1, .l_linger = 0};
        setsockopt(sxe_conn_fd(client->conn), SOL_SOCKET, SO_LINGER, &linger, sizeof(linger));
    }
    sxe_conn_close(client->conn);
}

static void connected(struct client *client)
{
    uint64_t took = sxe_loop_now(worker.loop) - client->connect_start;

    client->connected = true;
    worker.results.connected++;
    worker.settled++;
    worker.last_settled_ns = sxe_loop_now(worker.loop);
    worker.progress->open++;
    if (took > SLOW_CONNECT_NS) {
        worker.results.slow_connects++;
    }
}

static void on_connect(sxe_conn_t *conn)
{
    connected(sxe_conn_user(conn));
}

/* A query answered: timed and counted, and the next sent. @return false if the client is done. */
static bool answered(struct client *client)
{
    uint64_t now = sxe_loop_now(worker.loop);
    histogram_add(&worker.results.latency, now - client->sent_at[client->oldest]);
    client->oldest = (client->oldest + 1) % PIPELINE_MAX;
    client->done++;
    worker.results.queries++;
    worker.last_response_ns = now;
    __atomic_store_n(&worker.progress->queries, worker.results.queries, __ATOMIC_RELAXED);
    if (client_wants_more(client)) {
        send_queries(client, 1);
        return true;
    }
    if (client->done == client->sent) {
        finish(client);
        close_done(client);
        return false;
    }
    return true;
}

static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    struct client *client = sxe_conn_user(conn);
    size_t used = 0;

    while (used < len) {
        size_t consumed = 0;
        enum response_result result =
            response_read(&client->reader, data + used, len - used, &consumed);
        used += consumed;
        if (result == RESPONSE_MORE) {
            break;
        }
        if (result == RESPONSE_BAD_LENGTH || client->done == client->sent) {
            worker.results.errors[ERR_LENGTH]++; /* broken framing, or a response to nothing */
            sxe_conn_close(conn);
            return len;
        }
        if (client->reader.status != config.expect_status) {
            worker.results.errors[ERR_STATUS]++;
        }
        response_reader_init(&client->reader, config.head);
        if (!answered(client)) {
            return len;
        }
    }
    return used;
}

static void closed(struct client *client, enum sxe_close_reason reason, int err)
{
    client->conn = NULL;
    if (!client->connected) {
        worker.results.errors[ERR_CONNECT]++;
        if (worker.results.first_connect_errno == 0) {
            worker.results.first_connect_errno = reason == SXE_CLOSE_TIMEOUT ? ETIMEDOUT : err;
        }
        worker.settled++;
        worker.last_settled_ns = sxe_loop_now(worker.loop);
        finish(client);
        return;
    }
    worker.progress->open--;
    if (client->finished) {
        return;
    }
    /* Closed before its queries were done: say why, and count what was never sent. */
    if (client->timed_out) {
        worker.results.errors[ERR_TIMEOUT]++;
    } else if (reason == SXE_CLOSE_ERROR && err == EPIPE) {
        worker.results.errors[ERR_WRITE]++;
    } else if (reason == SXE_CLOSE_PEER && client->reader.state != 0) {
        worker.results.errors[ERR_LENGTH]++; /* the server closed in the middle of a response */
    } else if (reason != SXE_CLOSE_LOCAL) {
        worker.results.errors[ERR_READ]++;
    }
    if (config.duration_ns == 0 && config.queries > client->sent) {
        worker.results.not_sent += config.queries - client->sent;
    }
    finish(client);
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    closed(sxe_conn_user(conn), reason, err);
}

static const struct sxe_conn_handlers handlers = {
    .on_connect = on_connect, .on_read = on_read, .on_close = on_close};

/* WebSocket mode: the socket opened (the connect is settled), an echo came, the socket closed. */
static void ws_open(sxe_ws_t *ws)
{
    connected(sxe_ws_user(ws));
}

static void ws_message(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
{
    struct client *client = sxe_ws_user(ws);

    (void)data;
    if (type != SXE_WS_BINARY || len != config.ws_size || client->done == client->sent) {
        worker.results.errors[ERR_LENGTH]++; /* not our echo, or an echo of nothing */
        sxe_conn_close(client->conn);
        return;
    }
    (void)answered(client);
}

static void ws_close(sxe_ws_t *ws, int code, const char *reason, size_t reason_len)
{
    struct client *client = sxe_ws_user(ws);

    (void)reason;
    (void)reason_len;
    if (client->connected && client->finished) {
        client->conn = NULL;
        return;
    }
    if (!client->connected && worker.results.first_connect_errno == 0) {
        worker.results.first_connect_errno = code == SXE_WS_PROTOCOL ? EPROTO : ECONNREFUSED;
    }
    closed(client, code == SXE_WS_ABNORMAL ? SXE_CLOSE_PEER : SXE_CLOSE_ERROR, 0);
}

static const struct sxe_ws_handlers ws_handlers = {
    .on_open = ws_open, .on_message = ws_message, .on_close = ws_close};

/* Closes connections whose oldest query has waited longer than the timeout. */
static void check_timeouts(sxe_timer_t *timer, void *arg)
{
    uint64_t now = sxe_loop_now(worker.loop);

    (void)timer;
    (void)arg;
    for (uint64_t i = 0; i < worker.count; i++) {
        struct client *client = &worker.clients[i];
        if (client->conn != NULL && client->connected && client->sent > client->done &&
            now - client->sent_at[client->oldest] > config.timeout_ns) {
            client->timed_out = true;
            sxe_conn_close(client->conn);
        }
    }
}

/*
 * Ramps: keeps at most ramp_batch connects outstanding, so the server's accept queue is not
 * flooded (a dropped SYN costs a second's retransmission). Called each turn until all are opened.
 */
static uint64_t opened;

static void open_more(void)
{
    for (; opened < worker.count && opened - worker.settled < config.ramp_batch; opened++) {
        struct client *client = &worker.clients[opened];
        uint64_t global = worker.first + opened;
        const struct sockaddr *source =
            config.source_count > 0
                ? (const struct sockaddr *)&config.sources[global % config.source_count]
                : NULL;

        response_reader_init(&client->reader, config.head);
        client->connect_start = sxe_clock_mono_ns();
        int rc;
        if (config.ws_path != NULL) {
            rc = sxe_ws_connect(worker.ws_set, &client->ws, config.target_text, config.ws_path,
                                NULL, source, source ? config.source_len : 0, client);
            client->conn = rc == 0 ? sxe_ws_conn(client->ws) : NULL;
        } else {
            rc = sxe_connect(worker.loop, &client->conn, (const struct sockaddr *)&config.target,
                             config.target_len, source, source ? config.source_len : 0, &handlers,
                             client);
        }
        if (rc < 0) {
            client->conn = NULL;
            worker.results.errors[ERR_CONNECT]++;
            if (worker.results.first_connect_errno == 0) {
                worker.results.first_connect_errno = -rc;
            }
            worker.settled++;
            finish(client);
        }
    }
}

static void write_all(int fd, const void *data, size_t len)
{
    const char *bytes = data;

    while (len > 0) {
        ssize_t written = write(fd, bytes, len);
        if (written < 0 && errno == EINTR) {
            continue;
        }
        if (written <= 0) {
            _exit(3);
        }
        bytes += written;
        len -= (size_t)written;
    }
}

static bool read_all(int fd, void *data, size_t len)
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

/*
 * A worker: connects its share, reports, waits for the go, runs its queries and reports again.
 * Runs in a child process; never returns.
 */
static void run_worker(unsigned index, uint64_t first, uint64_t count, int up, int down,
                       struct progress *progress)
{
    /* An echo whole in one buffer, with room for a frame head and a ping behind it. */
    size_t ws_buffer = config.ws_size + config.ws_size / 512 + 1024;
    struct sxe_loop_options options = {
        .connections = (uint32_t)count + 4,
        .buffers = (uint32_t)(count / 8 + 64),
        .buffer_size = (uint32_t)(ws_buffer > RESPONSE_HEAD_MAX ? ws_buffer : RESPONSE_HEAD_MAX),
        .write_limit = (uint32_t)(PIPELINE_MAX * config.request_len + RESPONSE_HEAD_MAX),
        .connect_timeout = config.timeout_ns,
        .timers = 4,
    };
    options.high_water = options.write_limit;
    sxe_timer_t timeouts;
    char go;

    worker.index = index;
    worker.first = first;
    worker.count = count;
    worker.progress = progress;
    worker.clients = calloc(count, sizeof(*worker.clients));
    worker.burst = malloc(config.pipeline * config.request_len);
    struct sxe_ws_options ws_options = {.message_bytes = (uint32_t)config.ws_size, .no_ping = true};
    if (worker.clients == NULL || worker.burst == NULL ||
        sxe_loop_create(&worker.loop, &options) < 0 ||
        (config.ws_path != NULL &&
         sxe_ws_client_create(&worker.ws_set, worker.loop, &ws_handlers, &ws_options) < 0)) {
        fprintf(stderr, "sxe-http: worker %u cannot allocate %llu connections\n", index,
                (unsigned long long)count);
        _exit(3);
    }
    for (unsigned i = 0; i < config.pipeline; i++) {
        memcpy(worker.burst + i * config.request_len, config.request, config.request_len);
    }

    worker.start_ns = sxe_clock_mono_ns();
    while (worker.settled < worker.count) {
        open_more();
        if (sxe_loop_run_once(worker.loop, 100 * SXE_NS_PER_MSEC) < 0) {
            _exit(3);
        }
    }
    worker.results.connect_ns =
        worker.last_settled_ns > worker.start_ns ? worker.last_settled_ns - worker.start_ns : 0;
    write_all(up, &worker.results, sizeof(worker.results));
    if (!read_all(down, &go, 1)) {
        _exit(0); /* the parent gave up: nothing to run */
    }

    /* The barrier is passed: every connection of every worker is up. */
    worker.sending = true;
    uint64_t start = sxe_clock_mono_ns();
    worker.last_response_ns = start;
    sxe_timer_init(&timeouts, check_timeouts, NULL);
    (void)!sxe_timer_start(worker.loop, &timeouts, 100 * SXE_NS_PER_MSEC, 100 * SXE_NS_PER_MSEC);
    (void)sxe_loop_run_once(worker.loop, 0); /* stamp the loop's now */
    for (uint64_t i = 0; i < worker.count; i++) {
        struct client *client = &worker.clients[i];
        if (client->conn != NULL) {
            uint64_t want = config.duration_ns ? config.pipeline : config.queries;
            send_queries(client, (unsigned)(want < config.pipeline ? want : config.pipeline));
        }
    }
    while (worker.ended < worker.count) {
        if (config.duration_ns && !worker.stop_sending &&
            sxe_clock_mono_ns() - start >= config.duration_ns) {
            worker.stop_sending = true;
            for (uint64_t i = 0; i < worker.count; i++) {
                struct client *client = &worker.clients[i];
                if (client->conn != NULL && client->done == client->sent) {
                    finish(client);
                    close_done(client);
                }
            }
        }
        if (sxe_loop_run_once(worker.loop, 100 * SXE_NS_PER_MSEC) < 0) {
            _exit(3);
        }
    }
    worker.results.query_ns = worker.last_response_ns - start;
    write_all(up, &worker.results, sizeof(worker.results));
    _exit(0);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sxe-http -i IP -p PORT [-n QUERIES] [-c CONNECTIONS] [options]\n"
            "\n"
            "Opens CONNECTIONS keep-alive connections to IP:PORT in batches, waits until all are\n"
            "up, then sends QUERIES requests on each, one after another, and reports connect,\n"
            "query and run times and rates, latency percentiles and errors by kind.\n"
            "\n"
            "  -i IP            server address, IPv4 or IPv6\n"
            "  -p PORT          server port\n"
            "  -n QUERIES       queries per connection (1)\n"
            "  -c CONNECTIONS   connections (1)\n"
            "  -d SECONDS       run for SECONDS instead of -n queries per connection\n"
            "  -P DEPTH         pipeline DEPTH queries per connection (1, at most %d)\n"
            "  -m METHOD        request method (GET)\n"
            "  -u PATH          request path (/)\n"
            "  -H 'NAME: VALUE' add a request header (repeatable)\n"
            "  -b BODY          request body (sent with Content-Length)\n"
            "  -f FILE          send FILE's bytes as the request, exactly\n"
            "  -s A,B,...       source addresses, used in turn (each gives about %d ports)\n"
            "  -w WORKERS       worker processes (enough for the file descriptor limit)\n"
            "  -t SECONDS       response and connect timeout (10)\n"
            "  -r BATCH         connects outstanding at once while ramping, per worker (1000)\n"
            "  -e STATUS        the status every response must have (200)\n"
            "  -g               close finished connections with FIN, not reset (leaves\n"
            "                   TIME_WAIT ports behind for a minute)\n"
            "  -v               hex-dump the request before sending\n"
            "  --ws PATH        WebSocket mode: each connection opens a WebSocket to PATH, and\n"
            "                   a query is a binary message the server echoes\n"
            "  --ws-size BYTES  the size of each message in WebSocket mode (20)\n"
            "  --json           print the report as JSON\n"
            "  -h, --help       this text\n"
            "      --version    the versions of sxe-http and of the libsxe it runs on\n"
            "\n"
            "Exit status: 0 when every query got a good response, 1 when any error was counted,\n"
            "2 for a usage error.\n",
            PIPELINE_MAX, PORTS_PER_SOURCE);
}

static void __attribute__((format(printf, 1, 2), noreturn)) die_usage(const char *format, ...)
{
    va_list args;

    fprintf(stderr, "sxe-http: ");
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fprintf(stderr, "\n(sxe-http --help explains the options)\n");
    exit(2);
}

static uint64_t parse_count(const char *text, const char *what, uint64_t min, uint64_t max)
{
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < min || value > max) {
        die_usage("%s must be a whole number from %llu to %llu, not '%s'", what,
                  (unsigned long long)min, (unsigned long long)max, text);
    }
    return value;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *file = fopen(path, "rb");
    char *data = NULL;
    long size;

    if (file == NULL || fseek(file, 0, SEEK_END) != 0 || (size = ftell(file)) < 0 ||
        fseek(file, 0, SEEK_SET) != 0 || (data = malloc((size_t)size + 1)) == NULL ||
        fread(data, 1, (size_t)size, file) != (size_t)size) {
        die_usage("cannot read the request file '%s'", path);
    }
    fclose(file);
    *len = (size_t)size;
    return data;
}

/* Builds "METHOD PATH HTTP/1.1\r\nHost: ...\r\n<headers><Content-Length>\r\n<body>". */
static void build_request(const char *method, const char *path, const char *headers,
                          const char *body, const char *host)
{
    size_t body_len = body ? strlen(body) : 0;
    size_t size = strlen(method) + strlen(path) + strlen(headers) + strlen(host) + body_len + 128;
    char *request = malloc(size);
    int len =
        snprintf(request, size, "%s %s HTTP/1.1\r\nHost: %s\r\n%s", method, path, host, headers);
    if (body != NULL) {
        len += snprintf(request + len, size - (size_t)len, "Content-Length: %zu\r\n", body_len);
    }
    len += snprintf(request + len, size - (size_t)len, "\r\n%s", body ? body : "");
    config.request = request;
    config.request_len = (size_t)len;
    config.head = strcmp(method, "HEAD") == 0;
}

static void parse_sources(const char *list)
{
    char *copy = strdup(list);
    char *save = NULL;

    for (char *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        socklen_t len;
        if (config.source_count == SOURCES_MAX) {
            die_usage("at most 64 source addresses, not more as in '%s'", list);
        }
        if (sxe_address_parse(item, 0, &config.sources[config.source_count], &len) < 0) {
            die_usage("-s '%s': not an IPv4 or IPv6 address", item);
        }
        config.source_len = len;
        config.source_count++;
    }
    free(copy);
}

static void parse_options(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"json", no_argument, NULL, 'J'},          {"ws", required_argument, NULL, 'W'},
        {"ws-size", required_argument, NULL, 'Z'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},       {NULL, 0, NULL, 0}};
    const char *ip = NULL, *method = "GET", *path = "/", *body = NULL, *file = NULL;
    char headers[8192] = "";
    size_t headers_len = 0;
    long port = -1;
    int option;

    while ((option = getopt_long(argc, argv, "i:p:n:c:d:P:m:u:H:b:f:s:w:t:r:e:gvh", long_options,
                                 NULL)) != -1) {
        switch (option) {
        case 'i':
            ip = optarg;
            break;
        case 'p':
            port = (long)parse_count(optarg, "-p PORT", 1, 65535);
            break;
        case 'n':
            config.queries = parse_count(optarg, "-n QUERIES", 1, 1ULL << 40);
            break;
        case 'c':
            config.connections = parse_count(optarg, "-c CONNECTIONS", 1, 10000000);
            break;
        case 'd':
            config.duration_ns = parse_count(optarg, "-d SECONDS", 1, 86400) * SXE_NS_PER_SEC;
            break;
        case 'P':
            config.pipeline = (unsigned)parse_count(optarg, "-P DEPTH", 1, PIPELINE_MAX);
            break;
        case 'm':
            method = optarg;
            break;
        case 'u':
            path = optarg;
            break;
        case 'H':
            if (headers_len + strlen(optarg) + 3 > sizeof(headers)) {
                die_usage("too many request headers, at '%s'", optarg);
            }
            headers_len += (size_t)snprintf(headers + headers_len, sizeof(headers) - headers_len,
                                            "%s\r\n", optarg);
            break;
        case 'b':
            body = optarg;
            break;
        case 'f':
            file = optarg;
            break;
        case 's':
            parse_sources(optarg);
            break;
        case 'w':
            config.workers = (unsigned)parse_count(optarg, "-w WORKERS", 1, WORKERS_MAX);
            break;
        case 't':
            config.timeout_ns = parse_count(optarg, "-t SECONDS", 1, 3600) * SXE_NS_PER_SEC;
            break;
        case 'r':
            config.ramp_batch = (unsigned)parse_count(optarg, "-r BATCH", 1, 1000000);
            break;
        case 'e':
            config.expect_status = (int)parse_count(optarg, "-e STATUS", 100, 599);
            break;
        case 'v':
            config.verbose = true;
            break;
        case 'g':
            config.graceful_close = true;
            break;
        case 'J':
            config.json = true;
            break;
        case 'W':
            if (optarg[0] != '/' || strpbrk(optarg, " \r\n") != NULL) {
                die_usage("--ws '%s': a path starts with / and has no spaces", optarg);
            }
            config.ws_path = optarg;
            break;
        case 'Z':
            config.ws_size = parse_count(optarg, "--ws-size BYTES", 0, 16 << 20);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case 'V':
            printf("sxe-http %s (libsxe %s)\n", SXE_VERSION, sxe_version());
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (optind < argc) {
        die_usage("unexpected argument '%s'", argv[optind]);
    }
    if (ip == NULL || port < 0) {
        die_usage("%s", "-i IP and -p PORT are required");
    }
    if (sxe_address_parse(ip, (int)port, &config.target, &config.target_len) < 0) {
        die_usage("-i '%s': not an IPv4 or IPv6 address", ip);
    }
    char host[INET6_ADDRSTRLEN];
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)&config.target;
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&config.target;
    bool is_v6 = config.target.ss_family == AF_INET6;
    inet_ntop(config.target.ss_family, is_v6 ? (const void *)&v6->sin6_addr : &v4->sin_addr, host,
              sizeof(host));
    snprintf(config.target_text, sizeof(config.target_text), is_v6 ? "[%s]:%u" : "%s:%u", host,
             ntohs(is_v6 ? v6->sin6_port : v4->sin_port));
    if (config.ws_path != NULL) {
        /* A query is a binary message; request_len bounds what one queues (its frame). */
        config.request_len = config.ws_size + 14;
        config.request = malloc(config.request_len);
        memset(config.request, 'w', config.request_len);
        return;
    }
    if (file != NULL) {
        config.request = read_file(file, &config.request_len);
        config.head = strncmp(config.request, "HEAD ", 5) == 0;
    } else {
        build_request(method, path, headers, body, config.target_text);
    }
    if (config.request_len == 0) {
        die_usage("%s", "the request is empty");
    }
}

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

static void add_results(struct results *total, const struct results *part)
{
    total->connected += part->connected;
    total->slow_connects += part->slow_connects;
    total->connect_ns = part->connect_ns > total->connect_ns ? part->connect_ns : total->connect_ns;
    total->queries += part->queries;
    total->not_sent += part->not_sent;
    total->query_ns = part->query_ns > total->query_ns ? part->query_ns : total->query_ns;
    for (unsigned kind = 0; kind < ERR_KINDS; kind++) {
        total->errors[kind] += part->errors[kind];
    }
    if (total->first_connect_errno == 0) {
        total->first_connect_errno = part->first_connect_errno;
    }
    for (unsigned bucket = 0; bucket < HISTOGRAM_BUCKETS; bucket++) {
        total->latency.counts[bucket] += part->latency.counts[bucket];
    }
    total->latency.total += part->latency.total;
    if (part->latency.max > total->latency.max) {
        total->latency.max = part->latency.max;
    }
}

static double per_second(uint64_t count, uint64_t ns)
{
    return ns > 0 ? (double)count * 1e9 / (double)ns : 0.0;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

static void report(const struct results *total, uint64_t run_ns)
{
    static const double percentiles[] = {50, 90, 99, 99.9};
    uint64_t errors = 0;

    for (unsigned kind = 0; kind < ERR_KINDS; kind++) {
        errors += total->errors[kind];
    }
    if (config.json) {
        printf("{\"target\": \"%s\", \"connections\": %llu, \"queries_per_connection\": %llu, "
               "\"duration_s\": %llu, \"pipeline\": %u, \"workers\": %u,\n",
               config.target_text, (unsigned long long)config.connections,
               (unsigned long long)(config.duration_ns ? 0 : config.queries),
               (unsigned long long)(config.duration_ns / SXE_NS_PER_SEC), config.pipeline,
               config.workers);
        printf(" \"connected\": %llu, \"connect_s\": %.6f, \"connects_per_s\": %.1f, "
               "\"slow_connects\": %llu,\n",
               (unsigned long long)total->connected, (double)total->connect_ns / 1e9,
               per_second(total->connected, total->connect_ns),
               (unsigned long long)total->slow_connects);
        printf(" \"queries\": %llu, \"query_s\": %.6f, \"queries_per_s\": %.1f, "
               "\"not_sent\": %llu, \"run_s\": %.6f,\n",
               (unsigned long long)total->queries, (double)total->query_ns / 1e9,
               per_second(total->queries, total->query_ns), (unsigned long long)total->not_sent,
               (double)run_ns / 1e9);
        printf(" \"latency_ms\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"p99.9\": %.3f, "
               "\"max\": %.3f},\n \"errors\": {",
               ms(histogram_percentile(&total->latency, 50)),
               ms(histogram_percentile(&total->latency, 90)),
               ms(histogram_percentile(&total->latency, 99)),
               ms(histogram_percentile(&total->latency, 99.9)), ms(total->latency.max));
        for (unsigned kind = 0; kind < ERR_KINDS; kind++) {
            printf("%s\"%s\": %llu", kind ? ", " : "", error_keys[kind],
                   (unsigned long long)total->errors[kind]);
        }
        printf(", \"total\": %llu}}\n", (unsigned long long)errors);
        return;
    }
    printf("sxe-http: %llu connections x %llu %s to %s, pipeline %u, %u worker%s\n",
           (unsigned long long)config.connections,
           (unsigned long long)(config.duration_ns ? config.duration_ns / SXE_NS_PER_SEC
                                                   : config.queries),
           config.duration_ns ? "seconds" : "queries", config.target_text, config.pipeline,
           config.workers, config.workers == 1 ? "" : "s");
    printf("connections: %llu in %.3f s, %.0f per second; %llu slower than 1 s; %llu failed\n",
           (unsigned long long)total->connected, (double)total->connect_ns / 1e9,
           per_second(total->connected, total->connect_ns),
           (unsigned long long)total->slow_connects,
           (unsigned long long)total->errors[ERR_CONNECT]);
    printf("queries:     %llu in %.3f s, %.0f per second", (unsigned long long)total->queries,
           (double)total->query_ns / 1e9, per_second(total->queries, total->query_ns));
    if (total->not_sent > 0) {
        printf("; %llu never sent", (unsigned long long)total->not_sent);
    }
    printf("\nrun:         %.3f s\nlatency:    ", (double)run_ns / 1e9);
    for (unsigned i = 0; i < sizeof(percentiles) / sizeof(percentiles[0]); i++) {
        printf(" p%g %.3f ms", percentiles[i],
               ms(histogram_percentile(&total->latency, percentiles[i])));
    }
    printf("  max %.3f ms\nerrors:     ", ms(total->latency.max));
    for (unsigned kind = 0; kind < ERR_KINDS; kind++) {
        printf(" %s %llu%s", error_names[kind], (unsigned long long)total->errors[kind],
               kind + 1 < ERR_KINDS ? "," : "\n");
    }
    if (total->slow_connects > 0) {
        printf("warning:     %llu connects took over 1 s: the server's accept queue or the "
               "client's ramp is the bottleneck\n",
               (unsigned long long)total->slow_connects);
    }
    if (total->errors[ERR_CONNECT] > 0 && total->first_connect_errno != 0) {
        printf("error:       %s connection%s to %s failed; the first: %s\n",
               total->connected == 0 ? "every" : "some", total->connected == 0 ? "" : "s",
               config.target_text, strerror(total->first_connect_errno));
    }
}

int main(int argc, char **argv)
{
    struct results total = {0};
    pid_t pids[WORKERS_MAX];
    int ups[WORKERS_MAX], downs[WORKERS_MAX];

    parse_options(argc, argv);
    plan();
    if (config.verbose) {
        SXE_LOG_INFO("request, %zu bytes, sent %llu times per connection:", config.request_len,
                     (unsigned long long)config.queries);
        SXE_LOG_HEX(SXE_LOG_LEVEL_INFO, config.request, config.request_len);
    }
    signal(SIGPIPE, SIG_IGN);

    struct progress *progress = mmap(NULL, sizeof(struct progress) * WORKERS_MAX,
                                     PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (progress == MAP_FAILED) {
        perror("sxe-http: mmap");
        return 3;
    }
    uint64_t start = sxe_clock_mono_ns();
    uint64_t first = 0;
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
    struct results part;
    for (unsigned i = 0; i < config.workers; i++) {
        if (!read_all(ups[i], &part, sizeof(part))) {
            fprintf(stderr, "sxe-http: worker %u failed while connecting\n", i);
            return 3;
        }
        total.connected += part.connected;
        total.slow_connects += part.slow_connects;
        total.connect_ns = part.connect_ns > total.connect_ns ? part.connect_ns : total.connect_ns;
    }
    for (unsigned i = 0; i < config.workers; i++) {
        write_all(downs[i], "G", 1);
    }

    /* A progress line each second on long runs, until every worker reports. */
    total = (struct results){0};
    uint64_t last_progress = sxe_clock_mono_ns();
    for (unsigned reported = 0; reported < config.workers;) {
        struct pollfd polls[WORKERS_MAX];
        for (unsigned i = 0; i < config.workers; i++) {
            polls[i] = (struct pollfd){.fd = ups[i], .events = ups[i] >= 0 ? POLLIN : 0};
        }
        int ready = poll(polls, config.workers, 1000);
        for (unsigned i = 0; ready > 0 && i < config.workers; i++) {
            if (ups[i] >= 0 && (polls[i].revents & (POLLIN | POLLHUP))) {
                if (!read_all(ups[i], &part, sizeof(part))) {
                    fprintf(stderr, "sxe-http: worker %u failed\n", i);
                    return 3;
                }
                add_results(&total, &part);
                close(ups[i]);
                ups[i] = -1;
                reported++;
            }
        }
        uint64_t now = sxe_clock_mono_ns();
        if (now - last_progress >= SXE_NS_PER_SEC && reported < config.workers) {
            uint64_t queries = 0, open = 0;
            for (unsigned i = 0; i < config.workers; i++) {
                queries += __atomic_load_n(&progress[i].queries, __ATOMIC_RELAXED);
                open += __atomic_load_n(&progress[i].open, __ATOMIC_RELAXED);
            }
            fprintf(stderr, "progress: %.0f s, %llu queries, %llu connections open\n",
                    (double)(now - start) / 1e9, (unsigned long long)queries,
                    (unsigned long long)open);
            last_progress = now;
        }
    }
    for (unsigned i = 0; i < config.workers; i++) {
        waitpid(pids[i], NULL, 0);
    }
    report(&total, sxe_clock_mono_ns() - start);

    uint64_t errors = 0;
    for (unsigned kind = 0; kind < ERR_KINDS; kind++) {
        errors += total.errors[kind];
    }
    return errors > 0 || total.not_sent > 0 ? 1 : 0;
}
