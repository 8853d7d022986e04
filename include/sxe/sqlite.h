/**
 * @file sxe/sqlite.h
 * @brief SQLite off the loop: statements run on a work pool's threads against one database file,
 * and their rows come back to the loop's thread.
 *
 * A statement may wait for a disk or another writer's lock, so it never runs on the loop. Open a
 * database on a work pool once, then run statements with bound parameters; the rows come back,
 * copied, to a callback on the loop's thread (or, in a fiber, as the return of a plain call):
 *
 *     static void added(void *arg, const sxe_sqlite_rows_t *rows) // on the loop's thread
 *     {
 *         answer(arg, sxe_sqlite_status(rows) == 0 ? 201 : 500); // why: sxe_sqlite_message(rows)
 *     }
 *     ...
 *     if (sxe_sqlite_open(&db, pool, "items.db", NULL) < 0)
 *         return 1;
 *     struct sxe_sqlite_value name = SXE_SQLITE_TEXT("tea", 3);
 *     if (sxe_sqlite_run(db, "INSERT INTO items(name) VALUES (?)", &name, 1, added, request) < 0)
 *         answer(request, 503);                                 // the pool's queue is full
 *
 * The database is in WAL mode: readers never wait for the writer, and other processes may open
 * the same file. Each pool thread that runs a statement has its own connection (at most one per
 * thread, opened when first needed), which keeps its prepared statements: a statement's text is
 * compiled once per connection and reused (options.statements of them, the least used dropped).
 * A busy lock is waited for up to options.busy_ms, then the statement fails with SQLITE_BUSY.
 * Commits are durable (synchronous=FULL): a statement called back with status 0 has reached the
 * disk.
 *
 * Rules: open, run, call and close on the loop's thread; close once every statement has been
 * called back (destroying the pool calls back those still out), before or after the pool goes.
 */
#ifndef SXE_SQLITE_H
#define SXE_SQLITE_H

#include <stddef.h>
#include <stdint.h>

#include "sxe/error.h"
#include "sxe/work.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sxe_sqlite sxe_sqlite_t;           /**< A database file, opened on a work pool. */
typedef struct sxe_sqlite_rows sxe_sqlite_rows_t; /**< What one statement returned. */
struct sqlite3;                                   /**< SQLite's connection (sqlite3.h). */

/** A value's type: SQLite's own five. */
enum sxe_sqlite_type {
    SXE_SQLITE_NULL,
    SXE_SQLITE_INTEGER,
    SXE_SQLITE_REAL,
    SXE_SQLITE_TEXT,
    SXE_SQLITE_BLOB,
};

/** A parameter bound to a statement, or a value of a row. */
struct sxe_sqlite_value {
    enum sxe_sqlite_type type;
    union {
        int64_t integer; /**< SXE_SQLITE_INTEGER. */
        double real;     /**< SXE_SQLITE_REAL. */
        struct {
            const void *data; /**< TEXT (UTF-8; in a row, followed by a NUL) or BLOB bytes. */
            size_t len;       /**< Their length, without that NUL. */
        } bytes;
    };
};

/** Parameters, written in place: SXE_SQLITE_INT(42), SXE_SQLITE_TEXT(name, strlen(name)). */
#define SXE_SQLITE_INT(v)  ((struct sxe_sqlite_value){.type = SXE_SQLITE_INTEGER, .integer = (v)})
#define SXE_SQLITE_REAL(v) ((struct sxe_sqlite_value){.type = SXE_SQLITE_REAL, .real = (v)})
#define SXE_SQLITE_TEXT(p, n)                                                                      \
    ((struct sxe_sqlite_value){.type = SXE_SQLITE_TEXT, .bytes = {(p), (n)}})
#define SXE_SQLITE_BLOB(p, n)                                                                      \
    ((struct sxe_sqlite_value){.type = SXE_SQLITE_BLOB, .bytes = {(p), (n)}})
#define SXE_SQLITE_NULL_VALUE() ((struct sxe_sqlite_value){.type = SXE_SQLITE_NULL})

/** Zero fields take the defaults shown. */
struct sxe_sqlite_options {
    uint32_t busy_ms;      /**< How long a statement waits for a lock held elsewhere (5000). */
    uint32_t statements;   /**< Prepared statements kept per connection (32). */
    uint32_t result_bytes; /**< The most bytes of rows one statement may return (1 MiB); past
                                it the statement fails with -EFBIG. */
    int read_only;         /**< Nonzero: open the file read-only (it must exist). */
    const char *setup;     /**< Statements sxe_sqlite_open() runs once, before it returns (a
                                schema: "CREATE TABLE IF NOT EXISTS ..."), or NULL. */
};

/** Runs on the loop's thread when a statement is over; rows are valid until it returns. */
typedef void (*sxe_sqlite_done_t)(void *arg, const sxe_sqlite_rows_t *rows);

