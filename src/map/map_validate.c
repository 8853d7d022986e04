/*
 * The map's self-check, for tests: every invariant the readers and the writer rely on, checked
 * from the slots up. It runs under the writer lock (or inside the caller's transaction), so
 * readers may keep reading meanwhile.
 */
#define SXE_LOG_MODULE sxe__map_log
#include "sxe/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"

/* What the writer's view holds, counted from the slots. */
struct census {
    uint64_t live;
    uint64_t old;
    uint64_t tombstones;
};

/* The key of the entry in slot. @return false if its arena block is out of bounds. */
static bool slot_key(const sxe_map_t *map, struct sxe__map_slot *slot, const unsigned char **key,
                     size_t *key_size, size_t *value_size)
{
    if (!map->variable) {
        *key = sxe__map_slot_key(map, slot);
        *key_size = map->key_size;
        *value_size = map->value_size;
        return true;
    }
    uint64_t offset = *sxe__map_slot_block(slot);
    uint32_t sizes[2];
    if (sxe__map_arena_block_bytes(map, offset) == 0) {
        return false;
    }
    memcpy(sizes, map->arena + offset, sizeof(sizes));
    *key = map->arena + offset + SXE__MAP_BLOCK_HEAD;
    *key_size = sizes[0];
    *value_size = sizes[1];
    return true;
}

static bool visible_at(const struct sxe__map_slot *slot, uint64_t version)
{
    return slot->created <= version && (slot->deleted == 0 || slot->deleted > version);
}

/*
 * Walks the probe of the entry at index from its home to the first empty slot: the entry must be
 * on it, and its key must have at most one current version and at most one visible at published.
 */
static int validate_probe(const sxe_map_t *map, uint64_t index, const unsigned char *key,
                          size_t key_size, uint64_t hash)
{
    struct sxe__map_slot *entry = sxe__map_slot(map, index);
    uint64_t published = map->header->published;
    uint64_t home = sxe__map_home(map, hash | 1);
    uint64_t probe = home;
    unsigned visible = 0, current = 0;
    bool reached = false;

    for (uint64_t step = 0; step < map->slot_count; step++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, probe);
        const unsigned char *other_key;
        size_t other_key_size, other_value_size;

        if (slot->tag == SXE__MAP_EMPTY) {
            break;
        }
        reached |= probe == index;
        if (slot->tag == entry->tag &&
            slot_key(map, slot, &other_key, &other_key_size, &other_value_size) &&
            other_key_size == key_size && memcmp(other_key, key, key_size) == 0) {
            visible += visible_at(slot, published);
            current += slot->deleted == 0;
        }
        probe = sxe__map_next(map, probe);
    }
    if (!reached) {
        return sxe__map_invalid(map, "slot %llu cannot be reached from its home slot %llu",
                                (unsigned long long)index, (unsigned long long)home);
    }
    if (visible_at(entry, published) && visible != 1) {
        return sxe__map_invalid(map, "slot %llu's key has %u versions visible at version %llu",
                                (unsigned long long)index, visible, (unsigned long long)published);
    }
    if (entry->deleted == 0 && current != 1) {
        return sxe__map_invalid(map, "slot %llu's key has %u current versions",
                                (unsigned long long)index, current);
    }
    return 0;
}

/* Checks one entry: its key, sizes, tag and versions, then its probe. */
static int validate_entry(const sxe_map_t *map, uint64_t index, uint64_t view)
{
    struct sxe__map_slot *slot = sxe__map_slot(map, index);
    const unsigned char *key;
    size_t key_size, value_size;

    if (!slot_key(map, slot, &key, &key_size, &value_size)) {
        return sxe__map_invalid(map, "slot %llu's block at %llu is out of the arena",
                                (unsigned long long)index,
                                (unsigned long long)*sxe__map_slot_block(slot));
    }
    if (key_size == 0 || (map->key_size != SXE_MAP_VARIABLE && key_size != map->key_size) ||
        (map->value_size != SXE_MAP_VARIABLE && value_size != map->value_size)) {
        return sxe__map_invalid(map, "slot %llu holds a key of %zu bytes and a value of %zu",
                                (unsigned long long)index, key_size, value_size);
    }
    uint64_t hash = sxe__map_hash(map, key, key_size);
    if ((hash | 1) != slot->tag) {
        return sxe__map_invalid(map, "slot %llu's tag %016llx is not its key's hash",
                                (unsigned long long)index, (unsigned long long)slot->tag);
    }
    if (slot->created == 0 || slot->created > view ||
        (slot->deleted != 0 && (slot->deleted <= slot->created || slot->deleted > view))) {
        return sxe__map_invalid(map,
                                "slot %llu was created at version %llu and deleted at %llu; "
                                "the map is at %llu",
                                (unsigned long long)index, (unsigned long long)slot->created,
                                (unsigned long long)slot->deleted, (unsigned long long)view);
    }
    return validate_probe(map, index, key, key_size, hash);
}

