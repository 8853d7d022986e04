/*
 * The meaning of what the request parser checks beyond its bytes: the Host a request names, the
 * form of its target, and the Transfer-Encoding list. Each is called once per request (or per such
 * field), when the whole line is in the caller's buffer.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "parser.h"
#include "sxe/http_parser.h"

/*
 * Whether [host, host + len) is uri-host [":" port] (RFC 3986 §3.2.2, RFC 9110 §4.2.3): an IP
 * literal in brackets, or a reg-name or IPv4 address (unreserved bytes, sub-delims and %XX
 * escapes), then an optional port of at most five digits. A comma, a sub-delim, is refused all the
 * same: a list of hosts is how two servers are made to disagree on which one a request is for.
 */
bool sxe_http_host_valid(const char *host, size_t len)
{
    return sxe__http_valid_host(host, len);
}

bool sxe__http_valid_host(const char *host, size_t len)
{
    size_t at = 0;

    if (len == 0) {
        return false;
    }
    if (host[0] == '[') {
        for (at = 1; at < len && (sxe__http_hex((unsigned char)host[at]) >= 0 || host[at] == ':' ||
                                  host[at] == '.');
             at++) {
        }
        if (at == 1 || at == len || host[at] != ']') {
            return false;
        }
        at++;
    } else {
        while (at < len) {
            if (host[at] == '%' && at + 2 < len &&
                sxe__http_hex((unsigned char)host[at + 1]) >= 0 &&
                sxe__http_hex((unsigned char)host[at + 2]) >= 0) {
                at += 3;
            } else if (sxe__http_classes[(unsigned char)host[at]] & HOST) {
                at++;
            } else {
                break;
            }
        }
        if (at == 0) {
            return false;
        }
    }
    if (at == len) {
        return true;
    }
    if (host[at] != ':' || len - at - 1 > 5) {
        return false;
    }
    unsigned port = 0;
    for (at++; at < len; at++) {
        if (host[at] < '0' || host[at] > '9') {
            return false;
        }
        port = port * 10 + (unsigned)(host[at] - '0');
    }
    return port <= 65535;
}

/*
 * Reads a Transfer-Encoding value as the list it is (RFC 9112 §6.1), skipping empty elements:
 * chunked once and last is the only framing sxe reads. chunked twice, a coding after chunked, or
 * no coding at all leave the body's length unknowable (400); a coding before chunked is one sxe
 * does not decode (501).
 */
int sxe__http_transfer_codings(struct sxe_http_parser *parser, const char *value, size_t len)
{
    size_t at = 0;
    bool any = false;

    while (at <= len) {
        size_t start = at, end = at;
        while (end < len && value[end] != ',') {
            end++;
        }
        at = end + 1;
        sxe__http_trim(value, &start, &end);
        if (start == end) {
            continue;
        }
        any = true;
        if (parser->flags & F_CHUNKED) {
            return -400;
        }
        if (!sxe__http_name_is(value + start, end - start, "chunked")) {
            return -501;
        }
        parser->flags |= F_CHUNKED;
    }
    return any ? 0 : -400;
}

/*
 * Sorts the request target by its form (RFC 9112 §3.2) and finds the request's host. An
 * absolute-form target's authority wins over Host (§3.2.2), and its path becomes the target, so
 * that routes and files see one form; a target with a query but no path ("http://h?q") is refused,
 * since its path "/" is not in the caller's bytes to point at.
 */
int sxe__http_target_form(const struct sxe_http_parser *parser, const char *data,
                          struct sxe_http_request_head *request)
{
    const char *target = request->target;
    size_t len = request->target_len;

    request->host = parser->host_count != 0 ? data + parser->host_at : NULL;
    request->host_len = parser->host_count != 0 ? parser->host_len : 0;
    if (target[0] == '/') {
        return 0;
    }
    if (parser->flags & F_STOP_METHOD) {
        return 0; /* CONNECT's authority-form, PRI's "*": tunnels, for the server to refuse */
    }
    if (len == 1 && target[0] == '*') {
        return request->method_len == 7 && memcmp(request->method, "OPTIONS", 7) == 0 ? 0 : -400;
    }
    size_t authority = len > 7 && sxe__http_name_is(target, 7, "http://")    ? 7
                       : len > 8 && sxe__http_name_is(target, 8, "https://") ? 8
                                                                             : 0;
    if (authority == 0) {
        return -400;
    }
    size_t end = authority;
    while (end < len && target[end] != '/' && target[end] != '?') {
        end++;
    }
    if ((end < len && target[end] != '/') ||
        !sxe__http_valid_host(target + authority, end - authority)) {
        return -400;
    }
    request->host = target + authority;
    request->host_len = end - authority;
    request->target = end < len ? target + end : "/";
    request->target_len = end < len ? len - end : 1;
    return 0;
}
