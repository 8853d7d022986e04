/*
 * The hash table's hot path, inline, for the files of the table: where a key lives and how a probe
 * finds it.
 */
#ifndef SXE_HASH_INLINE_H
#define SXE_HASH_INLINE_H

#include <stdbool.h>
#include <string.h>

#include "base/base.h"
#include "hash.h"

/* A key's place: its tag and stripe, and the slot a probe is at (its home until it moves). */
struct sxe__hash_where {
    uint64_t tag;
    unsigned char *slot;
    unsigned char *first; /* the stripe's first slot */
    unsigned stripe;
};

/* A variable-size entry's slot after its tag: where its record is and how long its parts are. */
struct sxe__hash_record_ref {
    uint64_t offset; /* within the stripe's arena */
    uint32_t key_size;
    uint32_t value_size;
};

static inline struct sxe__hash_stripe *sxe__hash_stripe(const sxe_hash_t *hash, unsigned stripe)
{
    return (struct sxe__hash_stripe *)((char *)(uintptr_t)hash + hash->stripes_offset) + stripe;
}

/* The slot array of stripe, each slot hash->slot_size bytes, tag first (tests corrupt it too). */
static inline unsigned char *sxe__hash_slots(const sxe_hash_t *hash, unsigned stripe)
{
    return (unsigned char *)(uintptr_t)hash + hash->slots_offset +
           (uint64_t)stripe * hash->slots_per_stripe * hash->slot_size;
}

static inline unsigned char *sxe__hash_arena(const sxe_hash_t *hash, unsigned stripe)
{
    return (unsigned char *)(uintptr_t)hash + hash->arena_offset +
           (uint64_t)stripe * hash->arena_per_stripe;
}

/* The home slot of tag within its stripe: bits 1 to 32 scaled to the slot count by a multiply,
 * so any slot count works without a division. The stripe comes from the top bits. */
static inline uint64_t sxe__hash_home(const sxe_hash_t *hash, uint64_t tag)
{
    return ((tag >> 1) & 0xffffffffu) * hash->slots_per_stripe >> 32;
}

static inline void sxe__hash_locate(const sxe_hash_t *hash, const void *key, size_t key_size,
                                    struct sxe__hash_where *where)
{
    if (key_size == 8) {
        uint64_t word;
        memcpy(&word, key, 8);
        where->tag = sxe__hash_word(word, hash->seed) | 1;
    } else {
        where->tag = sxe_hash_bytes(key, key_size, hash->seed) | 1;
    }
    where->stripe = hash->stripe_shift < 64 ? (unsigned)(where->tag >> hash->stripe_shift) : 0;
    where->first = sxe__hash_slots(hash, where->stripe);
    where->slot = where->first + sxe__hash_home(hash, where->tag) * hash->slot_size;
}

/* The slot number of where within its stripe. */
static inline uint64_t sxe__hash_index(const sxe_hash_t *hash, const struct sxe__hash_where *where)
{
    return (uint64_t)(where->slot - where->first) / hash->slot_size;
}

static inline struct sxe__hash_record_ref sxe__hash_ref(const unsigned char *slot)
{
    struct sxe__hash_record_ref ref;
    memcpy(&ref, slot + 8, sizeof(ref));
    return ref;
}

static inline const void *sxe__hash_key(const sxe_hash_t *hash, const struct sxe__hash_where *where,
                                        size_t *key_size)
{
    if (hash->arena_per_stripe == 0) {
        *key_size = hash->key_size;
        return where->slot + 8;
    }
    struct sxe__hash_record_ref ref = sxe__hash_ref(where->slot);
    *key_size = ref.key_size;
    return sxe__hash_arena(hash, where->stripe) + ref.offset;
}

static inline const void *sxe__hash_value(const sxe_hash_t *hash,
                                          const struct sxe__hash_where *where, size_t *value_size)
{
    if (hash->arena_per_stripe == 0) {
        *value_size = hash->value_size;
        return where->slot + 8 + hash->key_size;
    }
    struct sxe__hash_record_ref ref = sxe__hash_ref(where->slot);
    *value_size = ref.value_size;
    return sxe__hash_arena(hash, where->stripe) + ref.offset + ref.key_size;
}

static inline bool sxe__hash_same_key(const sxe_hash_t *hash, const struct sxe__hash_where *where,
                                      const void *key, size_t key_size)
{
    if (hash->arena_per_stripe == 0) {
        if (key_size == 8) { /* the common case, compared as one word */
            uint64_t a, b;
            memcpy(&a, where->slot + 8, 8);
            memcpy(&b, key, 8);
            return a == b;
        }
        return memcmp(where->slot + 8, key, key_size) == 0;
    }
    struct sxe__hash_record_ref ref = sxe__hash_ref(where->slot);
    return ref.key_size == key_size &&
           memcmp(sxe__hash_arena(hash, where->stripe) + ref.offset, key, key_size) == 0;
}

/*
 * Walks the chain from where (a key's home) to the key's slot, or to the empty slot that ends the
 * chain. Leaves where at that slot.
 * @return true if the key is there.
 */
static inline bool sxe__hash_probe(const sxe_hash_t *hash, const void *key, size_t key_size,
                                   struct sxe__hash_where *where)
{
    unsigned char *end = where->first + hash->slots_per_stripe * hash->slot_size;

    for (;;) {
        uint64_t tag;
        memcpy(&tag, where->slot, sizeof(tag));
        if (tag == 0) {
            return false;
        }
        if (tag == where->tag && sxe__hash_same_key(hash, where, key, key_size)) {
            return true;
        }
        where->slot += hash->slot_size;
        if (where->slot == end) {
            where->slot = where->first;
        }
    }
}

/* In hash_arena.c: a variable-size entry's record, stored, replaced and freed. */
int sxe__hash_store_record(sxe_hash_t *hash, struct sxe__hash_where *where, const void *key,
                           size_t key_size, const void *value, size_t value_size);
int sxe__hash_replace_record(sxe_hash_t *hash, struct sxe__hash_where *where, const void *key,
                             size_t key_size, const void *value, size_t value_size);
void sxe__hash_free_record(sxe_hash_t *hash, const struct sxe__hash_where *where);
/* Whether the slot's record lies inside the part of its stripe's arena handed out. */
bool sxe__hash_record_is_sane(const sxe_hash_t *hash, const struct sxe__hash_where *where);
/* Rebuilds a stripe's free lists from its live records, after a death may have cut an update
 * short. @return 0 or -ENOMEM. */
int sxe__hash_rebuild_arena(sxe_hash_t *hash, unsigned stripe);

/* In hash_check.c: removes the entry at where, shifting the rest of its chain back. */
void sxe__hash_remove(sxe_hash_t *hash, struct sxe__hash_where *where);

/* In hash_check.c: gives back one of the capacity's entries, which hash.c's puts reserve. */
void sxe__hash_release_entry(sxe_hash_t *hash);

/* In hash_check.c: the module's log, HASH. */
extern struct sxe_log_module sxe__hash_log;

#endif
