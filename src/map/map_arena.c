/*
 * The map's arena: blocks for variable-size keys and values, with offsets, never pointers.
 *
 * A block holds a uint32_t key size, a uint32_t value size, the key and the value. Its size is a
 * class: a multiple of 16 bytes up to 4 KiB, a power of two beyond. Each class has a free list,
 * linked through the first 8 bytes of its free blocks; the arena above arena_bump has never been
 * handed out. An allocation takes a block of its class from the free list, else from the top,
 * else splits a block of a larger class. Freed blocks are not merged: a workload whose sizes
 * drift can fragment the arena until a rebuild, which merges every free run.
 *
 * Only the writer allocates and frees, under its lock, so nothing here is atomic. A writer that
 * dies mid-update leaves the lists in any state; recovery rebuilds them from the entries' blocks,
 * using a bitmap of 16-byte granules kept in the region for that purpose.
 */
#define SXE_LOG_MODULE sxe__map_log
#include "sxe/log.h"

#include <string.h>

#include "map.h"

#define FIRST_BIG_SHIFT 13 /* the first power-of-two class: 8 KiB */

static unsigned class_of(uint64_t block_bytes)
{
    if (block_bytes <= SXE__MAP_SMALL_MAX) {
        return (unsigned)(block_bytes / SXE__MAP_GRANULE - 1);
    }
    return SXE__MAP_SMALL_MAX / SXE__MAP_GRANULE + (unsigned)(63 - __builtin_clzll(block_bytes)) -
           FIRST_BIG_SHIFT;
}

static uint64_t class_bytes(unsigned class)
{
    unsigned small_classes = SXE__MAP_SMALL_MAX / SXE__MAP_GRANULE;

    if (class < small_classes) {
        return (uint64_t)(class + 1) * SXE__MAP_GRANULE;
    }
    return 1ULL << (class - small_classes + FIRST_BIG_SHIFT);
}

static uint64_t next_free(const sxe_map_t *map, uint64_t offset)
{
    uint64_t next;

    memcpy(&next, map->arena + offset, sizeof(next));
    return next;
}

static void push(sxe_map_t *map, uint64_t offset, uint64_t bytes)
{
    uint64_t *head = &map->header->free_heads[class_of(bytes)];

    memcpy(map->arena + offset, head, sizeof(*head));
    *head = offset;
}

static uint64_t pop(sxe_map_t *map, unsigned class)
{
    uint64_t *head = &map->header->free_heads[class];
    uint64_t offset = *head;

    *head = next_free(map, offset);
    return offset;
}

/* Frees a run of bytes (a multiple of 16) as blocks of classes: the largest that fit first. */
static void push_run(sxe_map_t *map, uint64_t offset, uint64_t bytes)
{
    while (bytes > 0) {
        uint64_t piece =
            bytes <= SXE__MAP_SMALL_MAX ? bytes : 1ULL << (63 - __builtin_clzll(bytes));
        push(map, offset, piece);
        offset += piece;
        bytes -= piece;
    }
}

uint64_t sxe__map_arena_block_bytes(const sxe_map_t *map, uint64_t offset)
{
    uint32_t sizes[2];

    if (map->arena_bytes < SXE__MAP_BLOCK_HEAD || offset > map->arena_bytes - SXE__MAP_BLOCK_HEAD ||
        offset % SXE__MAP_GRANULE != 0) {
        return 0;
    }
    memcpy(sizes, map->arena + offset, sizeof(sizes));
    uint64_t bytes = sxe__map_block_size(SXE__MAP_BLOCK_HEAD + (uint64_t)sizes[0] + sizes[1]);
    return bytes <= map->arena_bytes - offset ? bytes : 0;
}

