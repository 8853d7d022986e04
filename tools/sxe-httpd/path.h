/* sxe-httpd's request paths made file paths (path.c). */
#ifndef SXE_HTTPD_PATH_H
#define SXE_HTTPD_PATH_H

#include <stdbool.h>
#include <stddef.h>

#include <sxe/http.h>

/*
 * Makes the URL path [path, path + len), in the library's normal form (sxe_http_path(): dot and
 * empty segments resolved, escapes well formed, as the server refuses others with 400), a file
 * path in out (size bytes, NUL-terminated): percent-decoded. Refuses an encoded NUL or separator
 * ("%00", "%2F", "%5C") and a literal '\' (403), and one too long for out (414).
 * @return the file path's length, or minus the status to refuse it with, *why saying which rule.
 */
long path_resolve(const char *path, size_t len, char *out, size_t size, const char **why);

/*
 * --redirect-https: a request that came over plain HTTP is answered 301 to the same path and query
 * on the HTTPS listener's port, at the host the client named (its Host, without its port), as
 * nginx's "return 301 https://$host$request_uri" does; a Host that is neither a name nor an IP
 * address is answered 400. @return whether it was answered.
 */
bool path_redirect_https(sxe_http_t *http);

#endif
