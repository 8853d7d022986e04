/*
 * What clients do with the resolver: take a name's nth address, asking when it is not known
 * (sxe_resolve_address()), and connect to "HOST:PORT" (sxe_resolve_connect()). A name that must be
 * asked reserves its connection's slot (sxe_conn_reserve()), so the program holds the connection
 * from the call on, as it would after sxe_conn_connect(), and its connect begins when the answer
 * comes. Built with c-ares or without it: only the public resolver calls are used.
 */
#define SXE_LOG_MODULE connect_log
#include "sxe/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "dns.h"
#include "sxe/conn.h"

static struct sxe_log_module connect_log = SXE_LOG_MODULE_INIT(RESOLVE);

int sxe_resolve_address(sxe_resolver_t *resolver, const char *name, uint16_t port, uint32_t nth,
                        union sxe_resolved_address *address, sxe_resolve_done_t done, void *arg,
                        sxe_resolve_query_t **query)
{
    struct sxe_resolved answer;
    int rc = sxe_resolve_cached(resolver, name, port, &answer);

    if (rc == -EAGAIN) {
        rc = resolver != NULL ? sxe_resolve(resolver, name, port, done, arg, query) : -EINVAL;
        return rc < 0 ? rc : -EAGAIN;
    }
    if (rc == 0) {
        *address = answer.address[nth % answer.count];
    }
    return rc;
}

/*
 * A connect to a name's addresses in turn: its plan (struct sxe_connect_plan), which begins the
 * next address's connect when one fails from the loop, and what each connect needs.
 */
struct named_connect {
    struct sxe_connect_plan plan; /* first: the plan is the record */
    sxe_loop_t *loop;
    uint64_t id; /* while the name is asked, the connection's: it may close, and its slot serve
                    another, meanwhile */
    struct sxe_connect_options options; /* its plan is this record's */
    struct sockaddr_storage source;
    char server_name[SXE_RESOLVE_NAME_MAX + 1];
    struct sxe_resolved answer;
    uint32_t next; /* the answer's address to try next */
};

static void ended(struct sxe_connect_plan *plan, sxe_conn_t *conn, int err);

/* A record for a connect to a name's addresses, with its own copy of options. */
static struct named_connect *named_new(sxe_loop_t *loop, const struct sxe_connect_options *options)
{
    struct named_connect *named = malloc(sizeof(*named));

    if (named == NULL) {
        return NULL; /* GCOVR_EXCL_LINE: out of memory */
    }
    named->plan.ended = ended;
    named->loop = loop;
    named->options = *options;
    named->options.plan = &named->plan;
    named->next = 0;
    if (options->source != NULL) {
        memcpy(&named->source, options->source, options->source_len);
        named->options.source = (const struct sockaddr *)&named->source;
    }
    if (options->server_name != NULL) {
        strcpy(named->server_name, options->server_name); /* no longer than a name: checked */
        named->options.server_name = named->server_name;
    }
    return named;
}

/* Begins the reserved connection's connect to the next of the answer's addresses that can begin.
 * @return 0, or the last address's -errno (the connection is still reserved). */
static int connect_next(struct named_connect *named, sxe_conn_t *conn)
{
    int rc = -ENOENT;

    while (rc < 0 && named->next < named->answer.count) {
        const union sxe_resolved_address *address = &named->answer.address[named->next++];
        rc = sxe_conn_connect_reserved(conn, &address->sa, sxe_resolved_len(address),
                                       &named->options);
    }
    return rc;
}

/* A connect begun with the plan ended: a failure moves on to the next address, if there is one. */
static void ended(struct sxe_connect_plan *plan, sxe_conn_t *conn, int err)
{
    struct named_connect *named = (struct named_connect *)plan;

    if (err != 0 && !sxe_conn_closed(conn) && named->next < named->answer.count) {
        SXE_LOG_DEBUG("connection %u: address %u of %u: %s; trying the next", sxe_conn_index(conn),
                      named->next, named->answer.count, sxe_strerror(err));
        if (connect_next(named, conn) == 0) {
            return; /* the plan goes on */
        }
    }
    free(named); /* connected, closed, or out of addresses: the connection fails with err */
}