static int validate_slots(const sxe_map_t *map, uint64_t view, struct census *census)
{
    for (uint64_t index = 0; index < map->slot_count; index++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        int rc;

        if (slot->tag == SXE__MAP_EMPTY) {
            if (slot->created != 0 || slot->deleted != 0) {
                return sxe__map_invalid(
                    map, "empty slot %llu has versions %llu and %llu", (unsigned long long)index,
                    (unsigned long long)slot->created, (unsigned long long)slot->deleted);
            }
        } else if (slot->tag == SXE__MAP_TOMBSTONE) {
            census->tombstones++;
            if (sxe__map_slot(map, sxe__map_next(map, index))->tag == SXE__MAP_EMPTY) {
                return sxe__map_invalid(map, "tombstone at slot %llu sits before an empty slot",
                                        (unsigned long long)index);
            }
        } else if (!sxe__map_is_entry(slot->tag)) {
            return sxe__map_invalid(map, "slot %llu has tag %016llx", (unsigned long long)index,
                                    (unsigned long long)slot->tag);
        } else if ((rc = validate_entry(map, index, view)) < 0) {
            return rc;
        } else if (slot->deleted == 0) {
            census->live++;
        } else {
            census->old++;
        }
    }
    return 0;
}

static int validate_counts(const sxe_map_t *map, const struct census *census)
{
    const struct sxe__map_header *header = map->header;
    uint64_t pending = header->ring_tail - header->ring_head;

    if (census->live != header->live || census->live > header->capacity) {
        return sxe__map_invalid(map, "slots hold %llu current entries; live is %llu, capacity %llu",
                                (unsigned long long)census->live, (unsigned long long)header->live,
                                (unsigned long long)header->capacity);
    }
    if (census->old != pending || pending > header->old_versions) {
        return sxe__map_invalid(map, "slots hold %llu old versions; the ring %llu, of %llu",
                                (unsigned long long)census->old, (unsigned long long)pending,
                                (unsigned long long)header->old_versions);
    }
    if (census->tombstones != header->tombstones) {
        return sxe__map_invalid(map, "slots hold %llu tombstones, not %llu",
                                (unsigned long long)census->tombstones,
                                (unsigned long long)header->tombstones);
    }
    if (!map->in_write && header->published_count != header->live) {
        return sxe__map_invalid(map, "%llu entries published, %llu live",
                                (unsigned long long)header->published_count,
                                (unsigned long long)header->live);
    }
    return 0;
}

/* One bit per slot, for the ring's and the journal's checks. */
static uint64_t *slot_bits(const sxe_map_t *map)
{
    return calloc(map->slot_count / 64 + 1, sizeof(uint64_t));
}

static bool test_and_set(uint64_t *bits, uint64_t index)
{
    bool was = (bits[index / 64] >> (index % 64)) & 1;
    bits[index / 64] |= 1ULL << (index % 64);
    return was;
}

