/*
 * WebSocket sockets on one loop: the table, their input (frames read into messages by reader.c,
 * where they lie in the connection's buffer), control frames, and closing: the peer's, ours, a
 * failure's, and the timeout of a close that is not answered. The program's calls (sending,
 * broadcasting, closing) are in send.c.
 */
#define SXE_LOG_MODULE ws_log
#include "sxe/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/clock.h"
#include "sxe/utf8.h"
#include "websocket/ws.h"

static struct sxe_log_module ws_log = SXE_LOG_MODULE_INIT(WEBSOCKET);

#define NONE UINT32_MAX

static sxe_ws_server_t *server_of(const sxe_conn_t *conn)
{
    return (sxe_ws_server_t *)(uintptr_t)sxe_conn_handlers(conn); /* the handlers come first */
}

static uint32_t index_of(const struct sxe_ws *ws)
{
    return (uint32_t)(ws - ws->server->sockets);
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
        server->sockets[server->closing_tail].closing_next = index_of(ws);
    } else {
        server->closing_head = index_of(ws);
        arm(server, server->options.close_timeout); /* it was idle: one timer, for the first */
    }
    server->closing_tail = index_of(ws);
}

static void closing_remove(struct sxe_ws *ws)
{
    sxe_ws_server_t *server = ws->server;

    if (ws->state == WS_CONNECTING || ws->under_way) {
        return; /* its links hold the handshake's key, or a message's under way (watch.c) */
    }
    if (ws->closing_prev != NONE) {
        server->sockets[ws->closing_prev].closing_next = ws->closing_next;
    } else if (server->closing_head == index_of(ws)) {
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
        server->sockets[head].group_prev = index_of(ws);
    }
    server->group_heads[group] = index_of(ws);
}

void sxe__ws_group_move(struct sxe_ws *ws, uint32_t group)
{
    group_unlink(ws);
    group_link(ws, group);
}

/* Tells the program the socket closed, once: from then on it is not the program's. */
static void report_close(struct sxe_ws *ws, unsigned code, const char *reason, size_t reason_len)
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
static void send_close(struct sxe_ws *ws, unsigned code, const char *reason, size_t reason_len)
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
    if (code != SXE_WS_POLICY) {
        ws->server->stats.protocol_errors++;
    }
    if (ws->state == WS_OPEN) { /* one close frame a side: ours may have gone already */
        send_close(ws, code, why, strlen(why));
    }
    report_close(ws, code, why, strlen(why));
    (void)sxe_conn_shutdown(ws->conn);
    closing_remove(ws);
    closing_add(ws);
}

void sxe__ws_start_close(struct sxe_ws *ws, unsigned code, const char *reason, size_t reason_len)
{
    send_close(ws, code, reason, reason_len);
    sxe__ws_unwatch(ws); /* its links become the closing list's; close_timeout bounds it now */
    ws->state = WS_CLOSING;
    closing_add(ws);
}

/* A close frame came: answer it (unless we started), tell the program, and end the connection. */
static void closed_by_peer(struct sxe_ws *ws, const uint8_t *payload, size_t len)
{
    unsigned code = len >= 2 ? (unsigned)payload[0] << 8 | payload[1] : SXE_WS_NO_STATUS;

    if (len == 1 || (len >= 2 && !sxe__ws_code_valid(code))) {
        sxe__ws_fail(ws, SXE_WS_PROTOCOL, "invalid close code");
        return;
    }
    if (len > 2 && !sxe_utf8_valid(payload + 2, len - 2)) {
        sxe__ws_fail(ws, SXE_WS_INVALID_DATA, "close reason not UTF-8");
        return;
    }
    if (ws->state == WS_OPEN) {
        send_close(ws, len >= 2 ? code : 0, NULL, 0);
    }
    closing_remove(ws);
    report_close(ws, code, len > 2 ? (const char *)payload + 2 : "", len > 2 ? len - 2 : 0);
    (void)sxe_conn_close_when_sent(ws->conn); /* the server closes TCP first (RFC 6455 §7.1.1) */
}

