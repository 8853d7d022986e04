/*
 * sxe-httpd's open-file cache: see cache.h.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"

void httpd_date(time_t when, char *out, size_t size)
{
    struct tm utc;

    gmtime_r(&when, &utc);
    strftime(out, size, "%a, %d %b %Y %H:%M:%S GMT", &utc);
}

/* One cache per thread: with worker threads each worker has its own, so nothing is locked and
 * references need no atomics (a response's release runs on the worker that sent it). */
static __thread struct file *cache[CACHE_SLOTS];
static __thread uint64_t cache_inline_bytes;

static uint64_t hash_key(const char *key)
{
    uint64_t hash = 1469598103934665603ULL;
    for (; *key != '\0'; key++) {
        hash = (hash ^ (unsigned char)*key) * 1099511628211ULL;
    }
    return hash;
}

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

/* A worker thread that ends drops its cache: its loop is gone, so no response holds an entry. */
static void cache_clear(void *unused)
{
    (void)unused;
    for (unsigned i = 0; i < CACHE_SLOTS; i++) {
        if (cache[i] != NULL) {
            file_unref(cache[i]);
            cache[i] = NULL;
        }
    }
}

static void cache_key_make(void)
{
    (void)pthread_key_create(&cache_key, cache_clear);
}

/* The slot that holds key, or the one to (re)use for it. */
struct file **cache_slot(const char *key, size_t len, bool *found)
{
    static __thread bool registered;

    if (!registered) { /* the thread's cache is cleared when it ends */
        registered = true;
        pthread_once(&cache_once, cache_key_make);
        (void)pthread_setspecific(cache_key, &registered);
    }
    uint64_t home = hash_key(key);

    for (unsigned probe = 0; probe < CACHE_PROBES; probe++) {
        struct file **slot = &cache[(home + probe) % CACHE_SLOTS];
        if (*slot == NULL || ((*slot)->key_len == len && memcmp((*slot)->key, key, len) == 0)) {
            *found = *slot != NULL;
            return slot;
        }
    }
    *found = false;
    return &cache[home % CACHE_SLOTS]; /* evict the key's home slot */
}

/* Drops a reference to file (a sxe_conn_release_t); the last one frees it. */
void file_unref(void *arg)
{
    struct file *file = arg;

    if (--file->refs > 0) {
        return;
    }
    if (file->fd >= 0) {
        close(file->fd);
    }
    if (file->content != NULL) {
        cache_inline_bytes -= file->size;
        free(file->content);
    }
    free(file->resolved);
    free(file);
}

/*
 * An entry for an open fd, which it takes: metadata, ready-made header values, and small contents,
 * with one reference. NULL (fd closed) when memory is short.
 */
struct file *file_load(const char *key, const char *resolved, int fd, const struct stat *status,
                       const char *type)
{
    struct file *file = calloc(1, sizeof(*file));

    if (file == NULL || (file->resolved = strdup(resolved)) == NULL) {
        free(file);
        close(fd);
        return NULL;
    }
    file->refs = 1;
    file->key_len = (size_t)snprintf(file->key, sizeof(file->key), "%s", key);
    file->fd = fd;
    file->size = (uint64_t)status->st_size;
    file->mtime = status->st_mtime;
    file->inode = status->st_ino;
    snprintf(file->etag, sizeof(file->etag), "\"%" PRIx64 "-%" PRIx64 "\"",
             (uint64_t)status->st_mtim.tv_sec * 1000000000u + (uint64_t)status->st_mtim.tv_nsec,
             file->size);
    httpd_date(status->st_mtime, file->modified, sizeof(file->modified));
    file->type = type;
    snprintf(file->headers, sizeof(file->headers),
             "Content-Type: %s\r\nETag: %s\r\nLast-Modified: %s\r\nAccept-Ranges: bytes\r\n",
             file->type, file->etag, file->modified);
    file->content = NULL;
    if (file->size <= CACHE_INLINE_MAX && cache_inline_bytes + file->size <= CACHE_INLINE_TOTAL &&
        (file->content = malloc(file->size + 1)) != NULL) {
        if (pread(fd, file->content, file->size, 0) == (ssize_t)file->size) {
            cache_inline_bytes += file->size;
            close(fd); /* served from memory: the fd is not needed */
            file->fd = -1;
        } else {
            free(file->content);
            file->content = NULL;
        }
    }
    return file;
}
