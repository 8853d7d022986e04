/*
 * Request paths made file paths. The path comes in the library's normal form (sxe_http_path():
 * dot segments resolved however they were written), and is percent-decoded by the library's one
 * decoder. Escapes that would smuggle a separator or a NUL into a name are refused before
 * decoding, since after it they cannot be told from the real ones; and no decoded byte can make a
 * new dot segment, since '.' was decoded already and '/' may not be.
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
