/*
 * Regions: the mapping code that pools, hash tables and maps share. Every call goes through the
 * system call seam, so tests can make each one fail.
 */
#define SXE_LOG_MODULE region_log
#include "sxe/log.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "region.h"
#include "sxe/error.h"
#include "sys.h"

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

void *sxe__region_map_anonymous(const char *what, const char *name, size_t size, bool shared,
                                int *rc)
{
    int sharing = shared ? MAP_SHARED : MAP_PRIVATE;
    void *memory =
        sxe__sys.mmap(NULL, size, PROT_READ | PROT_WRITE, sharing | MAP_ANONYMOUS, -1, 0);

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
