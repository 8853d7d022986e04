/*
 * bench/map's comparison: the same random point reads of the same keys from sxe_map and from
 * LMDB, one key at a time on both sides, each side's data mapped in pages of the same kind, in
 * rounds that interleave the rows so that the machine's drift hits both sides alike.
 *
 * Every row runs once a round. Odd rounds run them in the order of rows[] below, even rounds in
 * the reverse order, so each sxe_map row and the LMDB row it is compared with swap places every
 * round. Before its reads, a row makes its side's page tables over again in the kind of page it
 * names (mapping_prepare()); after them, it counts what the kernel gave (mapping_pages()).
 */
#include <stdio.h>
#include <stdlib.h>

#include "map_bench.h"
#include "map_report.h"

enum read_kind { READ_FIND, READ_GET, READ_FIND_MANY, READ_FLOOR };

struct read_row {
    enum read_kind kind;
    bool huge;
    int row; /* map_report.h's */
};

/* The rows, paired: each sxe_map row is followed by what it is compared with. */
static struct read_row rows[] = {
    {READ_FIND, false, 0},  {READ_GET, false, 0},       {READ_FIND, true, 0},
    {READ_GET, true, 0},    {READ_FIND_MANY, false, 0}, {READ_FIND_MANY, true, 0},
    {READ_FLOOR, false, 0}, {READ_FLOOR, true, 0},
};

#define ROW_COUNT (sizeof(rows) / sizeof(rows[0]))

/* A side that got huge pages got them for this much of what it had resident, in every round. */
#define HUGE_ENOUGH 0.9

static const char *pages_name(bool huge)
{
    return huge ? "huge pages" : "no huge pages";
}

static void add_rows(const struct config *config)
{
    char name[112];

    for (size_t i = 0; i < ROW_COUNT; i++) {
        const char *pages = pages_name(rows[i].huge);
        switch (rows[i].kind) {
        case READ_FIND:
            snprintf(name, sizeof(name), "sxe_map_find, %s", pages);
            rows[i].row = report_row(
                name, "lookups/s", true, false,
                "one key at a time, a reader (sxe_map_read_begin/end) per %llu lookups; the map "
                "in a file beside LMDB's, attached as other processes attach it",
                (unsigned long long)config->snapshot_reads);
            break;
        case READ_GET:
            snprintf(name, sizeof(name), "lmdb mdb_get, %s", pages);
            rows[i].row = report_row(
                name, "lookups/s", true, false,
                "one key at a time, a read txn (mdb_txn_renew/reset) per %llu lookups; "
                "MDB_NOSYNC|MDB_WRITEMAP, loaded with MDB_APPEND; the same keys in the same order",
                (unsigned long long)config->snapshot_reads);
            break;
        case READ_FIND_MANY:
            snprintf(name, sizeof(name), "sxe_map_find_many (batched, %d keys a call), %s",
                     LATENCY_BATCH, pages);
            rows[i].row = report_row(
                name, "lookups/s", true, false,
                "batched: %d keys a call, their lines prefetched, a reader per %llu lookups; LMDB "
                "has no batched lookup, so this row is not the comparison",
                LATENCY_BATCH, (unsigned long long)config->snapshot_reads);
            break;
        case READ_FLOOR:
            snprintf(name, sizeof(name), "floor: random 64-byte reads of the map's file, %s",
                     pages);
            rows[i].row = report_row(name, "reads/s", true, false,
                                     "no map: one line per read, 32 in flight, from the map's "
                                     "file mapped again; no lookup of one line can beat it");
            break;
        default:
            abort();
        }
    }
}

static const struct bench_mapping *mapping_of(const struct read_sides *sides, enum read_kind kind)
{
    switch (kind) {
    case READ_GET:
        return &sides->lmdb_mapping;
    case READ_FLOOR:
        return &sides->floor_mapping;
    default:
        return &sides->map_mapping;
    }
}

static double read_row(const struct config *config, const struct read_sides *sides,
                       enum read_kind kind)
{
    switch (kind) {
    case READ_FIND:
        return read_map_one_by_one(sides->map, config);
    case READ_GET:
        return read_lmdb(sides->env, sides->dbi, config);
    case READ_FIND_MANY:
        return read_map_batched(sides->map, config);
    case READ_FLOOR:
        return floor_random_reads(&sides->floor, config->reads);
    default:
        abort();
    }
}

/* One row's round: its side's pages made over, its reads timed, its pages counted. */
static void run_row(const struct config *config, const struct read_sides *sides,
                    const struct read_row *row, unsigned round, unsigned step)
{
    const struct bench_mapping *mapping = mapping_of(sides, row->kind);
    struct mapping_pages pages;

    progress("round %u/%u, row %u/%zu: %s (%llu reads)", round + 1, config->rounds, step + 1,
             ROW_COUNT, report_get(row->row)->name, (unsigned long long)config->reads);
    mapping_prepare(mapping, row->huge);
    double rate = read_row(config, sides, row->kind);
    mapping_pages(mapping->start, &pages);
    report_value(row->row, rate, &pages);
}

