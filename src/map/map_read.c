/*
 * Map readers: snapshots and lookups. Nothing here takes a lock or writes anything but the
 * reader's own slot in the reader table.
 *
 * A snapshot is a version number s. An entry is visible to it when created <= s and (deleted ==
 * 0 or deleted > s). The writer never changes an entry that some registered snapshot sees, except
 * its deleted field, from 0 to a version above every snapshot (or back, on abort), so a visible
 * entry's key and value stay in place for as long as the reader holds its snapshot.
 *
 * A slot can, though, be rewritten while a reader looks at it: a tombstone reused for a new
 * entry, or an entry reclaimed. The writer sets created to SXE__MAP_WRITING before it changes
 * anything else in the slot and stores the new version last, so a reader reads created, then the
 * rest, then created again (a seqlock), and trusts what it read only if created did not move.
 * A slot whose created is above the snapshot is skipped without a look at the rest.
 */
#define SXE_LOG_MODULE sxe__map_log
#include "sxe/log.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "map.h"
#include "sys.h"

/* sxe_map_find_many() starts FIND_GROUP lookups a pass. Each prefetches FIND_BYTES of slots from
 * its home (at least one slot), and FIND_FURTHER times as many each time its probe runs past them.
 */
#define FIND_GROUP   16
#define FIND_BYTES   128
#define FIND_FURTHER 2

/*
 * The process id, cached: a reader's owner field holds it, and getpid() on every snapshot would
 * cost a system call. A fork handler refreshes it in the child.
 */
static pid_t process_id;
static pthread_once_t process_id_once = PTHREAD_ONCE_INIT;

static void refresh_process_id(void)
{
    process_id = sxe__sys.getpid();
}

static void init_process_id(void)
{
    refresh_process_id();
    pthread_atfork(NULL, NULL, refresh_process_id);
}

pid_t sxe__map_process_id(void)
{
    pthread_once(&process_id_once, init_process_id);
    return process_id;
}

/* Where each thread starts looking for a free reader slot: where it last found one. */
static __thread uint32_t reader_hint;
static __thread bool reader_hint_set;

