/*
 * The hash table's stripes: their locks, deletion by backward shift, the validator tests call
 * after every change, and the repair of a stripe whose lock holder died. The entry points of
 * hash.c call down into these; these call only the arena (hash_arena.c) and the hash function
 * (hash_bytes.c), never back up.
 *
 * The module's log is defined here, in the lowest of its files that write to it.
 */
#define SXE_LOG_MODULE sxe__hash_log
#include "sxe/log.h"

#include <errno.h>

#include "hash_inline.h"

struct sxe_log_module sxe__hash_log = SXE_LOG_MODULE_INIT(HASH);

static inline uint64_t tag_at(const unsigned char *slot)
{
    return __atomic_load_n((const uint64_t *)(const void *)slot, __ATOMIC_ACQUIRE);
}

static inline void set_tag(unsigned char *slot, uint64_t tag)
{
    __atomic_store_n((uint64_t *)(void *)slot, tag, __ATOMIC_RELEASE);
}

void sxe__hash_lock(sxe_hash_t *hash, unsigned stripe)
{
    if ((hash->flags & SXE_HASH_LOCKED) == 0) {
        return;
    }
    pthread_mutex_t *lock = &sxe__hash_stripe(hash, stripe)->lock;
    if (pthread_mutex_lock(lock) == EOWNERDEAD) {
        SXE_LOG_WARN("hash %s: a process died holding stripe %u's lock; repairing the stripe",
                     hash->name, stripe);
        sxe__hash_repair(hash, stripe);
        pthread_mutex_consistent(lock);
    }
}

void sxe__hash_unlock(sxe_hash_t *hash, unsigned stripe)
{
    if ((hash->flags & SXE_HASH_LOCKED) != 0) {
        pthread_mutex_unlock(&sxe__hash_stripe(hash, stripe)->lock);
    }
}

void sxe__hash_release_entry(sxe_hash_t *hash)
{
    if ((hash->flags & SXE_HASH_LOCKED) == 0) {
        hash->entries--;
    } else {
        __atomic_sub_fetch(&hash->entries, 1, __ATOMIC_RELAXED);
    }
}

/* Whether an entry whose home is home may sit at slot at, with hole before it in its chain: it
 * stays when its home lies cyclically in (hole, at]. */
static bool stays(uint64_t home, uint64_t hole, uint64_t at)
{
    return hole <= at ? home > hole && home <= at : home > hole || home <= at;
}

/*
 * Removes the entry at where and closes the hole it leaves: each later entry of the chain whose
 * home is not between the hole and itself moves back into the hole, which moves on to where that
 * entry was. The moved body is written before its tag; a death in between leaves a stale copy,
 * which the repair removes.
 */
void sxe__hash_remove(sxe_hash_t *hash, struct sxe__hash_where *where)
{
    unsigned char *slots = sxe__hash_slots(hash, where->stripe);
    uint64_t hole = sxe__hash_index(hash, where), at = hole;

    if (hash->arena_per_stripe != 0) {
        sxe__hash_free_record(hash, where);
    }
    for (;;) {
        at = at + 1 == hash->slots_per_stripe ? 0 : at + 1;
        unsigned char *slot = slots + at * hash->slot_size;
        uint64_t tag = tag_at(slot);
        if (tag == 0) {
            break;
        }
        if (!stays(sxe__hash_home(hash, tag), hole, at)) {
            unsigned char *into = slots + hole * hash->slot_size;
            memcpy(into + 8, slot + 8, hash->slot_size - 8);
            set_tag(into, tag);
            hole = at;
        }
    }
    set_tag(slots + hole * hash->slot_size, 0);
    sxe__hash_stripe(hash, where->stripe)->count--;
    sxe__hash_release_entry(hash);
}

/* Logs why the table is invalid and returns -EUCLEAN. */
static int invalid(const sxe_hash_t *hash, unsigned stripe, uint64_t index, const char *why)
{
    SXE_LOG_ERROR("hash %s invalid: stripe %u slot %llu: %s", hash->name, stripe,
                  (unsigned long long)index, why);
    return -EUCLEAN;
}

/* Checks the entry at where: its tag, its record, its chain from home, and that it is the only
 * slot holding its key. */
static int validate_entry(sxe_hash_t *hash, const struct sxe__hash_where *where, uint64_t index)
{
    size_t key_size;

    if (hash->arena_per_stripe != 0 && !sxe__hash_record_is_sane(hash, where)) {
        return invalid(hash, where->stripe, index, "its record is outside the arena");
    }
    const void *key = sxe__hash_key(hash, where, &key_size);
    struct sxe__hash_where found;
    sxe__hash_locate(hash, key, key_size, &found);
    if (found.tag != where->tag || found.stripe != where->stripe) {
        return invalid(hash, where->stripe, index, "its tag is not its key's hash");
    }
    if (!sxe__hash_probe(hash, key, key_size, &found)) {
        return invalid(hash, where->stripe, index, "its chain has a gap before it");
    }
    if (found.slot != where->slot) {
        return invalid(hash, where->stripe, index, "its key is also in an earlier slot");
    }
    return 0;
}

