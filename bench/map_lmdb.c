/* bench/map's LMDB side: the same keys and values in an LMDB environment, read the same way. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "map_bench.h"
#include "map_floor.h"
#include "map_report.h"

/*
 * LMDB's map as the map's: the map asks for huge pages on its file before it is written
 * (src/base/region.c), so LMDB's map is asked for them too, before the load writes its pages. LMDB
 * does not say where its map is (mdb_env_info()'s me_mapaddr is only set with MDB_FIXEDMAP), so it
 * is found by its file's name.
 */
static void advise_huge(const char *dir, struct bench_mapping *mapping)
{
    char path[PATH_MAX];

    snprintf(path, sizeof(path), "%s/data.mdb", dir);
    if (mapping_find(mapping, path, NULL) < 0) {
        fprintf(stderr, "map: cannot find LMDB's map of %s in /proc/self/maps\n", path);
        exit(1);
    }
    mapping_advise_huge(mapping);
}

MDB_env *load_lmdb(const struct config *config, const char *dir, MDB_dbi *dbi, double *seconds,
                   struct bench_mapping *mapping)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_envinfo info;
    MDB_stat stat;
    int rc;

    if ((rc = mdb_env_create(&env)) != 0 ||
        (rc = mdb_env_set_mapsize(env, config->keys * 128 + (64u << 20))) != 0 ||
        (rc = mdb_env_open(env, dir, MDB_NOSYNC | MDB_WRITEMAP, 0600)) != 0) {
        die("mdb_env_open", rc);
    }
    advise_huge(dir, mapping);
    uint64_t start = sxe_clock_mono_ns();
    if ((rc = mdb_txn_begin(env, NULL, 0, &txn)) != 0 || (rc = mdb_dbi_open(txn, NULL, 0, dbi))) {
        die("mdb_txn_begin", rc);
    }
    for (uint64_t i = 0; i < config->keys; i++) {
        uint64_t key = key_of(i);
        struct value value = value_of(i, 0);
        MDB_val key_val = {sizeof(key), &key}, data_val = {sizeof(value), &value};
        if ((rc = mdb_put(txn, *dbi, &key_val, &data_val, MDB_APPEND)) != 0) {
            die("mdb_put", rc);
        }
        if (i % 65536 == 0 && progress_due()) {
            progress("loading lmdb: %.1f of %.1f million keys", (double)i / 1e6,
                     (double)config->keys / 1e6);
        }
    }
    if ((rc = mdb_txn_commit(txn)) != 0) {
        die("mdb_txn_commit", rc);
    }
    *seconds = seconds_since(start);
    if ((rc = mdb_env_info(env, &info)) != 0 || (rc = mdb_env_stat(env, &stat)) != 0) {
        die("mdb_env_info", rc);
    }
    mapping->used = (uint64_t)(info.me_last_pgno + 1) * stat.ms_psize;
    return env;
}

double read_lmdb(MDB_env *env, MDB_dbi dbi, const struct config *config)
{
    uint64_t state = 88172645463325252ULL, found = 0, sum = 0;
    MDB_txn *txn;
    int rc;

    if ((rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn)) != 0) {
        die("mdb_txn_begin", rc);
    }
    mdb_txn_reset(txn);
    uint64_t start = sxe_clock_mono_ns();
    for (uint64_t done = 0; done < config->reads;) {
        if ((rc = mdb_txn_renew(txn)) != 0) {
            die("mdb_txn_renew", rc);
        }
        for (uint64_t i = 0; i < config->snapshot_reads && done < config->reads; i++, done++) {
            uint64_t key = key_of(floor_random_next(&state) % config->keys);
            MDB_val key_val = {sizeof(key), &key}, data_val;
            if (mdb_get(txn, dbi, &key_val, &data_val) == 0) {
                found++;
                sum += ((const struct value *)data_val.mv_data)->number;
            }
        }
        mdb_txn_reset(txn);
        progress_reads(done, config->reads);
    }
    double rate = (double)config->reads / seconds_since(start);
    mdb_txn_abort(txn);
    if (found != config->reads || sum == 0) {
        fprintf(stderr, "map: mdb_get found %llu of %llu\n", (unsigned long long)found,
                (unsigned long long)config->reads);
        exit(1);
    }
    return rate;
}

void remove_lmdb(const char *dir)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/data.mdb", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/lock.mdb", dir);
    unlink(path);
    rmdir(dir);
}