/* Claims a free reader slot. @return its index, or readers_max if every slot is held. */
static uint32_t claim_reader_slot(sxe_map_t *map, uint64_t owner)
{
    if (!reader_hint_set) {
        /* Threads start apart, so they do not all race for the first slots. */
        reader_hint = (uint32_t)(((uintptr_t)&reader_hint * 0x9e3779b97f4a7c15ULL) >> 40);
        reader_hint_set = true;
    }
    for (uint32_t tried = 0; tried < map->readers_max; tried++) {
        uint32_t index = (reader_hint + tried) % map->readers_max;
        uint64_t *slot_owner = &map->readers[index].owner;
        uint64_t free_owner = 0;

        if (__atomic_load_n(slot_owner, __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(slot_owner, &free_owner, owner, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED)) {
            reader_hint = index;
            return index;
        }
    }
    return map->readers_max;
}

/*
 * The snapshot is registered Dekker-style against the writer, which publishes a version, then
 * (fence) scans the reader table for the oldest version still read. The reader stores the version
 * it saw, then (fence) reads the published version again: if the writer's scan missed the store,
 * the reader's second read sees the writer's newer version, and it moves its snapshot to that.
 * Either way the writer never reclaims what the snapshot sees.
 */
int sxe_map_read_begin(sxe_map_t *map, struct sxe_map_reader *reader)
{
    if (!SXE_CHECK(map != NULL && reader != NULL)) {
        return -EINVAL;
    }
    uint32_t index = claim_reader_slot(map, (uint64_t)sxe__map_process_id());
    if (index == map->readers_max) {
        __atomic_fetch_add(&map->header->readers_full, 1, __ATOMIC_RELAXED);
        SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR,
                     "map %s: all %u reader slots are held; readers get -ENOBUFS (readers_max)",
                     map->header->name, map->readers_max);
        return -ENOBUFS;
    }
    struct sxe__map_reader_slot *slot = &map->readers[index];
    uint64_t version = __atomic_load_n(&map->header->published, __ATOMIC_ACQUIRE);
    for (;;) {
        __atomic_store_n(&slot->snapshot, version, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        uint64_t published = __atomic_load_n(&map->header->published, __ATOMIC_ACQUIRE);
        if (published == version) {
            break;
        }
        version = published;
    }
    *reader = (struct sxe_map_reader){.map = map, .version = version, .index = index};
    return 0;
}

void sxe_map_read_end(struct sxe_map_reader *reader)
{
    if (!SXE_CHECK(reader != NULL && reader->map != NULL &&
                   reader->index < reader->map->readers_max)) {
        return;
    }
    uint64_t *owner = &reader->map->readers[reader->index].owner;

    /* A child of fork() that ends its parent's snapshot would free the parent's slot. */
    if (!SXE_CHECK(__atomic_load_n(owner, __ATOMIC_RELAXED) == (uint64_t)sxe__map_process_id())) {
        return;
    }
    __atomic_store_n(owner, 0, __ATOMIC_RELEASE);
    reader->map = NULL;
}

/*
 * The entry's key and value in the arena. The offset and the lengths may be torn or stale if the
 * slot is being rewritten, so they are checked against the arena's bounds before use (the caller's
 * seqlock check then discards what was read). @return false if they do not fit.
 */
static inline bool entry_in_arena(const sxe_map_t *map, struct sxe__map_slot *slot,
                                  const unsigned char **key, size_t *key_size,
                                  const unsigned char **value, size_t *value_size)
{
    uint64_t offset = __atomic_load_n(sxe__map_slot_block(slot), __ATOMIC_RELAXED);
    uint32_t sizes[2];

    if (offset > map->arena_bytes - SXE__MAP_BLOCK_HEAD) {
        return false;
    }
    memcpy(sizes, map->arena + offset, sizeof(sizes));
    if ((uint64_t)sizes[0] + sizes[1] > map->arena_bytes - SXE__MAP_BLOCK_HEAD - offset) {
        return false;
    }
    *key = map->arena + offset + SXE__MAP_BLOCK_HEAD;
    *key_size = sizes[0];
    *value = *key + sizes[0];
    *value_size = sizes[1];
    return true;
}

/* The entry's key and value, where they are. @return false if they cannot be trusted. */
static inline bool entry_of(const sxe_map_t *map, struct sxe__map_slot *slot,
                            const unsigned char **key, size_t *key_size,
                            const unsigned char **value, size_t *value_size)
{
    if (map->variable) {
        return entry_in_arena(map, slot, key, key_size, value, value_size);
    }
    *key = sxe__map_slot_key(map, slot);
    *key_size = map->key_size;
    *value = *key + map->key_size;
    *value_size = map->value_size;
    return true;
}

enum examined { NOT_HERE, FOUND, END_OF_PROBE };

/*
 * Looks for key in one slot at snapshot. A slot that shows another tag is skipped without the
 * seqlock check: a slot that holds an entry the snapshot sees is never rewritten while the
 * snapshot is held, so a changing slot cannot be hiding it. An empty slot ends the probe: slots
 * between an entry's home and the entry are never emptied (docs/map.md has the proof).
 */
static inline __attribute__((always_inline)) enum examined
examine(const sxe_map_t *map, struct sxe__map_slot *slot, uint64_t tag, const void *key,
        size_t key_size, uint64_t snapshot, const void **value, size_t *value_size)
{
    for (;;) {
        uint64_t created = __atomic_load_n(&slot->created, __ATOMIC_ACQUIRE);
        if (created > snapshot) {
            return NOT_HERE;
        }
        uint64_t slot_tag = __atomic_load_n(&slot->tag, __ATOMIC_RELAXED);
        if (slot_tag != tag) {
            return slot_tag == SXE__MAP_EMPTY ? END_OF_PROBE : NOT_HERE;
        }
        const unsigned char *entry_key, *entry_value;
        size_t entry_key_size, entry_value_size;
        bool matches =
            entry_of(map, slot, &entry_key, &entry_key_size, &entry_value, &entry_value_size) &&
            entry_key_size == key_size && sxe__map_key_equal(entry_key, key, key_size);
        uint64_t deleted = __atomic_load_n(&slot->deleted, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&slot->created, __ATOMIC_RELAXED) != created) {
            continue; /* rewritten while we looked: look again */
        }
        if (!matches || (deleted != 0 && deleted <= snapshot)) {
            return NOT_HERE;
        }
        *value = entry_value;
        *value_size = entry_value_size;
        return FOUND;
    }
}

