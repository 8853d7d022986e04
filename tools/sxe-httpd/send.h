/*
 * sxe-httpd's answers with a file (send.c): conditional requests (ETag, Last-Modified), single
 * byte ranges, and the body from the cache's memory or with sendfile.
 */
#ifndef SXE_HTTPD_SEND_H
#define SXE_HTTPD_SEND_H

#include <stdbool.h>

#include <sxe/http.h>

#include "cache.h"

/* Answers 304 if the request's If-None-Match lists etag (file's, or its coding's), or, without
 * one, its If-Modified-Since is not older than file. @return whether it answered. */
bool send_not_modified(sxe_http_t *http, const struct file *file, const char *etag);

/* Sends the file, honouring conditional requests and a range; takes the caller's reference. */
void send_file(sxe_http_t *http, struct file *file);

#endif
