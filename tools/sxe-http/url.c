/*
 * A target given as a URL, as wrk, ab and oha take one: http[s]://HOST[:PORT][/PATH[?QUERY]].
 * HOST is an IPv4 address, an IPv6 one in brackets, or a name, looked up once at start (a load
 * generator may block there: nothing is measured yet) with getaddrinfo, which reads /etc/hosts
 * and asks DNS as /etc/resolv.conf says. The Host the requests carry is the URL's authority, as a
 * browser sends it.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sxe/sxe.h>
#include <unistd.h>

#include "sxe-http.h"

/* Whether text has a byte that has no place in a request line or a Host: a space or a control. */
bool has_control(const char *text)
{
    for (; *text != '\0'; text++) {
        if ((unsigned char)*text <= ' ' || *text == 0x7f) {
            return true;
        }
    }
    return false;
}

/* The parts of a URL; what it gives is copied, so the caller's string is left alone. */
void parse_url(const char *url, struct url *out)
{
    const char *at = url;
    struct in6_addr ipv6;

    memset(out, 0, sizeof(*out));
    if (has_control(url)) {
        out->error = "it has a space or a control character";
        return;
    }
    if (strncasecmp(at, "http://", 7) == 0) {
        at += 7;
    } else if (strncasecmp(at, "https://", 8) == 0) {
        at += 8;
        out->tls = true;
    } else {
        out->error = "it starts with neither http:// nor https://";
        return;
    }
    size_t authority = strcspn(at, "/?#");
    const char *path = at + authority;
    if (authority == 0 || authority >= sizeof(out->authority)) {
        out->error = authority == 0 ? "it names no host" : "its host is too long";
        return;
    }
    memcpy(out->authority, at, authority);
    out->authority[authority] = '\0';
    if (strchr(out->authority, '@') != NULL || strchr(path, '#') != NULL) {
        out->error = "it has a user or a fragment (#): not taken";
        return;
    }
    char *port = NULL;
    if (out->authority[0] == '[') {
        char *close = strchr(out->authority, ']');
        if (close == NULL) {
            out->error = "its IPv6 address has no closing ]";
            return;
        }
        memcpy(out->host, out->authority + 1, (size_t)(close - out->authority - 1));
        if (inet_pton(AF_INET6, out->host, &ipv6) != 1 || (close[1] != '\0' && close[1] != ':')) {
            out->error = "its brackets hold no IPv6 address (without a zone), or more follows them "
                         "than :PORT";
            return;
        }
        port = close[1] == ':' ? close + 2 : NULL;
    } else {
        char *colon = strchr(out->authority, ':');
        size_t len = colon ? (size_t)(colon - out->authority) : strlen(out->authority);
        memcpy(out->host, out->authority, len);
        port = colon ? colon + 1 : NULL;
    }
    out->port = out->tls ? 443 : 80;
    if (port != NULL) {
        char *end;
        long value = strtol(port, &end, 10);
        if (*port < '1' || *port > '9' || *end != '\0' || value > 65535) { /* no sign, no 0 first */
            out->error = "its port is not a number from 1 to 65535";
            return;
        }
        out->port = (int)value;
    }
    if (out->host[0] == '\0') {
        out->error = "it names no host";
        return;
    }
    snprintf(out->path, sizeof(out->path), "%s%s", path[0] == '/' ? "" : "/", path);
    if (strlen(path) + 1 >= sizeof(out->path)) {
        out->error = "its path is too long";
    }
}

/* Whether a connection to address is taken now (a probe, closed at once; 2 s at most). */
static bool answers(const struct addrinfo *address)
{
    struct timeval wait = {.tv_sec = 2};
    int fd = socket(address->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool taken = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait)) == 0 &&
                 connect(fd, address->ai_addr, address->ai_addrlen) == 0;

    if (fd >= 0) {
        close(fd);
    }
    return taken;
}

/*
 * The URL's host as the target's address: parsed if it is one, else looked up, each address the
 * name has tried in getaddrinfo's order (IPv6 or IPv4 first, as the system prefers) until one
 * takes a connection, as wrk does; none does: the first, and the run reports the refusals. 0, or
 * -1 with why the lookup failed.
 */
int resolve_url(const struct url *url, struct sockaddr_storage *target, socklen_t *len,
                const char **why)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *found;
    char port[8];

    if (sxe_address_parse(url->host, url->port, target, len) == 0) {
        return 0;
    }
    snprintf(port, sizeof(port), "%d", url->port);
    int rc = getaddrinfo(url->host, port, &hints, &found);
    if (rc != 0) {
        *why = gai_strerror(rc);
        return -1;
    }
    const struct addrinfo *chosen = found;
    if (chosen == NULL) {
        *why = "no address";
        return -1;
    }
    for (const struct addrinfo *at = found; at != NULL; at = at->ai_next) {
        if (answers(at)) {
            chosen = at;
            break;
        }
    }
    memcpy(target, chosen->ai_addr, chosen->ai_addrlen);
    *len = chosen->ai_addrlen;
    freeaddrinfo(found);
    return 0;
}
