/*
 * bench/map's pages: where each side's data is mapped, in pages of which size, so that the two
 * sides are read in pages of the same kind. A row "without huge pages" maps its side's data in
 * 4 KB pages, a row "with huge pages" asks for 2 MB ones, and /proc/self/smaps says what each got.
 * Both sides' files are written through mappings that ask for huge pages, so where the file system
 * keeps large folios (ext4 on Linux 6.18 does) both page caches hold 2 MB folios; a side's two
 * rows read the same page cache, and only the page tables, and so the TLB's reach, differ.
 */
#ifndef SXE_BENCH_MAP_PAGES_H
#define SXE_BENCH_MAP_PAGES_H

#include <stdbool.h>
#include <stdint.h>

/* One mapping (one VMA) of this process: its start, its length, and the bytes of it in use. */
struct bench_mapping {
    unsigned char *start;
    uint64_t size;
    uint64_t used; /* from start: what reads touch, and what is faulted in before them */
};

/* What of a mapping is resident, and how much of that is mapped in huge pages, in MB. */
struct mapping_pages {
    double resident_mb;
    double huge_mb;
};

/*
 * Finds this process's mapping of the file at path (its first, if it maps it more than once), or
 * the one that holds address when path is NULL. Sets used to the whole mapping. @return 0, or
 * -ENOENT.
 */
int mapping_find(struct bench_mapping *mapping, const char *path, const void *address);

/* Reads /proc/self/smaps for the mapping that starts at start; zeros where it has none. */
void mapping_pages(const void *start, struct mapping_pages *pages);

/*
 * Makes a shared file mapping's page tables over again in pages of one kind: drops its page table
 * entries (MADV_DONTNEED: the file and its page cache stay as they are), advises huge pages or no
 * huge pages (MADV_HUGEPAGE or MADV_NOHUGEPAGE), and faults in its used bytes (MADV_POPULATE_READ,
 * or a read of each page), so a timed row starts with its page tables made, as a loaded store has
 * them. The kernel may still refuse huge pages: mapping_pages() says what it gave.
 */
void mapping_prepare(const struct bench_mapping *mapping, bool huge);

/* Asks for huge pages on the whole mapping, before anything is written through it. */
void mapping_advise_huge(const struct bench_mapping *mapping);

#endif
