/*
 * Names to addresses (sxe/resolve.h): c-ares's queries on the loop, and a cache of their answers.
 *
 * c-ares does the protocol: /etc/hosts, resolv.conf's servers, search domains, retries, TCP after
 * a truncated answer, and the RFC 6724 order of the addresses. This file is the engine around it:
 * c-ares's sockets are watched by the loop (its socket state callback), its timeouts run on one
 * timer, and its answers land in a fixed table of names, so a name in use is a lookup.
 *
 * A name's entry is asking (its one question is out), answered (addresses or a failure, until
 * expires), or free. Callers wait on their entry's list; when the answer comes (inside
 * ares_process_fd(), or inside ares_getaddrinfo() for /etc/hosts) they move to the ready list,
 * and are called from deliver(), never from inside c-ares or inside sxe_resolve(). An entry with
 * callers, or asking, is never reused for another name.
 */
#define SXE_LOG_MODULE resolve_log
#include "sxe/log.h"

#include <arpa/inet.h>
#include <ares.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sxe/clock.h"
#include "sxe/resolve.h"
#include "sxe/timer.h"

#include "dns.h"

static struct sxe_log_module resolve_log = SXE_LOG_MODULE_INIT(RESOLVE);

struct entry {
    sxe_resolver_t *resolver;
    uint64_t hash;
    uint64_t expires; /* answered: loop time it is good until; 0: free */
    uint64_t used;    /* the resolver's clock when last looked up: the least recent goes first */
    struct sxe_resolve_query *waiting; /* callers, until the answer */
    uint32_t callers;                  /* those, and those on the ready list for it */
    int err;                           /* answered: 0, or the failure */
    bool asking;
    uint16_t count;
    union sxe_resolved_address address[SXE_RESOLVE_ADDRESSES];
    char name[SXE_RESOLVE_NAME_MAX + 1];
};

struct sxe_resolve_query {
    sxe_resolver_t *resolver;
    struct entry *entry; /* NULL: numeric, answered by one */
    struct sxe_resolve_query *next;
    sxe_resolve_done_t done; /* NULL: the query is free, or cancelled */
    void *arg;
    union sxe_resolved_address numeric;
    uint16_t port;
};

struct sxe_resolver {
    sxe_loop_t *loop;
    ares_channel channel;
    struct sxe_resolver_options options;
    sxe_timer_t timeout; /* c-ares's next timeout */
    sxe_timer_t soon;    /* calls the ready list from the loop */
    struct entry *entries;
    struct sxe_resolve_query *queries;
    struct sxe_resolve_query *free;
    struct sxe_resolve_query *ready, **ready_tail;
    uint64_t clock;
    unsigned busy; /* deliver() calls under way: a destroy waits for them */
    bool doomed;
    struct sxe_resolver_stats stats;
};

static void after_ares(sxe_resolver_t *resolver);
static void deliver(sxe_resolver_t *resolver);
static void arm_timeout(sxe_resolver_t *resolver);

/* c-ares's global state, once per process (a no-op on Linux, but its contract asks for it). */
static pthread_once_t library_once = PTHREAD_ONCE_INIT;
static int library_status;

static void library_init(void)
{
    library_status = ares_library_init(ARES_LIB_INIT_ALL);
}

static int error_of(int status)
{
    switch (status) {
    case ARES_SUCCESS:
        return 0;
    case ARES_ENOTFOUND:
    case ARES_ENODATA:
        return -ENOENT;
    case ARES_ETIMEOUT:
        return -ETIMEDOUT;
    case ARES_ECONNREFUSED:
    case ARES_EREFUSED:
        return -ECONNREFUSED;
    case ARES_ENOMEM:
        return -ENOMEM;
    case ARES_EBADNAME:
        return -EINVAL;
    case ARES_EDESTRUCTION:
    case ARES_ECANCELLED:
        return -ECANCELED;
    default: /* SERVFAIL, FORMERR, a malformed answer, and the rest */
        return -EPROTO;
    }
}

/* The loop watches what c-ares asks for on its sockets. */
static void socket_ready(void *arg, int fd, unsigned what)
{
    sxe_resolver_t *resolver = arg;

    ares_process_fd(resolver->channel, what & SXE_LOOP_FD_READ ? fd : ARES_SOCKET_BAD,
                    what & SXE_LOOP_FD_WRITE ? fd : ARES_SOCKET_BAD);
    after_ares(resolver);
}