uint64_t sxe__map_arena_alloc(sxe_map_t *map, uint64_t size)
{
    struct sxe__map_header *header = map->header;

    if (size > map->arena_bytes) {
        return SXE__MAP_NO_BLOCK;
    }
    uint64_t bytes = sxe__map_block_size(size);
    unsigned class = class_of(bytes);
    uint64_t offset = SXE__MAP_NO_BLOCK;

    if (header->free_heads[class] != SXE__MAP_NO_BLOCK) {
        offset = pop(map, class);
    } else if (bytes <= map->arena_bytes - header->arena_bump) {
        offset = header->arena_bump;
        header->arena_bump += bytes;
    } else {
        for (unsigned larger = class + 1; larger < SXE__MAP_CLASSES; larger++) {
            if (header->free_heads[larger] != SXE__MAP_NO_BLOCK) {
                offset = pop(map, larger);
                push_run(map, offset + bytes, class_bytes(larger) - bytes);
                break;
            }
        }
    }
    if (offset != SXE__MAP_NO_BLOCK) {
        __atomic_store_n(&header->arena_used, header->arena_used + bytes, __ATOMIC_RELAXED);
    }
    return offset;
}

void sxe__map_arena_free(sxe_map_t *map, uint64_t offset)
{
    uint64_t bytes = sxe__map_arena_block_bytes(map, offset);

    if (SXE_NEVER(bytes == 0)) {
        SXE_LOG_ERROR("map %s: no block at arena offset %llu to free", map->header->name,
                      (unsigned long long)offset);
        return;
    }
    push(map, offset, bytes);
    __atomic_store_n(&map->header->arena_used, map->header->arena_used - bytes, __ATOMIC_RELAXED);
}

void sxe__map_arena_reset(sxe_map_t *map)
{
    struct sxe__map_header *header = map->header;

    for (unsigned class = 0; class < SXE__MAP_CLASSES; class ++) {
        header->free_heads[class] = SXE__MAP_NO_BLOCK;
    }
    header->arena_bump = 0;
    __atomic_store_n(&header->arena_used, 0, __ATOMIC_RELAXED);
}

static uint64_t bitmap_words(const sxe_map_t *map)
{
    return (map->arena_bytes / SXE__MAP_GRANULE + 63) / 64;
}

static bool granule_is_set(const sxe_map_t *map, uint64_t granule)
{
    return (map->bitmap[granule / 64] >> (granule % 64)) & 1;
}

/* Marks the granules of a block. @return false, marking nothing, if any was marked already. */
static bool mark(sxe_map_t *map, uint64_t offset, uint64_t bytes)
{
    uint64_t first = offset / SXE__MAP_GRANULE;
    uint64_t end = (offset + bytes) / SXE__MAP_GRANULE;

    for (uint64_t granule = first; granule < end; granule++) {
        if (granule_is_set(map, granule)) {
            return false;
        }
    }
    for (uint64_t granule = first; granule < end; granule++) {
        map->bitmap[granule / 64] |= 1ULL << (granule % 64);
    }
    return true;
}

/* The arena block of the entry in slot, or 0 if the slot holds no entry. */
static uint64_t entry_block_bytes(sxe_map_t *map, struct sxe__map_slot *slot, uint64_t *offset)
{
    if (!sxe__map_is_entry(slot->tag)) {
        return 0;
    }
    *offset = *sxe__map_slot_block(slot);
    return sxe__map_arena_block_bytes(map, *offset);
}

