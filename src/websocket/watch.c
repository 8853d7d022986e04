/*
 * Messages under way: each must arrive whole within options.message_timeout of its first byte,
 * and one that has outgrown the connection's ordinary buffer (so holds one of the loop's few large
 * buffers) must keep coming at options.message_rate or more. Past either, the socket is closed
 * with 1008 and its buffer is let go. Without this, 64 peers that send 200 KB of a 1 MB message and
 * then a byte every few seconds hold every large buffer forever, and every other peer's large
 * message is refused 1013: a byte is life to the idle timeout, and a ping is answered.
 *
 * Nothing but a whole message counts as progress: neither a control frame (a ping keeps an idle
 * socket alive, not a stalled message) nor a fragment (tiny ones, slowly, would do the same).
 *
 * Sockets with a message under way are on a list in the order their messages began, so the
 * deadline is checked at the head only; those in large buffers are in a table no larger than the
 * loop's count of large buffers, and their rate is checked over windows of three to four seconds (a
 * burst at the start does not pay for a stall later). One timer, ticking each second while a
 * message is under way, does both. A socket leaves them by sxe__ws_unwatch() (ws.h), which its
 * closing (socket.c) calls too.
 */
#define SXE_LOG_MODULE ws_log
#include "sxe/log.h"

#include <errno.h>
#include <stdlib.h>

#include "sxe/clock.h"
#include "websocket/ws.h"

static struct sxe_log_module ws_log = SXE_LOG_MODULE_INIT(WEBSOCKET);

#define NONE UINT32_MAX
#define TICK SXE_NS_PER_SEC
/* The rate is judged over three seconds or more: a pause that long, after what the window held
 * (a retransmission backing off on a lossy link), is not taken for a stall. */
#define WINDOW (3 * SXE_NS_PER_SEC)

static void way_append(sxe_ws_server_t *server, struct sxe_ws *ws, uint64_t now)
{
    ws->under_way = true;
    ws->way_since = now;
    ws->way_next = NONE;
    ws->way_prev = server->way_tail;
    if (server->way_tail != NONE) {
        server->sockets[server->way_tail].way_next = sxe__ws_index(ws);
    } else {
        server->way_head = sxe__ws_index(ws);
    }
    server->way_tail = sxe__ws_index(ws);
    if (!sxe_timer_active(&server->watch_timer) &&
        sxe_timer_start(server->loop, &server->watch_timer, TICK, TICK) < 0) {
        SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN, "no free timer to time WebSocket messages: raise %s",
                     sxe_log_setting("options.timers"));
    }
}

void sxe__ws_watch(struct sxe_ws *ws, size_t pending, bool delivered)
{
    sxe_ws_server_t *server = ws->server;
    uint64_t now = sxe_loop_now(server->loop);

    if (pending == 0 || delivered) { /* none under way, or a new one begun in this input */
        sxe__ws_unwatch(ws);
    }
    if (pending == 0 || ws->state != WS_OPEN) {
        return; /* closing: close_timeout bounds what still comes (and has the links) */
    }
    if (!ws->under_way) {
        way_append(server, ws, now);
    }
    if (ws->large != 0) {
        server->large[ws->large - 1].bytes = pending;
    } else if (pending > server->large_above && server->large_count < server->large_capacity) {
        server->large[server->large_count] = (struct sxe__ws_large){
            .socket = sxe__ws_index(ws), .since = now, .start = pending, .bytes = pending};
        ws->large = (uint8_t)++server->large_count;
    }
}

/* Closes the socket for a message that is too slow, letting its buffer go at once. */
static void too_slow(struct sxe_ws *ws, const char *why)
{
    ws->server->stats.slow_messages++;
    SXE_LOG_INFO("closing a WebSocket with 1008: %s", why);
    sxe_conn_t *conn = ws->conn;
    sxe__ws_fail(ws, SXE_WS_CLOSE_POLICY, why);
    if (sxe_conn_close_when_sent(conn) < 0) {
        sxe_conn_close(conn);
    }
}

static void tick(sxe_timer_t *timer, void *arg)
{
    sxe_ws_server_t *server = arg;
    uint64_t now = sxe_loop_now(server->loop);

    while (server->way_head != NONE &&
           now - server->sockets[server->way_head].way_since >= server->options.message_timeout) {
        too_slow(&server->sockets[server->way_head], "a message did not arrive in time");
    }
    for (uint32_t i = server->large_count; i-- > 0;) { /* too_slow() moves the last into i */
        struct sxe__ws_large *entry = &server->large[i];
        uint64_t window = now - entry->since;
        uint64_t came = entry->bytes > entry->start ? entry->bytes - entry->start : 0;
        if (window < WINDOW) {
            continue; /* too short to judge: the next tick will */
        }
        if ((double)came < (double)server->options.message_rate * (double)window / 1e9) {
            too_slow(&server->sockets[entry->socket], "a large message came too slowly");
        } else {
            entry->since = now; /* the next window starts */
            entry->start = entry->bytes;
        }
    }
    if (server->way_head == NONE) {
        sxe_timer_stop(server->loop, timer);
    }
}

int sxe__ws_watch_init(sxe_ws_server_t *server, const struct sxe_loop_options *loop)
{
    server->way_head = server->way_tail = NONE;
    server->large_above = loop->buffer_size;
    /* At most one message per large buffer can outgrow an ordinary one; 255 is the index's. */
    server->large_capacity = loop->large_buffers < 255 ? loop->large_buffers : 255;
    sxe_timer_init(&server->watch_timer, tick, server);
    if (server->large_capacity > 0 &&
        (server->large = calloc(server->large_capacity, sizeof(*server->large))) == NULL) {
        return -ENOMEM;
    }
    return 0;
}

void sxe__ws_watch_fini(sxe_ws_server_t *server)
{
    if (server->loop != NULL) {
        sxe_timer_stop(server->loop, &server->watch_timer);
    }
    free(server->large);
}
