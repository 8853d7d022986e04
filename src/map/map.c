/*
 * Maps: the region's layout, making and attaching it, and stats. Readers are in map_read.c, the
 * writer in map_write.c, the arena in map_arena.c, the self-check in map_validate.c, and the
 * reports every file makes (the log module, a broken invariant, a refused put) in map_report.c;
 * docs/map.md explains the design.
 *
 * The region holds offsets only, so each process maps it wherever it likes. Each process keeps a
 * small handle (struct sxe_map) with the addresses of the region's parts in its own mapping, so a
 * lookup computes no offsets.
 */
#define SXE_LOG_MODULE sxe__map_log
#include "sxe/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "map.h"
#include "base/base.h"
#include "sys.h"

SXE__REGION_HEADER(struct sxe__map_header);

#define MAP_VERSION 3u /* 2: the ring's successors; 3: SXE_MAP_IN_PLACE's log */
#define MAP_ALIGN   64u

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older glibc headers lack it */
#endif

#define DEFAULT_LOAD_PERCENT 80u
#define DEFAULT_READERS      256u

/* Ring and journal entries are 32-bit slot indices. */
#define SLOTS_MAX (UINT32_MAX - 1ULL)

static uint64_t align_up(uint64_t value)
{
    return (value + MAP_ALIGN - 1) & ~(uint64_t)(MAP_ALIGN - 1);
}

static bool is_variable(uint32_t key_size, uint32_t value_size)
{
    return key_size == SXE_MAP_VARIABLE || value_size == SXE_MAP_VARIABLE;
}

/* A fixed-size slot: the header fields (with the undo field in place), the key and the value, in
 * one or more whole cache lines (or half of one), so a lookup reads as few lines as it can. A
 * variable-size slot: 32 bytes. */
static uint32_t slot_size_for(uint32_t entry_offset, uint32_t key_size, uint32_t value_size)
{
    uint64_t bytes =
        entry_offset + (is_variable(key_size, value_size) ? 8 : (uint64_t)key_size + value_size);

    if (bytes <= 32) {
        return 32;
    }
    return (uint32_t)align_up(bytes);
}

/*
 * Computes the shape of the map that options describe into a zeroed header: its sizes and the
 * offsets of its parts. @return false if the options are invalid.
 */
static bool shape_of(const struct sxe_map_options *options, struct sxe__map_header *shape)
{
    if (options == NULL || options->capacity < 1 || options->key_size < 1 ||
        (options->load_percent != 0 &&
         (options->load_percent < 50 || options->load_percent > 95)) ||
        options->readers_max > SXE_MAP_READERS_MAX ||
        (options->flags & ~(SXE_MAP_SHARED | SXE_MAP_DURABLE | SXE_MAP_IN_PLACE)) != 0 ||
        options->capacity > SLOTS_MAX) {
        return false;
    }
    bool variable = is_variable(options->key_size, options->value_size);
    bool in_place = (options->flags & SXE_MAP_IN_PLACE) != 0;
    if (in_place && (variable || (options->flags & SXE_MAP_DURABLE) != 0)) {
        return false; /* values change size; a machine crash could lose a log page (docs/map.md) */
    }
    if (variable
            ? options->arena_bytes < SXE__MAP_GRANULE || options->arena_bytes > SXE__MAP_ARENA_MAX
            : (uint64_t)options->key_size + options->value_size > SXE_MAP_INLINE_MAX) {
        return false;
    }
    memset(shape, 0, sizeof(*shape));
    shape->capacity = options->capacity;
    shape->old_versions = options->old_versions != 0
                              ? options->old_versions
                              : (options->capacity / 4 ? options->capacity / 4 : 1);
    shape->load_percent = options->load_percent != 0 ? options->load_percent : DEFAULT_LOAD_PERCENT;
    uint64_t entries = shape->capacity + shape->old_versions;
    if (shape->old_versions > SLOTS_MAX || entries > SLOTS_MAX) {
        return false;
    }
    /* At most 95% full: at least one slot is always free, so every probe ends. */
    shape->slot_count = (entries * 100 + shape->load_percent - 1) / shape->load_percent;
    if (shape->slot_count > SLOTS_MAX) {
        return false;
    }
    shape->key_size = options->key_size;
    shape->value_size = options->value_size;
    shape->flags = options->flags & SXE_MAP_IN_PLACE;
    shape->entry_offset = (uint32_t)(sizeof(struct sxe__map_slot) + (in_place ? 8 : 0));
    shape->slot_size = slot_size_for(shape->entry_offset, options->key_size, options->value_size);
    shape->record_size =
        in_place ? (uint32_t)((sizeof(struct sxe__map_record) + options->value_size + 7) & ~7u) : 0;
    shape->arena_bytes = variable ? options->arena_bytes & ~(uint64_t)(SXE__MAP_GRANULE - 1) : 0;
    shape->readers_max = options->readers_max != 0 ? options->readers_max : DEFAULT_READERS;
    shape->seed = options->seed;

    uint64_t bitmap_words = (shape->arena_bytes / SXE__MAP_GRANULE + 63) / 64;
    shape->readers_offset = align_up(sizeof(struct sxe__map_header));
    shape->slots_offset =
        align_up(shape->readers_offset + shape->readers_max * sizeof(struct sxe__map_reader_slot));
    shape->ring_offset = align_up(shape->slots_offset + shape->slot_count * shape->slot_size);
    shape->successors_offset =
        align_up(shape->ring_offset + shape->old_versions * sizeof(uint32_t));
    shape->journal_offset =
        align_up(shape->successors_offset + shape->old_versions * sizeof(uint32_t));
    shape->bitmap_offset = align_up(shape->journal_offset + shape->old_versions * sizeof(uint32_t));
    shape->arena_offset = align_up(shape->bitmap_offset + bitmap_words * sizeof(uint64_t));
    shape->log_offset = align_up(shape->arena_offset + shape->arena_bytes);
    shape->region_size = align_up(shape->log_offset + shape->old_versions * shape->record_size);
    return true;
}