int sxe__hash_validate(sxe_hash_t *hash)
{
    uint64_t entries = 0;
    int rc = 0;

    for (unsigned stripe = 0; stripe < hash->stripe_count && rc == 0; stripe++) {
        unsigned char *slots = sxe__hash_slots(hash, stripe);
        uint64_t count = 0;

        sxe__hash_lock(hash, stripe);
        for (uint64_t i = 0; i < hash->slots_per_stripe && rc == 0; i++) {
            struct sxe__hash_where where = {
                .slot = slots + i * hash->slot_size, .first = slots, .stripe = stripe};
            where.tag = tag_at(where.slot);
            if (where.tag != 0) {
                count++;
                rc = validate_entry(hash, &where, i);
            }
        }
        if (rc == 0 && count != sxe__hash_stripe(hash, stripe)->count) {
            rc = invalid(hash, stripe, count, "the stripe's count differs from its entries");
        }
        if (rc == 0 && count >= hash->slots_per_stripe) {
            rc = invalid(hash, stripe, count, "the stripe has no empty slot");
        }
        entries += count;
        sxe__hash_unlock(hash, stripe);
    }
    if (rc == 0 && entries != __atomic_load_n(&hash->entries, __ATOMIC_RELAXED)) {
        rc = invalid(hash, 0, entries, "the table's count differs from its entries");
    }
    return rc;
}

/* Empties the slots whose tag does not match their key (a body torn by a death) or whose record
 * is out of bounds. */
static void drop_torn(sxe_hash_t *hash, unsigned stripe, unsigned char *slots)
{
    for (uint64_t i = 0; i < hash->slots_per_stripe; i++) {
        struct sxe__hash_where where = {
            .slot = slots + i * hash->slot_size, .first = slots, .stripe = stripe};
        where.tag = tag_at(where.slot);
        if (where.tag == 0) {
            continue;
        }
        size_t key_size;
        struct sxe__hash_where home = {0};
        bool sane = hash->arena_per_stripe == 0 || sxe__hash_record_is_sane(hash, &where);
        if (sane) {
            const void *key = sxe__hash_key(hash, &where, &key_size);
            sxe__hash_locate(hash, key, key_size, &home);
        }
        if (!sane || home.tag != where.tag) {
            SXE_LOG_WARN("hash %s: stripe %u slot %llu was torn by the death; dropped", hash->name,
                         stripe, (unsigned long long)i);
            set_tag(where.slot, 0);
        }
    }
}

/* An empty slot: one always is, since a stripe holds at most one entry fewer than its slots and
 * neither a put nor a shift cut short adds one. */
static uint64_t empty_slot(const sxe_hash_t *hash, const unsigned char *slots)
{
    uint64_t at = 0;

    while (at < hash->slots_per_stripe - 1 && tag_at(slots + at * hash->slot_size) != 0) {
        at++;
    }
    return at;
}

/*
 * Places every entry again, starting after start, a slot that was empty before the torn slots
 * were dropped, so that no chain crosses it: each entry is taken out and put back at the first
 * free slot of its chain, which is never later than where it was, unless its key is already
 * placed (a copy left by a shift cut short), in which case it is dropped.
 * @return the stripe's entries.
 */
static uint64_t replace_all(sxe_hash_t *hash, unsigned stripe, unsigned char *slots, uint64_t start)
{
    uint64_t count = 0, n = hash->slots_per_stripe;

    for (uint64_t step = 1; step < n; step++) {
        uint64_t at = (start + step) % n;
        unsigned char *slot = slots + at * hash->slot_size;
        struct sxe__hash_where here = {.slot = slot, .first = slots, .stripe = stripe};
        if ((here.tag = tag_at(slot)) == 0) {
            continue;
        }
        size_t key_size;
        const void *key = sxe__hash_key(hash, &here, &key_size);
        struct sxe__hash_where where;
        set_tag(slot, 0);
        sxe__hash_locate(hash, key, key_size, &where);
        if (sxe__hash_probe(hash, key, key_size, &where)) {
            SXE_LOG_WARN("hash %s: stripe %u slot %llu held a second copy of a key; dropped",
                         hash->name, stripe, (unsigned long long)at);
            continue;
        }
        if (where.slot != slot) {
            memcpy(where.slot + 8, slot + 8, hash->slot_size - 8);
        }
        set_tag(where.slot, here.tag);
        count++;
    }
    return count;
}

void sxe__hash_repair(sxe_hash_t *hash, unsigned stripe)
{
    struct sxe__hash_stripe *part = sxe__hash_stripe(hash, stripe);
    unsigned char *slots = sxe__hash_slots(hash, stripe);

    uint64_t start = empty_slot(hash, slots);

    drop_torn(hash, stripe, slots);
    uint64_t count = replace_all(hash, stripe, slots, start);
    if (count != part->count) {
        SXE_LOG_WARN("hash %s: stripe %u holds %llu entries, not %llu", hash->name, stripe,
                     (unsigned long long)count, (unsigned long long)part->count);
        __atomic_add_fetch(&hash->entries, count - part->count, __ATOMIC_RELAXED);
        part->count = count;
    }
    if (hash->arena_per_stripe != 0 && sxe__hash_rebuild_arena(hash, stripe) < 0) {
        SXE_LOG_ERROR("hash %s: no memory to rebuild stripe %u's free lists; its free blocks "
                      "are lost until the table is made again",
                      hash->name, stripe);
    }
    part->recoveries++;
}
