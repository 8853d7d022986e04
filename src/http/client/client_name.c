/*
 * A client's upstream given by name ("api.example.com:8080"): each new connection takes its
 * address from the resolver (sxe/resolve.h), from its cache while the answer's TTL lasts, so the
 * connections made after the name moves go where it points now, and those open stay. A name's
 * addresses are tried in order: a connection refused moves the call, and the connections after
 * it, to the next.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "sxe/resolve.h"

int sxe__http_client_name(sxe_http_client_t *client, const char *address)
{
    char host[SXE_RESOLVE_NAME_MAX + 1];
    struct sxe_resolved answer;
    const char *colon = strrchr(address, ':');
    char *end;

    if (colon == NULL || colon[1] < '0' || colon[1] > '9' ||
        sxe_address_host(address, host, sizeof(host)) < 0) {
        return -EINVAL;
    }
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end != '\0' || port > 65535 || sxe_resolve_cached(NULL, host, 0, &answer) == -EINVAL) {
        return -EINVAL; /* (a name that is not one is refused before a resolver is asked) */
    }
    if ((client->name = strdup(host)) == NULL) {
        return -ENOMEM;
    }
    client->port = (uint16_t)port;
    if ((client->resolver = client->options.resolver) == NULL) {
        int rc = sxe_resolver_create(&client->resolver, client->loop, NULL);
        if (rc < 0) {
            return rc;
        }
        client->own_resolver = true;
    }
    return 0;
}

/* The name's answer came: the calls waiting for it go on, or fail with it. */
static void resolved(void *arg, int err, const struct sxe_resolved *answer)
{
    sxe_http_client_t *client = arg;

    (void)answer; /* it is in the cache, where sxe__http_client_address() finds it */
    client->resolving = NULL;
    while (err < 0 && client->queue_head != NULL) {
        struct sxe_http_call *call = client->queue_head;
        sxe__http_queue_remove(client, call);
        sxe__http_call_fail(call, err);
    }
    sxe__http_client_dispatch(client);
}

int sxe__http_client_address(sxe_http_client_t *client)
{
    struct sxe_resolved answer;
    int rc;

    if (client->name == NULL) {
        return 0;
    }
    if (client->resolving != NULL) {
        return -EAGAIN;
    }
    rc = sxe_resolve_cached(client->resolver, client->name, client->port, &answer);
    if (rc == -EAGAIN) {
        rc = sxe_resolve(client->resolver, client->name, client->port, resolved, client,
                         &client->resolving);
        return rc < 0 ? rc : -EAGAIN;
    }
    if (rc == 0) {
        const union sxe_resolved_address *chosen = &answer.address[client->prefer % answer.count];
        client->address_len = sxe_resolved_len(chosen);
        memcpy(&client->address, chosen, client->address_len);
    }
    return rc;
}

bool sxe__http_client_try_next(sxe_http_client_t *client, struct sxe_http_call *call)
{
    struct sxe_resolved answer;

    if (client->name == NULL ||
        sxe_resolve_cached(client->resolver, client->name, client->port, &answer) < 0) {
        return false;
    }
    client->prefer++;
    return ++call->refused < answer.count;
}

void sxe__http_client_name_free(sxe_http_client_t *client)
{
    if (client->resolving != NULL) {
        sxe_resolve_cancel(client->resolving);
    }
    if (client->own_resolver) {
        sxe_resolver_destroy(client->resolver);
    }
    free(client->name);
}
