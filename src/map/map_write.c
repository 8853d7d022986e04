/*
 * The map's writer: transactions, puts and deletes, commit and abort, and reclamation of old
 * versions. Everything here runs under the writer lock, a robust process-shared mutex held from
 * sxe_map_write_begin() to sxe_map_commit() or sxe_map_abort(), so there is one writer at a time
 * in all processes.
 *
 * The open transaction has version t = published + 1. A put marks the current version of its key
 * deleted = t and writes the new one, created = t, into the first free slot of the key's probe;
 * a delete marks deleted = t. Readers' snapshots are at most published, so until commit stores
 * published = t, with one atomic store, no reader sees any of it. If the writer dies first, the
 * next one finds the lock's owner dead (EOWNERDEAD) and rolls every slot back to published
 * (map_recover.c).
 *
 * A replaced or deleted entry goes on the ring, oldest first. When a transaction begins, every
 * entry on the ring whose deleted version is at or below every reader's snapshot is invisible to
 * all of them, and its slot becomes a tombstone and its arena block is freed.
 */
#define SXE_LOG_MODULE sxe__map_log
#include "sxe/log.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "map.h"
#include "map_log.h"
#include "sys.h"

#define NONE UINT64_MAX

/* Reclaiming prefetches the slots of up to this many old versions ahead. */
#define RECLAIM_AHEAD 32

static void recover(sxe_map_t *map, const char *why)
{
    struct sxe__map_header *header = map->header;

    SXE_LOG_WARN("map %s: %s (process %u); rolling back to version %llu", header->name, why,
                 header->writer_pid, (unsigned long long)header->published);
    sxe__map_rollback(map);
    header->recoveries++;
    header->writing = 0;
    header->writer_pid = 0;
}

int sxe__map_lock(sxe_map_t *map)
{
    struct sxe__map_header *header = map->header;
    int rc = pthread_mutex_lock(&header->lock);

    if (rc == EOWNERDEAD) {
        recover(map, "a writer died holding the lock");
        pthread_mutex_consistent(&header->lock);
        return 0;
    }
    if (rc != 0) {
        SXE_LOG_ERROR("map %s: cannot take the writer lock: %s", header->name, sxe_strerror(-rc));
        return -rc;
    }
    if (header->writing) {
        recover(map, "the last writer left a transaction unfinished");
    }
    return 0;
}

void sxe__map_unlock(sxe_map_t *map)
{
    pthread_mutex_unlock(&map->header->lock);
}

void sxe__map_tombstone(sxe_map_t *map, uint64_t index)
{
    struct sxe__map_slot *slot = sxe__map_slot(map, index);

    __atomic_store_n(&slot->tag, SXE__MAP_TOMBSTONE, __ATOMIC_RELEASE);
    if (map->variable) {
        sxe__map_arena_free(map, *sxe__map_slot_block(slot));
    }
    map->header->tombstones++;
    sxe__map_trim(map, index);
}

static bool ring_is_full(const sxe_map_t *map)
{
    return map->header->ring_tail - map->header->ring_head >= map->old_versions;
}

/* The key of the entry in slot, which the writer trusts: it wrote it. */
static void key_of(const sxe_map_t *map, struct sxe__map_slot *slot, const unsigned char **key,
                   size_t *key_size)
{
    if (map->variable) {
        uint32_t sizes[2];
        const unsigned char *block = map->arena + *sxe__map_slot_block(slot);
        memcpy(sizes, block, sizeof(sizes));
        *key = block + SXE__MAP_BLOCK_HEAD;
        *key_size = sizes[0];
    } else {
        *key = sxe__map_slot_key(map, slot);
        *key_size = map->key_size;
    }
}

struct sxe__map_place sxe__map_find_for_write(const sxe_map_t *map, uint64_t hash, const void *key,
                                              size_t key_size)
{
    struct sxe__map_place place = {.current = NONE, .free = NONE};
    uint64_t tag = hash | 1;
    uint64_t index = sxe__map_home(map, hash | 1);

    for (uint64_t step = 0; step < map->slot_count; step++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        const unsigned char *slot_key;
        size_t slot_key_size;

        if (slot->tag == SXE__MAP_EMPTY || slot->tag == SXE__MAP_TOMBSTONE) {
            place.free = place.free == NONE ? index : place.free;
            if (slot->tag == SXE__MAP_EMPTY) {
                break;
            }
        } else if (slot->tag == tag && slot->deleted == 0) {
            key_of(map, slot, &slot_key, &slot_key_size);
            if (slot_key_size == key_size && sxe__map_key_equal(slot_key, key, key_size)) {
                place.current = index;
            }
        }
        if (place.current != NONE && (place.free != NONE || map->in_place)) {
            break; /* in place, a put that replaces needs no free slot */
        }
        index = sxe__map_next(map, index);
    }
    return place;
}

