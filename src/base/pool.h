/*
 * Pool internals shared with other library files and with tests.
 */
#ifndef SXE_POOL_INTERNAL_H
#define SXE_POOL_INTERNAL_H

#include <pthread.h>

#include "base.h"
#include "sxe/pool.h"

/* The layout is internal; it is here so tests can inspect and corrupt it on purpose. */
struct sxe__pool_node {
    uint64_t time;     /* when it entered its state or was touched; never less than its prev's */
    uint64_t sequence; /* strictly increasing along each queue; orders walks and rebuilds */
    uint32_t prev;
    uint32_t next;
    uint32_t state; /* the truth: written in one store, queues can be rebuilt from it */
    uint32_t reserved;
};

struct sxe__pool_state {
    uint32_t count;
    uint32_t reserved;
    uint64_t timeout_ns;
    char name[SXE_POOL_NAME_MAX + 1];
};

struct sxe_pool {
    uint64_t magic; /* written last, so an attacher never trusts a half-made pool */
    uint32_t version;
    uint32_t header_size;
    uint64_t region_size;
    uint64_t element_size;
    uint64_t nodes_offset;
    uint64_t elements_offset;
    uint32_t count;
    uint32_t state_count;
    uint32_t flags;
    uint32_t reserved;
    uint64_t last_sequence;
    uint64_t recoveries; /* times rebuilt because a holder of the lock died */
    char name[SXE_POOL_NAME_MAX + 1];
    pthread_mutex_t lock;
    struct sxe__pool_state states[SXE_POOL_STATES_MAX];
};

/* The nodes: one per element, then one sentinel per state (index count + state). */
struct sxe__pool_node *sxe__pool_nodes(sxe_pool_t *pool);

/* Takes and releases the pool's lock (if it has one), as every operation does. For tests that
 * need to hold it, for example to die holding it. */
void sxe__pool_lock(sxe_pool_t *pool);
void sxe__pool_unlock(sxe_pool_t *pool);

#endif