void sxe__map_arena_rebuild(sxe_map_t *map)
{
    struct sxe__map_header *header = map->header;
    uint64_t top = 0;
    uint64_t used = 0;
    uint64_t offset = 0;

    sxe__map_arena_reset(map);
    if (!map->variable) {
        return;
    }
    memset(map->bitmap, 0, bitmap_words(map) * sizeof(uint64_t));
    for (uint64_t index = 0; index < map->slot_count; index++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        uint64_t bytes = entry_block_bytes(map, slot, &offset);
        if (!sxe__map_is_entry(slot->tag)) {
            continue;
        }
        if (bytes == 0 || !mark(map, offset, bytes)) {
            SXE_LOG_ERROR("map %s: slot %llu's arena block at %llu is out of bounds or shared",
                          header->name, (unsigned long long)index, (unsigned long long)offset);
            continue;
        }
        used += bytes;
        top = offset + bytes > top ? offset + bytes : top;
    }
    for (uint64_t granule = 0; granule < top / SXE__MAP_GRANULE;) {
        uint64_t start = granule;
        while (granule < top / SXE__MAP_GRANULE && !granule_is_set(map, granule)) {
            granule++;
        }
        if (granule > start) {
            push_run(map, start * SXE__MAP_GRANULE, (granule - start) * SXE__MAP_GRANULE);
        }
        while (granule < top / SXE__MAP_GRANULE && granule_is_set(map, granule)) {
            granule++;
        }
    }
    header->arena_bump = top;
    __atomic_store_n(&header->arena_used, used, __ATOMIC_RELAXED);
}

/* Checks the entries' blocks: in bounds, below the top, apart, and adding up to arena_used. */
static int validate_blocks(sxe_map_t *map)
{
    struct sxe__map_header *header = map->header;
    uint64_t used = 0;
    uint64_t offset = 0;

    for (uint64_t index = 0; index < map->slot_count; index++) {
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        uint64_t bytes = entry_block_bytes(map, slot, &offset);
        if (!sxe__map_is_entry(slot->tag)) {
            continue;
        }
        if (bytes == 0 || offset + bytes > header->arena_bump) {
            return sxe__map_invalid(map,
                                    "slot %llu's block at %llu is outside the arena's %llu "
                                    "bytes in use",
                                    (unsigned long long)index, (unsigned long long)offset,
                                    (unsigned long long)header->arena_bump);
        }
        if (!mark(map, offset, bytes)) {
            return sxe__map_invalid(map, "slot %llu's block at %llu overlaps another block",
                                    (unsigned long long)index, (unsigned long long)offset);
        }
        used += bytes;
    }
    if (used != header->arena_used) {
        return sxe__map_invalid(map, "entries' blocks hold %llu bytes but arena_used is %llu",
                                (unsigned long long)used, (unsigned long long)header->arena_used);
    }
    return 0;
}

/* Checks the free lists: blocks of their class, in bounds, apart from each other and entries. */
static int validate_free_lists(sxe_map_t *map)
{
    struct sxe__map_header *header = map->header;
    uint64_t limit = map->arena_bytes / SXE__MAP_GRANULE;

    for (unsigned class = 0; class < SXE__MAP_CLASSES; class ++) {
        uint64_t bytes = class_bytes(class);
        uint64_t steps = 0;
        for (uint64_t offset = header->free_heads[class]; offset != SXE__MAP_NO_BLOCK;
             offset = next_free(map, offset)) {
            if (offset % SXE__MAP_GRANULE != 0 || offset > header->arena_bump ||
                bytes > header->arena_bump - offset || ++steps > limit) {
                return sxe__map_invalid(map, "free list of %llu-byte blocks holds offset %llu",
                                        (unsigned long long)bytes, (unsigned long long)offset);
            }
            if (!mark(map, offset, bytes)) {
                return sxe__map_invalid(map, "free %llu-byte block at %llu overlaps another",
                                        (unsigned long long)bytes, (unsigned long long)offset);
            }
        }
    }
    return 0;
}

int sxe__map_arena_validate(sxe_map_t *map)
{
    struct sxe__map_header *header = map->header;
    int rc;

    if (header->arena_bump > map->arena_bytes || header->arena_used > header->arena_bump) {
        return sxe__map_invalid(map, "arena: %llu bytes used, %llu handed out, of %llu",
                                (unsigned long long)header->arena_used,
                                (unsigned long long)header->arena_bump,
                                (unsigned long long)map->arena_bytes);
    }
    if (!map->variable) {
        return 0;
    }
    memset(map->bitmap, 0, bitmap_words(map) * sizeof(uint64_t));
    if ((rc = validate_blocks(map)) < 0) {
        return rc;
    }
    return validate_free_lists(map);
}