/*
 * examine() for a reader that copies the value out of an SXE_MAP_IN_PLACE map, where a put writes
 * a new value over the old one. The copy is made under a sequence check on the pair (created,
 * undo), which every write of the slot changes and never returns to a value it had
 * (map_in_place.c); a value newer than the snapshot is found in the log. Nothing is copied for a
 * key that does not match.
 */
static inline __attribute__((always_inline)) enum examined
examine_copy(const sxe_map_t *map, uint64_t index, uint64_t tag, const void *key, uint64_t snapshot,
             void *out, size_t capacity)
{
    struct sxe__map_slot *slot = sxe__map_slot(map, index);
    uint64_t *undo_field = sxe__map_slot_undo(slot);
    const unsigned char *slot_key = sxe__map_slot_key(map, slot);
    size_t size = capacity < map->value_size ? capacity : map->value_size;

    for (;;) {
        uint64_t created = __atomic_load_n(&slot->created, __ATOMIC_ACQUIRE);
        uint64_t slot_tag = __atomic_load_n(&slot->tag, __ATOMIC_RELAXED);
        if (slot_tag != tag) {
            return created <= snapshot && slot_tag == SXE__MAP_EMPTY ? END_OF_PROBE : NOT_HERE;
        }
        bool matches = sxe__map_key_equal(slot_key, key, map->key_size);
        uint64_t deleted = __atomic_load_n(&slot->deleted, __ATOMIC_RELAXED);
        uint64_t undo = __atomic_load_n(undo_field, __ATOMIC_RELAXED);
        if (matches && created <= snapshot && size > 0) {
            sxe__map_copy(out, slot_key + map->key_size, size);
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&slot->created, __ATOMIC_RELAXED) != created ||
            __atomic_load_n(undo_field, __ATOMIC_RELAXED) != undo) {
            continue; /* written while we looked: look again */
        }
        if (!matches || (deleted != 0 && deleted <= snapshot)) {
            return NOT_HERE;
        }
        if (created <= snapshot) {
            return FOUND;
        }
        return sxe__map_log_follow(map, index, undo, snapshot, out, capacity) ? FOUND : NOT_HERE;
    }
}

/*
 * Examines the slot at index for key: in place (value and size set), or, with copy, copying the
 * value to out: under the sequence check in an SXE_MAP_IN_PLACE map, else from where it stays for
 * the snapshot. copy is a parameter, not a constant: this is compiled once into probe() and once
 * into look_up_many(), each shared by the finding and the copying calls.
 */
static inline __attribute__((always_inline)) enum examined
examine_at(const sxe_map_t *map, uint64_t index, uint64_t tag, const void *key, size_t key_size,
           uint64_t snapshot, bool copy, const void **value, size_t *value_size, void *out,
           size_t capacity)
{
    if (copy && map->in_place) {
        *value_size = map->value_size;
        return examine_copy(map, index, tag, key, snapshot, out, capacity);
    }
    enum examined result =
        examine(map, sxe__map_slot(map, index), tag, key, key_size, snapshot, value, value_size);
    if (copy && result == FOUND && capacity > 0) {
        memcpy(out, *value, *value_size < capacity ? *value_size : capacity);
    }
    return result;
}

/* Probes for key from its home. @return FOUND (value and size set, or copied) or NOT_HERE. */
static __attribute__((noinline)) enum examined
probe(const sxe_map_t *map, uint64_t hash, const void *key, size_t key_size, uint64_t snapshot,
      bool copy, const void **value, size_t *value_size, void *out, size_t capacity)
{
    uint64_t tag = hash | 1;
    uint64_t index = sxe__map_home(map, tag);

    for (uint64_t step = 0; step < map->slot_count; step++) {
        enum examined result = examine_at(map, index, tag, key, key_size, snapshot, copy, value,
                                          value_size, out, capacity);
        if (result == FOUND) {
            return FOUND;
        }
        if (result == END_OF_PROBE) {
            break;
        }
        index = sxe__map_next(map, index);
    }
    return NOT_HERE;
}

static inline bool key_size_is_valid(const sxe_map_t *map, size_t key_size)
{
    return map->key_size == SXE_MAP_VARIABLE ? key_size >= 1 && key_size <= UINT32_MAX
                                             : key_size == map->key_size;
}

