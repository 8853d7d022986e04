/*
 * The HTTP/1.1 server module: requests read with the parser, routed to handlers, answered in
 * order.
 *
 * A request's bytes stay in the connection's buffer, unconsumed, until the request has been
 * answered: its head (which the request's pointers point into) and its body. So a body arrives
 * whole with its request, pipelined requests wait their turn in the buffer, and nothing is copied,
 * except a chunked body, which is decoded into the server's scratch area when it is complete.
 * Handlers answer before they return, which keeps responses in request order for free. While a
 * connection's output is backed up (a write said SXE_CONN_FULL: high_water bytes queued) the next
 * pipelined request waits, its bytes unread in the buffer or the socket, until the output drains.
 *
 * State per connection is a small struct in an array sized like the loop's connection table.
 */
#define SXE_LOG_MODULE http_log
#include "sxe/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/http.h"
#include "sxe/loop.h"

static struct sxe_log_module http_log = SXE_LOG_MODULE_INIT(HTTP);

#define ROUTES_MAX       64
#define DEFAULT_BODY_MAX (48 * 1024)

struct route {
    char method[16]; /* empty: any */
    char path[256];
    size_t path_len;
    bool prefix;
    sxe_http_handler_t handler;
    void *arg;
};

/* A request being answered; one per connection, used while its handler runs. */
struct sxe_http {
    sxe_http_server_t *server;
    sxe_conn_t *conn;
    const struct sxe_http_request *request;
    const char *body;
    size_t body_len;
    int status;      /* 0 until a response starts */
    bool head_only;  /* HEAD: no body goes out */
    bool chunked;    /* the response is chunked */
    bool keep_alive; /* the connection carries on after this response */
    bool finished;
    int failed; /* a write of the response failed (-errno): the rest of it is dropped */
};

/* What the server keeps per connection. */
struct http_conn {
    struct sxe_http_parser parser;
    uint32_t head_len;    /* of the request whose body is being read, or 0 */
    uint32_t body_offset; /* bytes after the head that the body parser has seen */
    bool continued;       /* 100 Continue was sent for this request */
    bool closing;         /* answered "Connection: close": discard input until the peer goes */
    bool peer_done;       /* the peer shut down its side: close once our answers are sent */
    bool nodelay;         /* TCP_NODELAY is set */
    bool paused;          /* output backed up: reading waits for on_drained */
    bool full;            /* a write said SXE_CONN_FULL: the output is backed up until drained */
};

struct sxe_http_server {
    sxe_loop_t *loop;
    bool own_loop;
    struct sxe_http_limits limits;
    struct http_conn *conns;
    uint32_t conn_count;
    struct route routes[ROUTES_MAX];
    unsigned route_count;
    sxe_conn_t *listener;
    struct sxe_http_request request; /* the request being dispatched: one at a time */
    struct sxe_http http;
    char *scratch; /* chunked bodies are decoded here */
    uint64_t date_second;
    char date[64];
    size_t date_len;
};

