/* sxe-httpd's directory listings (listing.c). */
#ifndef SXE_HTTPD_LISTING_H
#define SXE_HTTPD_LISTING_H

#include <stddef.h>

/*
 * The HTML listing of the directory at path, titled with url_path: a page in static memory, valid
 * until the next call, and its length in *len. @return NULL if the directory cannot be read.
 */
const char *listing_page(const char *path, const char *url_path, size_t *len);

#endif