static void socket_state(void *arg, ares_socket_t fd, int readable, int writable)
{
    sxe_resolver_t *resolver = arg;
    unsigned wanted = (readable ? SXE_LOOP_FD_READ : 0) | (writable ? SXE_LOOP_FD_WRITE : 0);
    int rc = sxe_loop_watch_fd(resolver->loop, fd, wanted, socket_ready, resolver);

    if (rc < 0 && wanted != 0) {
        SXE_LOG_ERROR("cannot watch the resolver's socket %d: %s; its queries will time out", fd,
                      sxe_strerror(rc));
    }
}

static void timed_out(sxe_timer_t *timer, void *arg)
{
    sxe_resolver_t *resolver = arg;

    (void)timer; /* after_ares() starts it again, in the place it just left */
    ares_process_fd(resolver->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    after_ares(resolver);
}

#define PARKED UINT64_MAX /* a timer's delay that never ends: it keeps its place in the heap */

/* Starts a timer again in the place it holds (or has just left, in its callback): never fails. */
static void restart(sxe_resolver_t *resolver, sxe_timer_t *timer, uint64_t delay)
{
    int rc = sxe_timer_start(resolver->loop, timer, delay, 0);

    SXE_ASSERT(rc == 0);
    (void)rc;
}

static void ready_soon(sxe_timer_t *timer, void *arg)
{
    sxe_resolver_t *resolver = arg;

    restart(resolver, timer, PARKED);
    deliver(resolver);
}

/* A query is on the ready list, to be called from the loop's next timers. */
static void make_ready(sxe_resolver_t *resolver, struct sxe_resolve_query *query)
{
    query->next = NULL;
    *resolver->ready_tail = query;
    resolver->ready_tail = &query->next;
    if (resolver->soon.deadline == PARKED) {
        restart(resolver, &resolver->soon, 0);
    }
}

/* c-ares's next timeout on the timer (parked when it has none). */
static void arm_timeout(sxe_resolver_t *resolver)
{
    struct timeval tv;
    uint64_t delay = PARKED;

    if (ares_timeout(resolver->channel, NULL, &tv) != NULL) {
        delay = (uint64_t)tv.tv_sec * SXE_NS_PER_SEC + (uint64_t)tv.tv_usec * 1000;
    }
    restart(resolver, &resolver->timeout, delay);
}

/* After c-ares has run: its next timeout, then the callers it answered. */
static void after_ares(sxe_resolver_t *resolver)
{
    arm_timeout(resolver);
    deliver(resolver);
}

/* The TTL to keep an answer for: its shortest address's, within the options' bounds. */
static uint64_t keep_ns(const sxe_resolver_t *resolver, const struct ares_addrinfo *info)
{
    uint64_t ttl_ms = resolver->options.ttl_max_ms;

    for (const struct ares_addrinfo_node *node = info->nodes; node != NULL; node = node->ai_next) {
        uint64_t node_ms = node->ai_ttl > 0 ? (uint64_t)node->ai_ttl * 1000 : 0;
        ttl_ms = node_ms < ttl_ms ? node_ms : ttl_ms;
    }
    ttl_ms = ttl_ms < resolver->options.ttl_min_ms ? resolver->options.ttl_min_ms : ttl_ms;
    return ttl_ms * SXE_NS_PER_MSEC;
}

/* Copies an answer's addresses (the first SXE_RESOLVE_ADDRESSES of the families asked). */
static unsigned copy_addresses(struct entry *entry, const struct ares_addrinfo *info)
{
    unsigned count = 0;

    for (const struct ares_addrinfo_node *node = info->nodes;
         node != NULL && count < SXE_RESOLVE_ADDRESSES; node = node->ai_next) {
        size_t len = node->ai_family == AF_INET6  ? sizeof(struct sockaddr_in6)
                     : node->ai_family == AF_INET ? sizeof(struct sockaddr_in)
                                                  : 0;
        if (len != 0 && node->ai_addrlen >= len) {
            entry->address[count] = (union sxe_resolved_address){0};
            memcpy(&entry->address[count++], node->ai_addr, len);
        }
    }
    return count;
}

static void answered(void *arg, int status, int timeouts, struct ares_addrinfo *info)
{
    struct entry *entry = arg;
    sxe_resolver_t *resolver = entry->resolver;
    struct sxe_resolve_query *query, *next;

    (void)timeouts;
    entry->asking = false;
    entry->err = error_of(status);
    entry->count = entry->err == 0 && info != NULL ? (uint16_t)copy_addresses(entry, info) : 0;
    if (entry->err == 0 && entry->count == 0) {
        entry->err = -ENOENT; /* only addresses of another kind */
    }
    resolver->stats.answered += entry->err == 0;
    resolver->stats.failed += entry->err != 0;
    uint64_t keep =
        entry->err == 0 ? keep_ns(resolver, info) : resolver->options.negative_ms * SXE_NS_PER_MSEC;
    entry->expires = entry->err == -ECANCELED ? 0 : sxe_loop_now(resolver->loop) + keep;
    if (entry->err != 0 && entry->err != -ECANCELED) {
        SXE_LOG_WARN("cannot resolve %s: %s", entry->name, ares_strerror(status));
    }
    if (info != NULL) {
        ares_freeaddrinfo(info);
    }
    for (query = entry->waiting, entry->waiting = NULL; query != NULL; query = next) {
        next = query->next;
        make_ready(resolver, query);
    }
}

/* An answer to a caller: the entry's addresses with the caller's port. */
static int answer_of(const struct sxe_resolve_query *query, struct sxe_resolved *answer)
{
    const struct entry *entry = query->entry;

    if (entry == NULL) {
        *answer = (struct sxe_resolved){.count = 1, .address[0] = query->numeric};
        return 0;
    }
    if (entry->err != 0) {
        return entry->err;
    }
    answer->count = entry->count;
    memcpy(answer->address, entry->address, entry->count * sizeof(entry->address[0]));
    sxe__resolved_set_port(answer, query->port);
    return 0;
}

static void destroy_now(sxe_resolver_t *resolver);

/* Calls the callers on the ready list; a destroy asked meanwhile happens after the last. */
static void deliver(sxe_resolver_t *resolver)
{
    struct sxe_resolved answer;
    struct sxe_resolve_query *query;

    resolver->busy++;
    while ((query = resolver->ready) != NULL) {
        if ((resolver->ready = query->next) == NULL) {
            resolver->ready_tail = &resolver->ready;
        }
        sxe_resolve_done_t done = query->done;
        void *arg = query->arg;
        int err = resolver->doomed ? -ECANCELED : answer_of(query, &answer);
        if (query->entry != NULL) {
            SXE_ASSERT(query->entry->callers > 0);
            query->entry->callers--;
        }
        query->done = NULL;
        query->next = resolver->free;
        resolver->free = query;
        resolver->stats.waiting--;
        if (done != NULL) {
            done(arg, err, err == 0 ? &answer : NULL);
        }
    }
    if (--resolver->busy == 0 && resolver->doomed) {
        destroy_now(resolver);
    }
}

/* The entry for name (lowercase, hashed), or NULL. */
static struct entry *entry_of(sxe_resolver_t *resolver, const char *name, uint64_t hash)
{
    for (uint32_t i = 0; i < resolver->options.cache; i++) {
        struct entry *entry = &resolver->entries[i];
        if (entry->hash == hash && (entry->expires != 0 || entry->asking) &&
            strcmp(entry->name, name) == 0) {
            return entry;
        }
    }
    return NULL;
}

/* A place for a new name: a free entry, else the least recently used one nobody waits for. */
static struct entry *entry_take(sxe_resolver_t *resolver)
{
    struct entry *oldest = NULL;

    for (uint32_t i = 0; i < resolver->options.cache; i++) {
        struct entry *entry = &resolver->entries[i];
        if (entry->asking || entry->callers != 0) {
            continue;
        }
        if (entry->expires == 0) {
            return entry;
        }
        if (oldest == NULL || entry->used < oldest->used) {
            oldest = entry;
        }
    }
    return oldest;
}

/* The fresh entry for name, or NULL (counted as a hit when found). */
static struct entry *fresh(sxe_resolver_t *resolver, const char *name, uint64_t hash)
{
    struct entry *entry = entry_of(resolver, name, hash);

    if (entry == NULL || entry->asking || entry->expires <= sxe_loop_now(resolver->loop)) {
        return NULL;
    }
    entry->used = ++resolver->clock;
    resolver->stats.hits++;
    return entry;
}

int sxe_resolve_cached(sxe_resolver_t *resolver, const char *name, uint16_t port,
                       struct sxe_resolved *answer)
{
    char lower[SXE_RESOLVE_NAME_MAX + 1];
    struct sxe_resolve_query query = {.port = port};
    int rc = sxe__resolve_name(name, port, lower, &query.numeric);

    if (rc <= 0) {
        return rc < 0 ? rc : answer_of(&query, answer);
    }
    if (resolver == NULL ||
        (query.entry = fresh(resolver, lower, sxe__resolve_hash(lower))) == NULL) {
        return -EAGAIN;
    }
    return answer_of(&query, answer);
}

/* Where the query waits: its entry's list, or the ready list. @return 0, or -ENOBUFS. */
static int place_query(sxe_resolver_t *resolver, struct sxe_resolve_query *query, const char *name)
{
    uint64_t hash = sxe__resolve_hash(name);
    struct entry *entry = fresh(resolver, name, hash);

    query->entry = entry;
    query->next = NULL;
    if (entry != NULL) {
        entry->callers++;
        make_ready(resolver, query);
        return 0;
    }
    if ((entry = entry_of(resolver, name, hash)) != NULL && entry->asking) {
        query->entry = entry; /* behind those who asked first */
        struct sxe_resolve_query **last = &entry->waiting;
        while (*last != NULL) {
            last = &(*last)->next;
        }
        *last = query;
        entry->callers++;
        return 0;
    }
    if (entry != NULL && entry->callers != 0) {
        entry->hash = 0; /* its old answer is still to be read by callers on the ready list:
                            retired, it goes once they have (no name hashes to 0) */
        entry = NULL;
    }
    if (entry == NULL && (entry = entry_take(resolver)) == NULL) {
        return -ENOBUFS;
    }
    *entry = (struct entry){.resolver = resolver,
                            .hash = hash,
                            .asking = true,
                            .waiting = query,
                            .callers = 1,
                            .used = ++resolver->clock};
    memcpy(entry->name, name, strlen(name) + 1);
    query->entry = entry;
    struct ares_addrinfo_hints hints = {.ai_family = resolver->options.family,
                                        .ai_socktype = SOCK_STREAM};
    resolver->stats.asked++;
    ares_getaddrinfo(resolver->channel, name, NULL, &hints, answered, entry);
    arm_timeout(resolver);
    return 0;
}

int sxe_resolve(sxe_resolver_t *resolver, const char *name, uint16_t port, sxe_resolve_done_t done,
                void *arg, sxe_resolve_query_t **handle)
{
    char lower[SXE_RESOLVE_NAME_MAX + 1];
    struct sxe_resolve_query *query = resolver->free;

    if (!SXE_CHECK(done != NULL && !resolver->doomed)) {
        return -EINVAL;
    }
    if (query == NULL) {
        SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN, "%u callers wait for names already; raise %s",
                     resolver->options.queries, sxe_log_setting("sxe_resolver_options.queries"));
        return -ENOBUFS;
    }
    struct sxe_resolve_query *next_free = query->next;
    *query =
        (struct sxe_resolve_query){.resolver = resolver, .done = done, .arg = arg, .port = port};
    int rc = sxe__resolve_name(name, port, lower, &query->numeric);
    if (rc == 0) {
        make_ready(resolver, query);
    } else if (rc < 0 || (rc = place_query(resolver, query, lower)) < 0) {
        query->done = NULL;
        query->next = next_free;
        return rc;
    }
    resolver->free = next_free;
    resolver->stats.waiting++;
    if (handle != NULL) {
        *handle = query;
    }
    return 0;
}

