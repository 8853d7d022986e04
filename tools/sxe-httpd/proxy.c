/*
 * The reverse proxy: a prefix route whose handler holds the request (sxe_http_defer) and forwards
 * it with the HTTP client's stream calls, then streams the answer back as it arrives.
 *
 * Safe against request smuggling towards the upstream: nothing of the client's header section is
 * passed on as bytes. The request is re-framed from what the parser accepted: the method and
 * target, every end-to-end field (hop-by-hop ones, those named by Connection, and the framing
 * fields dropped: proxy_fields.c), Host, then X-Forwarded-For, Via and (when the listener asked the
 * client for a certificate and one was verified) X-Client-Subject, which a client cannot set
 * itself, and the body (chunked framing already removed) framed by us: a Content-Length when the
 * client gave one, else chunked. Responses are re-framed the same way by sxe_http_start().
 *
 * Bodies of any size stream both ways, with backpressure. The prefix routes are streamed
 * (SXE_HTTP_ROUTE_STREAM): a request is forwarded as soon as its head has come, and its body is
 * read from the client only as the upstream's connection takes it (the call's on_writable), so a
 * slow upstream holds the client back through TCP. A client that reads slowly pauses the upstream's
 * call the same way until the client's connection drains.
 *
 * Upstreams of a prefix are chosen by least connections (requests in flight, this worker), or
 * round-robin; one that fails (refuses, resets, times out, answers nonsense) is skipped for
 * fail_timeout, unless all are failing. An idempotent request that fails before any answer is
 * tried once on another upstream; a dead pooled connection is retried by the client itself.
 *
 * State is per worker (thread-local), made on its first proxied request: the clients of its loop
 * and a table of exchanges, one per request held.
 */
#define SXE_LOG_MODULE proxy_log
#include <sxe/log.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sxe/clock.h>
#include <sxe/http_client.h>
#include <sxe/resolve.h>

#include "fields.h"
#include "path.h"
#include "peer.h"
#include "proxy.h"
#include "proxy_fields.h"
#include "tunnel.h"

static struct sxe_log_module proxy_log = SXE_LOG_MODULE_INIT(PROXY);

#define PROXIES_MAX      64 /* every host's together */
#define HOST_PROXIES_MAX 16 /* a host's: the default host's are the server's routes (64) */
#define UPSTREAMS_MAX    16
_Static_assert(PROXIES_MAX *UPSTREAMS_MAX == PROXY_UPSTREAMS_MOST, "upstream ids");
#define INLINE_BYTES 512
#define ADDRESS_MAX  (SXE_RESOLVE_NAME_MAX + 6) /* a name's longest, and ":65535" */

struct proxy {
    char prefix[256];
    unsigned host;  /* whose: hosts.h */
    unsigned index; /* in proxies[] */
    unsigned count;
    char addresses[UPSTREAMS_MAX][ADDRESS_MAX + 1];
    bool secure[UPSTREAMS_MAX]; /* https://: TLS to it (options.tls), its certificate checked */
};

static struct proxy proxies[PROXIES_MAX];
static unsigned proxy_total;
static bool proxies_secure; /* an upstream is https:// */
static bool proxies_named;  /* an upstream is given by name: each worker has a resolver */
static struct proxy_options options;

struct upstream {
    sxe_http_client_t *client;
    uint32_t active;     /* requests in flight to it */
    uint64_t down_until; /* skipped until then (loop time), after a failure */
};

/* One proxied request: the held request, its call, and the bytes the call's request points to. */
struct exchange {
    sxe_http_t *held;
    sxe_http_call_t *call;
    struct proxy *proxy;
    struct upstream *upstream;
    struct exchange *next_free;
    bool started;      /* the answer's head went out */
    bool corked;       /* its head waits for the first body bytes, to leave in one send */
    bool tried_other;  /* sent to a second upstream after the first failed */
    bool body_begun;   /* the client's body is being read and forwarded: no retry from here */
    bool upgrade;      /* the client asks to switch protocols: so does the forwarded request */
    uint64_t asked_ns; /* when the request went to its upstream (the last, after a retry) */
    uint64_t done_ns;  /* when its answer ended, or 0 */
    struct sxe_http_client_request request; /* pointing into text, and the held request's body */
    char *text; /* method, target, host and header lines, NUL-separated */
    char inline_text[INLINE_BYTES];
};

