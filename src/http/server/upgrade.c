/*
 * Switching protocols (RFC 9110 §15.2.2): a handler answers 101 and the connection leaves the
 * HTTP module for the handlers of the protocol it switched to (WebSocket, or a program's own).
 * The new handlers take the connection's events at once; when the handler returns, on_read consumes
 * the request, stops parsing and forgets the connection, and what the client sent behind the
 * request goes to the new on_read.
 */
#define SXE_LOG_MODULE http_log
#include "sxe/log.h"

#include <errno.h>
#include <string.h>

#include "server.h"

static struct sxe_log_module http_log = SXE_LOG_MODULE_INIT(HTTP);

int sxe_http_upgrade(sxe_http_t *http, const char *headers,
                     const struct sxe_conn_handlers *handlers)
{
    static const char status_line[] = "HTTP/1.1 101 Switching Protocols\r\n";
    size_t headers_len = headers != NULL ? strlen(headers) : 0;
    int rc;

    if (!SXE_CHECK(http != NULL && handlers != NULL && sxe__http_in_slot(http) &&
                   !http->request->has_body && http->request->minor_version == 1)) {
        return -EINVAL; /* a handler's request or a held one, without a body */
    }
    if ((rc = sxe__http_defer_check(http)) < 0) {
        return rc; /* held, and its client left */
    }
    if (http->h2 != NULL) {
        return -EPROTONOSUPPORT; /* a stream cannot switch: the connection carries others */
    }
    if (!SXE_CHECK(http->status == 0)) {
        return -EINVAL; /* answered already */
    }
    if (headers_len > 0 && (headers_len < 2 || memcmp(headers + headers_len - 2, "\r\n", 2) != 0)) {
        SXE_ASSERT(!"upgrade headers end with CRLF");
        return -EINVAL;
    }
    bool held = sxe__http_is_held(http);
    sxe_conn_t *conn = http->conn;
    bool corked = held && sxe_conn_cork(conn); /* the head leaves in one send */
    http->status = 101;
    http->finished = true;
    if ((rc = sxe_conn_write(conn, status_line, sizeof(status_line) - 1)) < 0 ||
        (rc = sxe_conn_write(conn, headers ? headers : "", headers_len)) < 0 ||
        (rc = sxe_conn_write(conn, "\r\n", 2)) < 0) {
        sxe_conn_close(conn); /* cancels a held request: its holder hears */
        return rc;
    }
    if (corked) {
        sxe_conn_uncork(conn);
    }
    SXE_LOG_DEBUG("switching protocols for %.*s", (int)http->request->target_len,
                  http->request->target);
    sxe__http_log(http);
    sxe__http_state(http->server, conn)->switch_to = handlers;
    if (held) {
        /* The request's bytes lead the connection's kept input: the module's on_read consumes
         * them next turn, then switches (sxe__http_switch). */
        sxe__http_defer_done(http);
    } else {
        /* The new handlers take the connection's events now (a close from the new protocol's
         * on_open is its); the HTTP module lets go when the handler returns. */
        (void)sxe_conn_set_handlers(conn, handlers);
    }
    return 0;
}

void sxe__http_switch(sxe_http_server_t *server, sxe_conn_t *conn)
{
    struct http_conn *state = sxe__http_state(server, conn);
    const struct sxe_conn_handlers *handlers = state->switch_to;

    sxe__http_set_nodelay(state, conn);
    *state = (struct http_conn){0};              /* no longer the module's */
    (void)sxe_conn_set_handlers(conn, handlers); /* again, if set already: the rest is offered */
}
