/*
 * sxe_map_put_many(): a batch of puts, in order, in passes of PUT_PASS, three passes in flight.
 * Each round starts a pass (checks and hashes its puts and prefetches the first lines of their
 * probes in one tight loop, so that their misses overlap), looks at the pass started one round
 * before (whose lines have arrived), and applies the pass started two rounds before. At 30 million
 * keys nearly every put misses the cache, and a put that waited for its own line would cost a whole
 * memory latency.
 *
 * In an SXE_MAP_IN_PLACE map a put that replaces stops at its key, mostly within the home slot's
 * first lines. When a pass is looked at, each put looks for its key's entry among the slots it
 * prefetched, comparing their tags all at once (find_entries()); a put whose entry is there is
 * written over with the inline put in place (map_log.h) when its turn comes, without a call or a
 * probe loop. A put whose window is full of other keys (about 7% at a load of 64%) prefetches the
 * next two windows then, and looks there when its turn comes, a round later; before, it walked on
 * with sxe__map_find_for_write() and waited for each line, which cost a third of a 1% update at 30
 * million keys (docs/benchmarks.md, "Session 20"). The rest (inserts, a deleted version
 * or another key of the same tag first, a key put earlier in this transaction, a probe further
 * still) go the whole probe (sxe__map_find_for_write(), sxe__map_put_at()).
 *
 * Puts that wait for their lines while later ones go first were tried (a pipeline like
 * sxe_map_find_many()'s): about 10% faster at 30 million keys, but a put that waited could then
 * fail after later ones were in, against the contract. Not kept.
 */
#define SXE_LOG_MODULE sxe__map_log
#include "sxe/log.h"

#include <errno.h>
#include <string.h>

#include "map.h"
#include "map_log.h"

/* Entries that find_in_window() did not find: for the whole probe, or (in place) past a window
 * that holds other keys and no free slot. */
#define NONE   UINT64_MAX
#define BEYOND (UINT64_MAX - 1)

/* Puts a pass, and the bytes of slots prefetched from each one's home: in place, a put that
 * replaces stops at its key, which is within the first four slots' lines but for about 7% at a
 * load of 64%, which look at twice as many more; otherwise it walks on to the first free slot. */
#define PUT_PASS           16
#define PUT_BYTES          512
#define PUT_BYTES_IN_PLACE 256

/* The batch: its arrays, as sxe_map_put_many() got them, and what the map's shape makes of each
 * put's probe, worked out once a call. */
struct batch {
    const void *const *keys;
    const size_t *key_sizes;
    const void *const *values;
    const size_t *value_sizes;
    uint64_t bytes;  /* prefetched from each put's home */
    uint64_t window; /* in place: the slots in those bytes, where a put looks for its key first */
    bool common;     /* in place: windows of 4 slots, 8-byte keys: inlined with constants */
};

static size_t key_size_of(const sxe_map_t *map, const struct batch *batch, size_t put)
{
    return batch->key_sizes != NULL ? batch->key_sizes[put] : map->key_size;
}

static size_t value_size_of(const sxe_map_t *map, const struct batch *batch, size_t put)
{
    return batch->value_sizes != NULL ? batch->value_sizes[put] : map->value_size;
}

static inline bool put_is_valid(const sxe_map_t *map, const struct batch *batch, size_t put)
{
    if (batch->key_sizes == NULL && batch->value_sizes == NULL) { /* the map's own sizes */
        return batch->keys[put] != NULL && (batch->values[put] != NULL || map->value_size == 0);
    }
    return batch->keys[put] != NULL &&
           (batch->values[put] != NULL || value_size_of(map, batch, put) == 0) &&
           sxe__map_sizes_are_valid(map, key_size_of(map, batch, put),
                                    value_size_of(map, batch, put));
}

/* A put whose pass has started: its arguments' check, its key's hash and its probe's home. */
struct started {
    uint64_t hash;
    uint64_t home;
    uint64_t entry; /* in place: its key's entry, found before the pass is applied, or NONE */
    bool valid;     /* an invalid put stops the batch when its turn comes */
};

