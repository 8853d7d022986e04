/*
 * Hash tables: linear probing over fixed-size slots, split into stripes.
 *
 * One region holds everything, each part 64-byte aligned:
 *     struct sxe_hash              header: identity, shape, the capacity's count
 *     struct sxe__hash_stripe[S]   each stripe's lock, counts and arena free lists
 *     slots[S][slots_per_stripe]   tag (the key's hash | 1; 0 is an empty slot), then either the
 *                                  key and value (fixed sizes) or the offset and sizes of a
 *                                  record in the stripe's arena (variable sizes)
 *     arena[S][arena_per_stripe]   records: the key, then the value, in blocks of size classes
 *
 * Why linear probing with the tag in the slot: a lookup of a present key reads the slots from
 * its home onwards, usually one cache line, and compares 8-byte tags before any key. SIMD
 * control-byte groups (Swiss tables) keep the tags apart from the slots, which costs a second
 * miss per lookup once the table outgrows the cache, the case this table is for. Deletion shifts
 * later entries of the chain back instead of leaving tombstones, so chains never lengthen with
 * age. docs/hash.md has the measurements.
 *
 * Why stripes are whole sub-tables: a chain never leaves its stripe, so a lock per stripe guards
 * every slot a put, delete or shift touches, and a hash computed before the lock chooses it.
 *
 * This file holds the entry points. They call down, never back: hash_check.c has the stripes'
 * locks, deletion, the validator and the repair; hash_arena.c the records of variable-size
 * entries; hash_bytes.c the hash function; hash_inline.h the probe.
 */
#define SXE_LOG_MODULE sxe__hash_log
#include "sxe/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "hash.h"
#include "hash_inline.h"
#include "base/base.h"
#include "sys.h"

SXE__REGION_HEADER(struct sxe_hash);

#define HASH_MAGIC   0x4853414845585321ULL /* "!SXEHASH" in memory order */
#define HASH_VERSION 1u
#define HASH_ALIGN   64u

static uint64_t align_up(uint64_t value)
{
    return (value + HASH_ALIGN - 1) & ~(uint64_t)(HASH_ALIGN - 1);
}

static bool is_variable(const struct sxe_hash_options *options)
{
    return options->key_size == SXE_HASH_VARIABLE || options->value_size == SXE_HASH_VARIABLE;
}

static unsigned stripes_of(const struct sxe_hash_options *options)
{
    if ((options->flags & (SXE_HASH_LOCKED | SXE_HASH_SHARED)) == 0) {
        return 1;
    }
    return options->stripes != 0 ? options->stripes : 64;
}

static unsigned load_of(const struct sxe_hash_options *options)
{
    return options->load_percent != 0 ? options->load_percent : 80;
}

static bool options_are_valid(const struct sxe_hash_options *options)
{
    if (options == NULL || options->capacity < 1 || options->key_size == 0 ||
        (options->flags & ~(SXE_HASH_LOCKED | SXE_HASH_SHARED)) != 0) {
        return false;
    }
    unsigned stripes = stripes_of(options), load = load_of(options);
    if (stripes > SXE_HASH_STRIPES_MAX || (stripes & (stripes - 1)) != 0 || load < 50 ||
        load > 95 || options->capacity > (1ULL << 40)) {
        return false;
    }
    if (is_variable(options)) {
        return options->arena_bytes >= 16 * (uint64_t)stripes &&
               options->arena_bytes < (1ULL << 56);
    }
    return options->key_size <= 4096 && options->value_size <= 65536;
}

/*
 * The shape of a table: slots per stripe and the entries a stripe may hold. One stripe holds the
 * capacity exactly. Several share it by hash, so a stripe gets its share plus room for the chance
 * of drawing more than its share (four standard deviations of a binomial count, and 8): the
 * capacity is still enforced across all stripes, and a stripe that fills up first returns
 * -ENOBUFS, which with that margin is vanishingly rare for seeded hashes.
 */
struct shape {
    uint64_t slots_per_stripe, stripe_limit, arena_per_stripe, slot_size;
    uint64_t stripes_offset, slots_offset, arena_offset, region_size;
    unsigned stripes;
};

