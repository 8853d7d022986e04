/*
 * sxe_map_put_many(): a batch of puts, pipelined so that the cache misses of different keys
 * overlap and no put waits for its own. At 30 million keys nearly every put misses the cache and
 * the TLB, so a put that stalls on its line costs a whole memory latency; a batch instead keeps
 * PUT_PASS puts' lines on their way while it works on others.
 *
 * Each pass starts up to PUT_PASS new puts (checks and hashes them, prefetches the first lines of
 * their probes, in one tight loop so that their page walks overlap), then walks the probes of the
 * puts started before, over the lines prefetched for them. A put whose probe has shown what it
 * needs (its key's slot, or where a new version may go) is applied; one whose probe runs on past
 * its lines prefetches the next ones and waits for the next pass, as sxe_map_find_many()'s lookups
 * do (docs/map.md, "Readers").
 *
 * Order. A put that waits lets later puts of other keys go first, which changes nothing a reader
 * can tell: they all land in the same transaction. Puts of the same key keep their order: a put
 * whose tag may match one that waits in this pass waits too. And a put goes first only if it
 * leaves room for every put that waits (may_go_ahead), so a put can fail only when none before it
 * waits: on an error the puts before the failing one are in and those after it are not, as the
 * contract says.
 */
#define SXE_LOG_MODULE sxe__map_log
#include "sxe/log.h"

#include <errno.h>
#include <string.h>

#include "map.h"
#include "map_log.h"

#define NONE UINT64_MAX

/* Puts started a pass, and the bytes of slots prefetched for each from its home: in place a put
 * that replaces stops at its key, mostly in its home line; otherwise it walks on to the first free
 * slot. Each further step prefetches NEXT_BYTES. */
#define PUT_PASS          16
#define FIRST_BYTES       512
#define FIRST_IN_PLACE    128
#define NEXT_BYTES        512
#define NEXT_IN_PLACE     128
#define IN_FLIGHT         (2 * PUT_PASS)
#define WAITING_MASK_BITS 256

/* A put in flight: its place in the batch and how far its probe has been walked. */
struct flight {
    size_t put; /* its index in the batch */
    uint64_t hash;
    uint64_t index;   /* the next slot of its probe to look at */
    uint64_t ready;   /* slots from index on that were prefetched */
    uint64_t steps;   /* slots looked at */
    uint64_t current; /* the slot of its key's current version, once seen, or NONE */
    bool free_seen;   /* a free slot was seen */
};

/* The batch: its arrays, as sxe_map_put_many() got them. */
struct batch {
    const void *const *keys;
    const size_t *key_sizes;
    const void *const *values;
    const size_t *value_sizes;
};

static size_t key_size_of(const sxe_map_t *map, const struct batch *batch, size_t put)
{
    return batch->key_sizes != NULL ? batch->key_sizes[put] : map->key_size;
}

static size_t value_size_of(const sxe_map_t *map, const struct batch *batch, size_t put)
{
    return batch->value_sizes != NULL ? batch->value_sizes[put] : map->value_size;
}

static bool put_is_valid(const sxe_map_t *map, const struct batch *batch, size_t put)
{
    if (batch->key_sizes == NULL && batch->value_sizes == NULL) {
        return batch->keys[put] != NULL && (batch->values[put] != NULL || map->value_size == 0);
    }
    return batch->keys[put] != NULL &&
           (batch->values[put] != NULL || value_size_of(map, batch, put) == 0) &&
           sxe__map_sizes_are_valid(map, key_size_of(map, batch, put),
                                    value_size_of(map, batch, put));
}

/*
 * Whether the put, its probe walked, may go ahead of waiting earlier puts: whether it leaves room
 * for each of them, whatever they turn out to be, so that none can fail because it went first. An
 * insert takes a live entry; a replace takes a log record in place, a ring position otherwise.
 * The arena can always run out.
 */
