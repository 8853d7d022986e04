/*
 * Regions: memory that may be shared with other processes, kept in a file or anonymous, used by
 * pools, hash tables and maps, which hold offsets, never pointers, so they work wherever a
 * process maps them.
 */
#ifndef SXE_REGION_INTERNAL_H
#define SXE_REGION_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

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

#endif
