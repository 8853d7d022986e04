/* A chat room: GET / serves the page PAGE, read once at start-up, and every text message sent on
 * the WebSocket /chat goes to everyone as "guest-N: message", joins and leaves announced too.
 * Usage: ws-chat [--redis HOST:PORT] [IP:PORT [PAGE [CERT KEY]]] (127.0.0.1:8080, ws-chat.html);
 * given a certificate and its key (PEM files), the page and the socket are served over TLS:
 * https:// and wss://. With --redis, every line goes through the Redis channel "ws-chat" and what
 * it brings goes to this process's guests: several ws-chat processes, on several machines, make
 * one room, each line in the same order everywhere; guests are then guest-NODE.N, NODE a number
 * Redis gives each process. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sxe/sxe.h>

#ifndef WS_CHAT_PAGE
#define WS_CHAT_PAGE "ws-chat.html"
#endif

static char page[1 << 16];
static size_t page_len;
static uintptr_t guests; /* each socket's user pointer is its guest number */
static sxe_ws_server_t *room;
static sxe_redis_t *redis; /* with --redis */
static long long node;     /* with --redis: this process's number, from Redis */

static void published(void *arg, int status, const struct sxe_redis_reply *reply)
{
    (void)arg, (void)reply;
    if (status < 0) /* Redis is unreachable (the client tries again): the line is lost */
        fprintf(stderr, "ws-chat: a line was not published: %s\n", sxe_strerror(status));
}

/* A line from the channel: to every guest of this process. */
static void heard(void *arg, const char *channel, size_t channel_len, const char *line, size_t len)
{
    (void)arg, (void)channel, (void)channel_len;
    if (room != NULL) /* not while joining */
        (void)sxe_ws_server_broadcast(room, 0, SXE_WS_TEXT, line, len, NULL);
}

/* Broadcasts "guest-N", what and text to every socket but except (or, with Redis, publishes it
 * to every process's sockets: except is closing by the time it comes back). */
static void tell(sxe_ws_t *ws, const char *what, const char *text, size_t len, sxe_ws_t *except)
{
    static char line[1 << 16]; /* a broadcast's most: messages are at most 60000 bytes */
    int head =
        node ? snprintf(line, sizeof(line), "guest-%lld.%zu%s", node, (size_t)sxe_ws_user(ws), what)
             : snprintf(line, sizeof(line), "guest-%zu%s", (size_t)sxe_ws_user(ws), what);

    memcpy(line + head, text, len);
    if (redis == NULL) {
        (void)sxe_ws_server_broadcast(room, 0, SXE_WS_TEXT, line, (size_t)head + len, except);
        return;
    }
    const char *publish[] = {"PUBLISH", "ws-chat", line};
    size_t lens[] = {7, 7, (size_t)head + len};
    if (sxe_redis_command(redis, published, NULL, 3, publish, lens) < 0) /* too many out */
        fprintf(stderr, "ws-chat: a line was not published: Redis is behind\n");
}

static void numbered(void *arg, int status, const struct sxe_redis_reply *reply)
{
    (void)arg;
    node = status == 0 && reply->type == SXE_REDIS_INTEGER ? reply->integer : -1;
}

/* Joins the room on Redis at address: a number for this process, and the channel subscribed. */
static int join(sxe_loop_t *loop, const char *address)
{
    struct sxe_redis_stats stats = {0};
    uint64_t deadline = sxe_clock_mono_ns() + 5 * SXE_NS_PER_SEC;
    int rc;

    if ((rc = sxe_redis_create(&redis, loop, address, NULL)) < 0 ||
        (rc = sxe_redis_command(redis, numbered, NULL, 2, (const char *[]){"INCR", "ws-chat:nodes"},
                                NULL)) < 0 ||
        (rc = sxe_redis_subscribe(redis, "ws-chat", 0, heard, NULL)) < 0)
        return rc;
    while ((node == 0 || stats.subscribed == 0) && node >= 0 && sxe_clock_mono_ns() < deadline) {
        (void)sxe_loop_run_once(loop, 100 * SXE_NS_PER_MSEC);
        sxe_redis_stats(redis, &stats);
    }
    return node > 0 && stats.subscribed == 1 ? 0 : node < 0 ? -ECONNREFUSED : -ETIMEDOUT;
}

static void joined(sxe_ws_t *ws)
{
    sxe_ws_set_user(ws, (void *)++guests);
    tell(ws, " joined", "", 0, NULL);
}

static void said(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
{
    if (type == SXE_WS_TEXT) {
        tell(ws, ": ", data, len, NULL);
    }
}

static void left(sxe_ws_t *ws, int code, const char *reason, size_t reason_len)
{
    (void)code, (void)reason, (void)reason_len;
    tell(ws, " left", "", 0, ws); /* a closing socket takes no more messages */
}

static void home(sxe_http_t *http, void *arg)
{
    sxe_http_respond(http, 200, "text/html; charset=utf-8", arg, page_len);
}

int main(int argc, char **argv)
{
    const char *store = argc > 2 && strcmp(argv[1], "--redis") == 0 ? argv[2] : NULL;
    argc -= store ? 2 : 0, argv += store ? 2 : 0; /* the rest as without it */
    struct sxe_ws_handlers chat = {.on_open = joined, .on_message = said, .on_close = left};
    struct sxe_ws_options options = {.message_bytes = 60000}; /* with a name, under 64 KiB */
    const char *path = argc > 2 ? argv[2] : WS_CHAT_PAGE;
    FILE *file = fopen(path, "rb");
    const char *cert = argc > 4 ? argv[3] : NULL, *key = argc > 4 ? argv[4] : NULL;
    struct sxe_tls_options certificate = {.certificate = cert, .key = key};
    struct sxe_http_server_options secure = {0}; /* .tls: NULL, or the certificate's context */
    const char *address = argc > 1 ? argv[1] : "127.0.0.1:8080";
    sxe_http_server_t *http = NULL;
    sxe_ws_server_t *ws = NULL;
    int rc;

    if (file == NULL || (page_len = fread(page, 1, sizeof(page), file)) == sizeof(page) ||
        ferror(file)) {
        fprintf(stderr, "ws-chat: cannot read %s, a page of less than 64 KiB\n", path);
        return 1;
    }
    fclose(file);
    if (cert != NULL && (rc = sxe_tls_server_create(&secure.tls, &certificate)) < 0) {
        fprintf(stderr, "ws-chat: no TLS with %s and %s: %s\n", cert, key, sxe_strerror(rc));
        return 1; /* the log said why */
    }
    if ((rc = sxe_http_server_create(&http, NULL, &secure)) == 0 && store &&
        (rc = join(sxe_http_server_loop(http), store)) < 0) {
        fprintf(stderr, "ws-chat: cannot join the room on Redis at %s: %s\n", store,
                sxe_strerror(rc));
    } else if (rc < 0 || (rc = sxe_ws_server_create(&ws, http, &chat, &options)) < 0 ||
               (rc = sxe_http_server_route(http, "GET", "/", 0, home, page)) < 0 ||
               (rc = sxe_ws_server_route(ws, "/chat", NULL)) < 0 ||
               (rc = sxe_http_server_listen(http, address)) < 0) {
        fprintf(stderr, "ws-chat: cannot serve on %s: %s\n", address, sxe_strerror(rc));
    } else {
        room = ws;
        rc = sxe_http_server_run(http);
    }
    sxe_redis_destroy(redis);
    sxe_ws_server_destroy(ws);
    sxe_http_server_destroy(http);
    sxe_tls_destroy(secure.tls);
    return rc < 0;
}
