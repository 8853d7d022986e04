/*
 * Regions: the mapping code that pools, hash tables and maps share. Every call goes through the
 * system call seam, so tests can make each one fail.
 */
#define SXE_LOG_MODULE region_log
#include "sxe/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "base.h"
#include "sxe/error.h"
#include "sys.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; glibc 2.36's headers do not name it yet */
#endif

static struct sxe_log_module region_log = SXE_LOG_MODULE_INIT(REGION);

/* Below this, a huge page would be mostly empty and the advice is not worth a system call. */
#define HUGE_PAGE_BYTES (2u << 20)

int sxe__region_map_file(const char *what, const char *path, bool create, size_t create_size,
                         size_t min_size, void **memory, size_t *size)
{
    struct stat status;
    int rc = 0;
    int fd = sxe__sys.open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0600);

    if (fd < 0) {
        rc = -errno;
        SXE_LOG_ERROR("%s file %s: cannot %s it: %s", what, path, create ? "create" : "open",
                      sxe_strerror(rc));
        return rc;
    }
    if (create) {
        *size = create_size;
        if (sxe__sys.ftruncate(fd, (off_t)create_size) < 0) {
            rc = -errno;
            SXE_LOG_ERROR("%s file %s: cannot size it to %zu bytes: %s", what, path, create_size,
                          sxe_strerror(rc));
            goto out;
        }
    } else {
        if (sxe__sys.fstat(fd, &status) < 0) {
            rc = -errno;
            SXE_LOG_ERROR("%s file %s: cannot stat it: %s", what, path, sxe_strerror(rc));
            goto out;
        }
        *size = (size_t)status.st_size;
        if (*size < min_size) {
            SXE_LOG_ERROR("%s file %s is %zu bytes, too small to be a %s", what, path, *size, what);
            rc = *size == 0 ? -EAGAIN : -EPROTO;
            goto out;
        }
    }
    *memory = sxe__sys.mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (*memory == MAP_FAILED) {
        rc = -errno;
        SXE_LOG_ERROR("%s file %s: cannot map %zu bytes: %s", what, path, *size, sxe_strerror(rc));
        goto out;
    }
    sxe__region_advise_huge(*memory, *size);

out:
    sxe__sys.close(fd);
    return rc;
}

/*
 * Maps size bytes of anonymous shared memory at an address aligned to a huge page, so that the
 * kernel can map each 2 MB of it with one entry: reserves size plus a huge page of address space,
 * maps the memory over its aligned part (MAP_FIXED) and gives back the rest.
 */
static void *map_shared_aligned(size_t size)
{
    size_t reserved = size + HUGE_PAGE_BYTES;
    unsigned char *reserve = sxe__sys.mmap(NULL, reserved, PROT_NONE,
                                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    if (reserve == MAP_FAILED) {
        return MAP_FAILED;
    }
    unsigned char *aligned = (unsigned char *)(((uintptr_t)reserve + HUGE_PAGE_BYTES - 1) &
                                               ~(uintptr_t)(HUGE_PAGE_BYTES - 1));
    void *memory = sxe__sys.mmap(aligned, size, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

    if (memory == MAP_FAILED) {
        int error = errno;

        sxe__sys.munmap(reserve, reserved);
        errno = error;
        return MAP_FAILED;
    }
    /* Giving back part of a private mapping this process just made cannot fail. */
    if (aligned > reserve) {
        sxe__sys.munmap(reserve, (size_t)(aligned - reserve));
    }
    sxe__sys.munmap(aligned + size, (size_t)(reserve + reserved - (aligned + size)));
    return memory;
}

void *sxe__region_map_anonymous(const char *what, const char *name, size_t size, bool shared,
                                int *rc)
{
    void *memory = shared && size >= HUGE_PAGE_BYTES
                       ? map_shared_aligned(size)
                       : sxe__sys.mmap(NULL, size, PROT_READ | PROT_WRITE,
                                       (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);

    if (memory == MAP_FAILED) {
        *rc = -errno;
        SXE_LOG_ERROR("%s %s: cannot map %zu bytes: %s", what, name != NULL ? name : "", size,
                      sxe_strerror(*rc));
        return NULL;
    }
    sxe__region_advise_huge(memory, size);
    return memory;
}

void sxe__region_advise_huge(void *memory, size_t size)
{
    if (size >= HUGE_PAGE_BYTES && sxe__sys.madvise(memory, size, MADV_HUGEPAGE) < 0) {
        SXE_LOG_DEBUG("no transparent huge pages for %zu bytes: %s", size, sxe_strerror(-errno));
    }
}

/*
 * Anonymous shared memory is shmem, which gets huge pages on a fault only where shmem_enabled (or a
 * tmpfs's huge=) allows, and it says "never" on many systems. MADV_COLLAPSE (Linux 6.1) makes them
 * anyway unless it says "deny": a write makes each huge page's first 4 KB page present, and the
 * collapse replaces it with a whole zeroed huge page. The region is still zero, so the write
 * changes nothing. Stops at the first refusal: the rest stays on 4 KB pages.
 */
void sxe__region_back_huge(void *memory, size_t size)
{
    uintptr_t start = ((uintptr_t)memory + HUGE_PAGE_BYTES - 1) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1);
    uintptr_t end = ((uintptr_t)memory + size) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1);

    for (uintptr_t at = start; at < end; at += HUGE_PAGE_BYTES) {
        *(volatile unsigned char *)at = 0;
        if (sxe__sys.madvise((void *)at, HUGE_PAGE_BYTES, MADV_COLLAPSE) < 0) {
            SXE_LOG_DEBUG("huge pages for %zu of %zu bytes; the kernel refused the rest: %s",
                          (size_t)(at - start), size, sxe_strerror(-errno));
            return;
        }
    }
}

void sxe__region_publish(void *region, uint64_t magic)
{
    __atomic_store_n(&((struct sxe__region_header *)region)->magic, magic, __ATOMIC_RELEASE);
}

int sxe__region_check(const void *region, uint64_t magic, uint32_t version, uint32_t header_size,
                      const char *what, const char *path)
{
    const struct sxe__region_header *header = region;
    uint64_t found = __atomic_load_n(&header->magic, __ATOMIC_ACQUIRE);

    if (found == 0) {
        SXE_LOG_WARN("%s file %s is still being made by its creator", what, path);
        return -EAGAIN;
    }
    if (found != magic) {
        SXE_LOG_ERROR("%s file %s is not an sxe %s (magic %016llx)", what, path, what,
                      (unsigned long long)found);
        return -EPROTO;
    }
    if (header->version != version || header->header_size != header_size) {
        SXE_LOG_ERROR("%s file %s has format version %u (header %u bytes); this is version %u "
                      "(header %u bytes)",
                      what, path, header->version, header->header_size, version, header_size);
        return -EPROTO;
    }
    return 0;
}