/* The options a header was made from, to recompute and check its shape. */
static struct sxe_map_options options_of(const struct sxe__map_header *header)
{
    return (struct sxe_map_options){.capacity = header->capacity,
                                    .old_versions = header->old_versions,
                                    .key_size = header->key_size,
                                    .value_size = header->value_size,
                                    .arena_bytes = header->arena_bytes,
                                    .load_percent = header->load_percent,
                                    .readers_max = header->readers_max,
                                    .seed = header->seed,
                                    .flags = header->flags & SXE_MAP_IN_PLACE};
}

/* Whether two shapes are the same map: every size, offset and the seed. */
static bool same_shape(const struct sxe__map_header *a, const struct sxe__map_header *b)
{
    return a->capacity == b->capacity && a->old_versions == b->old_versions &&
           a->slot_count == b->slot_count && a->slot_size == b->slot_size &&
           a->key_size == b->key_size && a->value_size == b->value_size &&
           a->arena_bytes == b->arena_bytes && a->readers_max == b->readers_max &&
           a->seed == b->seed && a->slots_offset == b->slots_offset &&
           a->arena_offset == b->arena_offset && a->region_size == b->region_size &&
           a->log_offset == b->log_offset && a->record_size == b->record_size &&
           a->entry_offset == b->entry_offset && ((a->flags ^ b->flags) & SXE_MAP_IN_PLACE) == 0;
}

/*
 * A robust lock, so a writer that dies holding it hands the next one EOWNERDEAD, and
 * process-shared, since the region may be. glibc's pthread_mutex_init always returns 0.
 */
static void init_lock(pthread_mutex_t *lock)
{
    pthread_mutexattr_t attributes;

    pthread_mutexattr_init(&attributes);
    pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
    pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(lock, &attributes);
    pthread_mutexattr_destroy(&attributes);
}

/* Lays an empty map out in zeroed memory of shape->region_size bytes. */
static void make(void *memory, const struct sxe__map_header *shape, const char *name,
                 unsigned flags)
{
    struct sxe__map_header *header = memory;

    *header = *shape;
    header->version = MAP_VERSION;
    header->header_size = sizeof(*header);
    header->flags = flags; /* shape's SXE_MAP_IN_PLACE is among them */
    snprintf(header->name, sizeof(header->name), "%s", name != NULL ? name : "");
    init_lock(&header->lock);
    for (unsigned class = 0; class < SXE__MAP_CLASSES; class ++) {
        header->free_heads[class] = SXE__MAP_NO_BLOCK;
    }

    /* The magic goes last, with release order: an attacher that sees it sees a whole map. */
    sxe__region_publish(header, SXE__MAP_MAGIC);
    SXE_LOG_DEBUG("map %s: %llu entries + %llu old versions in %llu slots of %u bytes, arena %llu "
                  "bytes, %u readers, %llu bytes in all",
                  header->name, (unsigned long long)header->capacity,
                  (unsigned long long)header->old_versions, (unsigned long long)header->slot_count,
                  header->slot_size, (unsigned long long)header->arena_bytes, header->readers_max,
                  (unsigned long long)header->region_size);
}

