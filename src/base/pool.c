/*
 * Pools: an array of caller structs plus, beside it, one bookkeeping node per element. Each state
 * is a circular doubly linked queue of nodes through a sentinel node of its own, linked by 32-bit
 * indices, so the whole pool is position-independent and can live in shared memory mapped at
 * different addresses.
 *
 * One region holds everything, in this order, each part 64-byte aligned:
 *     struct sxe_pool     header: identity, sizes, lock, per-state counts and timeouts
 *     struct sxe__pool_node[count + state_count]    element nodes, then one sentinel per state
 *     elements[count]     the caller's structs
 *
 * Locking. A shared pool is guarded by a robust, process-shared mutex rather than made lock-free:
 * every operation is a handful of stores, so the lock is held for tens of nanoseconds, and a
 * lock-free doubly linked queue with removal from the middle needs far more atomic operations per
 * change than one uncontended lock. Robustness is what makes a lock safe across processes: when a
 * holder dies, the kernel hands the next locker EOWNERDEAD, and that locker rebuilds every queue
 * from the nodes' state fields. An operation changes an element's state with one aligned store, so
 * whatever instant the holder died at, each element is in exactly one state afterwards.
 */
#define SXE_LOG_MODULE pool_log
#include "sxe/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pool.h"
#include "base.h"
#include "sys.h"

static struct sxe_log_module pool_log = SXE_LOG_MODULE_INIT(POOL);
SXE__REGION_HEADER(struct sxe_pool);

#define POOL_MAGIC   0x4c4f4f5045585321ULL /* "!SXEPOOL" in memory order */
#define POOL_VERSION 1u
#define POOL_ALIGN   64u

/* Set in the header's flags of pools that live in shared memory. */
#define POOL_PROCESS_SHARED 0x100u

static uint64_t align_up(uint64_t value)
{
    return (value + POOL_ALIGN - 1) & ~(uint64_t)(POOL_ALIGN - 1);
}

static struct sxe__pool_node *nodes_of(const sxe_pool_t *pool)
{
    return (struct sxe__pool_node *)((char *)(uintptr_t)pool + pool->nodes_offset);
}

struct sxe__pool_node *sxe__pool_nodes(sxe_pool_t *pool)
{
    return nodes_of(pool);
}

static uint32_t sentinel_of(const sxe_pool_t *pool, unsigned state)
{
    return pool->count + state;
}

/* The oldest element of state, or SXE_POOL_NONE if it is empty. Call with the lock held. */
static uint32_t head_of(const sxe_pool_t *pool, const struct sxe__pool_node *nodes, unsigned state)
{
    uint32_t sentinel = sentinel_of(pool, state);
    return nodes[sentinel].next == sentinel ? SXE_POOL_NONE : nodes[sentinel].next;
}

static bool options_are_valid(const struct sxe_pool_options *options)
{
    return options != NULL && options->count >= 1 &&
           options->count <= UINT32_MAX - 1 - SXE_POOL_STATES_MAX && options->element_size >= 1 &&
           options->element_size <= (1ULL << 32) && options->state_count >= 1 &&
           options->state_count <= SXE_POOL_STATES_MAX &&
           (options->flags & ~(SXE_POOL_LOCKED | SXE_POOL_SHARED)) == 0;
}

/* Offsets of the parts of the region, for valid options. */
static void layout(const struct sxe_pool_options *options, uint64_t *nodes_offset,
                   uint64_t *elements_offset, uint64_t *region_size)
{
    uint64_t node_count = (uint64_t)options->count + options->state_count;

    *nodes_offset = align_up(sizeof(struct sxe_pool));
    *elements_offset = align_up(*nodes_offset + node_count * sizeof(struct sxe__pool_node));
    *region_size = align_up(*elements_offset + (uint64_t)options->count * options->element_size);
}

size_t sxe_pool_size(const struct sxe_pool_options *options)
{
    uint64_t nodes_offset, elements_offset, region_size;

    if (!options_are_valid(options)) {
        return 0;
    }
    layout(options, &nodes_offset, &elements_offset, &region_size);
    return (size_t)region_size;
}

