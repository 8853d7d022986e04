/*
 * The broadcast load of bench/websocket: opens N WebSockets to PATH (sxe's client), waits until
 * all are open, then one of them sends M messages of 20 bytes, each after every socket has
 * received the one before; prints what was delivered and how long the broadcasts took. With M 0
 * it holds the N sockets open for SECONDS (the idle-memory measure), then closes them.
 * Usage: ws-fanout IP:PORT PATH N M [SECONDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <sxe/sxe.h>

static sxe_ws_client_t *set;
static sxe_ws_t **sockets;
static unsigned long open_count, received, closed, count;

static void on_open(sxe_ws_t *ws)
{
    (void)ws;
    open_count++;
}

static void on_message(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
{
    (void)ws;
    (void)type;
    (void)data;
    (void)len;
    received++;
}

static void on_close(sxe_ws_t *ws, int code, const char *reason, size_t reason_len)
{
    (void)ws;
    (void)reason_len;
    if (code != SXE_WS_CLOSE_NORMAL && code != SXE_WS_CLOSE_ABNORMAL &&
        code != SXE_WS_CLOSE_GOING_AWAY) {
        fprintf(stderr, "ws-fanout: a socket closed with %d: %s\n", code, reason);
    }
    closed++;
}

static void turn_until(unsigned long *counter, unsigned long target, sxe_loop_t *loop)
{
    uint64_t deadline = sxe_clock_mono_ns() + 60 * SXE_NS_PER_SEC;
    while (*counter < target && closed == 0 && sxe_clock_mono_ns() < deadline) {
        (void)sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC);
    }
}

int main(int argc, char **argv)
{
    static const struct sxe_ws_handlers handlers = {
        .on_open = on_open, .on_message = on_message, .on_close = on_close};
    sxe_loop_t *loop;

    if (argc < 5) {
        fprintf(stderr, "usage: ws-fanout IP:PORT PATH N M [SECONDS]\n");
        return 2;
    }
    count = strtoul(argv[3], NULL, 10);
    unsigned long messages = strtoul(argv[4], NULL, 10);
    sockets = calloc(count, sizeof(*sockets));
    if (sxe_loop_create(&loop, &(struct sxe_loop_options){.connections = (uint32_t)count + 8,
                                                          .timers = 8}) < 0 ||
        sxe_ws_client_create(&set, loop, &handlers, &(struct sxe_ws_options){.no_ping = true}) <
            0) {
        return 1;
    }
    for (unsigned long i = 0; i < count; i++) {
        if (sxe_ws_client_connect(set, &sockets[i], argv[1], argv[2], NULL, NULL, 0, NULL) < 0) {
            fprintf(stderr, "ws-fanout: cannot connect socket %lu\n", i);
            return 1;
        }
        if (i % 500 == 499) { /* a ramp: the listener's queue is not flooded */
            turn_until(&open_count, i + 1, loop);
        }
    }
    turn_until(&open_count, count, loop);
    if (open_count < count) {
        fprintf(stderr, "ws-fanout: %lu of %lu sockets opened\n", open_count, count);
        return 1;
    }
    uint64_t start = sxe_clock_mono_ns();
    for (unsigned long m = 0; m < messages; m++) {
        (void)sxe_ws_send(sockets[0], SXE_WS_BINARY, "twenty bytes, a tick", 20);
        turn_until(&received, (m + 1) * count, loop);
    }
    uint64_t took = sxe_clock_mono_ns() - start;
    if (messages == 0 && argc > 5) {
        uint64_t until = sxe_clock_mono_ns() + strtoull(argv[5], NULL, 10) * SXE_NS_PER_SEC;
        while (sxe_clock_mono_ns() < until) {
            (void)sxe_loop_run_once(loop, 100 * SXE_NS_PER_MSEC);
        }
    }
    printf("{\"open\": %lu, \"delivered\": %lu, \"seconds\": %.6f}\n", open_count, received,
           (double)took / 1e9);
    sxe_ws_client_destroy(set);
    sxe_loop_destroy(loop);
    return received < messages * count;
}