/* Makes this process's handle on a region. @return it, or NULL if malloc fails. */
static sxe_map_t *handle_of(void *memory, size_t size, bool from_file)
{
    struct sxe__map_header *header = memory;
    sxe_map_t *map = calloc(1, sizeof(*map));
    unsigned char *base = memory;

    if (map == NULL) {
        return NULL;
    }
    map->header = header;
    map->readers = (struct sxe__map_reader_slot *)(base + header->readers_offset);
    map->slots = base + header->slots_offset;
    map->ring = (uint32_t *)(base + header->ring_offset);
    map->successors = (uint32_t *)(base + header->successors_offset);
    map->journal = (uint32_t *)(base + header->journal_offset);
    map->bitmap = (uint64_t *)(base + header->bitmap_offset);
    map->arena = base + header->arena_offset;
    map->log = base + header->log_offset;
    map->slot_count = header->slot_count;
    map->seed = header->seed;
    map->arena_bytes = header->arena_bytes;
    map->old_versions = header->old_versions;
    map->slot_size = header->slot_size;
    map->key_size = header->key_size;
    map->value_size = header->value_size;
    map->readers_max = header->readers_max;
    map->record_size = header->record_size;
    map->entry_offset = header->entry_offset;
    map->in_place = (header->flags & SXE_MAP_IN_PLACE) != 0;
    map->variable = is_variable(header->key_size, header->value_size);
    map->from_file = from_file;
    map->region_size = size;
    return map;
}

/*
 * Faults in an SXE_MAP_IN_PLACE map's log now. Its first lap would otherwise take a page fault
 * every 64 records, while the writer puts (a third of a 1% update's time at 30 million keys), and
 * shared memory that cannot be had then is a SIGBUS in the writer instead of -ENOMEM here. Where
 * the kernel has no MADV_POPULATE_WRITE (before 5.14), the log's pages are touched instead.
 */
static int fault_in_log(void *memory, const struct sxe__map_header *shape)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t from = shape->log_offset & ~(page - 1);
    unsigned char *log = (unsigned char *)memory + from;
    size_t size = shape->region_size - from;

    if (shape->old_versions == 0 || (shape->flags & SXE_MAP_IN_PLACE) == 0) {
        return 0;
    }
    if (sxe__sys.madvise(log, size, MADV_POPULATE_WRITE) == 0) {
        return 0;
    }
    if (errno != EINVAL) {
        int rc = -errno;
        SXE_LOG_ERROR("map %s: cannot fault in the %zu bytes of its log: %s", shape->name, size,
                      sxe_strerror(rc));
        return rc;
    }
    for (size_t at = 0; at < size; at += page) {
        log[at] = 0; /* still zero: nothing was written there yet */
    }
    return 0;
}

int sxe_map_create(sxe_map_t **map, const struct sxe_map_options *options)
{
    struct sxe__map_header shape;
    int rc;

    if (!SXE_CHECK(map != NULL && shape_of(options, &shape))) {
        return -EINVAL;
    }
    void *memory = sxe__region_map_anonymous("map", options->name, shape.region_size,
                                             (options->flags & SXE_MAP_SHARED) != 0, &rc);
    if (memory == NULL) {
        return rc;
    }
    if ((options->flags & SXE_MAP_SHARED) != 0) {
        sxe__region_back_huge(memory, shape.region_size);
    }
    if ((rc = fault_in_log(memory, &shape)) < 0) {
        sxe__sys.munmap(memory, shape.region_size);
        return rc;
    }
    make(memory, &shape, options->name, options->flags);
    *map = handle_of(memory, shape.region_size, false);
    if (*map == NULL) {
        SXE_LOG_ERROR("map %s: no memory for its handle", shape.name);
        sxe__sys.munmap(memory, shape.region_size);
        return -ENOMEM;
    }
    return 0;
}

/* Ends this handle's use of the region: aborts its transaction, frees the handle. */
static void release(sxe_map_t *map)
{
    void *memory = map->header;
    size_t size = map->region_size;

    if (map->in_write) {
        sxe_map_abort(map);
    }
    free(map);
    sxe__sys.munmap(memory, size);
}

void sxe_map_destroy(sxe_map_t *map)
{
    if (map != NULL) {
        release(map);
    }
}

