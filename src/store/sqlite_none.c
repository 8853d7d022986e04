/*
 * The build without SQLite (-DSXE_SQLITE=OFF, or no libsqlite3-dev): the same names, and
 * sxe_sqlite_open() says -ENOTSUP, so nothing else can be reached with a database.
 * tests/build/check-stand-in.sh checks this file defines what sqlite.c and sqlite_rows.c do.
 */
#include <errno.h>
#include <stddef.h>

#include "sxe/sqlite.h"

int sxe_sqlite_open(sxe_sqlite_t **db, sxe_work_pool_t *pool, const char *path,
                    const struct sxe_sqlite_options *options)
{
    (void)pool, (void)path, (void)options;
    if (db != NULL) {
        *db = NULL;
    }
    return -ENOTSUP;
}

int sxe_sqlite_close(sxe_sqlite_t *db)
{
    (void)db;
    return 0;
}

int sxe_sqlite_run(sxe_sqlite_t *db, const char *sql, const struct sxe_sqlite_value *params,
                   unsigned count, sxe_sqlite_done_t done, void *arg)
{
    (void)db, (void)sql, (void)params, (void)count, (void)done, (void)arg;
    return -ENOTSUP;
}

int sxe_sqlite_call(sxe_sqlite_t *db, const char *sql, const struct sxe_sqlite_value *params,
                    unsigned count, sxe_sqlite_rows_t **rows)
{
    (void)db, (void)sql, (void)params, (void)count;
    *rows = NULL;
    return -ENOTSUP;
}

int sxe_sqlite_work(sxe_sqlite_t *db, sxe_sqlite_fn_t fn, sxe_sqlite_work_done_t done, void *arg)
{
    (void)db, (void)fn, (void)done, (void)arg;
    return -ENOTSUP;
}

/* No rows ever exist without SQLite: these are never reached. */
int sxe_sqlite_status(const sxe_sqlite_rows_t *rows)
{
    (void)rows;
    return -ENOTSUP;
}

const char *sxe_sqlite_message(const sxe_sqlite_rows_t *rows)
{
    (void)rows;
    return "built without SQLite";
}

size_t sxe_sqlite_row_count(const sxe_sqlite_rows_t *rows)
{
    (void)rows;
    return 0;
}

unsigned sxe_sqlite_column_count(const sxe_sqlite_rows_t *rows)
{
    (void)rows;
    return 0;
}

const char *sxe_sqlite_column_name(const sxe_sqlite_rows_t *rows, unsigned column)
{
    (void)rows, (void)column;
    return NULL;
}

const struct sxe_sqlite_value *sxe_sqlite_value(const sxe_sqlite_rows_t *rows, size_t row,
                                                unsigned column)
{
    static const struct sxe_sqlite_value null_value = {.type = SXE_SQLITE_NULL};
    (void)rows, (void)row, (void)column;
    return &null_value;
}

int64_t sxe_sqlite_changes(const sxe_sqlite_rows_t *rows)
{
    (void)rows;
    return 0;
}

int64_t sxe_sqlite_last_id(const sxe_sqlite_rows_t *rows)
{
    (void)rows;
    return 0;
}

void sxe_sqlite_rows_free(sxe_sqlite_rows_t *rows)
{
    (void)rows;
}
