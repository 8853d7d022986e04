/* bench/map's sxe_map side: loading a map and reading it, one key at a time or in batches. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <sxe/sxe.h>

#include "map_bench.h"
#include "map_floor.h"
#include "map_report.h"

/* Makes and fills a map: anonymous (flags: SXE_MAP_SHARED or 0), or in the file at path. */
sxe_map_t *load_map(const struct config *config, unsigned flags, const char *path, double *seconds)
{
    struct sxe_map_options options = {.name = "bench",
                                      .capacity = config->keys,
                                      .key_size = 8,
                                      .value_size = sizeof(struct value),
                                      .load_percent = config->load_percent,
                                      .seed = 0x1234567,
                                      .flags = flags};
    sxe_map_t *map;
    int rc;

    if ((rc = path != NULL ? sxe_map_attach(&map, path, &options, SXE_MAP_CREATE)
                           : sxe_map_create(&map, &options)) < 0) {
        die(path != NULL ? "sxe_map_attach" : "sxe_map_create", rc);
    }
    uint64_t start = sxe_clock_mono_ns();
    if ((rc = sxe_map_write_begin(map)) < 0) {
        die("sxe_map_write_begin", rc);
    }
    for (uint64_t i = 0; i < config->keys; i++) {
        uint64_t key = key_of(i);
        struct value value = value_of(i, 0);
        if ((rc = sxe_map_put(map, &key, sizeof(key), &value, sizeof(value))) != 0) {
            die("sxe_map_put", rc);
        }
        if (i % 65536 == 0 && progress_due()) {
            progress("loading sxe_map: %.1f of %.1f million keys", (double)i / 1e6,
                     (double)config->keys / 1e6);
        }
    }
    if ((rc = sxe_map_commit(map)) < 0) {
        die("sxe_map_commit", rc);
    }
    *seconds = seconds_since(start);
    return map;
}

/* Random reads with sxe_map_find(), one key at a time. @return lookups/s. */
double read_map_one_by_one(sxe_map_t *map, const struct config *config)
{
    struct sxe_map_reader reader;
    uint64_t state = 88172645463325252ULL, found = 0, sum = 0;
    uint64_t start = sxe_clock_mono_ns();

    for (uint64_t done = 0; done < config->reads;) {
        if (sxe_map_read_begin(map, &reader) < 0) {
            die("sxe_map_read_begin", -ENOBUFS);
        }
        for (uint64_t i = 0; i < config->snapshot_reads && done < config->reads; i++, done++) {
            uint64_t index = floor_random_next(&state) % config->keys;
            uint64_t key = key_of(index);
            const struct value *value = sxe_map_find(&reader, &key, sizeof(key), NULL);
            if (value != NULL) {
                found++;
                sum += value->number;
            }
        }
        sxe_map_read_end(&reader);
        progress_reads(done, config->reads);
    }
    double rate = (double)config->reads / seconds_since(start);
    if (found != config->reads || sum == 0) {
        fprintf(stderr, "map: sxe_map_find found %llu of %llu\n", (unsigned long long)found,
                (unsigned long long)config->reads);
        exit(1);
    }
    return rate;
}

/*
 * Looks up count random keys with one sxe_map_find_many(), or for an in-place map one
 * sxe_map_get_many() that copies the values out. @return how many it found.
 */
size_t find_random(const struct sxe_map_reader *reader, const struct config *config,
                   uint64_t *state, size_t count)
{
    uint64_t keys[LATENCY_BATCH];
    const void *key_pointers[LATENCY_BATCH];
    const void *values[LATENCY_BATCH];
    struct value copies[LATENCY_BATCH];

    for (size_t i = 0; i < count; i++) {
        keys[i] = key_of(floor_random_next(state) % config->keys);
        key_pointers[i] = &keys[i];
    }
    if (config->in_place) {
        return sxe_map_get_many(reader, count, key_pointers, NULL, copies, sizeof(copies[0]), NULL);
    }
    return sxe_map_find_many(reader, count, key_pointers, NULL, values, NULL);
}

/* Random reads with sxe_map_find_many(), 64 keys a call. @return lookups/s. */
double read_map_batched(sxe_map_t *map, const struct config *config)
{
    struct sxe_map_reader reader;
    uint64_t state = 88172645463325252ULL, found = 0;
    uint64_t start = sxe_clock_mono_ns();

    for (uint64_t done = 0; done < config->reads;) {
        if (sxe_map_read_begin(map, &reader) < 0) {
            die("sxe_map_read_begin", -ENOBUFS);
        }
        for (uint64_t i = 0; i < config->snapshot_reads && done < config->reads;) {
            uint64_t left = config->reads - done;
            size_t count = left < LATENCY_BATCH ? (size_t)left : LATENCY_BATCH;
            found += find_random(&reader, config, &state, count);
            i += count;
            done += count;
        }
        sxe_map_read_end(&reader);
        progress_reads(done, config->reads);
    }
    double rate = (double)config->reads / seconds_since(start);
    if (found != config->reads) {
        fprintf(stderr, "map: sxe_map_find_many found %llu of %llu\n", (unsigned long long)found,
                (unsigned long long)config->reads);
        exit(1);
    }
    return rate;
}
