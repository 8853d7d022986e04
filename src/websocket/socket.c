/*
 * A WebSocket socket's life in its set: it opens (linked in group 0, counted, on_open), moves
 * between groups, sends frames, and closes: by our choice (a close frame, then close_timeout for
 * the peer's), by the peer's (answered), for a failure of the peer's (1002, 1007, 1008, 1009), or
 * for a close that was not answered in time. The program hears on_close once.
 *
 * Everything above (the input, the watch on messages, the program's calls, the connection
 * handlers) ends here, and nothing here calls back up.
 */
#define SXE_LOG_MODULE ws_log
#include "sxe/log.h"

#include <string.h>

#include "sxe/utf8.h"
#include "websocket/ws.h"

static struct sxe_log_module ws_log = SXE_LOG_MODULE_INIT(WEBSOCKET);

#define NONE UINT32_MAX

static void group_unlink(struct sxe_ws *ws)
{
    sxe_ws_server_t *server = ws->server;

    if (ws->group_prev != NONE) {
        server->sockets[ws->group_prev].group_next = ws->group_next;
    } else {
        server->group_heads[ws->group] = ws->group_next;
    }
    if (ws->group_next != NONE) {
        server->sockets[ws->group_next].group_prev = ws->group_prev;
    }
}

static void group_link(struct sxe_ws *ws, uint32_t group)
{
    sxe_ws_server_t *server = ws->server;
    uint32_t head = server->group_heads[group];

    ws->group = group;
    ws->group_prev = NONE;
    ws->group_next = head;
    if (head != NONE) {
        server->sockets[head].group_prev = sxe__ws_index(ws);
    }
    server->group_heads[group] = sxe__ws_index(ws);
}

void sxe__ws_group_move(struct sxe_ws *ws, uint32_t group)
{
    group_unlink(ws);
    group_link(ws, group);
}

void sxe__ws_opened(struct sxe_ws *ws)
{
    ws->state = WS_OPEN;
    ws->closing_next = ws->closing_prev = NONE; /* the union's nonce is spent */
    group_link(ws, 0);
    ws->server->stats.opened++;
    ws->server->stats.open++;
    if (ws->server->program.on_open != NULL) {
        ws->server->program.on_open(ws);
    }
}

int sxe__ws_open(sxe_ws_server_t *server, sxe_conn_t *conn, unsigned protocol, unsigned deflate)
{
    struct sxe_ws *ws = &server->sockets[sxe_conn_index(conn)];

    *ws = (struct sxe_ws){.server = server,
                          .conn = conn,
                          .protocol = (uint8_t)protocol,
                          .deflate = (uint8_t)deflate,
                          .reader = {.deflate = deflate != 0}};
    sxe__ws_opened(ws);
    return 0;
}

int sxe__ws_write(struct sxe_ws *ws, unsigned opcode, const void *data, size_t len)
{
    uint8_t frame[SXE__WS_HEAD_MAX + 1024], mask[4];
    const uint8_t *bytes = data;
    bool client = ws->reader.client;
    int rc;

    if (client) { /* RFC 6455 §5.3: a client masks every frame with a fresh key */
        uint64_t random = sxe__ws_random(ws->server);
        memcpy(mask, &random, 4);
    }
    size_t head = sxe__ws_frame_encode(frame, true, opcode, len, client ? mask : NULL);
    size_t room = sizeof(frame) - head;
    if (len <= room && !client) { /* small: one copy, one write */
        if (len > 0) {
            memcpy(frame + head, bytes, len);
        }
        return sxe_conn_write(ws->conn, frame, head + len);
    }
    if (!client) {
        bool corked = sxe_conn_cork(ws->conn); /* outside on_read: head and payload as one */
        rc = sxe_conn_write(ws->conn, frame, head);
        rc = rc < 0 ? rc : sxe_conn_write(ws->conn, bytes, len);
        if (corked) {
            sxe_conn_uncork(ws->conn);
        }
        return rc;
    }
    /* A client's payload is masked as it is copied, a stack buffer at a time, behind its head. */
    bool corked = sxe_conn_cork(ws->conn);
    size_t at = 0, used = head;
    rc = 0;
    do {
        size_t part = len - at < room ? len - at : room;
        if (part > 0) {
            memcpy(frame + used, bytes + at, part);
            sxe__ws_unmask(frame + used, part, mask, at);
        }
        rc = sxe_conn_write(ws->conn, frame, used + part);
        at += part;
        used = 0;
        room = sizeof(frame);
    } while (rc >= 0 && at < len);
    if (corked) {
        sxe_conn_uncork(ws->conn);
    }
    return rc;
}

/*
 * Starts the close timer. Without a free timer in the loop, sockets that wait for a close frame
 * are cut off by the loop's idle timeout instead (on_timeout keeps only open ones).
 */
static void arm(sxe_ws_server_t *server, uint64_t delay_ns)
{
    if (sxe_timer_start(server->loop, &server->close_timer, delay_ns, 0) < 0) {
        SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN, "no free timer for WebSocket close timeouts: raise %s",
                     sxe_log_setting("options.timers"));
    }
}

/* Links the socket at the end of the list of those waiting for close_timeout to pass. */
static void closing_add(struct sxe_ws *ws)
{
    sxe_ws_server_t *server = ws->server;

    ws->close_deadline = sxe_loop_now(server->loop) + server->options.close_timeout;
    ws->closing_next = NONE;
    ws->closing_prev = server->closing_tail;
    if (server->closing_tail != NONE) {
        server->sockets[server->closing_tail].closing_next = sxe__ws_index(ws);
    } else {
        server->closing_head = sxe__ws_index(ws);
        arm(server, server->options.close_timeout); /* it was idle: one timer, for the first */
    }
    server->closing_tail = sxe__ws_index(ws);
}

