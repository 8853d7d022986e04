/*
 * WebSocket sockets, the program's side: the handshake routes, sending to one socket, broadcasting
 * to a group (one frame, sent by reference to all), closing, and the accessors.
 */
#define SXE_LOG_MODULE ws_log
#include "sxe/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sxe/utf8.h"
#include "websocket/ws.h"

static struct sxe_log_module ws_log = SXE_LOG_MODULE_INIT(WEBSOCKET);

/* The index of a sub-protocol's name in the server's table, added if new; 0xff for none. */
int sxe__ws_protocol_index(sxe_ws_server_t *server, const char *protocol)
{
    if (protocol == NULL || protocol[0] == '\0') {
        return 0xff;
    }
    for (unsigned i = 0; i < server->protocol_count; i++) {
        if (strcmp(server->protocol_names[i], protocol) == 0) {
            return (int)i;
        }
    }
    if (server->protocol_count == SXE__WS_PROTOCOLS ||
        strlen(protocol) >= sizeof(server->protocol_names[0])) {
        return -ENOBUFS;
    }
    snprintf(server->protocol_names[server->protocol_count], sizeof(server->protocol_names[0]),
             "%s", protocol);
    return (int)server->protocol_count++;
}

int sxe_ws_server_accept(sxe_ws_server_t *server, sxe_http_t *http, const char *protocol,
                         sxe_ws_t **ws)
{
    int index, rc;

    if (ws != NULL) {
        *ws = NULL;
    }
    if (!SXE_CHECK(server != NULL && http != NULL)) {
        return -EINVAL;
    }
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    if (protocol != NULL && protocol[0] != '\0' &&
        !sxe__ws_has_token(request->headers, request->header_count, "Sec-WebSocket-Protocol",
                           protocol, strlen(protocol))) {
        SXE_LOG_ERROR("the sub-protocol %s was not offered by the client", protocol);
        (void)sxe_http_respond(http, 500, "text/plain", "500 Internal Server Error\n", 26);
        return -EINVAL;
    }
    if ((index = sxe__ws_protocol_index(server, protocol)) < 0) {
        (void)sxe_http_respond(http, 500, "text/plain", "500 Internal Server Error\n", 26);
        return index;
    }
    sxe_conn_t *conn = sxe_http_conn(http);
    char extensions[160] = "";
    int deflate = server->options.deflate
                      ? sxe__ws_deflate_negotiate(request, extensions, sizeof(extensions))
                      : 0;
    if ((rc = sxe__ws_handshake(http, protocol, extensions, &server->handlers)) < 0) {
        server->stats.refused += rc == -EPROTO;
        return rc;
    }
    (void)sxe__ws_open(server, conn, (unsigned)index, (unsigned)deflate);
    if (sxe_conn_closed(conn)) {
        return -EPIPE; /* closed by on_open */
    }
    if (ws != NULL) {
        *ws = &server->sockets[sxe_conn_index(conn)];
    }
    return 0;
}

/* A route's handshake: the first of the route's sub-protocols that the client offers. */
static void handshake(sxe_http_t *http, void *arg)
{
    struct route *route = arg;
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    char chosen[sizeof(route->protocols)] = "";

    for (const char *at = route->protocols; *at != '\0';) {
        size_t len = strcspn(at, ",");
        if (len > 0 && len < sizeof(chosen) &&
            sxe__ws_has_token(request->headers, request->header_count, "Sec-WebSocket-Protocol", at,
                              len)) {
            memcpy(chosen, at, len);
            chosen[len] = '\0';
            break;
        }
        at += len + (at[len] == ',');
    }
    (void)sxe_ws_server_accept(route->server, http, chosen, NULL);
}

int sxe_ws_server_route(sxe_ws_server_t *server, const char *path, const char *protocols)
{
    if (!SXE_CHECK(
            server != NULL && path != NULL &&
            (protocols == NULL || strlen(protocols) < sizeof(server->routes[0].protocols)))) {
        return -EINVAL;
    }
    if (server->route_count == SXE__WS_ROUTES) {
        return -ENOBUFS;
    }
    struct route *route = &server->routes[server->route_count];
    route->server = server;
    snprintf(route->protocols, sizeof(route->protocols), "%s", protocols ? protocols : "");
    int rc = sxe_http_server_route(server->http, "GET", path, 0, handshake, route);
    server->route_count += rc == 0;
    return rc;
}

/*
 * Whether len more bytes may be queued to the socket. If not, the slow reader is closed with
 * 1008, or, with drop_when_full, the message is dropped; either is counted.
 */
static bool room_for(struct sxe_ws *ws, size_t len)
{
    sxe_ws_server_t *server = ws->server;

    if (sxe_conn_queued(ws->conn) + len <= server->options.queue_bytes) {
        return true;
    }
    if (server->options.drop_when_full) {
        server->stats.dropped++;
        return false;
    }
    server->stats.slow_closed++;
    SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN,
                 "a WebSocket peer reads too slowly (%u bytes queued): closing it with 1008",
                 server->options.queue_bytes);
    sxe__ws_fail(ws, SXE_WS_CLOSE_POLICY, "reading too slowly");
    return false;
}

