/*
 * bench/map's results: rows measured once in each round, figures measured once, and the progress
 * lines on stderr. Printed for people as the run goes, and at its end, with --json, as one JSON
 * document on stdout (map.c's opening comment gives its schema).
 */
#ifndef SXE_BENCH_MAP_REPORT_H
#define SXE_BENCH_MAP_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "map_pages.h"

#define REPORT_ROUNDS_MAX 25
#define REPORT_ROWS_MAX   160

struct report_row {
    char name[112];
    const char *unit; /* "lookups/s", "reads/s", "x", "ns", "ms", "us" */
    bool higher_is_better;
    bool once; /* measured once, not in the rounds */
    char note[400];
    unsigned count;
    double values[REPORT_ROUNDS_MAX];
    bool has_pages; /* the row read a mapping whose pages were counted after each round */
    struct mapping_pages pages[REPORT_ROUNDS_MAX];
};

/* Adds a row and says what it is. @return its index. */
int report_row(const char *name, const char *unit, bool higher_is_better, bool once,
               const char *note_format, ...) __attribute__((format(printf, 5, 6)));

/* Records a round's value, and the pages its mapping had then (NULL: none counted). */
void report_value(int row, double value, const struct mapping_pages *pages);

/* A figure measured once: a row with one value. */
void report_once(const char *name, const char *unit, bool higher_is_better, double value,
                 const char *note_format, ...) __attribute__((format(printf, 5, 6)));

const struct report_row *report_get(int row);

/* The median of a row's values (the lower middle one of an even count), and its least and most. */
double report_median(int row);
double report_min(int row);
double report_max(int row);

/*
 * Prints the rounds' rows: each one's median, [least-most], every round's value, and for a row
 * that read a mapping what its pages were in the last round.
 */
void report_print_rounds(FILE *out);

/* What the JSON document says besides its rows. */
struct report_summary {
    uint64_t keys;
    uint64_t reads;
    uint64_t snapshot_reads;
    unsigned rounds;
    const char *thp_enabled;
    const char *shmem_enabled;
    bool lmdb_huge;   /* LMDB's rows with huge pages got them */
    bool sxe_huge;    /* and sxe_map's did */
    int headline_sxe; /* the headline pair's rows, and its ratio's */
    int headline_lmdb;
    int headline_ratio;
    const char *headline_why;
    double peak_rss_mb;
};

/* Writes every row and the summary as one JSON document. */
void report_json(FILE *out, const struct report_summary *summary);

/* A progress line on stderr: "map: " and the text. */
void progress(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Whether a progress line is due: true at most once every two seconds. */
bool progress_due(void);

/*
 * A progress line for a long row, "reads: done of total", when one is due. Both sides call it once
 * a snapshot, inside their timing: a clock read per snapshot (about 25 ns in thousands of lookups),
 * and a line every two seconds at most.
 */
static inline void progress_reads(uint64_t done, uint64_t total)
{
    if (progress_due()) {
        progress("  reads: %.1f of %.1f million", (double)done / 1e6, (double)total / 1e6);
    }
}

#endif
