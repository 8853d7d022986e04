/*
 * bench/map's floors (map_floor.h): random reads, plain updates and a plain writer, over
 * anonymous memory or a file, with no map at all.
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include "map_floor.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sxe/sxe.h>

#define IN_FLIGHT 32

/* An update in place: puts in flight, and the lines of each one prefetched (map_put_many.c). */
#define IN_PLACE_AHEAD 16
#define IN_PLACE_LINES 4

static void fail(const char *what)
{
    fprintf(stderr, "map: %s: %s\n", what, strerror(errno));
    exit(1);
}

uint64_t floor_random_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dULL;
}

/*
 * Shared memory as sxe's regions make it (src/base/region.c): at an address aligned to 2 MB, each
 * whole 2 MB of it made a huge page with MADV_COLLAPSE where the kernel does (shmem_enabled "never"
 * gives none on a fault), so that the floor is read in memory of the same kind as the map's.
 */
static unsigned char *map_shared_huge(uint64_t size)
{
    uint64_t huge = 2u << 20;
    unsigned char *reserve =
        mmap(NULL, size + huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reserve == MAP_FAILED) {
        fail("mmap");
    }
    unsigned char *bytes = (unsigned char *)(((uintptr_t)reserve + huge - 1) & ~(huge - 1));
    if (mmap(bytes, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
        bytes) {
        fail("mmap");
    }
    if (bytes > reserve) {
        munmap(reserve, (size_t)(bytes - reserve));
    }
    munmap(bytes + size, (size_t)(reserve + size + huge - (bytes + size)));
    for (uint64_t at = 0; at + huge <= size; at += huge) {
        bytes[at] = 0;
        if (madvise(bytes + at, huge, 25 /* MADV_COLLAPSE */) < 0) {
            break; /* the rest on 4 KB pages, as the map's would be */
        }
    }
    return bytes;
}

void floor_map_anonymous(struct floor_memory *memory, uint64_t size, bool shared)
{
    memory->size = size;
    if (shared) {
        memory->bytes = map_shared_huge(size);
    } else {
        memory->bytes =
            mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (memory->bytes == MAP_FAILED) {
            fail("mmap");
        }
        madvise(memory->bytes, size, MADV_HUGEPAGE);
    }
    memset(memory->bytes, 1, size);
}

void floor_map_file(struct floor_memory *memory, const char *path, bool writable)
{
    int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    struct stat st;

    if (fd < 0 || fstat(fd, &st) < 0) {
        fail("open the map's file");
    }
    memory->size = (uint64_t)st.st_size;
    memory->bytes =
        mmap(NULL, memory->size, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
    if (memory->bytes == MAP_FAILED) {
        fail("mmap the map's file");
    }
    madvise(memory->bytes, memory->size, MADV_HUGEPAGE);
    close(fd);
}

void floor_unmap(struct floor_memory *memory)
{
    munmap(memory->bytes, memory->size);
}

double floor_random_reads(const struct floor_memory *memory, uint64_t reads)
{
    uint64_t lines = memory->size / 64, state = 0x9e3779b97f4a7c15ULL, sum = 0;
    const unsigned char *ring[IN_FLIGHT];
    uint64_t start = sxe_clock_mono_ns();

    for (uint64_t i = 0; i < reads + IN_FLIGHT; i++) {
        if (i >= IN_FLIGHT) {
            sum += *(const volatile uint64_t *)ring[i % IN_FLIGHT];
        }
        ring[i % IN_FLIGHT] = memory->bytes + floor_random_next(&state) % lines * 64;
        __builtin_prefetch(ring[i % IN_FLIGHT]);
    }
    double rate = (double)reads / ((double)(sxe_clock_mono_ns() - start) / 1e9);
    return sum == 0 ? 0 : rate;
}

/* One pass: count random lines from *state on, each read and written back, 32 ahead. */
static void read_and_write_back(const struct floor_memory *memory, uint64_t count, uint64_t *state)
{
    uint64_t lines = memory->size / 64;
    volatile uint64_t *ring[IN_FLIGHT];

    for (uint64_t i = 0; i < count + IN_FLIGHT; i++) {
        if (i >= IN_FLIGHT) {
            volatile uint64_t *line = ring[i % IN_FLIGHT];
            *line = *line; /* the same value: a live map's file stays as it is */
        }
        if (i < count) {
            ring[i % IN_FLIGHT] =
                (volatile uint64_t *)(memory->bytes + floor_random_next(state) % lines * 64);
            __builtin_prefetch((const void *)ring[i % IN_FLIGHT], 1, 3);
        }
    }
}

uint64_t floor_update(const struct floor_memory *memory, uint64_t puts, uint64_t *state,
                      uint64_t *put_ns)
{
    uint64_t replay = *state;
    uint64_t start = sxe_clock_mono_ns();

    read_and_write_back(memory, puts, state);
    *put_ns = sxe_clock_mono_ns() - start;
    read_and_write_back(memory, puts, &replay);
    return sxe_clock_mono_ns() - start;
}

uint64_t floor_update_in_place(const struct floor_memory *memory, uint64_t log_bytes, uint64_t puts,
                               uint64_t *state)
{
    uint64_t lines = (memory->size - log_bytes) / 64 - (IN_PLACE_LINES - 1);
    uint64_t records = log_bytes / 64;
    volatile uint64_t *log = (volatile uint64_t *)(memory->bytes + memory->size - log_bytes);
    volatile uint64_t *ring[IN_PLACE_AHEAD];
    uint64_t record = *state % records; /* the log goes on from anywhere */
    uint64_t start = sxe_clock_mono_ns();

    for (uint64_t i = 0; i < puts + IN_PLACE_AHEAD; i++) {
        if (i >= IN_PLACE_AHEAD) {
            volatile uint64_t *line = ring[i % IN_PLACE_AHEAD];
            for (unsigned word = 0; word < 8; word++) {
                log[record * 8 + word] = line[word];
            }
            record = record + 1 == records ? 0 : record + 1;
            line[1] = line[1]; /* the same value: the memory stays as it is */
        }
        if (i < puts) {
            unsigned char *at = memory->bytes + floor_random_next(state) % lines * 64;
            ring[i % IN_PLACE_AHEAD] = (volatile uint64_t *)at;
            for (unsigned next = 0; next < IN_PLACE_LINES; next++) {
                __builtin_prefetch(at + next * 64, 1, 3);
            }
        }
    }
    return sxe_clock_mono_ns() - start;
}

static void run_writer(struct floor_writer *writer, const struct floor_memory *memory,
                       uint64_t puts, uint64_t period_ns)
{
    uint64_t state = 0x2545f4914f6cdd1dULL;
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(1, &set);
    sched_setaffinity(0, sizeof(set), &set);
    while (!__atomic_load_n(&writer->stop, __ATOMIC_RELAXED)) {
        uint64_t start = sxe_clock_mono_ns(), put_ns;
        uint64_t took = floor_update(memory, puts, &state, &put_ns);
        uint64_t at = writer->updates % FLOOR_SAMPLES;
        writer->update_ns[at] = took;
        writer->put_ns[at] = put_ns;
        __atomic_store_n(&writer->updates, writer->updates + 1, __ATOMIC_RELEASE);
        while (sxe_clock_mono_ns() - start < period_ns &&
               !__atomic_load_n(&writer->stop, __ATOMIC_RELAXED)) {
            struct timespec pause = {0, 100000};
            nanosleep(&pause, NULL);
        }
    }
    _exit(0);
}

int floor_writer_start(struct floor_writer *writer, const struct floor_memory *memory,
                       uint64_t puts, uint64_t period_ns)
{
    memset(writer, 0, sizeof(*writer));
    pid_t pid = fork();
    if (pid < 0) {
        fail("fork");
    }
    if (pid == 0) {
        run_writer(writer, memory, puts, period_ns);
    }
    while (__atomic_load_n(&writer->updates, __ATOMIC_ACQUIRE) == 0) {
        usleep(1000);
    }
    return pid;
}

int floor_compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

uint64_t floor_writer_stop(struct floor_writer *writer, int pid)
{
    int status;

    __atomic_store_n(&writer->stop, 1, __ATOMIC_RELAXED);
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "map: the plain writer failed\n");
        exit(1);
    }
    uint64_t count = writer->updates < FLOOR_SAMPLES ? writer->updates : FLOOR_SAMPLES;
    qsort(writer->update_ns, count, sizeof(uint64_t), floor_compare_u64);
    qsort(writer->put_ns, count, sizeof(uint64_t), floor_compare_u64);
    return count;
}
