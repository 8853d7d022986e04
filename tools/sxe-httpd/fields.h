/*
 * --header PREFIX 'Name: value' (fields.c): fields sxe-httpd adds to its answers under a path
 * prefix, as nginx's add_header does (Cache-Control, CORS, security fields). Each is a host's
 * (hosts.h); the default host's go on every host's answers, before the host's own.
 */
#ifndef SXE_HTTPD_FIELDS_H
#define SXE_HTTPD_FIELDS_H

#include <stdbool.h>
#include <stddef.h>

#define FIELDS_MOST      1024 /* --header given at most this often, for every host together */
#define FIELDS_LINE_MOST 1024 /* bytes of one, prefix and field */

/* Takes one --header's text for a host (by index): "PREFIX Name: value", PREFIX starting with
 * '/', Name a token, value of visible characters, spaces and tabs; text must last.
 * @return NULL, or why it cannot be taken. */
const char *fields_add(unsigned host, const char *text);

/* Whether an answer of this status carries the fields (nginx's add_header: 200, 201, 204, 206,
 * 301, 302, 303, 304, 307, 308; not errors). */
bool fields_for_status(int status);

/*
 * Writes the fields of the default host and of host (by index) of every prefix path (len bytes)
 * starts with, in the order given, each line
 * ending in CRLF, NUL-terminated, into out. @return their length, or 0 (out then holds "") for
 * none.
 */
size_t fields_for(unsigned host, const char *path, size_t len, char *out, size_t size);

#define FIELDS_BYTES_MOST 8192 /* of every field of a host and of the default host together */

/*
 * The same for a request path as it came (sxe_http_path(): normal form, still percent-encoded), as
 * the proxy forwards it: matched once its escapes are all decoded ("%2F" too) and its dot segments
 * resolved again, so that no spelling an upstream would decode into a prefix's path escapes it.
 */
size_t fields_for_encoded(unsigned host, const char *path, size_t len, char *out, size_t size);

/* The room fields_for() may need: every field at once. */
#define FIELDS_ROOM (FIELDS_BYTES_MOST + 1)

#endif
