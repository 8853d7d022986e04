/*
 * WebSocket clients (RFC 6455 §4.1): a set of sockets made on a loop with no HTTP server, each
 * connected to a server and path, its handshake sent with a fresh key, the server's 101 checked
 * (status, Upgrade, Connection, the key's proof, a sub-protocol we offered, no extension), then
 * frames both ways, ours masked.
 *
 * Keys and masks come from a 64-bit generator (splitmix64, sxe__ws_random()) seeded from the
 * kernel's getrandom once per set: a mask must not be predictable by whoever chooses the payload
 * (a script in a browser, against a proxy's cache, §10.3); sxe's clients run the program's code,
 * not a page's.
 */
#define SXE_LOG_MODULE ws_log
#include "sxe/log.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "sxe/random.h"
#include "sxe/resolve.h"
#include "websocket/ws.h"

static struct sxe_log_module ws_log = SXE_LOG_MODULE_INIT(WEBSOCKET);

void sxe__ws_seed(sxe_ws_server_t *server)
{
    if (sxe_random_bytes(&server->random, sizeof(server->random)) < 0) {
        /* No entropy (an old kernel, a seccomp filter): the clock and the address, logged. */
        SXE_LOG_WARN("getrandom failed; WebSocket client keys and masks are seeded from the clock");
        server->random = sxe_loop_now(server->loop) ^ (uint64_t)(uintptr_t)server;
    }
}

/* The room a handshake request's target leaves for its key's line ("Sec-WebSocket-Key: " and 24
 * characters, and the blank line), and its NUL. */
#define KEY_LINE (19 + 24 + 4 + 1)

/*
 * The index of the set's handshake request for path, host and protocols; a new one is added only
 * if add (else its index to come), so a connect that fails takes none of the set's few.
 */
static int target_index(sxe_ws_server_t *set, const char *host, const char *path,
                        const char *protocols, bool add)
{
    char request[sizeof(set->targets[0])];
    int len =
        snprintf(request, sizeof(request),
                 "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 "Sec-WebSocket-Version: 13\r\n%s%s%s",
                 path, host, protocols ? "Sec-WebSocket-Protocol: " : "",
                 protocols ? protocols : "", protocols ? "\r\n" : "");
    if (len < 0 || (size_t)len + KEY_LINE >= sizeof(request)) {
        return -EINVAL;
    }
    for (unsigned i = 0; i < set->target_count; i++) {
        if (strcmp(set->targets[i], request) == 0) {
            return (int)i;
        }
    }
    if (set->target_count == SXE__WS_TARGETS) {
        return -ENOBUFS;
    }
    if (add) {
        memcpy(set->targets[set->target_count], request, (size_t)len + 1);
        set->target_count++;
    }
    return (int)set->target_count - add;
}

/* Where a socket goes: the address given, or a ws:// or wss:// URL's parts. */
struct destination {
    char upstream[SXE_RESOLVE_NAME_MAX + 16]; /* "HOST:PORT" */
    char host[SXE_RESOLVE_NAME_MAX + 16];     /* the Host header: a URL's authority, or upstream */
    const char *path;                         /* the caller's, or url_path, or "/" */
    char url_path[512];
    bool url, secure; /* given a URL; a wss:// one */
};

/*
 * Reads address, "HOST:PORT" or "ws[s]://HOST[:PORT][/PATH][?QUERY]" (port 80 or 443 by
 * default), and path (a URL's path or path, not both). @return 0 or -EINVAL.
 */
static int destination_of(const char *address, const char *path, struct destination *to)
{
    bool plain = strncasecmp(address, "ws://", 5) == 0;
    const char *at = address + (plain ? 5 : 6);

    to->secure = strncasecmp(address, "wss://", 6) == 0;
    to->url = plain || to->secure;
    to->path = path;
    if (!to->url) {
        int n = snprintf(to->upstream, sizeof(to->upstream), "%s", address);
        memcpy(to->host, to->upstream, sizeof(to->host));
        return path != NULL && n < (int)sizeof(to->upstream) ? 0 : -EINVAL;
    }
    ssize_t len = sxe__url_authority(at, "/?", to->secure ? 443 : 80, to->host, sizeof(to->host),
                                     to->upstream, sizeof(to->upstream));
    if (len < 0 || strchr(at, '#') != NULL) {
        return -EINVAL; /* a fragment too (RFC 6455 §3: a WebSocket URL has none) */
    }
    if (at[len] != '\0') { /* a path, or a query alone ("ws://host?room=1": "/?room=1") */
        int n = snprintf(to->url_path, sizeof(to->url_path), "%s%s", at[len] == '?' ? "/" : "",
                         at + len);
        if (path != NULL || n >= (int)sizeof(to->url_path)) {
            return -EINVAL; /* a path twice, or too long */
        }
        to->path = to->url_path;
    } else if (to->path == NULL) {
        to->path = "/";
    }
    return 0;
}

