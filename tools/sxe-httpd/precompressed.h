/*
 * --precompressed (precompressed.c): files compressed ahead of time, beside their original
 * (style.css.br, style.css.zst, style.css.gz), sent to the clients whose Accept-Encoding takes
 * them, as nginx's gzip_static and brotli_static do. A sidecar is used only if it is a regular
 * file (not a link) no older than its original; a request with a Range gets the original.
 */
#ifndef SXE_HTTPD_PRECOMPRESSED_H
#define SXE_HTTPD_PRECOMPRESSED_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <sxe/http.h>

#include "cache.h"

#define PRECOMPRESSED_VARY "Vary: Accept-Encoding\r\n" /* on every file's answer */

/* The content codings, by their bit in a set of them. */
enum { CODING_BR, CODING_ZSTD, CODING_GZIP };

/* A coding's name ("br", "zstd", "gzip"). */
const char *precompressed_coding(unsigned which);

/* Of the codings (bits), the one the request's Accept-Encoding (all its lines, as one list) takes
 * with the highest weight, br before zstd before gzip among equals: its index, or -1 for none
 * (q=0 refuses one, `*` stands for those not named). */
int precompressed_choose(const struct sxe_http_request_head *request, unsigned codings);

/* The sidecars of the file at resolved (a real path), modified at mtime_ns: bit i for the i-th
 * of br, zstd and gzip. An lstat each. */
unsigned precompressed_sidecars(const char *resolved, uint64_t mtime_ns);

/* The file http's client gets for file (fresh at the loop's second now): file itself, or, taking
 * the caller's reference to file, the entry of the sidecar it accepts, cached beside it. */
struct file *precompressed_pick(sxe_http_t *http, struct file *file, uint64_t now);

#endif