static void shape_of(const struct sxe_hash_options *options, struct shape *shape)
{
    uint64_t share = options->capacity;

    shape->stripes = stripes_of(options);
    if (shape->stripes > 1) {
        uint64_t mean = options->capacity / shape->stripes + 1, root = 1;
        while (root * root < mean) {
            root++;
        }
        share = mean + 4 * root + 8;
    }
    shape->stripe_limit = share;
    shape->slots_per_stripe = share * 100 / load_of(options) + 1; /* > share: load <= 95% */
    if (is_variable(options)) {
        shape->slot_size = 24;
        shape->arena_per_stripe = (options->arena_bytes / shape->stripes) & ~(uint64_t)15;
    } else {
        shape->slot_size = (8 + (uint64_t)options->key_size + options->value_size + 7) & ~7ULL;
        shape->arena_per_stripe = 0;
    }
    shape->stripes_offset = align_up(sizeof(struct sxe_hash));
    shape->slots_offset =
        align_up(shape->stripes_offset + shape->stripes * sizeof(struct sxe__hash_stripe));
    shape->arena_offset =
        align_up(shape->slots_offset + shape->stripes * shape->slots_per_stripe * shape->slot_size);
    shape->region_size = align_up(shape->arena_offset + shape->stripes * shape->arena_per_stripe);
}

size_t sxe_hash_size(const struct sxe_hash_options *options)
{
    struct shape shape;

    if (!options_are_valid(options)) {
        return 0;
    }
    shape_of(options, &shape);
    return (size_t)shape.region_size;
}

/* glibc's pthread_mutex_init always returns 0, so this cannot fail. */
static void init_lock(pthread_mutex_t *lock, bool shared)
{
    pthread_mutexattr_t attributes;

    pthread_mutexattr_init(&attributes);
    pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
    if (shared) {
        pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
    }
    pthread_mutex_init(lock, &attributes);
    pthread_mutexattr_destroy(&attributes);
}

/*
 * Lays the table out. Only the header and stripes are written: the slots must read as empty, which
 * fresh mappings already do, so a large table's pages are touched only as entries land on them.
 */
static sxe_hash_t *make(void *memory, const struct sxe_hash_options *options, bool zeroed,
                        unsigned extra_flags)
{
    sxe_hash_t *hash = memory;
    struct shape shape;

    shape_of(options, &shape);
    memset(hash, 0, shape.slots_offset);
    hash->version = HASH_VERSION;
    hash->header_size = sizeof(*hash);
    hash->region_size = shape.region_size;
    hash->capacity = options->capacity;
    hash->slots_per_stripe = shape.slots_per_stripe;
    hash->stripe_limit = shape.stripe_limit;
    hash->arena_per_stripe = shape.arena_per_stripe;
    hash->seed = options->seed;
    hash->stripes_offset = shape.stripes_offset;
    hash->slots_offset = shape.slots_offset;
    hash->arena_offset = shape.arena_offset;
    hash->key_size = options->key_size;
    hash->value_size = options->value_size;
    hash->slot_size = (uint32_t)shape.slot_size;
    hash->stripe_count = shape.stripes;
    hash->stripe_shift = 64 - (uint32_t)__builtin_ctz(shape.stripes);
    hash->flags = options->flags | extra_flags;
    if (hash->flags & SXE_HASH_SHARED) {
        hash->flags |= SXE_HASH_LOCKED;
    }
    snprintf(hash->name, sizeof(hash->name), "%s", options->name != NULL ? options->name : "");
    if (!zeroed) {
        memset((char *)hash + shape.slots_offset, 0, shape.arena_offset - shape.slots_offset);
    }
    for (unsigned stripe = 0; stripe < shape.stripes; stripe++) {
        init_lock(&sxe__hash_stripe(hash, stripe)->lock, (hash->flags & SXE_HASH_SHARED) != 0);
    }
    sxe__region_publish(hash, HASH_MAGIC);
    SXE_LOG_DEBUG("hash %s: %llu entries in %u stripes of %llu slots of %u bytes, %llu bytes",
                  hash->name, (unsigned long long)hash->capacity, hash->stripe_count,
                  (unsigned long long)hash->slots_per_stripe, hash->slot_size,
                  (unsigned long long)hash->region_size);
    return hash;
}