/* Checks a message the program sends. @return 0, -EMSGSIZE or -EILSEQ. */
static int check_message(enum sxe_ws_type type, const void *data, size_t len, size_t most)
{
    if (len > most) {
        return -EMSGSIZE;
    }
    if (type == SXE_WS_TEXT && !sxe_utf8_valid(data, len)) {
        SXE_ASSERT(!"WebSocket text must be UTF-8");
        return -EILSEQ;
    }
    return 0;
}

int sxe_ws_send(sxe_ws_t *ws, enum sxe_ws_type type, const void *data, size_t len)
{
    int rc;

    if (!SXE_CHECK(ws != NULL && (type == SXE_WS_TEXT || type == SXE_WS_BINARY) &&
                   (data != NULL || len == 0))) {
        return -EINVAL;
    }
    if (ws->state != WS_OPEN) {
        return -EPIPE;
    }
    if ((rc = check_message(type, data, len, ws->server->options.message_bytes)) < 0) {
        return rc;
    }
    if (!room_for(ws, SXE__WS_HEAD_MAX + len)) {
        return -ENOBUFS;
    }
    ws->server->stats.messages_out++;
    size_t deflated_len;
    const uint8_t *deflated =
        ws->deflate != 0 && len >= 32
            ? sxe__ws_deflate(ws->server, ws->deflate, data, len, &deflated_len)
            : NULL;
    /* Output backed up (sxe_conn_backed_up()) is not the program's to wait for: the module bounds
     * slow readers itself (room_for). */
    return deflated != NULL ? sxe__ws_write(ws, SXE__WS_RSV1 | type, deflated, deflated_len)
                            : sxe__ws_write(ws, type, data, len);
}

static void broadcast_release(void *arg)
{
    struct broadcast *broadcast = arg;

    broadcast->refs--;
}

int sxe_ws_server_broadcast(sxe_ws_server_t *server, uint32_t group, enum sxe_ws_type type,
                            const void *data, size_t len, const sxe_ws_t *except)
{
    struct broadcast *broadcast = NULL;
    int rc, count = 0;

    if (!SXE_CHECK(server != NULL && (type == SXE_WS_TEXT || type == SXE_WS_BINARY) &&
                   (data != NULL || len == 0)) ||
        group >= server->options.groups) {
        return -EINVAL;
    }
    if ((rc = check_message(type, data, len, server->options.broadcast_bytes)) < 0) {
        return rc;
    }
    for (uint32_t i = 0; i < server->options.broadcasts && broadcast == NULL; i++) {
        broadcast = server->broadcasts[i].refs == 0 ? &server->broadcasts[i] : NULL;
    }
    if (broadcast == NULL) {
        SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN, "every broadcast frame is in flight (%u): raise %s",
                     server->options.broadcasts, "sxe_ws_options.broadcasts");
        return -ENOBUFS;
    }
    size_t head = sxe__ws_frame_encode(broadcast->frame, true, type, len, NULL);
    if (len > 0) {
        memcpy(broadcast->frame + head, data, len);
    }
    broadcast->len = (uint32_t)(head + len);
    broadcast->refs = 1; /* ours, while we go: a send that completes at once releases its own */
    for (uint32_t at = server->group_heads[group]; at != UINT32_MAX;) {
        struct sxe_ws *ws = &server->sockets[at];
        at = ws->group_next; /* before a slow reader's close unlinks it */
        if (ws == except || ws->state != WS_OPEN || !room_for(ws, broadcast->len)) {
            continue;
        }
        broadcast->refs++;
        (void)sxe_conn_write_ref(ws->conn, broadcast->frame, broadcast->len, broadcast_release,
                                 broadcast);
        server->stats.messages_out++;
        count++;
    }
    broadcast->refs--;
    return count;
}

int sxe_ws_join(sxe_ws_t *ws, uint32_t group)
{
    if (!SXE_CHECK(ws != NULL) || ws->state != WS_OPEN || group >= ws->server->options.groups) {
        return -EINVAL;
    }
    sxe__ws_group_move(ws, group);
    return 0;
}

int sxe_ws_close(sxe_ws_t *ws, int code, const char *reason)
{
    size_t reason_len = reason != NULL ? strlen(reason) : 0;

    if (!SXE_CHECK(ws != NULL && code >= 0 && sxe__ws_code_valid((unsigned)code) &&
                   reason_len <= 123 && sxe_utf8_valid(reason, reason_len))) {
        return -EINVAL;
    }
    if (ws->state != WS_OPEN) {
        return -EPIPE;
    }
    sxe__ws_start_close(ws, (unsigned)code, reason, reason_len);
    return 0;
}

const char *sxe_ws_protocol(const sxe_ws_t *ws)
{
    return ws->protocol == 0xff ? "" : ws->server->protocol_names[ws->protocol];
}

void *sxe_ws_user(const sxe_ws_t *ws)
{
    return ws->user;
}

void sxe_ws_set_user(sxe_ws_t *ws, void *user)
{
    ws->user = user;
}

sxe_conn_t *sxe_ws_conn(const sxe_ws_t *ws)
{
    return ws->conn;
}

sxe_ws_server_t *sxe_ws_server_of(const sxe_ws_t *ws)
{
    return ws->server->http != NULL ? ws->server : NULL;
}

void sxe_ws_server_stats(const sxe_ws_server_t *server, struct sxe_ws_server_stats *stats)
{
    *stats = server->stats;
}