/* The ring lists distinct old versions, oldest first; this transaction's carry its version. */
static int validate_ring(const sxe_map_t *map, uint64_t *seen)
{
    const struct sxe__map_header *header = map->header;
    uint64_t previous = 0;

    for (uint64_t position = header->ring_head; position != header->ring_tail; position++) {
        uint64_t index = map->ring[position % map->old_versions];
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        bool this_transaction = map->in_write && position >= header->txn_ring_tail;

        if (index >= map->slot_count || !sxe__map_is_entry(slot->tag) || slot->deleted == 0 ||
            test_and_set(seen, index)) {
            return sxe__map_invalid(map,
                                    "ring position %llu lists slot %llu: not an old version, "
                                    "or listed twice",
                                    (unsigned long long)position, (unsigned long long)index);
        }
        if (slot->deleted < previous || (this_transaction ? slot->deleted != map->txn_version
                                                          : slot->deleted > header->published)) {
            return sxe__map_invalid(map,
                                    "ring position %llu: slot %llu deleted at version %llu "
                                    "out of order",
                                    (unsigned long long)position, (unsigned long long)index,
                                    (unsigned long long)slot->deleted);
        }
        previous = slot->deleted;
    }
    return 0;
}

/*
 * Every entry the open transaction made is in its journal (or, put in place, in its records of the
 * log), unless the journal overflowed.
 */
static int validate_journal(const sxe_map_t *map, uint64_t *seen)
{
    const struct sxe__map_header *header = map->header;

    if (!map->in_write || header->journal_count > map->old_versions) {
        return 0;
    }
    for (uint64_t i = 0; i < header->journal_count; i++) {
        if (map->journal[i] >= map->slot_count) {
            return sxe__map_invalid(map, "journal entry %llu is slot %u", (unsigned long long)i,
                                    map->journal[i]);
        }
        test_and_set(seen, map->journal[i]);
    }
    /* Values this transaction put in place are listed by its records instead. */
    for (uint64_t position = header->txn_log_tail; map->in_place && position != header->log_tail;
         position++) {
        uint64_t index = sxe__map_record(map, position)->slot;
        if (index < map->slot_count) {
            test_and_set(seen, index);
        }
    }
    for (uint64_t index = 0; index < map->slot_count; index++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        if (sxe__map_is_entry(slot->tag) && slot->created == map->txn_version &&
            !test_and_set(seen, index)) {
            return sxe__map_invalid(map,
                                    "slot %llu was made by this transaction but is not in "
                                    "its journal",
                                    (unsigned long long)index);
        }
    }
    return 0;
}

static int validate_readers(const sxe_map_t *map)
{
    for (uint32_t i = 0; i < map->readers_max; i++) {
        const struct sxe__map_reader_slot *reader = &map->readers[i];
        if (__atomic_load_n(&reader->owner, __ATOMIC_ACQUIRE) != 0 &&
            __atomic_load_n(&reader->snapshot, __ATOMIC_RELAXED) > map->header->published) {
            return sxe__map_invalid(map, "reader %u reads version %llu, above the published %llu",
                                    i, (unsigned long long)reader->snapshot,
                                    (unsigned long long)map->header->published);
        }
    }
    return 0;
}

static int validate_locked(sxe_map_t *map)
{
    uint64_t view = map->in_write ? map->txn_version : map->header->published;
    struct census census = {0};
    int rc;

    if (map->header->magic != SXE__MAP_MAGIC) {
        return sxe__map_invalid(map, "bad magic %016llx", (unsigned long long)map->header->magic);
    }
    if ((rc = validate_slots(map, view, &census)) < 0 || (rc = validate_counts(map, &census)) < 0) {
        return rc;
    }
    uint64_t *seen = slot_bits(map);
    if (seen == NULL) {
        return -ENOMEM;
    }
    rc = validate_ring(map, seen);
    if (rc == 0) {
        memset(seen, 0, (map->slot_count / 64 + 1) * sizeof(uint64_t));
        rc = validate_journal(map, seen);
    }
    free(seen);
    if (rc == 0) {
        rc = validate_readers(map);
    }
    if (rc == 0 && map->in_place) {
        rc = sxe__map_log_validate(map);
    }
    return rc < 0 ? rc : sxe__map_arena_validate(map);
}

int sxe__map_validate(sxe_map_t *map)
{
    bool lock = !map->in_write;
    int rc;

    if (lock && (rc = sxe__map_lock(map)) < 0) {
        return rc;
    }
    rc = validate_locked(map);
    if (lock) {
        sxe__map_unlock(map);
    }
    return rc;
}
