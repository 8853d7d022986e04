/*
 * What a handler reads from its request's target beyond the path: query parameters, found by name
 * or iterated, percent-decoded on request; and the rest of the path after a prefix route's.
 * Nothing is decoded in place: the target stays as the client sent it, for logs and proxies.
 */
#include <errno.h>
#include <string.h>

#include "server.h"
#include "sxe/http.h"

bool sxe_http_query_next(const sxe_http_t *http, size_t *cursor, struct sxe_http_param *param)
{
    size_t query_len;
    const char *query = sxe_http_query(http, &query_len);

    while (query != NULL && *cursor < query_len) {
        const char *start = query + *cursor;
        const char *end = memchr(start, '&', query_len - *cursor);
        size_t len = end ? (size_t)(end - start) : query_len - *cursor;
        *cursor += len + 1;
        if (len == 0) {
            continue;
        }
        const char *equals = memchr(start, '=', len);
        param->name = start;
        param->name_len = equals ? (size_t)(equals - start) : len;
        param->value = equals ? equals + 1 : start + len;
        param->value_len = equals ? len - param->name_len - 1 : 0;
        return true;
    }
    return false;
}

/* Whether an encoded name decodes to wanted, without decoding it anywhere. */
static bool name_equals(const char *name, size_t len, const char *wanted)
{
    size_t at = 0;

    for (; at < len && *wanted != '\0'; wanted++) {
        if (sxe_http_percent_decode_byte(name, len, &at, true) != (unsigned char)*wanted) {
            return false;
        }
    }
    return at == len && *wanted == '\0';
}

ssize_t sxe_http_query_param(const sxe_http_t *http, const char *name, char *buf, size_t size)
{
    struct sxe_http_param param;
    size_t cursor = 0;

    while (sxe_http_query_next(http, &cursor, &param)) {
        if (!name_equals(param.name, param.name_len, name)) {
            continue;
        }
        /* Checked first, so that buf holds what it held unless the whole value fits. */
        size_t decoded = 0;
        for (size_t at = 0; at < param.value_len; decoded++) {
            if (sxe_http_percent_decode_byte(param.value, param.value_len, &at, true) < 0) {
                return -EINVAL;
            }
        }
        if (decoded >= size) {
            return -ENOBUFS;
        }
        return sxe_http_percent_decode(param.value, param.value_len, buf, size, true);
    }
    return -ENOENT;
}

const char *sxe_http_path_rest(const sxe_http_t *http, size_t *len)
{
    size_t path_len;
    const char *path = sxe_http_path(http, &path_len);
    size_t matched = http->prefix_len < path_len ? http->prefix_len : path_len;

    *len = path_len - matched;
    return path + matched;
}