/* Checks that the mapped file is one of ours, whole, and of the shape the caller expects. */
static int check_attached(const struct sxe__map_header *header, const char *path, size_t file_size,
                          const struct sxe_map_options *options)
{
    struct sxe__map_header own, expected;
    int rc = sxe__region_check(header, SXE__MAP_MAGIC, MAP_VERSION, sizeof(*header), "map", path);

    if (rc < 0) {
        return rc;
    }
    struct sxe_map_options recorded = options_of(header);
    if (!shape_of(&recorded, &own) || !same_shape(&own, header) || file_size != own.region_size) {
        SXE_LOG_ERROR("map file %s is damaged: its shape does not add up to its %zu bytes", path,
                      file_size);
        return -EPROTO;
    }
    if (options != NULL && (!shape_of(options, &expected) || !same_shape(&expected, header))) {
        SXE_LOG_ERROR("map file %s holds %llu entries of %u + %u bytes (%llu old versions, arena "
                      "%llu, %u readers); the options differ",
                      path, (unsigned long long)header->capacity, header->key_size,
                      header->value_size, (unsigned long long)header->old_versions,
                      (unsigned long long)header->arena_bytes, header->readers_max);
        return -EMSGSIZE;
    }
    return 0;
}

/*
 * The caller promises no other process has the map: a writer lock or reader slots held when the
 * machine went down are dropped, and the next writer rolls back to the published version.
 */
static void reset_after_crash(sxe_map_t *map)
{
    init_lock(&map->header->lock);
    for (uint32_t i = 0; i < map->readers_max; i++) {
        __atomic_store_n(&map->readers[i].owner, 0, __ATOMIC_RELAXED);
    }
    map->header->writing = 1;
    SXE_LOG_INFO("map %s: lock and readers reset; the next writer returns to version %llu",
                 map->header->name, (unsigned long long)map->header->published);
}

int sxe_map_attach(sxe_map_t **map, const char *path, const struct sxe_map_options *options,
                   unsigned flags)
{
    bool create = (flags & SXE_MAP_CREATE) != 0;
    struct sxe__map_header shape;
    void *memory;
    size_t size;
    int rc;

    if (!SXE_CHECK(map != NULL && path != NULL &&
                   (flags & ~(SXE_MAP_CREATE | SXE_MAP_RECOVER)) == 0 &&
                   (options == NULL ? !create : shape_of(options, &shape)))) {
        return -EINVAL;
    }
    rc = sxe__region_map_file("map", path, create, create ? shape.region_size : 0,
                              sizeof(struct sxe__map_header), &memory, &size);
    if (rc < 0) {
        return rc;
    }
    if (create) {
        make(memory, &shape, options->name, options->flags);
    } else if ((rc = check_attached(memory, path, size, options)) < 0) {
        sxe__sys.munmap(memory, size);
        return rc;
    }
    *map = handle_of(memory, size, true);
    if (*map == NULL) {
        SXE_LOG_ERROR("map file %s: no memory for its handle", path);
        sxe__sys.munmap(memory, size);
        return -ENOMEM;
    }
    if ((flags & SXE_MAP_RECOVER) != 0) {
        reset_after_crash(*map);
    }
    return 0;
}

void sxe_map_detach(sxe_map_t *map)
{
    if (map != NULL) {
        release(map);
    }
}

uint64_t sxe_map_version(const sxe_map_t *map)
{
    return __atomic_load_n(&map->header->published, __ATOMIC_ACQUIRE);
}

#define LOAD(field) __atomic_load_n(&header->field, __ATOMIC_RELAXED)

void sxe_map_stats(const sxe_map_t *map, struct sxe_map_stats *stats)
{
    const struct sxe__map_header *header = map->header;
    uint64_t readers = 0;

    for (uint32_t i = 0; i < map->readers_max; i++) {
        readers += __atomic_load_n(&map->readers[i].owner, __ATOMIC_RELAXED) != 0;
    }
    *stats = (struct sxe_map_stats){
        .version = LOAD(published),
        .count = LOAD(published_count),
        .capacity = header->capacity,
        .slots = header->slot_count,
        .old_versions = header->old_versions,
        .pending = LOAD(ring_tail) - LOAD(ring_head) + LOAD(log_tail) - LOAD(log_head),
        .held_back = LOAD(held_back),
        .tombstones = LOAD(tombstones),
        .arena_used = LOAD(arena_used),
        .arena_bytes = header->arena_bytes,
        .readers = readers,
        .readers_max = header->readers_max,
        .oldest_reader_pid = LOAD(oldest_reader_pid),
        .oldest_reader_version = LOAD(oldest_reader_version),
        .commits = LOAD(commits),
        .aborts = LOAD(aborts),
        .recoveries = LOAD(recoveries),
        .reclaimed = LOAD(reclaimed),
        .dead_readers = LOAD(dead_readers),
        .full = LOAD(full),
        .readers_full = LOAD(readers_full),
        .moved_home = LOAD(homecomings),
    };
}
