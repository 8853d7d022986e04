/**
 * @file sxe/map.h
 * @brief A versioned hash map: one writer commits batches atomically, any number of readers in any
 * number of processes read consistent snapshots without locks, and a file keeps it across restarts.
 *
 *     struct sxe_map_options options = {.name = "prices", .capacity = 1000000,
 *                                       .key_size = 8, .value_size = 24};
 *     sxe_map_t *map;
 *     if ((rc = sxe_map_attach(&map, "/var/lib/app/prices", &options, SXE_MAP_CREATE)) < 0) { ... }
 *
 *     // The writer: a batch of puts and deletes, published as one version, or none of it.
 *     if ((rc = sxe_map_write_begin(map)) < 0) { ... }
 *     rc = sxe_map_put(map, &id, 8, &price, 24);              // 0 added, 1 replaced, or -errno
 *     rc = sxe_map_delete(map, &other, 8);                    // 0, -ENOENT, or -errno
 *     rc = rc < 0 ? (sxe_map_abort(map), rc) : sxe_map_commit(map);
 *
 *     // Any reader, in any process, never blocked and never blocking the writer.
 *     struct sxe_map_reader reader;
 *     if ((rc = sxe_map_read_begin(map, &reader)) < 0) { ... }    // -ENOBUFS: reader table full
 *     const struct price *found = sxe_map_find(&reader, &id, 8, NULL);
 *     sxe_map_read_end(&reader);                                  // found is invalid from here
 *
 * Versions. Every commit publishes the next version number, with one atomic store: a reader sees
 * every change of a transaction or none of them, and a writer that dies at any instant leaves the
 * last published version, which the next writer returns to (docs/map.md explains how). Each entry
 * records the version that created it and the one that deleted it; a reader's snapshot sees the
 * entries alive at its version, for as long as it holds the snapshot, however many versions the
 * writer commits meanwhile.
 *
 * Old versions. A replaced or deleted entry stays until no reader can see it; the next
 * sxe_map_write_begin() reclaims it. Up to old_versions of them can wait; beyond that, puts that
 * replace and deletes fail with -ENOBUFS. A reader that holds a snapshot for a long time stops
 * reclamation: sxe_map_stats() names the oldest reader's process and version. A reader whose
 * process died is cleared by the writer.
 *
 * Keys and values have a fixed size given in the options, kept in the slots, or SXE_MAP_VARIABLE:
 * then each entry's key and value are kept together in an arena of arena_bytes beside the slots.
 *
 * Two modes. By default a put writes the new version beside the old one, so sxe_map_find() can hand
 * out pointers that stay valid for the whole snapshot. With SXE_MAP_IN_PLACE a put writes over the
 * old value after keeping it in a log, which makes large batches several times cheaper; readers
 * then copy values out with sxe_map_get() or sxe_map_get_many().
 *
 * Invalid API use (a key of the wrong size, a put without a transaction) asserts in debug builds
 * and returns -EINVAL (or NULL) in release builds.
 */
#ifndef SXE_MAP_H
#define SXE_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "sxe/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sxe_map sxe_map_t;

/** A key_size or value_size meaning "each entry has its own", kept in the arena. */
#define SXE_MAP_VARIABLE UINT32_MAX

/** sxe_map_create: map the region MAP_SHARED, for processes forked afterwards. */
#define SXE_MAP_SHARED 0x1u

/** sxe_map_attach: create the file; fail with -EEXIST if it exists. */
#define SXE_MAP_CREATE 0x2u

/**
 * Options: commit writes the transaction's pages to the file (msync) before it publishes the
 * version, and the header after, so a published version survives a crash of the machine too.
 */
#define SXE_MAP_DURABLE 0x4u

/**
 * sxe_map_attach: the caller promises that no other process has the file mapped (at boot, after
 * a crash of the machine). The writer lock and the reader table are reset, since a lock held when
 * the machine went down stays held in the file, and the next writer rolls back to the last
 * published version.
 */
#define SXE_MAP_RECOVER 0x8u

/**
 * Options: a put that replaces a key's value writes the new value over the old one, in the key's
 * slot, after keeping the old one in a log that snapshots still reading it follow. One random
 * cache line a put, not two or three (docs/map.md, "In place"), for maps updated in large
 * batches. Readers then copy values out (sxe_map_get(), sxe_map_get_many(), sxe_map_next_copy()):
 * sxe_map_find(), sxe_map_find_many() and sxe_map_next(), which hand out pointers into the map,
 * are invalid. Keys and values must have fixed sizes, and SXE_MAP_DURABLE cannot be combined with
 * it: the log keeps a crash of any process safe, but not of the machine. Up to old_versions
 * replaced values can wait in the log; beyond that, puts that replace get -ENOBUFS.
 */
