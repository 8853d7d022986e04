/*
 * A server whose worker 0 stalls: HTTP Hello World on 2 worker processes, worker 0 blocking for
 * 50 ms every 500 ms, as a handler that calls something slow would. Each response names the worker
 * that sent it (X-Worker), and a request with "Connection: close" is answered and closed.
 * bench/stall loads it with a new connection per request (bench/many fresh) to show where each
 * spread sends connections while a worker is stuck. Usage: stall PORT reuseport|hand-off [STALL_MS]
 */
#define _GNU_SOURCE /* memmem */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sxe/sxe.h>
#include <time.h>

static char reply[128];
static size_t reply_len;
static unsigned stall_ms = 50;
static uint64_t last_stall;

static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    sxe_worker_t *worker = sxe_conn_user(conn);
    uint64_t now = sxe_clock_mono_ns();
    size_t used = 0;

    if (sxe_worker_index(worker) == 0 && now - last_stall >= 500 * SXE_NS_PER_MSEC) {
        last_stall = now;
        nanosleep(&(struct timespec){.tv_nsec = (long)stall_ms * 1000000}, NULL);
    }
    for (const char *end; (end = memmem(data + used, len - used, "\r\n\r\n", 4)) != NULL;) {
        (void)sxe_conn_write(conn, reply, reply_len);
        sxe_worker_count(worker, 1, reply_len);
        if (memmem(data + used, (size_t)(end - data) - used, "Connection: close", 17) != NULL) {
            (void)sxe_conn_close_when_sent(conn);
            return len;
        }
        used = (size_t)(end - data) + 4;
    }
    return used;
}

static const struct sxe_conn_handlers handlers = {.on_read = on_read};

static int start(sxe_worker_t *worker, void *arg)
{
    (void)arg;
    reply_len = (size_t)snprintf(reply, sizeof(reply),
                                 "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Worker: %u\r\n"
                                 "Content-Length: 12\r\n\r\nHello World\n",
                                 sxe_worker_index(worker));
    return sxe_worker_listen(worker, 0, &handlers, worker);
}

int main(int argc, char **argv)
{
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_port = htons(argc > 1 ? (uint16_t)atoi(argv[1]) : 8080),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sxe_workers_options options = {.count = 2,
                                          .spread = argc > 2 && strcmp(argv[2], "hand-off") == 0
                                                        ? SXE_SPREAD_HAND_OFF
                                                        : SXE_SPREAD_REUSEPORT,
                                          .loop = {.connections = 19000}};
    sxe_workers_t *workers;

    stall_ms = argc > 3 ? (unsigned)atoi(argv[3]) : 50;
    if (sxe_workers_create(&workers, &options) < 0 ||
        sxe_workers_listen(workers, (struct sockaddr *)&address, sizeof(address), NULL) < 0) {
        return 1;
    }
    int rc = sxe_workers_run(workers, start, NULL, NULL);
    sxe_workers_destroy(workers);
    return rc < 0;
}
