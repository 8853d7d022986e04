/*
 * The open-file cache. Serving a file by its path costs a realpath (a stat per path component),
 * an open, a fstat and a close; the cache keeps, per request path, the file open, its metadata
 * and headers ready, and small files whole in memory, and checks them again at most once a second
 * (as nginx's open_file_cache_valid does, every 60 s by default). A small cached file then costs
 * no file system call at all: its head and body go out in one write, the body straight from the
 * cache's memory. An entry is counted: the cache holds one reference while the entry is in its
 * slot, and every request using it holds one (its response releases it when the bytes are sent or
 * dropped). An entry replaced or evicted mid-response lives on until its last response is done.
 * With worker threads the cache is per thread or shared by all: see cache_configure() and
 * docs/benchmarks.md for what each costs.
 */
#ifndef SXE_HTTPD_CACHE_H
#define SXE_HTTPD_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#define CACHE_SLOTS        1024
#define CACHE_GROUP        8 /* a key's slots: the aligned group of 8 around its hash */
#define CACHE_STRIPES      64
#define CACHE_KEY_MAX      256
#define CACHE_INLINE_MAX   65536
#define CACHE_INLINE_TOTAL (32 << 20)

struct cache;

struct file {
    char key[CACHE_KEY_MAX]; /* the decoded request path; empty for an entry not cached */
    size_t key_len;
    char *resolved;
    int fd;
    uint64_t size;
    time_t mtime;
    uint64_t mtime_ns; /* to the nanosecond: a change within the second is a change */
    ino_t inode;
    char etag[56];
    char modified[40];
    const char *type;
    const char *coding;   /* a sidecar's or a compressed copy's Content-Encoding, or NULL */
    uint64_t origin_size; /* a compressed copy's: the size of the file it was made from */
    char *headers;        /* a 200 response's headers, ready: no formatting per request */
    const char *added;    /* their end: the fields --header adds under the file's path */
    char *content;        /* the whole file, when small */
    uint64_t checked;     /* the loop's second when it was last checked (relaxed atomic) */
    unsigned sidecars;    /* --precompressed: the sidecars found at that check (relaxed atomic) */
    unsigned refs;        /* the cache's, while in a slot, and one per holder (atomic if shared) */
    struct cache *cache;  /* whose memory budget the content counts against */
};

/*
 * Chooses, before any worker starts, between one cache per thread (false: nothing locked, plain
 * reference counts; what worker processes always get) and one cache for every thread of the
 * process (true: a lock per group of slots, atomic reference counts, each file held once).
 */
void cache_configure(bool shared);

/* The entry cached for key, with a reference for the caller, or NULL. */
struct file *cache_find(const char *key, size_t len);

/* Caches file under its key, replacing what held the slot; the cache takes its own reference. */
void cache_keep(struct file *file);

/* Whether file was checked in the loop's second now; and marking it checked. */
bool cache_fresh(const struct file *file, uint64_t now);
void cache_checked(struct file *file, uint64_t now);

/* Drops every entry of the calling thread's cache and of the shared one (at exit). */
void cache_clear(void);

/* Drops a reference to file (a sxe_conn_release_t); the last one frees it. */
void file_unref(void *arg);

/*
 * An entry for an open fd, which it takes: metadata, ready-made header values (type is its
 * Content-Type; coding, NULL or a sidecar's Content-Encoding, which also marks its ETag and leaves
 * Accept-Ranges out; added, the fields --header adds for its path, lines ending in CRLF, which a
 * 304 repeats), and small contents, with one reference (the caller's). key is "" for an entry
 * that will not be cached. NULL (fd closed) when memory is short.
 */
struct file *file_load(const char *key, const char *resolved, int fd, const struct stat *status,
                       const char *type, const char *coding, const char *added);

/*
 * An entry for content (len bytes of malloc's, which it takes) made from origin with coding at
 * level: origin's metadata, its own ETag, held in memory within the cache's budget, with one
 * reference (the caller's). NULL (content freed) when memory or the budget is short.
 */
/* The ETag of origin's bytes coded with coding at level: origin's, marked with both. */
void file_coded_etag(const struct file *origin, const char *coding, int level, char *out,
                     size_t size);

struct file *file_made(const char *key, const struct file *origin, const char *coding, int level,
                       char *content, size_t len);

/* A file's modification time, to the nanosecond. */
static inline uint64_t stat_mtime_ns(const struct stat *status)
{
    return (uint64_t)status->st_mtim.tv_sec * 1000000000u + (uint64_t)status->st_mtim.tv_nsec;
}

/* Whether the entry still describes the file stat found: the same inode, time and size. */
static inline bool file_unchanged(const struct file *file, const struct stat *status)
{
    return file->inode == status->st_ino && file->mtime_ns == stat_mtime_ns(status) &&
           file->size == (uint64_t)status->st_size;
}

/* An HTTP date (RFC 9110 IMF-fixdate) for when. */
void httpd_date(time_t when, char *out, size_t size);

#endif