struct local {
    sxe_loop_t *loop;
    sxe_resolver_t *resolver; /* with proxies_named: the worker's clients share it */
    struct upstream upstreams[PROXIES_MAX][UPSTREAMS_MAX];
    unsigned next[PROXIES_MAX]; /* where the next choice starts */
    struct exchange *exchanges;
    struct exchange *free;
    uint32_t untouched; /* exchanges from here on were never used: their pages untouched */
};

static __thread struct local *local;

/* An upstream as --proxy gives it: IP:PORT, [IPv6]:PORT or NAME:PORT. @return NULL, or why not. */
static const char *upstream_check(const char *address)
{
    struct sockaddr_storage numeric;
    socklen_t len;
    char name[SXE_RESOLVE_NAME_MAX + 1];
    uint16_t port;
    union sxe_resolved_address any;
    struct sxe_resolved answer;

    if (sxe_address_parse(address, -1, &numeric, &len) == 0) {
        return NULL;
    }
    switch (sxe_resolve_split(address, name, &port, &any)) {
    case 0: /* an IP address sxe_address_parse() did not take: "LOCALHOST" */
        return NULL;
    case 1:
        if (sxe_resolve_cached(NULL, name, port, &answer) == -ENOTSUP) {
            return "an upstream given by name needs c-ares, and this sxe-httpd was built "
                   "without it";
        }
        proxies_named = true;
        return NULL;
    default:
        return "expected HOST:PORT upstreams, HOST an IP address or a host name, PORT 1 to 65535";
    }
}

const char *proxy_resolvers(const char *list)
{
    char one[64];
    struct sockaddr_storage address;
    socklen_t len;

    for (const char *at = list; *at != '\0';) {
        size_t n = strcspn(at, ",");
        if (n == 0 || n >= sizeof(one)) {
            return "expected IP[:PORT] name servers separated by commas";
        }
        memcpy(one, at, n);
        one[n] = '\0';
        if (sxe_address_parse(one, 53, &address, &len) < 0 || strcmp(one, "localhost") == 0) {
            return "expected IP[:PORT] name servers separated by commas";
        }
        at += n + (at[n] == ',');
    }
    return list[0] == '\0' ? "expected IP[:PORT] name servers separated by commas" : NULL;
}

const char *proxy_add(unsigned host, const char *spec)
{
    const char *equals = strchr(spec, '=');
    struct proxy *proxy = &proxies[proxy_total];

    unsigned own = 0;
    for (unsigned i = 0; i < proxy_total; i++) {
        own += proxies[i].host == host;
    }
    if (own == HOST_PROXIES_MAX || proxy_total == PROXIES_MAX) {
        return own == HOST_PROXIES_MAX ? "too many --proxy options (16 a host at most)"
                                       : "too many --proxy options (64 at most, every host's)";
    }
    if (equals == NULL || spec[0] != '/' || (size_t)(equals - spec) >= sizeof(proxy->prefix)) {
        return "expected PREFIX=HOST:PORT[,HOST:PORT...], the prefix starting with /";
    }
    memset(proxy, 0, sizeof(*proxy));
    memcpy(proxy->prefix, spec, (size_t)(equals - spec));
    proxy->host = host;
    for (const char *at = equals + 1; *at != '\0';) {
        bool secure = strncmp(at, "https://", 8) == 0;
        at += secure ? 8 : strncmp(at, "http://", 7) == 0 ? 7 : 0;
        size_t len = strcspn(at, ",");
        if (len == 0 || proxy->count == UPSTREAMS_MAX) {
            return "expected HOST:PORT upstreams separated by commas (at most 16)";
        }
        if (len > ADDRESS_MAX) {
            return "an upstream's HOST:PORT is at most 259 bytes";
        }
        /* the access log and the metrics' labels show it as it is given */
        memcpy(proxy->addresses[proxy->count], at, len);
        const char *why = upstream_check(proxy->addresses[proxy->count]);
        if (why != NULL) {
            return why;
        }
        proxy->secure[proxy->count] = secure;
        proxies_secure |= secure;
        proxy->count++;
        at += len + (at[len] == ',');
    }
    if (proxy->count == 0) {
        return "no upstream given";
    }
    proxy->index = proxy_total++;
    return NULL;
}

bool proxy_covers(unsigned host, const char *prefix)
{
    for (unsigned i = 0; i < proxy_total; i++) {
        if (proxies[i].host == host && strcmp(proxies[i].prefix, prefix) == 0) {
            return true;
        }
    }
    return false;
}

