/*
 * Request paths made file paths: percent-decoded by the library's one decoder, then their dot
 * segments resolved in place. Escapes that would smuggle a separator or a NUL into a name are
 * refused before decoding, since after it they cannot be told from the real ones.
 */
#include <errno.h>
#include <stdbool.h>
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

/*
 * Resolves the dot segments of path (len bytes, starting with '/') in place: the output is built
 * behind the input, a "/segment" at a time. @return the new length, or -1 for a ".." above the
 * root.
 */
static long remove_dot_segments(char *path, size_t len)
{
    size_t written = 0;

    for (size_t at = 0; at < len;) {
        size_t end = at + 1;
        while (end < len && path[end] != '/') {
            end++;
        }
        const char *segment = path + at + 1;
        size_t segment_len = end - at - 1;
        bool dot = segment_len == 1 && segment[0] == '.';
        bool dots = segment_len == 2 && segment[0] == '.' && segment[1] == '.';
        if (!dot && !dots) {
            memmove(path + written, path + at, end - at);
            written += end - at;
        } else {
            if (dots) {
                if (written == 0) {
                    return -1;
                }
                while (path[--written] != '/') { /* drop the segment before it */
                }
            }
            if (end == len) {
                path[written++] = '/'; /* "/a/." is "/a/", and "/a/.." is "/" */
            }
        }
        at = end;
    }
    if (written == 0) {
        path[written++] = '/';
    }
    path[written] = '\0';
    return (long)written;
}

long path_resolve(const char *path, size_t len, char *out, size_t size, const char **why)
{
    if (len == 0 || path[0] != '/') {
        *why = "it does not start with '/'";
        return -1;
    }
    if (escapes_separator(path, len)) {
        *why = "it holds an encoded NUL or separator";
        return -1;
    }
    ssize_t decoded = sxe_http_decode(path, len, out, size, false);
    if (decoded < 0) {
        *why = decoded == -ENOBUFS ? "it is too long" : "a percent escape is malformed";
        return -1;
    }
    if (memchr(out, '\\', (size_t)decoded) != NULL) {
        *why = "it holds a '\\', a separator elsewhere";
        return -1;
    }
    long resolved = remove_dot_segments(out, (size_t)decoded);
    if (resolved < 0) {
        *why = "its dot segments climb above the root";
    }
    return resolved;
}
