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

struct cache {
    struct file *slots[CACHE_SLOTS];
    uint64_t inline_bytes; /* the contents held in memory (atomic: a shared cache's files are
                              loaded and freed on any thread) */
    bool shared;
};

/* The shared cache's locks, one per stripe of slot groups: a key's group never crosses a stripe,
 * and each lock has its own cache line. */
static struct {
    pthread_mutex_t lock;
    char pad[64 - sizeof(pthread_mutex_t) % 64];
} stripes[CACHE_STRIPES];

static struct cache shared_cache = {.shared = true};
static bool use_shared;
static __thread struct cache *own_cache; /* this thread's, when not shared */
static pthread_key_t own_key;
static pthread_once_t own_once = PTHREAD_ONCE_INIT;

static void own_key_make(void);

void cache_configure(bool shared)
{
    use_shared = shared;
    for (unsigned i = 0; i < CACHE_STRIPES; i++) {
        pthread_mutex_init(&stripes[i].lock, NULL);
    }
}

/* The calling thread's cache; a thread's own is made on first use and freed when it ends. NULL
 * when memory is short: files are then served uncached. */
static struct cache *cache_get(void)
{
    if (use_shared) {
        return &shared_cache;
    }
    if (own_cache == NULL && (own_cache = calloc(1, sizeof(*own_cache))) != NULL) {
        pthread_once(&own_once, own_key_make);
        (void)pthread_setspecific(own_key, own_cache);
    }
    return own_cache;
}

static void lock(const struct cache *cache, unsigned group)
{
    if (cache->shared) {
        pthread_mutex_lock(&stripes[group % CACHE_STRIPES].lock);
    }
}

static void unlock(const struct cache *cache, unsigned group)
{
    if (cache->shared) {
        pthread_mutex_unlock(&stripes[group % CACHE_STRIPES].lock);
    }
}

static uint64_t hash_key(const char *key, size_t len)
{
    uint64_t hash = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        hash = (hash ^ (unsigned char)key[i]) * 1099511628211ULL;
    }
    return hash;
}

static bool shared(const struct file *file)
{
    return file->cache != NULL && file->cache->shared;
}

static void file_ref(struct file *file)
{
    if (shared(file)) {
        __atomic_add_fetch(&file->refs, 1, __ATOMIC_RELAXED);
    } else {
        file->refs++;
    }
}

/* The slot of the group that holds key, or NULL. Under the group's lock. */
static struct file **find_slot(struct cache *cache, unsigned group, const char *key, size_t len)
{
    for (unsigned i = 0; i < CACHE_GROUP; i++) {
        struct file **slot = &cache->slots[group * CACHE_GROUP + i];
        if (*slot != NULL && (*slot)->key_len == len && memcmp((*slot)->key, key, len) == 0) {
            return slot;
        }
    }
    return NULL;
}

struct file *cache_find(const char *key, size_t len)
{
    struct cache *cache = cache_get();
    unsigned group = (unsigned)(hash_key(key, len) % (CACHE_SLOTS / CACHE_GROUP));
    struct file *file = NULL;

    if (cache == NULL) {
        return NULL;
    }
    lock(cache, group);
    struct file **slot = find_slot(cache, group, key, len);
    if (slot != NULL) {
        file = *slot;
        file_ref(file);
    }
    unlock(cache, group);
    return file;
}

void cache_keep(struct file *file)
{
    struct cache *cache = file->cache;
    uint64_t hash = hash_key(file->key, file->key_len);
    unsigned group = (unsigned)(hash % (CACHE_SLOTS / CACHE_GROUP));

    if (cache == NULL) {
        return;
    }
    file_ref(file); /* the cache's */
    lock(cache, group);
    struct file **slot = find_slot(cache, group, file->key, file->key_len);
    for (unsigned i = 0; slot == NULL && i < CACHE_GROUP; i++) { /* a free slot... */
        if (cache->slots[group * CACHE_GROUP + i] == NULL) {
            slot = &cache->slots[group * CACHE_GROUP + i];
        }
    }
    if (slot == NULL) { /* ...or the key's home slot, whose entry is evicted */
        slot = &cache->slots[group * CACHE_GROUP + (hash >> 32) % CACHE_GROUP];
    }
    struct file *old = *slot;
    *slot = file;
    unlock(cache, group);
    if (old != NULL) {
        file_unref(old);
    }
}

bool cache_fresh(const struct file *file, uint64_t now)
{
    return __atomic_load_n(&file->checked, __ATOMIC_RELAXED) == now;
}

void cache_checked(struct file *file, uint64_t now)
{
    __atomic_store_n(&file->checked, now, __ATOMIC_RELAXED);
}

static void clear(struct cache *cache)
{
    for (unsigned i = 0; i < CACHE_SLOTS; i++) {
        if (cache->slots[i] != NULL) {
            file_unref(cache->slots[i]);
            cache->slots[i] = NULL;
        }
    }
}

/* A worker thread that ends drops its own cache: its loop is gone, so no response holds an entry.
 */
static void own_cache_free(void *cache)
{
    clear(cache);
    free(cache);
}

static void own_key_make(void)
{
    (void)pthread_key_create(&own_key, own_cache_free);
}

void cache_clear(void)
{
    if (own_cache != NULL) {
        (void)pthread_setspecific(own_key, NULL);
        own_cache_free(own_cache);
        own_cache = NULL;
    }
    clear(&shared_cache);
}