unsigned proxy_count(void)
{
    return proxy_total;
}

struct proxy *proxy_find(unsigned host, const char *path, size_t len)
{
    struct proxy *found = NULL;
    size_t found_len = 0;

    for (unsigned i = 0; i < proxy_total; i++) {
        struct proxy *proxy = &proxies[i];
        size_t prefix_len = strlen(proxy->prefix);
        if (proxy->host == host && prefix_len <= len && prefix_len >= found_len &&
            memcmp(path, proxy->prefix, prefix_len) == 0) {
            found = proxy;
            found_len = prefix_len;
        }
    }
    return found;
}

bool proxy_secure(void)
{
    return proxies_secure;
}

uint32_t proxy_timers(const struct proxy_options *given)
{
    uint32_t upstreams = 0;

    for (unsigned i = 0; i < proxy_total; i++) {
        upstreams += proxies[i].count;
    }
    /* 1: a pipelining flush; 2: the worker's resolver, for upstreams given by name */
    return upstreams * (given->connections + given->requests + 1) + (proxies_named ? 2 : 0);
}

/* This worker's state, made on its first proxied request. */
static struct local *local_get(sxe_loop_t *loop)
{
    if (local != NULL) {
        return local;
    }
    struct local *made = calloc(1, sizeof(*made));
    if (made == NULL || (made->exchanges = calloc(options.requests, sizeof(struct exchange))) ==
                            NULL) { /* GCOVR_EXCL_LINE: out of memory at start-up */
        free(made);                 /* GCOVR_EXCL_LINE: as above */
        return NULL;                /* GCOVR_EXCL_LINE: as above */
    }
    made->loop = loop;
    struct sxe_resolver_options resolve = {.servers = options.resolvers};
    int rc = proxies_named ? sxe_resolver_create(&made->resolver, loop, &resolve) : 0;
    if (rc < 0) { /* each client then makes its own, with resolv.conf's servers */
        SXE_LOG_ERROR("cannot make the resolver of the upstreams' names: %s", sxe_strerror(rc));
    }
    local = made;
    return local;
}

static void exchange_free(struct exchange *exchange)
{
    if (exchange->text != exchange->inline_text) {
        free(exchange->text);
    }
    exchange->text = NULL;
    exchange->held = NULL;
    exchange->next_free = local->free;
    local->free = exchange;
}

/*
 * Writes the forwarded request's method, target, Host and header lines into the exchange (inline,
 * or allocated when long). The target is the path the prefix was matched against (normal form:
 * sxe_http_path()), so the upstream resolves what the prefix admitted, and the query as it came;
 * Host is the authority the request was for (an absolute-form target's, else its Host field).
 * @return false when out of memory.
 */