/* Whether a request target is all visible ASCII: no space, control byte or DEL. */
static bool printable(const char *path)
{
    for (const char *at = path; *at != '\0'; at++) {
        if ((unsigned char)*at <= ' ' || (unsigned char)*at == 0x7f) {
            return false;
        }
    }
    return true;
}

/* The resolver for a name: the options', or the set's own, made the first time. */
static int resolver_for(struct sxe_ws_client *client, const char *upstream,
                        sxe_resolver_t **resolver)
{
    char name[SXE_RESOLVE_NAME_MAX + 1];
    union sxe_resolved_address numeric;
    uint16_t port;
    int rc;

    *resolver =
        client->set.options.resolver != NULL ? client->set.options.resolver : client->own_resolver;
    if (*resolver != NULL || (rc = sxe_resolve_split(upstream, name, &port, &numeric)) <= 0) {
        return 0; /* an address needs none; one that does not split fails in the connect */
    }
    if ((rc = sxe_resolver_create(&client->own_resolver, client->set.loop, NULL)) < 0) {
        return rc;
    }
    *resolver = client->own_resolver;
    return 0;
}

/* The TLS context: none for ws://; for wss://, the options' or the set's own (the system's
 * authorities, made the first time); for an address, the options'. */
static int tls_for(struct sxe_ws_client *client, const struct destination *to, sxe_tls_t **tls)
{
    int rc;

    *tls = to->url && !to->secure ? NULL : client->set.options.tls;
    if (to->secure && *tls == NULL) {
        if (client->own_tls == NULL && (rc = sxe_tls_client_create(&client->own_tls, NULL)) < 0) {
            return rc; /* GCOVR_EXCL_LINE: the system's authorities could not be read */
        }
        *tls = client->own_tls;
    }
    return 0;
}

int sxe_ws_client_connect(sxe_ws_client_t *client, sxe_ws_t **ws_out, const char *address,
                          const char *path, const char *protocols, const struct sockaddr *source,
                          socklen_t source_len, void *user)
{
    sxe_ws_server_t *set = client != NULL ? &client->set : NULL;
    struct destination to;
    sxe_resolver_t *resolver;
    sxe_tls_t *tls;
    sxe_conn_t *conn;
    int rc, target;

    if (!SXE_CHECK(set != NULL && ws_out != NULL && address != NULL &&
                   (path == NULL || (path[0] == '/' && strpbrk(path, " \r\n") == NULL)) &&
                   (protocols == NULL || strpbrk(protocols, "\r\n") == NULL))) {
        return -EINVAL;
    }
    if ((rc = destination_of(address, path, &to)) < 0 || !printable(to.path)) {
        return -EINVAL;
    }
    if ((target = target_index(set, to.host, to.path, protocols, false)) < 0) {
        return target;
    }
    char name[SXE_RESOLVE_NAME_MAX + 1]; /* the name its certificate is checked for */
    if (sxe_address_host(to.upstream, name, sizeof(name)) < 0 ||
        (rc = resolver_for(client, to.upstream, &resolver)) < 0 ||
        (rc = tls_for(client, &to, &tls)) < 0) {
        return rc < 0 ? rc : -EINVAL;
    }
    struct sxe_connect_options connect = {
        .source = source, .source_len = source_len, .tls = tls, .server_name = name};
    if ((rc = sxe_resolve_connect(set->loop, resolver, &conn, to.upstream, &connect, &set->handlers,
                                  NULL)) < 0) {
        return rc;
    }
    (void)target_index(set, to.host, to.path, protocols, true); /* found, or room for it: above */
    struct sxe_ws *ws = &set->sockets[sxe_conn_index(conn)];
    *ws = (struct sxe_ws){.server = set,
                          .conn = conn,
                          .user = user,
                          .state = WS_CONNECTING,
                          .protocol = 0xff,
                          .target = (uint8_t)target,
                          .reader = {.client = true}};
    for (int i = 0; i < 16; i += 8) {
        uint64_t random = sxe__ws_random(set);
        memcpy(ws->nonce + i, &random, 8);
    }
    *ws_out = ws;
    return 0;
}

