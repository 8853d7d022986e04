/*
 * Answers of the HTTP server module: heads with Date and Content-Length or chunked framing,
 * bodies copied, by reference or from files, and what happens when a response cannot be queued.
 */
#define SXE_LOG_MODULE http_log
#include "sxe/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "server.h"
#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/http.h"
#include "sxe/loop.h"

static struct sxe_log_module http_log = SXE_LOG_MODULE_INIT(HTTP);

#define CONTENT_TYPE_MAX 255 /* bytes of a Content-Type value, so it always fits in a head */

static const struct {
    int status;
    const char *reason;
} reasons[] = {
    {100, "Continue"},
    {200, "OK"},
    {201, "Created"},
    {202, "Accepted"},
    {204, "No Content"},
    {206, "Partial Content"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {303, "See Other"},
    {304, "Not Modified"},
    {307, "Temporary Redirect"},
    {308, "Permanent Redirect"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {408, "Request Timeout"},
    {409, "Conflict"},
    {410, "Gone"},
    {413, "Content Too Large"},
    {414, "URI Too Long"},
    {416, "Range Not Satisfiable"},
    {422, "Unprocessable Content"},
    {426, "Upgrade Required"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
    {507, "Insufficient Storage"},
};

const char *sxe_http_reason(int status)
{
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        if (reasons[i].status == status) {
            return reasons[i].reason;
        }
    }
    return "Unknown";
}

/*
 * The Date and Server lines every response carries, formatted again only when the second changes:
 * "Date: Sat, 21 Nov 2026 21:30:12 GMT\r\nServer: sxe\r\n".
 */
static const char *date_lines(sxe_http_server_t *server, size_t *len)
{
    uint64_t second = sxe_loop_now(server->loop) / SXE_NS_PER_SEC;

    if (second != server->date_second || server->date_len == 0) {
        time_t wall = (time_t)(sxe_clock_wall_ns() / SXE_NS_PER_SEC);
        struct tm utc;
        gmtime_r(&wall, &utc);
        server->date_len = strftime(server->date, sizeof(server->date),
                                    "Date: %a, %d %b %Y %H:%M:%S GMT\r\n"
                                    "Server: sxe\r\n",
                                    &utc);
        server->date_second = second;
    }
    *len = server->date_len;
    return server->date;
}

/* Appends len bytes to the head being built at *at. */
static void append(char **at, const void *bytes, size_t len)
{
    memcpy(*at, bytes, len);
    *at += len;
}

/* Appends a decimal number. */
static void append_number(char **at, uint64_t number)
{
    char digits[20];
    size_t count = 0;

    do {
        digits[sizeof(digits) - ++count] = (char)('0' + number % 10);
        number /= 10;
    } while (number != 0);
    append(at, digits + sizeof(digits) - count, count);
}

#define APPEND_LITERAL(at, text) append((at), (text), sizeof(text) - 1)

/*
 * Turns Nagle's algorithm off, once, when a send may follow another that is not yet acknowledged:
 * a head and then a file, or the next response on a kept-alive connection. Otherwise the later
 * send could wait for the client's delayed ACK, 40 ms. A connection answered once and closed never
 * needs it: its single send goes out at once. (Fails harmlessly on Unix sockets.) A head followed
 * by a file needs no TCP_CORK: the core sends it with MSG_MORE, so it leaves with the file's first
 * bytes, and sendfile pushes the file's last segment itself.
 */
void sxe__http_set_nodelay(struct http_conn *state, sxe_conn_t *conn)
{
    if (!state->nodelay) {
        state->nodelay = true;
        (void)sxe_conn_set_nodelay(conn);
    }
}

/*
 * A write of the response failed (rc < 0: -ENOBUFS for more than the connection may queue, or the
 * connection's own failure): nothing more of it can go out, and nothing may follow it, or the
 * client would read the next bytes as its rest. What was accepted leaves (the answers before it
 * whole, this one cut short, which its Content-Length or missing last chunk tells the client), then
 * the connection closes; requests after it are not read. Later calls for this response return rc.
 */
static int broken(sxe_http_t *http, int rc)
{
    if (http->failed == 0) {
        http->failed = rc;
        if (rc == -ENOBUFS) { /* too large to queue, or no buffer: worth an operator's look */
            SXE_LOG_WARN("cannot queue the %d response to %.*s (past write_limit, or no free "
                         "buffer); closing the connection",
                         http->status, (int)http->request->target_len, http->request->target);
        } else { /* the connection failed: a client that went away is no news */
            SXE_LOG_DEBUG("cannot send the %d response to %.*s: %s; closing the connection",
                          http->status, (int)http->request->target_len, http->request->target,
                          sxe_strerror(rc));
        }
        sxe__http_state(http->server, http->conn)->closing = true;
        (void)sxe_conn_close_when_sent(http->conn);
    }
    return rc;
}

/*
 * What a write of the response said: output it left backed up holds the next pipelined request
 * back until on_drained; an error breaks the response off (see broken).
 */
static int wrote(sxe_http_t *http, int rc)
{
    if (rc == 0 && sxe_conn_backed_up(http->conn)) {
        sxe__http_state(http->server, http->conn)->full = true;
    }
    return rc < 0 ? broken(http, rc) : 0;
}

/* What a call of the answer on an HTTP/2 stream said: one that failed (the connection's memory
 * is spent) resets the stream, so the client does not take what was sent for all of it; the
 * connection goes on. Later calls for this response return rc. */
static int h2_wrote(sxe_http_t *http, int rc)
{
    if (rc < 0 && http->failed == 0) {
        http->failed = rc;
        sxe__h2_reset(http->h2);
    }
    return rc;
}

/* Queues bytes of the response, or breaks it off (see broken). */
static int put(sxe_http_t *http, const void *data, size_t len)
{
    http->sent += len;
    return wrote(http, sxe_conn_write(http->conn, data, len));
}

/* sxe_http_start() with a Content-Type line (content_type may be NULL) before the extra headers. */
static int start(sxe_http_t *http, int status, const char *content_type, const char *headers,
                 int64_t content_length)
{
    char head[1024];
    size_t headers_len = headers != NULL ? strlen(headers) : 0;
    int len;

    int rc = sxe__http_defer_check(http);
    if (rc < 0) {
        return rc;
    }
    if (http->status != 0) {
        return -EALREADY;
    }
    if (sxe__http_is_held(http)) {
        sxe__http_defer_started(http);
    }
    http->status = status;
    /* A body not read to its end: the connection cannot find the next request after it; and a
     * server going away (its loop stops or drains) ends each connection with its answer. */
    if (http->body_unread || http->server->going) {
        http->keep_alive = false;
    }
    /* An HTTP/1.0 client cannot read chunks: a body of unknown length ends at the close. */
    if (content_length < 0 && http->request->minor_version == 0) {
        http->keep_alive = false;
    }
    http->chunked = content_length < 0 && http->request->minor_version == 1 && status != 204 &&
                    status != 304 && !http->head_only;
    /* A HEAD's length describes the body a GET would have: none of it is sent. */
    http->owed =
        content_length >= 0 && !http->head_only ? (uint64_t)content_length : SXE__HTTP_NO_LENGTH;
    size_t date_len;
    const char *date = date_lines(http->server, &date_len);
    if (http->h2 != NULL) { /* fields of a HEADERS frame instead: the date's value alone */
        http->chunked = false;
        const char *date_end = memchr(date, '\r', date_len);
        return h2_wrote(http,
                        sxe__h2_start(http, status, content_type, date + 6,
                                      (size_t)(date_end - date) - 6, headers, content_length));
    }
    /* Built with plain copies: this runs for every response, and printf costs several times more.
     */
    const char *reason = sxe_http_reason(status);
    char *at = head;
    APPEND_LITERAL(&at, "HTTP/1.1 ");
    append_number(&at, (uint64_t)status);
    APPEND_LITERAL(&at, " ");
    append(&at, reason, strlen(reason));
    APPEND_LITERAL(&at, "\r\n");
    append(&at, date, date_len);
    if (content_length >= 0) {
        APPEND_LITERAL(&at, "Content-Length: ");
        append_number(&at, (uint64_t)content_length);
        APPEND_LITERAL(&at, "\r\n");
    } else if (http->chunked) {
        APPEND_LITERAL(&at, "Transfer-Encoding: chunked\r\n");
    }
    if (!http->keep_alive) {
        APPEND_LITERAL(&at, "Connection: close\r\n");
    } else if (http->request->minor_version == 0) {
        APPEND_LITERAL(&at, "Connection: keep-alive\r\n");
    }
    if (content_type != NULL) { /* at most CONTENT_TYPE_MAX bytes: it fits with the rest */
        APPEND_LITERAL(&at, "Content-Type: ");
        append(&at, content_type, strlen(content_type));
        APPEND_LITERAL(&at, "\r\n");
    }
    len = (int)(at - head);
    if (headers_len + 2 > sizeof(head) - (size_t)len) {
        /* Extra headers too large to copy in go out in writes of their own. */
        if ((rc = put(http, head, (size_t)len)) < 0 || (rc = put(http, headers, headers_len)) < 0) {
            return rc;
        }
        return put(http, "\r\n", 2);
    }
    if (headers_len > 0) { /* headers may be NULL, which memcpy must not see even for 0 bytes */
        memcpy(head + len, headers, headers_len);
    }
    memcpy(head + len + headers_len, "\r\n", 2);
    return put(http, head, (size_t)len + headers_len + 2);
}

int sxe_http_start(sxe_http_t *http, int status, const char *headers, int64_t content_length)
{
    return start(http, status, NULL, headers, content_length);
}

/* The state a body call needs: 0, the response's failure, or -EINVAL out of turn. */
static int body_allowed(const sxe_http_t *http)
{
    return http->failed != 0 ? http->failed : http->status == 0 || http->finished ? -EINVAL : 0;
}

/*
 * Counts len body bytes against the Content-Length the response gave. Bytes past it would be read
 * by the client as the start of the next response, so they are refused whole.
 * @return 0, or -EMSGSIZE (an assertion in debug builds).
 */
static int owe_less(sxe_http_t *http, size_t len)
{
    if (http->owed == SXE__HTTP_NO_LENGTH) { /* none given, or a HEAD's (start() says so) */
        return 0;
    }
    if (len > http->owed) {
        SXE_LOG_ERROR("a response of %d sent %zu bytes with %llu of its Content-Length left",
                      http->status, len, (unsigned long long)http->owed);
    }
    if (!SXE_CHECK(len <= http->owed)) {
        return -EMSGSIZE;
    }
    http->owed -= len;
    return 0;
}

/* Body bytes, copied, or with ref the caller's own, released once sent (see sxe_http_send_ref). */
static int send_body(sxe_http_t *http, const void *data, size_t len, bool ref,
                     sxe_conn_release_t release, void *arg)
{
    char size[24];
    int rc = sxe__http_defer_check(http);

    rc = rc < 0 ? rc : body_allowed(http);
    rc = rc < 0 ? rc : owe_less(http, len);

    if (rc == 0 && http->chunked && !http->head_only && len > 0) {
        int size_len = snprintf(size, sizeof(size), "%zx\r\n", len);
        rc = put(http, size, (size_t)size_len);
    }
    if (rc < 0 || http->head_only || len == 0) {
        if (release != NULL) {
            release(arg);
        }
        return rc;
    }
    http->body_sent += len;
    if (http->h2 != NULL) {
        return h2_wrote(http, sxe__h2_data(http, data, len, !ref, release, arg));
    }
    if (ref) {
        http->sent += len;
        rc = wrote(http, sxe_conn_write_ref(http->conn, data, len, release, arg));
    } else {
        rc = put(http, data, len);
    }
    return rc < 0 || !http->chunked ? rc : put(http, "\r\n", 2);
}

int sxe_http_send(sxe_http_t *http, const void *data, size_t len)
{
    return send_body(http, data, len, false, NULL, NULL);
}

int sxe_http_send_ref(sxe_http_t *http, const void *data, size_t len, sxe_conn_release_t release,
                      void *arg)
{
    return send_body(http, data, len, true, release, arg);
}

/* A file range for the body; fd closed (close_when_sent) or released as sxe_conn_sendfile_ref. */
static int send_file(sxe_http_t *http, int fd, off_t offset, size_t len, bool close_when_sent,
                     sxe_conn_release_t release, void *arg)
{
    int rc = sxe__http_defer_check(http);

    if (rc < 0) { /* cancelled: the connection is gone, so is what it would have owned */
        if (close_when_sent) {
            sxe_fd_close(fd);
        }
        if (release != NULL) {
            release(arg);
        }
        return rc;
    }
    rc = body_allowed(http);
    if (rc == 0 && http->chunked) {
        rc = -EINVAL;
    }
    rc = rc < 0 ? rc : owe_less(http, len);
    if (rc < 0 || http->head_only || len == 0) { /* nothing to send: fd is not kept */
        if (close_when_sent) {
            /* A zero-length range queues nothing, and the connection closes what it owns. */
            (void)sxe_conn_sendfile_and_close(http->conn, fd, 0, 0);
        }
        if (release != NULL) {
            release(arg);
        }
        return rc;
    }
    if (http->h2 != NULL) {
        http->body_sent += len;
        return h2_wrote(http, sxe__h2_file(http, fd, offset, len, close_when_sent, release, arg));
    }
    sxe__http_set_nodelay(sxe__http_state(http->server, http->conn), http->conn);
    http->sent += len;
    http->body_sent += len;
    rc = close_when_sent ? sxe_conn_sendfile_and_close(http->conn, fd, offset, len)
                         : sxe_conn_sendfile_ref(http->conn, fd, offset, len, release, arg);
    return wrote(http, rc);
}

int sxe_http_sendfile(sxe_http_t *http, int fd, off_t offset, size_t len, bool close_when_sent)
{
    return send_file(http, fd, offset, len, close_when_sent, NULL, NULL);
}

int sxe_http_sendfile_ref(sxe_http_t *http, int fd, off_t offset, size_t len,
                          sxe_conn_release_t release, void *arg)
{
    return send_file(http, fd, offset, len, false, release, arg);
}

bool sxe_http_backed_up(const sxe_http_t *http)
{
    return sxe__http_state(http->server, http->conn)->full ||
           (http->h2 != NULL && sxe__h2_backed_up(http->h2)); /* its stream's pieces wait */
}

int sxe_http_abort(sxe_http_t *held)
{
    if (!SXE_CHECK(held != NULL && held->held)) {
        return -EINVAL;
    }
    int rc = sxe__http_defer_check(held);
    if (rc < 0) {
        return rc;
    }
    if (!sxe__http_state(held->server, held->conn)->framed) {
        sxe_conn_close(held->conn); /* which cancels the requests it held */
    } else if (held->h2 != NULL) {
        sxe__h2_reset(held->h2); /* its stream's close cancels it */
    }
    return 0;
}

/* Connection: close was sent: shut our side once the queue drains, and wait for the peer. */
void sxe__http_close_after_response(sxe_http_server_t *server, sxe_conn_t *conn, bool linger)
{
    struct http_conn *state = sxe__http_state(server, conn);

    state->closing = true;
    state->linger = state->linger || linger;
    (void)sxe_conn_shutdown(conn);
}

/* A held request's answer is finished (or failed): the connection moves on to its next. */
static int finished(sxe_http_t *http, int rc)
{
    if (sxe__http_is_held(http)) {
        sxe__http_defer_done(http);
    }
    return rc;
}

int sxe_http_finish(sxe_http_t *http)
{
    int rc = sxe__http_defer_check(http);

    if (rc < 0) {
        return rc;
    }
    if (http->failed != 0) {
        bool first = !http->finished;
        http->finished = true;
        if (first) {
            sxe__http_log(http); /* cut off: what was queued is what the client gets */
        }
        return first ? finished(http, http->failed) : http->failed;
    }
    if (http->status == 0 || http->finished) {
        return -EINVAL;
    }
    http->finished = true;
    if (http->chunked && (rc = put(http, "0\r\n\r\n", 5)) < 0) {
        sxe__http_log(http);
        return finished(http, rc);
    }
    sxe__http_count(http->server, http->sent);
    if (http->owed != SXE__HTTP_NO_LENGTH && http->owed > 0) {
        /* Short of its Content-Length: the client waits for the rest, and only a close ends it. */
        SXE_LOG_ERROR("a response of %d ended %llu bytes short of its Content-Length; closing",
                      http->status, (unsigned long long)http->owed);
        http->keep_alive = false;
    }
    sxe__http_log(http); /* before a close can begin: the log may ask for the peer's address */
    if (http->h2 != NULL && http->owed != SXE__HTTP_NO_LENGTH && http->owed > 0) {
        sxe__h2_reset(http->h2);   /* short: the stream is cut off, not ended as if whole */
    } else if (http->h2 != NULL) { /* its stream ends; the connection goes on */
        sxe__h2_end(http);
    } else if (!http->keep_alive) {
        /* Unless the client asked to close after a request it sent whole, it may still send. */
        sxe__http_close_after_response(http->server, http->conn,
                                       http->body_unread || http->request->keep_alive);
    }
    return finished(http, 0);
}

int sxe_http_respond(sxe_http_t *http, int status, const char *content_type, const void *body,
                     size_t len)
{
    return sxe_http_respond_with(http, status, content_type, NULL, body, len);
}

int sxe_http_respond_with(sxe_http_t *http, int status, const char *content_type,
                          const char *headers, const void *body, size_t len)
{
    int rc;

    if (content_type != NULL && strnlen(content_type, CONTENT_TYPE_MAX + 1) > CONTENT_TYPE_MAX) {
        SXE_ASSERT(!"a content type is at most 255 bytes");
        return -EINVAL;
    }
    if ((rc = sxe__http_defer_check(http)) < 0) {
        return rc; /* a held request that was cancelled */
    }
    /* Answered outside its connection's on_read (a held request), the head and body still leave
     * in one send. */
    sxe_conn_t *corked = sxe__http_is_held(http) && sxe_conn_cork(http->conn) ? http->conn : NULL;
    rc = start(http, status, content_type, headers, (int64_t)len);
    rc = rc < 0 ? rc : sxe_http_send(http, body, len);
    rc = rc < 0 ? rc : sxe_http_finish(http);
    if (corked != NULL) {
        sxe_conn_uncork(corked);
    }
    if (rc < 0) {
        if (rc != -EALREADY && sxe__http_is_held(http)) {
            (void)sxe_http_finish(http); /* a held request's failed answer ends its hold */
        }
    }
    return rc;
}

const struct sxe_http_request_head *sxe_http_request_head(const sxe_http_t *http)
{
    return http->request;
}

int sxe_http_status(const sxe_http_t *http)
{
    return http->status != 0 || !http->logged ? http->status : 499;
}

int sxe_http_version(const sxe_http_t *http)
{
    return http->h2 != NULL ? 20 : 10 + http->request->minor_version;
}

uint64_t sxe_http_body_sent(const sxe_http_t *http)
{
    return http->body_sent;
}

uint64_t sxe_http_began(const sxe_http_t *http)
{
    return http->began;
}

const char *sxe_http_path(const sxe_http_t *http, size_t *len)
{
    if (http->path != NULL) {
        *len = http->path_len;
        return http->path;
    }
    const char *query = memchr(http->request->target, '?', http->request->target_len);
    *len = query ? (size_t)(query - http->request->target) : http->request->target_len;
    return http->request->target; /* refused before it was routed: only the log sees it */
}

const char *sxe_http_query(const sxe_http_t *http, size_t *len)
{
    const char *query = memchr(http->request->target, '?', http->request->target_len);

    if (query == NULL) {
        *len = 0;
        return NULL;
    }
    *len = http->request->target_len - (size_t)(query + 1 - http->request->target);
    return query + 1;
}

const char *sxe_http_body(const sxe_http_t *http, size_t *len)
{
    *len = http->body_len;
    return http->body;
}

sxe_conn_t *sxe_http_conn(const sxe_http_t *http)
{
    return http->conn;
}

int sxe_http_respondf(sxe_http_t *http, int status, const char *content_type, const char *headers,
                      const char *format, ...)
{
    char body[SXE_HTTP_FORMAT_MAX + 1]; /* and vsnprintf's NUL */
    va_list args;

    va_start(args, format);
    int len = vsnprintf(body, sizeof(body), format, args);
    va_end(args);
    if (len < 0 || (size_t)len >= sizeof(body)) {
        return -EMSGSIZE;
    }
    return sxe_http_respond_with(http, status, content_type, headers, body, (size_t)len);
}

int sxe_http_headers_add(struct sxe_http_headers *headers, const char *name, const char *value)
{
    size_t name_len = strlen(name), value_len = strlen(value);

    if (headers->error != 0) {
        return headers->error;
    }
    if (name_len == 0 || strcspn(name, "()<>@,;:\\\"/[]?={} \t\r\n") != name_len ||
        strcspn(value, "\r\n") != value_len) {
        SXE_ASSERT(!"a header name is a token, and a value holds no CR or LF");
        return headers->error = -EINVAL;
    }
    if (headers->len + name_len + value_len + 5 > headers->size) {
        return headers->error = -ENOBUFS;
    }
    char *at = headers->text + headers->len;
    append(&at, name, name_len);
    APPEND_LITERAL(&at, ": ");
    append(&at, value, value_len);
    APPEND_LITERAL(&at, "\r\n");
    *at = '\0';
    headers->len = (size_t)(at - headers->text);
    return 0;
}

void sxe__http_count(sxe_http_server_t *server, uint64_t bytes)
{
    if (server->worker != NULL) {
        sxe_worker_count(server->worker, 1, bytes);
    } else {
        server->requests++;
        server->bytes += bytes;
    }
}

/* Answers a request the server refuses itself, and closes where the RFC wants it closed. */
void sxe__http_refuse(sxe_http_server_t *server, sxe_conn_t *conn, int status,
                      const struct sxe_http_request_head *request, const char *extra_headers)
{
    static const struct sxe_http_request_head unparsed = {
        .method = "", .target = "", .minor_version = 1};
    char body[64];
    int len = snprintf(body, sizeof(body), "%d %s\n", status, sxe_http_reason(status));
    sxe_http_t http = {.server = server,
                       .conn = conn,
                       .began = sxe_loop_now(sxe_conn_loop(conn)),
                       .request = request ? request : &unparsed,
                       .keep_alive = status == 404 || status == 405,
                       .h2 = server->h2_answering};

    SXE_LOG_DEBUG("refusing a request: %d %s", status, sxe_http_reason(status));
    if (request != NULL && !request->keep_alive) {
        http.keep_alive = false;
    }
    http.body_unread = !http.keep_alive; /* what the client still sends is read to its end */
    http.head_only =
        request != NULL && request->method_len == 4 && memcmp(request->method, "HEAD", 4) == 0;
    char headers[sizeof("Content-Type: text/plain\r\n") + HTTP_REFUSE_EXTRA];
    SXE_ASSERT(extra_headers == NULL || strlen(extra_headers) < HTTP_REFUSE_EXTRA);
    snprintf(headers, sizeof(headers), "Content-Type: text/plain\r\n%s",
             extra_headers ? extra_headers : "");
    if (sxe_http_start(&http, status, headers, len) == 0 &&
        sxe_http_send(&http, body, (size_t)len) == 0) {
        sxe_http_finish(&http);
    } else if (!http.keep_alive && http.h2 == NULL) {
        sxe__http_close_after_response(server, conn, true); /* its body may still be coming */
    }
}

void sxe__http_send_continue(struct http_conn *state, sxe_conn_t *conn,
                             const struct sxe_http_request_head *request)
{
    if (request->expect_continue && request->minor_version == 1 && !state->continued) {
        state->continued = true;
        (void)sxe_conn_write(conn, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    }
}