static bool reframe(struct exchange *exchange, struct sxe_http_client_request *out)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(exchange->held);
    const struct sxe_http_header *forwarded = sxe_http_request_header(request, "X-Forwarded-For");
    const struct sxe_http_header *via = sxe_http_request_header(request, "Via");
    const char *peer = peer_text(sxe_http_conn(exchange->held));
    const char *peer_shown = peer != NULL ? peer : "unknown";
    char subject[1024]; /* the client's certificate's, when the listener asks for one */
    int subject_len =
        sxe_conn_peer_subject(sxe_http_conn(exchange->held), subject, sizeof(subject));
    size_t path_len, query_len;
    const char *path = sxe_http_path(exchange->held, &path_len);
    const char *query = sxe_http_query(exchange->held, &query_len);
    size_t need = request->method_len + path_len + query_len + 128 + strlen(peer_shown) +
                  request->host_len + (forwarded ? forwarded->value_len : 0) +
                  (via ? via->value_len : 0) + (subject_len > 0 ? (size_t)subject_len + 20 : 0);
    for (unsigned i = 0; i < request->header_count; i++) {
        need += request->headers[i].name_len + request->headers[i].value_len + 4;
    }
    exchange->text = need <= INLINE_BYTES ? exchange->inline_text : malloc(need);
    if (exchange->text == NULL) {
        return false; /* GCOVR_EXCL_LINE: out of memory */
    }
    char *at = exchange->text;
    out->method = at;
    at = proxy_put(at, request->method, request->method_len);
    *at++ = '\0';
    out->target = at;
    at = proxy_put(at, path, path_len);
    if (query != NULL) {
        *at++ = '?';
        at = proxy_put(at, query, query_len);
    }
    *at++ = '\0';
    out->host = NULL;
    if (request->host_len > 0) {
        out->host = at;
        at = proxy_put(at, request->host, request->host_len);
        *at++ = '\0';
    }
    out->headers = at;
    for (unsigned i = 0; i < request->header_count; i++) {
        const struct sxe_http_header *field = &request->headers[i];
        if (!proxy_request_field_dropped(field, request, options.underscores)) {
            at = proxy_put(at, field->name, field->name_len);
            at = proxy_put(at, ": ", 2);
            at = proxy_put(at, field->value, field->value_len);
            at = proxy_put(at, "\r\n", 2);
        }
    }
    at = proxy_put(at, "X-Forwarded-For: ", 17);
    if (forwarded != NULL) {
        at = proxy_put(at, forwarded->value, forwarded->value_len);
        at = proxy_put(at, ", ", 2);
    }
    at = proxy_put(at, peer_shown, strlen(peer_shown));
    at = proxy_put(at, "\r\nVia: ", 7);
    if (via != NULL) {
        at = proxy_put(at, via->value, via->value_len);
        at = proxy_put(at, ", ", 2);
    }
    at = proxy_put(at, "1.1 sxe-httpd\r\n", 15);
    if (subject_len > 0) {
        at = proxy_put(at, "X-Client-Subject: ", 18);
        at = proxy_put(at, subject, (size_t)subject_len);
        at = proxy_put(at, "\r\n", 2);
    }
    *at = '\0';
    const struct sxe_http_header *upgrade = sxe_http_request_header(request, "Upgrade");
    out->upgrade = NULL;
    if (exchange->upgrade && upgrade != NULL) { /* the client library writes it, and Connection */
        out->upgrade = ++at;
        at = proxy_put(at, upgrade->value, upgrade->value_len);
        *at = '\0';
    }
    out->body = NULL;
    out->body_streamed = request->has_body; /* read from the client as the upstream takes it */
    out->body_len = !request->has_body ? 0
                    : request->chunked ? SXE_HTTP_BODY_UNKNOWN
                                       : (size_t)request->content_length;
    return true;
}

/* The upstream for the next request of proxy: least connections or round-robin, failed ones
 * skipped while others are well. */
static struct upstream *choose(struct proxy *proxy, const struct upstream *avoid)
{
    struct upstream *upstreams = local->upstreams[proxy->index];
    uint64_t now = sxe_loop_now(local->loop);
    struct upstream *best = NULL;
    unsigned start = local->next[proxy->index]++;

    for (unsigned pass = 0; pass < 2 && best == NULL; pass++) {
        for (unsigned k = 0; k < proxy->count; k++) {
            struct upstream *candidate = &upstreams[(start + k) % proxy->count];
            if (candidate == avoid || (pass == 0 && candidate->down_until > now)) {
                continue;
            }
            if (best == NULL || (!options.round_robin && candidate->active < best->active)) {
                best = candidate;
            }
            if (options.round_robin) {
                break;
            }
        }
    }
    return best;
}

static void on_head(sxe_http_call_t *call, const struct sxe_http_response_head *response,
                    void *arg);
static void on_body(sxe_http_call_t *call, const char *data, size_t len, void *arg);
static void on_done(sxe_http_call_t *call, int err, void *arg);
static void on_writable(sxe_http_call_t *call, void *arg);
static void on_upgrade(sxe_http_call_t *call, const struct sxe_http_response_head *response,
                       sxe_conn_t *conn, void *arg);

static const struct sxe_http_client_handlers call_handlers = {.on_head = on_head,
                                                              .on_body = on_body,
                                                              .on_done = on_done,
                                                              .on_writable = on_writable,
                                                              .on_upgrade = on_upgrade};

