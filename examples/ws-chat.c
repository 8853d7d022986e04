/* A chat room: GET / serves the page PAGE, read once at start-up, and every text message sent on
 * the WebSocket /chat goes to everyone as "guest-N: message", joins and leaves announced too.
 * Usage: ws-chat [IP:PORT [PAGE [CERT KEY]]] (127.0.0.1:8080, ws-chat.html); given a certificate
 * and its key (PEM files), the page and the socket are served over TLS: https:// and wss://. */
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

/* Broadcasts "guest-N", what and text to every socket but except. */
static void tell(sxe_ws_t *ws, const char *what, const char *text, size_t len, sxe_ws_t *except)
{
    static char line[1 << 16]; /* a broadcast's most: messages are at most 60000 bytes */
    int head = snprintf(line, sizeof(line), "guest-%zu%s", (size_t)sxe_ws_user(ws), what);

    memcpy(line + head, text, len);
    (void)sxe_ws_server_broadcast(sxe_ws_server_of(ws), 0, SXE_WS_TEXT, line, (size_t)head + len,
                                  except);
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
    if ((rc = sxe_http_server_create(&http, NULL, &secure)) < 0 ||
        (rc = sxe_ws_server_create(&ws, http, &chat, &options)) < 0 ||
        (rc = sxe_http_server_route(http, "GET", "/", 0, home, page)) < 0 ||
        (rc = sxe_ws_server_route(ws, "/chat", NULL)) < 0 ||
        (rc = sxe_http_server_listen(http, address)) < 0) {
        fprintf(stderr, "ws-chat: cannot serve on %s: %s\n", address, sxe_strerror(rc));
    } else {
        rc = sxe_http_server_run(http);
    }
    sxe_ws_server_destroy(ws);
    sxe_http_server_destroy(http);
    sxe_tls_destroy(secure.tls);
    return rc < 0;
}
