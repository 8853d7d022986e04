/*
 * How the map reports trouble: its log module, MAP, which every file of the map writes to; a
 * broken invariant, for the self-checks (sxe__map_invalid()); and a put or delete refused for want
 * of room (sxe__map_full()). Every file of the map calls down to these, and these call nothing of
 * the map's, so they sit below all the others.
 */
#define SXE_LOG_MODULE sxe__map_log
#include "sxe/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "map.h"

struct sxe_log_module sxe__map_log = SXE_LOG_MODULE_INIT(MAP);

int sxe__map_invalid(const sxe_map_t *map, const char *format, ...)
{
    char reason[256];
    va_list args;

    va_start(args, format);
    vsnprintf(reason, sizeof(reason), format, args);
    va_end(args);
    SXE_LOG_ERROR("map %s is invalid: %s", map->header->name, reason);
    return -EUCLEAN;
}

int sxe__map_full(sxe_map_t *map, const char *what)
{
    struct sxe__map_header *header = map->header;

    header->full++;
    SXE_LOG_ONCE(
        SXE_LOG_LEVEL_ERROR,
        "map %s: %s used up, so puts and deletes get -ENOBUFS: %llu entries of %llu, "
        "%llu old versions of %llu wait (the oldest reader, process %llu, reads version "
        "%llu), arena %llu of %llu bytes",
        header->name, what, (unsigned long long)header->live, (unsigned long long)header->capacity,
        (unsigned long long)(header->ring_tail - header->ring_head + header->log_tail -
                             header->log_head),
        (unsigned long long)header->old_versions, (unsigned long long)header->oldest_reader_pid,
        (unsigned long long)header->oldest_reader_version, (unsigned long long)header->arena_used,
        (unsigned long long)header->arena_bytes);
    return -ENOBUFS;
}
