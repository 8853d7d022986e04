/*
 * The in-place log of SXE_MAP_IN_PLACE maps: a put that replaces a key's value keeps the old value
 * in a record at the log's tail, then writes the new value over it in the key's slot. A reader
 * whose snapshot is older than the slot's value follows the slot's undo field to the record, and
 * from record to record (prev) back to the version its snapshot sees. docs/map.md, "In place",
 * has the design and the measurements that led to it.
 *
 * Why a record stays valid while a reader needs it: a record of version t (the put that replaced
 * the value) is needed only by snapshots below t, and the log is reclaimed, oldest first, only up
 * to the oldest registered snapshot. Records are still checked by their position field, a
 * sequence lock of their own, so a reader that follows a stale undo field never trusts a record
 * that was reused.
 *
 * Why abort marks the undo field UNDONE: a reader copies a slot's value under a sequence check on
 * the pair (created, undo). A put then an abort of the same slot return created to its old value;
 * without the mark, undo would return to its old value too, and a reader that slept through both
 * could accept a torn copy. Every log position is used once per lap, so with the mark the pair
 * never repeats.
 *
 * Everything but sxe__map_log_follow() runs under the writer lock.
 */
#define SXE_LOG_MODULE sxe__map_log
#include "sxe/log.h"

#include <errno.h>
#include <string.h>

#include "map.h"
#include "map_log.h"

/*
 * Newest first, so a slot put in place twice (in transactions that aborted) ends with its oldest
 * value. The undo field keeps naming the record until created is back, and is then marked UNDONE
 * with release order: a reader that sees the mark sees created back too.
 */
void sxe__map_log_restore(sxe_map_t *map, uint64_t position)
{
    struct sxe__map_record *record = sxe__map_record(map, position);
    struct sxe__map_slot *slot = sxe__map_slot(map, record->slot);

    __atomic_store_n(&slot->created, SXE__MAP_WRITING, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(sxe__map_slot_value(map, slot), record + 1, map->value_size);
    __atomic_store_n(&slot->created, record->old_created, __ATOMIC_RELEASE);
    __atomic_store_n(sxe__map_slot_undo(slot), position | SXE__MAP_UNDONE, __ATOMIC_RELEASE);
}

void sxe__map_log_undo(sxe_map_t *map, uint64_t version)
{
    struct sxe__map_header *header = map->header;

    for (uint64_t position = header->log_tail; position-- > header->txn_log_tail;) {
        struct sxe__map_record *record = sxe__map_record(map, position);
        if (record->version != version) {
            continue; /* a writer that died before noting where it began leaves older ones here */
        }
        if (SXE_NEVER(record->position != position || record->slot >= map->slot_count)) {
            continue;
        }
        sxe__map_log_restore(map, position);
    }
}

/*
 * Versions never go down along the log (an aborted transaction's records carry the version the
 * next transaction reuses), so the first record a snapshot may still need is found by binary
 * search: log(n) lines read, none written.
 */
void sxe__map_log_reclaim(sxe_map_t *map, uint64_t oldest)
{
    struct sxe__map_header *header = map->header;
    uint64_t low = header->log_head, high = header->txn_log_tail;

    while (low < high) {
        uint64_t middle = low + (high - low) / 2;
        if (sxe__map_record(map, middle)->version <= oldest) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    header->reclaimed += low - header->log_head;
    __atomic_store_n(&header->log_head, low, __ATOMIC_RELAXED);
}

/*
 * Walks back from the record at position to the first whose kept value is at or below the
 * snapshot. Each record is read under its own sequence check, and must come from the slot: one
 * that does not was reused, and the reader's slot held something its snapshot cannot see.
 */
bool sxe__map_log_follow(const sxe_map_t *map, uint64_t index, uint64_t position, uint64_t snapshot,
                         void *value, size_t capacity)
{
    size_t size = capacity < map->value_size ? capacity : map->value_size;

    for (uint64_t hops = 0; hops < map->old_versions; hops++) {
        position = sxe__map_log_position(position);
        if (position == SXE__MAP_NO_RECORD) {
            return false;
        }
        const struct sxe__map_record *record = sxe__map_record(map, position);
        if (__atomic_load_n(&record->position, __ATOMIC_ACQUIRE) != position) {
            return false;
        }
        uint64_t old_created = __atomic_load_n(&record->old_created, __ATOMIC_RELAXED);
        uint64_t prev = __atomic_load_n(&record->prev, __ATOMIC_RELAXED);
        uint64_t slot = __atomic_load_n(&record->slot, __ATOMIC_RELAXED);
        if (old_created <= snapshot && size > 0) {
            memcpy(value, record + 1, size);
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&record->position, __ATOMIC_RELAXED) != position || slot != index) {
            return false;
        }
        if (old_created <= snapshot) {
            return true;
        }
        position = prev;
    }
    return false;
}

/*
 * Checks the chain of records behind an entry, back to the log's head. Each link (the undo field,
 * then each record's prev) belongs to a version: a plain link names the record its put wrote
 * (record version == that version); a link marked UNDONE names a record whose put was undone (its
 * kept value is that version's).
 */
static int validate_chain(sxe_map_t *map, uint64_t index, struct sxe__map_slot *slot)
{
    struct sxe__map_header *header = map->header;
    uint64_t newer = slot->created;

    for (uint64_t link = *sxe__map_slot_undo(slot), position;
         (position = sxe__map_log_position(link)) != SXE__MAP_NO_RECORD &&
         position >= header->log_head;
         link = sxe__map_record(map, position)->prev) {
        const struct sxe__map_record *record = sxe__map_record(map, position);
        bool undone = (link & SXE__MAP_UNDONE) != 0;
        if (position >= header->log_tail || record->position != position || record->slot != index ||
            record->old_created >= record->version ||
            (undone ? record->old_created != newer : record->version != newer)) {
            return sxe__map_invalid(
                map,
                "slot %llu's record at %llu (of %llu; slot %llu, versions %llu -> %llu%s) "
                "does not follow version %llu",
                (unsigned long long)index, (unsigned long long)position,
                (unsigned long long)header->log_tail, (unsigned long long)record->slot,
                (unsigned long long)record->old_created, (unsigned long long)record->version,
                undone ? ", undone" : "", (unsigned long long)newer);
        }
        newer = record->old_created;
    }
    return 0;
}

int sxe__map_log_validate(sxe_map_t *map)
{
    struct sxe__map_header *header = map->header;
    uint64_t version = 0;
    int rc;

    if (header->log_tail - header->log_head > map->old_versions ||
        header->txn_log_tail < header->log_head || header->txn_log_tail > header->log_tail) {
        return sxe__map_invalid(
            map,
            "log positions out of order: head %llu, transaction %llu, "
            "tail %llu, of %llu",
            (unsigned long long)header->log_head, (unsigned long long)header->txn_log_tail,
            (unsigned long long)header->log_tail, (unsigned long long)map->old_versions);
    }
    for (uint64_t position = header->log_head; position != header->log_tail; position++) {
        const struct sxe__map_record *record = sxe__map_record(map, position);
        if (record->position != position || record->version < version ||
            record->slot >= map->slot_count) {
            return sxe__map_invalid(
                map,
                "log record %llu (position %llu, version %llu, slot %llu) "
                "is out of place",
                (unsigned long long)position, (unsigned long long)record->position,
                (unsigned long long)record->version, (unsigned long long)record->slot);
        }
        version = record->version;
    }
    for (uint64_t index = 0; index < map->slot_count; index++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        if (sxe__map_is_entry(slot->tag) && (rc = validate_chain(map, index, slot)) < 0) {
            return rc;
        }
    }
    return 0;
}
