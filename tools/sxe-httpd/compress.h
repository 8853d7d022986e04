/*
 * --gzip LEVEL and --brotli LEVEL (compress.c): text files compressed as they are served, for the
 * clients whose Accept-Encoding takes it, as nginx's gzip and brotli modules do.
 *
 * Only types that compress (text, scripts, JSON, XML, SVG, fonts that are not compressed already)
 * of at least --compress-min bytes, and never for a request with a Range (the original answers
 * it, whole or in part). A sidecar found by --precompressed wins. A file small enough for the
 * cache's memory (CACHE_INLINE_MAX) is compressed once, and its copy cached beside it under
 * "gzip+/path" (or "br+/path") until the file changes; a larger one is compressed as it is sent,
 * a slice per turn of the loop, held back while the client reads slower: at most
 * COMPRESS_STREAMS_MOST at a time per worker (each holds the coder's state, 256 KiB for gzip),
 * past which files go out as they are.
 */
#ifndef SXE_HTTPD_COMPRESS_H
#define SXE_HTTPD_COMPRESS_H

#include <stdbool.h>
#include <stdint.h>

#include <sxe/http.h>

#include "cache.h"

#define COMPRESS_STREAMS_MOST 64
#define COMPRESS_MIN_DEFAULT  256 /* bytes: below, the coding's own overhead eats the gain */

/* Whether sxe-httpd was built with brotli (libbrotli). */
bool compress_has_brotli(void);

/* Whether an answer of this Content-Type is worth compressing. */
bool compress_type(const char *type);

/* Answers with file compressed, if the configuration, the file and the request allow it, taking
 * the caller's reference. @return whether it answered. */
bool compress_serve(sxe_http_t *http, struct file *file);

#endif
