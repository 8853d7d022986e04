/*
 * Addresses from text: the one parser that the HTTP module, the tools and a user's raw server
 * share, so that "--listen" means the same thing everywhere; and a URL's authority, read the same
 * way by the clients that take URLs (HTTP and WebSocket).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "sxe/conn.h"

/* The port in text (digits only, at most 65535), or -1. */
static int port_of(const char *text)
{
    int port = 0;

    if (*text == '\0' || strlen(text) > 5) {
        return -1;
    }
    for (; *text != '\0'; text++) {
        if (*text < '0' || *text > '9') {
            return -1;
        }
        port = port * 10 + (*text - '0');
    }
    return port <= 65535 ? port : -1;
}

/* The length of text's host (brackets kept); *port is its port's text, or NULL if it has none. */
static size_t host_length(const char *text, const char **port)
{
    const char *colon = strrchr(text, ':');

    /* A bare IPv6 address has colons of its own: the port cannot be given with it. */
    bool bare_v6 = colon != NULL && text[0] != '[' && strchr(text, ':') != colon;
    if (colon != NULL && !bare_v6 && (text[0] != '[' || colon[-1] == ']')) {
        *port = colon + 1;
        return (size_t)(colon - text);
    }
    *port = NULL;
    return strlen(text);
}

int sxe_address_host(const char *text, char *host, size_t size)
{
    const char *port;
    size_t len = host_length(text, &port);
    bool bracketed = text[0] == '[' && len > 2 && text[len - 1] == ']';

    if (bracketed) {
        text++;
        len -= 2;
    }
    if (len >= size) {
        return -EINVAL;
    }
    memcpy(host, text, len);
    host[len] = '\0';
    return 0;
}

int sxe_address_parse(const char *text, int default_port, struct sockaddr_storage *address,
                      socklen_t *len)
{
    char host[INET6_ADDRSTRLEN];
    const char *port_text;

    (void)host_length(text, &port_text);
    int port = port_text != NULL ? port_of(port_text) : default_port;
    if (port < 0 || port > 65535 || sxe_address_host(text, host, sizeof(host)) < 0) {
        return -EINVAL;
    }
    memset(address, 0, sizeof(*address));
    struct sockaddr_in *v4 = (struct sockaddr_in *)address;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)address;
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*v6);
        return 0;
    }
    if (text[0] == '[') {
        return -EINVAL; /* brackets hold an IPv6 address only */
    }
    if (host[0] == '\0' || strcmp(host, "localhost") == 0) {
        v4->sin_addr.s_addr = htonl(host[0] == '\0' ? INADDR_ANY : INADDR_LOOPBACK);
    } else if (inet_pton(AF_INET, host, &v4->sin_addr) != 1) {
        return -EINVAL;
    }
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    *len = sizeof(*v4);
    return 0;
}

int sxe_conn_listen_at(sxe_loop_t *loop, sxe_conn_t **listener, const char *address_text,
                       const struct sxe_listen_options *options,
                       const struct sxe_conn_handlers *handlers, void *user)
{
    struct sockaddr_storage address;
    socklen_t len;
    int rc = sxe_address_parse(address_text, -1, &address, &len);

    if (rc < 0) {
        return rc;
    }
    return sxe_conn_listen(loop, listener, (struct sockaddr *)&address, len, options, handlers,
                           user);
}

ssize_t sxe__url_authority(const char *at, const char *ends, unsigned default_port, char *host,
                           size_t host_size, char *upstream, size_t upstream_size)
{
    size_t len = strcspn(at, ends);

    if (len == 0 || len >= host_size || at[0] == ':') {
        return -EINVAL; /* no host, or too long */
    }
    memcpy(host, at, len);
    host[len] = '\0';
    const char *bracket = strrchr(host, ']'); /* an IPv6 literal's colons are not a port's */
    bool has_port = strchr(bracket != NULL ? bracket : host, ':') != NULL;
    int n = has_port ? snprintf(upstream, upstream_size, "%s", host)
                     : snprintf(upstream, upstream_size, "%s:%u", host, default_port);
    return n < (int)upstream_size ? (ssize_t)len : -EINVAL;
}