/* Counts size against the cache's budget for contents in memory: false, and nothing counted, if
 * it does not fit. */
static bool reserve(struct cache *cache, uint64_t size)
{
    if (__atomic_add_fetch(&cache->inline_bytes, size, __ATOMIC_RELAXED) <= CACHE_INLINE_TOTAL) {
        return true;
    }
    __atomic_sub_fetch(&cache->inline_bytes, size, __ATOMIC_RELAXED);
    return false;
}

void file_unref(void *arg)
{
    struct file *file = arg;

    if ((shared(file) ? __atomic_sub_fetch(&file->refs, 1, __ATOMIC_ACQ_REL) : --file->refs) > 0) {
        return;
    }
    if (file->fd >= 0) {
        close(file->fd);
    }
    if (file->content != NULL) { /* only ever held within a cache's budget */
        __atomic_sub_fetch(&file->cache->inline_bytes, file->size, __ATOMIC_RELAXED);
        free(file->content);
    }
    free(file->resolved);
    free(file->headers);
    free(file);
}

/* The ready-made header values: file's type, coding and ETag, then added. @return 0, or -1 if
 * memory is short. */
static int headers_make(struct file *file, const char *added)
{
    const char *coding = file->coding;
    size_t size = 256 + strlen(file->type) + (coding ? strlen(coding) : 0) + strlen(added);

    if ((file->headers = malloc(size)) == NULL) {
        return -1;
    }
    /* Ranges of an encoded file are not served (the original answers a Range): not offered. */
    int base = snprintf(
        file->headers, size, "Content-Type: %s\r\n%s%s%sETag: %s\r\nLast-Modified: %s\r\n%s",
        file->type, coding ? "Content-Encoding: " : "", coding ? coding : "", coding ? "\r\n" : "",
        file->etag, file->modified, coding ? "" : "Accept-Ranges: bytes\r\n");
    file->added = file->headers + base;
    snprintf(file->headers + base, size - (size_t)base, "%s", added);
    return 0;
}

struct file *file_load(const char *key, const char *resolved, int fd, const struct stat *status,
                       const char *type, const char *coding, const char *added)
{
    struct file *file = calloc(1, sizeof(*file));

    if (file == NULL || (file->resolved = strdup(resolved)) == NULL) {
        free(file);
        close(fd);
        return NULL;
    }
    file->refs = 1;
    file->cache = cache_get();
    file->key_len = (size_t)snprintf(file->key, sizeof(file->key), "%s", key);
    file->fd = fd;
    file->size = (uint64_t)status->st_size;
    file->mtime = status->st_mtime;
    file->mtime_ns = stat_mtime_ns(status);
    file->inode = status->st_ino;
    /* A coding's ETag is its own even where the sidecar's time and size are the original's. */
    snprintf(file->etag, sizeof(file->etag), "\"%" PRIx64 "-%" PRIx64 "%s%s\"", file->mtime_ns,
             file->size, coding ? "-" : "", coding ? coding : "");
    httpd_date(status->st_mtime, file->modified, sizeof(file->modified));
    file->type = type;
    file->coding = coding;
    if (headers_make(file, added) < 0) {
        file->fd = -1;
        file_unref(file);
        close(fd);
        return NULL;
    }
    if (file->cache != NULL && file->size <= CACHE_INLINE_MAX && reserve(file->cache, file->size)) {
        if ((file->content = malloc(file->size + 1)) != NULL &&
            pread(fd, file->content, file->size, 0) == (ssize_t)file->size) {
            close(fd); /* served from memory: the fd is not needed */
            file->fd = -1;
        } else {
            free(file->content);
            file->content = NULL;
            __atomic_sub_fetch(&file->cache->inline_bytes, file->size, __ATOMIC_RELAXED);
        }
    }
    return file;
}

void file_coded_etag(const struct file *origin, const char *coding, int level, char *out,
                     size_t size)
{
    /* The level is part of the tag: the same file at another level is other bytes. */
    snprintf(out, size, "%.*s-%s%d\"", (int)strlen(origin->etag) - 1, origin->etag, coding, level);
}

struct file *file_made(const char *key, const struct file *origin, const char *coding, int level,
                       char *content, size_t len)
{
    struct file *file = calloc(1, sizeof(*file));
    struct cache *cache = cache_get();

    if (file == NULL || cache == NULL || !reserve(cache, len)) {
        free(file);
        free(content);
        return NULL;
    }
    file->refs = 1;
    file->cache = cache;
    file->content = content; /* counted in the budget from here: file_unref() gives it back */
    file->size = len;
    file->fd = -1;
    file->key_len = (size_t)snprintf(file->key, sizeof(file->key), "%s", key);
    file->mtime = origin->mtime;
    file->mtime_ns = origin->mtime_ns;
    file->inode = origin->inode;
    file->origin_size = origin->size;
    file->type = origin->type;
    file->coding = coding;
    memcpy(file->modified, origin->modified, sizeof(file->modified));
    file_coded_etag(origin, coding, level, file->etag, sizeof(file->etag));
    if ((file->resolved = strdup(origin->resolved)) == NULL ||
        headers_make(file, origin->added) < 0) {
        file_unref(file);
        return NULL;
    }
    return file;
}