void sxe_resolve_cancel(sxe_resolve_query_t *query)
{
    if (query != NULL) {
        query->done = NULL; /* it stays where it waits, and is freed when its answer comes */
    }
}

void sxe_resolver_stats(const sxe_resolver_t *resolver, struct sxe_resolver_stats *stats)
{
    *stats = resolver->stats;
}

/* The options with every default filled in. @return 0, or -EINVAL. */
static int fill_options(struct sxe_resolver_options *options)
{
    options->timeout_ms = options->timeout_ms ? options->timeout_ms : 1000;
    options->tries = options->tries ? options->tries : 2;
    options->cache = options->cache ? options->cache : 64;
    options->queries = options->queries ? options->queries : 256;
    options->ttl_min_ms = options->ttl_min_ms ? options->ttl_min_ms : 1000;
    options->ttl_max_ms = options->ttl_max_ms ? options->ttl_max_ms : 3600 * 1000;
    options->negative_ms = options->negative_ms ? options->negative_ms : 1000;
    bool family =
        options->family == AF_UNSPEC || options->family == AF_INET || options->family == AF_INET6;
    if (!SXE_CHECK(family) || !SXE_CHECK(options->ttl_min_ms <= options->ttl_max_ms) ||
        !SXE_CHECK(options->timeout_ms <= INT32_MAX && options->tries <= INT32_MAX)) {
        return -EINVAL;
    }
    return 0;
}