/* Sends the exchange's request to an upstream other than avoid. @return 0 or -errno. */
static int forward(struct exchange *exchange, const struct upstream *avoid)
{
    struct proxy *proxy = exchange->proxy;
    struct upstream *upstream = choose(proxy, avoid);
    int rc;

    if (upstream == NULL) {
        return -EHOSTUNREACH;
    }
    if (upstream->client == NULL) {
        unsigned index = (unsigned)(upstream - local->upstreams[proxy->index]);
        struct sxe_http_client_options client_options = {.connections = options.connections,
                                                         .queue = options.requests,
                                                         .timeout = options.timeout,
                                                         .pipeline = options.pipeline,
                                                         .tls = proxy->secure[index] ? options.tls
                                                                                     : NULL,
                                                         .resolver = local->resolver};
        if ((rc = sxe_http_client_create(&upstream->client, local->loop, proxy->addresses[index],
                                         &client_options)) < 0) {
            return rc;
        }
    }
    if (exchange->text == NULL && !reframe(exchange, &exchange->request)) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: out of memory */
    }
    if ((rc = sxe_http_client_stream(upstream->client, &exchange->request, &call_handlers, exchange,
                                     &exchange->call)) < 0) {
        return rc;
    }
    exchange->upstream = upstream;
    exchange->asked_ns = sxe_clock_mono_ns();
    exchange->done_ns = 0;
    upstream->active++;
    return 0;
}

bool proxy_handled(const sxe_http_t *http)
{
    return sxe_http_user(http) != NULL;
}

bool proxy_upstream(const sxe_http_t *http, unsigned *id, uint64_t *ns, bool *ended)
{
    const struct exchange *exchange = sxe_http_user(http);

    if (exchange == NULL || exchange->upstream == NULL) {
        return false;
    }
    unsigned index = (unsigned)(exchange->upstream - local->upstreams[exchange->proxy->index]);
    *id = exchange->proxy->index * UPSTREAMS_MAX + index;
    *ended = exchange->done_ns != 0;
    *ns = (*ended ? exchange->done_ns : sxe_clock_mono_ns()) - exchange->asked_ns;
    return true;
}

const char *proxy_upstream_name(unsigned id)
{
    unsigned proxy = id / UPSTREAMS_MAX, index = id % UPSTREAMS_MAX;

    return proxy < proxy_total && index < proxies[proxy].count ? proxies[proxy].addresses[index]
                                                               : NULL;
}

/* Answers the held request with an error status of ours, and ends the exchange. */
static void fail(struct exchange *exchange, int status)
{
    char body[64];
    int len = snprintf(body, sizeof(body), "%d %s\n", status, sxe_http_reason(status));

    (void)sxe_http_respond(exchange->held, status, "text/plain", body, (size_t)len);
    exchange_free(exchange);
}

/* The client went away: the call is abandoned. */
static void on_cancel(sxe_http_t *held, void *arg)
{
    struct exchange *exchange = arg;

    (void)held;
    if (exchange->call != NULL) {
        sxe_http_call_cancel(exchange->call);
        exchange->upstream->active--;
    }
    exchange_free(exchange);
}

/* A piece of the client's body: on to the upstream, and the client waits while it is behind. */
static void on_client_body(sxe_http_t *held, const char *data, size_t len, bool done, void *arg)
{
    struct exchange *exchange = arg;
    int rc = 0;

    if (exchange->call == NULL) {
        return; /* answered, or failed, already */
    }
    if (len > 0) {
        rc = sxe_http_call_write(exchange->call, data, len);
    }
    if (rc >= 0 && done) {
        rc = sxe_http_call_finish(exchange->call);
    } else if (rc == 0 && len > 0 && sxe_http_call_backed_up(exchange->call)) {
        (void)sxe_http_body_pause(held); /* on_writable resumes it */
    }
    if (rc < 0) { /* the call was cancelled: the upstream's connection failed */
        SXE_LOG_ERROR("cannot forward the body of %s to its upstream: %s", exchange->proxy->prefix,
                      sxe_strerror(rc));
        exchange->call = NULL;
        exchange->upstream->active--;
        if (exchange->started) {
            (void)sxe_http_abort(held); /* cancels, which ends the exchange */
        } else {
            fail(exchange, 502);
        }
    }
}

static void on_drained(sxe_http_t *held, void *arg)
{
    struct exchange *exchange = arg;

    (void)held;
    if (exchange->call != NULL) {
        sxe_http_call_resume(exchange->call);
    }
}

/* The upstream's connection may take body bytes: the client's body is read (again). */
static void on_writable(sxe_http_call_t *call, void *arg)
{
    struct exchange *exchange = arg;

    (void)call;
    if (exchange->body_begun) {
        (void)sxe_http_body_resume(exchange->held);
        return;
    }
    exchange->body_begun = true;
    (void)sxe_http_body_stream(exchange->held, on_client_body, exchange); /* fails: cancelled */
}

