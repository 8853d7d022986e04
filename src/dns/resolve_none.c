/*
 * The build without c-ares (-DSXE_CARES=OFF, or no libc-ares-dev): the same names; numeric
 * addresses and localhost are answered, names are -ENOTSUP, and no resolver can be made.
 * tests/build/check-stand-in.sh checks this file defines what resolve.c does.
 */
#include <errno.h>
#include <stddef.h>

#include "dns.h"

int sxe_resolver_create(sxe_resolver_t **resolver, sxe_loop_t *loop,
                        const struct sxe_resolver_options *options)
{
    (void)loop, (void)options;
    *resolver = NULL;
    return -ENOTSUP;
}

void sxe_resolver_destroy(sxe_resolver_t *resolver)
{
    (void)resolver;
}

int sxe_resolve_cached(sxe_resolver_t *resolver, const char *name, uint16_t port,
                       struct sxe_resolved *answer)
{
    char lower[SXE_RESOLVE_NAME_MAX + 1];
    int rc = sxe__resolve_name(name, port, lower, &answer->address[0]);

    (void)resolver;
    answer->count = rc == 0;
    return rc <= 0 ? rc : -ENOTSUP;
}

int sxe_resolve(sxe_resolver_t *resolver, const char *name, uint16_t port, sxe_resolve_done_t done,
                void *arg, sxe_resolve_query_t **query)
{
    (void)resolver, (void)name, (void)port, (void)done, (void)arg, (void)query;
    return -ENOTSUP;
}

void sxe_resolve_cancel(sxe_resolve_query_t *query)
{
    (void)query;
}

void sxe_resolver_stats(const sxe_resolver_t *resolver, struct sxe_resolver_stats *stats)
{
    (void)resolver;
    *stats = (struct sxe_resolver_stats){0};
}