/*
 * Puts node index at the tail of state. Its time becomes max(time, the tail's time), so times
 * never decrease along a queue even when callers' clocks differ slightly.
 */
static inline void enqueue(sxe_pool_t *pool, struct sxe__pool_node *nodes, uint32_t index,
                           unsigned state, uint64_t time, uint64_t sequence)
{
    uint32_t sentinel = sentinel_of(pool, state);
    uint32_t tail = nodes[sentinel].prev;
    struct sxe__pool_node *node = &nodes[index];

    node->time = tail != sentinel && nodes[tail].time > time ? nodes[tail].time : time;
    node->sequence = sequence;
    node->prev = tail;
    node->next = sentinel;
    __atomic_store_n(&node->state, state, __ATOMIC_RELAXED);
    nodes[tail].next = index;
    nodes[sentinel].prev = index;
    __atomic_store_n(&pool->states[state].count, pool->states[state].count + 1, __ATOMIC_RELAXED);
}

static inline void dequeue(sxe_pool_t *pool, struct sxe__pool_node *nodes, uint32_t index)
{
    struct sxe__pool_node *node = &nodes[index];
    struct sxe__pool_state *info = &pool->states[node->state];

    nodes[node->prev].next = node->next;
    nodes[node->next].prev = node->prev;
    __atomic_store_n(&info->count, info->count - 1, __ATOMIC_RELAXED);
}

static inline void move(sxe_pool_t *pool, struct sxe__pool_node *nodes, uint32_t index, unsigned to,
                        uint64_t now)
{
    SXE_LOG_TRACE("pool %s: element %u %s -> %s", pool->name, index,
                  pool->states[nodes[index].state].name, pool->states[to].name);
    dequeue(pool, nodes, index);
    enqueue(pool, nodes, index, to, now, ++pool->last_sequence);
}

static void empty_queues(sxe_pool_t *pool, struct sxe__pool_node *nodes)
{
    for (unsigned state = 0; state < pool->state_count; state++) {
        uint32_t sentinel = sentinel_of(pool, state);
        nodes[sentinel] =
            (struct sxe__pool_node){.prev = sentinel, .next = sentinel, .state = state};
        pool->states[state].count = 0;
    }
}

/* Merges two lists linked by next and ended by SXE_POOL_NONE, in sequence order. */
static uint32_t merge_by_sequence(struct sxe__pool_node *nodes, uint32_t a, uint32_t b)
{
    uint32_t head = SXE_POOL_NONE;
    uint32_t *tail = &head;

    while (a != SXE_POOL_NONE && b != SXE_POOL_NONE) {
        uint32_t *smaller = nodes[a].sequence <= nodes[b].sequence ? &a : &b;
        *tail = *smaller;
        tail = &nodes[*smaller].next;
        *smaller = nodes[*smaller].next;
    }
    *tail = a != SXE_POOL_NONE ? a : b;
    return head;
}

/* Sorts a list linked by next and ended by SXE_POOL_NONE by sequence: a merge sort in place. */
static uint32_t sort_by_sequence(struct sxe__pool_node *nodes, uint32_t head)
{
    if (head == SXE_POOL_NONE || nodes[head].next == SXE_POOL_NONE) {
        return head;
    }
    uint32_t middle = head;
    for (uint32_t fast = nodes[head].next;
         fast != SXE_POOL_NONE && nodes[fast].next != SXE_POOL_NONE;
         fast = nodes[nodes[fast].next].next) {
        middle = nodes[middle].next;
    }
    uint32_t second = nodes[middle].next;
    nodes[middle].next = SXE_POOL_NONE;
    return merge_by_sequence(nodes, sort_by_sequence(nodes, head), sort_by_sequence(nodes, second));
}