/* Whether a reader may be handed pointers into its map: not in one whose values change in place. */
static inline bool hands_out_pointers(const struct sxe_map_reader *reader)
{
    return reader->map != NULL && !reader->map->in_place;
}

const void *sxe_map_find(const struct sxe_map_reader *reader, const void *key, size_t key_size,
                         size_t *value_size)
{
    size_t size = 0;

    if (!SXE_CHECK(reader != NULL && hands_out_pointers(reader) && key != NULL &&
                   key_size_is_valid(reader->map, key_size))) {
        return NULL;
    }
    const sxe_map_t *map = reader->map;
    const void *value = NULL;
    if (probe(map, sxe__map_hash(map, key, key_size), key, key_size, reader->version, false, &value,
              &size, NULL, 0) != FOUND) {
        return NULL;
    }
    if (value_size != NULL) {
        *value_size = size;
    }
    return value;
}

int64_t sxe_map_get(const struct sxe_map_reader *reader, const void *key, size_t key_size,
                    void *value, size_t value_capacity)
{
    if (!SXE_CHECK(reader != NULL && reader->map != NULL && key != NULL &&
                   key_size_is_valid(reader->map, key_size) &&
                   (value != NULL || value_capacity == 0))) {
        return -EINVAL;
    }
    const sxe_map_t *map = reader->map;
    const void *found = NULL;
    size_t size = 0;
    if (probe(map, sxe__map_hash(map, key, key_size), key, key_size, reader->version, true, &found,
              &size, value, value_capacity) != FOUND) {
        return -ENOENT;
    }
    return (int64_t)size;
}

/* One lookup of sxe_map_find_many() or sxe_map_get_many() in flight. */
struct lookup {
    size_t key;     /* its index in keys[] */
    uint64_t tag;   /* hash | 1 */
    uint64_t index; /* the next slot to examine */
    uint64_t ready; /* slots from index on whose lines were prefetched */
    uint64_t steps; /* slots examined */
};

/* Where the answers of a batch go: pointers and sizes (find), or copies and sizes (get). */
struct answers {
    const void **values;
    size_t *value_sizes;
    unsigned char *copies; /* key i's value goes to copies + i * capacity */
    size_t capacity;
    int64_t *copy_sizes;
};

/* Answers keys[key]: found with value and size, or not (value NULL, size -ENOENT or -EINVAL). */
static inline __attribute__((always_inline)) void answer(struct answers *answers, size_t key,
                                                         bool copy, const void *value, int64_t size)
{
    if (copy) {
        if (answers->copy_sizes != NULL) {
            answers->copy_sizes[key] = size;
        }
        return;
    }
    answers->values[key] = value;
    if (value != NULL && answers->value_sizes != NULL) {
        answers->value_sizes[key] = (size_t)size;
    }
}

/* Starts the lookup of keys[key] in place: hashes it and prefetches its first span slots. */
static inline void lookup_start(const sxe_map_t *map, struct lookup *lookup, size_t key,
                                const void *const *keys, const size_t *key_sizes, uint64_t span)
{
    size_t key_size = key_sizes != NULL ? key_sizes[key] : map->key_size;

    lookup->key = key;
    lookup->tag = sxe__map_hash(map, keys[key], key_size) | 1;
    lookup->index = sxe__map_home(map, lookup->tag);
    lookup->steps = 0;
    lookup->ready = span;
    sxe__map_prefetch(map, lookup->index, span, false);
}

/*
 * Examines the lookup's prefetched slots. If the probe runs on past them, prefetches the next ones
 * and returns false, so the caller turns to other lookups while they arrive. @return true when the
 * lookup is done, and *found whether it found its key (answered).
 */
