/**
 * @file sxe/pool.h
 * @brief Pools: arrays of your structs, each element in exactly one state, with O(1) timeouts.
 *
 * A pool is an array of caller-defined structs, used as array[index].field. Every element is in
 * exactly one of the pool's states, and each state is a queue ordered by the time its elements
 * entered it or were last touched: the head is the oldest. So "how many are in state S", "the
 * oldest element in S" and "every element that has been in S for longer than its timeout" are all
 * O(1) per answer. All elements start in state 0.
 *
 *     enum { FREE, IDLE, BUSY };
 *     static const char *const names[] = {"FREE", "IDLE", "BUSY"};
 *     struct sxe_pool_options options = {.name = "conns", .count = 10000,
 *         .element_size = sizeof(struct conn), .state_count = 3, .state_names = names};
 *     sxe_pool_t *pool;
 *     if ((rc = sxe_pool_create(&pool, &options)) < 0) { ... }
 *     struct conn *conns = sxe_pool_array(pool);
 *     uint32_t i = sxe_pool_set_oldest_state(pool, FREE, BUSY, now);
 *     conns[i].fd = fd;
 *
 * Time is a parameter: pass "now" in CLOCK_MONOTONIC nanoseconds (the event loop's cached now, or
 * sxe_clock_mono_ns()). An element entering a queue gets max(now, the tail's time), so each
 * queue's times never decrease even when callers' clocks are a little apart.
 *
 * Three kinds of pool:
 * - private and unlocked (flags 0): for one thread, such as an event loop. No locking at all.
 * - private and locked (SXE_POOL_LOCKED): any thread of the process may use it.
 * - shared: in memory that several processes map, each perhaps at a different address. The pool
 *   holds indices and offsets only, never pointers. Every state change is atomic under a robust
 *   process-shared mutex; if a process dies holding it, the next one to lock rebuilds the queues
 *   from each element's state field, which every operation writes in one store, so no element is
 *   ever lost or in two states. Create one with sxe_pool_attach() on a file (in /dev/shm for
 *   memory only), or with SXE_POOL_SHARED for processes forked after creation, or with
 *   sxe_pool_init() in memory you mapped yourself.
 *
 * Invalid API use (an index or state out of range, moving an element from a state it is not in)
 * asserts in debug builds and returns -EINVAL (or SXE_POOL_NONE) in release builds.
 */
#ifndef SXE_POOL_H
#define SXE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "sxe/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sxe_pool sxe_pool_t;

/** "No element": what index-returning functions give when there is none. */
#define SXE_POOL_NONE UINT32_MAX

/** The most states a pool may have. */
#define SXE_POOL_STATES_MAX 64

/** The longest pool or state name kept, without its NUL; longer names are cut. */
#define SXE_POOL_NAME_MAX 31

/** Lock every operation, so several threads of one process may use the pool. */
#define SXE_POOL_LOCKED 0x1u

/**
 * sxe_pool_create: map the pool MAP_SHARED, so processes forked afterwards share it. Implies a
 * robust process-shared lock.
 */
#define SXE_POOL_SHARED 0x2u

/** sxe_pool_attach: create the file; fail with -EEXIST if it exists. */
#define SXE_POOL_CREATE 0x4u

/** What a pool holds and how it may be used. */
struct sxe_pool_options {
    const char *name;               /**< For logs and errors; copied. */
    uint32_t count;                 /**< Number of elements, at least 1. */
    size_t element_size;            /**< sizeof your struct, at least 1. */
    unsigned state_count;           /**< 1 to SXE_POOL_STATES_MAX. */
    const char *const *state_names; /**< state_count names, copied; NULL names them "0", "1"... */
    unsigned flags;                 /**< SXE_POOL_LOCKED, SXE_POOL_SHARED. */
};

/**
 * Called by sxe_pool_check_timeouts() for an element that has outlived its state's timeout. It
 * must move the element out of that state (or touch it, to give it another full timeout). It may
 * call any pool function: no lock is held during the call.
 */
typedef void (*sxe_pool_timeout_cb_t)(sxe_pool_t *pool, uint32_t index, void *arg);

/**
 * The bytes a pool with these options needs, for sxe_pool_init(); 0 if the options are invalid.
 */
size_t sxe_pool_size(const struct sxe_pool_options *options);

/**
 * Makes a pool in memory the caller owns, for example a MAP_SHARED mapping made before fork().
 * @param pool    Set to the pool, which starts at memory.
 * @param memory  At least sxe_pool_size(options) bytes, 64-byte aligned. Need not be zeroed.
 * @param size    Its size in bytes.
 * @return 0, or -EINVAL for invalid options, a short or misaligned buffer, or -errno from the
 *         lock's initialisation. The caller frees the memory after sxe_pool_fini().
 */
SXE_MUST_CHECK int sxe_pool_init(sxe_pool_t **pool, void *memory, size_t size,
                                 const struct sxe_pool_options *options);

/** Ends a pool made by sxe_pool_init(). The memory is the caller's again. */
void sxe_pool_fini(sxe_pool_t *pool);

/**
 * Allocates and makes a pool: private to the process, or with SXE_POOL_SHARED, shared with
 * processes forked afterwards. All of its memory is reserved here and never grows.
 * @return 0, -EINVAL for invalid options, or -ENOMEM.
 */
SXE_MUST_CHECK int sxe_pool_create(sxe_pool_t **pool, const struct sxe_pool_options *options);

