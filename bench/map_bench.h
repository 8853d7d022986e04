/*
 * What bench/map's files share: its configuration, its keys and values, the map's reads
 * (map_reads.c), its writer's phases (map_writer.c) and LMDB's side of the comparison
 * (map_lmdb.c).
 */
#ifndef SXE_BENCH_MAP_BENCH_H
#define SXE_BENCH_MAP_BENCH_H

#include <lmdb.h>
#include <stdbool.h>
#include <stdint.h>

#include <sxe/sxe.h>

#include "map_floor.h"

struct config {
    uint64_t keys;
    uint64_t reads;
    uint64_t snapshot_reads;
    double seconds;
    double update_percent;
    unsigned load_percent; /* sxe_map's; 0: its default */
    bool in_place;         /* the map is SXE_MAP_IN_PLACE: read with sxe_map_get_many() */
};

/* Keys a batched lookup (sxe_map_find_many) asks for in one call, and a latency sample's lookups.
 */
#define LATENCY_BATCH 64

struct value {
    uint64_t number, check, spare;
};

/* Ends the program on an sxe error (rc < 0) or an LMDB one (rc > 0), naming what failed. */
void die(const char *what, int rc);

/* Pins the calling process to one CPU, or says why it cannot. */
void pin_to_cpu(int cpu);

/* Key i: big-endian, so memcmp order (LMDB's) is numeric order. */
static inline uint64_t key_of(uint64_t i)
{
    return __builtin_bswap64(i);
}

static inline struct value value_of(uint64_t i, uint64_t version)
{
    return (struct value){i, i ^ 0x5555555555555555ULL, version};
}

static inline double seconds_since(uint64_t start_ns)
{
    return (double)(sxe_clock_mono_ns() - start_ns) / 1e9;
}

/* Makes and fills a map: anonymous (flags: SXE_MAP_SHARED or 0), or in the file at path. */
sxe_map_t *load_map(const struct config *config, unsigned flags, const char *path, double *seconds);

/* Random reads with sxe_map_find(), one key at a time. @return lookups/s. */
double read_map_one_by_one(sxe_map_t *map, const struct config *config);

/*
 * Looks up count (at most LATENCY_BATCH) random keys with one sxe_map_find_many(), or for an
 * in-place map one sxe_map_get_many() that copies the values out. @return how many it found.
 */
size_t find_random(const struct sxe_map_reader *reader, const struct config *config,
                   uint64_t *state, size_t count);

/* Random reads with sxe_map_find_many(), 64 keys a call. @return lookups/s. */
double read_map_batched(sxe_map_t *map, const struct config *config);

/* Reads a private map, which gets transparent huge pages where the system allows, then frees it. */
void read_private_map(const struct config *config, double lmdb_rate);

/* Updates a private SXE_MAP_IN_PLACE map alone, against its floor, then frees it. */
void update_private_in_place(const struct config *config);

/*
 * Reads a map in anonymous shared memory, as forked processes share it, with and without a
 * writer, then frees it; with in_place, an SXE_MAP_IN_PLACE one, also updated alone.
 */
void read_anonymous_shared_map(const struct config *shared_config, double lmdb_rate, bool in_place);

/*
 * The reader's latency idle, under a writer process, idle again, and under a plain writer in
 * memory (the floor, map_floor.h); the writers' updates.
 */
void latency_phases(sxe_map_t *map, const struct config *config, const char *where,
                    const struct floor_memory *memory);

/* Makes LMDB's environment in dir and loads config's keys in order. *seconds: the load's time. */
MDB_env *load_lmdb(const struct config *config, const char *dir, MDB_dbi *dbi, double *seconds);

/* Random reads with mdb_get(), one read transaction per snapshot batch. @return lookups/s. */
double read_lmdb(MDB_env *env, MDB_dbi dbi, const struct config *config);

/* Removes LMDB's two files and its directory. */
void remove_lmdb(const char *dir);

#endif
