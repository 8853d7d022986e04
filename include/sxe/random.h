/**
 * @file sxe/random.h
 * @brief Random bytes from the kernel (getrandom), for keys and masks.
 */
#ifndef SXE_RANDOM_H
#define SXE_RANDOM_H

#include <stddef.h>

#include "sxe/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Fills len bytes at buf from the kernel's random source (getrandom, which blocks only before the
 * kernel's pool is first seeded at boot). @return 0, or -errno (-ENOSYS on a kernel without it).
 */
SXE_MUST_CHECK int sxe_random_bytes(void *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