int sxe_hash_init(sxe_hash_t **hash, void *memory, size_t size,
                  const struct sxe_hash_options *options)
{
    if (!SXE_CHECK(hash != NULL && memory != NULL && ((uintptr_t)memory % HASH_ALIGN) == 0 &&
                   options_are_valid(options) && size >= sxe_hash_size(options))) {
        return -EINVAL;
    }
    *hash = make(memory, options, false, 0);
    return 0;
}

void sxe_hash_fini(sxe_hash_t *hash)
{
    if (hash == NULL) {
        return;
    }
    for (unsigned stripe = 0; stripe < hash->stripe_count; stripe++) {
        pthread_mutex_destroy(&sxe__hash_stripe(hash, stripe)->lock);
    }
    hash->magic = 0;
}

int sxe_hash_create(sxe_hash_t **hash, const struct sxe_hash_options *options)
{
    if (!SXE_CHECK(hash != NULL && options_are_valid(options))) {
        return -EINVAL;
    }
    int rc;
    size_t size = sxe_hash_size(options);
    void *memory = sxe__region_map_anonymous("hash", options->name, size,
                                             (options->flags & SXE_HASH_SHARED) != 0, &rc);
    if (memory == NULL) {
        return rc;
    }
    if ((options->flags & SXE_HASH_SHARED) != 0) {
        sxe__region_back_huge(memory, size);
    }
    *hash = make(memory, options, true, 0);
    return 0;
}

void sxe_hash_destroy(sxe_hash_t *hash)
{
    if (hash == NULL) {
        return;
    }
    size_t size = (size_t)hash->region_size;
    sxe_hash_fini(hash);
    sxe__sys.munmap(hash, size);
}

/* Checks that the mapped table is one of ours and has the shape the caller expects. */
static int check_attached(const sxe_hash_t *hash, const char *path, size_t file_size,
                          const struct sxe_hash_options *options)
{
    struct shape shape;
    int rc = sxe__region_check(hash, HASH_MAGIC, HASH_VERSION, sizeof(*hash), "hash table", path);

    if (rc < 0) {
        return rc;
    }
    shape_of(options, &shape);
    if (hash->capacity != options->capacity || hash->key_size != options->key_size ||
        hash->value_size != options->value_size || hash->stripe_count != shape.stripes ||
        hash->region_size != shape.region_size || file_size != shape.region_size) {
        SXE_LOG_ERROR("hash file %s holds %llu entries of %u+%u bytes in %u stripes (%zu bytes); "
                      "expected %llu of %u+%u in %u",
                      path, (unsigned long long)hash->capacity, hash->key_size, hash->value_size,
                      hash->stripe_count, file_size, (unsigned long long)options->capacity,
                      options->key_size, options->value_size, shape.stripes);
        return -EMSGSIZE;
    }
    return 0;
}

int sxe_hash_attach(sxe_hash_t **hash, const char *path, const struct sxe_hash_options *options,
                    unsigned flags)
{
    bool create = (flags & SXE_HASH_CREATE) != 0;
    void *memory;
    size_t size;
    int rc;

    if (!SXE_CHECK(hash != NULL && path != NULL && options_are_valid(options) &&
                   (flags & ~SXE_HASH_CREATE) == 0)) {
        return -EINVAL;
    }
    rc = sxe__region_map_file("hash", path, create, sxe_hash_size(options), sizeof(sxe_hash_t),
                              &memory, &size);
    if (rc < 0) {
        return rc;
    }
    if (create) {
        make(memory, options, true, SXE_HASH_SHARED);
    } else if ((rc = check_attached(memory, path, size, options)) < 0) {
        sxe__sys.munmap(memory, size);
        return rc;
    }
    *hash = memory;
    return 0;
}

void sxe_hash_detach(sxe_hash_t *hash)
{
    if (hash == NULL) {
        return;
    }
    sxe__sys.munmap(hash, (size_t)hash->region_size);
}

