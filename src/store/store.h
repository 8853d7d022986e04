/*
 * The SQLite module's own header: what a statement carries to a pool thread and the rows it
 * brings back (see sxe/sqlite.h).
 */
#ifndef SXE_STORE_H
#define SXE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sxe/sqlite.h"

/* A statement on its way: made on the loop's thread with its rows, in the same block. */
struct sxe__sqlite_request {
    sxe_sqlite_t *db;
    sxe_sqlite_done_t done;           /* a statement's (run, call) */
    sxe_sqlite_fn_t fn;               /* or a function's (work) */
    sxe_sqlite_work_done_t work_done; /* and its callback */
    void *arg;
    int fn_status;                   /* fn's return */
    bool keep;                       /* the rows go to sxe_sqlite_call()'s caller */
    unsigned count;                  /* parameters */
    struct sxe_sqlite_value *params; /* after the rows, in their block; then their bytes */
    char *sql;                       /* then this, NUL-terminated */
    size_t sql_len;
};

/* What a statement returned, built on the pool thread: values' bytes are offsets into bytes until
 * sxe__sqlite_rows_finish() makes them pointers. */
struct sxe_sqlite_rows {
    int status;
    unsigned columns;
    size_t row_count;
    int64_t changes;
    int64_t last_id;
    uint32_t limit;                  /* options.result_bytes */
    struct sxe_sqlite_value *values; /* row_count * columns */
    size_t values_cap;
    char *bytes; /* column names, then text and blobs, each NUL-ended */
    size_t bytes_len, bytes_cap;
    size_t *names; /* columns offsets into bytes */
    char message[160];
    struct sxe__sqlite_request request;
};

/* Builds rows (sqlite_rows.c). Each returns 0, or fails the rows with -ENOMEM or -EFBIG. */
struct sqlite3_stmt;
int sxe__sqlite_rows_start(struct sxe_sqlite_rows *rows, struct sqlite3_stmt *stmt);
int sxe__sqlite_rows_add(struct sxe_sqlite_rows *rows, struct sqlite3_stmt *stmt);
void sxe__sqlite_rows_clear(struct sxe_sqlite_rows *rows);
void sxe__sqlite_rows_finish(struct sxe_sqlite_rows *rows);
void sxe__sqlite_rows_fail(struct sxe_sqlite_rows *rows, int status, const char *message);

#endif