/*
 * Rebuilds every queue from the nodes' state fields, in sequence order, after a lock holder died
 * at an unknown point of an operation. It needs no memory: each state's elements are first
 * chained through their next fields from the state's sentinel, then sorted in place.
 */
static void rebuild(sxe_pool_t *pool)
{
    struct sxe__pool_node *nodes = nodes_of(pool);

    for (unsigned state = 0; state < pool->state_count; state++) {
        nodes[sentinel_of(pool, state)].next = SXE_POOL_NONE;
    }
    for (uint32_t i = 0; i < pool->count; i++) {
        uint32_t sentinel = sentinel_of(pool, nodes[i].state);
        nodes[i].next = nodes[sentinel].next;
        nodes[sentinel].next = i;
    }
    for (unsigned state = 0; state < pool->state_count; state++) {
        uint32_t sentinel = sentinel_of(pool, state);
        uint32_t index = sort_by_sequence(nodes, nodes[sentinel].next);

        nodes[sentinel] =
            (struct sxe__pool_node){.prev = sentinel, .next = sentinel, .state = state};
        pool->states[state].count = 0;
        while (index != SXE_POOL_NONE) {
            uint32_t next = nodes[index].next;
            enqueue(pool, nodes, index, state, nodes[index].time, nodes[index].sequence);
            index = next;
        }
    }
    pool->recoveries++;
}

/* Takes a locked pool's lock, rebuilding the queues if its last holder died holding it. */
static void __attribute__((noinline)) lock_slow(sxe_pool_t *pool)
{
    int rc = pthread_mutex_lock(&pool->lock);
    if (rc == EOWNERDEAD) {
        rebuild(pool);
        pthread_mutex_consistent(&pool->lock);
        SXE_LOG_WARN("pool %s: a process died holding the lock; queues rebuilt (recovery %llu)",
                     pool->name, (unsigned long long)pool->recoveries);
    }
}

/* The lock calls are inline so an unlocked pool, the common case, pays one test of its flags. */
static inline void lock(sxe_pool_t *pool)
{
    if ((pool->flags & SXE_POOL_LOCKED) != 0) {
        lock_slow(pool);
    }
}

static inline void unlock(sxe_pool_t *pool)
{
    if ((pool->flags & SXE_POOL_LOCKED) != 0) {
        pthread_mutex_unlock(&pool->lock);
    }
}

void sxe__pool_lock(sxe_pool_t *pool)
{
    lock(pool);
}

void sxe__pool_unlock(sxe_pool_t *pool)
{
    unlock(pool);
}

/* glibc's pthread_mutex_init always returns 0, so this cannot fail. */
static void init_lock(sxe_pool_t *pool)
{
    pthread_mutexattr_t attributes;

    if ((pool->flags & SXE_POOL_LOCKED) == 0) {
        return;
    }
    pthread_mutexattr_init(&attributes);
    pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
    if (pool->flags & POOL_PROCESS_SHARED) {
        pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
    }
    pthread_mutex_init(&pool->lock, &attributes);
    pthread_mutexattr_destroy(&attributes);
}

static void copy_name(char *to, const char *from)
{
    snprintf(to, SXE_POOL_NAME_MAX + 1, "%s", from != NULL ? from : "");
}

