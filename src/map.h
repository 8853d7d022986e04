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
 */
#ifndef SXE_MAP_INTERNAL_H
#define SXE_MAP_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "hash_inline.h"
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
    uint64_t slot_count;
    uint64_t seed;
    uint64_t arena_bytes;
    uint64_t old_versions;
    uint32_t slot_size;
    uint32_t key_size;
    uint32_t value_size;
    uint32_t readers_max;
    uint64_t txn_version; /* the open transaction's version: published + 1 */
    bool variable;        /* entries live in the arena */
    bool in_write;        /* this handle holds the writer lock */
    bool from_file;       /* attached, rather than created */
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
            __builtin_prefetch(slot, 1, 0);
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

/* The log module of the map's files: MAP. */
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
 * for an entry runs through such a run (docs/map.md), so readers cannot miss one.
 */
void sxe__map_trim(sxe_map_t *map, uint64_t index);

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

/* Logs why the map is invalid and returns -EUCLEAN. */
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
