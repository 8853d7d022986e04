/*
 * sxe-httpd's metrics: see metrics.h. The exposition is Prometheus's text format, version 0.0.4.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <sxe/clock.h>
#include <sxe/sxe.h>
#include <sxe/workers.h>

#include "hosts.h"
#include "metrics.h"
#include "proxy.h"

enum { KIND_STATIC, KIND_PROXY, KINDS };
#define CLASSES 5 /* status classes 1xx to 5xx */

/* Upper bounds of the time histogram's buckets, in ns, and as Prometheus's le (seconds). */
static const uint64_t bounds[] = {1000000,    2500000,    5000000,    10000000,  25000000,
                                  50000000,   100000000,  250000000,  500000000, 1000000000,
                                  2500000000, 5000000000, 10000000000};
static const char *const les[] = {"0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
                                  "0.25",  "0.5",    "1",     "2.5",  "5",     "10"};
#define BUCKETS (sizeof(bounds) / sizeof(bounds[0]))
_Static_assert(sizeof(les) / sizeof(les[0]) == BUCKETS, "a label per bound");

struct kind_counters {
    uint64_t requests[CLASSES];
    uint64_t bytes;
    uint64_t buckets[BUCKETS]; /* each bucket's own count; past the last, only in requests */
    uint64_t ns;               /* the sum of the requests' times */
};

struct upstream_counters {
    uint64_t answers[CLASSES];
    uint64_t ns;
};

/* One worker's counters: written by that worker only, read by any (relaxed atomics). Each host
 * has KINDS kinds' counters, the default host's first. */
struct slot {
    struct upstream_counters upstreams[PROXY_UPSTREAMS_MOST];
    struct kind_counters kinds[];
};

static char *slots;
static size_t slot_size; /* a slot's bytes with its hosts' counters, in whole cache lines */
static unsigned slot_count;
static sxe_http_server_t *metrics_server;

/* --metrics-allow: addresses (IPv4 mapped into IPv6) and their prefix lengths. */
static struct {
    struct in6_addr address;
    unsigned bits;
} allowed[METRICS_ALLOW_MOST];
static unsigned allowed_count;

static void add(uint64_t *counter, uint64_t value)
{
    __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + value, __ATOMIC_RELAXED);
}