void proxy_handle(sxe_http_t *http, void *arg)
{
    if (path_redirect_https(http)) {
        return;
    }
    struct local *state = local_get(sxe_conn_loop(sxe_http_conn(http)));
    if (state != NULL && state->free == NULL && state->untouched < options.requests) {
        state->free = &state->exchanges[state->untouched++];
        state->free->next_free = NULL;
    }
    struct exchange *exchange = state != NULL ? state->free : NULL;
    int rc;

    if (exchange == NULL) {
        SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR, "%u requests are proxied already: answering 503",
                     options.requests);
        (void)sxe_http_respond(http, 503, "text/plain", "503 Service Unavailable\n", 24);
        return;
    }
    if (sxe_http_defer(http, on_cancel, exchange) < 0) {
        (void)sxe_http_respond(http, 503, "text/plain", "503 Service Unavailable\n", 24);
        return;
    }
    exchange->held = http;
    sxe_http_set_user(http, exchange); /* for the access log: proxy_upstream() */
    state->free = exchange->next_free;
    exchange->proxy = arg;
    exchange->call = NULL;
    exchange->upstream = NULL;
    exchange->started = exchange->tried_other = exchange->corked = exchange->body_begun = false;
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    exchange->upgrade = request->upgrade && !request->has_body && request->minor_version == 1 &&
                        !proxy_asks_for_h2c(request);
    exchange->text = NULL;
    if ((rc = forward(exchange, NULL)) < 0) {
        SXE_LOG_ERROR("cannot forward %s to %s: %s", exchange->proxy->prefix,
                      exchange->proxy->addresses[0], sxe_strerror(rc));
        fail(exchange, rc == -ENOBUFS ? 503 : 502);
    }
}

void proxy_configure(const struct proxy_options *given)
{
    options = *given;
}

int proxy_route(sxe_http_server_t *server)
{
    int rc;

    for (unsigned i = 0; i < proxy_total; i++) {
        if (proxies[i].host == 0 &&
            (rc = sxe_http_server_route(server, NULL, proxies[i].prefix,
                                        SXE_HTTP_ROUTE_PREFIX | SXE_HTTP_ROUTE_STREAM, proxy_handle,
                                        &proxies[i])) < 0) {
            return rc;
        }
    }
    return 0;
}

/*
 * The upstream switched protocols (101) for an upgrade the client asked for: the client gets the
 * 101 with the upstream's fields, and the two connections are joined (tunnel.c).
 */
static void on_upgrade(sxe_http_call_t *call, const struct sxe_http_response_head *response,
                       sxe_conn_t *conn, void *arg)
{
    struct exchange *exchange = arg;
    const struct sxe_http_header *upgrade = sxe_http_response_header(response, "Upgrade");
    sxe_http_t *held = exchange->held;
    sxe_conn_t *client = sxe_http_conn(held);
    char headers[20 * 1024];

    (void)call;
    exchange->call = NULL; /* ended: the connection is ours now */
    exchange->upstream->active--;
    exchange->upstream->down_until = 0;
    if (upgrade == NULL || upgrade->value_len > 1024 || tunnel_ready(sxe_conn_loop(conn)) < 0) {
        SXE_LOG_ERROR("upstream for %s switched protocols %s: answering 502",
                      exchange->proxy->prefix,
                      upgrade == NULL ? "without saying to what" : "and cannot be joined");
        fail(exchange, 502); /* the client library closes conn: nobody took it */
        return;
    }
    char *at = proxy_forwarded_fields(response, headers, headers + sizeof(headers) - 1100);
    snprintf(at, (size_t)(headers + sizeof(headers) - at),
             "Connection: upgrade\r\nUpgrade: %.*s\r\n", (int)upgrade->value_len, upgrade->value);
    if (sxe_http_upgrade(held, headers, tunnel_handlers()) < 0) {
        return; /* the client's connection failed and closed: that cancelled the exchange */
    }
    exchange_free(exchange);
    tunnel_open(client, conn);
}