static const struct {
    int status;
    const char *reason;
} reasons[] = {
    {100, "Continue"},
    {200, "OK"},
    {201, "Created"},
    {204, "No Content"},
    {206, "Partial Content"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {304, "Not Modified"},
    {400, "Bad Request"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {408, "Request Timeout"},
    {413, "Content Too Large"},
    {414, "URI Too Long"},
    {416, "Range Not Satisfiable"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {503, "Service Unavailable"},
    {505, "HTTP Version Not Supported"},
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

static struct http_conn *state_of(sxe_http_server_t *server, sxe_conn_t *conn)
{
    return &server->conns[sxe_conn_index(conn)];
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
static void set_nodelay(struct http_conn *state, sxe_conn_t *conn)
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
        if (rc == -ENOBUFS) { /* the response is too large to queue: worth an operator's look */
            SXE_LOG_WARN("cannot queue the %d response to %.*s (write_limit); closing the "
                         "connection",
                         http->status, (int)http->request->target_len, http->request->target);
        } else { /* the connection failed: a client that went away is no news */
            SXE_LOG_DEBUG("cannot send the %d response to %.*s: %s; closing the connection",
                          http->status, (int)http->request->target_len, http->request->target,
                          sxe_strerror(rc));
        }
        state_of(http->server, http->conn)->closing = true;
        (void)sxe_conn_close_when_sent(http->conn);
    }
    return rc;
}

/*
 * What a write of the response said: SXE_CONN_FULL holds the next pipelined request back until
 * on_drained; an error breaks the response off (see broken).
 */
static int wrote(sxe_http_t *http, int rc)
{
    if (rc == SXE_CONN_FULL) {
        state_of(http->server, http->conn)->full = true;
    }
    return rc < 0 ? broken(http, rc) : 0;
}

/* Queues bytes of the response, or breaks it off (see broken). */
static int put(sxe_http_t *http, const void *data, size_t len)
{
    return wrote(http, sxe_conn_write(http->conn, data, len));
}

int sxe_http_start(sxe_http_t *http, int status, const char *headers, int64_t content_length)
{
    char head[1024];
    size_t headers_len = headers != NULL ? strlen(headers) : 0;
    int len;

    if (http->status != 0) {
        return -EALREADY;
    }
    http->status = status;
    /* An HTTP/1.0 client cannot read chunks: a body of unknown length ends at the close. */
    if (content_length < 0 && http->request->minor_version == 0) {
        http->keep_alive = false;
    }
    http->chunked = content_length < 0 && http->request->minor_version == 1 && status != 204 &&
                    status != 304 && !http->head_only;
    /* Built with plain copies: this runs for every response, and printf costs several times more.
     */
    const char *reason = sxe_http_reason(status);
    size_t date_len;
    const char *date = date_lines(http->server, &date_len);
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
    len = (int)(at - head);
    if (headers_len + 2 > sizeof(head) - (size_t)len) {
        /* Extra headers too large to copy in go out in writes of their own. */
        int rc;
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

/* The state a body call needs: 0, the response's failure, or -EINVAL out of turn. */
static int body_allowed(const sxe_http_t *http)
{
    return http->failed != 0 ? http->failed : http->status == 0 || http->finished ? -EINVAL : 0;
}

/* Body bytes, copied, or with ref the caller's own, released once sent (see sxe_http_send_ref). */
static int send_body(sxe_http_t *http, const void *data, size_t len, bool ref,
                     sxe_conn_release_t release, void *arg)
{
    char size[24];
    int rc = body_allowed(http);

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
    if (ref) {
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
    int rc = body_allowed(http);

    if (rc == 0 && http->chunked) {
        rc = -EINVAL;
    }
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
    set_nodelay(state_of(http->server, http->conn), http->conn);
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

/* Connection: close was sent: shut our side once the queue drains, and wait for the peer. */
static void close_after_response(sxe_http_server_t *server, sxe_conn_t *conn)
{
    state_of(server, conn)->closing = true;
    (void)sxe_conn_shutdown(conn);
}

int sxe_http_finish(sxe_http_t *http)
{
    int rc = 0;

    if (http->failed != 0) {
        http->finished = true;
        return http->failed;
    }
    if (http->status == 0 || http->finished) {
        return -EINVAL;
    }
    http->finished = true;
    if (http->chunked && (rc = put(http, "0\r\n\r\n", 5)) < 0) {
        return rc;
    }
    if (!http->keep_alive) {
        close_after_response(http->server, http->conn);
    }
    return 0;
}

int sxe_http_respond(sxe_http_t *http, int status, const char *content_type, const void *body,
                     size_t len)
{
    char headers[160];
    int rc;

    if (content_type != NULL) {
        size_t type_len = strnlen(content_type, sizeof(headers) - 17);
        char *at = headers;
        APPEND_LITERAL(&at, "Content-Type: ");
        append(&at, content_type, type_len);
        APPEND_LITERAL(&at, "\r\n");
        *at = '\0';
    }
    if ((rc = sxe_http_start(http, status, content_type ? headers : NULL, (int64_t)len)) < 0 ||
        (rc = sxe_http_send(http, body, len)) < 0) {
        return rc;
    }
    return sxe_http_finish(http);
}

const struct sxe_http_request *sxe_http_request(const sxe_http_t *http)
{
    return http->request;
}

const char *sxe_http_path(const sxe_http_t *http, size_t *len)
{
    const char *query = memchr(http->request->target, '?', http->request->target_len);

    *len = query ? (size_t)(query - http->request->target) : http->request->target_len;
    return http->request->target;
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

/* Answers a request the server refuses itself, and closes where the RFC wants it closed. */
static void refuse(sxe_http_server_t *server, sxe_conn_t *conn, int status,
                   const struct sxe_http_request *request, const char *extra_headers)
{
    static const struct sxe_http_request unparsed = {.minor_version = 1};
    char body[64];
    int len = snprintf(body, sizeof(body), "%d %s\n", status, sxe_http_reason(status));
    sxe_http_t http = {.server = server,
                       .conn = conn,
                       .request = request ? request : &unparsed,
                       .keep_alive = status == 404 || status == 405};

    SXE_LOG_DEBUG("refusing a request: %d %s", status, sxe_http_reason(status));
    if (request != NULL && !request->keep_alive) {
        http.keep_alive = false;
    }
    http.head_only =
        request != NULL && request->method_len == 4 && memcmp(request->method, "HEAD", 4) == 0;
    char headers[256];
    snprintf(headers, sizeof(headers), "Content-Type: text/plain\r\n%s",
             extra_headers ? extra_headers : "");
    if (sxe_http_start(&http, status, headers, len) == 0 &&
        sxe_http_send(&http, body, (size_t)len) == 0) {
        sxe_http_finish(&http);
    } else if (!http.keep_alive) {
        close_after_response(server, conn);
    }
}

static bool method_is(const struct sxe_http_request *request, const char *method)
{
    size_t len = strlen(method);
    return request->method_len == len && memcmp(request->method, method, len) == 0;
}

static bool route_method_matches(const struct route *route, const struct sxe_http_request *request)
{
    if (route->method[0] == '\0' || method_is(request, route->method)) {
        return true;
    }
    return strcmp(route->method, "GET") == 0 && method_is(request, "HEAD");
}

/* Finds the route for the request; sets *allow to the methods of routes for its path. */
static const struct route *find_route(sxe_http_server_t *server,
                                      const struct sxe_http_request *request, const char *path,
                                      size_t path_len, char *allow, size_t allow_size)
{
    const struct route *best = NULL;
    size_t best_len = 0;
    bool best_exact = false;
    size_t allow_len = 0;

    allow[0] = '\0';
    for (unsigned i = 0; i < server->route_count; i++) {
        const struct route *route = &server->routes[i];
        bool exact = route->path_len == path_len && memcmp(route->path, path, path_len) == 0;
        bool prefix = route->prefix && route->path_len <= path_len &&
                      memcmp(route->path, path, route->path_len) == 0;
        if (!exact && !prefix) {
            continue;
        }
        if (!route_method_matches(route, request)) {
            allow_len += (size_t)snprintf(allow + allow_len, allow_size - allow_len, "%s%s",
                                          allow_len ? ", " : "", route->method);
            continue;
        }
        if (best == NULL || (exact && !best_exact) ||
            (exact == best_exact && route->path_len > best_len)) {
            best = route;
            best_len = route->path_len;
            best_exact = exact;
        }
    }
    return best;
}

/* Runs the request's handler, or answers it 404 or 405. */
static void dispatch(sxe_http_server_t *server, sxe_conn_t *conn,
                     const struct sxe_http_request *request, const char *body, size_t body_len)
{
    char allow[256];
    size_t path_len;
    const char *query = memchr(request->target, '?', request->target_len);

    path_len = query ? (size_t)(query - request->target) : request->target_len;
    const struct route *route =
        find_route(server, request, request->target, path_len, allow, sizeof(allow));
    if (route == NULL) {
        if (allow[0] != '\0') {
            char headers[300];
            snprintf(headers, sizeof(headers), "Allow: %s\r\n", allow);
            refuse(server, conn, 405, request, headers);
        } else {
            refuse(server, conn, 404, request, NULL);
        }
        return;
    }

    sxe_http_t *http = &server->http;
    *http = (sxe_http_t){.server = server,
                         .conn = conn,
                         .request = request,
                         .body = body,
                         .body_len = body_len,
                         .head_only = method_is(request, "HEAD"),
                         .keep_alive = request->keep_alive};
    uint64_t id = sxe_conn_id(conn);
    route->handler(http, route->arg);
    if (sxe_conn_from_id(server->loop, id) == NULL) {
        return; /* the handler closed the connection */
    }
    if (http->status == 0) {
        SXE_LOG_ERROR("the handler for %.*s did not answer; answering 500", (int)path_len,
                      request->target);
        http->keep_alive = false;
        sxe_http_respond(http, 500, "text/plain", "500 Internal Server Error\n", 26);
    } else if (!http->finished) {
        sxe_http_finish(http);
    }
}

/*
 * Decodes a complete chunked body into the scratch area: the request's head is head bytes at data,
 * its chunked body body_len bytes after. The head is parsed again to set a parser up for the body.
 */
static size_t decode_chunked(sxe_http_server_t *server, const char *data, int head, size_t body_len)
{
    struct sxe_http_parser parser;
    struct sxe_http_request request;
    struct sxe_http_body piece;
    size_t at = (size_t)head, out = 0;

    sxe_http_parser_init(&parser);
    (void)sxe_http_parse_head(&parser, data, at, &server->limits, &request);
    do {
        long used = sxe_http_parse_body(&parser, data + at, (size_t)head + body_len - at,
                                        &server->limits, &piece);
        memcpy(server->scratch + out, piece.data, piece.len);
        out += piece.len;
        at += (size_t)used;
    } while (!piece.done);
    return out;
}

/* Sends 100 Continue for a request that asked, once, before its body is read. */
static void send_continue(struct http_conn *state, sxe_conn_t *conn,
                          const struct sxe_http_request *request)
{
    if (request->expect_continue && request->minor_version == 1 && !state->continued) {
        state->continued = true;
        (void)sxe_conn_write(conn, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    }
}

static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    sxe_http_server_t *server = sxe_conn_user(conn);
    struct http_conn *state = state_of(server, conn);
    struct sxe_http_request *request = &server->request;
    uint64_t id = sxe_conn_id(conn);
    size_t used = 0;

    while (used < len && !state->closing) {
        const char *at = data + used;
        size_t left = len - used;
        struct sxe_http_parser reparse;
        int head;

        if (state->head_len == 0 && state->full) {
            /* The output is backed up (a large file, or many answers): the next request waits,
             * and the socket is not read, until it drains. */
            state->paused = true;
            (void)sxe_conn_pause(conn);
            break;
        }
        if (state->head_len == 0) {
            head = sxe_http_parse_head(&state->parser, at, left, &server->limits, request);
            if (head == 0) {
                break;
            }
            if (head < 0) {
                refuse(server, conn, -head, NULL, NULL);
                break;
            }
        } else {
            /* A body is being read: the head was parsed in an earlier call; parse it again here,
             * where its bytes now are, to point the request at them. */
            sxe_http_parser_init(&reparse);
            head = sxe_http_parse_head(&reparse, at, left, &server->limits, request);
        }
        if (request->minor_version == 1 && request->host_count != 1) {
            refuse(server, conn, 400, request, NULL);
            break;
        }
        if (request->upgrade) {
            refuse(server, conn, 501, request, NULL); /* no upgrades or tunnels here */
            break;
        }
        if (!request->has_body) {
            dispatch(server, conn, request, NULL, 0);
            used += (size_t)head;
            sxe_http_parser_init(&state->parser);
            if (sxe_conn_from_id(server->loop, id) == NULL) {
                return len;
            }
            continue;
        }

        /* The body must be here whole before the request is answered. */
        state->head_len = (uint32_t)head;
        send_continue(state, conn, request);
        struct sxe_http_body piece = {0};
        while (!piece.done && (size_t)head + state->body_offset < left) {
            long taken = sxe_http_parse_body(&state->parser, at + head + state->body_offset,
                                             left - (size_t)head - state->body_offset,
                                             &server->limits, &piece);
            if (taken < 0) {
                refuse(server, conn, (int)-taken, request, NULL);
                return len;
            }
            state->body_offset += (uint32_t)taken;
        }
        if (!piece.done) {
            break;
        }
        size_t body_len = request->chunked ? decode_chunked(server, at, head, state->body_offset)
                                           : state->body_offset;
        dispatch(server, conn, request, request->chunked ? server->scratch : at + head, body_len);
        used += (size_t)head + state->body_offset;
        state->head_len = 0;
        state->body_offset = 0;
        state->continued = false;
        sxe_http_parser_init(&state->parser);
        if (sxe_conn_from_id(server->loop, id) == NULL) {
            return len;
        }
    }
    if (!state->closing) {
        if (used > 0) {
            set_nodelay(state, conn); /* answered, and staying open for more */
        }
        return used;
    }
    if (used == len) {
        /* The client asked to close and sent nothing after: close as soon as the answer is out,
         * without the half-close and the wait for its end of stream. */
        (void)sxe_conn_close_when_sent(conn);
    }
    return len;
}

static void on_connect(sxe_conn_t *conn)
{
    sxe_http_server_t *server = sxe_conn_user(conn);

    *state_of(server, conn) = (struct http_conn){0};
}

static void on_drained(sxe_conn_t *conn)
{
    struct http_conn *state = state_of(sxe_conn_user(conn), conn);

    state->full = false;
    if (state->paused) {
        state->paused = false;
        (void)sxe_conn_resume(conn); /* the requests that waited come next turn */
    } else if (state->peer_done) {
        sxe_conn_close(conn);
    }
}

/* The client is done sending: close once the answers it is owed have gone out. */
static void on_eof(sxe_conn_t *conn)
{
    struct http_conn *state = state_of(sxe_conn_user(conn), conn);

    state->peer_done = true;
    if (sxe_conn_queued(conn) == 0) {
        sxe_conn_close(conn);
    }
}

/* A request that did not arrive in time gets a 408; an idle connection just closes. */
static void on_timeout(sxe_conn_t *conn)
{
    sxe_http_server_t *server = sxe_conn_user(conn);
    struct http_conn *state = state_of(server, conn);

    if (!state->closing && (state->head_len != 0 || sxe_http_parser_busy(&state->parser))) {
        refuse(server, conn, 408, NULL, NULL);
    }
}

static const struct sxe_conn_handlers handlers = {.on_connect = on_connect,
                                                  .on_read = on_read,
                                                  .on_eof = on_eof,
                                                  .on_drained = on_drained,
                                                  .on_timeout = on_timeout};

static void apply_limits(struct sxe_http_limits *limits, const struct sxe_http_limits *given)
{
    *limits = sxe_http_default_limits;
    limits->body_bytes = DEFAULT_BODY_MAX;
    if (given != NULL) {
        limits->request_line = given->request_line ? given->request_line : limits->request_line;
        limits->header_bytes = given->header_bytes ? given->header_bytes : limits->header_bytes;
        limits->header_count = given->header_count ? given->header_count : limits->header_count;
        limits->body_bytes = given->body_bytes ? given->body_bytes : limits->body_bytes;
    }
}

int sxe_http_server_create(sxe_http_server_t **server_out, sxe_loop_t *loop,
                           const struct sxe_http_server_options *options)
{
    static const struct sxe_http_server_options defaults;
    sxe_http_server_t *server;
    int rc;

    if (!SXE_CHECK(server_out != NULL)) {
        return -EINVAL;
    }
    options = options != NULL ? options : &defaults;
    if ((server = calloc(1, sizeof(*server))) == NULL) {
        return -ENOMEM;
    }
    apply_limits(&server->limits, &options->limits);
    if (loop == NULL) {
        struct sxe_loop_options loop_options = options->loop;
        /* The clients, and a few slots more for listeners. */
        loop_options.connections =
            (loop_options.connections ? loop_options.connections : 10000) + 16;
        /* A request's head and body wait whole in one buffer. */
        loop_options.buffer_size =
            (uint32_t)(server->limits.header_bytes + server->limits.body_bytes + 1024);
        loop_options.read_timeout =
            options->header_timeout ? options->header_timeout : 10 * SXE_NS_PER_SEC;
        loop_options.idle_timeout =
            options->idle_timeout ? options->idle_timeout : 60 * SXE_NS_PER_SEC;
        loop_options.write_timeout =
            options->write_timeout ? options->write_timeout : 30 * SXE_NS_PER_SEC;
        if ((rc = sxe_loop_create(&loop, &loop_options)) < 0) {
            free(server);
            return rc;
        }
        server->own_loop = true;
    }
    server->loop = loop;
    /* Bodies must fit the loop's buffers along with their heads. */
    const struct sxe_loop_options *in_force = sxe_loop_options(loop);
    uint64_t room = in_force->buffer_size > server->limits.header_bytes
                        ? in_force->buffer_size - server->limits.header_bytes
                        : 0;
    if (server->limits.body_bytes > room) {
        server->limits.body_bytes = room;
    }
    server->conn_count = in_force->connections;
    server->conns = calloc(server->conn_count, sizeof(*server->conns));
    server->scratch = malloc(server->limits.body_bytes + 1);
    if (server->conns == NULL || server->scratch == NULL) {
        sxe_http_server_destroy(server);
        return -ENOMEM;
    }
    *server_out = server;
    return 0;
}

void sxe_http_server_destroy(sxe_http_server_t *server)
{
    if (server == NULL) {
        return;
    }
    if (server->own_loop) {
        sxe_loop_destroy(server->loop);
    } else if (server->listener != NULL) {
        sxe_conn_close(server->listener);
    }
    free(server->conns);
    free(server->scratch);
    free(server);
}

sxe_loop_t *sxe_http_server_loop(sxe_http_server_t *server)
{
    return server->loop;
}

int sxe_http_route(sxe_http_server_t *server, const char *method, const char *path, bool prefix,
                   sxe_http_handler_t handler, void *arg)
{
    if (!SXE_CHECK(server != NULL && path != NULL && handler != NULL &&
                   strlen(path) < sizeof(server->routes[0].path) &&
                   (method == NULL || strlen(method) < sizeof(server->routes[0].method)))) {
        return -EINVAL;
    }
    if (server->route_count == ROUTES_MAX) {
        return -ENOBUFS;
    }
    struct route *route = &server->routes[server->route_count++];
    snprintf(route->method, sizeof(route->method), "%s", method ? method : "");
    snprintf(route->path, sizeof(route->path), "%s", path);
    route->path_len = strlen(path);
    route->prefix = prefix;
    route->handler = handler;
    route->arg = arg;
    return 0;
}

/* Parses "a.b.c.d:port" or "[v6]:port". */
static int parse_address(const char *text, struct sockaddr_storage *address, socklen_t *len)
{
    char host[64];
    const char *colon = strrchr(text, ':');
    char *end;

    if (colon == NULL || (size_t)(colon - text) >= sizeof(host)) {
        return -EINVAL;
    }
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || end == colon + 1 || port < 0 || port > 65535) {
        return -EINVAL;
    }
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    memset(address, 0, sizeof(*address));
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)address;
        host[strlen(host) - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &v6->sin6_addr) != 1) {
            return -EINVAL;
        }
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*v6);
        return 0;
    }
    struct sockaddr_in *v4 = (struct sockaddr_in *)address;
    if (inet_pton(AF_INET, host, &v4->sin_addr) != 1) {
        return -EINVAL;
    }
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    *len = sizeof(*v4);
    return 0;
}

int sxe_http_listen(sxe_http_server_t *server, const char *address_text)
{
    struct sockaddr_storage address;
    socklen_t len;
    sxe_conn_t *listener;
    int rc;

    if ((rc = parse_address(address_text, &address, &len)) < 0) {
        SXE_LOG_ERROR("cannot listen on '%s': expected IPv4:port or [IPv6]:port", address_text);
        return rc;
    }
    if ((rc = sxe_listen(server->loop, &listener, (struct sockaddr *)&address, len, NULL, &handlers,
                         server)) < 0) {
        SXE_LOG_ERROR("cannot listen on %s: %s", address_text, sxe_strerror(rc));
        return rc;
    }
    if (server->listener == NULL) {
        server->listener = listener;
    }
    return 0;
}

int sxe_http_port(sxe_http_server_t *server)
{
    struct sockaddr_storage address;
    socklen_t len = sizeof(address);

    if (server->listener == NULL ||
        sxe_conn_local(server->listener, (struct sockaddr *)&address, &len) < 0) {
        return 0;
    }
    return address.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&address)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&address)->sin_port);
}

int sxe_http_run(sxe_http_server_t *server)
{
    int rc = sxe_loop_stop_on_signals(server->loop, 5 * SXE_NS_PER_SEC);
    return rc < 0 ? rc : sxe_loop_run(server->loop);
}

int sxe_http_serve(const char *address, const char *path, sxe_http_handler_t handler, void *arg)
{
    sxe_http_server_t *server;
    int rc;

    if ((rc = sxe_http_server_create(&server, NULL, NULL)) < 0) {
        return rc;
    }
    if ((rc = sxe_http_route(server, NULL, path, false, handler, arg)) == 0 &&
        (rc = sxe_http_listen(server, address)) == 0) {
        rc = sxe_http_run(server);
    }
    sxe_http_server_destroy(server);
    return rc;
}