static int channel_open(sxe_resolver_t *resolver, const char *servers)
{
    struct ares_options ares = {
        .flags = ARES_FLAG_NOCHECKRESP, /* SERVFAIL and REFUSED are answers, not silence */
        .timeout = (int)resolver->options.timeout_ms,
        .tries = (int)resolver->options.tries,
        .lookups = (char *)"fb", /* /etc/hosts first, then the servers */
        .sock_state_cb = socket_state,
        .sock_state_cb_data = resolver,
    };
    int mask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_LOOKUPS |
               ARES_OPT_SOCK_STATE_CB;
    int status = ares_init_options(&resolver->channel, &ares, mask);

    if (status != ARES_SUCCESS) {
        SXE_LOG_ERROR("c-ares cannot start: %s", ares_strerror(status));
        return status == ARES_ENOMEM ? -ENOMEM : -EIO;
    }
    if (servers != NULL &&
        (status = ares_set_servers_ports_csv(resolver->channel, servers)) != ARES_SUCCESS) {
        SXE_LOG_ERROR("name servers '%s': %s", servers, ares_strerror(status));
        ares_destroy(resolver->channel);
        return status == ARES_ENOMEM ? -ENOMEM : -EINVAL;
    }
    return 0;
}

int sxe_resolver_create(sxe_resolver_t **resolver_out, sxe_loop_t *loop,
                        const struct sxe_resolver_options *options)
{
    struct sxe_resolver_options filled =
        options != NULL ? *options : (struct sxe_resolver_options){0};
    sxe_resolver_t *resolver;
    int rc;

    *resolver_out = NULL;
    if ((rc = fill_options(&filled)) < 0) {
        return rc;
    }
    if (pthread_once(&library_once, library_init) != 0 || library_status != ARES_SUCCESS) {
        SXE_LOG_ERROR("c-ares cannot start: %s", ares_strerror(library_status));
        return -EIO;
    }
    if ((resolver = calloc(1, sizeof(*resolver))) == NULL ||
        (resolver->entries = calloc(filled.cache, sizeof(*resolver->entries))) == NULL ||
        (resolver->queries = calloc(filled.queries, sizeof(*resolver->queries))) == NULL) {
        rc = -ENOMEM;
        goto fail;
    }
    resolver->loop = loop;
    resolver->options = filled;
    resolver->options.servers = NULL; /* read once, by channel_open(): not kept */
    resolver->ready_tail = &resolver->ready;
    for (uint32_t i = filled.queries; i-- > 0;) {
        resolver->queries[i].next = resolver->free;
        resolver->free = &resolver->queries[i];
    }
    sxe_timer_init(&resolver->timeout, timed_out, resolver);
    sxe_timer_init(&resolver->soon, ready_soon, resolver);
    if ((rc = sxe_timer_start(loop, &resolver->timeout, PARKED, 0)) < 0 ||
        (rc = sxe_timer_start(loop, &resolver->soon, PARKED, 0)) < 0) {
        goto fail;
    }
    if ((rc = channel_open(resolver, filled.servers)) < 0) {
        goto fail;
    }
    *resolver_out = resolver;
    return 0;

fail:
    if (resolver != NULL) {
        sxe_timer_stop(loop, &resolver->timeout);
        sxe_timer_stop(loop, &resolver->soon);
        free(resolver->queries);
        free(resolver->entries);
        free(resolver);
    }
    return rc;
}

/* Every question ends (-ECANCELED to those who wait), then the memory goes. */
static void destroy_now(sxe_resolver_t *resolver)
{
    resolver->busy++;                /* the callers called below must not destroy it again */
    ares_destroy(resolver->channel); /* answers each question: its callers become ready */
    deliver(resolver);               /* with -ECANCELED, since doomed */
    sxe_timer_stop(resolver->loop, &resolver->timeout);
    sxe_timer_stop(resolver->loop, &resolver->soon);
    free(resolver->queries);
    free(resolver->entries);
    free(resolver);
}

void sxe_resolver_destroy(sxe_resolver_t *resolver)
{
    if (resolver == NULL || resolver->doomed) {
        return;
    }
    resolver->doomed = true;
    if (resolver->busy == 0) {
        destroy_now(resolver);
    }
}
