/*
 * What the base layer lends the rest of the library, the one private header other modules may
 * include (tests/build/check-layers.py holds them to it):
 * - regions: memory that may be shared with other processes, kept in a file or anonymous, used by
 *   pools, hash tables and maps, which hold offsets, never pointers, so they work wherever a
 *   process maps them;
 * - the hash's mixing steps, shared by the hash table and the map;
 * - a pool's consistency check, for the connection table's;
 * - a URL's authority, for the clients that take URLs.
 */
#ifndef SXE_BASE_INTERNAL_H
#define SXE_BASE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sxe/pool.h"

/* How every shared region (a pool, a hash table, a map) starts: SXE__REGION_HEADER checks it. */
struct sxe__region_header {
    uint64_t magic; /* written last (sxe__region_publish), so an attacher never trusts half */
    uint32_t version;
    uint32_t header_size;
    uint64_t region_size;
};

#define SXE__REGION_HEADER(type)                                                                   \
    _Static_assert(                                                                                \
        offsetof(type, magic) == offsetof(struct sxe__region_header, magic) &&                     \
            offsetof(type, version) == offsetof(struct sxe__region_header, version) &&             \
            offsetof(type, header_size) == offsetof(struct sxe__region_header, header_size) &&     \
            offsetof(type, region_size) == offsetof(struct sxe__region_header, region_size),       \
        #type " starts with a region header")

/* Makes a region whole for attachers: its magic, stored last, with release order. */
void sxe__region_publish(void *region, uint64_t magic);

/*
 * Checks that an attached region (header at region) is one of ours: made to the end, of this
 * kind (magic) and of this format (version, header_size). what names its kind in the log line
 * ("pool"), path its file. @return 0; -EAGAIN while its maker is still at work; -EPROTO (logged).
 */
int sxe__region_check(const void *region, uint64_t magic, uint32_t version, uint32_t header_size,
                      const char *what, const char *path);

/* The hash's multipliers: odd 64-bit constants with well-mixed bits (digits of pi and e). */
#define SXE__HASH_K0 0x243f6a8885a308d3ULL
#define SXE__HASH_K1 0x13198a2e03707345ULL
#define SXE__HASH_K2 0xa4093822299f31d1ULL
#define SXE__HASH_K3 0xb7e151628aed2a6bULL

/* The 128-bit product of a and b, folded to 64 bits: every input bit reaches every output bit. */
static inline uint64_t sxe__hash_fold(uint64_t a, uint64_t b)
{
    __uint128_t product = (__uint128_t)a * b;
    return (uint64_t)product ^ (uint64_t)(product >> 64);
}

/* sxe_hash_bytes() of an 8-byte key, inline: the same steps, with the size's term folded at
 * compile time. Tables mostly hold 8-byte keys, and this is most of a cached lookup's cost. */
static inline uint64_t sxe__hash_word(uint64_t word, uint64_t seed)
{
    uint64_t state = seed ^ sxe__hash_fold(8 ^ SXE__HASH_K0, SXE__HASH_K1);
    state = sxe__hash_fold(word ^ state ^ SXE__HASH_K2, SXE__HASH_K1);
    return sxe__hash_fold(state ^ SXE__HASH_K1, SXE__HASH_K2 ^ (state >> 29));
}

/* Checks a pool's lists and counts against its elements' states: 0, or -EPROTO (pool.c). */
int sxe__pool_validate(sxe_pool_t *pool);

/*
 * Maps the file at path MAP_SHARED. With create, makes the file (O_EXCL, mode 0600) and sizes it
 * to create_size; without, maps the whole file as it is and fails with -EAGAIN if it is empty
 * (its creator has not sized it yet) or -EPROTO if it is smaller than min_size. what names the
 * caller's kind ("pool", "hash") in the log line each failure writes.
 * @return 0 with *memory and *size set, or a negative errno.
 */
int sxe__region_map_file(const char *what, const char *path, bool create, size_t create_size,
                         size_t min_size, void **memory, size_t *size);

/*
 * Maps size bytes of anonymous memory, MAP_SHARED (for processes forked afterwards) or private,
 * and asks for huge pages when the region is large enough to use them (a shared one is then aligned
 * to a huge page, which sxe__region_back_huge() needs).
 * @return the memory, or NULL with the -errno in *rc after logging it.
 */
void *sxe__region_map_anonymous(const char *what, const char *name, size_t size, bool shared,
                                int *rc);

/*
 * Backs a fresh (still zero) anonymous shared region with huge pages now, where the kernel makes
 * them (MADV_COLLAPSE): its memory is then all resident, allocated here rather than page by page as
 * it is first written. A refusal is not an error.
 */
void sxe__region_back_huge(void *memory, size_t size);

/* Asks the kernel to back the region with transparent huge pages where it allows; a refusal is
 * not an error (the region works, with more TLB misses). */
void sxe__region_advise_huge(void *memory, size_t size);

/*
 * The authority of a URL, at what follows its scheme's "//", up to the first byte of ends (or the
 * end): copied into host (NUL-terminated) and written as "HOST:PORT" into upstream, with
 * default_port when it names none (the colons of an IPv6 literal, in brackets, name none).
 * @return the authority's length (where its path begins in at), or -EINVAL: no host, or too long.
 */
ssize_t sxe__url_authority(const char *at, const char *ends, unsigned default_port, char *host,
                           size_t host_size, char *upstream, size_t upstream_size);

#endif