/* A control frame, whole and unmasked. */
static void control(struct sxe_ws *ws, unsigned opcode, uint8_t *payload, size_t len)
{
    if (opcode == SXE__WS_CLOSE) {
        closed_by_peer(ws, payload, len);
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
        sxe__ws_fail(ws, code, code == SXE_WS_TOO_BIG ? "message too big" : "not deflate data");
        return false;
    }
    if (event->compressed && event->opcode == SXE_WS_TEXT && !sxe_utf8_valid(data, len)) {
        sxe__ws_fail(ws, SXE_WS_INVALID_DATA, "text is not UTF-8");
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

/*
 * The frames in this input, in order, each handled when it is whole (reader.c); every step (a
 * control frame, a message delivered) may close the socket, which the pass sees at once. A client
 * reads its server's 101 first.
 */
static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    sxe_ws_server_t *server = server_of(conn);
    struct sxe_ws *ws = &server->sockets[sxe_conn_index(conn)];
    uint8_t *bytes = (uint8_t *)(uintptr_t)data;

    ws->pinged = false;
    if (ws->state == WS_DONE) {
        return len; /* closed for the program: what comes is dropped until the peer goes */
    }
    if (ws->state == WS_CONNECTING) {
        return sxe__ws_client_read(ws, bytes, len);
    }
    return sxe__ws_frames(ws, bytes, len);
}

/*
 * A message outgrew the connection's buffer and no larger one could take it: every large buffer
 * was in use (1013, try again later), or the loop has none that large (1009). The core dropped the
 * input; the socket fails as for a protocol error, our side shut and the rest read and dropped.
 */
static void on_overflow(sxe_conn_t *conn)
{
    sxe_ws_server_t *server = server_of(conn);
    struct sxe_ws *ws = &server->sockets[sxe_conn_index(conn)];
    int err = errno;

    ws->reader = (struct sxe__ws_reader){.client = ws->reader.client}; /* its input is gone */
    if (ws->state == WS_OPEN || ws->state == WS_CLOSING) {
        sxe__ws_fail(ws, err == ENOBUFS ? SXE_WS_TRY_AGAIN : SXE_WS_TOO_BIG,
                     err == ENOBUFS ? "no buffer free for a message this large"
                                    : "message too big");
    }
}

static void on_connect(sxe_conn_t *conn)
{
    sxe_ws_server_t *server = server_of(conn);

    sxe__ws_client_connected(&server->sockets[sxe_conn_index(conn)]);
}

/* Silent for a timeout: pinged, and kept; silent again, or not open: closed (by the core). */
static void on_timeout(sxe_conn_t *conn)
{
    sxe_ws_server_t *server = server_of(conn);
    struct sxe_ws *ws = &server->sockets[sxe_conn_index(conn)];

    if (ws->state == WS_OPEN && !server->options.no_ping && !ws->pinged) {
        ws->pinged = true;
        server->stats.pings++;
        (void)sxe__ws_write(ws, SXE__WS_PING, NULL, 0);
        (void)sxe_conn_touch(conn);
    }
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    sxe_ws_server_t *server = server_of(conn);
    struct sxe_ws *ws = &server->sockets[sxe_conn_index(conn)];

    (void)reason;
    (void)err;
    closing_remove(ws);
    report_close(ws, SXE_WS_ABNORMAL, NULL, 0);
    sxe__ws_unwatch(ws); /* a message may have begun after it closed for the program */
    ws->state = WS_FREE;
    ws->conn = NULL;
    ws->user = NULL;
}

/* The sockets whose close_timeout has passed are cut off; the timer waits for the next. */
static void closing_expired(sxe_timer_t *timer, void *arg)
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
        closing_remove(ws);
        report_close(ws, SXE_WS_ABNORMAL, NULL, 0); /* our close went unanswered */
        sxe_conn_close(ws->conn);
    }
}

