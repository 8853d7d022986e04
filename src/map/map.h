/*
 * Map internals shared by src/map*.c and the tests. The layout is here so tests can inspect and
 * corrupt it on purpose; docs/map.md explains the design.
 *
 * One region, each part 64-byte aligned:
 *     struct sxe__map_header          identity, shape, published version, writer state, stats
 *     struct sxe__map_reader_slot[readers_max]    one cache line per reader
 *     slots[slot_count]               slot_size bytes each: struct sxe__map_slot, then the key and
 *                                     value (fixed sizes) or an arena offset (variable sizes)
 *     uint32_t ring[old_versions]     slots of replaced or deleted entries, oldest first
 *     uint32_t successors[old_versions]   for each ring position, the slot of the version that
 *                                     replaced it, or SXE__MAP_NO_SUCCESSOR: a hint for reclaim
 *     uint32_t journal[old_versions]  slots the open transaction filled, for sxe_map_abort()
 *     uint64_t bitmap[]               one bit per 16 arena bytes: scratch for recovery, validation
 *     arena[arena_bytes]              blocks: uint32_t key size, uint32_t value size, key, value
 *     log[old_versions]               SXE_MAP_IN_PLACE only: record_size bytes each, struct
 *                                     sxe__map_record then the value it kept (map_in_place.c)
 *
 * In an SXE_MAP_IN_PLACE map a slot holds, after its three version fields, the log position of its
 * newest record (its undo field), then the key and the value.
 */
#ifndef SXE_MAP_INTERNAL_H
#define SXE_MAP_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "base/base.h"
#include "sxe/hash.h"
#include "sxe/log.h"
#include "sxe/map.h"

#define SXE__MAP_MAGIC 0x50414d4558535321ULL /* "!SSXEMAP" in memory order */

/* Slot tags: 0 ends a probe, TOMBSTONE is free but probes go on; entries' tags are hash | 1. */
#define SXE__MAP_EMPTY     0u
#define SXE__MAP_TOMBSTONE 2u

/* A ring entry that a delete retired: no version replaced it. */
#define SXE__MAP_NO_SUCCESSOR UINT32_MAX

/* created while the writer rewrites a slot: above every snapshot, so readers skip the slot. */
#define SXE__MAP_WRITING UINT64_MAX

/* An undo field with no record behind it: no older version of the entry is kept. */
#define SXE__MAP_NO_RECORD UINT64_MAX

/* Set in an undo field by abort or rollback, which put the record's value back in the slot: the
 * record still describes the history, but the pair (created, undo) never returns to a value a
 * reader may have seen before (map_in_place.c explains why that matters). */
#define SXE__MAP_UNDONE (1ULL << 63)

/* Arena blocks: 16-byte multiples up to 4 KiB (256 classes), then powers of two from 8 KiB up to
 * 2^48, the largest arena. */
#define SXE__MAP_GRANULE    16u
#define SXE__MAP_SMALL_MAX  4096u
#define SXE__MAP_ARENA_MAX  (1ULL << 48)
#define SXE__MAP_CLASSES    (SXE__MAP_SMALL_MAX / SXE__MAP_GRANULE + 36)
#define SXE__MAP_NO_BLOCK   UINT64_MAX
#define SXE__MAP_BLOCK_HEAD 8u

struct sxe__map_slot {
    uint64_t tag;     /* EMPTY, TOMBSTONE, or the key's hash | 1 */
    uint64_t created; /* the version that made the entry; WRITING while the writer rewrites it */
    uint64_t deleted; /* the version that replaced or deleted it; 0 while it is current */
    /* Then the key and the value, or for variable sizes the block's arena offset (uint64_t). */
};

/*
 * A record of the in-place log: the value a put in place replaced, and what a reader needs to
 * find the version its snapshot sees. Records are written in log order, and versions never go
 * down along the log, so the oldest are reclaimed first without a look at the slots.
 */
struct sxe__map_record {
    uint64_t position;    /* its log position, stored last; SXE__MAP_NO_RECORD while rewritten */
    uint64_t version;     /* the transaction that replaced the value */
    uint64_t old_created; /* the version of the value kept here */
    uint64_t prev;        /* the slot's undo field before: the record of the version before */
    uint64_t slot;        /* the slot it came from */
    /* Then value_size bytes: the value. */
};

struct sxe__map_reader_slot {
    uint64_t owner;    /* 0 when free; else the holder's process id */
    uint64_t snapshot; /* the version it reads */
    uint64_t reserved[6];
};

