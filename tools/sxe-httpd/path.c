/*
 * Request paths made file paths. The path comes in the library's normal form (sxe_http_path():
 * dot segments resolved however they were written), and is percent-decoded by the library's one
 * decoder. Escapes that would smuggle a separator or a NUL into a name are refused before
 * decoding, since after it they cannot be told from the real ones; and no decoded byte can make a
 * new dot segment, since '.' was decoded already and '/' may not be.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include <sxe/http.h>
#include <sxe/http_parser.h>

#include "options.h"
#include "path.h"

/* Whether the raw path escapes a NUL, a '/' or a '\'. */
static bool escapes_separator(const char *path, size_t len)
{
    for (const char *at = memchr(path, '%', len); at != NULL && at + 2 < path + len;
         at = memchr(at + 1, '%', (size_t)(path + len - at - 1))) {
        if (strncasecmp(at, "%00", 3) == 0 || strncasecmp(at, "%2f", 3) == 0 ||
            strncasecmp(at, "%5c", 3) == 0) {
            return true;
        }
    }
    return false;
}

long path_resolve(const char *path, size_t len, char *out, size_t size, const char **why)
{
    if (escapes_separator(path, len)) {
        *why = "it holds an encoded NUL or separator";
        return -403;
    }
    ssize_t decoded = sxe_http_percent_decode(path, len, out, size, false);
    if (decoded < 0) { /* -ENOBUFS: a normal path's escapes are all well formed */
        *why = "it is too long";
        return -414;
    }
    if (memchr(out, '\\', (size_t)decoded) != NULL) {
        *why = "it holds a '\\', a separator elsewhere";
        return -403;
    }
    return (long)decoded;
}

/* The length of host's name (a DNS name, an IPv4 address or a bracketed IPv6 one) before any
 * ":port", or 0 if it is none of these. */
static size_t host_name_length(const char *host, size_t len)
{
    bool bracketed = len > 0 && host[0] == '[';
    size_t at = bracketed;

    for (; at < len && host[at] != (bracketed ? ']' : ':'); at++) {
        char c = host[at];
        bool digit = c >= '0' && c <= '9', letter = (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
        if (!(digit || letter || c == '.' || (bracketed ? c == ':' : c == '-' || c == '_'))) {
            return 0;
        }
    }
    return bracketed ? (at < len ? at + 1 : 0) : at;
}

bool path_redirect_https(sxe_http_t *http)
{
    if (!config.redirect_https || sxe_conn_secure(sxe_http_conn(http))) {
        return false;
    }
    /* The authority that chose the host: an absolute target's, the Host field's, :authority */
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    size_t name_len =
        request->host != NULL ? host_name_length(request->host, request->host_len) : 0;
    if (name_len == 0) {
        (void)sxe_http_respond(http, 400, "text/plain", "no host to send the request to\n", 31);
        return true;
    }
    size_t path_len, query_len;
    const char *path = sxe_http_path(http, &path_len), *query = sxe_http_query(http, &query_len);
    char location[8192], port_text[8] = ""; /* no port for 443, as browsers write it */
    if (config.https_port != 443) {
        snprintf(port_text, sizeof(port_text), ":%d", config.https_port);
    }
    int len = snprintf(location, sizeof(location), "Location: https://%.*s%s%.*s%s%.*s\r\n",
                       (int)name_len, request->host, port_text, (int)path_len, path,
                       query != NULL ? "?" : "", (int)query_len, query != NULL ? query : "");
    if (len < 0 || (size_t)len >= sizeof(location)) {
        (void)sxe_http_respond(http, 414, "text/plain", "the location is too long\n", 25);
        return true;
    }
    (void)sxe_http_respond_with(http, 301, "text/plain", location, "moved to https\n", 15);
    return true;
}
