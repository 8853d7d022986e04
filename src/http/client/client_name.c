/*
 * A client's upstream as given: an address, a name, or a URL. An upstream given by name
 * ("api.example.com:8080", "https://api.example.com") has each new connection take its
 * address from the resolver (sxe/resolve.h), from its cache while the answer's TTL lasts, so the
 * connections made after the name moves go where it points now, and those open stay. A name's
 * addresses are tried in order: a connection refused moves the call, and the connections after
 * it, to the next.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "client.h"
#include "sxe/resolve.h"

/* Reads address as "NAME:PORT" (or an address sxe_address_parse() does not take: "LOCALHOST"),
 * with options.resolver or a resolver of its own. @return 0, -EINVAL, -ENOMEM, or -ENOTSUP
 * without c-ares. */
static int named(sxe_http_client_t *client, const char *address)
{
    char host[SXE_RESOLVE_NAME_MAX + 1];
    union sxe_resolved_address numeric;
    uint16_t port;
    int rc = sxe_resolve_split(address, host, &port, &numeric);

    if (rc < 0) {
        return rc;
    }
    if (rc == 0) {
        client->address_len = sxe_resolved_len(&numeric);
        memcpy(&client->address, &numeric, client->address_len);
        return 0;
    }
    if ((client->name = strdup(host)) == NULL) {
        return -ENOMEM;
    }
    client->port = port;
    if ((client->resolver = client->options.resolver) == NULL) {
        rc = sxe_resolver_create(&client->resolver, client->loop, NULL);
        if (rc < 0) {
            return rc;
        }
        client->own_resolver = true;
    }
    return 0;
}

/*
 * An upstream written as a URL, "http://HOST[:PORT][/]" or "https://...": its authority (the Host
 * the requests carry) into authority, and "HOST:PORT" (80 or 443 when it has none) into upstream.
 * @return 1 for a URL (*secure set for https), 0 for an address that is not one (copied into
 *         upstream as it is), -EINVAL for a URL with a path, or too long.
 */
static int url_of(const char *address, char *upstream, size_t size, char *authority,
                  size_t authority_size, bool *secure)
{
    const char *at = address;
    bool http = strncasecmp(at, "http://", 7) == 0;

    *secure = strncasecmp(at, "https://", 8) == 0;
    if (!http && !*secure) {
        return snprintf(upstream, size, "%s", address) < (int)size ? 0 : -EINVAL;
    }
    at += *secure ? 8 : 7;
    ssize_t len =
        sxe__url_authority(at, "/", *secure ? 443 : 80, authority, authority_size, upstream, size);
    if (len < 0 || (at[len] == '/' && at[len + 1] != '\0')) {
        return -EINVAL; /* the client is for one upstream: targets come with each request */
    }
    return 1;
}

int sxe__http_client_upstream(sxe_http_client_t *client, const char *address)
{
    struct sxe_http_client_options *o = &client->options;
    char upstream[SXE_RESOLVE_NAME_MAX + 16], authority[sizeof(client->host)];
    bool secure;
    int rc = url_of(address, upstream, sizeof(upstream), authority, sizeof(authority), &secure);

    if (rc < 0) {
        return rc;
    }
    const char *host = o->host != NULL ? o->host : rc == 1 ? authority : address;
    if (snprintf(client->host, sizeof(client->host), "%s", host) >= (int)sizeof(client->host)) {
        return -EINVAL;
    }
    o->host = client->host;
    if (sxe_address_parse(upstream, -1, &client->address, &client->address_len) < 0 &&
        (rc = named(client, upstream)) < 0) {
        return rc;
    }
    if (sxe_address_host(client->host, client->server_name, sizeof(client->server_name)) < 0) {
        return -EINVAL;
    }
    if (secure && o->tls == NULL) {
        if ((rc = sxe_tls_client_create(&client->own_tls, NULL)) < 0) {
            return rc;
        }
        o->tls = client->own_tls;
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
    union sxe_resolved_address chosen;

    if (client->name == NULL) {
        return 0;
    }
    if (client->resolving != NULL) {
        return -EAGAIN;
    }
    int rc = sxe_resolve_address(client->resolver, client->name, client->port, client->prefer,
                                 &chosen, resolved, client, &client->resolving);
    if (rc == 0) {
        client->address_len = sxe_resolved_len(&chosen);
        memcpy(&client->address, &chosen, client->address_len);
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

void sxe__http_client_upstream_free(sxe_http_client_t *client)
{
    sxe_tls_destroy(client->own_tls);
    if (client->resolving != NULL) {
        sxe_resolve_cancel(client->resolving);
    }
    if (client->own_resolver) {
        sxe_resolver_destroy(client->resolver);
    }
    free(client->name);
}