/* The loop begins to stop: every open socket is told (1001), and its close frame drains. */
static void going_away(void *arg)
{
    sxe_ws_server_t *server = arg;

    for (uint32_t i = 0; i < server->socket_count; i++) {
        struct sxe_ws *ws = &server->sockets[i];
        if (ws->state == WS_OPEN) {
            send_close(ws, SXE_WS_GOING_AWAY, NULL, 0);
            report_close(ws, SXE_WS_GOING_AWAY, NULL, 0);
        }
    }
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

int sxe_ws_server_create(sxe_ws_server_t **server_out, sxe_http_server_t *http,
                         const struct sxe_ws_handlers *handlers,
                         const struct sxe_ws_options *options)
{
    /* An HTTP server with workers has no loop of its own. */
    sxe_loop_t *loop = http != NULL ? sxe_http_server_loop(http) : NULL;

    if (!SXE_CHECK(loop != NULL)) {
        return -EINVAL;
    }
    return sxe__ws_make(server_out, loop, http, handlers, options);
}

int sxe__ws_make(sxe_ws_server_t **server_out, sxe_loop_t *loop, sxe_http_server_t *http,
                 const struct sxe_ws_handlers *handlers, const struct sxe_ws_options *options)
{
    static const struct sxe_ws_options defaults;
    sxe_ws_server_t *server;

    options = options != NULL ? options : &defaults;
    if (!SXE_CHECK(server_out != NULL && loop != NULL && handlers != NULL)) {
        return -EINVAL;
    }
    if ((server = calloc(1, sizeof(*server))) == NULL) {
        return -ENOMEM;
    }
    const struct sxe_loop_options *in_force = sxe_loop_options(loop);
    uint32_t largest =
        in_force->large_buffers > 0 ? in_force->large_buffer_size : in_force->buffer_size;
    server->options = *options;
    struct sxe_ws_options *set = &server->options;
    set->message_bytes = set->message_bytes ? set->message_bytes : 1u << 20;
    /* A message (compressed, it may be a little larger), a frame head, a ping behind. */
    uint64_t room = largest > 512 ? largest - 256 : largest / 2;
    if (SXE__WS_DEFLATED_MOST((uint64_t)set->message_bytes) > room) {
        set->message_bytes = room > 64 ? (uint32_t)((room - 64) * 1024 / 1025) : 1;
    }
    set->queue_bytes = set->queue_bytes ? set->queue_bytes : 1u << 20;
    set->queue_bytes =
        set->queue_bytes < in_force->write_limit ? set->queue_bytes : in_force->write_limit;
    set->close_timeout = set->close_timeout ? set->close_timeout : 5 * SXE_NS_PER_SEC;
    set->message_timeout = set->message_timeout ? set->message_timeout : 30 * SXE_NS_PER_SEC;
    set->message_rate = set->message_rate ? set->message_rate : 16384;
    set->groups = set->groups ? set->groups : 16;
    set->broadcasts = set->broadcasts ? set->broadcasts : 64;
    set->broadcast_bytes = set->broadcast_bytes ? set->broadcast_bytes : 65536;
    server->handlers = (struct sxe_conn_handlers){.on_connect = on_connect,
                                                  .on_read = on_read,
                                                  .on_close = on_close,
                                                  .on_timeout = on_timeout,
                                                  .on_overflow = on_overflow};
    server->program = *handlers;
    server->http = http;
    server->loop = loop;
    server->socket_count = in_force->connections;
    server->closing_head = server->closing_tail = NONE;
    sxe__ws_seed(server);
    sxe_timer_init(&server->close_timer, closing_expired, server);
    int rc = sxe__ws_watch_init(server, in_force);
    server->sockets = calloc(server->socket_count, sizeof(*server->sockets));
    server->group_heads = malloc(set->groups * sizeof(*server->group_heads));
    server->broadcasts = calloc(set->broadcasts, sizeof(*server->broadcasts));
    server->broadcast_memory =
        calloc(set->broadcasts, (size_t)set->broadcast_bytes + SXE__WS_HEAD_MAX);
    if (rc < 0 || server->sockets == NULL || server->group_heads == NULL ||
        server->broadcasts == NULL || server->broadcast_memory == NULL) {
        sxe_ws_server_destroy(server);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < set->groups; i++) {
        server->group_heads[i] = NONE;
    }
    for (uint32_t i = 0; i < set->broadcasts; i++) {
        server->broadcasts[i].frame =
            server->broadcast_memory + (size_t)i * (set->broadcast_bytes + SXE__WS_HEAD_MAX);
    }
    rc = set->deflate ? sxe__ws_deflate_create(server) : 0;
    if (rc < 0 || (rc = sxe_loop_at_stop(loop, going_away, server)) < 0) {
        sxe_ws_server_destroy(server);
        return rc;
    }
    *server_out = server;
    return 0;
}

void sxe_ws_server_destroy(sxe_ws_server_t *server)
{
    if (server == NULL) {
        return;
    }
    for (uint32_t i = 0; server->sockets != NULL && i < server->socket_count; i++) {
        struct sxe_ws *ws = &server->sockets[i];
        if (ws->state != WS_FREE) {
            if (ws->state == WS_OPEN) {
                send_close(ws, SXE_WS_GOING_AWAY, NULL, 0);
            }
            report_close(ws, SXE_WS_GOING_AWAY, NULL, 0);
            sxe_conn_close(ws->conn); /* its on_close frees the slot */
        }
    }
    if (server->loop != NULL) {
        sxe_timer_stop(server->loop, &server->close_timer);
        (void)sxe_loop_at_stop(server->loop, NULL, server);
    }
    sxe__ws_watch_fini(server);
    free(server->sockets);
    free(server->group_heads);
    free(server->broadcasts);
    free(server->broadcast_memory);
    sxe__ws_deflate_destroy(server);
    free(server);
}
