/*
 * sxe's side of bench/websocket: echo at /, broadcast at /chat (every message to every socket of
 * /chat, one frame sent by reference to all), the same as bench/peers/node-ws.js.
 * Usage: ws-server IP:PORT
 */
#include <stdio.h>
#include <sxe/sxe.h>

#define CHAT 1 /* the broadcast group */

static sxe_ws_server_t *ws;

static void on_message(sxe_ws_t *socket, enum sxe_ws_type type, const char *data, size_t len)
{
    if (sxe_ws_user(socket) == NULL) {
        (void)sxe_ws_send(socket, type, data, len);
    } else {
        (void)sxe_ws_server_broadcast(ws, CHAT, type, data, len, NULL);
    }
}

static void chat(sxe_http_t *http, void *arg)
{
    sxe_ws_t *socket;

    (void)arg;
    if (sxe_ws_server_accept(ws, http, NULL, &socket) == 0) {
        sxe_ws_set_user(socket, ws); /* marks it a chat socket */
        (void)sxe_ws_join(socket, CHAT);
    }
}

int main(int argc, char **argv)
{
    static const struct sxe_ws_handlers handlers = {.on_message = on_message};
    struct sxe_http_server_options options = {.loop = {.connections = 20000}};
    sxe_http_server_t *http;
    int rc;

    if ((rc = sxe_http_server_create(&http, NULL, &options)) < 0 ||
        (rc = sxe_ws_server_create(&ws, http, &handlers, NULL)) < 0 ||
        (rc = sxe_ws_server_route(ws, "/", NULL)) < 0 ||
        (rc = sxe_http_server_route(http, "GET", "/chat", 0, chat, NULL)) < 0 ||
        (rc = sxe_http_server_listen(http, argc > 1 ? argv[1] : "127.0.0.1:8080")) < 0) {
        fprintf(stderr, "ws-server: %s\n", sxe_strerror(rc));
        return 1;
    }
    rc = sxe_http_server_run(http);
    sxe_ws_server_destroy(ws);
    sxe_http_server_destroy(http);
    return rc < 0;
}
