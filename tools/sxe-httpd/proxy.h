/*
 * sxe-httpd's reverse proxy (--proxy PREFIX=HOST:PORT[,HOST:PORT...]): requests whose path starts
 * with a prefix go to one of its upstreams, over the HTTP client's keep-alive pools; see proxy.c.
 */
#ifndef SXE_HTTPD_PROXY_H
#define SXE_HTTPD_PROXY_H

#include <stdbool.h>
#include <stdint.h>

#include <sxe/http.h>

struct proxy_options {
    uint32_t connections;  /* most connections per upstream, per worker */
    uint32_t requests;     /* most requests proxied at once, per worker */
    uint64_t timeout;      /* ns an upstream may be silent: then 504 */
    uint64_t fail_timeout; /* ns a failed upstream is skipped for */
    uint32_t pipeline;     /* requests one upstream connection may carry at once (1: none) */
    bool round_robin;      /* else least connections */
    bool underscores;      /* request fields with '_' in their names are passed on too */
    sxe_tls_t *tls;        /* the client context for https:// upstreams */
    const char *ca_file;   /* --proxy-ca: the authorities it trusts (NULL: the system's) */
    const char *resolvers; /* --resolver: name servers for upstream names (NULL: resolv.conf's) */
};

/* Checks --resolver's "IP[:PORT][,IP[:PORT]...]". @return NULL, or what is wrong with it. */
const char *proxy_resolvers(const char *list);

/* Adds "PREFIX=HOST:PORT[,HOST:PORT...]" to a host (by index, hosts.h), each upstream http://
 * (the default) or https://, HOST an IP address or a name. @return NULL, or what is wrong. */
const char *proxy_add(unsigned host, const char *spec);

/* Whether prefix is proxied for the host ("/" for everything: then no file is served). */
bool proxy_covers(unsigned host, const char *prefix);

struct proxy;

/* The host's proxied prefix that path (as sxe_http_path() gives it) starts with, the longest, as
 * the server's routes are matched; or NULL. */
struct proxy *proxy_find(unsigned host, const char *path, size_t len);

/* Proxies a request, as a handler of a route made with SXE_HTTP_ROUTE_STREAM, to arg's upstreams
 * (a struct proxy: proxy_find()'s). */
void proxy_handle(sxe_http_t *http, void *arg);

/* How many prefixes are proxied. */
unsigned proxy_count(void);

/* Whether an upstream is https://: options.tls is needed. */
bool proxy_secure(void);

#define PROXY_UPSTREAMS_MOST (64 * 16) /* upstreams of every --proxy together, by id */

/*
 * For the access log and the metrics, while a request is logged: whether the proxy took it; the
 * upstream it went to (the last, after a retry), by id, and the nanoseconds its answer took,
 * from the request's sending until the answer's end (or now, for one cut off; *ended says which),
 * false for a request that reached no upstream. The proxy marks its requests with their user
 * pointer (sxe_http_set_user()): nothing else in sxe-httpd may set one.
 */
bool proxy_handled(const sxe_http_t *http);
bool proxy_upstream(const sxe_http_t *http, unsigned *id, uint64_t *ns, bool *ended);

/* An upstream's IP:PORT as configured, by id (below PROXY_UPSTREAMS_MOST), or NULL for none. */
const char *proxy_upstream_name(unsigned id);

/* The loop timers each worker needs for its proxied requests. */
uint32_t proxy_timers(const struct proxy_options *options);

/* Takes the options every proxied request goes by, before the server starts. */
void proxy_configure(const struct proxy_options *options);

/* Routes each of the default host's prefixes to the proxy (with no other host: else requests
 * are sent by host, proxy_find() then proxy_handle()). @return 0 or the error of
 * sxe_http_server_route(). */
int proxy_route(sxe_http_server_t *server);

#endif