/* Lays the pool out in memory that is at least sxe_pool_size(options) bytes. */
static sxe_pool_t *make(void *memory, const struct sxe_pool_options *options, unsigned extra_flags)
{
    sxe_pool_t *pool = memory;
    uint64_t nodes_offset, elements_offset, region_size;

    layout(options, &nodes_offset, &elements_offset, &region_size);
    memset(pool, 0, sizeof(*pool));
    pool->version = POOL_VERSION;
    pool->header_size = sizeof(*pool);
    pool->region_size = region_size;
    pool->element_size = options->element_size;
    pool->nodes_offset = nodes_offset;
    pool->elements_offset = elements_offset;
    pool->count = options->count;
    pool->state_count = options->state_count;
    pool->flags = options->flags | extra_flags;
    if (pool->flags & SXE_POOL_SHARED) {
        pool->flags |= SXE_POOL_LOCKED | POOL_PROCESS_SHARED;
    }
    copy_name(pool->name, options->name);
    for (unsigned state = 0; state < options->state_count; state++) {
        if (options->state_names != NULL && options->state_names[state] != NULL) {
            copy_name(pool->states[state].name, options->state_names[state]);
        } else {
            snprintf(pool->states[state].name, sizeof(pool->states[state].name), "%u", state);
        }
    }
    init_lock(pool);

    struct sxe__pool_node *nodes = nodes_of(pool);
    empty_queues(pool, nodes);
    for (uint32_t i = 0; i < pool->count; i++) {
        enqueue(pool, nodes, i, 0, 0, ++pool->last_sequence);
    }

    /* The magic goes last, with release order: an attacher that sees it sees a whole pool. */
    sxe__region_publish(pool, POOL_MAGIC);
    SXE_LOG_DEBUG("pool %s: %u elements of %zu bytes, %u states, %llu bytes", pool->name,
                  pool->count, options->element_size, pool->state_count,
                  (unsigned long long)region_size);
    return pool;
}

int sxe_pool_init(sxe_pool_t **pool, void *memory, size_t size,
                  const struct sxe_pool_options *options)
{
    if (!SXE_CHECK(pool != NULL && memory != NULL && ((uintptr_t)memory % POOL_ALIGN) == 0 &&
                   options_are_valid(options) && size >= sxe_pool_size(options))) {
        return -EINVAL;
    }
    *pool = make(memory, options, 0);
    return 0;
}

void sxe_pool_fini(sxe_pool_t *pool)
{
    if (pool == NULL) {
        return;
    }
    if ((pool->flags & SXE_POOL_LOCKED) != 0) {
        pthread_mutex_destroy(&pool->lock);
    }
    pool->magic = 0;
}

int sxe_pool_create(sxe_pool_t **pool, const struct sxe_pool_options *options)
{
    if (!SXE_CHECK(pool != NULL && options_are_valid(options))) {
        return -EINVAL;
    }
    size_t size = sxe_pool_size(options);
    int rc;
    void *memory = sxe__region_map_anonymous("pool", options->name, size,
                                             (options->flags & SXE_POOL_SHARED) != 0, &rc);
    if (memory == NULL) {
        return rc;
    }
    *pool = make(memory, options, 0);
    return 0;
}

void sxe_pool_destroy(sxe_pool_t *pool)
{
    if (pool == NULL) {
        return;
    }
    size_t size = (size_t)pool->region_size;
    sxe_pool_fini(pool);
    sxe__sys.munmap(pool, size);
}

/* Checks that the mapped pool is one of ours and has the shape the caller expects. */
static int check_attached(const sxe_pool_t *pool, const char *path, size_t file_size,
                          const struct sxe_pool_options *options)
{
    uint64_t nodes_offset, elements_offset, region_size;
    int rc = sxe__region_check(pool, POOL_MAGIC, POOL_VERSION, sizeof(*pool), "pool", path);

    if (rc < 0) {
        return rc;
    }
    layout(options, &nodes_offset, &elements_offset, &region_size);
    if (pool->count != options->count || pool->element_size != options->element_size ||
        pool->state_count != options->state_count || pool->region_size != region_size ||
        file_size != region_size) {
        SXE_LOG_ERROR("pool file %s holds %u elements of %llu bytes in %u states (%zu bytes); "
                      "expected %u of %zu in %u",
                      path, pool->count, (unsigned long long)pool->element_size, pool->state_count,
                      file_size, options->count, options->element_size, options->state_count);
        return -EMSGSIZE;
    }
    return 0;
}

