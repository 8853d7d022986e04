/*
 * Random bytes from the kernel, through the system call seam (so tests can take them away).
 */
#include <errno.h>

#include "sxe/random.h"
#include "sys.h"

int sxe_random_bytes(void *buf, size_t len)
{
    unsigned char *bytes = buf;

    while (len > 0) {
        ssize_t got = sxe__sys.getrandom(bytes, len, 0);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            return got < 0 ? -errno : -EIO;
        }
        bytes += got;
        len -= (size_t)got;
    }
    return 0;
}
