/* bench/map's results (map_report.h): kept in a fixed table, written out as JSON at the end. */
#include "map_report.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <sxe/sxe.h>

static struct report_row rows[REPORT_ROWS_MAX];
static int row_count;
static uint64_t last_progress_ns;

int report_row(const char *name, const char *unit, bool higher_is_better, bool once,
               const char *note_format, ...)
{
    va_list args;

    if (row_count == REPORT_ROWS_MAX) {
        fprintf(stderr, "map: more than %d result rows\n", REPORT_ROWS_MAX);
        exit(1);
    }
    struct report_row *row = &rows[row_count];
    snprintf(row->name, sizeof(row->name), "%s", name);
    row->unit = unit;
    row->higher_is_better = higher_is_better;
    row->once = once;
    va_start(args, note_format);
    vsnprintf(row->note, sizeof(row->note), note_format, args);
    va_end(args);
    return row_count++;
}

void report_value(int index, double value, const struct mapping_pages *pages)
{
    struct report_row *row = &rows[index];

    if (row->count == REPORT_ROUNDS_MAX) {
        fprintf(stderr, "map: more than %d rounds of %s\n", REPORT_ROUNDS_MAX, row->name);
        exit(1);
    }
    if (pages != NULL) {
        row->has_pages = true;
        row->pages[row->count] = *pages;
    }
    row->values[row->count++] = value;
}

void report_once(const char *name, const char *unit, bool higher_is_better, double value,
                 const char *note_format, ...)
{
    char note[sizeof(rows[0].note)];
    va_list args;

    va_start(args, note_format);
    vsnprintf(note, sizeof(note), note_format, args);
    va_end(args);
    report_value(report_row(name, unit, higher_is_better, true, "%s", note), value, NULL);
}