static uint64_t load(const uint64_t *counter)
{
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

/* An IPv4 address as IPv6 (::ffff:a.b.c.d), so one comparison serves both. */
static void mapped(const struct in_addr *v4, struct in6_addr *out)
{
    memset(out, 0, sizeof(*out));
    out->s6_addr[10] = out->s6_addr[11] = 0xff;
    memcpy(&out->s6_addr[12], v4, 4);
}

const char *metrics_allow(const char *text)
{
    char address[INET6_ADDRSTRLEN];
    const char *slash = strchr(text, '/');
    size_t len = slash != NULL ? (size_t)(slash - text) : strlen(text);
    struct in_addr v4;

    if (allowed_count == METRICS_ALLOW_MOST) {
        return "too many --metrics-allow options";
    }
    if (len == 0 || len >= sizeof(address)) {
        return "expected an IPv4 or IPv6 address, optionally /BITS";
    }
    memcpy(address, text, len);
    address[len] = '\0';
    unsigned most = 128, bits;
    if (inet_pton(AF_INET, address, &v4) == 1) {
        mapped(&v4, &allowed[allowed_count].address);
        most = 32;
    } else if (inet_pton(AF_INET6, address, &allowed[allowed_count].address) != 1) {
        return "expected an IPv4 or IPv6 address, optionally /BITS";
    }
    bits = most;
    if (slash != NULL) {
        char *end;
        unsigned long given = strtoul(slash + 1, &end, 10);
        if (slash[1] < '0' || slash[1] > '9' || *end != '\0' || given > most) {
            return "a prefix length is a number of bits: at most 32 for IPv4, 128 for IPv6";
        }
        bits = (unsigned)given;
    }
    allowed[allowed_count++].bits = bits + (128 - most); /* an IPv4 prefix past the mapping's */
    return NULL;
}

/* Whether the address's first bits equal the allowed one's. */
static bool matches(const struct in6_addr *address, unsigned which)
{
    const uint8_t *a = address->s6_addr, *b = allowed[which].address.s6_addr;
    unsigned bits = allowed[which].bits, whole = bits / 8;

    if (memcmp(a, b, whole) != 0) {
        return false;
    }
    unsigned mask = bits % 8 == 0 ? 0 : (0xff00u >> (bits % 8)) & 0xffu;
    return mask == 0 || (a[whole] & mask) == (b[whole] & mask);
}

/* Whether the request's client may read the metrics: --metrics-allow, or loopback. */
static bool may_read(const sxe_http_t *http)
{
    struct sockaddr_storage peer;
    socklen_t peer_len = sizeof(peer);
    struct in6_addr address;

    if (sxe_conn_peer(sxe_http_conn(http), (struct sockaddr *)&peer, &peer_len) < 0) {
        return false;
    }
    if (peer.ss_family == AF_INET) {
        mapped(&((const struct sockaddr_in *)&peer)->sin_addr, &address);
    } else if (peer.ss_family == AF_INET6) {
        address = ((const struct sockaddr_in6 *)&peer)->sin6_addr;
    } else {
        return false; /* GCOVR_EXCL_LINE: listeners are TCP */
    }
    if (allowed_count == 0) { /* loopback: 127.0.0.0/8 and ::1 */
        return IN6_IS_ADDR_LOOPBACK(&address) ||
               (IN6_IS_ADDR_V4MAPPED(&address) && address.s6_addr[12] == 127);
    }
    for (unsigned i = 0; i < allowed_count; i++) {
        if (matches(&address, i)) {
            return true;
        }
    }
    return false;
}

int metrics_open(unsigned workers)
{
    slot_size = sizeof(struct slot) + (hosts_count() + 1) * KINDS * sizeof(struct kind_counters);
    slot_size = (slot_size + 63) / 64 * 64;
    size_t size = (workers > 0 ? workers : 1) * slot_size;
    void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (map == MAP_FAILED) {
        return -errno;
    }
    slots = map;
    slot_count = workers > 0 ? workers : 1;
    return 0;
}

bool metrics_on(void)
{
    return slots != NULL;
}

/* The calling worker's slot (slot 0 outside workers). */
static struct slot *own_slot(void)
{
    sxe_worker_t *worker = sxe_worker_current();
    unsigned index = worker != NULL ? sxe_worker_index(worker) : 0;

    return (struct slot *)(slots + (index < slot_count ? index : 0) * slot_size);
}

static unsigned class_of(int status)
{
    return status >= 100 && status < 600 ? (unsigned)status / 100 - 1 : CLASSES - 1;
}

void metrics_count(const sxe_http_t *http, unsigned host)
{
    struct slot *slot = own_slot();
    unsigned class = class_of(sxe_http_status(http)), id;
    uint64_t ns = sxe_clock_mono_ns() - sxe_http_began(http), upstream_ns;
    bool ended;
    struct kind_counters *kind =
        &slot->kinds[host * KINDS + (proxy_handled(http) ? KIND_PROXY : KIND_STATIC)];

    add(&kind->requests[class], 1);
    add(&kind->bytes, sxe_http_body_sent(http));
    add(&kind->ns, ns);
    for (unsigned i = 0; i < BUCKETS; i++) {
        if (ns <= bounds[i]) {
            add(&kind->buckets[i], 1);
            break;
        }
    }
    if (proxy_upstream(http, &id, &upstream_ns, &ended) && ended) { /* not a client that left */
        add(&slot->upstreams[id].answers[class], 1);
        add(&slot->upstreams[id].ns, upstream_ns);
    }
}

/* Every worker's counters summed into total (slot_size bytes). */
static void sum(struct slot *total)
{
    uint64_t *into = (uint64_t *)total;
    memset(total, 0, slot_size);
    for (unsigned w = 0; w < slot_count; w++) {
        const uint64_t *from = (const uint64_t *)(slots + w * slot_size);
        for (size_t i = 0; i < slot_size / sizeof(uint64_t); i++) {
            into[i] += load(&from[i]);
        }
    }
}

static void seconds(FILE *out, uint64_t ns)
{
    fprintf(out, "%" PRIu64 ".%09" PRIu64, ns / (uint64_t)SXE_NS_PER_SEC,
            ns % (uint64_t)SXE_NS_PER_SEC);
}

/* A sample's labels: the host's (with virtual hosts: its first name, "" for the default host;
 * names hold nothing to escape), then the kind. */
static const char *labels(unsigned host, unsigned kind)
{
    static const char *const kinds[KINDS] = {"static", "proxy"};
    static __thread char text[HOST_NAME_MOST + 64];

    if (hosts_count() == 0) {
        snprintf(text, sizeof(text), "kind=\"%s\"", kinds[kind]);
    } else {
        const char *names = hosts_at(host)->names;
        snprintf(text, sizeof(text), "host=\"%.*s\",kind=\"%s\"", (int)strcspn(names, ", "), names,
                 kinds[kind]);
    }
    return text;
}

/* The requests' families: counts by host, kind and class, bytes, and the time histogram. */
static void write_requests(FILE *out, const struct slot *total)
{
    unsigned all = (hosts_count() + 1) * KINDS;

    fputs("# HELP sxe_httpd_requests_total Requests answered, by what served them and status "
          "class.\n# TYPE sxe_httpd_requests_total counter\n",
          out);
    for (unsigned k = 0; k < all; k++) {
        for (unsigned c = 0; c < CLASSES; c++) {
            fprintf(out, "sxe_httpd_requests_total{%s,status=\"%uxx\"} %" PRIu64 "\n",
                    labels(k / KINDS, k % KINDS), c + 1, total->kinds[k].requests[c]);
        }
    }
    fputs("# HELP sxe_httpd_response_bytes_total Bytes of response bodies sent.\n"
          "# TYPE sxe_httpd_response_bytes_total counter\n",
          out);
    for (unsigned k = 0; k < all; k++) {
        fprintf(out, "sxe_httpd_response_bytes_total{%s} %" PRIu64 "\n",
                labels(k / KINDS, k % KINDS), total->kinds[k].bytes);
    }
    fputs("# HELP sxe_httpd_request_duration_seconds Time from a request's head to its log line."
          "\n# TYPE sxe_httpd_request_duration_seconds histogram\n",
          out);
    for (unsigned k = 0; k < all; k++) {
        const struct kind_counters *kind = &total->kinds[k];
        const char *label = labels(k / KINDS, k % KINDS);
        uint64_t count = 0, below = 0;
        for (unsigned c = 0; c < CLASSES; c++) {
            count += kind->requests[c];
        }
        for (unsigned i = 0; i < BUCKETS; i++) {
            below += kind->buckets[i];
            fprintf(out, "sxe_httpd_request_duration_seconds_bucket{%s,le=\"%s\"} %" PRIu64 "\n",
                    label, les[i], below);
        }
        fprintf(out,
                "sxe_httpd_request_duration_seconds_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n"
                "sxe_httpd_request_duration_seconds_sum{%s} ",
                label, count, label);
        seconds(out, kind->ns);
        fprintf(out, "\nsxe_httpd_request_duration_seconds_count{%s} %" PRIu64 "\n", label, count);
    }
}

/* The upstreams' families: answers by class, and the time they took (a summary's sum and
 * count). An upstream's name is IP:PORT as configured: nothing in it needs escaping. */
static void write_upstreams(FILE *out, const struct slot *total)
{
    fputs("# HELP sxe_httpd_upstream_responses_total Proxied answers, by upstream and status "
          "class (sxe-httpd's own 502 and 504 too).\n"
          "# TYPE sxe_httpd_upstream_responses_total counter\n",
          out);
    for (unsigned id = 0; id < PROXY_UPSTREAMS_MOST; id++) {
        const char *name = proxy_upstream_name(id);
        for (unsigned c = 0; name != NULL && c < CLASSES; c++) {
            fprintf(out,
                    "sxe_httpd_upstream_responses_total{upstream=\"%s\",status=\"%uxx\"} %" PRIu64
                    "\n",
                    name, c + 1, total->upstreams[id].answers[c]);
        }
    }
    fputs("# HELP sxe_httpd_upstream_response_seconds Time from sending a request upstream to "
          "its answer's end.\n# TYPE sxe_httpd_upstream_response_seconds summary\n",
          out);
    for (unsigned id = 0; id < PROXY_UPSTREAMS_MOST; id++) {
        const char *name = proxy_upstream_name(id);
        if (name == NULL) {
            continue;
        }
        uint64_t count = 0;
        for (unsigned c = 0; c < CLASSES; c++) {
            count += total->upstreams[id].answers[c];
        }
        fprintf(out, "sxe_httpd_upstream_response_seconds_sum{upstream=\"%s\"} ", name);
        seconds(out, total->upstreams[id].ns);
        fprintf(out, "\nsxe_httpd_upstream_response_seconds_count{upstream=\"%s\"} %" PRIu64 "\n",
                name, count);
    }
}

/* The workers' connections: open now (a gauge), or taken since the start (a counter). */
static void write_workers(FILE *out, bool open)
{
    unsigned workers = sxe_http_server_workers(metrics_server);
    const char *name = open ? "sxe_httpd_connections" : "sxe_httpd_connections_accepted_total";

    fprintf(out, "# HELP %s Client connections %s, by worker.\n# TYPE %s %s\n", name,
            open ? "open now" : "taken", name, open ? "gauge" : "counter");
    for (unsigned w = 0; w < workers; w++) {
        struct sxe_worker_stats stats = {0};
        (void)sxe_http_server_stats(metrics_server, w, &stats); /* w is a worker's */
        fprintf(out, "%s{worker=\"%u\"} %" PRIu64 "\n", name, w,
                open ? (uint64_t)stats.open : stats.connections);
    }
}

#define PAGE_WHOLE (128 * 1024) /* a page up to this size goes out in one response call */
#define PAGE_PIECE (64 * 1024)  /* a larger one, this much at a time as the connection drains */

/* A large page being sent: many hosts or upstreams make megabytes, past what one call queues. */
struct page {
    char *text;
    size_t len, sent;
};

static void page_end(struct page *page)
{
    free(page->text);
    free(page);
}

static void page_cancel(sxe_http_t *held, void *arg)
{
    (void)held;
    page_end(arg);
}

/* Sends what the connection takes of the page now, and the rest each time it drains. */
static void page_pump(sxe_http_t *held, void *arg)
{
    struct page *page = arg;

    while (page->sent < page->len && !sxe_http_backed_up(held)) {
        size_t piece = page->len - page->sent < PAGE_PIECE ? page->len - page->sent : PAGE_PIECE;
        if (sxe_http_send(held, page->text + page->sent, piece) < 0) {
            return; /* the connection closes: page_cancel frees the page */
        }
        page->sent += piece;
    }
    if (page->sent == page->len) {
        (void)sxe_http_finish(held); /* done: page_cancel is not called */
        page_end(page);
    }
}

/* Sends a page too large for one call: the request is held until its last piece is sent. */
static void page_send(sxe_http_t *http, char *text, size_t len)
{
    struct page *page = malloc(sizeof(*page));

    if (page == NULL || sxe_http_defer(http, page_cancel, page) < 0) {
        free(page);
        free(text);
        (void)sxe_http_respond(http, 503, "text/plain", "503 Service Unavailable\n", 24);
        return;
    }
    *page = (struct page){.text = text, .len = len};
    if (sxe_http_start(http, 200, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n",
                       (int64_t)len) < 0) {
        return; /* the connection closes: page_cancel frees the page */
    }
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    if (request->method_len == 4 && memcmp(request->method, "HEAD", 4) == 0) {
        page->sent = len;
    } else if (sxe_http_set_drained(http, page_pump, page) < 0) {
        page->sent = len; /* GCOVR_EXCL_LINE: a held request always takes it */
    }
    page_pump(http, page);
}

static void answer(sxe_http_t *http, void *arg)
{
    char *text = NULL;
    size_t len = 0;

    (void)arg;
    if (!may_read(http)) {
        (void)sxe_http_respond(http, 403, "text/plain", "403 Forbidden\n", 14);
        return;
    }
    struct slot *total = malloc(slot_size); /* large: not on a handler's stack */
    FILE *out = total != NULL ? open_memstream(&text, &len) : NULL;
    if (out == NULL) {
        free(total);
        (void)sxe_http_respond(http, 500, "text/plain", "out of memory\n", 14);
        return;
    }
    sum(total);
    write_requests(out, total);
    write_upstreams(out, total);
    write_workers(out, true);
    write_workers(out, false);
    free(total);
    if (fclose(out) != 0 || text == NULL) {
        free(text);
        (void)sxe_http_respond(http, 500, "text/plain", "out of memory\n", 14);
        return;
    }
    if (len > PAGE_WHOLE) {
        page_send(http, text, len); /* which frees text */
        return;
    }
    (void)sxe_http_respond(http, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
}

int metrics_route(sxe_http_server_t *server, const char *path)
{
    metrics_server = server;
    return sxe_http_server_route(server, "GET", path, 0, answer, NULL);
}
