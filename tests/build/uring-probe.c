/*
 * Exits 0 if this machine can set up the io_uring the backend asks for (single issuer, deferred
 * task work: Linux 6.1), else 1. CMake runs it to decide whether the tests also run on io_uring.
 */
#define _GNU_SOURCE
#include <linux/io_uring.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
    struct io_uring_params params;

    memset(&params, 0, sizeof(params));
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int fd = (int)syscall(SYS_io_uring_setup, 8, &params);
    if (fd < 0) {
        return 1;
    }
    close(fd);
    return 0;
}
