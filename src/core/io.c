/*
 * Choosing the backend: the program's choice (sxe_loop_options.backend), or, for a program that
 * leaves it alone, the environment's (SXE_BACKEND=epoll|io_uring|auto), so every program and test
 * runs on either without a change. Automatic means io_uring where it can be set up, else epoll.
 */
#define SXE_LOG_MODULE io_log
#include "sxe/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "loop.h"

static struct sxe_log_module io_log = SXE_LOG_MODULE_INIT(IO);

/* The backend a program that left the choice alone gets: SXE_BACKEND, else epoll. */
static int backend_from_environment(enum sxe_backend *backend)
{
    const char *name = getenv("SXE_BACKEND");

    if (name == NULL || *name == '\0' || strcmp(name, "epoll") == 0) {
        *backend = SXE_BACKEND_EPOLL;
    } else if (strcmp(name, "io_uring") == 0) {
        *backend = SXE_BACKEND_IO_URING;
    } else if (strcmp(name, "auto") == 0) {
        *backend = SXE_BACKEND_AUTO;
    } else {
        SXE_LOG_ERROR("SXE_BACKEND=%s: expected epoll, io_uring or auto", name);
        return -EINVAL;
    }
    return 0;
}

int sxe__io_open(sxe_loop_t *loop)
{
    enum sxe_backend backend = loop->options.backend;
    int rc;

    if (backend == SXE_BACKEND_DEFAULT && (rc = backend_from_environment(&backend)) < 0) {
        return rc;
    }
    if (backend != SXE_BACKEND_EPOLL) {
        loop->io = &sxe__io_uring;
        if ((rc = loop->io->open(loop)) == 0 || backend == SXE_BACKEND_IO_URING) {
            if (rc < 0) {
                SXE_LOG_ERROR("the io_uring backend was asked for and cannot be set up: %s",
                              sxe_strerror(rc));
            }
            return rc;
        }
        SXE_LOG_ONCE(SXE_LOG_LEVEL_WARN, "io_uring cannot be set up (%s): using epoll",
                     sxe_strerror(rc));
    }
    loop->io = &sxe__io_epoll;
    return loop->io->open(loop);
}
