/*
 * bench/map's floors: what the memory system gives one core with no map at all, measured in the
 * same run as the map, so the map's figures can be read against them.
 *   - random reads of one 64-byte line each, 32 in flight (no lookup of one line can beat them);
 *   - a plain update: random read-modify-writes of one line each, 32 in flight, once for each put
 *     and once again for the reclaim (no multi-version update whose new version lands in another
 *     line than the old one, which is reclaimed later, can beat it);
 *   - an update in place: random read-modify-writes of one line each, with the next three lines
 *     prefetched, 16 in flight, and a record appended to a log for each (SXE_MAP_IN_PLACE's least);
 *   - a plain writer: a process on the other core doing plain updates at the map writer's pace,
 *     for what any writer costs the readers' latency.
 * Plain updates write back the value they read, so they may run over a live map's own file.
 */
#ifndef SXE_BENCH_MAP_FLOOR_H
#define SXE_BENCH_MAP_FLOOR_H

#include <stdbool.h>
#include <stdint.h>

/* Memory to measure: anonymous (shared or private, asking for huge pages) or a file, mapped. */
struct floor_memory {
    unsigned char *bytes;
    uint64_t size;
};

uint64_t floor_random_next(uint64_t *state);

/* Maps and fills size bytes of anonymous memory; private ones ask for transparent huge pages. */
void floor_map_anonymous(struct floor_memory *memory, uint64_t size, bool shared);

/* Maps the file at path, shared, asking for huge pages; writable if writable. */
void floor_map_file(struct floor_memory *memory, const char *path, bool writable);

void floor_unmap(struct floor_memory *memory);

/* Random 64-byte reads, 32 prefetched ahead as sxe_map_find_many does. @return reads/s. */
double floor_random_reads(const struct floor_memory *memory, uint64_t reads);

/*
 * A plain update of puts random lines: each read and written back (the put), then each again in
 * the same order (the reclaim), 32 prefetched ahead. @return its time in ns; *put_ns the first
 * pass's.
 */
uint64_t floor_update(const struct floor_memory *memory, uint64_t puts, uint64_t *state,
                      uint64_t *put_ns);

/*
 * An update in place: puts random lines, each read and written back with the three lines after it
 * prefetched too, 16 ahead (as sxe_map_put_many() reads a put's probe in place), and a 64-byte
 * record of what it held appended to a ring in the last log_bytes of memory (the old value a put in
 * place keeps). No update in place can do less. @return its time in ns.
 */
uint64_t floor_update_in_place(const struct floor_memory *memory, uint64_t log_bytes, uint64_t puts,
                               uint64_t *state);

/* Orders uint64_t samples, for qsort(). */
int floor_compare_u64(const void *a, const void *b);

/* What the plain writer reports back, in memory shared with it: its last FLOOR_SAMPLES updates. */
#define FLOOR_SAMPLES 4096
struct floor_writer {
    uint64_t stop;
    uint64_t updates;
    uint64_t update_ns[FLOOR_SAMPLES];
    uint64_t put_ns[FLOOR_SAMPLES];
};

/*
 * Forks the plain writer, pinned to CPU 1: plain updates of puts lines in memory, one every
 * period_ns (or back to back where one takes longer), until floor_writer_stop(). @return its pid.
 */
int floor_writer_start(struct floor_writer *writer, const struct floor_memory *memory,
                       uint64_t puts, uint64_t period_ns);

/* Stops the plain writer and waits for it; sorts its samples. @return its update count. */
uint64_t floor_writer_stop(struct floor_writer *writer, int pid);

#endif
