/*
 * The hash of a byte string that tables and maps key on: sxe_hash_bytes(). Every file that locates
 * a key calls it (through sxe__hash_locate() and sxe__map_hash()), so it sits apart, below them
 * all, and calls nothing of theirs. The mixing steps are base.h's, shared with the inline hash of
 * an 8-byte key, which gives the same result.
 */
#include <string.h>

#include "base/base.h"
#include "sxe/hash.h"

static inline uint64_t load64(const unsigned char *at)
{
    uint64_t word;
    memcpy(&word, at, sizeof(word));
    return word;
}

uint64_t sxe_hash_bytes(const void *data, size_t size, uint64_t seed)
{
    const unsigned char *at = data;
    uint64_t state = seed ^ sxe__hash_fold(size ^ SXE__HASH_K0, SXE__HASH_K1);

    for (; size >= 16; at += 16, size -= 16) {
        state = sxe__hash_fold(load64(at) ^ state ^ SXE__HASH_K2, load64(at + 8) ^ SXE__HASH_K3);
    }
    if (size >= 8) {
        state = sxe__hash_fold(load64(at) ^ state ^ SXE__HASH_K2, SXE__HASH_K1);
        at += 8;
        size -= 8;
    }
    if (size > 0) {
        uint64_t tail = 0;
        memcpy(&tail, at, size);
        state = sxe__hash_fold(tail ^ state ^ SXE__HASH_K3, SXE__HASH_K0);
    }
    return sxe__hash_fold(state ^ SXE__HASH_K1, SXE__HASH_K2 ^ (state >> 29));
}
