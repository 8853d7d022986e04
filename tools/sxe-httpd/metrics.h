/*
 * --metrics PATH (metrics.c): counters of what sxe-httpd served, in Prometheus's text format, at
 * PATH on its listeners, for the clients --metrics-allow names (loopback only by default).
 *
 * Each worker counts in its own slot of a mapping shared by every worker process (made before
 * they start; a reload's new image starts from zero, which Prometheus reads as a counter reset):
 * a request costs a few stores to lines no other worker writes. A scrape, on whichever worker
 * takes it, sums the slots. Counted from the log hook, so every request once, whatever served it:
 * requests by what served them (static or proxy) and status class, their bytes, a histogram of
 * their time, and per upstream its answers by status class and the time they took.
 */
#ifndef SXE_HTTPD_METRICS_H
#define SXE_HTTPD_METRICS_H

#include <stdbool.h>

#include <sxe/http.h>

#define METRICS_ALLOW_MOST 32 /* --metrics-allow given at most this often */

/* Takes one --metrics-allow: an IPv4 or IPv6 address, optionally /BITS. @return NULL, or why it
 * cannot be taken. */
const char *metrics_allow(const char *text);

/* Makes the counters' mapping for workers workers, before they start. @return 0 or -errno. */
int metrics_open(unsigned workers);

/* Whether metrics are counted (metrics_open() succeeded). */
bool metrics_on(void);

/* Counts a request of host (by index, hosts.h) as it is logged (the HTTP server's on_log). */
void metrics_count(const sxe_http_t *http, unsigned host);

/* Routes GET path to the metrics of server's workers. @return as sxe_http_server_route(). */
int metrics_route(sxe_http_server_t *server, const char *path);

#endif