/* Checks a key's size against the table's; a programmer error when it differs. */
static bool key_size_fits(const sxe_hash_t *hash, size_t key_size)
{
    if (hash->key_size == SXE_HASH_VARIABLE) {
        return key_size >= 1 && key_size <= UINT32_MAX;
    }
    return key_size == hash->key_size;
}

/* Reserves one of the capacity's entries; false when the table holds its capacity. */
static bool reserve_entry(sxe_hash_t *hash)
{
    if ((hash->flags & SXE_HASH_LOCKED) == 0) {
        return hash->entries < hash->capacity ? (hash->entries++, true) : false;
    }
    if (__atomic_add_fetch(&hash->entries, 1, __ATOMIC_RELAXED) <= hash->capacity) {
        return true;
    }
    __atomic_sub_fetch(&hash->entries, 1, __ATOMIC_RELAXED);
    return false;
}

/* Writes a new entry into the empty slot at. Its tag goes last, so a reader of a torn slot after
 * a death sees it empty. Call with the lock held. */
static int insert(sxe_hash_t *hash, struct sxe__hash_stripe *stripe, struct sxe__hash_where *where,
                  const void *key, size_t key_size, const void *value, size_t value_size)
{
    if (stripe->count >= hash->stripe_limit || !reserve_entry(hash)) {
        goto full;
    }
    if (hash->arena_per_stripe != 0) {
        int rc = sxe__hash_store_record(hash, where, key, key_size, value, value_size);
        if (rc < 0) {
            sxe__hash_release_entry(hash);
            goto full;
        }
    } else {
        memcpy(where->slot + 8, key, key_size);
        memcpy(where->slot + 8 + key_size, value, value_size);
    }
    __atomic_store_n((uint64_t *)(void *)where->slot, where->tag, __ATOMIC_RELEASE);
    stripe->count++;
    return 0;

full:
    stripe->full++;
    if (stripe->full == 1) {
        SXE_LOG_WARN("hash %s is full: %llu entries of %llu; puts fail with -ENOBUFS", hash->name,
                     (unsigned long long)__atomic_load_n(&hash->entries, __ATOMIC_RELAXED),
                     (unsigned long long)hash->capacity);
    }
    return -ENOBUFS;
}

int sxe_hash_put(sxe_hash_t *hash, const void *key, size_t key_size, const void *value,
                 size_t value_size)
{
    if (!SXE_CHECK(hash != NULL && key != NULL && key_size_fits(hash, key_size) &&
                   (value != NULL || value_size == 0) &&
                   (hash->value_size == SXE_HASH_VARIABLE ? value_size <= UINT32_MAX
                                                          : value_size == hash->value_size))) {
        return -EINVAL;
    }
    struct sxe__hash_where where;
    int rc;

    sxe__hash_locate(hash, key, key_size, &where);
    struct sxe__hash_stripe *stripe = sxe__hash_stripe(hash, where.stripe);
    sxe__hash_lock(hash, where.stripe);
    if (!sxe__hash_probe(hash, key, key_size, &where)) {
        rc = insert(hash, stripe, &where, key, key_size, value, value_size);
    } else if (hash->arena_per_stripe != 0) {
        rc = sxe__hash_replace_record(hash, &where, key, key_size, value, value_size);
        rc = rc < 0 ? (stripe->full++, rc) : 1;
    } else {
        memcpy(where.slot + 8 + key_size, value, value_size);
        rc = 1;
    }
    sxe__hash_unlock(hash, where.stripe);
    return rc;
}

int64_t sxe_hash_get(sxe_hash_t *hash, const void *key, size_t key_size, void *value,
                     size_t value_capacity)
{
    if (!SXE_CHECK(hash != NULL && key != NULL && key_size_fits(hash, key_size) &&
                   (value != NULL || value_capacity == 0))) {
        return -EINVAL;
    }
    struct sxe__hash_where where;
    int64_t rc = -ENOENT;

    sxe__hash_locate(hash, key, key_size, &where);
    sxe__hash_lock(hash, where.stripe);
    if (sxe__hash_probe(hash, key, key_size, &where)) {
        size_t size;
        const void *found = sxe__hash_value(hash, &where, &size);
        size_t copied = size < value_capacity ? size : value_capacity;
        /* A caller that asks only for the size may pass no buffer, and memcpy takes no NULL. */
        if (copied > 0) {
            memcpy(value, found, copied);
        }
        rc = (int64_t)size;
    }
    sxe__hash_unlock(hash, where.stripe);
    return rc;
}

