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
#include "map_pages.h"

struct config {
    uint64_t keys;
    uint64_t reads; /* per row and round */
    uint64_t snapshot_reads;
    double seconds;
    double update_percent;
    unsigned load_percent; /* sxe_map's; 0: its default */
    unsigned rounds;
    bool in_place;   /* the map is SXE_MAP_IN_PLACE: read with sxe_map_get_many() */
    bool json;       /* --json: one JSON document on stdout, everything else on stderr */
    bool reads_only; /* --reads-only: the comparison's rounds, not the writer's phases */
    bool quick;      /* --quick: smaller defaults, for a run of a minute or two */
    const char *dir; /* where the files go */
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

/*
 * Reads a private map batched, which gets transparent huge pages where the system allows, and its
 * floor, then frees it.
 */
void read_private_map(const struct config *config);

/* Updates a private SXE_MAP_IN_PLACE map alone, against its floor, then frees it. */
void update_private_in_place(const struct config *config);

/*
 * Reads a map in anonymous shared memory, as forked processes share it, with and without a
 * writer, then frees it; with in_place, an SXE_MAP_IN_PLACE one, also updated alone.
 */
void read_anonymous_shared_map(const struct config *shared_config, bool in_place);

/*
 * The reader's latency idle, under a writer process, idle again, and under a plain writer in
 * memory (the floor, map_floor.h); the writers' updates.
 */
void latency_phases(sxe_map_t *map, const struct config *config, const char *where,
                    const struct floor_memory *memory);

/* What the comparison's rows read: the map in its file, LMDB, and the map's file mapped again. */
struct read_sides {
    sxe_map_t *map;
    struct bench_mapping map_mapping;
    MDB_env *env;
    MDB_dbi dbi;
    struct bench_mapping lmdb_mapping;
    struct floor_memory floor;
    struct bench_mapping floor_mapping;
};

/* The headline pair's rows (map_report.h's), and whether each side got the huge pages asked for. */
struct read_outcome {
    int headline_sxe;
    int headline_lmdb;
    int headline_ratio; /* the pair's ratio, round by round */
    bool sxe_huge;
    bool lmdb_huge;
    char why[400];
};

/* The comparison's rounds (map_rounds.c): every row once a round, rounds interleaved. */
void read_rounds(const struct config *config, const struct read_sides *sides,
                 struct read_outcome *outcome);

/*
 * Makes LMDB's environment in dir, asks for huge pages on its map, and loads config's keys in
 * order. *seconds: the load's time; *mapping: its map, and the bytes of it that hold pages.
 */
MDB_env *load_lmdb(const struct config *config, const char *dir, MDB_dbi *dbi, double *seconds,
                   struct bench_mapping *mapping);

/* Random reads with mdb_get(), one read transaction per snapshot batch. @return lookups/s. */
double read_lmdb(MDB_env *env, MDB_dbi dbi, const struct config *config);

/* Removes LMDB's two files and its directory. */
void remove_lmdb(const char *dir);

#endif