int sxe_pool_attach(sxe_pool_t **pool, const char *path, const struct sxe_pool_options *options,
                    unsigned flags)
{
    bool create = (flags & SXE_POOL_CREATE) != 0;
    void *memory;
    size_t size;
    int rc;

    if (!SXE_CHECK(pool != NULL && path != NULL && options_are_valid(options) &&
                   (flags & ~SXE_POOL_CREATE) == 0)) {
        return -EINVAL;
    }
    rc = sxe__region_map_file("pool", path, create, sxe_pool_size(options), sizeof(sxe_pool_t),
                              &memory, &size);
    if (rc < 0) {
        return rc;
    }
    if (create) {
        make(memory, options, SXE_POOL_SHARED);
    } else if ((rc = check_attached(memory, path, size, options)) < 0) {
        sxe__sys.munmap(memory, size);
        return rc;
    }
    *pool = memory;
    return 0;
}

void sxe_pool_detach(sxe_pool_t *pool)
{
    if (pool == NULL) {
        return;
    }
    sxe__sys.munmap(pool, (size_t)pool->region_size);
}

void *sxe_pool_array(sxe_pool_t *pool)
{
    return (char *)pool + pool->elements_offset;
}

uint32_t sxe_pool_index(sxe_pool_t *pool, const void *element)
{
    uintptr_t base = (uintptr_t)sxe_pool_array(pool);
    uintptr_t at = (uintptr_t)element;

    if (at < base || (at - base) % pool->element_size != 0 ||
        (at - base) / pool->element_size >= pool->count) {
        return SXE_POOL_NONE;
    }
    return (uint32_t)((at - base) / pool->element_size);
}

uint32_t sxe_pool_capacity(const sxe_pool_t *pool)
{
    return pool->count;
}

const char *sxe_pool_name(const sxe_pool_t *pool)
{
    return pool->name;
}

const char *sxe_pool_state_name(const sxe_pool_t *pool, unsigned state)
{
    return state < pool->state_count ? pool->states[state].name : "?";
}

uint32_t sxe_pool_count(sxe_pool_t *pool, unsigned state)
{
    if (!SXE_CHECK(state < pool->state_count)) {
        return 0;
    }
    return __atomic_load_n(&pool->states[state].count, __ATOMIC_RELAXED);
}

int sxe_pool_state(sxe_pool_t *pool, uint32_t index)
{
    if (!SXE_CHECK(index < pool->count)) {
        return -EINVAL;
    }
    return (int)__atomic_load_n(&nodes_of(pool)[index].state, __ATOMIC_RELAXED);
}

int sxe_pool_try_set_state(sxe_pool_t *pool, uint32_t index, unsigned from, unsigned to,
                           uint64_t now)
{
    if (!SXE_CHECK(index < pool->count && from < pool->state_count && to < pool->state_count)) {
        return -EINVAL;
    }
    struct sxe__pool_node *nodes = nodes_of(pool);
    lock(pool);
    unsigned actual = nodes[index].state;
    if (actual == from) {
        move(pool, nodes, index, to, now);
    }
    unlock(pool);
    return (int)actual;
}

int sxe_pool_set_state(sxe_pool_t *pool, uint32_t index, unsigned from, unsigned to, uint64_t now)
{
    int actual = sxe_pool_try_set_state(pool, index, from, to, now);

    if (actual < 0) {
        return actual;
    }
    if ((unsigned)actual != from) {
        SXE_LOG_ERROR("pool %s: element %u is %s, not %s; not moved to %s", pool->name, index,
                      pool->states[actual].name, pool->states[from].name, pool->states[to].name);
        (void)SXE_CHECK((unsigned)actual == from);
        return -EINVAL;
    }
    return 0;
}

uint32_t sxe_pool_set_oldest_state(sxe_pool_t *pool, unsigned from, unsigned to, uint64_t now)
{
    if (!SXE_CHECK(from < pool->state_count && to < pool->state_count)) {
        return SXE_POOL_NONE;
    }
    struct sxe__pool_node *nodes = nodes_of(pool);
    lock(pool);
    uint32_t index = head_of(pool, nodes, from);
    if (index != SXE_POOL_NONE) {
        move(pool, nodes, index, to, now);
    }
    unlock(pool);
    return index;
}