const struct report_row *report_get(int index)
{
    return &rows[index];
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The value at rank (0: the least) of a row's sorted values. */
static double ranked(int index, unsigned rank)
{
    const struct report_row *row = &rows[index];
    double sorted[REPORT_ROUNDS_MAX];

    if (row->count == 0) {
        return 0;
    }
    memcpy(sorted, row->values, row->count * sizeof(double));
    qsort(sorted, row->count, sizeof(double), compare_doubles);
    return sorted[rank < row->count ? rank : row->count - 1];
}

double report_median(int index)
{
    return ranked(index, rows[index].count == 0 ? 0 : (rows[index].count - 1) / 2);
}

double report_min(int index)
{
    return ranked(index, 0);
}

double report_max(int index)
{
    return ranked(index, REPORT_ROUNDS_MAX);
}

/* A JSON string of text, quotes included; text is ours, so a name too long is cut, not lost. */
static void json_string(FILE *out, const char *text)
{
    char escaped[2 * sizeof(rows[0].note) + 8];

    if (sxe_json_string(escaped, sizeof(escaped), text, strlen(text)) < 0) {
        snprintf(escaped, sizeof(escaped), "\"(too long)\"");
    }
    fputs(escaped, out);
}

static void json_numbers(FILE *out, const double *values, unsigned count, size_t stride)
{
    fputc('[', out);
    for (unsigned i = 0; i < count; i++) {
        const double *value = (const double *)((const char *)values + i * stride);
        fprintf(out, "%s%.10g", i == 0 ? "" : ", ", *value);
    }
    fputc(']', out);
}

static void json_row(FILE *out, const struct report_row *row)
{
    fputs("    {\"name\": ", out);
    json_string(out, row->name);
    fprintf(out, ", \"unit\": \"%s\", \"better\": \"%s\", \"rounds\": ", row->unit,
            row->higher_is_better ? "higher" : "lower");
    json_numbers(out, row->values, row->count, sizeof(double));
    fputs(", \"note\": ", out);
    json_string(out, row->note);
    fputc('}', out);
}

/* Each row that read a mapping: its resident MB and its MB in huge pages, round by round. */
static void json_pages(FILE *out)
{
    bool first = true;

    fputs("    \"by_row\": {", out);
    for (int i = 0; i < row_count; i++) {
        const struct report_row *row = &rows[i];
        if (!row->has_pages) {
            continue;
        }
        fputs(first ? "\n      " : ",\n      ", out);
        first = false;
        json_string(out, row->name);
        fputs(": {\"resident_mb\": ", out);
        json_numbers(out, &row->pages[0].resident_mb, row->count, sizeof(row->pages[0]));
        fputs(", \"huge_mb\": ", out);
        json_numbers(out, &row->pages[0].huge_mb, row->count, sizeof(row->pages[0]));
        fputc('}', out);
    }
    fputs("\n    }", out);
}

/* The rows of the rounds ("rows") or the figures measured once ("once"). */
static void json_rows(FILE *out, const char *key, bool once)
{
    bool first = true;

    fprintf(out, "  \"%s\": [", key);
    for (int i = 0; i < row_count; i++) {
        if (rows[i].once == once) {
            fputs(first ? "\n" : ",\n", out);
            first = false;
            json_row(out, &rows[i]);
        }
    }
    fputs(first ? "],\n" : "\n  ],\n", out);
}

void report_json(FILE *out, const struct report_summary *summary)
{
    fprintf(out,
            "{\n  \"keys\": %llu,\n  \"reads_per_row\": %llu,\n  \"snapshot_reads\": %llu,\n"
            "  \"rounds\": %u,\n",
            (unsigned long long)summary->keys, (unsigned long long)summary->reads,
            (unsigned long long)summary->snapshot_reads, summary->rounds);
    json_rows(out, "rows", false);
    json_rows(out, "once", true);
    fputs("  \"headline\": {\"sxe\": ", out);
    json_string(out, rows[summary->headline_sxe].name);
    fputs(", \"lmdb\": ", out);
    json_string(out, rows[summary->headline_lmdb].name);
    fputs(", \"ratio\": ", out);
    json_string(out, rows[summary->headline_ratio].name);
    fputs(", \"why\": ", out);
    json_string(out, summary->headline_why);
    fputs("},\n  \"huge_pages\": {\n    \"thp_enabled\": ", out);
    json_string(out, summary->thp_enabled);
    fputs(",\n    \"shmem_enabled\": ", out);
    json_string(out, summary->shmem_enabled);
    fprintf(out, ",\n    \"lmdb_got_huge_pages\": %s,\n    \"sxe_got_huge_pages\": %s,\n",
            summary->lmdb_huge ? "true" : "false", summary->sxe_huge ? "true" : "false");
    json_pages(out);
    fprintf(out, "\n  },\n  \"peak_rss_mb\": %.0f\n}\n", summary->peak_rss_mb);
    fflush(out);
}

void progress(const char *format, ...)
{
    va_list args;

    fputs("map: ", stderr);
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fputc('\n', stderr);
    fflush(stderr);
    last_progress_ns = sxe_clock_mono_ns();
}

bool progress_due(void)
{
    return sxe_clock_mono_ns() - last_progress_ns >= 2000000000ULL;
}

/* A value in its row's unit, short: rates in millions. */
static void format_value(char *text, size_t size, const struct report_row *row, double value)
{
    if (row->unit[0] == 'x') {
        snprintf(text, size, "%.2fx", value);
    } else if (strstr(row->unit, "/s") != NULL) {
        snprintf(text, size,
                 value >= 1e7   ? "%.1fM"
                 : value >= 1e6 ? "%.2fM"
                                : "%.3fM",
                 value / 1e6);
    } else {
        snprintf(text, size, "%.4g", value);
    }
}

void report_print_rounds(FILE *out)
{
    for (int i = 0; i < row_count; i++) {
        const struct report_row *row = &rows[i];
        char median[32], least[32], most[32], value[32];
        if (row->once) {
            continue;
        }
        format_value(median, sizeof(median), row, report_median(i));
        format_value(least, sizeof(least), row, report_min(i));
        format_value(most, sizeof(most), row, report_max(i));
        fprintf(out, "%-64s %9s%s%s [%s-%s]  rounds:", row->name, median,
                row->unit[0] == 'x' ? "" : " ", row->unit[0] == 'x' ? "" : row->unit, least, most);
        for (unsigned round = 0; round < row->count; round++) {
            format_value(value, sizeof(value), row, row->values[round]);
            fprintf(out, " %s", value);
        }
        if (row->has_pages) {
            fprintf(out, "  (%.0f MB resident, %.0f MB of it in huge pages)",
                    row->pages[row->count - 1].resident_mb, row->pages[row->count - 1].huge_mb);
        }
        fputc('\n', out);
    }
    fflush(out);
}