/* The row of a kind and kind of page. */
static int row_of(enum read_kind kind, bool huge)
{
    for (size_t i = 0; i < ROW_COUNT; i++) {
        if (rows[i].kind == kind && rows[i].huge == huge) {
            return rows[i].row;
        }
    }
    abort();
}

/* A ratio, round by round: each round's value of one row over the same round's of the other. */
static int add_ratio(int over, int under, const char *what)
{
    const struct report_row *top = report_get(over), *bottom = report_get(under);
    char name[112];

    snprintf(name, sizeof(name), "ratio: %s", what);
    int ratio = report_row(name, "x", true, false,
                           "derived: in each round, \"%s\" over \"%s\" in the same round",
                           top->name, bottom->name);
    for (unsigned i = 0; i < top->count && i < bottom->count; i++) {
        report_value(ratio, top->values[i] / bottom->values[i], NULL);
    }
    return ratio;
}

/* Whether a row's side had at least HUGE_ENOUGH of its resident pages huge, in every round. */
static bool got_huge(int index)
{
    const struct report_row *row = report_get(index);

    for (unsigned i = 0; i < row->count; i++) {
        if (row->pages[i].resident_mb <= 0 ||
            row->pages[i].huge_mb < HUGE_ENOUGH * row->pages[i].resident_mb) {
            return false;
        }
    }
    return row->count > 0;
}

/* The least of a row's huge MB over its rounds, and the resident MB of that round. */
static void least_huge(int index, double *huge_mb, double *resident_mb)
{
    const struct report_row *row = report_get(index);

    *huge_mb = *resident_mb = 0;
    for (unsigned i = 0; i < row->count; i++) {
        if (i == 0 || row->pages[i].huge_mb < *huge_mb) {
            *huge_mb = row->pages[i].huge_mb;
            *resident_mb = row->pages[i].resident_mb;
        }
    }
}

/*
 * The headline: single-key lookups on both sides, with huge pages where both sides got them,
 * otherwise without, and why.
 */
static void choose_headline(struct read_outcome *outcome)
{
    int sxe_huge_row = row_of(READ_FIND, true), lmdb_huge_row = row_of(READ_GET, true);
    double sxe_huge, sxe_resident, lmdb_huge, lmdb_resident;

    outcome->sxe_huge = got_huge(sxe_huge_row);
    outcome->lmdb_huge = got_huge(lmdb_huge_row);
    least_huge(sxe_huge_row, &sxe_huge, &sxe_resident);
    least_huge(lmdb_huge_row, &lmdb_huge, &lmdb_resident);
    if (outcome->sxe_huge && outcome->lmdb_huge) {
        outcome->headline_sxe = sxe_huge_row;
        outcome->headline_lmdb = lmdb_huge_row;
        snprintf(outcome->why, sizeof(outcome->why),
                 "both sides got huge pages (at least %.0f%% of what each had resident, in every "
                 "round; at the least sxe_map %.0f of %.0f MB, lmdb %.0f of %.0f MB): the pair "
                 "with huge pages",
                 HUGE_ENOUGH * 100, sxe_huge, sxe_resident, lmdb_huge, lmdb_resident);
        return;
    }
    outcome->headline_sxe = row_of(READ_FIND, false);
    outcome->headline_lmdb = row_of(READ_GET, false);
    snprintf(outcome->why, sizeof(outcome->why),
             "%s here (asked for them, at the least sxe_map got %.0f of %.0f MB resident in huge "
             "pages, lmdb %.0f of %.0f MB): the pair without huge pages",
             !outcome->lmdb_huge ? (!outcome->sxe_huge ? "neither side got huge pages"
                                                       : "lmdb did not get huge pages")
                                 : "sxe_map did not get huge pages",
             sxe_huge, sxe_resident, lmdb_huge, lmdb_resident);
}

void read_rounds(const struct config *config, const struct read_sides *sides,
                 struct read_outcome *outcome)
{
    add_rows(config);
    for (unsigned round = 0; round < config->rounds; round++) {
        for (unsigned step = 0; step < ROW_COUNT; step++) {
            unsigned at = round % 2 == 0 ? step : (unsigned)ROW_COUNT - 1 - step;
            run_row(config, sides, &rows[at], round, step);
        }
    }
    int single_ratios[2];
    for (int huge = 0; huge <= 1; huge++) {
        char what[112];
        snprintf(what, sizeof(what), "sxe_map_find / lmdb mdb_get, %s", pages_name(huge));
        single_ratios[huge] = add_ratio(row_of(READ_FIND, huge), row_of(READ_GET, huge), what);
    }
    for (int huge = 0; huge <= 1; huge++) {
        char what[112];
        snprintf(what, sizeof(what), "sxe_map_find_many (batched) / lmdb mdb_get, %s",
                 pages_name(huge));
        add_ratio(row_of(READ_FIND_MANY, huge), row_of(READ_GET, huge), what);
    }
    choose_headline(outcome);
    outcome->headline_ratio = single_ratios[outcome->headline_sxe == row_of(READ_FIND, true)];
}