uint32_t sxe_pool_oldest(sxe_pool_t *pool, unsigned state, uint64_t *time_ns)
{
    if (!SXE_CHECK(state < pool->state_count)) {
        return SXE_POOL_NONE;
    }
    struct sxe__pool_node *nodes = nodes_of(pool);
    lock(pool);
    uint32_t index = head_of(pool, nodes, state);
    if (index != SXE_POOL_NONE && time_ns != NULL) {
        *time_ns = nodes[index].time;
    }
    unlock(pool);
    return index;
}

uint64_t sxe_pool_time(sxe_pool_t *pool, uint32_t index)
{
    if (!SXE_CHECK(index < pool->count)) {
        return 0;
    }
    lock(pool);
    uint64_t time = nodes_of(pool)[index].time;
    unlock(pool);
    return time;
}

int sxe_pool_touch(sxe_pool_t *pool, uint32_t index, uint64_t now)
{
    if (!SXE_CHECK(index < pool->count)) {
        return -EINVAL;
    }
    struct sxe__pool_node *nodes = nodes_of(pool);
    lock(pool);
    move(pool, nodes, index, nodes[index].state, now);
    unlock(pool);
    return 0;
}

int sxe_pool_set_timeout(sxe_pool_t *pool, unsigned state, uint64_t timeout_ns)
{
    if (!SXE_CHECK(state < pool->state_count)) {
        return -EINVAL;
    }
    __atomic_store_n(&pool->states[state].timeout_ns, timeout_ns, __ATOMIC_RELAXED);
    return 0;
}

/* The oldest element of state if it has outlived timeout at now, else SXE_POOL_NONE. */
static uint32_t expired_head(sxe_pool_t *pool, unsigned state, uint64_t timeout, uint64_t now,
                             uint64_t *sequence)
{
    struct sxe__pool_node *nodes = nodes_of(pool);
    uint32_t index = SXE_POOL_NONE;

    lock(pool);
    uint32_t head = head_of(pool, nodes, state);
    if (head != SXE_POOL_NONE && nodes[head].time < now && now - nodes[head].time > timeout) {
        index = head;
        *sequence = nodes[head].sequence;
    }
    unlock(pool);
    return index;
}

unsigned sxe_pool_check_timeouts(sxe_pool_t *pool, uint64_t now, sxe_pool_timeout_cb_t expired,
                                 void *arg)
{
    struct sxe__pool_node *nodes = nodes_of(pool);
    unsigned calls = 0;

    for (unsigned state = 0; state < pool->state_count; state++) {
        uint64_t timeout = __atomic_load_n(&pool->states[state].timeout_ns, __ATOMIC_RELAXED);
        uint64_t sequence = 0;
        uint32_t index;

        if (timeout == 0) {
            continue;
        }
        while ((index = expired_head(pool, state, timeout, now, &sequence)) != SXE_POOL_NONE) {
            expired(pool, index, arg);
            calls++;

            /* The callback must move the element on; if it stayed put, the loop would not end. */
            lock(pool);
            bool callback_moved_element = nodes[index].sequence != sequence; /* a move's new one */
            if (!callback_moved_element) {
                move(pool, nodes, index, state, now);
            }
            unlock(pool);
            if (!callback_moved_element) {
                SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR,
                             "pool %s: timeout callback left element %u in %s; touched it instead",
                             pool->name, index, pool->states[state].name);
                (void)SXE_CHECK(callback_moved_element);
            }
        }
    }
    return calls;
}

void sxe_pool_walker_init(struct sxe_pool_walker *walker, sxe_pool_t *pool, unsigned state)
{
    SXE_ASSERT(state < pool->state_count);
    walker->pool = pool;
    walker->state = state;
    walker->index = SXE_POOL_NONE;
    walker->sequence = 0;
}

