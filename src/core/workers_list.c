/*
 * The control socket's "connections" (workers_control.c): each worker lists its open streams in
 * its place of the shared mapping, and the supervisor words the lists. A worker lists only when
 * asked, at the end of a turn (its loop's data is its own thread's): the supervisor bumps the
 * worker's "asked" and sends SIGUSR2 to a worker process, or a byte on a worker thread's wake
 * pair, whose loop wakes for it within a millisecond; one that does not answer within the wait
 * is busy in a callback, or stopped, and said so. A turn with nothing asked pays one relaxed load
 * of a line the worker has just written. Workers from before a reload, still draining, are not
 * asked (their supervisor is gone): the answer counts them.
 *
 * Each worker lists up to SXE__LISTING_MOST of its streams (not its channels and wake pair, which
 * are parked among the listeners), by state (the busy first: reading,
 * writing, held, handshaking, connecting, then idle), the oldest in each first: what has waited
 * longest is what an operator looks for. The answer shows SXE__LISTED_MOST of them in all, an
 * equal share of each worker's.
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "loop.h"
#include "sys.h"
#include "worker.h"

#include "sxe/clock.h"
#include "sxe/json.h"

#define SXE__LISTED_MOST 256 /* connections in one answer, every worker's */

static const char *const state_names[SXE__CONN_STATE_COUNT] = {
    [SXE__CONN_FREE] = "free",
    [SXE__CONN_IDLE] = "idle",
    [SXE__CONN_READING] = "reading",
    [SXE__CONN_WRITING] = "writing",
    [SXE__CONN_CONNECTING] = "connecting",
    [SXE__CONN_LISTENING] = "listening",
    [SXE__CONN_CLOSING] = "closing",
    [SXE__CONN_HELD] = "held",
    [SXE__CONN_HANDSHAKING] = "handshaking"};

/* A connection's peer as text: "IP:PORT", "[IPv6]:PORT", or "-". */
static void peer_text(const sxe_conn_t *conn, char *out, size_t size)
{
    struct sockaddr_storage address;
    socklen_t len = sizeof(address);
    char ip[INET6_ADDRSTRLEN];

    snprintf(out, size, "-");
    if (sxe_conn_peer(conn, (struct sockaddr *)&address, &len) < 0) {
        return;
    }
    if (address.ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)&address;
        inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof(ip));
        snprintf(out, size, "%s:%u", ip, ntohs(v4->sin_port));
    } else if (address.ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&address;
        inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof(ip));
        snprintf(out, size, "[%s]:%u", ip, ntohs(v6->sin6_port));
    } else if (address.ss_family == AF_UNIX) {
        snprintf(out, size, "unix");
    }
}

void sxe__worker_list(sxe_worker_t *worker)
{
    static const unsigned order[] = {SXE__CONN_READING,     SXE__CONN_WRITING,    SXE__CONN_HELD,
                                     SXE__CONN_HANDSHAKING, SXE__CONN_CONNECTING, SXE__CONN_IDLE};
    struct sxe__worker_listing *listing = &worker->set->listings[worker->index];
    uint32_t asked = __atomic_load_n(&listing->asked, __ATOMIC_ACQUIRE);
    sxe_loop_t *loop = worker->loop;
    uint32_t count = 0, open = 0;

    if (asked == __atomic_load_n(&listing->done, __ATOMIC_RELAXED)) {
        return;
    }
    for (unsigned s = 0; s < sizeof(order) / sizeof(order[0]); s++) {
        struct sxe_pool_walker walker;
        uint32_t index;

        sxe_pool_walker_init(&walker, loop->conn_pool, order[s]);
        while ((index = sxe_pool_walker_next(&walker)) != SXE_POOL_NONE) {
            sxe_conn_t *conn = &loop->conns[index];
            if (conn->kind != SXE__KIND_STREAM || !sxe__conn_is_open(conn)) {
                continue;
            }
            open++;
            if (count == SXE__LISTING_MOST) {
                continue;
            }
            struct sxe__listed_conn *listed = &listing->conns[count++];
            peer_text(conn, listed->peer, sizeof(listed->peer));
            listed->state = (uint8_t)order[s];
            listed->outbound = (conn->lists & SXE__LIST_OUTBOUND) != 0;
            listed->since = sxe_pool_time(loop->conn_pool, index);
            listed->queued = conn->queued;
            listed->what[0] = '\0';
            if (conn->handlers != NULL && conn->handlers->describe != NULL) {
                conn->handlers->describe(conn, listed->what, sizeof(listed->what));
                listed->what[sizeof(listed->what) - 1] = '\0';
            }
        }
    }
    listing->count = count;
    listing->open = open;
    listing->now = loop->now;
    __atomic_store_n(&listing->done, asked, __ATOMIC_RELEASE);
}

