/* sxe-httpd's request paths made file paths (path.c). */
#ifndef SXE_HTTPD_PATH_H
#define SXE_HTTPD_PATH_H

#include <stddef.h>

/*
 * Decodes the URL path [path, path + len) into out (size bytes, NUL-terminated) and resolves its
 * dot segments (RFC 3986 §5.2.4), however they were written. Refuses a path that does not start
 * with '/', a malformed escape, an encoded NUL or separator ("%00", "%2F", "%5C", and a literal
 * '\'), one too long for out, and a ".." that would climb above the root.
 * @return the resolved length, or -1 with *why saying which rule refused it.
 */
long path_resolve(const char *path, size_t len, char *out, size_t size, const char **why);

#endif