uint32_t sxe_pool_walker_next(struct sxe_pool_walker *walker)
{
    sxe_pool_t *pool = walker->pool;
    struct sxe__pool_node *nodes = nodes_of(pool);
    uint32_t sentinel = sentinel_of(pool, walker->state);
    uint32_t next;

    if (!SXE_CHECK(walker->state < pool->state_count)) {
        return SXE_POOL_NONE;
    }
    lock(pool);
    /* Every move gives an element a new sequence (a rebuild keeps them): the same one means the
     * last element is still in the walker's state, where the walker left it. */
    if (walker->index != SXE_POOL_NONE && nodes[walker->index].sequence == walker->sequence) {
        next = nodes[walker->index].next;
    } else {
        /* The last element moved: find the first one queued after it. Sequences increase. */
        for (next = nodes[sentinel].next;
             next != sentinel && nodes[next].sequence <= walker->sequence;
             next = nodes[next].next) {
        }
    }
    if (next == sentinel) {
        next = SXE_POOL_NONE;
    } else {
        walker->index = next;
        walker->sequence = nodes[next].sequence;
    }
    unlock(pool);
    return next;
}

/* Logs why the pool is invalid and returns -EUCLEAN, for sxe__pool_validate. */
static int __attribute__((format(printf, 2, 3)))
invalid(const sxe_pool_t *pool, const char *format, ...);

/* Checks one state's queue and counts its elements into *total. */
static int validate_state(sxe_pool_t *pool, struct sxe__pool_node *nodes, unsigned state,
                          uint64_t *total)
{
    const char *name = pool->states[state].name;
    uint32_t sentinel = sentinel_of(pool, state);
    uint32_t previous = sentinel;
    uint32_t seen = 0;

    for (uint32_t index = nodes[sentinel].next; index != sentinel; index = nodes[index].next) {
        if (index >= pool->count) {
            return invalid(pool, "state %s links to index %u", name, index);
        }
        if (nodes[index].prev != previous) {
            return invalid(pool, "element %u's prev is %u, not %u", index, nodes[index].prev,
                           previous);
        }
        if (nodes[index].state != state) {
            return invalid(pool, "element %u is queued in %s but its state is %u", index, name,
                           nodes[index].state);
        }
        if (previous != sentinel && nodes[index].time < nodes[previous].time) {
            return invalid(pool, "element %u's time goes back in %s", index, name);
        }
        if (previous != sentinel && nodes[index].sequence <= nodes[previous].sequence) {
            return invalid(pool, "element %u's sequence goes back in %s", index, name);
        }
        seen++;
        previous = index;
    }
    if (nodes[sentinel].prev != previous) {
        return invalid(pool, "state %s's tail is %u, not %u", name, nodes[sentinel].prev, previous);
    }
    if (seen != pool->states[state].count) {
        return invalid(pool, "state %s counts %u but holds %u", name, pool->states[state].count,
                       seen);
    }
    *total += seen;
    return 0;
}

/*
 * A prev link that matches the walk rules out cycles that miss the sentinel: the walk enters any
 * such cycle through a node whose prev points elsewhere. So every walk ends.
 */
int sxe__pool_validate(sxe_pool_t *pool)
{
    struct sxe__pool_node *nodes = nodes_of(pool);
    uint64_t total = 0;
    int rc = 0;

    lock(pool);
    if (pool->magic != POOL_MAGIC) {
        rc = invalid(pool, "bad magic %016llx", (unsigned long long)pool->magic);
    }
    for (unsigned state = 0; state < pool->state_count && rc == 0; state++) {
        rc = validate_state(pool, nodes, state, &total);
    }
    if (rc == 0 && total != pool->count) {
        rc = invalid(pool, "states hold %llu elements, not %u", (unsigned long long)total,
                     pool->count);
    }
    unlock(pool);
    return rc;
}

static int invalid(const sxe_pool_t *pool, const char *format, ...)
{
    char reason[256];
    va_list args;

    va_start(args, format);
    vsnprintf(reason, sizeof(reason), format, args);
    va_end(args);
    SXE_LOG_ERROR("pool %s is invalid: %s", pool->name, reason);
    return -EUCLEAN;
}
