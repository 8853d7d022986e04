/**
 * @file sxe/resolve.h
 * @brief Host names to addresses, on the loop: c-ares's queries, and a cache of their answers.
 *
 * A resolver belongs to one loop. It reads /etc/hosts, then asks the name servers of
 * /etc/resolv.conf (or options.servers), over UDP, and over TCP when an answer is truncated. Its
 * sockets are watched by the loop (sxe_loop_watch_fd()): no thread, no blocking. Answers are kept
 * for their TTL (between options.ttl_min_ms and ttl_max_ms), failures for negative_ms, so a name
 * in use costs a lookup in a small table:
 *
 *     struct sxe_resolved answer;
 *     int rc = sxe_resolve_cached(resolver, "api.example.com", 443, &answer);
 *     if (rc == -EAGAIN) {  // not known yet, or its TTL ran out: ask, and hear later
 *         rc = sxe_resolve(resolver, "api.example.com", 443, resolved, arg, NULL);
 *     }
 *
 * Numeric addresses ("10.0.0.7", "::1") and "localhost" are answered at once, never asked. An
 * answer holds every address the name has, up to SXE_RESOLVE_ADDRESSES, IPv6 and IPv4 both unless
 * options.family says one, in the order RFC 6724 prefers them: a caller tries them in turn.
 * Queries for a name already being asked wait for the same answer; a name asked again after its
 * TTL gets a fresh answer, so an upstream that moves is followed by the connections made after.
 *
 * Errors: -ENOENT the name does not exist, or has no address of the family (NXDOMAIN, NODATA);
 * -ETIMEDOUT no server answered (each is tried options.tries times, options.timeout_ms apart);
 * -ECONNREFUSED the server refused the question (REFUSED) or the connection; -EPROTO it failed
 * (SERVFAIL), or its answer breaks the protocol (FORMERR, malformed; with both families asked,
 * c-ares reports the last answer of the two, so a malformed A beside an empty AAAA is -ENOENT);
 * -EINVAL a name that is not one (empty, over 253 bytes, a label over 63, a character no host
 * name has); -ENOMEM; -ECANCELED the resolver was destroyed first; -ENOTSUP built without
 * c-ares (-DSXE_CARES=OFF, or no libc-ares-dev), where only numeric addresses and localhost work.
 */
#ifndef SXE_RESOLVE_H
#define SXE_RESOLVE_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "sxe/conn.h"
#include "sxe/error.h"
#include "sxe/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sxe_resolver sxe_resolver_t;
typedef struct sxe_resolve_query sxe_resolve_query_t;

#define SXE_RESOLVE_ADDRESSES 16  /**< An answer's most addresses; a name with more is cut. */
#define SXE_RESOLVE_NAME_MAX  253 /**< A host name's most bytes, without a trailing dot. */

struct sxe_resolver_options {
    /**
     * Name servers instead of /etc/resolv.conf's: "IP[:PORT],..." ("127.0.0.1:5353",
     * "[::1]:53"); NULL for resolv.conf's. /etc/hosts is read first either way.
     */
    const char *servers;
    uint32_t timeout_ms;  /**< The first try's wait for a server (1,000); doubles each round. */
    uint32_t tries;       /**< Rounds over the servers before -ETIMEDOUT (2). */
    uint32_t cache;       /**< Names kept (64; least recently used go first). */
    uint32_t queries;     /**< Callers waiting at once (256): else -ENOBUFS. */
    uint32_t ttl_min_ms;  /**< Shortest time an answer is kept (1,000; /etc/hosts's too). */
    uint32_t ttl_max_ms;  /**< Longest (3,600,000), whatever its TTL says. */
    uint32_t negative_ms; /**< How long a failure is remembered (1,000). */
    int family;           /**< AF_UNSPEC (both, the default), AF_INET or AF_INET6. */
};

/** One of a name's addresses, with the port asked for; its family says which member. */
union sxe_resolved_address {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
};

/** A name's answer: its addresses in the order to try them. */
struct sxe_resolved {
    uint32_t count; /**< 1 to SXE_RESOLVE_ADDRESSES */
    union sxe_resolved_address address[SXE_RESOLVE_ADDRESSES];
};

/** The length of an address of an answer, for sxe_conn_connect(). */
static inline socklen_t sxe_resolved_len(const union sxe_resolved_address *address)
{
    return address->sa.sa_family == AF_INET6 ? sizeof(address->in6) : sizeof(address->in);
}

/**
 * A query ended: err 0 with answer (valid until this returns), or err < 0 (see above) and NULL.
 */
typedef void (*sxe_resolve_done_t)(void *arg, int err, const struct sxe_resolved *answer);

/**
 * Makes a resolver on loop. It reads /etc/resolv.conf and /etc/hosts now (hosts again when it
 * changes). Its sockets take some of the loop's 16 watched descriptors, and it runs one of the
 * loop's timers while queries are out.
 * @param options NULL for the defaults.
 * @return 0, -EINVAL (options.servers does not parse, or a family of neither), -ENOMEM,
 *         -ENOTSUP (built without c-ares), or -EIO (c-ares cannot start: logged).
 */
SXE_MUST_CHECK int sxe_resolver_create(sxe_resolver_t **resolver, sxe_loop_t *loop,
                                       const struct sxe_resolver_options *options);

