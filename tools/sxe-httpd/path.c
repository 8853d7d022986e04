/*
 * Request paths made file paths: put in the library's normal form (dot segments resolved however
 * they were written), then percent-decoded by the library's one decoder. Escapes that would smuggle
 * a separator or a NUL into a name are refused before decoding, since after it they cannot be told
 * from the real ones; after normalizing, no decoded byte can make a new dot segment, since '.' was
 * decoded already and '/' may not be.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include <sxe/http.h>

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
    ssize_t normal = sxe_http_normalize_path(path, len, out, size);
    if (normal < 0) {
        *why = normal == -ENOBUFS           ? "it is too long"
               : normal == -EACCES          ? "its dot segments climb above the root"
               : len == 0 || path[0] != '/' ? "it does not start with '/'"
                                            : "a percent escape is malformed";
        return normal == -ENOBUFS ? -414 : -400;
    }
    /* Decoded where it lies: decoding never overtakes itself, and every escape is well formed. */
    ssize_t decoded = sxe_http_decode(out, (size_t)normal, out, size, false);
    if (memchr(out, '\\', (size_t)decoded) != NULL) {
        *why = "it holds a '\\', a separator elsewhere";
        return -403;
    }
    return (long)decoded;
}