struct sxe__map_header {
    uint64_t magic; /* written last, so an attacher never trusts a half-made map */
    uint32_t version;
    uint32_t header_size;
    uint64_t region_size;
    uint64_t capacity;
    uint64_t old_versions;
    uint64_t slot_count;
    uint64_t arena_bytes;
    uint64_t seed;
    uint32_t key_size;
    uint32_t value_size;
    uint32_t slot_size;
    uint32_t readers_max;
    uint32_t load_percent;
    uint32_t flags;
    uint64_t readers_offset;
    uint64_t slots_offset;
    uint64_t ring_offset;
    uint64_t successors_offset;
    uint64_t journal_offset;
    uint64_t bitmap_offset;
    uint64_t arena_offset;
    uint64_t log_offset;
    uint32_t record_size;  /* 0 unless SXE_MAP_IN_PLACE */
    uint32_t entry_offset; /* from a slot's start to its key (fixed) or block offset (variable) */
    char name[SXE_MAP_NAME_MAX + 1];

    /* Readers load this on every snapshot; the writer stores it once per commit. */
    uint64_t published __attribute__((aligned(64)));
    uint64_t published_count; /* live entries at published, stored just before it */

    /* Writer state: written under the lock only. */
    pthread_mutex_t lock __attribute__((aligned(64)));
    uint32_t writing;    /* the dirty marker: set from write_begin to commit or abort */
    uint32_t writer_pid; /* the lock holder's process, for logs */
    uint64_t live;       /* current entries in the writer's view (deleted == 0) */
    uint64_t txn_live;   /* live when the transaction began */
    uint64_t ring_head;  /* ring positions count up; the index is position % old_versions */
    uint64_t ring_tail;
    uint64_t txn_ring_tail; /* ring_tail when the transaction began */
    uint64_t journal_count; /* may exceed old_versions: then abort scans every slot */
    uint64_t arena_bump;    /* arena bytes handed out from the top at least once */
    uint64_t arena_used;    /* bytes in blocks that entries own */
    uint64_t tombstones;
    uint64_t homecomings; /* current versions moved back to their old versions' slots */
    uint64_t log_head; /* in-place log positions count up; the index is position % old_versions */
    uint64_t log_tail;
    uint64_t txn_log_tail; /* log_tail when the transaction began */
    uint64_t free_heads[SXE__MAP_CLASSES];

    /* Stats. */
    uint64_t commits;
    uint64_t aborts;
    uint64_t recoveries;
    uint64_t reclaimed;
    uint64_t held_back;
    uint64_t oldest_reader_pid;
    uint64_t oldest_reader_version;
    uint64_t dead_readers;
    uint64_t full;
    uint64_t readers_full;
};

/* The process's handle: where the parts of the region are in this process. */
struct sxe_map {
    struct sxe__map_header *header;
    struct sxe__map_reader_slot *readers;
    unsigned char *slots;
    uint32_t *ring;
    uint32_t *successors;
    uint32_t *journal;
    uint64_t *bitmap;
    unsigned char *arena;
    unsigned char *log;
    uint64_t slot_count;
    uint64_t seed;
    uint64_t arena_bytes;
    uint64_t old_versions;
    uint32_t slot_size;
    uint32_t key_size;
    uint32_t value_size;
    uint32_t readers_max;
    uint32_t record_size;
    uint32_t entry_offset;
    uint64_t txn_version;      /* the open transaction's version: published + 1 */
    uint64_t log_cursor;       /* the next log position this handle would write at, */
    uint64_t log_cursor_index; /* and its record's index: no division per put in place */
    bool variable;             /* entries live in the arena */
    bool in_place;             /* SXE_MAP_IN_PLACE: puts replace values in place, readers copy */
    bool in_write;             /* this handle holds the writer lock */
    bool from_file;            /* attached, rather than created */
    size_t region_size;
};

static inline struct sxe__map_slot *sxe__map_slot(const sxe_map_t *map, uint64_t index)
{
    return (struct sxe__map_slot *)(map->slots + index * map->slot_size);
}

/*
 * The slot a key's probe starts at: the high bits of its tag (hash | 1) times slot_count, for any
 * slot count. From the tag, so the writer finds any entry's home without hashing its key again.
 */
static inline uint64_t sxe__map_home(const sxe_map_t *map, uint64_t tag)
{
    return (uint64_t)(((unsigned __int128)tag * map->slot_count) >> 64);
}

static inline uint64_t sxe__map_next(const sxe_map_t *map, uint64_t index)
{
    return index + 1 == map->slot_count ? 0 : index + 1;
}

static inline uint64_t sxe__map_prev(const sxe_map_t *map, uint64_t index)
{
    return index == 0 ? map->slot_count - 1 : index - 1;
}

/* How many slots bytes of them hold, at least one: what the batched calls prefetch at a time. */
static inline uint64_t sxe__map_slots_in(const sxe_map_t *map, uint64_t bytes)
{
    return map->slot_size >= bytes ? 1 : bytes / map->slot_size;
}