/**
 * Ends every query with -ECANCELED (their done is called), closes the sockets, frees. From a done
 * callback too: the resolver goes once the callbacks under way have returned.
 */
void sxe_resolver_destroy(sxe_resolver_t *resolver);

/**
 * Answers from what is known, at once: a numeric address, localhost, or a name whose answer (or
 * failure) is still within its time. With a NULL resolver, numeric addresses and localhost only.
 * @return 0 with answer filled in (port set on each address); -EAGAIN when the name must be asked
 *         (sxe_resolve()); -EINVAL for a name that is not one; or the failure remembered for it.
 */
int sxe_resolve_cached(sxe_resolver_t *resolver, const char *name, uint16_t port,
                       struct sxe_resolved *answer);

/**
 * Reads "HOST:PORT" as the library's clients take a server: HOST an IPv4 address, an IPv6 one in
 * brackets, localhost (in any case), or a host name; PORT 1 to 65535 in digits. Needs no
 * resolver, and works in a build without c-ares.
 * @param name    SXE_RESOLVE_NAME_MAX + 1 bytes: a name, in lowercase, without a trailing dot.
 * @param numeric an address's, with the port.
 * @return 1 for a name (name and *port set), 0 for an address (numeric set), or -EINVAL.
 */
SXE_MUST_CHECK int sxe_resolve_split(const char *address, char *name, uint16_t *port,
                                     union sxe_resolved_address *numeric);

/**
 * Finds name's addresses, with port: done(arg, err, answer) is called once, later, from the loop
 * (never from inside this call), also for what sxe_resolve_cached() would have answered.
 * @param query NULL, or set to the query's handle for sxe_resolve_cancel().
 * @return 0; -EINVAL for a name that is not one; -ENOBUFS past options.queries callers waiting,
 *         or when every cached name is being asked; -ENOMEM.
 */
SXE_MUST_CHECK int sxe_resolve(sxe_resolver_t *resolver, const char *name, uint16_t port,
                               sxe_resolve_done_t done, void *arg, sxe_resolve_query_t **query);

/**
 * The caller stops waiting: its done is not called. The question goes on for the others who wait
 * for the same name, and its answer is cached. Only before done is called.
 */
void sxe_resolve_cancel(sxe_resolve_query_t *query);

/**
 * A name's nth address (counted round its answer: a caller that moves on after a refusal asks for
 * the next), with port: at once when known (an address, localhost, a name within its TTL), else
 * asked, as sxe_resolve() asks, so that done comes from the loop; call again then.
 * @param resolver NULL for addresses and localhost only (a name is -EINVAL).
 * @return 0 with *address; -EAGAIN while asked (*query set, if query is given); the failure
 *         remembered for the name; or sxe_resolve()'s error.
 */
SXE_MUST_CHECK int sxe_resolve_address(sxe_resolver_t *resolver, const char *name, uint16_t port,
                                       uint32_t nth, union sxe_resolved_address *address,
                                       sxe_resolve_done_t done, void *arg,
                                       sxe_resolve_query_t **query);

/**
 * Connects to "HOST:PORT" (as sxe_resolve_split() reads it) as sxe_conn_connect() connects to an
 * address. An address, localhost or a name within its TTL connects at once, to the first of its
 * addresses whose connect can begin. A name that must be asked gives a connection at once too,
 * reserved (sxe_conn_reserve()): its connect begins when the answer comes, so connect_timeout
 * counts the asking, and a name that cannot be resolved closes it with SXE_CLOSE_ERROR and the
 * resolver's error as a positive errno (ENOENT, ETIMEDOUT, ECONNREFUSED, EPROTO, ECANCELED).
 * Every address is tried in turn: a connect that cannot begin, one refused from the loop, or one
 * not up within connect_timeout (by a plan, struct sxe_connect_plan in sxe/conn.h) moves on to the
 * next, which has connect_timeout of its own; on_close comes with the last address's failure once
 * all have failed.
 * @param loop      the resolver's loop.
 * @param resolver  NULL for addresses and localhost only (a name is -EINVAL).
 * @param options   as sxe_conn_connect()'s (its plan is not taken: the call has its own); with
 *                  tls and no server_name, the certificate is checked for HOST. Copied: need not
 *                  outlive the call.
 * @return 0 with *conn; -EINVAL (an address that does not split, a name without a resolver; in
 *         debug builds an assertion for NULL arguments); a failure remembered for the name;
 *         sxe_resolve()'s or sxe_conn_connect()'s error; -ENOMEM.
 */
SXE_MUST_CHECK int sxe_resolve_connect(sxe_loop_t *loop, sxe_resolver_t *resolver,
                                       sxe_conn_t **conn, const char *address,
                                       const struct sxe_connect_options *options,
                                       const struct sxe_conn_handlers *handlers, void *user);

/** A resolver's counters. */
struct sxe_resolver_stats {
    uint64_t hits;     /**< Answered from the cache (either call). */
    uint64_t asked;    /**< Questions sent to c-ares (one per name, however many wait). */
    uint64_t answered; /**< Of them, answered with addresses. */
    uint64_t failed;   /**< Of them, failed. */
    uint32_t waiting;  /**< Callers waiting now. */
};

void sxe_resolver_stats(const sxe_resolver_t *resolver, struct sxe_resolver_stats *stats);

#ifdef __cplusplus
}
#endif

#endif
