/* Placeholder until the io_uring backend lands. */
#include <errno.h>

#include "io.h"

static int uring_open(sxe_loop_t *loop)
{
    (void)loop;
    return -ENOSYS;
}

const struct sxe__io_backend sxe__io_uring = {.name = "io_uring", .open = uring_open};