/* The name's answer came: the connection, if it is still open, connects or fails with it. */
static void answered(void *arg, int err, const struct sxe_resolved *answer)
{
    struct named_connect *named = arg;
    sxe_conn_t *conn = sxe_conn_from_id(named->loop, named->id);

    if (conn != NULL && err == 0) {
        named->answer = *answer;
        if ((err = connect_next(named, conn)) == 0) {
            return; /* the plan has it now */
        }
    }
    if (conn != NULL) {
        SXE_LOG_DEBUG("connection %u: its name's addresses cannot be reached: %s",
                      sxe_conn_index(conn), sxe_strerror(-err));
        sxe_conn_fail(conn, -err);
    }
    free(named);
}

/* Connects at once to the first address of a known answer whose connect can begin; with more
 * than one, a plan moves it on to the next when one fails from the loop. */
static int connect_known(sxe_loop_t *loop, sxe_conn_t **conn, const struct sxe_resolved *answer,
                         const struct sxe_connect_options *options,
                         const struct sxe_conn_handlers *handlers, void *user)
{
    const union sxe_resolved_address *address = &answer->address[0];

    if (answer->count == 1) {
        return sxe_conn_connect(loop, conn, &address->sa, sxe_resolved_len(address), options,
                                handlers, user);
    }
    struct named_connect *named = named_new(loop, options);
    int rc = -ENOENT;

    if (named == NULL) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: out of memory */
    }
    named->answer = *answer;
    while (rc < 0 && rc != -ENOBUFS && named->next < answer->count) {
        address = &answer->address[named->next++];
        rc = sxe_conn_connect(loop, conn, &address->sa, sxe_resolved_len(address), &named->options,
                              handlers, user);
    }
    if (rc < 0) {
        free(named);
    }
    return rc;
}

/* Reserves the connection and asks for its name; the answer connects it. */
static int connect_asked(sxe_loop_t *loop, sxe_resolver_t *resolver, sxe_conn_t **conn,
                         const char *name, uint16_t port, const struct sxe_connect_options *options,
                         const struct sxe_conn_handlers *handlers, void *user)
{
    struct named_connect *named = named_new(loop, options);
    sxe_resolve_query_t *query;
    int rc;

    if (named == NULL) {
        return -ENOMEM; /* GCOVR_EXCL_LINE: out of memory */
    }
    if ((rc = sxe_resolve(resolver, name, port, answered, named, &query)) < 0) {
        free(named);
        return rc;
    }
    if ((rc = sxe_conn_reserve(loop, conn, handlers, user)) < 0) {
        sxe_resolve_cancel(query); /* its answer is kept for the next caller */
        free(named);
        return rc;
    }
    named->id = sxe_conn_id(*conn);
    return 0;
}

int sxe_resolve_connect(sxe_loop_t *loop, sxe_resolver_t *resolver, sxe_conn_t **conn,
                        const char *address, const struct sxe_connect_options *options,
                        const struct sxe_conn_handlers *handlers, void *user)
{
    static const struct sxe_connect_options defaults;
    char name[SXE_RESOLVE_NAME_MAX + 1];
    struct sxe_resolved answer;
    uint16_t port;
    int rc;

    if (!SXE_CHECK(loop != NULL && conn != NULL && address != NULL && handlers != NULL &&
                   (options == NULL || options->source == NULL ||
                    options->source_len <= sizeof(struct sockaddr_storage)))) {
        return -EINVAL;
    }
    if ((rc = sxe_resolve_split(address, name, &port, &answer.address[0])) < 0) {
        return rc;
    }
    struct sxe_connect_options named = options != NULL ? *options : defaults;
    named.plan = NULL; /* a name has its own */
    char host[SXE_RESOLVE_NAME_MAX + 1];
    if (named.tls != NULL && named.server_name == NULL) {
        /* the certificate is checked for the name, or the address, the program gave */
        if (sxe_address_host(address, host, sizeof(host)) < 0) {
            return -EINVAL; /* GCOVR_EXCL_LINE: what splits has a host */
        }
        named.server_name = host;
    }
    if (named.server_name != NULL && strlen(named.server_name) > SXE_RESOLVE_NAME_MAX) {
        return -EINVAL;
    }
    if (rc == 0) {
        answer.count = 1;
        return connect_known(loop, conn, &answer, &named, handlers, user);
    }
    rc = sxe_resolve_cached(resolver, name, port, &answer);
    if (rc == 0) {
        return connect_known(loop, conn, &answer, &named, handlers, user);
    }
    if (rc != -EAGAIN) {
        return rc;
    }
    if (resolver == NULL) {
        return -EINVAL; /* a name, and nothing to ask */
    }
    return connect_asked(loop, resolver, conn, name, port, &named, handlers, user);
}
