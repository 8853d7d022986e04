/* sxe-httpd's request paths made file paths (path.c). */
#ifndef SXE_HTTPD_PATH_H
#define SXE_HTTPD_PATH_H

#include <stddef.h>

/*
 * Makes the URL path [path, path + len) a file path in out (size bytes, NUL-terminated): its dot
 * segments resolved however they were written, empty segments collapsed (the library's normal
 * form, sxe_http_normalize_path()), then percent-decoded. Refuses a path that does not start with
 * '/', a malformed escape, and a ".." that would climb above the root (400); an encoded NUL or
 * separator ("%00", "%2F", "%5C") and a literal '\' (403); one too long for out (414).
 * @return the file path's length, or minus the status to refuse it with, *why saying which rule.
 */
long path_resolve(const char *path, size_t len, char *out, size_t size, const char **why);

#endif