/*
 * Starts a pass: checks and hashes its puts, prefetches the bytes of their probes' starts. Inlined
 * with constant bytes for the common shape, so that the prefetches unroll.
 */
static inline __attribute__((always_inline)) void start_puts(const sxe_map_t *map,
                                                             const struct batch *batch,
                                                             struct started *pass, size_t from,
                                                             size_t to, uint64_t bytes)
{
    for (size_t put = from; put < to; put++) {
        struct started *started = &pass[put - from];
        started->valid = put_is_valid(map, batch, put);
        if (started->valid) {
            started->hash = sxe__map_hash(map, batch->keys[put], key_size_of(map, batch, put));
            started->home = sxe__map_home(map, started->hash | 1);
            const char *line = (const char *)sxe__map_slot(map, started->home);
#pragma GCC unroll 8
            for (uint64_t at = 0; at < bytes; at += 64) {
                __builtin_prefetch(line + at, 1, 3);
            }
        }
    }
}

static void start_pass(const sxe_map_t *map, const struct batch *batch, struct started *pass,
                       size_t from, size_t to)
{
    if (batch->bytes == PUT_BYTES_IN_PLACE) {
        start_puts(map, batch, pass, from, to, PUT_BYTES_IN_PLACE);
    } else {
        start_puts(map, batch, pass, from, to, batch->bytes);
    }
}

/*
 * In place, the common put: one that replaces its key's current value, found within window slots
 * from from, and not yet replaced in this transaction. The window's tags are compared all at once,
 * without a call or a branch per slot (a probe's length varies from put to put, and its branches
 * would wait on the lines). Inlined, with constants for the common shape, so that it unrolls.
 * @return the entry's index; BEYOND when the window holds neither the key's tag nor a free slot
 * (the probe goes on past it); or NONE when the put needs sxe__map_find_for_write()'s whole probe:
 * its key not there, a deleted version or another key of the same tag first, the entry already put
 * in this transaction, or a window that would wrap around the table's end.
 */
static inline __attribute__((always_inline)) uint64_t
find_in_window(const sxe_map_t *map, uint64_t tag, uint64_t from, const void *key, uint64_t window,
               size_t key_size)
{
    unsigned match = 0;
    unsigned empty = 1u << window;

    if (from + window > map->slot_count) {
        return NONE;
    }
#pragma GCC unroll 8
    for (unsigned slot = 0; slot < window; slot++) {
        uint64_t slot_tag = sxe__map_slot(map, from + slot)->tag;
        match |= (unsigned)(slot_tag == tag) << slot;
        empty |= (unsigned)(slot_tag == SXE__MAP_EMPTY) << slot;
    }
    unsigned first = (unsigned)__builtin_ctz(match | 1u << window);
    if (first >= (unsigned)__builtin_ctz(empty)) {
        return match == 0 && empty == 1u << window ? BEYOND : NONE;
    }
    struct sxe__map_slot *slot = sxe__map_slot(map, from + first);
    if (slot->deleted != 0 || slot->created == map->txn_version ||
        !sxe__map_key_equal(sxe__map_slot_key(map, slot), key, key_size)) {
        return NONE;
    }
    return from + first;
}

/*
 * Finds, in place, the entries of a pass's puts a round before they are applied, and prefetches the
 * next two windows of each put whose window is full of other keys. Applying puts in place moves
 * no entry and changes no tag, and an insert only fills a free slot, so what is found stays right
 * while the puts before it are applied; one of them may have put the same key, which apply() sees
 * in the entry's created version and leaves to the whole probe.
 */