/* Prefetches the cache lines of count slots from index on, to read them or (for_write) to write. */
static inline void sxe__map_prefetch(const sxe_map_t *map, uint64_t index, uint64_t count,
                                     bool for_write)
{
    const char *slot = (const char *)sxe__map_slot(map, index);
    const char *end = slot + count * map->slot_size;

    for (; slot < end; slot += 64) {
        if (for_write) {
            __builtin_prefetch(slot, 1, 3);
        } else {
            __builtin_prefetch(slot);
        }
    }
}

static inline bool sxe__map_is_entry(uint64_t tag)
{
    return (tag & 1) != 0;
}

/* The bytes an arena block for size bytes of header, key and value takes. */
static inline uint64_t sxe__map_block_size(uint64_t size)
{
    if (size <= SXE__MAP_SMALL_MAX) {
        return (size + SXE__MAP_GRANULE - 1) & ~(uint64_t)(SXE__MAP_GRANULE - 1);
    }
    return 1ULL << (64 - __builtin_clzll(size - 1));
}

/* The arena offset a variable-size slot holds. */
static inline uint64_t *sxe__map_slot_block(struct sxe__map_slot *slot)
{
    return (uint64_t *)(slot + 1);
}

/* The key of a fixed-size slot; its value follows it. */
static inline unsigned char *sxe__map_slot_key(const sxe_map_t *map, struct sxe__map_slot *slot)
{
    return (unsigned char *)slot + map->entry_offset;
}

/* The undo field of a slot of an SXE_MAP_IN_PLACE map: the log position of its newest record. */
static inline uint64_t *sxe__map_slot_undo(struct sxe__map_slot *slot)
{
    return (uint64_t *)(slot + 1);
}

/* The record at a log position, wherever the log has wrapped to. */
static inline struct sxe__map_record *sxe__map_record(const sxe_map_t *map, uint64_t position)
{
    return (struct sxe__map_record *)(map->log + (position % map->old_versions) * map->record_size);
}

/* Whether two keys of size bytes are equal: one compare for the common 8-byte key. */
static inline bool sxe__map_key_equal(const void *a, const void *b, size_t size)
{
    if (size == 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        return x == y;
    }
    return memcmp(a, b, size) == 0;
}

/* Hashes a key with the map's seed: sxe_hash_bytes(), inline for the common 8-byte key. */
static inline uint64_t sxe__map_hash(const sxe_map_t *map, const void *key, size_t key_size)
{
    if (key_size == 8) {
        uint64_t word;
        memcpy(&word, key, sizeof(word));
        return sxe__hash_word(word, map->seed);
    }
    return sxe_hash_bytes(key, key_size, map->seed);
}

/* Whether a key and a value of these sizes fit the map. */
static inline bool sxe__map_sizes_are_valid(const sxe_map_t *map, size_t key_size,
                                            size_t value_size)
{
    bool key_ok = map->key_size == SXE_MAP_VARIABLE ? key_size >= 1 && key_size <= UINT32_MAX
                                                    : key_size == map->key_size;
    bool value_ok = map->value_size == SXE_MAP_VARIABLE ? value_size <= UINT32_MAX
                                                        : value_size == map->value_size;
    return key_ok && value_ok;
}

/*
 * Copies a fixed-size value without a call to memcpy: the commonest sizes (one to four words) as
 * constant copies, a few moves each; other whole words up to a line word by word. Readers check a
 * copy's version around it, so a copy need not be atomic at any width.
 */
static inline void sxe__map_copy(void *to, const void *from, size_t size)
{
    switch (size) { /* a constant size each: a few moves, no loop */
    case 8:
        memcpy(to, from, 8);
        return;
    case 16:
        memcpy(to, from, 16);
        return;
    case 24:
        memcpy(to, from, 24);
        return;
    case 32:
        memcpy(to, from, 32);
        return;
    default:
        break;
    }
    if (size % 8 == 0 && size <= 64) {
        for (size_t at = 0; at < size; at += 8) {
            memcpy((unsigned char *)to + at, (const unsigned char *)from + at, 8);
        }
        return;
    }
    memcpy(to, from, size);
}

/* Where a key is in the writer's view, and where a new version of it may go. */
struct sxe__map_place {
    uint64_t current; /* the slot of its current version, or UINT64_MAX */
    uint64_t free;    /* the first free slot of its probe, or UINT64_MAX */
};

/*
 * The writer's puts (map_write.c), under its lock. find_for_write walks key's probe to its current
 * version and (but in place, where a put that replaces needs none) the first free slot. put_at
 * puts key at the place find_for_write found, or at place.current alone in an SXE_MAP_IN_PLACE
 * map that has the key: sxe_map_put() of a checked, hashed key, whose result it returns.
 */
struct sxe__map_place sxe__map_find_for_write(const sxe_map_t *map, uint64_t hash, const void *key,
                                              size_t key_size);
int sxe__map_put_at(sxe_map_t *map, struct sxe__map_place place, uint64_t hash, const void *key,
                    size_t key_size, const void *value, size_t value_size);