static inline __attribute__((always_inline)) bool
lookup_go_on(const struct sxe_map_reader *reader, struct lookup *lookup, const void *key,
             size_t key_size, struct answers *answers, bool copy, uint64_t span, bool *found)
{
    const sxe_map_t *map = reader->map;
    const void *value = NULL;
    size_t size = 0;
    void *out = copy ? answers->copies + lookup->key * answers->capacity : NULL;

    for (; lookup->ready > 0; lookup->ready--) {
        enum examined result =
            examine_at(map, lookup->index, lookup->tag, key, key_size, reader->version, copy,
                       &value, &size, out, copy ? answers->capacity : 0);
        if (result == FOUND) {
            answer(answers, lookup->key, copy, value, (int64_t)size);
            *found = true;
            return true;
        }
        if (result == END_OF_PROBE || ++lookup->steps == map->slot_count) {
            answer(answers, lookup->key, copy, NULL, -ENOENT);
            *found = false;
            return true;
        }
        lookup->index = sxe__map_next(map, lookup->index);
    }
    lookup->ready = FIND_FURTHER * span;
    sxe__map_prefetch(map, lookup->index, lookup->ready, false);
    return false;
}

/*
 * Starts the lookups of keys[first] to keys[end - 1] in group, in one tight loop: a prefetch that
 * misses the TLB holds its place in the reorder buffer until the page walk ends, so only
 * prefetches issued close together overlap their walks. Keys of an invalid size are answered
 * (NULL, -EINVAL) without a lookup. @return how many lookups it started.
 */
static inline __attribute__((always_inline)) size_t
group_start(const sxe_map_t *map, struct lookup *group, size_t first, size_t end,
            const void *const *keys, const size_t *key_sizes, struct answers *answers, bool copy,
            uint64_t span)
{
    size_t started = 0;

    for (size_t key = first; key < end; key++) {
        if (!key_size_is_valid(map, key_sizes != NULL ? key_sizes[key] : map->key_size)) {
            answer(answers, key, copy, NULL, -EINVAL);
            continue;
        }
        lookup_start(map, &group[started++], key, keys, key_sizes, span);
    }
    return started;
}

/*
 * One pass over the lookups in flight: each examines the slots prefetched for it. One whose probe
 * runs past them prefetches the next ones and moves to the next pass's list. @return how many
 * lookups of the pass found their key.
 */
static inline __attribute__((always_inline)) size_t
pass(const struct sxe_map_reader *reader, struct lookup *now, size_t count, struct lookup *later,
     size_t *later_count, const void *const *keys, const size_t *key_sizes, struct answers *answers,
     bool copy, uint64_t span)
{
    size_t found = 0;

    for (size_t i = 0; i < count; i++) {
        size_t key = now[i].key;
        size_t key_size = key_sizes != NULL ? key_sizes[key] : reader->map->key_size;
        bool key_found = false;
        if (lookup_go_on(reader, &now[i], keys[key], key_size, answers, copy, span, &key_found)) {
            found += key_found;
        } else {
            later[(*later_count)++] = now[i];
        }
    }
    return found;
}

/*
 * Pipelined: each pass starts up to FIND_GROUP new lookups, then examines those started in the
 * pass before, whose slots have had the new lookups' time to arrive. A lookup whose probe runs
 * past its first slots (about one in six at the default load) waits for the next pass for each
 * further line rather than stalling, so a long probe costs its own misses, not everyone's. One
 * function for sxe_map_find_many() and sxe_map_get_many(): copy is a parameter.
 */
static __attribute__((noinline)) size_t look_up_many(const struct sxe_map_reader *reader,
                                                     size_t count, const void *const *keys,
                                                     const size_t *key_sizes,
                                                     struct answers *answers, bool copy)
{
    const sxe_map_t *map = reader->map;
    struct lookup lists[2][2 * FIND_GROUP];
    size_t sizes[2] = {0, 0}, next = 0, found = 0, now = 0;
    uint64_t span = sxe__map_slots_in(map, FIND_BYTES);

    do {
        /* The next pass's list holds the new lookups and those of this pass that go on. */
        size_t room = 2 * FIND_GROUP - sizes[now];
        size_t end = next + (room < FIND_GROUP ? room : FIND_GROUP);
        end = end < count ? end : count;
        sizes[1 - now] =
            group_start(map, lists[1 - now], next, end, keys, key_sizes, answers, copy, span);
        next = end;
        found += pass(reader, lists[now], sizes[now], lists[1 - now], &sizes[1 - now], keys,
                      key_sizes, answers, copy, span);
        sizes[now] = 0;
        now = 1 - now;
    } while (sizes[now] > 0 || next < count);
    return found;
}

