/*
 * The HTTP client's writing of requests (sxe/http_client.h): the head (and a whole body), corked
 * into one send, and bodies the caller streams (request.body_streamed), written in pieces as it
 * gets them, the caller held back when the upstream reads slower.
 *
 * A call with a streamed body is its connection's only call (it is not idempotent, so nothing is
 * pipelined with it). When the connection is there, its timer is set to 0 ns, so on_writable is
 * called from the loop, never from inside the call that started it. The head is not sent then: it
 * waits, and leaves with the body's first piece (or its end) in one send. The caller is then told
 * it may write, and from that moment the call is never sent again; before it, a pooled connection
 * that dies sends the call again like any unsent request.
 *
 * Backpressure: a write that leaves the connection's queue at or past high_water leaves the call
 * backed up (wait_drain, sxe_http_call_backed_up()), and on_writable follows when the queue has
 * drained (the connection's on_drained). While the caller owes bytes the call's timer does not
 * fail it; while the upstream owes a drain, it does.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sxe/log.h"
#include "client.h"

/* The request's head (and a whole body), corked into one send. */
int sxe__http_send_request(struct sxe__upstream *up, const struct sxe_http_call *call)
{
    const struct sxe_http_client_request *request = &call->request;
    sxe_conn_t *conn = up->conn;
    const char *host = request->host != NULL ? request->host : up->client->host;
    char line[1024];
    bool length = request->body_len > 0 || request->body_streamed ||
                  strcmp(request->method, "POST") == 0 || strcmp(request->method, "PUT") == 0 ||
                  strcmp(request->method, "PATCH") == 0;
    int rc = 0;

    bool corked = sxe_conn_cork(conn);
    int n = snprintf(line, sizeof(line), "%s %s HTTP/1.1\r\nHost: %s\r\n", request->method,
                     request->target, host);
    if ((size_t)n < sizeof(line)) {
        rc = sxe_conn_write(conn, line, (size_t)n);
    } else { /* a long target or host: in pieces */
        rc = sxe_conn_write(conn, request->method, strlen(request->method));
        rc = rc < 0 ? rc : sxe_conn_write(conn, " ", 1);
        rc = rc < 0 ? rc : sxe_conn_write(conn, request->target, strlen(request->target));
        rc = rc < 0 ? rc : sxe_conn_write(conn, " HTTP/1.1\r\nHost: ", 17);
        rc = rc < 0 ? rc : sxe_conn_write(conn, host, strlen(host));
        rc = rc < 0 ? rc : sxe_conn_write(conn, "\r\n", 2);
    }
    if (request->upgrade != NULL && rc >= 0) {
        n = snprintf(line, sizeof(line), "Connection: upgrade\r\nUpgrade: %s\r\n",
                     request->upgrade);
        rc = (size_t)n < sizeof(line) ? sxe_conn_write(conn, line, (size_t)n) : -EINVAL;
    }
    if (request->body_streamed && request->body_len == SXE_HTTP_BODY_UNKNOWN && rc >= 0) {
        rc = sxe_conn_write(conn, "Transfer-Encoding: chunked\r\n", 28);
    } else if (length && rc >= 0) {
        n = snprintf(line, sizeof(line), "Content-Length: %zu\r\n", request->body_len);
        rc = sxe_conn_write(conn, line, (size_t)n);
    }
    if (request->headers != NULL && rc >= 0) {
        rc = sxe_conn_write(conn, request->headers, strlen(request->headers));
    }
    rc = rc < 0 ? rc : sxe_conn_write(conn, "\r\n", 2);
    if (request->body != NULL && request->body_len > 0 && rc >= 0) {
        rc = sxe_conn_write(conn, request->body, request->body_len);
    }
    if (corked) {
        sxe_conn_uncork(conn);
    }
    return rc < 0 ? rc : 0;
}

void sxe__http_body_begin(struct sxe_http_call *call)
{
    call->writable_due = true;
    int rc = sxe_timer_start(call->client->loop, &call->timer, 0, 0); /* it runs: cannot fail */
    SXE_ASSERT(rc == 0);
    (void)rc;
}

