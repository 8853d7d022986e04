/* bench/map's pages (map_pages.h): mappings found in /proc/self/maps, counted in smaps. */
#define _GNU_SOURCE /* MADV_POPULATE_READ */
#include "map_pages.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

/* A line of /proc/self/maps: "start-end perms offset dev inode   path". */
static bool parse_maps_line(const char *line, uintptr_t *start, uintptr_t *end, const char **path)
{
    int path_at = 0;

    if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", start, end, &path_at) < 2) {
        return false;
    }
    *path = path_at > 0 ? line + path_at : "";
    return true;
}

int mapping_find(struct bench_mapping *mapping, const char *path, const void *address)
{
    char resolved[PATH_MAX] = "";
    char line[PATH_MAX + 128];
    FILE *maps = fopen("/proc/self/maps", "r");
    int rc = -ENOENT;

    /* The kernel names a mapping by its file's absolute path, with symbolic links resolved. */
    if (maps == NULL || (path != NULL && realpath(path, resolved) == NULL)) {
        if (maps != NULL) {
            fclose(maps);
        }
        return -ENOENT;
    }
    while (rc != 0 && fgets(line, sizeof(line), maps) != NULL) {
        uintptr_t start, end;
        const char *name;
        line[strcspn(line, "\n")] = '\0';
        if (!parse_maps_line(line, &start, &end, &name)) {
            continue;
        }
        bool match = path != NULL ? strcmp(name, resolved) == 0
                                  : (uintptr_t)address >= start && (uintptr_t)address < end;
        if (match) {
            *mapping = (struct bench_mapping){(unsigned char *)start, end - start, end - start};
            rc = 0;
        }
    }
    fclose(maps);
    return rc;
}

void mapping_pages(const void *start, struct mapping_pages *pages)
{
    char line[PATH_MAX + 128];
    FILE *smaps = fopen("/proc/self/smaps", "r");
    bool inside = false;
    double kb;

    *pages = (struct mapping_pages){0, 0};
    while (smaps != NULL && fgets(line, sizeof(line), smaps) != NULL) {
        uintptr_t vma_start, vma_end;
        const char *name;
        /* A mapping's line starts "start-end"; no field's name ("Rss:", ...) parses so. */
        if (parse_maps_line(line, &vma_start, &vma_end, &name)) {
            inside = vma_start == (uintptr_t)start;
        } else if (!inside) {
            continue;
        } else if (sscanf(line, "Rss: %lf kB", &kb) == 1) {
            pages->resident_mb += kb / 1024;
        } else if (sscanf(line, "AnonHugePages: %lf kB", &kb) == 1 ||
                   sscanf(line, "ShmemPmdMapped: %lf kB", &kb) == 1 ||
                   sscanf(line, "FilePmdMapped: %lf kB", &kb) == 1) {
            pages->huge_mb += kb / 1024;
        }
    }
    if (smaps != NULL) {
        fclose(smaps);
    }
}

void mapping_advise_huge(const struct bench_mapping *mapping)
{
    if (madvise(mapping->start, mapping->size, MADV_HUGEPAGE) < 0) {
        fprintf(stderr, "map: no huge pages advised for %llu bytes: %s\n",
                (unsigned long long)mapping->size, strerror(errno));
    }
}

void mapping_prepare(const struct bench_mapping *mapping, bool huge)
{
    if (madvise(mapping->start, mapping->size, MADV_DONTNEED) < 0 ||
        madvise(mapping->start, mapping->size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) < 0) {
        fprintf(stderr, "map: cannot remap %llu bytes in %s pages: %s\n",
                (unsigned long long)mapping->size, huge ? "huge" : "small", strerror(errno));
        exit(1);
    }
    if (madvise(mapping->start, mapping->used, MADV_POPULATE_READ) == 0) {
        return;
    }
    /* Before Linux 5.14: a read of each page faults it in the same way. */
    volatile const unsigned char *bytes = mapping->start;
    long page = sysconf(_SC_PAGESIZE);
    for (uint64_t at = 0; at < mapping->used; at += (uint64_t)page) {
        (void)bytes[at];
    }
}
