/**
 * @file sxe/hash.h
 * @brief Hash tables of fixed capacity: open addressing, one cache line per lookup, in private or
 * shared memory or a file.
 *
 * A table holds up to its declared capacity of entries, each a key and a value. All of its memory
 * is reserved when it is made and never grows; when it is full, sxe_hash_put() returns -ENOBUFS.
 *
 *     struct sxe_hash_options options = {.name = "users", .capacity = 1000000,
 *                                        .key_size = 8, .value_size = 24};
 *     sxe_hash_t *users;
 *     if ((rc = sxe_hash_create(&users, &options)) < 0) { ... }
 *     rc = sxe_hash_put(users, &id, 8, record, 24);          // 0 added, 1 replaced, or -errno
 *     const struct record *found = sxe_hash_find(users, &id, 8, NULL);
 *
 * Keys and values have a fixed size given in the options, or SXE_HASH_VARIABLE: then each entry's
 * key and value are kept together in an arena beside the slots, arena_bytes in all.
 *
 * Layout (docs/hash.md explains the choice): linear probing over slots that hold the entry's
 * 64-bit hash and, for fixed sizes, the key and value themselves, so a lookup usually reads one
 * cache line; deletion shifts the entries after it back, so there are no tombstones and probe
 * chains stay short at any age. Slots are kept at or under load_percent of their number. Large
 * tables ask for transparent huge pages, since past a few hundred megabytes the TLB decides.
 *
 * Three kinds of table, as pools:
 * - private and unlocked (flags 0): one thread. No locking.
 * - locked (SXE_HASH_LOCKED): any thread may put, get and delete. The table is split into stripes,
 *   each with its own lock and its own slots (and arena); a key's hash chooses its stripe, and
 *   the hash is computed before the lock is taken, so a lock is held for a probe and a copy.
 * - shared: in memory that several processes map (sxe_hash_attach() on a file, SXE_HASH_SHARED
 *   for processes forked after creation, or sxe_hash_init() in memory you mapped yourself). The
 *   table holds offsets only, never pointers, and its stripe locks are robust: if a process dies
 *   holding one, the next locker repairs that stripe (a delete cut short can leave an entry in
 *   two slots; the copy is removed) and goes on.
 *
 * Invalid API use (a key of the wrong size, a NULL table) asserts in debug builds and returns
 * -EINVAL in release builds.
 */
#ifndef SXE_HASH_H
#define SXE_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "sxe/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sxe_hash sxe_hash_t;

/** A key_size or value_size meaning "each entry has its own", kept in the arena. */
#define SXE_HASH_VARIABLE UINT32_MAX

/** Lock every operation by stripe, so several threads may use the table. */
#define SXE_HASH_LOCKED 0x1u

/** sxe_hash_create: map the table MAP_SHARED, for processes forked afterwards. Implies locked. */
#define SXE_HASH_SHARED 0x2u

/** sxe_hash_attach: create the file; fail with -EEXIST if it exists. */
#define SXE_HASH_CREATE 0x4u

/** The most stripes a locked table may have. */
#define SXE_HASH_STRIPES_MAX 1024

/** The longest table name kept, without its NUL. */
#define SXE_HASH_NAME_MAX 31

/** What a table holds and how it may be used. */
struct sxe_hash_options {
    const char *name;      /**< For logs and errors; copied. */
    uint64_t capacity;     /**< Entries it must hold, at least 1. */
    uint32_t key_size;     /**< Bytes in every key (1 or more), or SXE_HASH_VARIABLE. */
    uint32_t value_size;   /**< Bytes in every value (0 or more), or SXE_HASH_VARIABLE. */
    uint64_t arena_bytes;  /**< With a variable size: bytes for keys and values. */
    unsigned load_percent; /**< Most slots in use, 50 to 95; 0 means 80. */
    unsigned stripes;      /**< Locked tables: a power of two up to SXE_HASH_STRIPES_MAX; 0: 64. */
    uint64_t seed;         /**< Seeds the hash, so an attacker cannot aim keys at one chain. */
    unsigned flags;        /**< SXE_HASH_LOCKED, SXE_HASH_SHARED. */
};

/** Counts kept by a table. */
struct sxe_hash_stats {
    uint64_t count;       /**< Entries now. */
    uint64_t capacity;    /**< Entries it holds at most. */
    uint64_t slots;       /**< Slots, in all stripes. */
    uint64_t arena_used;  /**< Arena bytes in live entries, rounded to their blocks. */
    uint64_t arena_bytes; /**< Arena bytes in all. */
    uint64_t full;        /**< Puts refused with -ENOBUFS. */
    uint64_t recoveries;  /**< Stripes repaired after a process died holding their lock. */
};

/** The table's hash function: 64 bits of data and seed, the same in every process. */
uint64_t sxe_hash_bytes(const void *data, size_t size, uint64_t seed);

/** The bytes a table with these options needs, for sxe_hash_init(); 0 if they are invalid. */
size_t sxe_hash_size(const struct sxe_hash_options *options);

