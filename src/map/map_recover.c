/*
 * Rolling a map back to its published version after its writer died at an unknown instant (or an
 * abort whose journal overflowed). Nothing the dead writer left is trusted but the slots' own
 * version fields (and, for values put in place, the log's records of the unpublished version, from
 * where the transaction began): each slot is put back as it was at the published version, then the
 * counts, the ring of old versions and the arena's free lists are rebuilt from the slots.
 *
 * Readers keep reading meanwhile, and safely: the rollback only removes entries created above
 * published, which no snapshot sees, and clears deleted fields above published, which every
 * snapshot already ignores.
 */
#define SXE_LOG_MODULE sxe__map_log
#include "sxe/log.h"

#include <stdlib.h>

#include "map.h"

/* Puts one slot back as it was at version published. */
static void undo_slot(sxe_map_t *map, uint64_t index, uint64_t published)
{
    struct sxe__map_slot *slot = sxe__map_slot(map, index);

    if (slot->tag == SXE__MAP_EMPTY) {
        /* An empty slot the writer had begun to fill, or a trim cut short: empty it whole. */
        __atomic_store_n(&slot->created, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->deleted, 0, __ATOMIC_RELAXED);
    } else if (slot->created > published) {
        /* Made by the unpublished transaction (or half made: WRITING). */
        __atomic_store_n(&slot->tag, SXE__MAP_TOMBSTONE, __ATOMIC_RELEASE);
    } else if (sxe__map_is_entry(slot->tag) && slot->deleted > published) {
        __atomic_store_n(&slot->deleted, 0, __ATOMIC_RELAXED);
    }
}

static int by_deleted_version(const void *a, const void *b, void *context)
{
    const sxe_map_t *map = context;
    uint32_t first = *(const uint32_t *)a;
    uint32_t second = *(const uint32_t *)b;
    uint64_t first_deleted = sxe__map_slot(map, first)->deleted;
    uint64_t second_deleted = sxe__map_slot(map, second)->deleted;

    if (first_deleted != second_deleted) {
        return first_deleted < second_deleted ? -1 : 1;
    }
    return first < second ? -1 : first > second;
}

/* Counts live entries and tombstones, and lists old versions on the ring, oldest first. */
static void recount(sxe_map_t *map)
{
    struct sxe__map_header *header = map->header;
    uint64_t live = 0;
    uint64_t tombstones = 0;
    uint64_t old = 0;

    for (uint64_t index = 0; index < map->slot_count; index++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        if (slot->tag == SXE__MAP_TOMBSTONE) {
            tombstones++;
        } else if (!sxe__map_is_entry(slot->tag)) {
            continue;
        } else if (slot->deleted == 0) {
            live++;
        } else if (!SXE_NEVER(old == map->old_versions)) {
            map->ring[old++] = (uint32_t)index;
        } else {
            SXE_LOG_ERROR("map %s: more old versions than the ring holds; slot %llu leaks",
                          header->name, (unsigned long long)index);
        }
    }
    qsort_r(map->ring, old, sizeof(*map->ring), by_deleted_version, map);
    for (uint64_t position = 0; position < old; position++) {
        map->successors[position] = SXE__MAP_NO_SUCCESSOR; /* no old version goes home after this */
    }
    header->live = live;
    header->txn_live = live;
    header->tombstones = tombstones;
    header->ring_head = 0;
    header->ring_tail = old;
    header->txn_ring_tail = old;
    header->journal_count = 0;
    __atomic_store_n(&header->published_count, live, __ATOMIC_RELAXED);
}

void sxe__map_rollback(sxe_map_t *map)
{
    uint64_t published = map->header->published;

    /* Values put in place go back first, from the log; the scan then sees them as published. */
    if (map->in_place) {
        sxe__map_log_undo(map, published + 1);
        map->header->txn_log_tail = map->header->log_tail;
    }
    for (uint64_t index = 0; index < map->slot_count; index++) {
        undo_slot(map, index, published);
    }
    /* New tombstones may sit just before empty slots: trim them, as the writer always does. */
    for (uint64_t index = 0; index < map->slot_count; index++) {
        if (sxe__map_slot(map, index)->tag == SXE__MAP_EMPTY) {
            sxe__map_trim(map, sxe__map_prev(map, index));
        }
    }
    recount(map);
    sxe__map_arena_rebuild(map);
}
