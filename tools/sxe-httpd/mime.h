/*
 * sxe-httpd's media types (mime.c): a file's Content-Type by its extension, from the system's
 * /etc/mime.types (Debian's media-types) or --mime-types FILE, with a table built in for what the
 * file does not name (or where there is no file).
 */
#ifndef SXE_HTTPD_MIME_H
#define SXE_HTTPD_MIME_H

#include <stdbool.h>

#define MIME_TYPE_MOST 255 /* bytes of a type; a line with a longer one is passed over */

/*
 * Reads path's types (lines "type ext ext ...", '#' comments), once, before the workers start. A
 * missing file is no error when required is false (the default path). @return 0, or -errno (the
 * file cannot be read, or memory is short).
 */
int mime_load(const char *path, bool required);

#define MIME_GIVEN_MOST 256 /* --type given at most this often, for every host together */

/* Takes one --type EXT=TYPE for a host (by index; 0, the default host's, holds for every host a
 * host's own does not name). @return NULL, or why it cannot be taken. */
const char *mime_add(unsigned host, const char *spec);

/* The Content-Type for the file at path, served by host (by index): its --type, the default
 * host's, the file's, the built-in table's; text types with "; charset=utf-8";
 * application/octet-stream for an extension no one names. */
const char *mime_type(unsigned host, const char *path);

#endif
