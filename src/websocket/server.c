/*
 * WebSocket sets of sockets on one loop, a server's or a client's: made, destroyed, and the
 * handlers of every socket's connection (its input, an overflow, a client's connect, an idle
 * timeout, the close), which is how the loop reaches the rest of the module: the input (input.c),
 * a client's handshake (client.c), a socket's life (socket.c). The program's calls (sending,
 * broadcasting, closing) are in send.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/clock.h"
#include "sxe/log.h"
#include "websocket/ws.h"

#define NONE UINT32_MAX

static sxe_ws_server_t *server_of(const sxe_conn_t *conn)
{
    return (sxe_ws_server_t *)(uintptr_t)sxe_conn_handlers(conn); /* the handlers come first */
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
        sxe__ws_fail(ws, err == ENOBUFS ? SXE_WS_CLOSE_TRY_AGAIN : SXE_WS_CLOSE_TOO_BIG,
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

static void free_set(sxe_ws_server_t *server);

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    sxe_ws_server_t *server = server_of(conn);
    struct sxe_ws *ws = &server->sockets[sxe_conn_index(conn)];

    (void)reason;
    sxe__ws_closing_remove(ws);
    /* a connect that failed (a name not found, a refusal) says why: its error's text */
    const char *why = ws->state == WS_CONNECTING && err != 0 ? sxe_strerror(err) : NULL;
    sxe__ws_report_close(ws, SXE_WS_CLOSE_ABNORMAL, why, why != NULL ? strlen(why) : 0);
    sxe__ws_unwatch(ws); /* a message may have begun after it closed for the program */
    ws->state = WS_FREE;
    ws->conn = NULL;
    ws->user = NULL;
    if (server->doomed != 0 && --server->doomed == 0) {
        free_set(server); /* destroyed in this turn, and this was the last close it waited for */
    }
}

/* The loop begins to stop: every open socket is told (1001), and its close frame drains. */
static void going_away(void *arg)
{
    sxe_ws_server_t *server = arg;

    for (uint32_t i = 0; i < server->socket_count; i++) {
        struct sxe_ws *ws = &server->sockets[i];
        if (ws->state == WS_OPEN) {
            sxe__ws_send_close(ws, SXE_WS_CLOSE_GOING_AWAY, NULL, 0);
            sxe__ws_report_close(ws, SXE_WS_CLOSE_GOING_AWAY, NULL, 0);
        }
    }
}

/* Makes a set of sockets on loop, with http for a server's routes (NULL for clients). */
static int make(sxe_ws_server_t **server_out, size_t size, sxe_loop_t *loop,
                sxe_http_server_t *http, const struct sxe_ws_handlers *handlers,
                const struct sxe_ws_options *options)
{
    static const struct sxe_ws_options defaults;
    sxe_ws_server_t *server;

    options = options != NULL ? options : &defaults;
    if (!SXE_CHECK(server_out != NULL && loop != NULL && handlers != NULL)) {
        return -EINVAL;
    }
    if ((server = calloc(1, size)) == NULL) {
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
    set->broadcasts = http == NULL ? 0 : set->broadcasts ? set->broadcasts : 64; /* clients: none */
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
    sxe_timer_init(&server->close_timer, sxe__ws_closing_expired, server);
    int rc = sxe__ws_watch_init(server, in_force);
    server->sockets = calloc(server->socket_count, sizeof(*server->sockets));
    server->group_heads = malloc(set->groups * sizeof(*server->group_heads));
    if (set->broadcasts > 0) {
        server->broadcasts = calloc(set->broadcasts, sizeof(*server->broadcasts));
        server->broadcast_memory =
            calloc(set->broadcasts, (size_t)set->broadcast_bytes + SXE__WS_HEAD_MAX);
    }
    if (rc < 0 || server->sockets == NULL || server->group_heads == NULL ||
        (set->broadcasts > 0 && (server->broadcasts == NULL || server->broadcast_memory == NULL))) {
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

int sxe_ws_server_create(sxe_ws_server_t **server_out, sxe_http_server_t *http,
                         const struct sxe_ws_handlers *handlers,
                         const struct sxe_ws_options *options)
{
    /* An HTTP server with workers has no loop of its own. */
    sxe_loop_t *loop = http != NULL ? sxe_http_server_loop(http) : NULL;

    if (!SXE_CHECK(loop != NULL)) {
        return -EINVAL;
    }
    return make(server_out, sizeof(struct sxe_ws_server), loop, http, handlers, options);
}

int sxe_ws_client_create(sxe_ws_client_t **client, sxe_loop_t *loop,
                         const struct sxe_ws_handlers *handlers,
                         const struct sxe_ws_options *options)
{
    sxe_ws_server_t *set;
    int rc;

    if (!SXE_CHECK(client != NULL)) {
        return -EINVAL;
    }
    if ((rc = make(&set, sizeof(struct sxe_ws_client), loop, NULL, handlers, options)) == 0) {
        *client = (struct sxe_ws_client *)set; /* its first member */
    }
    return rc;
}

void sxe_ws_client_stats(const sxe_ws_client_t *client, struct sxe_ws_server_stats *stats)
{
    sxe_ws_server_stats(&client->set, stats);
}

void sxe_ws_client_destroy(sxe_ws_client_t *client)
{
    if (client == NULL) {
        return;
    }
    sxe_resolver_t *resolver = client->own_resolver;
    sxe_tls_t *tls = client->own_tls;
    /* its sockets are closed; client is freed now, or when the closes under way have ended */
    sxe_ws_server_destroy(&client->set);
    sxe_resolver_destroy(resolver); /* names still asked: their closed connections are left */
    sxe_tls_destroy(tls);
}

/* What a socket's connection does once its set is destroyed: nothing. */
static const struct sxe_conn_handlers orphaned = {0};

void sxe_ws_server_destroy(sxe_ws_server_t *server)
{
    if (server == NULL) {
        return;
    }
    uint32_t closing = 0; /* connections closed already, whose on_close is still to come */
    for (uint32_t i = 0; server->sockets != NULL && i < server->socket_count; i++) {
        struct sxe_ws *ws = &server->sockets[i];
        if (ws->state != WS_FREE) {
            if (ws->state == WS_OPEN) {
                sxe__ws_send_close(ws, SXE_WS_CLOSE_GOING_AWAY, NULL, 0);
            }
            sxe__ws_report_close(ws, SXE_WS_CLOSE_GOING_AWAY, NULL, 0);
            sxe__ws_unwatch(ws); /* (one closed earlier may still hold a large buffer) */
            /* Inside a turn a close ends once the callback under way returns, after this: the
             * connection's on_close must then not find the set. One closed earlier in the turn
             * keeps its handlers (a closed connection takes no others): the set waits for it. */
            if (sxe_conn_set_handlers(ws->conn, &orphaned) < 0) {
                closing++;
            }
            sxe_conn_close(ws->conn);
        }
    }
    if (server->loop != NULL) {
        sxe_timer_stop(server->loop, &server->close_timer);
        (void)sxe_loop_at_stop(server->loop, NULL, server);
    }
    sxe__ws_watch_fini(server);
    server->doomed = closing;
    if (closing == 0) {
        free_set(server);
    }
}

/* Frees a destroyed set's memory. */
static void free_set(sxe_ws_server_t *server)
{
    free(server->sockets);
    free(server->group_heads);
    free(server->broadcasts);
    free(server->broadcast_memory);
    sxe__ws_deflate_destroy(server);
    free(server);
}
