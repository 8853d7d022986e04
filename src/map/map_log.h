/*
 * A put in place (map_in_place.c explains the log), inline for sxe_map_put_many()'s loop, where a
 * call and a division per put would cost as much as the put's own memory traffic. Only the writer,
 * under its lock, calls these.
 */
#ifndef SXE_MAP_LOG_H
#define SXE_MAP_LOG_H

#include "map.h"

/* The position an undo field names, without its UNDONE mark. */
static inline uint64_t sxe__map_log_position(uint64_t undo)
{
    return undo == SXE__MAP_NO_RECORD ? undo : undo & ~SXE__MAP_UNDONE;
}

static inline unsigned char *sxe__map_slot_value(const sxe_map_t *map, struct sxe__map_slot *slot)
{
    return sxe__map_slot_key(map, slot) + map->key_size;
}

/* The record at the log's tail: the handle remembers where it last wrote, to skip a division. */
static inline struct sxe__map_record *sxe__map_log_tail_record(sxe_map_t *map, uint64_t position)
{
    uint64_t index = map->log_cursor == position && position != 0 ? map->log_cursor_index
                                                                  : position % map->old_versions;

    map->log_cursor = position + 1;
    map->log_cursor_index = index + 1 == map->old_versions ? 0 : index + 1;
    return (struct sxe__map_record *)(map->log + index * map->record_size);
}

/*
 * Keeps the value at index in the record at the log's tail. The record's position goes to
 * NO_RECORD first and to its own position last, so a reader that looks at the record's last lap
 * meanwhile sees the position move. A prev that reclamation passed is dropped: no snapshot
 * follows it (its version is at or below every snapshot).
 */
static inline uint64_t sxe__map_log_keep(sxe_map_t *map, uint64_t index, struct sxe__map_slot *slot)
{
    struct sxe__map_header *header = map->header;
    uint64_t position = header->log_tail;
    struct sxe__map_record *record = sxe__map_log_tail_record(map, position);
    uint64_t undo = *sxe__map_slot_undo(slot);
    uint64_t prev = sxe__map_log_position(undo);

    __atomic_store_n(&record->position, SXE__MAP_NO_RECORD, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    record->version = map->txn_version;
    record->old_created = slot->created;
    record->prev =
        prev != SXE__MAP_NO_RECORD && prev >= header->log_head ? undo : SXE__MAP_NO_RECORD;
    record->slot = index;
    sxe__map_copy(record + 1, sxe__map_slot_value(map, slot), map->value_size);
    __atomic_store_n(&record->position, position, __ATOMIC_RELEASE);
    __atomic_store_n(&header->log_tail, position + 1, __ATOMIC_RELAXED);
    return position;
}

/*
 * Keeps the current value of the entry at index in a record and writes value over it, as a version
 * of the open transaction. @return 1, or -ENOBUFS when the log is full. The undo field names the
 * new record before created marks the slot as being written, so a reader that sees the mark (or the
 * new version) finds the record; the value changes only after the mark.
 */
static inline int sxe__map_log_put(sxe_map_t *map, uint64_t index, const void *value)
{
    struct sxe__map_header *header = map->header;
    struct sxe__map_slot *slot = sxe__map_slot(map, index);

    if (header->log_tail - header->log_head >= map->old_versions) {
        return sxe__map_full(map, "old_versions are");
    }
    uint64_t position = sxe__map_log_keep(map, index, slot);
    __atomic_store_n(sxe__map_slot_undo(slot), position, __ATOMIC_RELEASE);
    __atomic_store_n(&slot->created, SXE__MAP_WRITING, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    sxe__map_copy(sxe__map_slot_value(map, slot), value, map->value_size);
    __atomic_store_n(&slot->created, map->txn_version, __ATOMIC_RELEASE);
    return 1;
}

#endif