#define SXE_MAP_IN_PLACE 0x10u

/** The longest map name kept, without its NUL. */
#define SXE_MAP_NAME_MAX 31

/** The most reader slots a map may have. */
#define SXE_MAP_READERS_MAX 65536

/** The largest fixed key_size + value_size; larger entries belong in the arena. */
#define SXE_MAP_INLINE_MAX 4096

/** What a map holds. */
struct sxe_map_options {
    const char *name;      /**< For logs and errors; copied. */
    uint64_t capacity;     /**< Live entries it must hold, at least 1. */
    uint64_t old_versions; /**< Replaced or deleted entries that may await reclamation; 0 means
                                capacity / 4 (at least 1). */
    uint32_t key_size;     /**< Bytes in every key (1 or more), or SXE_MAP_VARIABLE. */
    uint32_t value_size;   /**< Bytes in every value (0 or more), or SXE_MAP_VARIABLE. */
    uint64_t arena_bytes;  /**< With a variable size: bytes for keys and values, which are kept in
                                blocks of 16-byte multiples up to 4 KiB and powers of two beyond. */
    unsigned load_percent; /**< Most slots in use, 50 to 95; 0 means 80. */
    unsigned readers_max;  /**< Reader slots, 1 to SXE_MAP_READERS_MAX; 0 means 256. */
    uint64_t seed;         /**< Seeds the hash, so an attacker cannot aim keys at one chain. */
    unsigned flags;        /**< SXE_MAP_SHARED, SXE_MAP_DURABLE, SXE_MAP_IN_PLACE. */
};

/**
 * A reader's snapshot. The caller owns the struct (on its stack, say); sxe_map_read_begin() fills
 * it in. Only version is for the caller to read.
 */
struct sxe_map_reader {
    sxe_map_t *map;
    uint64_t version; /**< The version the snapshot sees. */
    uint32_t index;   /**< The reader slot it holds. */
    uint32_t reserved;
};

/** Counts kept by a map. */
struct sxe_map_stats {
    uint64_t version;               /**< The last published version. */
    uint64_t count;                 /**< Entries alive in the last published version. */
    uint64_t capacity;              /**< Live entries it holds at most. */
    uint64_t slots;                 /**< Slots: (capacity + old_versions) / load. */
    uint64_t old_versions;          /**< Replaced or deleted entries that may wait at most. */
    uint64_t pending;               /**< Replaced or deleted entries waiting now (with
                                         SXE_MAP_IN_PLACE, replaced values in the log too). */
    uint64_t held_back;             /**< Of those, at the last write_begin: kept for a reader. */
    uint64_t tombstones;            /**< Free slots that probes still walk through. */
    uint64_t arena_used;            /**< Arena bytes in entries' blocks. */
    uint64_t arena_bytes;           /**< Arena bytes in all. */
    uint64_t readers;               /**< Reader slots held now. */
    uint64_t readers_max;           /**< Reader slots in all. */
    uint64_t oldest_reader_pid;     /**< At the last write_begin: the process of the reader
                                         with the oldest snapshot behind the published version
                                         (the one that holds old versions longest), or 0. */
    uint64_t oldest_reader_version; /**< Its version. */
    uint64_t commits;               /**< Transactions published. */
    uint64_t aborts;                /**< Transactions abandoned by sxe_map_abort(). */
    uint64_t recoveries;            /**< Transactions rolled back after their writer died. */
    uint64_t reclaimed;             /**< Old versions reclaimed, in all. */
    uint64_t dead_readers;          /**< Reader slots cleared because their process died. */
    uint64_t full;                  /**< Puts and deletes refused with -ENOBUFS. */
    uint64_t readers_full;          /**< Readers refused with -ENOBUFS. */
    uint64_t moved_home;            /**< Current versions that reclamation moved back into the
                                         slots their old versions left (docs/map.md, "Aging,
                                         and moving home"); each leaves an old version, counted
                                         in pending. */
};

/**
 * Allocates and makes an empty map: private to the process (its threads may share it), or with
 * SXE_MAP_SHARED, shared with processes forked afterwards. All of its memory is reserved here and
 * never grows. A private map's pages are touched only as entries land on them. A shared map of 2 MB
 * or more is made resident here, in 2 MB huge pages where the kernel makes them (MADV_COLLAPSE,
 * Linux 6.1; shared memory gets none on a fault unless shmem_enabled allows it), since its
 * lookups and puts land all over it (docs/map.md, "Limits and trade-offs"). An SXE_MAP_IN_PLACE
 * map's log is faulted in here too.
 * @return 0, -EINVAL for invalid options, or -ENOMEM.
 */
