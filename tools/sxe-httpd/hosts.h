/*
 * sxe-httpd's virtual hosts (hosts.c): requests are served by the host their Host field (or
 * HTTP/2 :authority, or absolute target) names, each with its own root, index, listings,
 * --header fields, proxied prefixes and access log; a request for a name no host has goes to the
 * default host, made of the options given outside any host.
 */
#ifndef SXE_HTTPD_HOSTS_H
#define SXE_HTTPD_HOSTS_H

#include <stdbool.h>
#include <stddef.h>

#define HOSTS_MOST       256 /* virtual hosts, beside the default one */
#define HOSTS_NAMES_MOST 1024
#define HOST_NAME_MOST   253 /* bytes of a DNS name */

struct host {
    unsigned index;    /* in the table: 0 for the default host */
    const char *names; /* as given ("example.com,www.example.com"); "" for the default host */
    const char *given; /* its root as given, or NULL */
    char *root;        /* resolved; "" for "/" itself (every path is under it) */
    size_t root_len;
    const char *index_file; /* NULL: the default host's */
    int list;               /* 1, 0, or -1: as the default host */
    const char *access_log; /* its access log's path as given, or NULL: the default host's */
    int log;                /* its access log's number, or -1: the default host's */
    const char *place;      /* where it was named ("FILE:LINE" or "--host"), for mistakes */
};

/*
 * Begins a virtual host named by names (comma-separated: "example.com,www.example.com"; a name
 * "*.example.com" takes every name under example.com, the longest such wins; names are matched
 * without case, a port or a final dot). place says where, for later mistakes; names and place
 * must last. @return NULL, or what is wrong (a name given twice, one that is not a host name,
 * too many).
 */
const char *hosts_add(const char *names, const char *place);

/* The host named last by hosts_add(), or the default host before any. */
struct host *hosts_current(void);

/* Makes the default host the current one again (the command line's options after a file's). */
void hosts_reset(void);

/* How many virtual hosts there are (the default host not counted). */
unsigned hosts_count(void);

/* The host of this index (0: the default host; below hosts_count() + 1). */
struct host *hosts_at(unsigned index);

/* Sorts the names for hosts_find(), once every host is added. */
void hosts_ready(void);

/* The host for an authority (uri-host [":" port], as the request gave it; NULL or len 0: none):
 * the exact name's, else the longest wildcard's, else the default host. */
struct host *hosts_find(const char *authority, size_t len);

/*
 * Writes the key a path is cached under for host into out (size bytes): the path itself for the
 * default host, prefixed "@INDEX" for the others. @return the key's length, or -1 if it would not
 * fit.
 */
int hosts_key(const struct host *host, const char *path, size_t len, char *out, size_t size);

#endif
