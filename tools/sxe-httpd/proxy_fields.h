/*
 * The proxy's rules for header fields: what of a request goes on to the upstream, what of a
 * response comes back (proxy_fields.c).
 */
#ifndef SXE_HTTPD_PROXY_FIELDS_H
#define SXE_HTTPD_PROXY_FIELDS_H

#include <stdbool.h>
#include <string.h>

#include <sxe/http.h>
#include <sxe/http_client.h>

/* Appends len bytes of text at at; the caller sized the room. @return the end of what it wrote. */
static inline char *proxy_put(char *at, const char *text, size_t len)
{
    memcpy(at, text, len);
    return at + len;
}

/* Whether a request field stays behind: hop-by-hop, framing, one the proxy writes itself, or a
 * name with '_' unless underscores lets it through (one the proxy writes, spelt with '_', never).
 */
bool proxy_request_field_dropped(const struct sxe_http_header *field,
                                 const struct sxe_http_request_head *request, bool underscores);

/* Whether a request's upgrade is not relayed: none asked for, or h2c. */
bool proxy_asks_for_h2c(const struct sxe_http_request_head *request);

/* Writes the response's end-to-end fields and the proxy's Via at at, up to end (a field that would
 * pass end is left out). @return where the NUL written after them is. */
char *proxy_forwarded_fields(const struct sxe_http_response_head *response, char *at,
                             const char *end);

#endif
