/*
 * The hash table's arena: variable-size keys and values, each entry's key then value in one
 * block, allocated from its stripe's part of the arena.
 *
 * Blocks come in size classes, multiples of 16 bytes up to 4 KiB and powers of two beyond, each
 * class with a free list threaded through its free blocks by offset. Allocation and freeing are
 * O(1) and never move a live record, so a pointer from sxe_hash_find() stays good until the table
 * changes. The cost is that a free block serves only its own class: an arena can refuse a put
 * while blocks of other classes are free (counted as full, like a full table).
 */
#include <errno.h>
#include <stdlib.h>

#include "hash_inline.h"

static unsigned class_of(uint64_t size)
{
    if (size <= 4096) {
        return size == 0 ? 0 : (unsigned)((size + 15) / 16 - 1);
    }
    return SXE__HASH_SMALL_CLASSES + (unsigned)(64 - __builtin_clzll(size - 1)) - 13;
}

static uint64_t block_of(unsigned class)
{
    if (class < SXE__HASH_SMALL_CLASSES) {
        return ((uint64_t) class + 1) * 16;
    }
    return 1ULL << (class - SXE__HASH_SMALL_CLASSES + 13);
}

static int allocate(sxe_hash_t *hash, unsigned stripe_index, uint64_t size, uint64_t *offset)
{
    struct sxe__hash_stripe *stripe = sxe__hash_stripe(hash, stripe_index);
    unsigned char *arena = sxe__hash_arena(hash, stripe_index);
    unsigned class = class_of(size);
    uint64_t block = block_of(class);

    if (stripe->free_heads[class] != 0) {
        *offset = stripe->free_heads[class] - 1;
        memcpy(&stripe->free_heads[class], arena + *offset, sizeof(uint64_t));
    } else if (block <= hash->arena_per_stripe - stripe->arena_next) {
        *offset = stripe->arena_next;
        stripe->arena_next += block;
    } else {
        return -ENOBUFS;
    }
    stripe->arena_used += block;
    return 0;
}

static void release(sxe_hash_t *hash, unsigned stripe_index, uint64_t offset, uint64_t size)
{
    struct sxe__hash_stripe *stripe = sxe__hash_stripe(hash, stripe_index);
    unsigned class = class_of(size);

    memcpy(sxe__hash_arena(hash, stripe_index) + offset, &stripe->free_heads[class],
           sizeof(uint64_t));
    stripe->free_heads[class] = offset + 1;
    stripe->arena_used -= block_of(class);
}

/* Writes the record and points the slot at it; the slot's tag is the caller's to write. */
int sxe__hash_store_record(sxe_hash_t *hash, struct sxe__hash_where *where, const void *key,
                           size_t key_size, const void *value, size_t value_size)
{
    struct sxe__hash_record_ref ref = {.key_size = (uint32_t)key_size,
                                       .value_size = (uint32_t)value_size};
    int rc = allocate(hash, where->stripe, (uint64_t)key_size + value_size, &ref.offset);

    if (rc < 0) {
        return rc;
    }
    unsigned char *record = sxe__hash_arena(hash, where->stripe) + ref.offset;
    memcpy(record, key, key_size);
    if (value_size > 0) {
        memcpy(record + key_size, value, value_size);
    }
    memcpy(where->slot + 8, &ref, sizeof(ref));
    return 0;
}

int sxe__hash_replace_record(sxe_hash_t *hash, struct sxe__hash_where *where, const void *key,
                             size_t key_size, const void *value, size_t value_size)
{
    struct sxe__hash_record_ref old = sxe__hash_ref(where->slot);

    if (class_of((uint64_t)key_size + value_size) ==
        class_of((uint64_t)old.key_size + old.value_size)) {
        unsigned char *record = sxe__hash_arena(hash, where->stripe) + old.offset;
        if (value_size > 0) {
            memcpy(record + key_size, value, value_size);
        }
        old.value_size = (uint32_t)value_size;
        memcpy(where->slot + 8, &old, sizeof(old));
        return 0;
    }
    int rc = sxe__hash_store_record(hash, where, key, key_size, value, value_size);
    if (rc == 0) {
        release(hash, where->stripe, old.offset, (uint64_t)old.key_size + old.value_size);
    }
    return rc;
}

void sxe__hash_free_record(sxe_hash_t *hash, const struct sxe__hash_where *where)
{
    struct sxe__hash_record_ref ref = sxe__hash_ref(where->slot);
    release(hash, where->stripe, ref.offset, (uint64_t)ref.key_size + ref.value_size);
}

bool sxe__hash_record_is_sane(const sxe_hash_t *hash, const struct sxe__hash_where *where)
{
    struct sxe__hash_record_ref ref = sxe__hash_ref(where->slot);
    uint64_t size = (uint64_t)ref.key_size + ref.value_size;
    struct sxe__hash_stripe *stripe = sxe__hash_stripe(hash, where->stripe);

    return ref.key_size >= 1 && ref.offset % 16 == 0 && ref.offset < stripe->arena_next &&
           block_of(class_of(size)) <= stripe->arena_next - ref.offset;
}

static int by_offset(const void *a, const void *b)
{
    const uint64_t *left = a, *right = b;
    return left[0] < right[0] ? -1 : left[0] > right[0];
}

/* Frees the gap [from, to), a multiple of 16 bytes, as blocks of the largest classes that fit. */
static void free_gap(sxe_hash_t *hash, unsigned stripe_index, uint64_t from, uint64_t to)
{
    struct sxe__hash_stripe *stripe = sxe__hash_stripe(hash, stripe_index);

    while (from < to) {
        uint64_t block = to - from < 4096 ? to - from : 4096;
        stripe->arena_used += block; /* release() takes it back off */
        release(hash, stripe_index, from, block);
        from += block;
    }
}

int sxe__hash_rebuild_arena(sxe_hash_t *hash, unsigned stripe_index)
{
    struct sxe__hash_stripe *stripe = sxe__hash_stripe(hash, stripe_index);
    unsigned char *slots = sxe__hash_slots(hash, stripe_index);
    uint64_t(*live)[2] = malloc((stripe->count + 1) * sizeof(*live));
    uint64_t count = 0, end = 0;

    if (live == NULL) {
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < hash->slots_per_stripe && count < stripe->count; i++) {
        struct sxe__hash_where where = {
            .slot = slots + i * hash->slot_size, .first = slots, .stripe = stripe_index};
        if (*(const uint64_t *)(const void *)where.slot != 0) {
            struct sxe__hash_record_ref ref = sxe__hash_ref(where.slot);
            live[count][0] = ref.offset;
            live[count++][1] = block_of(class_of((uint64_t)ref.key_size + ref.value_size));
        }
    }
    qsort(live, count, sizeof(*live), by_offset);
    memset(stripe->free_heads, 0, sizeof(stripe->free_heads));
    stripe->arena_used = 0;
    for (uint64_t i = 0; i < count; i++) {
        free_gap(hash, stripe_index, end, live[i][0]);
        stripe->arena_used += live[i][1];
        end = live[i][0] + live[i][1];
    }
    free_gap(hash, stripe_index, end, stripe->arena_next);
    free(live);
    return 0;
}
