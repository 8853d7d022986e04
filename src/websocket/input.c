/*
 * A WebSocket socket's input: the frames of one read, each handled when it is whole (reader.c,
 * where it lies in the connection's buffer): a whole message to the program, inflated first if it
 * came compressed; a control frame answered. Every step may close the socket, which the pass sees
 * at once. What is left of a message under way is watched (watch.c).
 */
#include "sxe/utf8.h"
#include "websocket/ws.h"

/* A control frame, whole and unmasked. */
static void control(struct sxe_ws *ws, unsigned opcode, uint8_t *payload, size_t len)
{
    if (opcode == SXE__WS_CLOSE) {
        sxe__ws_closed_by_peer(ws, payload, len);
    } else if (opcode == SXE__WS_PING && ws->state == WS_OPEN) {
        (void)sxe__ws_write(ws, SXE__WS_PONG, payload, len);
    }
    /* A pong is proof of life, as any frame is (pinged was cleared). */
}

/* A whole message to the program, inflated first if it came compressed. @return false if the
 * socket failed instead. */
static bool deliver(struct sxe_ws *ws, const struct sxe__ws_event *event)
{
    const uint8_t *data = event->data;
    size_t len = event->len;
    unsigned code;

    if (event->compressed &&
        (data = sxe__ws_inflate(ws->server, event->data, event->len, &len, &code)) == NULL) {
        sxe__ws_fail(ws, code,
                     code == SXE_WS_CLOSE_TOO_BIG ? "message too big" : "not deflate data");
        return false;
    }
    if (event->compressed && event->opcode == SXE_WS_TEXT && !sxe_utf8_valid(data, len)) {
        sxe__ws_fail(ws, SXE_WS_CLOSE_INVALID_DATA, "text is not UTF-8");
        return false;
    }
    ws->server->stats.messages_in++;
    if (ws->server->program.on_message != NULL) {
        ws->server->program.on_message(ws, (enum sxe_ws_type)event->opcode, (const char *)data,
                                       len);
    }
    return true;
}

size_t sxe__ws_frames(struct sxe_ws *ws, uint8_t *bytes, size_t len)
{
    sxe_ws_server_t *server = ws->server;
    sxe_conn_t *conn = ws->conn;
    size_t at = ws->reader.assembled;
    struct sxe__ws_event event;
    bool delivered = false;
    int got;

    while (at < len &&
           (got = sxe__ws_read(&ws->reader, bytes, len, &at, server->options.message_bytes,
                               &event)) != SXE__WS_MORE) {
        if (got == SXE__WS_ERROR) {
            sxe__ws_fail(ws, event.code, event.error);
            return len;
        }
        if (got == SXE__WS_CONTROL) {
            control(ws, event.opcode, event.data, event.len);
        } else if (got == SXE__WS_MESSAGE && ws->state == WS_OPEN) {
            if (!deliver(ws, &event)) {
                return len; /* it would not inflate: failed */
            }
            delivered = true;
        }
        if (sxe_conn_closed(conn) || ws->state == WS_DONE) {
            return len; /* closed by the program, or by the peer's close frame */
        }
    }
    size_t used = sxe__ws_read_done(&ws->reader, bytes, at);
    sxe__ws_watch(ws, len - used, delivered);
    return used;
}
