/*
 * How late a chat line reaches its room (examples/ws-chat): N WebSockets, half joined to the chat
 * at HERE and half to the chat at THERE (the same address for a room in one process), and one of
 * HERE's sends RATE lines a second for SECONDS, each carrying the time it was sent. Every socket
 * times each line it receives: the delivery latency from the sender to a guest of the other
 * process (THERE's) and to a guest of its own (HERE's), p50, p99 and the most, in µs. Every line
 * must reach every socket, or it fails.
 *
 *     chat-latency [--json] HERE THERE N RATE SECONDS
 */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sxe/sxe.h>

#include "bench_json.h"

#define BUCKETS 2000000 /* µs: two seconds */

struct side {
    uint32_t *histogram; /* a count per µs of latency */
    uint64_t received, late;
};

static struct side sides[2]; /* 0: HERE's guests, 1: THERE's */
static unsigned long open_count, closed;
static uint64_t last_heard; /* when a message (a join's too) last came */

static void on_open(sxe_ws_t *ws)
{
    (void)ws;
    open_count++;
}

static void on_message(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
{
    struct side *side = &sides[(uintptr_t)sxe_ws_user(ws)];
    const char *at = memmem(data, len, ": t=", 4);

    (void)type;
    last_heard = sxe_clock_mono_ns();
    if (at == NULL) { /* a join or a leave */
        return;
    }
    uint64_t sent = 0, now = sxe_clock_mono_ns();
    for (at += 4; at < data + len && *at >= '0' && *at <= '9'; at++) { /* not NUL-terminated */
        sent = sent * 10 + (uint64_t)(*at - '0');
    }
    uint64_t us = now > sent ? (now - sent) / 1000 : 0;
    side->received++;
    if (us < BUCKETS) {
        side->histogram[us]++;
    } else {
        side->late++;
    }
}

static void on_close(sxe_ws_t *ws, int code, const char *reason, size_t reason_len)
{
    (void)ws, (void)code, (void)reason, (void)reason_len;
    closed++;
}

static double percentile(const struct side *side, double p)
{
    uint64_t wanted = (uint64_t)(p * (double)side->received), seen = 0;

    for (uint32_t us = 0; us < BUCKETS; us++) {
        if ((seen += side->histogram[us]) > wanted) {
            return us;
        }
    }
    return BUCKETS;
}

static void turn_for(sxe_loop_t *loop, uint64_t ns)
{
    uint64_t until = sxe_clock_mono_ns() + ns;
    while (sxe_clock_mono_ns() < until && closed == 0) {
        (void)sxe_loop_run_once(loop, 1 * SXE_NS_PER_MSEC);
    }
}

int main(int argc, char **argv)
{
    static const struct sxe_ws_handlers handlers = {
        .on_open = on_open, .on_message = on_message, .on_close = on_close};
    bool json = bench_option(&argc, argv, "--json");
    (void)bench_option(&argc, argv, "--quick");
    sxe_ws_client_t *set;
    sxe_loop_t *loop;
    sxe_ws_t **sockets;

    if (argc != 6) {
        fprintf(stderr, "usage: chat-latency [--json] HERE THERE N RATE SECONDS\n");
        return 2;
    }
    unsigned long count = strtoul(argv[3], NULL, 10), rate = strtoul(argv[4], NULL, 10);
    unsigned long seconds = strtoul(argv[5], NULL, 10), lines = rate * seconds;
    sockets = calloc(count, sizeof(*sockets));
    sides[0].histogram = calloc(BUCKETS, sizeof(uint32_t));
    sides[1].histogram = calloc(BUCKETS, sizeof(uint32_t));
    if (count < 2 || rate == 0 || sockets == NULL || sides[1].histogram == NULL ||
        sxe_loop_create(&loop, &(struct sxe_loop_options){.connections = (uint32_t)count + 8}) <
            0 ||
        sxe_ws_client_create(&set, loop, &handlers, &(struct sxe_ws_options){.no_ping = true}) <
            0) {
        return 1;
    }
    for (unsigned long i = 0; i < count; i++) { /* even: HERE's; odd: THERE's */
        if (sxe_ws_client_connect(set, &sockets[i], argv[1 + i % 2], "/chat", NULL, NULL, 0,
                                  (void *)(uintptr_t)(i % 2)) < 0) {
            fprintf(stderr, "chat-latency: cannot connect socket %lu\n", i);
            return 1;
        }
        if (i % 250 == 249) { /* a ramp: the listeners' queues are not flooded */
            turn_for(loop, 20 * SXE_NS_PER_MSEC);
        }
    }
    for (int i = 0; i < 1000 && open_count < count; i++) {
        turn_for(loop, 10 * SXE_NS_PER_MSEC);
    }
    /* Every join is told to every guest: N² / 2 lines, which take a while to go by. Timing starts
     * once none has come for half a second. */
    uint64_t quiet_by = sxe_clock_mono_ns() + 60 * SXE_NS_PER_SEC;
    do {
        turn_for(loop, 100 * SXE_NS_PER_MSEC);
    } while (sxe_clock_mono_ns() - last_heard < 500 * SXE_NS_PER_MSEC &&
             sxe_clock_mono_ns() < quiet_by);
    if (open_count < count || closed > 0) {
        fprintf(stderr, "chat-latency: %lu of %lu sockets opened, %lu closed\n", open_count, count,
                closed);
        return 1;
    }
    uint64_t start = sxe_clock_mono_ns(), gap = SXE_NS_PER_SEC / rate;
    for (unsigned long m = 0; m < lines; m++) {
        char line[32];
        uint64_t due = start + m * gap;
        while (sxe_clock_mono_ns() < due) {
            (void)sxe_loop_run_once(loop, due - sxe_clock_mono_ns());
        }
        int len = snprintf(line, sizeof(line), "t=%llu", (unsigned long long)sxe_clock_mono_ns());
        (void)sxe_ws_send(sockets[0], SXE_WS_TEXT, line, (size_t)len);
    }
    turn_for(loop, 2 * SXE_NS_PER_SEC); /* the last lines arrive */
    uint64_t wanted[2] = {lines * ((count + 1) / 2), lines * (count / 2)};
    double figures[2][3];
    for (int s = 0; s < 2; s++) {
        figures[s][0] = percentile(&sides[s], 0.50);
        figures[s][1] = percentile(&sides[s], 0.99);
        figures[s][2] = percentile(&sides[s], 1.0 - 1e-12);
    }
    int rc = sides[0].received != wanted[0] || sides[1].received != wanted[1] || closed > 0;
    if (rc) {
        fprintf(stderr, "chat-latency: %llu of %llu lines here, %llu of %llu there, %lu closed\n",
                (unsigned long long)sides[0].received, (unsigned long long)wanted[0],
                (unsigned long long)sides[1].received, (unsigned long long)wanted[1], closed);
    }
    if (!json) {
        printf(
            "there: p50 %.0f us, p99 %.0f us, most %.0f us; here: p50 %.0f, p99 %.0f, most %.0f\n",
            figures[1][0], figures[1][1], figures[1][2], figures[0][0], figures[0][1],
            figures[0][2]);
    } else {
        struct bench_json out;
        bench_json_begin(&out, "chat-latency");
        bench_json_param(&out, "sockets", count);
        bench_json_param(&out, "lines", lines);
        bench_json_row(&out, "us", BENCH_LOWER, &figures[1][0], 1, "p50, to the other's guests");
        bench_json_row(&out, "us", BENCH_LOWER, &figures[1][1], 1, "p99, to the other's guests");
        bench_json_row(&out, "us", BENCH_LOWER, &figures[0][1], 1, "p99, to its own guests");
        rc |= bench_json_end(&out);
    }
    sxe_ws_client_destroy(set);
    sxe_loop_destroy(loop);
    return rc;
}