/**
 * Makes a table in memory the caller owns.
 * @param memory  At least sxe_hash_size(options) bytes, 64-byte aligned. Need not be zeroed.
 * @return 0, or -EINVAL for invalid options or a short or misaligned buffer. The caller frees the
 *         memory after sxe_hash_fini().
 */
SXE_MUST_CHECK int sxe_hash_init(sxe_hash_t **hash, void *memory, size_t size,
                                 const struct sxe_hash_options *options);

/** Ends a table made by sxe_hash_init(). The memory is the caller's again. */
void sxe_hash_fini(sxe_hash_t *hash);

/**
 * Allocates and makes a table: private, or with SXE_HASH_SHARED, shared with processes forked
 * afterwards. A private table's pages are touched only as entries land on them. A shared table of
 * 2 MB or more is made resident here, in 2 MB huge pages where the kernel makes them
 * (MADV_COLLAPSE, Linux 6.1; shared memory gets none on a fault unless shmem_enabled allows it),
 * since its lookups land all over it anyway; the rest stays on 4 KB pages, touched as entries land.
 * @return 0, -EINVAL for invalid options, or -ENOMEM.
 */
SXE_MUST_CHECK int sxe_hash_create(sxe_hash_t **hash, const struct sxe_hash_options *options);

/** Frees a table made by sxe_hash_create(). Pointers from sxe_hash_find() become invalid. */
void sxe_hash_destroy(sxe_hash_t *hash);

/**
 * Maps the shared table kept in the file at path; with SXE_HASH_CREATE, creates the file (mode
 * 0600) and the table in it. The file persists until the caller removes it, and keeps the
 * entries: attaching again later finds them.
 * @return 0, or: -EINVAL; -EEXIST; -ENOENT; -EPROTO if the file is not an sxe hash table of this
 *         format version; -EMSGSIZE if its shape differs from the options; -EAGAIN if its creator
 *         has not finished making it; or another -errno from open, ftruncate or mmap.
 */
SXE_MUST_CHECK int sxe_hash_attach(sxe_hash_t **hash, const char *path,
                                   const struct sxe_hash_options *options, unsigned flags);

/** Unmaps a table mapped by sxe_hash_attach(). Other processes are unaffected. */
void sxe_hash_detach(sxe_hash_t *hash);

/**
 * Adds key with value, or replaces the value of key.
 * @return 0 when added, 1 when replaced, or: -ENOBUFS when the table (or the arena) is full, which
 *         is counted; -EINVAL for a key or value of the wrong size.
 */
SXE_MUST_CHECK int sxe_hash_put(sxe_hash_t *hash, const void *key, size_t key_size,
                                const void *value, size_t value_size);

/**
 * Copies the value of key into value, at most value_capacity bytes. Safe with concurrent writers.
 * @return the value's size (which may be more than value_capacity: then only the first
 *         value_capacity bytes were copied), or -ENOENT.
 */
SXE_MUST_CHECK int64_t sxe_hash_get(sxe_hash_t *hash, const void *key, size_t key_size, void *value,
                                    size_t value_capacity);

/**
 * The value of key, in place, and its size in *value_size when value_size is not NULL. Zero-copy:
 * the pointer is valid until the table next changes, so use it in unlocked tables, or in tables
 * that no one writes while it is held (sxe_hash_get() copies under the lock).
 * @return the value, or NULL if key is absent. A value of size 0 is a valid pointer.
 */
const void *sxe_hash_find(sxe_hash_t *hash, const void *key, size_t key_size, size_t *value_size);

/**
 * sxe_hash_find() for count keys at once: hashes them, prefetches each one's slot, then probes,
 * so the cache misses of different keys overlap. The fastest way to look up many keys.
 * @param key_sizes   Each key's size, or NULL when every key has the table's fixed key size.
 * @param values      Filled with each key's value, or NULL where it is absent.
 * @param value_sizes Filled with each value's size, or NULL to skip them.
 * @return the number of keys found.
 */
size_t sxe_hash_find_many(sxe_hash_t *hash, size_t count, const void *const *keys,
                          const size_t *key_sizes, const void **values, size_t *value_sizes);

/** Removes key. @return 0, or -ENOENT if it is absent. */
int sxe_hash_delete(sxe_hash_t *hash, const void *key, size_t key_size);

/**
 * Walks the entries of a table no one is writing: start with *cursor = 0 and call until it
 * returns 0. value_size may be NULL.
 * @return 1 with the next entry's key and value in place, or 0 after the last.
 */
int sxe_hash_next(sxe_hash_t *hash, uint64_t *cursor, const void **key, size_t *key_size,
                  const void **value, size_t *value_size);

/** The number of entries. */
uint64_t sxe_hash_count(sxe_hash_t *hash);

/** The table's counts. */
void sxe_hash_stats(sxe_hash_t *hash, struct sxe_hash_stats *stats);

#ifdef __cplusplus
}
#endif

#endif