/* Counts and logs (once) a put or delete refused for want of room (map_report.c).
 * @return -ENOBUFS. */
int sxe__map_full(sxe_map_t *map, const char *what);

/*
 * The in-place log (map_in_place.c), for SXE_MAP_IN_PLACE maps; the put itself is inline, in
 * map_log.h.
 * log_undo: puts back every value that records of version, from txn_log_tail to log_tail, kept,
 *     newest first: for abort, and for rollback after a writer died.
 * log_reclaim: drops the records no snapshot at or after oldest needs, oldest first.
 * log_follow: for a reader whose snapshot is older than a slot's value: copies the value of the
 *     version that snapshot sees, from the records from position back. @return true if found.
 * log_validate: checks the log and every slot's undo field.
 * log_restore: puts the value the record at position kept back into its slot, as undo does.
 */
void sxe__map_log_undo(sxe_map_t *map, uint64_t version);
void sxe__map_log_restore(sxe_map_t *map, uint64_t position);
void sxe__map_log_reclaim(sxe_map_t *map, uint64_t oldest);
bool sxe__map_log_follow(const sxe_map_t *map, uint64_t index, uint64_t position, uint64_t snapshot,
                         void *value, size_t capacity);
int sxe__map_log_validate(sxe_map_t *map);

/* The log module of the map's files: MAP (map_report.c). */
extern struct sxe_log_module sxe__map_log;

/* This process's id, cached (a fork handler refreshes it). */
pid_t sxe__map_process_id(void);

/*
 * Frees the entry at index for reuse (the writer's, under its lock): the slot becomes a
 * tombstone, its arena block is freed, and a run of tombstones that now ends at an empty slot
 * becomes empty (sxe__map_trim).
 */
void sxe__map_tombstone(sxe_map_t *map, uint64_t index);

/*
 * If the slot after index is empty, empties the run of tombstones that ends at index. No probe
 * for an entry runs through such a run (docs/map.md), so readers cannot miss one. The writer's,
 * under its lock: after each tombstone (map_write.c), and in a rollback (map_recover.c).
 */
static inline void sxe__map_trim(sxe_map_t *map, uint64_t index)
{
    if (sxe__map_slot(map, sxe__map_next(map, index))->tag != SXE__MAP_EMPTY) {
        return;
    }
    for (uint64_t step = 0; step < map->slot_count; step++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        if (slot->tag != SXE__MAP_TOMBSTONE) {
            return;
        }
        __atomic_store_n(&slot->tag, SXE__MAP_EMPTY, __ATOMIC_RELEASE);
        __atomic_store_n(&slot->created, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->deleted, 0, __ATOMIC_RELAXED);
        map->header->tombstones--;
        index = sxe__map_prev(map, index);
    }
}

/* The arena (map_arena.c), used by the writer under its lock. */
uint64_t sxe__map_arena_alloc(sxe_map_t *map, uint64_t size);
void sxe__map_arena_free(sxe_map_t *map, uint64_t offset);
void sxe__map_arena_reset(sxe_map_t *map);
void sxe__map_arena_rebuild(sxe_map_t *map);
int sxe__map_arena_validate(sxe_map_t *map);

/* The size of the block at offset, from its header, or 0 if it does not fit in the arena. */
uint64_t sxe__map_arena_block_bytes(const sxe_map_t *map, uint64_t offset);

/*
 * Takes the writer lock. If its last holder died (EOWNERDEAD) or left its transaction open (the
 * dirty marker), rolls the map back to the published version first. @return 0 or -errno.
 */
int sxe__map_lock(sxe_map_t *map);
void sxe__map_unlock(sxe_map_t *map);

/*
 * Rolls the map back to its published version by scanning every slot, then rebuilds the ring, the
 * counts and the arena's free lists from the slots. For a writer that died, or an abort whose
 * journal overflowed. Call with the writer lock held.
 */
void sxe__map_rollback(sxe_map_t *map);

/* Logs why the map is invalid and returns -EUCLEAN (map_report.c). */
int sxe__map_invalid(const sxe_map_t *map, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Checks every invariant of the map: slot tags match their keys' hashes, every entry can be
 * reached from its home slot without crossing an empty slot, no tombstone sits just before an
 * empty slot, versions are ordered (created <= published or the open transaction, created <
 * deleted), at most one version of a key is current and at most one is visible at the published
 * version, the ring lists exactly the replaced entries oldest first, the journal is consistent,
 * arena blocks are in bounds and do not overlap each other or the free lists, the counts match,
 * and every reader's version is at most the published one. Takes the writer lock unless this
 * handle holds it. O(slots x probe length).
 * @return 0, or -EUCLEAN after logging the first broken invariant.
 */
int sxe__map_validate(sxe_map_t *map);

#endif
