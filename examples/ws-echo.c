/* A WebSocket echo server: every message comes back as it was sent, text as text. Usage:
 * ws-echo [IP:PORT [MESSAGE_BYTES]] (127.0.0.1:8080, 1 MiB); sub-protocols "echo" and "chat", and
 * permessage-deflate for clients that offer it. */
#include <stdio.h>
#include <stdlib.h>
#include <sxe/sxe.h>

static void echo(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
{
    (void)sxe_ws_send(ws, type, data, len); /* a slow reader is closed by the module */
}

int main(int argc, char **argv)
{
    uint32_t most = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 1u << 20;
    /* Messages wait whole in the HTTP server's buffers: its body limit sizes the large ones, and
     * 64 of them (reserved, touched only when used) let 64 sockets send large messages at once. */
    struct sxe_http_server_options http_options = {.limits = {.body_bytes = most},
                                                   .large_bodies = 64};
    struct sxe_ws_options options = {
        .message_bytes = most, .queue_bytes = 2 * most + 1024, .deflate = true};
    static const struct sxe_ws_handlers handlers = {.on_message = echo};
    const char *address = argc > 1 ? argv[1] : "127.0.0.1:8080";
    sxe_http_server_t *http = NULL;
    sxe_ws_server_t *ws = NULL;
    int rc;

    if ((rc = sxe_http_server_create(&http, NULL, &http_options)) < 0 ||
        (rc = sxe_ws_server_create(&ws, http, &handlers, &options)) < 0 ||
        (rc = sxe_ws_server_route(ws, "/", "echo,chat")) < 0 ||
        (rc = sxe_http_server_listen(http, address)) < 0) {
        fprintf(stderr, "ws-echo: cannot serve on %s: %s\n", address, sxe_strerror(rc));
    } else {
        rc = sxe_http_server_run(http);
    }
    sxe_ws_server_destroy(ws);
    sxe_http_server_destroy(http);
    return rc < 0;
}
