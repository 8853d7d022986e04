/*
 * Hash table internals shared with tests.
 */
#ifndef SXE_HASH_INTERNAL_H
#define SXE_HASH_INTERNAL_H

#include <pthread.h>

#include "sxe/hash.h"

/* Arena size classes: multiples of 16 bytes up to 4 KiB, then powers of two up to 2^47. */
#define SXE__HASH_SMALL_CLASSES 256u
#define SXE__HASH_CLASSES       (SXE__HASH_SMALL_CLASSES + 35u)

/* One stripe: its lock, counts and arena allocator. Its slots and arena bytes are elsewhere. */
struct sxe__hash_stripe {
    pthread_mutex_t lock;
    uint64_t count;      /* entries in this stripe */
    uint64_t arena_next; /* bytes of this stripe's arena ever handed out */
    uint64_t arena_used; /* bytes in live entries' blocks */
    uint64_t full;
    uint64_t recoveries;
    uint64_t free_heads[SXE__HASH_CLASSES]; /* offset + 1 of a free block of each class; 0: none */
} __attribute__((aligned(64)));

struct sxe_hash {
    uint64_t magic; /* written last, so an attacher never trusts a half-made table */
    uint32_t version;
    uint32_t header_size;
    uint64_t region_size;
    uint64_t capacity;
    uint64_t entries; /* all stripes' entries: enforces the capacity across stripes */
    uint64_t slots_per_stripe;
    uint64_t stripe_limit; /* entries a stripe holds at most: one slot always stays empty */
    uint64_t arena_per_stripe;
    uint64_t seed;
    uint64_t stripes_offset;
    uint64_t slots_offset;
    uint64_t arena_offset;
    uint32_t key_size;
    uint32_t value_size;
    uint32_t slot_size;
    uint32_t stripe_count;
    uint32_t stripe_shift; /* 64 - log2(stripe_count): the stripe is tag >> stripe_shift */
    uint32_t flags;
    char name[SXE_HASH_NAME_MAX + 1];
} __attribute__((aligned(64)));

/*
 * Checks every invariant: each entry's tag is its key's hash, it is reachable from its home slot
 * without crossing an empty slot, no key is in two slots, the counts match, and arena records lie
 * inside their stripe's arena. Takes each stripe's lock in turn. O(slots).
 * @return 0, or -EUCLEAN after logging the first broken invariant.
 */
int sxe__hash_validate(sxe_hash_t *hash);

/* Takes and releases stripe's lock, as every operation does: for tests that die holding it. */
void sxe__hash_lock(sxe_hash_t *hash, unsigned stripe);
void sxe__hash_unlock(sxe_hash_t *hash, unsigned stripe);

/* Repairs stripe as a locker that inherits a dead holder's lock does. Call with the lock held. */
void sxe__hash_repair(sxe_hash_t *hash, unsigned stripe);

#endif