void sxe__ws_closing_remove(struct sxe_ws *ws)
{
    sxe_ws_server_t *server = ws->server;

    if (ws->state == WS_CONNECTING || ws->under_way) {
        return; /* its links hold the handshake's key, or a message's under way (watch.c) */
    }
    if (ws->closing_prev != NONE) {
        server->sockets[ws->closing_prev].closing_next = ws->closing_next;
    } else if (server->closing_head == sxe__ws_index(ws)) {
        server->closing_head = ws->closing_next;
    } else {
        return; /* not on the list */
    }
    if (ws->closing_next != NONE) {
        server->sockets[ws->closing_next].closing_prev = ws->closing_prev;
    } else {
        server->closing_tail = ws->closing_prev;
    }
    ws->closing_next = ws->closing_prev = NONE;
}

/* Tells the program the socket closed, once: from then on it is not the program's. */
void sxe__ws_report_close(struct sxe_ws *ws, unsigned code, const char *reason, size_t reason_len)
{
    if (ws->state == WS_DONE || ws->state == WS_FREE) {
        return;
    }
    bool was_open = ws->state != WS_CONNECTING;
    ws->state = WS_DONE;
    if (was_open) {
        ws->server->stats.open--;
        group_unlink(ws);
    } else {
        ws->closing_next = ws->closing_prev = NONE; /* the handshake's key is spent */
    }
    sxe__ws_unwatch(ws);
    if (ws->server->program.on_close != NULL) {
        ws->server->program.on_close(ws, (int)code, reason != NULL ? reason : "", reason_len);
    }
}

/* Queues a close frame with code (0: none) and reason. */
void sxe__ws_send_close(struct sxe_ws *ws, unsigned code, const char *reason, size_t reason_len)
{
    uint8_t payload[125];

    if (code != 0) {
        payload[0] = (uint8_t)(code >> 8);
        payload[1] = (uint8_t)code;
        if (reason_len > 0) {
            memcpy(payload + 2, reason, reason_len);
        }
    }
    (void)sxe__ws_write(ws, SXE__WS_CLOSE, payload, code != 0 ? 2 + reason_len : 0);
}

/*
 * Ends the socket for a reason of ours (1002, 1007, 1008, 1009): a close frame with the code, the
 * program told, and our side shut; what the peer still sends is read and dropped until it closes
 * or close_timeout passes, so that it reads our close frame rather than a reset.
 */
void sxe__ws_fail(struct sxe_ws *ws, unsigned code, const char *why)
{
    SXE_LOG_DEBUG("closing a WebSocket with %u: %s", code, why);
    if (code != SXE_WS_CLOSE_POLICY) {
        ws->server->stats.protocol_errors++;
    }
    if (ws->state == WS_OPEN) { /* one close frame a side: ours may have gone already */
        sxe__ws_send_close(ws, code, why, strlen(why));
    }
    sxe__ws_report_close(ws, code, why, strlen(why));
    (void)sxe_conn_shutdown(ws->conn);
    sxe__ws_closing_remove(ws);
    closing_add(ws);
}

void sxe__ws_start_close(struct sxe_ws *ws, unsigned code, const char *reason, size_t reason_len)
{
    sxe__ws_send_close(ws, code, reason, reason_len);
    sxe__ws_unwatch(ws); /* its links become the closing list's; close_timeout bounds it now */
    ws->state = WS_CLOSING;
    closing_add(ws);
}

/* A close frame came: answer it (unless we started), tell the program, and end the connection. */
void sxe__ws_closed_by_peer(struct sxe_ws *ws, const uint8_t *payload, size_t len)
{
    unsigned code = len >= 2 ? (unsigned)payload[0] << 8 | payload[1] : SXE_WS_CLOSE_NO_STATUS;

    if (len == 1 || (len >= 2 && !sxe__ws_code_valid(code))) {
        sxe__ws_fail(ws, SXE_WS_CLOSE_PROTOCOL, "invalid close code");
        return;
    }
    if (len > 2 && !sxe_utf8_valid(payload + 2, len - 2)) {
        sxe__ws_fail(ws, SXE_WS_CLOSE_INVALID_DATA, "close reason not UTF-8");
        return;
    }
    if (ws->state == WS_OPEN) {
        sxe__ws_send_close(ws, len >= 2 ? code : 0, NULL, 0);
    }
    sxe__ws_closing_remove(ws);
    sxe__ws_report_close(ws, code, len > 2 ? (const char *)payload + 2 : "", len > 2 ? len - 2 : 0);
    (void)sxe_conn_close_when_sent(ws->conn); /* the server closes TCP first (RFC 6455 §7.1.1) */
}

/* The sockets whose close_timeout has passed are cut off; the timer waits for the next. */
void sxe__ws_closing_expired(sxe_timer_t *timer, void *arg)
{
    sxe_ws_server_t *server = arg;
    uint64_t now = sxe_loop_now(server->loop);

    (void)timer;
    while (server->closing_head != NONE) {
        struct sxe_ws *ws = &server->sockets[server->closing_head];
        if (ws->close_deadline > now) {
            arm(server, ws->close_deadline - now);
            return;
        }
        sxe__ws_closing_remove(ws);
        sxe__ws_report_close(ws, SXE_WS_CLOSE_ABNORMAL, NULL, 0); /* our close went unanswered */
        sxe_conn_close(ws->conn);
    }
}