void sxe__ws_client_connected(struct sxe_ws *ws)
{
    char key[25], request[sizeof(ws->server->targets[0])]; /* a target leaves its key room */

    sxe__base64(ws->nonce, sizeof(ws->nonce), key);
    int len = snprintf(request, sizeof(request), "%sSec-WebSocket-Key: %s\r\n\r\n",
                       ws->server->targets[ws->target], key);
    (void)sxe_conn_write(ws->conn, request, (size_t)len);
}

/* The handshake failed: the program is told (1002, with why), and the connection closes. */
static size_t refused(struct sxe_ws *ws, const char *why, size_t len)
{
    SXE_LOG_DEBUG("a WebSocket handshake failed: %s", why);
    ws->server->stats.refused++;
    sxe_conn_t *conn = ws->conn;
    ws->closing_next = ws->closing_prev = UINT32_MAX; /* the key is spent: on no list */
    ws->state = WS_DONE;
    if (ws->server->program.on_close != NULL) {
        ws->server->program.on_close(ws, SXE_WS_CLOSE_PROTOCOL, why, strlen(why));
    }
    sxe_conn_close(conn);
    return len;
}

/* Checks the server's answer to the handshake. @return NULL, or why it is not a 101 for us. */
static const char *check_answer(struct sxe_ws *ws, const struct sxe_http_response_head *response,
                                unsigned *protocol)
{
    const struct sxe_http_header *accept =
        sxe_http_response_header(response, "Sec-WebSocket-Accept");
    const struct sxe_http_header *chosen =
        sxe_http_response_header(response, "Sec-WebSocket-Protocol");
    char key[25], expected[29];

    if (response->status != 101) {
        return "the server did not switch protocols";
    }
    if (!sxe__ws_has_token(response->headers, response->header_count, "Upgrade", "websocket", 9) ||
        !sxe__ws_has_token(response->headers, response->header_count, "Connection", "upgrade", 7)) {
        return "the 101 is not to websocket";
    }
    sxe__base64(ws->nonce, sizeof(ws->nonce), key);
    (void)sxe_ws_accept_key(key, 24, expected);
    if (accept == NULL || accept->value_len != 28 || memcmp(accept->value, expected, 28) != 0) {
        return "Sec-WebSocket-Accept does not prove our key";
    }
    if (sxe_http_response_header(response, "Sec-WebSocket-Extensions") != NULL) {
        return "an extension we did not offer";
    }
    *protocol = 0xff;
    if (chosen != NULL) {
        const char *offered = strstr(ws->server->targets[ws->target], "Sec-WebSocket-Protocol: ");
        char name[32];
        if (offered == NULL || chosen->value_len >= sizeof(name)) {
            return "a sub-protocol we did not offer";
        }
        memcpy(name, chosen->value, chosen->value_len);
        name[chosen->value_len] = '\0';
        struct sxe_http_header ours = {.name = "P", .name_len = 1, .value = offered + 24};
        ours.value_len = strcspn(ours.value, "\r");
        int index = 0;
        if (!sxe__ws_has_token(&ours, 1, "P", name, chosen->value_len) ||
            (index = sxe__ws_protocol_index(ws->server, name)) < 0) {
            return "a sub-protocol we did not offer"; /* (or more names than the table holds) */
        }
        *protocol = (unsigned)index;
    }
    return NULL;
}

size_t sxe__ws_client_read(struct sxe_ws *ws, uint8_t *data, size_t len)
{
    static const struct sxe_http_limits limits = {
        .request_line = 1024, .header_bytes = 8192, .header_count = 32, .body_bytes = 0};
    struct sxe_http_parser parser;
    struct sxe_http_response_head response;
    unsigned protocol;

    sxe_http_parser_init(&parser); /* the head is parsed again from its start as it grows */
    int head =
        sxe_http_parse_response_head(&parser, (const char *)data, len, &limits, false, &response);
    if (head == 0) {
        return 0;
    }
    const char *why = head < 0 ? "the answer is not HTTP" : check_answer(ws, &response, &protocol);
    if (why != NULL) {
        return refused(ws, why, len);
    }
    sxe_conn_t *conn = ws->conn;
    ws->protocol = (uint8_t)protocol;
    sxe__ws_opened(ws);
    if (sxe_conn_closed(conn) || ws->state != WS_OPEN) {
        return len; /* closed by on_open */
    }
    return (size_t)head + sxe__ws_frames(ws, data + head, len - (size_t)head);
}
