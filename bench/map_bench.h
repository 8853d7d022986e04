/*
 * What bench/map's files share: its configuration, its keys and values, and LMDB's side of the
 * comparison (map_lmdb.c).
 */
#ifndef SXE_BENCH_MAP_BENCH_H
#define SXE_BENCH_MAP_BENCH_H

#include <lmdb.h>
#include <stdbool.h>
#include <stdint.h>

#include <sxe/sxe.h>

struct config {
    uint64_t keys;
    uint64_t reads;
    uint64_t snapshot_reads;
    double seconds;
    double update_percent;
    unsigned load_percent; /* sxe_map's; 0: its default */
    bool in_place;         /* the map is SXE_MAP_IN_PLACE: read with sxe_map_get_many() */
};

struct value {
    uint64_t number, check, spare;
};

/* Ends the program on an sxe error (rc < 0) or an LMDB one (rc > 0), naming what failed. */
void die(const char *what, int rc);

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

/* Makes LMDB's environment in dir and loads config's keys in order. *seconds: the load's time. */
MDB_env *load_lmdb(const struct config *config, const char *dir, MDB_dbi *dbi, double *seconds);

/* Random reads with mdb_get(), one read transaction per snapshot batch. @return lookups/s. */
double read_lmdb(MDB_env *env, MDB_dbi dbi, const struct config *config);

/* Removes LMDB's two files and its directory. */
void remove_lmdb(const char *dir);

#endif
