/*
 * The harness of the pool tests (test_pool*.c): the states, a pool of them, the teardown that
 * puts the seam and the clock back, and a count of open descriptors. Static inline, so a test
 * program that does not use a helper is not warned about it.
 */
#ifndef SXE_POOL_TEST_H
#define SXE_POOL_TEST_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool.h"
#include "sxe/clock.h"
#include "sxe_test.h"
#include "sys.h"

enum { FREE, IDLE, BUSY, STATE_COUNT };
static const char *const state_names[] = {"FREE", "IDLE", "BUSY"};

struct conn {
    int fd;
    uint32_t owner;
    uint64_t uses;
};

static inline struct sxe_pool_options options(uint32_t count, unsigned flags)
{
    return (struct sxe_pool_options){.name = "conns",
                                     .count = count,
                                     .element_size = sizeof(struct conn),
                                     .state_count = STATE_COUNT,
                                     .state_names = state_names,
                                     .flags = flags};
}

static inline sxe_pool_t *make_pool(uint32_t count, unsigned flags)
{
    struct sxe_pool_options opts = options(count, flags);
    sxe_pool_t *pool = NULL;

    assert_int_equal(sxe_pool_create(&pool, &opts), 0);
    assert_int_equal(sxe__pool_validate(pool), 0);
    return pool;
}

static inline int reset(void **state)
{
    (void)state;
    sxe__sys_reset();
    sxe_log_set_sink(NULL, NULL);
    return 0;
}

static inline unsigned open_fds(void)
{
    unsigned count = 0;
    DIR *dir = opendir("/proc/self/fd");

    assert_non_null(dir);
    while (readdir(dir) != NULL) {
        count++;
    }
    closedir(dir);
    return count;
}

/* Takes element index out of its queue, as an operation interrupted half-way would leave it. */
static inline void unlink_node(sxe_pool_t *pool, uint32_t index)
{
    struct sxe__pool_node *nodes = sxe__pool_nodes(pool);

    nodes[nodes[index].prev].next = nodes[index].next;
    nodes[nodes[index].next].prev = nodes[index].prev;
}

#endif
