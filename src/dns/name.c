/*
 * Host names as the resolver takes them (dns.h): the numeric shortcut, the rules of a name
 * (RFC 1123: labels of letters, digits and hyphens, 1 to 63 bytes, 253 in all; the underscore of
 * service names is let through), and its cache key.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dns.h"

static int numeric_of(const char *name, uint16_t port, union sxe_resolved_address *numeric)
{
    *numeric = (union sxe_resolved_address){0};
    if (strcasecmp(name, "localhost") == 0) {
        numeric->in.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* as sxe_address_parse() has it */
    } else if (inet_pton(AF_INET, name, &numeric->in.sin_addr) != 1) {
        if (inet_pton(AF_INET6, name, &numeric->in6.sin6_addr) != 1) {
            return 1;
        }
        numeric->in6.sin6_family = AF_INET6;
        numeric->in6.sin6_port = htons(port);
        return 0;
    }
    numeric->in.sin_family = AF_INET;
    numeric->in.sin_port = htons(port);
    return 0;
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int sxe__resolve_name(const char *name, uint16_t port, char *lower,
                      union sxe_resolved_address *numeric)
{
    if (name == NULL || numeric_of(name, port, numeric) == 0) {
        return name == NULL ? -EINVAL : 0;
    }
    size_t len = strnlen(name, SXE_RESOLVE_NAME_MAX + 2);
    len -= len > 1 && name[len - 1] == '.'; /* the root's dot */
    if (len == 0 || len > SXE_RESOLVE_NAME_MAX) {
        return -EINVAL;
    }
    size_t label = 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] - 'A' + 'a') : name[i];
        if (c == '.') {
            if (label == 0 || name[i - 1] == '-') {
                return -EINVAL; /* an empty label, or one that ends with a hyphen */
            }
            label = 0;
        } else if (!name_char(c) || (label == 0 && c == '-') || ++label > 63) {
            return -EINVAL;
        }
        lower[i] = c;
    }
    if (label == 0 || name[len - 1] == '-') {
        return -EINVAL; /* an empty last label ("a..", after the root's dot), or a hyphen's end */
    }
    lower[len] = '\0';
    return 1;
}

uint64_t sxe__resolve_hash(const char *lower)
{
    uint64_t hash = 14695981039346656037ULL; /* FNV-1a: names are short, and few */

    for (; *lower != '\0'; lower++) {
        hash = (hash ^ (unsigned char)*lower) * 1099511628211ULL;
    }
    return hash | 1; /* never 0 */
}

void sxe__resolved_set_port(struct sxe_resolved *answer, uint16_t port)
{
    for (uint32_t i = 0; i < answer->count; i++) {
        if (answer->address[i].sa.sa_family == AF_INET6) {
            answer->address[i].in6.sin6_port = htons(port);
        } else {
            answer->address[i].in.sin_port = htons(port);
        }
    }
}

int sxe_resolve_split(const char *address, char *name, uint16_t *port,
                      union sxe_resolved_address *numeric)
{
    const char *colon = strrchr(address, ':');
    char host[SXE_RESOLVE_NAME_MAX + 1];
    size_t host_len = colon != NULL ? (size_t)(colon - address) : 0;
    size_t digits = colon != NULL ? strspn(colon + 1, "0123456789") : 0;

    if (colon == NULL || digits == 0 || digits > 5 || colon[1 + digits] != '\0' || host_len == 0 ||
        host_len >= sizeof(host)) {
        return -EINVAL;
    }
    unsigned long value = strtoul(colon + 1, NULL, 10);
    if (value == 0 || value > 65535) {
        return -EINVAL;
    }
    if (address[0] == '[') { /* an IPv6 address, and nothing else */
        if (address[host_len - 1] != ']' || host_len < 3) {
            return -EINVAL;
        }
        memcpy(host, address + 1, host_len - 2);
        host[host_len - 2] = '\0';
        if (strchr(host, ':') == NULL) {
            return -EINVAL; /* "[a.test]:80" */
        }
    } else {
        memcpy(host, address, host_len);
        host[host_len] = '\0';
        if (strchr(host, ':') != NULL) {
            return -EINVAL; /* an IPv6 address without its brackets */
        }
    }
    *port = (uint16_t)value;
    return sxe__resolve_name(host, *port, name, numeric);
}