void sxe__http_call_writable(struct sxe_http_call *call)
{
    call->writable_due = false;
    sxe__http_call_rearm(call);
    if (call->up == NULL || call->up->first != call || call->up->state != SXE__UP_BUSY) {
        return; /* its connection died meanwhile: it waits for the next, unsent */
    }
    call->writable = true;
    call->handlers->on_writable(call, call->arg);
}

void sxe__http_client_on_drained(sxe_conn_t *conn)
{
    struct sxe__upstream *up = sxe_conn_user(conn);
    struct sxe_http_call *call = up->first;

    if (call == NULL || !call->wait_drain) {
        return;
    }
    call->wait_drain = false;
    if (!call->in_write) { /* inside the write, the call is then just not backed up */
        sxe__http_call_rearm(call);
        call->handlers->on_writable(call, call->arg);
    }
}

/* Whether the call may be written to now; asserts in debug builds when not. */
static bool may_write(const struct sxe_http_call *call)
{
    return SXE_CHECK(call != NULL && call->in_use && call->body_open && call->writable &&
                     call->up != NULL && call->up->first == call);
}

/*
 * Writes the head if it has not left yet, then len bytes (chunked: framed as one chunk; len 0 and
 * last: the last chunk), and notes whether they left the connection backed up (wait_drain).
 * @return 0, or -errno after cancelling the call.
 */
static int put(struct sxe_http_call *call, const void *data, size_t len, bool last)
{
    sxe_conn_t *conn = call->up->conn;
    bool chunked = call->request.body_len == SXE_HTTP_BODY_UNKNOWN;
    bool full = false;
    char line[32];
    int rc = 0;

    call->in_write = true;
    bool corked = sxe_conn_cork(conn);
    if (call->head_unsent) {
        call->head_unsent = false;
        rc = sxe__http_send_request(call->up, call);
    }
    if (chunked && (len > 0 || last) && rc >= 0) {
        int n = snprintf(line, sizeof(line), "%zx\r\n", len);
        rc = sxe_conn_write(conn, line, (size_t)n);
        full |= rc == 0 && sxe_conn_backed_up(conn);
    }
    if (len > 0 && rc >= 0) {
        rc = sxe_conn_write(conn, data, len);
        full |= rc == 0 && sxe_conn_backed_up(conn);
    }
    if (chunked && (len > 0 || last) && rc >= 0) {
        rc = sxe_conn_write(conn, "\r\n", 2);
        full |= rc == 0 && sxe_conn_backed_up(conn);
    }
    call->wait_drain = full && rc >= 0;
    if (corked) {
        sxe_conn_uncork(conn); /* a drain it brings clears wait_drain (in_write) */
    }
    call->in_write = false;
    if (rc < 0) {
        SXE_LOG_DEBUG("cannot send the body of %s %s to %s: %s", call->request.method,
                      call->request.target, call->client->host, sxe_strerror(rc));
        sxe_http_call_cancel(call);
        return rc;
    }
    sxe__http_call_rearm(call); /* progress: the silence counts from now */
    return 0;
}

int sxe_http_call_write(sxe_http_call_t *call, const void *data, size_t len)
{
    if (!may_write(call) || !SXE_CHECK(data != NULL || len == 0) ||
        !SXE_CHECK(call->request.body_len == SXE_HTTP_BODY_UNKNOWN || len <= call->body_left)) {
        return -EINVAL;
    }
    if (call->request.body_len != SXE_HTTP_BODY_UNKNOWN) {
        call->body_left -= len;
    }
    if (len == 0 && !call->head_unsent) {
        return 0;
    }
    return put(call, data, len, false);
}

int sxe_http_call_finish(sxe_http_call_t *call)
{
    if (!may_write(call) ||
        !SXE_CHECK(call->request.body_len == SXE_HTTP_BODY_UNKNOWN || call->body_left == 0)) {
        return -EINVAL;
    }
    call->body_open = false;
    int rc = put(call, NULL, 0, true);
    if (rc < 0) {
        return rc;
    }
    call->wait_drain = false; /* the caller has nothing more to write */
    return 0;
}

bool sxe_http_call_backed_up(const sxe_http_call_t *call)
{
    return call->wait_drain;
}