static bool may_go_ahead(const sxe_map_t *map, const struct flight *flight, size_t waiting)
{
    const struct sxe__map_header *header = map->header;
    uint64_t needed = waiting + 1;

    if (map->variable) {
        return false;
    }
    if (flight->current == NONE) {
        return needed <= header->capacity - header->live;
    }
    return needed <= map->old_versions - (map->in_place ? header->log_tail - header->log_head
                                                        : header->ring_tail - header->ring_head);
}

/*
 * Starts puts first to end - 1 in flights, in one tight loop. Stops at an invalid put: the batch
 * ends before it. @return the index of the first put not started.
 */
static size_t start(const sxe_map_t *map, const struct batch *batch, size_t first, size_t end,
                    struct flight *flights, size_t *started)
{
    uint64_t span = sxe__map_slots_in(map, map->in_place ? FIRST_IN_PLACE : FIRST_BYTES);

    for (size_t put = first; put < end; put++) {
        if (!SXE_CHECK(put_is_valid(map, batch, put))) {
            return put;
        }
        struct flight *flight = &flights[(*started)++];
        flight->put = put;
        flight->hash = sxe__map_hash(map, batch->keys[put], key_size_of(map, batch, put));
        flight->index = sxe__map_home(map, flight->hash | 1);
        flight->ready = span;
        flight->steps = 0;
        flight->current = NONE;
        flight->free_seen = false;
        sxe__map_prefetch(map, flight->index, span, true);
    }
    return end;
}

/*
 * Walks the put's probe over its prefetched slots, as sxe__map_find_for_write() does. If it runs on
 * past them, prefetches the next ones. @return true once the probe has shown what the put needs.
 */
static bool walk(const sxe_map_t *map, const struct batch *batch, struct flight *flight)
{
    uint64_t tag = flight->hash | 1;
    const void *key = batch->keys[flight->put];
    size_t key_size = key_size_of(map, batch, flight->put);

    for (; flight->ready > 0; flight->ready--) {
        struct sxe__map_slot *slot = sxe__map_slot(map, flight->index);
        if (slot->tag == SXE__MAP_EMPTY || ++flight->steps == map->slot_count) {
            return true;
        }
        if (slot->tag == SXE__MAP_TOMBSTONE) {
            flight->free_seen = true;
        } else if (slot->tag == tag && slot->deleted == 0 && !map->variable &&
                   sxe__map_key_equal(sxe__map_slot_key(map, slot), key, key_size)) {
            flight->current = flight->index;
        }
        if (flight->current != NONE && (flight->free_seen || map->in_place)) {
            return true;
        }
        flight->index = sxe__map_next(map, flight->index);
    }
    flight->ready = sxe__map_slots_in(map, map->in_place ? NEXT_IN_PLACE : NEXT_BYTES);
    sxe__map_prefetch(map, flight->index, flight->ready, true);
    return false;
}

/*
 * Applies a put whose probe was walked. In place, a key's current slot cannot have moved since (a
 * put in place leaves it there), so the put goes straight to it; otherwise other puts may have
 * taken the free slot seen, so the probe is walked again, over lines now in the cache.
 */
static int apply(sxe_map_t *map, const struct batch *batch, const struct flight *flight)
{
    const void *key = batch->keys[flight->put];
    size_t key_size = key_size_of(map, batch, flight->put);
    struct sxe__map_place place = {.current = flight->current, .free = NONE};

    if (map->in_place && flight->current != NONE &&
        sxe__map_slot(map, flight->current)->created != map->txn_version) {
        return sxe__map_log_put(map, flight->current, batch->values[flight->put]);
    }
    if (!map->in_place || flight->current == NONE) {
        place = sxe__map_find_for_write(map, flight->hash, key, key_size);
    }
    return sxe__map_put_at(map, place, flight->hash, key, key_size, batch->values[flight->put],
                           value_size_of(map, batch, flight->put));
}

/* A set of tags that puts waiting in this pass may have: a bit per tag's top byte. */
struct waiting {
    uint64_t bits[WAITING_MASK_BITS / 64];
    size_t count;
};