SXE_MUST_CHECK int sxe_map_create(sxe_map_t **map, const struct sxe_map_options *options);

/**
 * Frees a map made by sxe_map_create(), aborting the transaction this handle has open. No reader
 * may hold a snapshot of it.
 */
void sxe_map_destroy(sxe_map_t *map);

/**
 * Maps the map kept in the file at path; with SXE_MAP_CREATE, creates the file (mode 0600) and
 * an empty map in it. The file persists until the caller removes it and keeps the last published
 * version: attaching again later, after any crash of a process, finds it. Any number of processes
 * may attach, each at its own address.
 * @param options  The map's shape. To open an existing file, NULL takes the shape from the file;
 *                 otherwise it must match the file's (its flags and name excepted).
 * @param flags    SXE_MAP_CREATE, SXE_MAP_RECOVER.
 * @return 0, or: -EINVAL; -EEXIST; -ENOENT; -EPROTO if the file is not an sxe map of this format
 *         version; -EMSGSIZE if its shape differs from the options; -EAGAIN if its creator has
 *         not finished making it; -ENOMEM; or another -errno from open, ftruncate or mmap.
 */
SXE_MUST_CHECK int sxe_map_attach(sxe_map_t **map, const char *path,
                                  const struct sxe_map_options *options, unsigned flags);

/**
 * Unmaps a map mapped by sxe_map_attach(), aborting the transaction this handle has open. No
 * reader of this handle may hold a snapshot. Other processes are unaffected.
 */
void sxe_map_detach(sxe_map_t *map);

/**
 * Starts a write transaction: takes the writer lock (waiting while another writer, in any
 * process, holds it), rolls back what a writer that died left unpublished, and reclaims the old
 * versions no reader can see any more, moving the versions that replaced them back into their
 * slots (a part of this transaction: stats' moved_home). The calling thread is the writer until
 * it commits or aborts, and only it may put and delete.
 * @return 0, or: -EINVAL if this handle already has a transaction open; -ENOTRECOVERABLE if the
 *         writer lock was left unusable (a process that inherited a dead writer's lock released it
 *         without recovering; attach with SXE_MAP_RECOVER to reset it); another -errno from the
 *         lock. Each error is logged.
 */
SXE_MUST_CHECK int sxe_map_write_begin(sxe_map_t *map);

/**
 * Adds key with value, or replaces the value of key, in the open transaction. Copies both.
 * Readers see it once the transaction commits.
 * @return 0 when added, 1 when replaced, or: -ENOBUFS when capacity, old_versions or the arena
 *         is used up (counted and logged once; the map is unchanged, the transaction still open);
 *         -EINVAL for a key or value of the wrong size or no transaction.
 */
SXE_MUST_CHECK int sxe_map_put(sxe_map_t *map, const void *key, size_t key_size, const void *value,
                               size_t value_size);

/**
 * sxe_map_put() for count entries, in order: hashes them and prefetches their slots ahead of the
 * puts, so the cache misses of different keys overlap. The fastest way to apply a large batch.
 * @param key_sizes    Each key's size, or NULL when the map's key size is fixed.
 * @param value_sizes  Each value's size, or NULL when the map's value size is fixed.
 * @param done         Set to the number of entries put.
 * @return 0 when all were put, or the first failing put's error (see sxe_map_put()): the entries
 *         before it are put, in the transaction, and the others are not.
 */
SXE_MUST_CHECK int sxe_map_put_many(sxe_map_t *map, size_t count, const void *const *keys,
                                    const size_t *key_sizes, const void *const *values,
                                    const size_t *value_sizes, size_t *done);

/**
 * Removes key in the open transaction.
 * @return 0, or: -ENOENT if key is absent; -ENOBUFS when old_versions is used up; -EINVAL.
 */
SXE_MUST_CHECK int sxe_map_delete(sxe_map_t *map, const void *key, size_t key_size);

/**
 * Publishes the open transaction as the next version, with one atomic store, and releases the
 * writer lock. With SXE_MAP_DURABLE, first writes the map's pages to its file.
 * @return 0, or -EINVAL without a transaction, or -errno from msync (the transaction is then
 *         rolled back and the lock released).
 */
SXE_MUST_CHECK int sxe_map_commit(sxe_map_t *map);

/** Abandons the open transaction, undoing its puts and deletes, and releases the writer lock. */
void sxe_map_abort(sxe_map_t *map);

