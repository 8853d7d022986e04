#include <string.h>

#include "sxe/error.h"

/* errno values are small; the kernel reserves -4095..-1 for them in system call results. */
#define ERRNO_MAX 4095u

const char *sxe_strerror(int rc)
{
    unsigned err = rc < 0 ? 0u - (unsigned)rc : (unsigned)rc;

    if (err == 0) {
        return "Success";
    }
    if (err > ERRNO_MAX) {
        return "Unknown error";
    }

    /* strerrordesc_np returns a constant string, unlike strerror, so it is thread-safe. */
    const char *text = strerrordesc_np((int)err);
    return text != NULL ? text : "Unknown error";
}