static void find_entries(const sxe_map_t *map, const struct batch *batch, struct started *pass,
                         size_t from, size_t to)
{
    uint64_t window = batch->window;

    for (size_t put = from; put < to; put++) {
        struct started *started = &pass[put - from];
        const void *key = batch->keys[put];
        uint64_t tag = started->hash | 1;

        if (!map->in_place || !started->valid) {
            started->entry = NONE;
            continue;
        }
        started->entry = batch->common
                             ? find_in_window(map, tag, started->home, key, 4, 8)
                             : find_in_window(map, tag, started->home, key, window, map->key_size);
        if (started->entry == BEYOND && started->home + 3 * window <= map->slot_count) {
            const char *line = (const char *)sxe__map_slot(map, started->home + window);
            for (uint64_t at = 0; at < 2 * window * map->slot_size; at += 64) {
                __builtin_prefetch(line + at, 1, 3);
            }
        }
    }
}

/* In place, the entry of a put whose window was full of other keys: in the next two windows, which
 * find_entries() prefetched a round ago, or NONE. */
static uint64_t find_beyond(const sxe_map_t *map, const struct batch *batch,
                            const struct started *started, const void *key)
{
    uint64_t window = batch->window;
    uint64_t tag = started->hash | 1;
    uint64_t entry = batch->common ? find_in_window(map, tag, started->home + 4, key, 8, 8)
                                   : find_in_window(map, tag, started->home + window, key,
                                                    2 * window, map->key_size);

    return entry == BEYOND ? NONE : entry;
}

/* Applies a started put: sxe_map_put() without its checks and its hash. */
static int apply(sxe_map_t *map, const struct batch *batch, size_t put,
                 const struct started *started)
{
    const void *key = batch->keys[put];
    size_t key_size = key_size_of(map, batch, put);
    uint64_t hash = started->hash;
    uint64_t entry =
        started->entry == BEYOND ? find_beyond(map, batch, started, key) : started->entry;

    if (entry != NONE && sxe__map_slot(map, entry)->created != map->txn_version) {
        return sxe__map_log_put(map, entry, batch->values[put]);
    }
    struct sxe__map_place place = sxe__map_find_for_write(map, hash, key, key_size);

    return sxe__map_put_at(map, place, hash, key, key_size, batch->values[put],
                           value_size_of(map, batch, put));
}

int sxe_map_put_many(sxe_map_t *map, size_t count, const void *const *keys, const size_t *key_sizes,
                     const void *const *values, const size_t *value_sizes, size_t *done)
{
    if (!SXE_CHECK(map != NULL && map->in_write && done != NULL &&
                   (count == 0 || (keys != NULL && values != NULL)) &&
                   (key_sizes != NULL || map->key_size != SXE_MAP_VARIABLE) &&
                   (value_sizes != NULL || map->value_size != SXE_MAP_VARIABLE))) {
        return -EINVAL;
    }
    uint64_t window = sxe__map_slots_in(map, map->in_place ? PUT_BYTES_IN_PLACE : PUT_BYTES);
    struct batch batch = {.keys = keys,
                          .key_sizes = key_sizes,
                          .values = values,
                          .value_sizes = value_sizes,
                          .bytes = window * map->slot_size,
                          .window = window,
                          .common = window == 4 && map->key_size == 8};
    struct started passes[3][PUT_PASS];
    size_t applied = 0, looked = 0, started = 0;

    /* Rounds: pass started, looked at (one round later), applied (two rounds later). */
    for (size_t pass = 0; applied < count; pass = pass == 2 ? 0 : pass + 1) {
        size_t end = count - started > PUT_PASS ? started + PUT_PASS : count;
        struct started *look = passes[pass == 0 ? 2 : pass - 1];
        struct started *apply_pass = passes[pass == 2 ? 0 : pass + 1];

        start_pass(map, &batch, passes[pass], started, end);
        find_entries(map, &batch, look, looked, started);
        for (size_t put = applied; put < looked; put++) {
            const struct started *ready = &apply_pass[put - applied];
            int rc = SXE_CHECK(ready->valid) ? apply(map, &batch, put, ready) : -EINVAL;
            if (rc < 0) {
                *done = put;
                return rc;
            }
        }
        applied = looked;
        looked = started;
        started = end;
    }
    *done = count;
    return 0;
}
