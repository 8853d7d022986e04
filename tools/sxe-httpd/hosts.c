/*
 * sxe-httpd's virtual hosts (hosts.h): a table made once at start. A request's authority is made
 * a plain lower-case name (no port, no final dot) on the stack, then found by binary search among
 * the exact names, then among the wildcards by each of its parent domains, longest first: about
 * 8 comparisons for a hundred hosts, and nothing at all when there are none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hosts.h"

struct name {
    char text[HOST_NAME_MOST + 2]; /* lower case; a wildcard's without its '*' (".example.com") */
    unsigned host;
};

static struct host hosts[HOSTS_MOST + 1] = {{.index = 0, .names = "", .list = -1, .log = -1}};
static unsigned count;
static const struct name *exact, *wild; /* sorted by hosts_ready() */
static unsigned exact_count, wild_count;

/* Makes [from, from + len) a name to look up in out: lower case, without a port or a final dot.
 * @return false for one that cannot be a host's (too long, empty). */
static bool plain_name(const char *from, size_t len, char *out)
{
    if (len > 0 && from[0] == '[') { /* an IPv6 literal: up to its ']' */
        const char *end = memchr(from, ']', len);
        len = end != NULL ? (size_t)(end - from) + 1 : len;
    } else {
        const char *colon = memchr(from, ':', len);
        len = colon != NULL ? (size_t)(colon - from) : len;
    }
    if (len > 0 && from[len - 1] == '.') {
        len--;
    }
    if (len == 0 || len > HOST_NAME_MOST + 1) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = from[i];
        out[i] = c >= 'A' && c <= 'Z' ? (char)(c + 'a' - 'A') : c;
    }
    out[len] = '\0';
    return true;
}

/* Whether a name as given is one a host may have: labels of letters, digits and inner '-',
 * separated by single dots, with an optional "*." first; or an IP literal in brackets. */
static bool good_name(const char *name, size_t len)
{
    size_t start = len > 2 && name[0] == '*' && name[1] == '.' ? 2 : 0;

    if (len == 0 || len > HOST_NAME_MOST) {
        return false;
    }
    if (start == 0 && name[0] == '[') {
        return len > 2 && name[len - 1] == ']' &&
               strspn(name + 1, "0123456789abcdefABCDEF:.") == len - 2;
    }
    for (size_t i = start, label = start; i <= len; i++) {
        char c = i < len ? name[i] : '.';
        bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (c == '.') { /* a label ends: not empty, and neither end a '-' */
            if (i == label || name[label] == '-' || name[i - 1] == '-') {
                return false;
            }
            label = i + 1;
        } else if (!letter && c != '-') {
            return false;
        }
    }
    return true;
}

static struct name table[HOSTS_NAMES_MOST];
static unsigned used;    /* names in the table */
static unsigned current; /* the host options apply to now */

const char *hosts_add(const char *names, const char *place)
{
    if (count == HOSTS_MOST) {
        return "too many hosts (256 at most)";
    }
    struct host *host = &hosts[count + 1];
    unsigned first = used;

    names += strspn(names, ", "); /* what the metrics show: the first name */
    *host =
        (struct host){.index = count + 1, .names = names, .list = -1, .log = -1, .place = place};
    for (const char *at = names; *at != '\0';) {
        size_t len = strcspn(at, ", ");
        if (!good_name(at, len)) {
            used = first;
            return "not a host name (example.com, or *.example.com for every name under it; "
                   "several separated by commas)";
        }
        if (used == HOSTS_NAMES_MOST) {
            used = first;
            return "too many host names (1,024 at most)";
        }
        struct name *name = &table[used];
        bool wildcard = at[0] == '*';
        (void)plain_name(at + wildcard, len - wildcard, name->text);
        name->host = host->index;
        for (unsigned i = 0; i < used; i++) {
            if (strcmp(table[i].text, name->text) == 0) {
                used = first;
                return "a name another host has already";
            }
        }
        used++;
        at += len;
        at += strspn(at, ", ");
    }
    if (used == first) {
        return "names no host";
    }
    current = ++count;
    return NULL;
}

struct host *hosts_current(void)
{
    return &hosts[current];
}

void hosts_reset(void)
{
    current = 0;
}

unsigned hosts_count(void)
{
    return count;
}

struct host *hosts_at(unsigned index)
{
    return &hosts[index];
}

static int by_text(const void *a, const void *b)
{
    return strcmp(((const struct name *)a)->text, ((const struct name *)b)->text);
}

void hosts_ready(void)
{
    static struct name sorted[HOSTS_NAMES_MOST];

    /* The wildcards (".example.com") first, then the exact names, each part sorted. */
    for (unsigned i = 0; i < used; i++) {
        if (table[i].text[0] == '.') {
            sorted[wild_count++] = table[i];
        }
    }
    for (unsigned i = 0; i < used; i++) {
        if (table[i].text[0] != '.') {
            sorted[wild_count + exact_count++] = table[i];
        }
    }
    qsort(sorted, wild_count, sizeof(sorted[0]), by_text);
    qsort(sorted + wild_count, exact_count, sizeof(sorted[0]), by_text);
    wild = sorted;
    exact = sorted + wild_count;
}

static const struct name *find(const struct name *names, unsigned total, const char *text)
{
    size_t low = 0, high = total;
    while (low < high) {
        size_t middle = (low + high) / 2;
        int order = strcmp(text, names[middle].text);
        if (order == 0) {
            return &names[middle];
        }
        if (order < 0) {
            high = middle;
        } else {
            low = middle + 1;
        }
    }
    return NULL;
}

struct host *hosts_find(const char *authority, size_t len)
{
    char name[HOST_NAME_MOST + 2];
    const struct name *found;

    /* An empty label ("a..b") is no host's name: never a wildcard's either. */
    if (count == 0 || authority == NULL || !plain_name(authority, len, name) ||
        strstr(name, "..") != NULL || name[0] == '.') {
        return &hosts[0];
    }
    if ((found = find(exact, exact_count, name)) != NULL) {
        return &hosts[found->host];
    }
    /* "a.b.example.com": ".b.example.com", then ".example.com", then ".com" */
    for (const char *dot = strchr(name + 1, '.'); wild_count > 0 && dot != NULL;
         dot = strchr(dot + 1, '.')) {
        if ((found = find(wild, wild_count, dot)) != NULL) {
            return &hosts[found->host];
        }
    }
    return &hosts[0];
}

int hosts_key(const struct host *host, const char *path, size_t len, char *out, size_t size)
{
    char prefix[8]; /* "@256" at most: no snprintf per request */
    size_t prefix_len = 0;

    if (host->index != 0) {
        prefix[prefix_len++] = '@';
        for (unsigned scale = host->index >= 100  ? 100
                              : host->index >= 10 ? 10
                                                  : 1;
             scale > 0; scale /= 10) {
            prefix[prefix_len++] = (char)('0' + host->index / scale % 10);
        }
    }
    if (prefix_len + len >= size) {
        return -1;
    }
    memcpy(out, prefix, prefix_len);
    memcpy(out + prefix_len, path, len);
    out[prefix_len + len] = '\0';
    return (int)(prefix_len + len);
}