static bool may_wait_for(const struct waiting *waiting, uint64_t hash)
{
    unsigned bit = (unsigned)(hash >> 56);
    return (waiting->bits[bit / 64] >> (bit % 64)) & 1;
}

static void wait_for(struct waiting *waiting, uint64_t hash)
{
    unsigned bit = (unsigned)(hash >> 56);
    waiting->bits[bit / 64] |= 1ULL << (bit % 64);
    waiting->count++;
}

/* Puts in flight, in batch order. */
struct flights {
    struct flight *flights;
    size_t count;
};

/*
 * Walks the put and applies it if it may go now: unless an earlier one waits that may be of its
 * key, or that it could leave without room; if not, moves it to later, in order. @return 0, or
 * the put's error.
 */
static inline int go_on(sxe_map_t *map, const struct batch *batch, struct flight *flight,
                        struct waiting *waiting, struct flights *later)
{
    if (may_wait_for(waiting, flight->hash) || !walk(map, batch, flight) ||
        (waiting->count > 0 && !may_go_ahead(map, flight, waiting->count))) {
        wait_for(waiting, flight->hash);
        later->flights[later->count++] = *flight;
        return 0;
    }
    return apply(map, batch, flight);
}

/*
 * One pass over the puts in flight, in batch order: those that waited, then those started a pass
 * ago. @return 0, or the first failing put's error, with *failed its index.
 */
static int pass(sxe_map_t *map, const struct batch *batch, struct flights waited,
                struct flights ripe, struct flights *later, size_t *failed)
{
    struct waiting waiting = {{0}, 0};
    struct flights lists[2] = {waited, ripe};

    for (unsigned list = 0; list < 2; list++) {
        for (size_t i = 0; i < lists[list].count; i++) {
            struct flight *flight = &lists[list].flights[i];
            int rc = go_on(map, batch, flight, &waiting, later);
            if (rc < 0) {
                *failed = flight->put;
                return rc;
            }
        }
    }
    return 0;
}

/*
 * Over 80 lines' worth of state in one loop on purpose: the lists of flights and the batch's
 * progress change together, pass by pass.
 */
int sxe_map_put_many(sxe_map_t *map, size_t count, const void *const *keys, const size_t *key_sizes,
                     const void *const *values, const size_t *value_sizes, size_t *done)
{
    if (!SXE_CHECK(map != NULL && map->in_write && done != NULL &&
                   (count == 0 || (keys != NULL && values != NULL)) &&
                   (key_sizes != NULL || map->key_size != SXE_MAP_VARIABLE) &&
                   (value_sizes != NULL || map->value_size != SXE_MAP_VARIABLE))) {
        return -EINVAL;
    }
    struct batch batch = {keys, key_sizes, values, value_sizes};
    struct flight waiting[2][IN_FLIGHT], fresh[2][PUT_PASS];
    size_t waiting_sizes[2] = {0, 0}, fresh_sizes[2] = {0, 0}, next = 0, end = count, now = 0;
    size_t failed = 0;

    do {
        size_t room = IN_FLIGHT - waiting_sizes[now] - fresh_sizes[1 - now];
        size_t last = next + (room < PUT_PASS ? room : PUT_PASS);
        last = last < end ? last : end;
        fresh_sizes[now] = 0;
        next = start(map, &batch, next, last, fresh[now], &fresh_sizes[now]);
        if (next < last) {
            end = next; /* an invalid put ends the batch before it */
        }
        struct flights later = {waiting[1 - now], 0};
        int rc = pass(map, &batch, (struct flights){waiting[now], waiting_sizes[now]},
                      (struct flights){fresh[1 - now], fresh_sizes[1 - now]}, &later, &failed);
        if (rc < 0) {
            *done = failed;
            return rc;
        }
        waiting_sizes[1 - now] = later.count;
        waiting_sizes[now] = 0;
        fresh_sizes[1 - now] = 0;
        now = 1 - now;
    } while (waiting_sizes[now] > 0 || fresh_sizes[1 - now] > 0 || next < end);
    *done = end;
    return end == count ? 0 : -EINVAL;
}