const void *sxe_hash_find(sxe_hash_t *hash, const void *key, size_t key_size, size_t *value_size)
{
    if (!SXE_CHECK(hash != NULL && key != NULL && key_size_fits(hash, key_size))) {
        return NULL;
    }
    struct sxe__hash_where where;
    size_t size;

    sxe__hash_locate(hash, key, key_size, &where);
    if (!sxe__hash_probe(hash, key, key_size, &where)) {
        return NULL;
    }
    const void *value = sxe__hash_value(hash, &where, &size);
    if (value_size != NULL) {
        *value_size = size;
    }
    return value;
}

/* sxe_hash_find_many() starts FIND_GROUP lookups a pass. Each prefetches FIND_BYTES of slots from
 * its home, and FIND_FURTHER times as many each time its probe runs past them. */
#define FIND_GROUP   16
#define FIND_BYTES   128
#define FIND_FURTHER 2

/* One lookup of sxe_hash_find_many() in flight. */
struct lookup {
    struct sxe__hash_where where;
    const unsigned char *ready; /* the end of the slots prefetched for it */
    size_t key;                 /* its index in keys[] */
};

/* Prefetches the lines of bytes of slots from where->slot on, and notes how far they reach. */
static inline void prefetch_slots(struct lookup *lookup, size_t bytes)
{
    const unsigned char *slot = lookup->where.slot;

    for (size_t offset = 0; offset < bytes; offset += 64) {
        __builtin_prefetch(slot + offset);
    }
    __builtin_prefetch(slot + bytes - 1);
    lookup->ready = slot + bytes;
}

/*
 * Starts the lookups of keys[first] to keys[end - 1] in one tight loop, so that their prefetches'
 * misses (and page walks, where the table has no huge pages) overlap.
 */
static void group_start(const sxe_hash_t *hash, struct lookup *group, size_t first, size_t end,
                        const void *const *keys, const size_t *key_sizes)
{
    for (size_t key = first; key < end; key++) {
        struct lookup *lookup = &group[key - first];
        lookup->key = key;
        sxe__hash_locate(hash, keys[key], key_sizes ? key_sizes[key] : hash->key_size,
                         &lookup->where);
        prefetch_slots(lookup, FIND_BYTES);
    }
}

/*
 * Probes the slots prefetched for a lookup. @return 1 if it found its key, 0 if the key is absent,
 * or -1 if the probe runs past them: the next ones are prefetched, for a later pass.
 */
static inline int lookup_go_on(const sxe_hash_t *hash, struct lookup *lookup, const void *key,
                               size_t key_size)
{
    struct sxe__hash_where *where = &lookup->where;
    unsigned char *end = where->first + hash->slots_per_stripe * hash->slot_size;

    for (;;) {
        if (where->slot + hash->slot_size > lookup->ready) {
            prefetch_slots(lookup, FIND_FURTHER * FIND_BYTES);
            return -1;
        }
        uint64_t tag;
        memcpy(&tag, where->slot, sizeof(tag));
        if (tag == 0) {
            return 0;
        }
        if (tag == where->tag && sxe__hash_same_key(hash, where, key, key_size)) {
            return 1;
        }
        where->slot += hash->slot_size;
        if (where->slot == end) {
            where->slot = where->first;
            lookup->ready = where->first; /* nothing prefetched from the start of the stripe */
        }
    }
}

/*
 * Pipelined: each pass starts up to FIND_GROUP new lookups, then probes those started in the pass
 * before, whose slots have had the new lookups' time to arrive. A probe that runs past its
 * prefetched slots waits for the next pass rather than stalling on one miss after another.
 * values and value_sizes are restrict: the answers written through them never alias the table's
 * header, so its fields stay in registers through the loop.
 */