/** Frees a pool made by sxe_pool_create(). Elements and pointers into the array become invalid. */
void sxe_pool_destroy(sxe_pool_t *pool);

/**
 * Maps the shared pool kept in the file at path; with SXE_POOL_CREATE, creates the file (mode
 * 0600) and the pool in it. The file persists until the caller removes it. Any number of
 * processes and threads may attach, each mapping at its own address.
 * @param options  What the caller expects. Attaching checks the file's magic number, format
 *                 version, element count, element size and state count against it.
 * @return 0, or: -EINVAL for invalid options; -EEXIST (SXE_POOL_CREATE and the file exists);
 *         -ENOENT; -EPROTO if the file is not an sxe pool or of another format version;
 *         -EMSGSIZE if its sizes differ from the options; -EAGAIN if its creator has not finished
 *         making it; or another -errno from open, ftruncate or mmap. Each error is logged.
 */
SXE_MUST_CHECK int sxe_pool_attach(sxe_pool_t **pool, const char *path,
                                   const struct sxe_pool_options *options, unsigned flags);

/** Unmaps a pool mapped by sxe_pool_attach(). Other processes are unaffected. */
void sxe_pool_detach(sxe_pool_t *pool);

/** The element array: use it as ((struct yours *)sxe_pool_array(pool))[index]. 64-byte aligned. */
void *sxe_pool_array(sxe_pool_t *pool);

/** The index of the element at pointer, or SXE_POOL_NONE if it is not an element's start. */
uint32_t sxe_pool_index(sxe_pool_t *pool, const void *element);

/** The number of elements. */
uint32_t sxe_pool_capacity(const sxe_pool_t *pool);

/** The pool's name, or a state's ("?" if out of range). */
const char *sxe_pool_name(const sxe_pool_t *pool);
const char *sxe_pool_state_name(const sxe_pool_t *pool, unsigned state);

/** The number of elements in state (0 if out of range). */
uint32_t sxe_pool_count(sxe_pool_t *pool, unsigned state);

/** The state of element index, or -EINVAL if index is out of range. */
int sxe_pool_state(sxe_pool_t *pool, uint32_t index);

/**
 * Moves element index from state from to the tail of state to, stamped now.
 * @return 0, or -EINVAL if an argument is out of range or the element is not in from (a
 *         programmer error: asserts in debug builds).
 */
int sxe_pool_set_state(sxe_pool_t *pool, uint32_t index, unsigned from, unsigned to, uint64_t now);

/**
 * Moves element index from state from to state to if it is in from.
 * @return The state the element was in: from when it moved, another state when it did not, or
 *         -EINVAL if an argument is out of range. For shared pools, where another process may
 *         move an element at any time.
 */
int sxe_pool_try_set_state(sxe_pool_t *pool, uint32_t index, unsigned from, unsigned to,
                           uint64_t now);

/** Moves the oldest element of from to to. @return its index, or SXE_POOL_NONE if from is empty. */
uint32_t sxe_pool_set_oldest_state(sxe_pool_t *pool, unsigned from, unsigned to, uint64_t now);

/**
 * The oldest element of state, and its time when time_ns is not NULL.
 * @return its index, or SXE_POOL_NONE if the state is empty.
 */
uint32_t sxe_pool_oldest(sxe_pool_t *pool, unsigned state, uint64_t *time_ns);

/** The time element index entered its state or was last touched (0 if index is out of range). */
uint64_t sxe_pool_time(sxe_pool_t *pool, uint32_t index);

/** Requeues element index at the tail of its state, stamped now. @return 0 or -EINVAL. */
int sxe_pool_touch(sxe_pool_t *pool, uint32_t index, uint64_t now);

/**
 * Gives state a timeout (0 for none): sxe_pool_check_timeouts() reports elements that have been
 * in it for longer. @return 0 or -EINVAL.
 */
int sxe_pool_set_timeout(sxe_pool_t *pool, unsigned state, uint64_t timeout_ns);

/**
 * Calls expired(pool, index, arg) for every element that, at now, has been in a state with a
 * timeout for longer than that timeout, oldest first within each state. Costs O(1) per state
 * plus O(1) per expired element. A callback that leaves its element where it was is a programmer
 * error: debug builds assert; release builds touch the element and log once, so the check ends.
 * @return The number of callbacks made.
 */
unsigned sxe_pool_check_timeouts(sxe_pool_t *pool, uint64_t now, sxe_pool_timeout_cb_t expired,
                                 void *arg);

/**
 * Visits the elements of one state, oldest first. Elements may move, in this thread or another,
 * while the walk goes on: the walk never visits an element twice in one entry into the state, and
 * visits every element that stays in the state throughout. If the element last returned has moved,
 * the next step rescans the state from its head, which costs O(elements in the state).
 */
struct sxe_pool_walker {
    sxe_pool_t *pool;
    unsigned state;
    uint32_t index;    /**< The element last returned, or SXE_POOL_NONE. */
    uint64_t sequence; /**< Its place in the state's order. */
};

void sxe_pool_walker_init(struct sxe_pool_walker *walker, sxe_pool_t *pool, unsigned state);

/** The next element, or SXE_POOL_NONE at the end of the state. */
uint32_t sxe_pool_walker_next(struct sxe_pool_walker *walker);

#ifdef __cplusplus
}
#endif

#endif
