/*
 * sxe_map_put_many(): a batch of puts, in order, in passes of PUT_PASS. Each pass checks and hashes
 * the next PUT_PASS puts and prefetches the first lines of their probes in one tight loop, so that
 * their misses and page walks overlap, then applies the puts of the pass before, whose lines have
 * arrived meanwhile. At 30 million keys nearly every put misses the cache and the TLB, and a put
 * that waited for its own line would cost a whole memory latency.
 *
 * In an SXE_MAP_IN_PLACE map a put that replaces stops at its key, mostly within the home slot's
 * first lines. Before a pass is applied, each of its puts looks for its key's entry among the
 * slots it prefetched, comparing their tags all at once (find_entries()); a put whose entry is
 * there is written over with the inline put in place (map_log.h), without a call or a probe loop,
 * and the rest go the whole probe (sxe__map_find_for_write(), sxe__map_put_at()). At 30 million
 * keys this took 8-12% off a 1% update (docs/benchmarks.md). Looking one pass further ahead, to
 * prefetch the lines of probes that go past their window, did not help.
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

#define NONE UINT64_MAX

/* Puts a pass, and the bytes of slots prefetched from each one's home: in place, a put that
 * replaces stops at its key, which is within the first four slots' lines but for a few percent;
 * otherwise it walks on to the first free slot. */
#define PUT_PASS           16
#define PUT_BYTES          512
#define PUT_BYTES_IN_PLACE 256

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

/* Starts a pass: checks and hashes its puts, prefetches their probes' starts. */
static void start_pass(const sxe_map_t *map, const struct batch *batch, struct started *pass,
                       size_t from, size_t to)
{
    uint64_t span = sxe__map_slots_in(map, map->in_place ? PUT_BYTES_IN_PLACE : PUT_BYTES);

    for (size_t put = from; put < to; put++) {
        struct started *started = &pass[put - from];
        started->valid = put_is_valid(map, batch, put);
        if (started->valid) {
            started->hash = sxe__map_hash(map, batch->keys[put], key_size_of(map, batch, put));
            started->home = sxe__map_home(map, started->hash | 1);
            sxe__map_prefetch(map, started->home, span, true);
        }
    }
}

/*
 * In place, the common put: one that replaces its key's current value, found within the slots
 * prefetched, and not yet replaced in this transaction. The window's tags are compared all at once,
 * without a call or a branch per slot (a probe's length varies from put to put, and its branches
 * would wait on the lines). @return the entry's index, or NONE when the put needs
 * sxe__map_find_for_write()'s whole probe: its key past the window or not there, a deleted
 * version or another key of the same tag first, the entry already put in this transaction, or a
 * window that would wrap around the table's end.
 */
static uint64_t find_in_window(const sxe_map_t *map, const struct started *started, const void *key,
                               uint64_t window)
{
    uint64_t tag = started->hash | 1;
    unsigned match = 0;
    unsigned empty = 1u << window;

    if (started->home + window > map->slot_count) {
        return NONE;
    }
    for (unsigned slot = 0; slot < window; slot++) {
        uint64_t slot_tag = sxe__map_slot(map, started->home + slot)->tag;
        match |= (unsigned)(slot_tag == tag) << slot;
        empty |= (unsigned)(slot_tag == SXE__MAP_EMPTY) << slot;
    }
    unsigned first = (unsigned)__builtin_ctz(match | 1u << window);
    if (first >= (unsigned)__builtin_ctz(empty)) {
        return NONE;
    }
    struct sxe__map_slot *slot = sxe__map_slot(map, started->home + first);
    if (slot->deleted != 0 || slot->created == map->txn_version ||
        !sxe__map_key_equal(sxe__map_slot_key(map, slot), key, map->key_size)) {
        return NONE;
    }
    return started->home + first;
}

/*
 * Finds, in place, the entries of a pass's puts before any of them is applied. Applying puts in
 * place moves no entry and changes no tag, and an insert only fills a free slot, so what is found
 * stays right while the puts before it are applied; one of them may have put the same key, which
 * apply() sees in the entry's created version and leaves to the whole probe.
 */
static void find_entries(const sxe_map_t *map, const struct batch *batch, struct started *pass,
                         size_t from, size_t to)
{
    uint64_t window = sxe__map_slots_in(map, PUT_BYTES_IN_PLACE); /* slots are lines: 4 at most */

    for (size_t put = from; put < to; put++) {
        struct started *started = &pass[put - from];
        started->entry = map->in_place && started->valid
                             ? find_in_window(map, started, batch->keys[put], window)
                             : NONE;
    }
}

/* Applies a started put: sxe_map_put() without its checks and its hash. */
static int apply(sxe_map_t *map, const struct batch *batch, size_t put,
                 const struct started *started)
{
    const void *key = batch->keys[put];
    size_t key_size = key_size_of(map, batch, put);
    uint64_t hash = started->hash;

    if (started->entry != NONE && sxe__map_slot(map, started->entry)->created != map->txn_version) {
        return sxe__map_log_put(map, started->entry, batch->values[put]);
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
    struct batch batch = {keys, key_sizes, values, value_sizes};
    struct started passes[2][PUT_PASS];
    size_t applied = 0;

    for (size_t started = 0, pass = 0; applied < count; pass ^= 1) {
        size_t end = count - started > PUT_PASS ? started + PUT_PASS : count;
        start_pass(map, &batch, passes[pass], started, end);
        find_entries(map, &batch, passes[pass ^ 1], applied, started);
        for (size_t put = applied; put < started; put++) {
            const struct started *ready = &passes[pass ^ 1][put - applied];
            int rc = SXE_CHECK(ready->valid) ? apply(map, &batch, put, ready) : -EINVAL;
            if (rc < 0) {
                *done = put;
                return rc;
            }
        }
        applied = started;
        started = end;
    }
    *done = count;
    return 0;
}