/* Copies key and value into a new arena block. @return its offset, or SXE__MAP_NO_BLOCK. */
static uint64_t write_block(sxe_map_t *map, const void *key, size_t key_size, const void *value,
                            size_t value_size)
{
    uint64_t offset = sxe__map_arena_alloc(map, SXE__MAP_BLOCK_HEAD + key_size + value_size);
    uint32_t sizes[2] = {(uint32_t)key_size, (uint32_t)value_size};

    if (offset != SXE__MAP_NO_BLOCK) {
        unsigned char *block = map->arena + offset;
        memcpy(block, sizes, sizeof(sizes));
        memcpy(block + SXE__MAP_BLOCK_HEAD, key, key_size);
        if (value_size > 0) {
            memcpy(block + SXE__MAP_BLOCK_HEAD + key_size, value, value_size);
        }
    }
    return offset;
}

/*
 * Writes a new entry into the free slot at index. created goes to WRITING before anything else
 * changes and to the transaction's version last, so a reader that looks meanwhile sees created
 * move and looks again (map_read.c).
 */
static void fill(sxe_map_t *map, uint64_t index, uint64_t tag, const void *key, size_t key_size,
                 const void *value, size_t value_size, uint64_t block)
{
    struct sxe__map_slot *slot = sxe__map_slot(map, index);
    bool was_tombstone = slot->tag == SXE__MAP_TOMBSTONE;

    if (map->in_place) {
        /* A reader that sees the slot being written finds no record of a past occupant. */
        __atomic_store_n(sxe__map_slot_undo(slot), SXE__MAP_NO_RECORD, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&slot->created, SXE__MAP_WRITING, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&slot->tag, tag, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->deleted, 0, __ATOMIC_RELAXED);
    if (map->variable) {
        __atomic_store_n(sxe__map_slot_block(slot), block, __ATOMIC_RELAXED);
    } else {
        memcpy(sxe__map_slot_key(map, slot), key, key_size);
        if (value_size > 0) {
            memcpy(sxe__map_slot_key(map, slot) + key_size, value, value_size);
        }
    }
    map->header->tombstones -= was_tombstone;
    __atomic_store_n(&slot->created, map->txn_version, __ATOMIC_RELEASE);
}

/* Notes a slot this transaction fills, for sxe_map_abort(). Past the journal's end, abort scans. */
static void journal(sxe_map_t *map, uint64_t index)
{
    struct sxe__map_header *header = map->header;

    if (header->journal_count < map->old_versions) {
        map->journal[header->journal_count] = (uint32_t)index;
    }
    header->journal_count++;
}

/*
 * Marks the current entry at index replaced or deleted by this transaction, and lists it on the
 * ring with the slot of the version that replaces it (or SXE__MAP_NO_SUCCESSOR).
 */
static void retire(sxe_map_t *map, uint64_t index, uint32_t successor)
{
    struct sxe__map_header *header = map->header;

    map->ring[header->ring_tail % map->old_versions] = (uint32_t)index;
    map->successors[header->ring_tail % map->old_versions] = successor;
    __atomic_store_n(&header->ring_tail, header->ring_tail + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&sxe__map_slot(map, index)->deleted, map->txn_version, __ATOMIC_RELAXED);
}

/*
 * Replaces the value of an entry this transaction made: no reader can see it yet (its created
 * is above every snapshot), so it changes in place.
 */
static int replace_own(sxe_map_t *map, uint64_t index, const void *key, size_t key_size,
                       const void *value, size_t value_size)
{
    struct sxe__map_slot *slot = sxe__map_slot(map, index);

    if (!map->variable) {
        if (value_size > 0) {
            memcpy(sxe__map_slot_key(map, slot) + key_size, value, value_size);
        }
        return 1;
    }
    uint64_t block = write_block(map, key, key_size, value, value_size);
    if (block == SXE__MAP_NO_BLOCK) {
        return sxe__map_full(map, "the arena is");
    }
    uint64_t old_block = *sxe__map_slot_block(slot);
    __atomic_store_n(sxe__map_slot_block(slot), block, __ATOMIC_RELAXED);
    sxe__map_arena_free(map, old_block);
    return 1;
}

/*
 * Moves a current version back to the slot its old version just left. A put that replaces a key
 * cannot reuse the key's slot, which readers may still read, so the new version goes to the first
 * free slot of the probe, often past the old one; left there, every update would move keys further
 * from home and lengthen every lookup (docs/map.md, "Aging, and moving home"). So when the old
 * version's slot index is reclaimed, the current entry in its successor's slot, if its probe passes
 * index, is copied back into index as a version of this transaction, and the successor's slot is
 * retired in turn. Readers see the same entry either way, and a pointer into the successor's slot
 * stays valid until that is reclaimed. The entry need not be the key the ring listed: any entry
 * whose probe passes index may live there. index cannot have been trimmed: the slot after it is on
 * that probe. Skipped while the ring is half full, so moves never take the room a transaction
 * needs.
 */
static void come_home(sxe_map_t *map, uint64_t index, uint32_t successor)
{
    struct sxe__map_header *header = map->header;

    if (successor >= map->slot_count ||
        header->ring_tail - header->ring_head >= map->old_versions / 2) {
        return;
    }
    struct sxe__map_slot *slot = sxe__map_slot(map, successor);
    uint64_t tag = slot->tag, home = sxe__map_home(map, tag);
    if (!sxe__map_is_entry(tag) || slot->deleted != 0 || slot->created > header->published ||
        (index + map->slot_count - home) % map->slot_count >=
            (successor + map->slot_count - home) % map->slot_count) {
        return;
    }
    const unsigned char *key;
    size_t key_size, value_size = map->value_size;
    uint64_t block = SXE__MAP_NO_BLOCK;
    key_of(map, slot, &key, &key_size);
    if (map->variable) {
        uint32_t sizes[2];
        memcpy(sizes, map->arena + *sxe__map_slot_block(slot), sizeof(sizes));
        value_size = sizes[1];
        if ((block = write_block(map, key, key_size, key + key_size, value_size)) ==
            SXE__MAP_NO_BLOCK) {
            return;
        }
    }
    journal(map, index);
    retire(map, successor, SXE__MAP_NO_SUCCESSOR);
    fill(map, index, tag, key, key_size, key + key_size, value_size, block);
    header->homecomings++;
}

static bool reader_is_dead(uint64_t owner)
{
    return sxe__sys.kill((pid_t)owner, 0) < 0 && errno == ESRCH;
}

/*
 * The oldest version any reader may still read: the least of published and every registered
 * snapshot. The fence pairs with the one in sxe_map_read_begin(). Readers whose process has died
 * are cleared on the way; only readers behind published are checked, since the others hold
 * nothing back.
 */
static uint64_t oldest_snapshot(sxe_map_t *map)
{
    struct sxe__map_header *header = map->header;
    uint64_t published = header->published;
    uint64_t oldest = published;
    uint64_t oldest_owner = 0;

    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (uint32_t i = 0; i < map->readers_max; i++) {
        struct sxe__map_reader_slot *reader = &map->readers[i];
        uint64_t owner = __atomic_load_n(&reader->owner, __ATOMIC_ACQUIRE);
        uint64_t snapshot = __atomic_load_n(&reader->snapshot, __ATOMIC_RELAXED);

        if (owner == 0 || snapshot >= published) {
            continue;
        }
        if (reader_is_dead(owner) &&
            __atomic_compare_exchange_n(&reader->owner, &owner, 0, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            header->dead_readers++;
            SXE_LOG_WARN("map %s: reader slot %u of process %llu, which died reading version "
                         "%llu, is free again",
                         header->name, i, (unsigned long long)owner, (unsigned long long)snapshot);
            continue;
        }
        if (snapshot < oldest) {
            oldest = snapshot;
            oldest_owner = owner;
        }
    }
    __atomic_store_n(&header->oldest_reader_pid, oldest_owner, __ATOMIC_RELAXED);
    __atomic_store_n(&header->oldest_reader_version, oldest_owner != 0 ? oldest : 0,
                     __ATOMIC_RELAXED);
    return oldest;
}

/*
 * Prefetches the slots of the ring's entries from *ahead on, up to RECLAIM_AHEAD past head, with
 * the slot after each (which trimming reads) and each successor's (which may move home), in one
 * tight loop so that their misses overlap.
 */
static void prefetch_ring(const sxe_map_t *map, uint64_t head, uint64_t *ahead)
{
    uint64_t tail = map->header->ring_tail;

    if (*ahead - head > RECLAIM_AHEAD / 2) {
        return;
    }
    for (; *ahead != tail && *ahead - head < RECLAIM_AHEAD; (*ahead)++) {
        const char *slot = (const char *)sxe__map_slot(map, map->ring[*ahead % map->old_versions]);
        uint32_t successor = map->successors[*ahead % map->old_versions];
        __builtin_prefetch(slot, 1, 0);
        __builtin_prefetch(slot + map->slot_size, 1, 0);
        if (successor < map->slot_count) {
            __builtin_prefetch(sxe__map_slot(map, successor), 1, 0);
        }
    }
}

/* Reclaims every old version that no reader can see any more, oldest first. */
static void reclaim(sxe_map_t *map)
{
    struct sxe__map_header *header = map->header;
    uint64_t oldest = oldest_snapshot(map);
    uint64_t reclaimed = 0, ahead = header->ring_head;

    while (header->ring_head != header->ring_tail) {
        prefetch_ring(map, header->ring_head, &ahead);
        uint32_t index = map->ring[header->ring_head % map->old_versions];
        uint32_t successor = map->successors[header->ring_head % map->old_versions];
        if (sxe__map_slot(map, index)->deleted > oldest) {
            break; /* and every later one, this transaction's moves included */
        }
        sxe__map_tombstone(map, index);
        __atomic_store_n(&header->ring_head, header->ring_head + 1, __ATOMIC_RELAXED);
        reclaimed++;
        come_home(map, index, successor);
    }
    header->reclaimed += reclaimed;
    if (map->in_place) {
        sxe__map_log_reclaim(map, oldest);
    }
    __atomic_store_n(&header->held_back,
                     header->txn_ring_tail - header->ring_head + header->log_tail -
                         header->log_head,
                     __ATOMIC_RELAXED);
    SXE_LOG_TRACE("map %s: reclaimed %llu old versions; %llu wait for readers at version %llu",
                  header->name, (unsigned long long)reclaimed,
                  (unsigned long long)header->held_back, (unsigned long long)oldest);
}

int sxe_map_write_begin(sxe_map_t *map)
{
    if (!SXE_CHECK(map != NULL && !map->in_write)) {
        return -EINVAL;
    }
    struct sxe__map_header *header = map->header;
    int rc = sxe__map_lock(map);
    if (rc < 0) {
        return rc;
    }
    header->txn_log_tail = header->log_tail; /* before the marker: recovery undoes from here */
    header->writing = 1;
    header->writer_pid = (uint32_t)sxe__map_process_id();
    map->in_write = true;
    map->txn_version = header->published + 1;
    header->txn_live = header->live;
    header->txn_ring_tail = header->ring_tail;
    header->journal_count = 0;
    reclaim(map); /* its moves home are part of the transaction: abort undoes them */
    return 0;
}

int sxe__map_put_at(sxe_map_t *map, struct sxe__map_place place, uint64_t hash, const void *key,
                    size_t key_size, const void *value, size_t value_size)
{
    struct sxe__map_header *header = map->header;

    if (place.current != NONE && sxe__map_slot(map, place.current)->created == map->txn_version) {
        return replace_own(map, place.current, key, key_size, value, value_size);
    }
    if (place.current != NONE && map->in_place) {
        return sxe__map_log_put(map, place.current, value);
    }
    if (place.current == NONE ? header->live >= header->capacity : ring_is_full(map)) {
        return sxe__map_full(map, place.current == NONE ? "capacity is" : "old_versions are");
    }
    if (SXE_NEVER(place.free == NONE)) {
        return sxe__map_full(map, "slots are");
    }
    uint64_t block = SXE__MAP_NO_BLOCK;
    if (map->variable &&
        (block = write_block(map, key, key_size, value, value_size)) == SXE__MAP_NO_BLOCK) {
        return sxe__map_full(map, "the arena is");
    }
    journal(map, place.free);
    if (place.current != NONE) {
        retire(map, place.current, (uint32_t)place.free);
    } else {
        header->live++;
    }
    fill(map, place.free, hash | 1, key, key_size, value, value_size, block);
    return place.current != NONE;
}

int sxe_map_put(sxe_map_t *map, const void *key, size_t key_size, const void *value,
                size_t value_size)
{
    if (!SXE_CHECK(map != NULL && map->in_write && key != NULL &&
                   (value != NULL || value_size == 0) &&
                   sxe__map_sizes_are_valid(map, key_size, value_size))) {
        return -EINVAL;
    }
    uint64_t hash = sxe__map_hash(map, key, key_size);
    return sxe__map_put_at(map, sxe__map_find_for_write(map, hash, key, key_size), hash, key,
                           key_size, value, value_size);
}

int sxe_map_delete(sxe_map_t *map, const void *key, size_t key_size)
{
    if (!SXE_CHECK(map != NULL && map->in_write && key != NULL &&
                   sxe__map_sizes_are_valid(
                       map, key_size, map->value_size == SXE_MAP_VARIABLE ? 0 : map->value_size))) {
        return -EINVAL;
    }
    uint64_t hash = sxe__map_hash(map, key, key_size);
    struct sxe__map_place place = sxe__map_find_for_write(map, hash, key, key_size);

    if (place.current == NONE) {
        return -ENOENT;
    }
    struct sxe__map_slot *slot = sxe__map_slot(map, place.current);
    uint64_t undo = map->in_place ? *sxe__map_slot_undo(slot) : SXE__MAP_NO_RECORD;
    if (slot->created == map->txn_version && sxe__map_log_position(undo) != SXE__MAP_NO_RECORD) {
        /* Put in place in this transaction, over a value readers saw: that value goes back into
         * the slot from the record that kept it, and is retired like any other. */
        if (ring_is_full(map)) {
            return sxe__map_full(map, "old_versions are");
        }
        sxe__map_log_restore(map, sxe__map_log_position(undo));
        retire(map, place.current, SXE__MAP_NO_SUCCESSOR);
    } else if (slot->created == map->txn_version) {
        sxe__map_tombstone(map, place.current); /* no reader ever saw it */
    } else if (ring_is_full(map)) {
        return sxe__map_full(map, "old_versions are");
    } else {
        retire(map, place.current, SXE__MAP_NO_SUCCESSOR);
    }
    map->header->live--;
    return 0;
}

/* Ends the transaction: clears the dirty marker and lets the next writer in. */
static void finish(sxe_map_t *map)
{
    map->header->writing = 0;
    map->header->writer_pid = 0;
    map->in_write = false;
    sxe__map_unlock(map);
}

/* Writes the region's dirty pages to its file. */
static int flush(sxe_map_t *map, void *memory, size_t size)
{
    if (sxe__sys.msync(memory, size, MS_SYNC) < 0) {
        int rc = -errno;
        SXE_LOG_ERROR("map %s: cannot write %zu bytes to its file: %s", map->header->name, size,
                      sxe_strerror(rc));
        return rc;
    }
    return 0;
}

int sxe_map_commit(sxe_map_t *map)
{
    if (!SXE_CHECK(map != NULL && map->in_write)) {
        return -EINVAL;
    }
    struct sxe__map_header *header = map->header;
    bool durable = map->from_file && (header->flags & SXE_MAP_DURABLE) != 0;
    int rc;

    /* With DURABLE, the transaction reaches the file before the version that makes it visible. */
    if (durable && (rc = flush(map, header, map->region_size)) < 0) {
        sxe_map_abort(map);
        return rc;
    }
    __atomic_store_n(&header->published_count, header->live, __ATOMIC_RELAXED);
    __atomic_store_n(&header->published, map->txn_version, __ATOMIC_SEQ_CST);
    header->commits++;
    if (durable) {
        /* The version is published in memory whatever happens here; a failure is logged. */
        (void)flush(map, header, sizeof(*header));
    }
    finish(map);
    return 0;
}

/* Undoes the open transaction from its journal and the ring, without a scan. */
static void undo(sxe_map_t *map)
{
    struct sxe__map_header *header = map->header;

    if (map->in_place) {
        sxe__map_log_undo(map, map->txn_version);
    }
    for (uint64_t i = header->journal_count; i-- > 0;) {
        uint64_t index = map->journal[i];
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        if (sxe__map_is_entry(slot->tag) && slot->created > header->published) {
            sxe__map_tombstone(map, index);
        }
    }
    for (uint64_t position = header->txn_ring_tail; position != header->ring_tail; position++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, map->ring[position % map->old_versions]);
        __atomic_store_n(&slot->deleted, 0, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&header->ring_tail, header->txn_ring_tail, __ATOMIC_RELAXED);
    header->live = header->txn_live;
    header->journal_count = 0;
}

void sxe_map_abort(sxe_map_t *map)
{
    if (!SXE_CHECK(map != NULL && map->in_write)) {
        return;
    }
    if (map->header->journal_count > map->old_versions) {
        sxe__map_rollback(map);
    } else {
        undo(map);
    }
    map->header->aborts++;
    finish(map);
}