unsigned sxe__workers_list_ask(sxe_workers_t *set)
{
    unsigned asked = 0;

    for (unsigned i = 0; i < set->options.count; i++) {
        sxe_worker_t *worker = &set->workers[i];
        struct sxe__worker_listing *listing = &set->listings[i];
        if (!worker->running) {
            continue;
        }
        __atomic_store_n(&listing->asked, __atomic_load_n(&listing->done, __ATOMIC_ACQUIRE) + 1,
                         __ATOMIC_RELEASE);
        if (set->options.kind == SXE_WORKERS_PROCESSES && worker->pid > 0) {
            (void)sxe__sys.kill(worker->pid, SIGUSR2); /* wakes its loop for a turn */
        } else if (worker->wake[0] >= 0) {
            (void)sxe__sys.write(worker->wake[0], "", 1); /* full: a byte waits there already */
        }
        asked++;
    }
    return asked;
}

bool sxe__workers_list_ready(sxe_workers_t *set)
{
    for (unsigned i = 0; i < set->options.count; i++) {
        const struct sxe__worker_listing *listing = &set->listings[i];
        if (set->workers[i].running && __atomic_load_n(&listing->done, __ATOMIC_ACQUIRE) !=
                                           __atomic_load_n(&listing->asked, __ATOMIC_RELAXED)) {
            return false;
        }
    }
    return true;
}

/* One connection, as a line of the table or a JSON object. */
static void say_conn(const struct sxe__worker_listing *listing, const struct sxe__listed_conn *c,
                     unsigned worker, bool json, bool first,
                     void (*say)(void *arg, const char *text), void *arg)
{
    char line[1024], what[6 * sizeof(c->what) + 3]; /* a byte escaped takes 6 at most */
    uint64_t ms = listing->now > c->since ? (listing->now - c->since) / SXE_NS_PER_MSEC : 0;
    const char *state = c->state < SXE__CONN_STATE_COUNT ? state_names[c->state] : "?";

    if (json) {
        sxe_json_string(what, sizeof(what), c->what, strnlen(c->what, sizeof(c->what)));
        snprintf(line, sizeof(line),
                 "%s{\"worker\":%u,\"peer\":\"%s\",\"upstream\":%s,\"state\":\"%s\","
                 "\"in_state_ms\":%llu,\"queued\":%llu,\"what\":%s}",
                 first ? "" : ",", worker, c->peer, c->outbound ? "true" : "false", state,
                 (unsigned long long)ms, (unsigned long long)c->queued, what);
    } else {
        snprintf(line, sizeof(line), "%-6u %-46s %-11s %10llu.%03llu %10llu  %s%s\n", worker,
                 c->peer, state, (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000),
                 (unsigned long long)c->queued, c->outbound ? "(upstream) " : "", c->what);
    }
    say(arg, line);
}

void sxe__workers_list_say(sxe_workers_t *set, bool json, void (*say)(void *arg, const char *text),
                           void *arg)
{
    char line[160];
    bool first = true;
    uint32_t share = SXE__LISTED_MOST / set->options.count; /* each worker's lines */

    share = share == 0 ? 1 : share > SXE__LISTING_MOST ? SXE__LISTING_MOST : share;
    say(arg, json ? "{\"connections\":["
                  : "worker peer                                           state       in state, s"
                    "     queued  what\n");
    for (unsigned i = 0; i < set->options.count; i++) {
        const struct sxe__worker_listing *listing = &set->listings[i];
        if (!set->workers[i].running || __atomic_load_n(&listing->done, __ATOMIC_ACQUIRE) !=
                                            __atomic_load_n(&listing->asked, __ATOMIC_RELAXED)) {
            continue;
        }
        for (uint32_t c = 0; c < listing->count && c < share; c++) {
            say_conn(listing, &listing->conns[c], i, json, first, say, arg);
            first = false;
        }
    }
    say(arg, json ? "],\"workers\":[" : "");
    for (unsigned i = 0; i < set->options.count; i++) {
        const struct sxe__worker_listing *listing = &set->listings[i];
        bool running = set->workers[i].running;
        bool answered = running && __atomic_load_n(&listing->done, __ATOMIC_ACQUIRE) ==
                                       __atomic_load_n(&listing->asked, __ATOMIC_RELAXED);
        if (json) {
            snprintf(line, sizeof(line),
                     "%s{\"index\":%u,\"running\":%s,\"answered\":%s,\"open\":%u,\"listed\":%u}",
                     i ? "," : "", i, running ? "true" : "false", answered ? "true" : "false",
                     answered ? listing->open : 0,
                     answered ? (listing->count < share ? listing->count : share) : 0);
        } else if (!running) {
            snprintf(line, sizeof(line), "worker %u: not running\n", i);
        } else if (!answered) {
            snprintf(line, sizeof(line),
                     "worker %u: no answer within 250 ms (busy in a callback, or stopped)\n", i);
        } else if (listing->open > (listing->count < share ? listing->count : share)) {
            snprintf(line, sizeof(line),
                     "worker %u: %u open, the %u longest in their state shown\n", i, listing->open,
                     listing->count < share ? listing->count : share);
        } else {
            line[0] = '\0';
        }
        say(arg, line);
    }
    unsigned draining = sxe__workers_draining(false);
    if (json) {
        snprintf(line, sizeof(line), "],\"draining_from_before\":%u}\n", draining);
    } else if (draining > 0) {
        snprintf(line, sizeof(line),
                 "%u worker%s from before a reload still draining: not listed\n", draining,
                 draining == 1 ? "" : "s");
    } else {
        line[0] = '\0';
    }
    say(arg, line);
}