size_t sxe_map_find_many(const struct sxe_map_reader *reader, size_t count, const void *const *keys,
                         const size_t *key_sizes, const void **values, size_t *value_sizes)
{
    if (!SXE_CHECK(reader != NULL && hands_out_pointers(reader) && (count == 0 || keys != NULL) &&
                   (count == 0 || values != NULL) &&
                   (key_sizes != NULL || reader->map->key_size != SXE_MAP_VARIABLE))) {
        return 0;
    }
    struct answers answers = {.values = values, .value_sizes = value_sizes};
    return look_up_many(reader, count, keys, key_sizes, &answers, false);
}

size_t sxe_map_get_many(const struct sxe_map_reader *reader, size_t count, const void *const *keys,
                        const size_t *key_sizes, void *values, size_t value_capacity,
                        int64_t *value_sizes)
{
    if (!SXE_CHECK(reader != NULL && reader->map != NULL && (count == 0 || keys != NULL) &&
                   (count == 0 || values != NULL || value_capacity == 0) &&
                   (key_sizes != NULL || reader->map->key_size != SXE_MAP_VARIABLE))) {
        return 0;
    }
    struct answers answers = {
        .copies = values, .capacity = value_capacity, .copy_sizes = value_sizes};
    return look_up_many(reader, count, keys, key_sizes, &answers, true);
}

int sxe_map_next(const struct sxe_map_reader *reader, uint64_t *cursor, const void **key,
                 size_t *key_size, const void **value, size_t *value_size)
{
    if (!SXE_CHECK(reader != NULL && hands_out_pointers(reader) && cursor != NULL && key != NULL &&
                   key_size != NULL && value != NULL)) {
        return 0;
    }
    const sxe_map_t *map = reader->map;
    uint64_t snapshot = reader->version;

    while (*cursor < map->slot_count) {
        struct sxe__map_slot *slot = sxe__map_slot(map, (*cursor)++);
        uint64_t created = __atomic_load_n(&slot->created, __ATOMIC_ACQUIRE);
        if (created > snapshot ||
            !sxe__map_is_entry(__atomic_load_n(&slot->tag, __ATOMIC_RELAXED))) {
            continue;
        }
        const unsigned char *entry_key, *entry_value;
        size_t entry_key_size, entry_value_size;
        bool readable =
            entry_of(map, slot, &entry_key, &entry_key_size, &entry_value, &entry_value_size);
        uint64_t deleted = __atomic_load_n(&slot->deleted, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&slot->created, __ATOMIC_RELAXED) != created) {
            (*cursor)--; /* rewritten while we looked: look again */
            continue;
        }
        if (!readable || (deleted != 0 && deleted <= snapshot)) {
            continue;
        }
        *key = entry_key;
        *key_size = entry_key_size;
        *value = entry_value;
        if (value_size != NULL) {
            *value_size = entry_value_size;
        }
        return 1;
    }
    return 0;
}

int sxe_map_next_copy(const struct sxe_map_reader *reader, uint64_t *cursor, void *key, void *value,
                      size_t value_capacity)
{
    if (!SXE_CHECK(reader != NULL && !hands_out_pointers(reader) && cursor != NULL && key != NULL &&
                   value != NULL)) {
        return -EINVAL;
    }
    const sxe_map_t *map = reader->map;

    while (*cursor < map->slot_count) {
        uint64_t index = (*cursor)++;
        struct sxe__map_slot *slot = sxe__map_slot(map, index);
        uint64_t *undo_field = sxe__map_slot_undo(slot);
        uint64_t created = __atomic_load_n(&slot->created, __ATOMIC_ACQUIRE);
        uint64_t undo = __atomic_load_n(undo_field, __ATOMIC_RELAXED);
        uint64_t tag = __atomic_load_n(&slot->tag, __ATOMIC_RELAXED);
        if (!sxe__map_is_entry(tag)) {
            continue;
        }
        memcpy(key, sxe__map_slot_key(map, slot), map->key_size);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&slot->created, __ATOMIC_RELAXED) != created ||
            __atomic_load_n(undo_field, __ATOMIC_RELAXED) != undo) {
            (*cursor)--; /* written while we looked: look again */
            continue;
        }
        /* The key copied is the slot's: its value for the snapshot, if it has one, as get's. */
        if (examine_copy(map, index, tag, key, reader->version, value, value_capacity) == FOUND) {
            return 1;
        }
    }
    return 0;
}