/**
 * Takes a snapshot of the last published version. Never blocks and takes no lock. The snapshot
 * holds the entries it sees in place until sxe_map_read_end(). Each thread uses its own reader;
 * a thread may hold several.
 * @param reader  The caller's; filled in.
 * @return 0, or -ENOBUFS when all readers_max reader slots are held (counted and logged once).
 */
SXE_MUST_CHECK int sxe_map_read_begin(sxe_map_t *map, struct sxe_map_reader *reader);

/** Ends a snapshot: pointers from it become invalid, and the writer may reclaim what it saw. */
void sxe_map_read_end(struct sxe_map_reader *reader);

/**
 * The value of key in the reader's snapshot, in place (zero-copy), and its size in *value_size
 * when value_size is not NULL. The pointer stays valid until sxe_map_read_end(), whatever the
 * writer does meanwhile. Values are aligned only as the key size leaves them.
 * @return the value, or NULL if key is absent from the snapshot (or the call is invalid, as it is
 *         on an SXE_MAP_IN_PLACE map).
 */
const void *sxe_map_find(const struct sxe_map_reader *reader, const void *key, size_t key_size,
                         size_t *value_size);

/**
 * Copies the value of key in the reader's snapshot into value, at most value_capacity bytes. On
 * an SXE_MAP_IN_PLACE map it copies under the slot's sequence check, and from the log when the
 * slot's value is newer than the snapshot: the copy is always the snapshot's, never torn.
 * @return the value's size (more than value_capacity when only a part was copied), -ENOENT, or
 *         -EINVAL.
 */
SXE_MUST_CHECK int64_t sxe_map_get(const struct sxe_map_reader *reader, const void *key,
                                   size_t key_size, void *value, size_t value_capacity);

/**
 * sxe_map_get() for count keys at once, pipelined as sxe_map_find_many(). The fastest way to read
 * many keys of an SXE_MAP_IN_PLACE map.
 * @param key_sizes   Each key's size, or NULL when every key has the map's fixed key size.
 * @param values      count places of value_capacity bytes, one after the other: key i's value is
 *                    copied to values + i * value_capacity (at most value_capacity bytes).
 * @param value_sizes Filled with each value's size (as sxe_map_get() returns it), or -ENOENT where
 *                    the key is absent, or -EINVAL for a key of an invalid size; NULL to skip.
 * @return the number of keys found, or 0 for an invalid call.
 */
size_t sxe_map_get_many(const struct sxe_map_reader *reader, size_t count, const void *const *keys,
                        const size_t *key_sizes, void *values, size_t value_capacity,
                        int64_t *value_sizes);

/**
 * sxe_map_find() for count keys at once: hashes them, prefetches their slots, then probes, so the
 * cache misses of different keys overlap. The fastest way to read many keys.
 * @param key_sizes   Each key's size, or NULL when every key has the map's fixed key size.
 * @param values      Filled with each key's value, or NULL where it is absent.
 * @param value_sizes Filled with each value's size (left as it was where the key is absent), or
 *                    NULL to skip them.
 * @return the number of keys found.
 */
size_t sxe_map_find_many(const struct sxe_map_reader *reader, size_t count, const void *const *keys,
                         const size_t *key_sizes, const void **values, size_t *value_sizes);

/**
 * Walks the entries of the reader's snapshot, in no particular order: start with *cursor = 0 and
 * call until it returns 0. value_size may be NULL.
 * @return 1 with the next entry's key and value in place (valid as sxe_map_find()'s), or 0.
 */
int sxe_map_next(const struct sxe_map_reader *reader, uint64_t *cursor, const void **key,
                 size_t *key_size, const void **value, size_t *value_size);

/**
 * sxe_map_next() for an SXE_MAP_IN_PLACE map: walks the entries of the reader's snapshot, in no
 * particular order, copying each one's key (the map's key_size bytes) to key and its value, at
 * most value_capacity bytes, to value, under the same check as sxe_map_get(): each value is the
 * snapshot's, never torn. Start with *cursor = 0 and call until it returns 0.
 * @return 1 with the next entry copied, 0 when there is none, or -EINVAL for an invalid call (on a
 *         map that is not SXE_MAP_IN_PLACE, where sxe_map_next() walks without copying).
 */
SXE_MUST_CHECK int sxe_map_next_copy(const struct sxe_map_reader *reader, uint64_t *cursor,
                                     void *key, void *value, size_t value_capacity);

/** The last published version: 0 for a map that never committed. */
uint64_t sxe_map_version(const sxe_map_t *map);

/** The map's counts. Safe from any process at any time; the counts are read one by one. */
void sxe_map_stats(const sxe_map_t *map, struct sxe_map_stats *stats);

#ifdef __cplusplus
}
#endif

#endif