size_t sxe_hash_find_many(sxe_hash_t *hash, size_t count, const void *const *keys,
                          const size_t *key_sizes, const void **restrict values,
                          size_t *restrict value_sizes)
{
    if (!SXE_CHECK(hash != NULL && ((keys != NULL && values != NULL) || count == 0) &&
                   (key_sizes != NULL || hash->key_size != SXE_HASH_VARIABLE))) {
        return 0;
    }
    struct lookup lists[2][2 * FIND_GROUP];
    size_t sizes[2] = {0, 0}, next = 0, found = 0, now = 0;

    do {
        /* The next pass's list holds the new lookups and those of this pass that go on. */
        struct lookup *later = lists[1 - now];
        size_t room = 2 * FIND_GROUP - sizes[now];
        size_t end = next + (room < FIND_GROUP ? room : FIND_GROUP);
        end = end < count ? end : count;
        group_start(hash, later, next, end, keys, key_sizes);
        sizes[1 - now] = end - next;
        next = end;
        for (size_t i = 0; i < sizes[now]; i++) {
            struct lookup *lookup = &lists[now][i];
            size_t key = lookup->key, size = 0;
            int result =
                lookup_go_on(hash, lookup, keys[key], key_sizes ? key_sizes[key] : hash->key_size);
            if (result < 0) {
                later[sizes[1 - now]++] = *lookup;
                continue;
            }
            values[key] = result ? sxe__hash_value(hash, &lookup->where, &size) : NULL;
            found += (size_t)result;
            if (value_sizes != NULL) {
                value_sizes[key] = size;
            }
        }
        sizes[now] = 0;
        now = 1 - now;
    } while (sizes[now] > 0 || next < count);
    return found;
}

int sxe_hash_delete(sxe_hash_t *hash, const void *key, size_t key_size)
{
    if (!SXE_CHECK(hash != NULL && key != NULL && key_size_fits(hash, key_size))) {
        return -EINVAL;
    }
    struct sxe__hash_where where;
    int rc = -ENOENT;

    sxe__hash_locate(hash, key, key_size, &where);
    sxe__hash_lock(hash, where.stripe);
    if (sxe__hash_probe(hash, key, key_size, &where)) {
        sxe__hash_remove(hash, &where);
        rc = 0;
    }
    sxe__hash_unlock(hash, where.stripe);
    return rc;
}

int sxe_hash_next(sxe_hash_t *hash, uint64_t *cursor, const void **key, size_t *key_size,
                  const void **value, size_t *value_size)
{
    uint64_t total = (uint64_t)hash->stripe_count * hash->slots_per_stripe;
    struct sxe__hash_where where;
    size_t size;

    for (; *cursor < total; ++*cursor) {
        where.stripe = (unsigned)(*cursor / hash->slots_per_stripe);
        where.first = sxe__hash_slots(hash, where.stripe);
        where.slot = where.first + *cursor % hash->slots_per_stripe * hash->slot_size;
        memcpy(&where.tag, where.slot, sizeof(where.tag));
        if (where.tag != 0) {
            ++*cursor;
            *key = sxe__hash_key(hash, &where, key_size);
            *value = sxe__hash_value(hash, &where, &size);
            if (value_size != NULL) {
                *value_size = size;
            }
            return 1;
        }
    }
    return 0;
}

uint64_t sxe_hash_count(sxe_hash_t *hash)
{
    return __atomic_load_n(&hash->entries, __ATOMIC_RELAXED);
}

void sxe_hash_stats(sxe_hash_t *hash, struct sxe_hash_stats *stats)
{
    memset(stats, 0, sizeof(*stats));
    stats->count = sxe_hash_count(hash);
    stats->capacity = hash->capacity;
    stats->slots = (uint64_t)hash->stripe_count * hash->slots_per_stripe;
    stats->arena_bytes = (uint64_t)hash->stripe_count * hash->arena_per_stripe;
    for (unsigned i = 0; i < hash->stripe_count; i++) {
        struct sxe__hash_stripe *stripe = sxe__hash_stripe(hash, i);
        stats->arena_used += __atomic_load_n(&stripe->arena_used, __ATOMIC_RELAXED);
        stats->full += __atomic_load_n(&stripe->full, __ATOMIC_RELAXED);
        stats->recoveries += __atomic_load_n(&stripe->recoveries, __ATOMIC_RELAXED);
    }
}