/* The upstream's head: ours goes out, re-framed, with the end-to-end fields and Via. */
static void on_head(sxe_http_call_t *call, const struct sxe_http_response_head *response, void *arg)
{
    struct exchange *exchange = arg;
    char headers[20 * 1024 + FIELDS_ROOM];
    int64_t length =
        response->chunked || response->until_close ? -1 : (int64_t)response->content_length;

    if (response->status > 599) { /* no class of RFC 9110 §15: nothing a client can act on */
        const struct sxe_http_request_head *request = sxe_http_request_head(exchange->held);
        SXE_LOG_ERROR("upstream for %s answered %.*s with status %d: answering 502",
                      exchange->proxy->prefix, (int)request->target_len, request->target,
                      response->status);
        sxe_http_call_cancel(call);
        exchange->call = NULL;
        exchange->upstream->active--;
        fail(exchange, 502);
        return;
    }
    exchange->upstream->down_until = 0;
    size_t path_len;
    const char *path = sxe_http_path(exchange->held, &path_len);
    char *end = proxy_forwarded_fields(response, headers, headers + sizeof(headers) - FIELDS_ROOM);
    if (fields_for_status(response->status)) { /* --header's, after the upstream's own */
        fields_for_encoded(exchange->proxy->host, path, path_len, end,
                           (size_t)(headers + sizeof(headers) - end));
    }
    const struct sxe_http_header *declared = sxe_http_response_header(response, "Content-Length");
    if (!response->has_body) { /* HEAD keeps the length it would have had; 204 and 304 none */
        length = declared != NULL && response->status >= 200 && response->status != 204 &&
                         response->status != 304
                     ? (int64_t)strtoll(declared->value, NULL, 10)
                     : -1;
    }
    exchange->started = true;
    exchange->corked = sxe_conn_cork(sxe_http_conn(exchange->held));
    if (sxe_http_start(exchange->held, response->status, headers, length) < 0) {
        sxe_http_call_cancel(call); /* the client's connection failed: it closes, and cancels */
        exchange->call = NULL;
        exchange->upstream->active--;
    }
}

/* The head and the first body bytes leave together; the rest as they come. */
static void uncork(struct exchange *exchange)
{
    if (exchange->corked) {
        exchange->corked = false;
        sxe_conn_uncork(sxe_http_conn(exchange->held));
    }
}

static void on_body(sxe_http_call_t *call, const char *data, size_t len, void *arg)
{
    struct exchange *exchange = arg;
    int rc = sxe_http_send(exchange->held, data, len);

    uncork(exchange);
    if (rc < 0) {
        sxe_http_call_cancel(call);
        exchange->call = NULL;
        exchange->upstream->active--;
        return;
    }
    if (sxe_http_backed_up(exchange->held)) { /* the client reads slower: hold the upstream */
        sxe_http_call_pause(call);
        (void)sxe_http_set_drained(exchange->held, on_drained, exchange);
    }
}

static void on_done(sxe_http_call_t *call, int err, void *arg)
{
    struct exchange *exchange = arg;
    struct upstream *upstream = exchange->upstream;
    const struct sxe_http_request_head *request = sxe_http_request_head(exchange->held);

    (void)call;
    exchange->call = NULL;
    exchange->done_ns = sxe_clock_mono_ns();
    upstream->active--;
    if (err == 0) {
        (void)sxe_http_finish(exchange->held);
        uncork(exchange);
        exchange_free(exchange);
        return;
    }
    uncork(exchange);
    unsigned index = (unsigned)(upstream - local->upstreams[exchange->proxy->index]);
    const char *address = exchange->proxy->addresses[index];
    if (exchange->started) { /* cut off: the client must not take it for whole */
        SXE_LOG_ERROR("upstream %s failed in the middle of %.*s: %s; cutting its answer off",
                      address, (int)request->target_len, request->target, sxe_strerror(err));
        (void)sxe_http_abort(exchange->held); /* cancels, which ends the exchange */
        return;
    }
    if (err != -ENOBUFS) {
        upstream->down_until = sxe_loop_now(local->loop) + options.fail_timeout;
    }
    bool idempotent = request->method_len == 3 && memcmp(request->method, "GET", 3) == 0;
    idempotent |= request->method_len == 4 && memcmp(request->method, "HEAD", 4) == 0;
    if (idempotent && !exchange->tried_other && !exchange->body_begun &&
        exchange->proxy->count > 1) {
        exchange->tried_other = true;
        SXE_LOG_WARN("upstream %s failed for %.*s: %s; trying another", address,
                     (int)request->target_len, request->target, sxe_strerror(err));
        if (forward(exchange, upstream) == 0) {
            return;
        }
    }
    int status = err == -ETIMEDOUT ? 504 : err == -ENOBUFS ? 503 : 502;
    SXE_LOG_ERROR("upstream %s failed for %.*s: %s; answering %d", address,
                  (int)request->target_len, request->target, sxe_strerror(err), status);
    fail(exchange, status);
}
