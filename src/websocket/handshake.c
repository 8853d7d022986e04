/*
 * The opening handshake (RFC 6455 §4.2): a GET that asks to switch to websocket, with a key and
 * version 13, is answered 101 with the key's proof and the chosen sub-protocol; anything else is
 * refused with the status the RFC names (426 with the version we speak, or 400).
 */
#define SXE_LOG_MODULE ws_log
#include "sxe/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "websocket/ws.h"

static struct sxe_log_module ws_log = SXE_LOG_MODULE_INIT(WEBSOCKET);

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

bool sxe__ws_has_token(const struct sxe_http_header *headers, unsigned count, const char *name,
                       const char *token, size_t token_len)
{
    size_t name_len = strlen(name);

    for (unsigned i = 0; i < count; i++) {
        const struct sxe_http_header *header = &headers[i];
        if (header->name_len != name_len || strncasecmp(header->name, name, name_len) != 0) {
            continue;
        }
        const char *at = header->value, *end = header->value + header->value_len;
        while (at < end) {
            const char *comma = memchr(at, ',', (size_t)(end - at));
            const char *stop = comma != NULL ? comma : end;
            const char *last = stop;
            while (at < last && is_space(*at)) {
                at++;
            }
            while (last > at && is_space(last[-1])) {
                last--;
            }
            if ((size_t)(last - at) == token_len && strncasecmp(at, token, token_len) == 0) {
                return true;
            }
            at = stop + 1;
        }
    }
    return false;
}

static unsigned fields_called(const struct sxe_http_request_head *request, const char *name)
{
    unsigned count = 0;

    for (unsigned i = 0; i < request->header_count; i++) {
        count += request->headers[i].name_len == strlen(name) &&
                 strncasecmp(request->headers[i].name, name, strlen(name)) == 0;
    }
    return count;
}

static int refuse(sxe_http_t *http, int status, const char *why)
{
    static const char upgrade_required[] =
        "Sec-WebSocket-Version: 13\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n";
    const struct sxe_http_request_head *request = sxe_http_request_head(http);

    SXE_LOG_DEBUG("refusing a handshake for %.*s: %s", (int)request->target_len, request->target,
                  why);
    char body[96];
    int len = snprintf(body, sizeof(body), "%d %s: %s\n", status, sxe_http_reason(status), why);
    (void)sxe_http_respond_with(http, status, "text/plain", status == 426 ? upgrade_required : NULL,
                                body, (size_t)len);
    return -EPROTO;
}

int sxe__ws_handshake(sxe_http_t *http, const char *protocol, const char *extensions,
                      const struct sxe_conn_handlers *to)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    const struct sxe_http_header *key = sxe_http_request_header(request, "Sec-WebSocket-Key");
    const struct sxe_http_header *version =
        sxe_http_request_header(request, "Sec-WebSocket-Version");

    if (!sxe__ws_has_token(request->headers, request->header_count, "Upgrade", "websocket", 9)) {
        return refuse(http, 426, "this is a WebSocket; ask to upgrade to it");
    }
    if (request->method_len != 3 || memcmp(request->method, "GET", 3) != 0 ||
        request->minor_version != 1 || request->has_body) {
        return refuse(http, 400, "a handshake is a GET in HTTP/1.1, without a body");
    }
    if (!sxe__ws_has_token(request->headers, request->header_count, "Connection", "upgrade", 7)) {
        return refuse(http, 400, "Connection must say upgrade");
    }
    if (version == NULL || version->value_len != 2 || memcmp(version->value, "13", 2) != 0) {
        return refuse(http, 426, "Sec-WebSocket-Version must be 13");
    }
    if (key == NULL || !sxe__ws_key_valid(key->value, key->value_len) ||
        fields_called(request, "Sec-WebSocket-Key") != 1) {
        return refuse(http, 400, "Sec-WebSocket-Key must be 16 bytes in Base64");
    }
    char accept[29], headers[512];
    (void)sxe_ws_accept_key(key->value, key->value_len, accept);
    int len = snprintf(headers, sizeof(headers),
                       "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n",
                       accept);
    if (protocol != NULL && protocol[0] != '\0') {
        len += snprintf(headers + len, sizeof(headers) - (size_t)len,
                        "Sec-WebSocket-Protocol: %s\r\n", protocol);
    }
    if (extensions != NULL && extensions[0] != '\0') {
        snprintf(headers + len, sizeof(headers) - (size_t)len, "Sec-WebSocket-Extensions: %s\r\n",
                 extensions);
    }
    return sxe_http_upgrade(http, headers, to);
}
