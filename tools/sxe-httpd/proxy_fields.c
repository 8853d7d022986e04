/*
 * The proxy's rules for header fields (proxy.c): which of a request's fields go on to the upstream
 * and which of a response's come back to the client. Hop-by-hop fields (RFC 9110 §7.6.1: the
 * fixed ones and any a Connection field names), framing fields (the proxy frames bodies itself),
 * and the fields the proxy writes (Host, X-Forwarded-For, Via, X-Client-Subject) stay behind.
 */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "proxy_fields.h"

/* Whether the field's name is in the list of names (lower case). */
static bool named(const struct sxe_http_header *field, const char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (field->name_len == strlen(names[i]) &&
            strncasecmp(field->name, names[i], field->name_len) == 0) {
            return true;
        }
    }
    return false;
}

/* Whether a Connection field among headers names the field: it is for this hop only (RFC 9110
 * §7.6.1). Every Connection field counts, not only the first. */
static bool named_by_connection(const struct sxe_http_header *field,
                                const struct sxe_http_header *headers, unsigned count)
{
    static const char *const connection[] = {"connection"};

    for (unsigned i = 0; i < count; i++) {
        if (!named(&headers[i], connection, 1)) {
            continue;
        }
        const char *at = headers[i].value, *end = at + headers[i].value_len;
        while (at < end) {
            const char *comma = memchr(at, ',', (size_t)(end - at));
            const char *stop = comma != NULL ? comma : end;
            while (at < stop && (*at == ' ' || *at == '\t')) {
                at++;
            }
            while (stop > at && (stop[-1] == ' ' || stop[-1] == '\t')) {
                stop--;
            }
            if ((size_t)(stop - at) == field->name_len &&
                strncasecmp(at, field->name, field->name_len) == 0) {
                return true;
            }
            at = comma != NULL ? comma + 1 : end;
        }
    }
    return false;
}

/* Whether field is, with '_' for '-', one the proxy writes itself: an upstream that maps them alike
 * (CGI, PHP) must never read a client's as ours, whatever --proxy-underscores lets through. */
static bool written_by_us(const struct sxe_http_header *field)
{
    static const char *const ours[] = {"x-forwarded-for", "x-client-subject"};

    for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++) {
        size_t at = 0;
        while (at < field->name_len && ours[i][at] != '\0' &&
               (field->name[at] == '_' ? '-' : tolower((unsigned char)field->name[at])) ==
                   ours[i][at]) {
            at++;
        }
        if (at == field->name_len && ours[i][at] == '\0') {
            return true;
        }
    }
    return false;
}

/*
 * Whether a request field stays behind: hop-by-hop, framing, or one we write ourselves; and a name
 * with '_', unless underscores lets it through (--proxy-underscores). CGI, WSGI and PHP upstreams
 * map '-' and
 * '_' alike (both X-Forwarded-For and X_Forwarded_For are HTTP_X_FORWARDED_FOR), so a client would
 * set a field the proxy means to write; nginx drops them too (underscores_in_headers off).
 */
bool proxy_request_field_dropped(const struct sxe_http_header *field,
                                 const struct sxe_http_request_head *request, bool underscores)
{
    static const char *const names[] = {
        "connection",        "keep-alive", "proxy-connection", "te",
        "transfer-encoding", "upgrade",    "trailer",          "host",
        "content-length",    "expect",     "x-forwarded-for",  "via",
        "x-client-subject"};

    return named(field, names, sizeof(names) / sizeof(names[0])) ||
           (memchr(field->name, '_', field->name_len) != NULL &&
            (!underscores || written_by_us(field))) ||
           named_by_connection(field, request->headers, request->header_count);
}

/*
 * Whether an upgrade asks for h2c: it is not relayed (the request goes on as a plain one, as nginx
 * sends it). Its HTTP2-Settings field is hop-by-hop, so an upstream would refuse the upgrade
 * anyway, and HTTP/2 between a client and an upstream is not this proxy's to pass blind.
 */
bool proxy_asks_for_h2c(const struct sxe_http_request_head *request)
{
    const struct sxe_http_header *upgrade = sxe_http_request_header(request, "Upgrade");

    for (size_t at = 0; upgrade != NULL && at + 3 <= upgrade->value_len; at++) {
        if (strncasecmp(upgrade->value + at, "h2c", 3) == 0) {
            return true;
        }
    }
    return upgrade == NULL;
}

/* Whether a response field stays behind: hop-by-hop, framing, or one sxe_http_start() writes. */
static bool response_dropped(const struct sxe_http_header *field,
                             const struct sxe_http_response_head *response)
{
    static const char *const names[] = {
        "connection", "keep-alive", "proxy-connection", "te",   "transfer-encoding",
        "upgrade",    "trailer",    "content-length",   "date", "server"};

    return named(field, names, sizeof(names) / sizeof(names[0])) ||
           named_by_connection(field, response->headers, response->header_count);
}

/*
 * Writes the response's end-to-end fields and our Via at at, up to end; @return the NUL's place.
 * A 426 keeps its Upgrade (hop-by-hop, but it names what the client must switch to, RFC 9110
 * §15.5.22), with the Connection option that goes with it.
 */
char *proxy_forwarded_fields(const struct sxe_http_response_head *response, char *at,
                             const char *end)
{
    const struct sxe_http_header *upgrade = sxe_http_response_header(response, "Upgrade");

    if (response->status == 426 && upgrade != NULL &&
        at + upgrade->value_len + 40 < end) { /* first: nothing else can crowd it out */
        at = proxy_put(at, "Upgrade: ", 9);
        at = proxy_put(at, upgrade->value, upgrade->value_len);
        at = proxy_put(at, "\r\nConnection: upgrade\r\n", 23);
    }
    for (unsigned i = 0; i < response->header_count; i++) {
        const struct sxe_http_header *field = &response->headers[i];
        if (response_dropped(field, response) ||
            at + field->name_len + field->value_len + 4 > end) {
            continue;
        }
        at = proxy_put(at, field->name, field->name_len);
        at = proxy_put(at, ": ", 2);
        at = proxy_put(at, field->value, field->value_len);
        at = proxy_put(at, "\r\n", 2);
    }
    at = proxy_put(at, "Via: 1.1 sxe-httpd\r\n", 20);
    *at = '\0';
    return at;
}
