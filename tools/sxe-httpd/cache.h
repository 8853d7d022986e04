/*
 * The open-file cache. Serving a file by its path costs a realpath (a stat per path component),
 * an open, a fstat and a close; the cache keeps, per request path, the file open, its metadata
 * and headers ready, and small files whole in memory, and checks them again at most once a second
 * (as nginx's open_file_cache_valid does, every 60 s by default). A small cached file then costs
 * no file system call at all: its head and body go out in one write, the body straight from the
 * cache's memory. An entry is counted: the cache holds one reference while the entry is in its
 * slot, and every response still sending the entry's memory or fd holds one (released by the
 * connection when the bytes are sent or dropped). An entry replaced or evicted mid-response lives
 * on until its last response is done.
 */
#ifndef SXE_HTTPD_CACHE_H
#define SXE_HTTPD_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#define CACHE_SLOTS        1024
#define CACHE_PROBES       8
#define CACHE_KEY_MAX      256
#define CACHE_INLINE_MAX   65536
#define CACHE_INLINE_TOTAL (32 << 20)

struct file {
    char key[CACHE_KEY_MAX]; /* the decoded request path; empty for a free slot */
    size_t key_len;
    char *resolved;
    int fd;
    uint64_t size;
    time_t mtime;
    ino_t inode;
    char etag[48];
    char modified[40];
    const char *type;
    char headers[256]; /* a 200 response's headers, ready: no formatting per request */
    char *content;     /* the whole file, when small */
    uint64_t checked;  /* the loop's second when it was last checked */
    unsigned refs;     /* the cache's, while in a slot, and one per response sending it */
};

/* The slot that holds key, or the one to (re)use for it; *found says which. */
struct file **cache_slot(const char *key, size_t len, bool *found);

/* Drops a reference to file (a sxe_conn_release_t); the last one frees it. */
void file_unref(void *arg);

/*
 * An entry for an open fd, which it takes: metadata, ready-made header values (type is its
 * Content-Type), and small contents, with one reference. NULL (fd closed) when memory is short.
 */
struct file *file_load(const char *key, const char *resolved, int fd, const struct stat *status,
                       const char *type);

/* An HTTP date (RFC 9110 IMF-fixdate) for when. */
void httpd_date(time_t when, char *out, size_t size);

#endif