/**
 * Runs on a pool thread with that thread's connection, for what one statement cannot say (a
 * transaction of several, with sqlite3.h's API). It may block. Returns 0 or an SQLite code.
 */
typedef int (*sxe_sqlite_fn_t)(struct sqlite3 *connection, void *arg);

/** Runs on the loop's thread when a sxe_sqlite_work() function is over. */
typedef void (*sxe_sqlite_work_done_t)(void *arg, int status);

/**
 * Opens (creating unless read-only) the database file at path, on the loop's thread: it checks
 * the file is a database, turns WAL mode on and runs options.setup, which touches the disk: do it
 * before serving. Statements then run on pool's threads.
 * @return 0; -ENOENT (no such file, read-only), -EACCES, -EBADMSG (not a database, or corrupt),
 *         -EINVAL (options.setup refused, or invalid options), -ENOTSUP (built without SQLite),
 *         -ENOMEM, or -EIO; SQLite's reason is logged.
 */
SXE_MUST_CHECK int sxe_sqlite_open(sxe_sqlite_t **db, sxe_work_pool_t *pool, const char *path,
                                   const struct sxe_sqlite_options *options);

/**
 * Closes the database's connections. Every statement run must have been called back first; the
 * pool may be gone already.
 * @return 0, or -EBUSY while statements are out (said in the log): nothing is closed.
 */
int sxe_sqlite_close(sxe_sqlite_t *db);

/**
 * Runs the statement sql with params bound to its ?s in order, on a pool thread; done(arg, rows)
 * follows on the loop's thread, never from inside this call. sql and the parameters' bytes are
 * copied: they need not outlive the call. Text holding several statements runs them all in turn
 * (a schema, say) when no parameter is given, and returns the last one's rows.
 * @return 0; -ENOBUFS or -ESHUTDOWN from the pool (done is not called); -ENOMEM; -EINVAL
 *         (asserts in debug builds) for a NULL db, sql or done, or an unknown type.
 */
SXE_MUST_CHECK int sxe_sqlite_run(sxe_sqlite_t *db, const char *sql,
                                  const struct sxe_sqlite_value *params, unsigned count,
                                  sxe_sqlite_done_t done, void *arg);

/**
 * From a fiber: runs the statement as sxe_sqlite_run() does and waits for it, while the loop
 * runs on. *rows is set to what it returned (free it with sxe_sqlite_rows_free()), or NULL when
 * it never ran.
 * @return sxe_sqlite_status() of the rows; or, with *rows NULL, -EPERM outside a fiber, or an
 *         error of sxe_sqlite_run().
 */
int sxe_sqlite_call(sxe_sqlite_t *db, const char *sql, const struct sxe_sqlite_value *params,
                    unsigned count, sxe_sqlite_rows_t **rows);

/**
 * Runs fn(connection, arg) on a pool thread, then done(arg, status) on the loop's thread: status
 * is fn's return, -ECANCELED if it never ran (the pool was destroyed), or SQLite's code for a
 * connection that could not be opened.
 * @return As sxe_sqlite_run().
 */
SXE_MUST_CHECK int sxe_sqlite_work(sxe_sqlite_t *db, sxe_sqlite_fn_t fn,
                                   sxe_sqlite_work_done_t done, void *arg);

/**
 * The statement's outcome: 0 when it ran to its end; SQLite's result code (positive: SQLITE_BUSY,
 * SQLITE_CONSTRAINT, SQLITE_FULL, ...) when it failed; -ECANCELED when it never ran (the pool was
 * destroyed); -EFBIG when its rows passed options.result_bytes; -ENOMEM.
 */
int sxe_sqlite_status(const sxe_sqlite_rows_t *rows);
/** Why it failed, in SQLite's words ("database is locked"), or "" when it did not. */
const char *sxe_sqlite_message(const sxe_sqlite_rows_t *rows);
/** Rows returned (0 for a statement that returns none, or one that failed). */
size_t sxe_sqlite_row_count(const sxe_sqlite_rows_t *rows);
/** Columns of each row. */
unsigned sxe_sqlite_column_count(const sxe_sqlite_rows_t *rows);
/** A column's name, or NULL past the last. */
const char *sxe_sqlite_column_name(const sxe_sqlite_rows_t *rows, unsigned column);
/** The value at row, column; a NULL value past either end. */
const struct sxe_sqlite_value *sxe_sqlite_value(const sxe_sqlite_rows_t *rows, size_t row,
                                                unsigned column);
/** Rows the statement inserted, changed or deleted. */
int64_t sxe_sqlite_changes(const sxe_sqlite_rows_t *rows);
/** The rowid of the last row the statement inserted (0 if none). */
int64_t sxe_sqlite_last_id(const sxe_sqlite_rows_t *rows);
/** Frees rows that sxe_sqlite_call() returned (NULL is ignored). */
void sxe_sqlite_rows_free(sxe_sqlite_rows_t *rows);

#ifdef __cplusplus
}
#endif

#endif
