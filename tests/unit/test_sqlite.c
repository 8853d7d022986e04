/*
 * SQLite on a work pool: a schema, every type bound and read back, a thousand writers at once,
 * SQLite's errors and ours (a bad statement, a broken constraint, parameters that do not fit,
 * rows past the limit), a database locked by another connection (the loop keeps time while the
 * statement waits), a full disk (the error comes back, nothing acknowledged is lost), a file that
 * is not a database and one corrupted later, read-only, a fiber's plain call, a transaction of
 * several statements, statements cancelled by the pool's end, a full queue, invalid use.
 */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sxe/fiber.h"
#include "sxe/sqlite.h"
#include "sxe/timer.h"
#include "sxe_test.h"

static sxe_loop_t *loop;
static sxe_work_pool_t *pool;
static char dir[64], path[96];

/* What a statement's callback saw. */
struct seen {
    int called;
    int status;
    char message[160];
    size_t rows;
    int64_t changes, last_id, first;
    char text[64];
};

static int done_count;

static void seen(void *arg, const sxe_sqlite_rows_t *rows)
{
    struct seen *seen = arg;
    const struct sxe_sqlite_value *first = sxe_sqlite_value(rows, 0, 0);

    seen->called++;
    seen->status = sxe_sqlite_status(rows);
    snprintf(seen->message, sizeof(seen->message), "%s", sxe_sqlite_message(rows));
    seen->rows = sxe_sqlite_row_count(rows);
    seen->changes = sxe_sqlite_changes(rows);
    seen->last_id = sxe_sqlite_last_id(rows);
    seen->first = first->type == SXE_SQLITE_INTEGER ? first->integer : -1;
    if (first->type == SXE_SQLITE_TEXT) {
        snprintf(seen->text, sizeof(seen->text), "%s", (const char *)first->bytes.data);
    }
    done_count++;
}

static int work_status;

static void worked(void *arg, int status)
{
    (void)arg;
    work_status = status;
    done_count++;
}

/* Runs sql with params and waits for its callback. */
static struct seen run(sxe_sqlite_t *db, const char *sql, const struct sxe_sqlite_value *params,
                       unsigned count)
{
    struct seen got = {0};
    int before = done_count;

    assert_int_equal(sxe_sqlite_run(db, sql, params, count, seen, &got), 0);
    sxe_test_run_until(loop, &done_count, before + 1);
    assert_int_equal(got.called, 1);
    return got;
}

static sxe_sqlite_t *open_db(const struct sxe_sqlite_options *options)
{
    sxe_sqlite_t *db;

    assert_int_equal(sxe_sqlite_open(&db, pool, path, options), 0);
    return db;
}

static int setup(void **state)
{
    (void)state;
    done_count = 0;
    snprintf(dir, sizeof(dir), "/tmp/sxe-sqlite-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/test.db", dir);
    assert_int_equal(sxe_loop_create(&loop, &(struct sxe_loop_options){.connections = 4}), 0);
    assert_int_equal(sxe_work_pool_create(&pool, loop, NULL), 0);
    return 0;
}

static int teardown(void **state)
{
    char command[128];

    (void)state;
    sxe_work_pool_destroy(pool);
    sxe_loop_destroy(loop);
    snprintf(command, sizeof(command), "rm -rf %s", dir);
    assert_int_equal(system(command), 0);
    return 0;
}

static void test_a_schema_then_inserts_and_a_select(void **state)
{
    sxe_sqlite_t *db = open_db(NULL);
    struct seen got;

    (void)state;
    got = run(db,
              "CREATE TABLE t(i INTEGER, s TEXT);\n-- two statements, no parameter\n"
              "CREATE INDEX t_i ON t(i);",
              NULL, 0);
    assert_int_equal(got.status, 0);
    assert_string_equal(got.message, "");
    got = run(db, "INSERT INTO t VALUES (?, ?)",
              (struct sxe_sqlite_value[]){SXE_SQLITE_INT(7), SXE_SQLITE_TEXT("seven", 5)}, 2);
    assert_int_equal(got.status, 0);
    assert_int_equal(got.changes, 1);
    assert_int_equal(got.last_id, 1);
    got = run(db, "INSERT INTO t VALUES (?, ?)",
              (struct sxe_sqlite_value[]){SXE_SQLITE_INT(8), SXE_SQLITE_TEXT("eight", 5)}, 2);
    assert_int_equal(got.last_id, 2);
    got = run(db, "UPDATE t SET i = i + 1", NULL, 0);
    assert_int_equal(got.changes, 2);
    assert_int_equal(got.last_id, 0); /* nothing inserted */
    got = run(db, "SELECT s, i FROM t WHERE i > ? ORDER BY i", &SXE_SQLITE_INT(8), 1);
    assert_int_equal(got.status, 0);
    assert_int_equal(got.rows, 1);
    assert_string_equal(got.text, "eight");
    assert_int_equal(got.changes, 0);
    got = run(db, "  ;  ", NULL, 0); /* nothing to run */
    assert_int_equal(got.status, 0);
    assert_int_equal(got.rows, 0);
    assert_int_equal(sxe_sqlite_close(db), 0);
}

/* Reads every value of a two-row SELECT of t, in the callback. */
static void check_values(void *arg, const sxe_sqlite_rows_t *rows)
{
    const struct sxe_sqlite_value *v;

    assert_int_equal(sxe_sqlite_status(rows), 0);
    assert_int_equal(sxe_sqlite_column_count(rows), 5);
    assert_string_equal(sxe_sqlite_column_name(rows, 0), "i");
    assert_string_equal(sxe_sqlite_column_name(rows, 3), "b");
    assert_null(sxe_sqlite_column_name(rows, 5));
    v = sxe_sqlite_value(rows, 0, 1);
    assert_int_equal(v->type, SXE_SQLITE_REAL);
    assert_true(v->real == 2.5);
    v = sxe_sqlite_value(rows, 0, 2);
    assert_int_equal(v->type, SXE_SQLITE_TEXT);
    assert_int_equal(v->bytes.len, 6);
    assert_string_equal(v->bytes.data, "héllo");
    v = sxe_sqlite_value(rows, 0, 3);
    assert_int_equal(v->type, SXE_SQLITE_BLOB);
    assert_int_equal(v->bytes.len, 4);
    assert_memory_equal(v->bytes.data, "a\0b\xff", 4);
    assert_int_equal(sxe_sqlite_value(rows, 0, 4)->type, SXE_SQLITE_NULL);
    v = sxe_sqlite_value(rows, 1, 2);
    assert_int_equal(v->type, SXE_SQLITE_TEXT);
    assert_int_equal(v->bytes.len, 0);
    assert_int_equal(sxe_sqlite_value(rows, 1, 0)->type, SXE_SQLITE_NULL);
    assert_int_equal(sxe_sqlite_value(rows, 2, 0)->type, SXE_SQLITE_NULL); /* past the end */
    assert_int_equal(sxe_sqlite_value(rows, 0, 9)->type, SXE_SQLITE_NULL);
    (*(int *)arg)++;
}

static void test_values_of_every_type(void **state)
{
    static const char blob[] = {'a', '\0', 'b', '\xff'};
    struct sxe_sqlite_value params[] = {
        SXE_SQLITE_INT(-42),      SXE_SQLITE_REAL(2.5),    SXE_SQLITE_TEXT("héllo", 6),
        SXE_SQLITE_BLOB(blob, 4), SXE_SQLITE_NULL_VALUE(),
    };
    sxe_sqlite_t *db = open_db(NULL);

    (void)state;
    assert_int_equal(
        run(db, "CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB, n)", NULL, 0).status, 0);
    assert_int_equal(run(db, "INSERT INTO t VALUES (?, ?, ?, ?, ?)", params, 5).status, 0);
    assert_int_equal(run(db, "INSERT INTO t(s) VALUES (?)", &SXE_SQLITE_TEXT("", 0), 1).status, 0);
    int before = done_count;
    assert_int_equal(sxe_sqlite_run(db, "SELECT i, r, s, b, n FROM t ORDER BY rowid", NULL, 0,
                                    check_values, &done_count),
                     0);
    sxe_test_run_until(loop, &done_count, before + 1);
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static void test_a_thousand_writers_at_once(void **state)
{
    enum { WRITERS = 1000 };
    static struct seen got[WRITERS];
    sxe_sqlite_t *db = open_db(&(struct sxe_sqlite_options){.statements = 2});

    (void)state;
    assert_int_equal(run(db, "CREATE TABLE w(n INTEGER, who TEXT)", NULL, 0).status, 0);
    done_count = 0;
    for (int i = 0; i < WRITERS; i++) { /* the pool's four threads write at once, each with its own
                                           connection; two texts alternate in a cache of two */
        char who[16];
        int len = snprintf(who, sizeof(who), "writer %d", i);
        struct sxe_sqlite_value params[] = {SXE_SQLITE_INT(i), SXE_SQLITE_TEXT(who, (size_t)len)};
        got[i] = (struct seen){0};
        assert_int_equal(sxe_sqlite_run(db,
                                        i % 2 ? "INSERT INTO w VALUES (?, ?)"
                                              : "INSERT INTO w(n, who) VALUES (?, ?)",
                                        params, 2, seen, &got[i]),
                         0); /* the bytes are copied: who goes out of scope */
    }
    sxe_test_run_until(loop, &done_count, WRITERS);
    for (int i = 0; i < WRITERS; i++) {
        assert_int_equal(got[i].status, 0);
        assert_int_equal(got[i].changes, 1);
    }
    struct seen sum = run(db, "SELECT sum(n), count(DISTINCT who) FROM w", NULL, 0);
    assert_int_equal(sum.first, WRITERS * (WRITERS - 1) / 2);
    struct seen who = run(db, "SELECT who FROM w WHERE n = 999", NULL, 0);
    assert_string_equal(who.text, "writer 999");
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static void test_errors_come_back_in_sqlites_words(void **state)
{
    sxe_sqlite_t *db = open_db(&(struct sxe_sqlite_options){.result_bytes = 4096});
    struct seen got;

    (void)state;
    got = run(db, "CREATE TABLE u(k TEXT PRIMARY KEY)", NULL, 0);
    assert_int_equal(got.status, 0);
    got = run(db, "SELEKT 1", NULL, 0);
    assert_int_equal(got.status, SQLITE_ERROR);
    assert_non_null(strstr(got.message, "syntax error"));
    got = run(db, "INSERT INTO u VALUES (?)", &SXE_SQLITE_TEXT("a", 1), 1);
    assert_int_equal(got.status, 0);
    got = run(db, "INSERT INTO u VALUES (?)", &SXE_SQLITE_TEXT("a", 1), 1);
    assert_int_equal(got.status, SQLITE_CONSTRAINT);
    assert_non_null(strstr(got.message, "UNIQUE constraint failed: u.k"));
    got = run(db, "INSERT INTO u VALUES (?)", NULL, 0);
    assert_int_equal(got.status, SQLITE_RANGE);
    assert_string_equal(got.message, "the statement takes 1 parameters, and 0 were given");
    got = run(db, "INSERT INTO u VALUES (?); SELECT 1", &SXE_SQLITE_TEXT("b", 1), 1);
    assert_int_equal(got.status, SQLITE_MISUSE);
    assert_string_equal(got.message, "parameters bind to one statement, and the text holds more");
    got = run(db, "SELECT 1; SELEKT 2", NULL, 0); /* the second of a script */
    assert_int_equal(got.status, SQLITE_ERROR);
    /* rows past result_bytes: refused whole, by rows (values) or by bytes (one long text) */
    got = run(db,
              "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) "
              "SELECT i FROM n",
              NULL, 0);
    assert_int_equal(got.status, -EFBIG);
    assert_string_equal(got.message, "the rows pass result_bytes (4096)");
    assert_int_equal(got.rows, 0);
    got = run(db, "SELECT zeroblob(5000)", NULL, 0);
    assert_int_equal(got.status, -EFBIG);
    char named[5100]; /* a column whose name alone passes the limit */
    memset(named, 'c', sizeof(named));
    memcpy(named, "SELECT 1 AS ", 12);
    named[sizeof(named) - 1] = '\0';
    got = run(db, named, NULL, 0);
    assert_int_equal(got.status, -EFBIG);
    /* a parameter too big to copy is refused at once, its bytes never read */
    assert_int_equal(
        sxe_sqlite_run(db, "SELECT ?", &SXE_SQLITE_BLOB(named, SIZE_MAX / 2), 1, seen, &got),
        -ENOMEM);
    got = run(db, "SELECT count(*) FROM u", NULL, 0); /* and the connections go on */
    assert_int_equal(got.status, 0);
    assert_int_equal(got.first, 1);
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static int ticks;

static void tick(sxe_timer_t *timer, void *arg)
{
    (void)arg;
    ticks++;
    assert_int_equal(sxe_timer_start(loop, timer, 10 * SXE_NS_PER_MSEC, 0), 0);
}

static void test_a_lock_held_elsewhere_is_waited_for_then_busy(void **state)
{
    sxe_sqlite_t *db = open_db(&(struct sxe_sqlite_options){.busy_ms = 200});
    sqlite3 *other;
    sxe_timer_t timer;

    (void)state;
    assert_int_equal(run(db, "CREATE TABLE l(x)", NULL, 0).status, 0);
    assert_int_equal(sqlite3_open(path, &other), SQLITE_OK);
    assert_int_equal(sqlite3_exec(other, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    sxe_timer_init(&timer, tick, NULL);
    assert_int_equal(sxe_timer_start(loop, &timer, 10 * SXE_NS_PER_MSEC, 0), 0);
    ticks = 0;
    uint64_t began = sxe_clock_mono_ns();
    struct seen got = run(db, "INSERT INTO l VALUES (1)", NULL, 0);
    uint64_t took = sxe_clock_mono_ns() - began;
    assert_int_equal(got.status, SQLITE_BUSY);
    assert_string_equal(got.message, "database is locked");
    assert_true(took >= 200 * SXE_NS_PER_MSEC);
    assert_true(ticks >= 10); /* the loop kept time while the statement waited */
    got = run(db, "SELECT count(*) FROM l", NULL, 0); /* WAL: readers do not wait */
    assert_int_equal(got.status, 0);
    assert_int_equal(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(run(db, "INSERT INTO l VALUES (1)", NULL, 0).status, 0);
    sxe_timer_stop(loop, &timer);
    sqlite3_close(other);
    assert_int_equal(sxe_sqlite_close(db), 0);
}

/* A disk that fills: SQLite's Unix files write through its own table of system calls, which a
 * test may replace (xSetSystemCall). */
static bool disk_full;
static sqlite3_syscall_ptr real_write, real_pwrite, real_pwrite64;

static ssize_t full_write(int fd, const void *data, size_t len)
{
    if (disk_full) {
        errno = ENOSPC;
        return -1;
    }
    return ((ssize_t(*)(int, const void *, size_t))real_write)(fd, data, len);
}

static ssize_t full_pwrite(int fd, const void *data, size_t len, off_t at)
{
    if (disk_full) {
        errno = ENOSPC;
        return -1;
    }
    return ((ssize_t(*)(int, const void *, size_t, off_t))real_pwrite)(fd, data, len, at);
}

static ssize_t full_pwrite64(int fd, const void *data, size_t len, off_t at)
{
    if (disk_full) {
        errno = ENOSPC;
        return -1;
    }
    return ((ssize_t(*)(int, const void *, size_t, off_t))real_pwrite64)(fd, data, len, at);
}

static void disk_seam(bool on)
{
    sqlite3_vfs *vfs = sqlite3_vfs_find("unix");

    assert_non_null(vfs);
    if (on) {
        real_write = vfs->xGetSystemCall(vfs, "write");
        real_pwrite = vfs->xGetSystemCall(vfs, "pwrite");
        real_pwrite64 = vfs->xGetSystemCall(vfs, "pwrite64");
        assert_int_equal(vfs->xSetSystemCall(vfs, "write", (sqlite3_syscall_ptr)full_write), 0);
        assert_int_equal(vfs->xSetSystemCall(vfs, "pwrite", (sqlite3_syscall_ptr)full_pwrite), 0);
        assert_int_equal(vfs->xSetSystemCall(vfs, "pwrite64", (sqlite3_syscall_ptr)full_pwrite64),
                         0);
    } else {
        assert_int_equal(vfs->xSetSystemCall(vfs, NULL, NULL), 0); /* every call as it was */
    }
}

static void test_a_full_disk_fails_the_statement_and_loses_nothing_acknowledged(void **state)
{
    enum { ROWS = 100 };
    sxe_sqlite_t *db;
    struct seen got;

    (void)state;
    disk_seam(true);
    db = open_db(NULL);
    assert_int_equal(run(db, "CREATE TABLE f(n INTEGER, pad BLOB)", NULL, 0).status, 0);
    for (int i = 0; i < ROWS; i++) {
        assert_int_equal(
            run(db, "INSERT INTO f VALUES (?, zeroblob(3000))", &SXE_SQLITE_INT(i), 1).status, 0);
    }
    disk_full = true;
    got = run(db, "INSERT INTO f VALUES (?, zeroblob(3000))", &SXE_SQLITE_INT(ROWS), 1);
    disk_full = false;
    assert_true(got.status == SQLITE_FULL || got.status == SQLITE_IOERR);
    assert_true(strstr(got.message, "disk") != NULL); /* "database or disk is full", "disk I/O
                                                         error" */
    got = run(db, "INSERT INTO f VALUES (?, zeroblob(3000))", &SXE_SQLITE_INT(ROWS), 1);
    assert_int_equal(got.status, 0); /* room again: the database goes on */
    assert_int_equal(sxe_sqlite_close(db), 0);
    disk_seam(false);
    db = open_db(NULL); /* every acknowledged row is there, after the failure and a reopening */
    got = run(db, "SELECT count(*), sum(n) FROM f", NULL, 0);
    assert_int_equal(got.first, ROWS + 1);
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static void test_files_that_are_not_databases(void **state)
{
    struct sxe_test_capture capture;
    char garbage[4096];
    sxe_sqlite_t *db = (sxe_sqlite_t *)&garbage; /* set to NULL on failure */
    int fd;

    (void)state;
    memset(garbage, 'x', sizeof(garbage));
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, garbage, sizeof(garbage)), sizeof(garbage));
    close(fd);
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_sqlite_open(&db, pool, path, NULL), -EBADMSG);
    sxe_test_capture_stop();
    assert_null(db);
    assert_non_null(strstr(capture.text, "test.db: file is not a database"));
    /* read-only and missing; a folder that is not there */
    assert_int_equal(sxe_sqlite_open(&db, pool, "/tmp/no-such-sxe-dir/x.db",
                                     &(struct sxe_sqlite_options){.read_only = 1}),
                     -ENOENT);
    assert_int_equal(sxe_sqlite_open(&db, pool, "/tmp/no-such-sxe-dir/x.db", NULL), -ENOENT);
    assert_int_equal(unlink(path), 0);
    sxe_test_capture_start(&capture); /* a setup SQLite refuses */
    assert_int_equal(sxe_sqlite_open(&db, pool, path,
                                     &(struct sxe_sqlite_options){.setup = "CREATE TABEL t(x)"}),
                     -EINVAL);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "test.db: near \"TABEL\": syntax error"));
}

static void test_a_database_corrupted_after_it_was_opened(void **state)
{
    char junk[4096];
    sxe_sqlite_t *db = open_db(NULL);
    struct seen got;
    int fd;

    (void)state;
    assert_int_equal(run(db,
                         "CREATE TABLE c(n, pad);"
                         "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k "
                         "WHERE i < 200) INSERT INTO c SELECT i, zeroblob(500) FROM k;"
                         "PRAGMA wal_checkpoint(TRUNCATE)",
                         NULL, 0)
                         .status,
                     0);
    assert_int_equal(sxe_sqlite_close(db), 0);
    db = open_db(NULL);
    memset(junk, 0xa5, sizeof(junk));
    fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, junk, sizeof(junk), 4096), sizeof(junk)); /* page 2 */
    close(fd);
    got = run(db, "SELECT sum(n) FROM c", NULL, 0);
    assert_int_equal(got.status, SQLITE_CORRUPT);
    assert_non_null(strstr(got.message, "malformed"));
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static int hold_a_connection(sqlite3 *connection, void *arg)
{
    (void)connection, (void)arg;
    usleep(200 * 1000);
    return 0;
}

static void test_read_only(void **state)
{
    sxe_sqlite_t *db = open_db(NULL);
    struct seen got;

    (void)state;
    assert_int_equal(run(db, "CREATE TABLE r(x); INSERT INTO r VALUES (5)", NULL, 0).status, 0);
    assert_int_equal(sxe_sqlite_close(db), 0);
    db = open_db(&(struct sxe_sqlite_options){.read_only = 1});
    got = run(db, "SELECT x FROM r", NULL, 0);
    assert_int_equal(got.first, 5);
    got = run(db, "INSERT INTO r VALUES (6)", NULL, 0);
    assert_int_equal(got.status, SQLITE_READONLY);
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static int call_rc;
static int64_t call_value;

static void caller(void *arg)
{
    sxe_sqlite_rows_t *rows;

    call_rc = sxe_sqlite_call(arg, "SELECT ? * 2", &SXE_SQLITE_INT(21), 1, &rows);
    call_value = sxe_sqlite_value(rows, 0, 0)->integer;
    sxe_sqlite_rows_free(rows);
    done_count++;
}

static void refused_caller(void *arg)
{
    sxe_sqlite_rows_t *rows = (sxe_sqlite_rows_t *)&call_rc;

    call_rc = sxe_sqlite_call(arg, "SELECT 1", NULL, 0, &rows);
    assert_null(rows);
    done_count++;
}

static void test_a_fiber_calls_as_if_it_were_plain(void **state)
{
    sxe_sqlite_t *db = open_db(NULL);
    sxe_sqlite_rows_t *rows = (sxe_sqlite_rows_t *)&call_rc;
    sxe_fibers_t *fibers;

    (void)state;
    assert_int_equal(sxe_sqlite_call(db, "SELECT 1", NULL, 0, &rows), -EPERM); /* no fiber */
    assert_null(rows);
    assert_int_equal(sxe_fibers_create(&fibers, loop, NULL), 0);
    call_rc = 1;
    assert_int_equal(sxe_fiber_start(fibers, caller, db, NULL), 0);
    assert_int_equal(call_rc, 1); /* it waits; the loop goes on */
    sxe_test_run_until(loop, &done_count, 1);
    assert_int_equal(call_rc, 0);
    assert_int_equal(call_value, 42);
    assert_int_equal(sxe_sqlite_close(db), 0);

    sxe_work_pool_t *small; /* a full queue: the call fails at once, with no rows */
    assert_int_equal(
        sxe_work_pool_create(&small, loop, &(struct sxe_work_options){.threads = 1, .queue = 1}),
        0);
    assert_int_equal(sxe_sqlite_open(&db, small, path, NULL), 0);
    assert_int_equal(sxe_sqlite_work(db, hold_a_connection, worked, NULL), 0);
    assert_int_equal(sxe_fiber_start(fibers, refused_caller, db, NULL), 0);
    assert_int_equal(call_rc, -ENOBUFS);
    sxe_test_run_until(loop, &done_count, 3);
    assert_int_equal(sxe_sqlite_close(db), 0);
    sxe_work_pool_destroy(small);
    sxe_fibers_destroy(fibers);
}

/* A transfer between two accounts: a transaction of several statements, with sqlite3.h's API. */
static int transfer(sqlite3 *connection, void *arg)
{
    int rc = sqlite3_exec(connection,
                          "BEGIN IMMEDIATE;"
                          "UPDATE a SET n = n - 10 WHERE id = 1;"
                          "UPDATE a SET n = n + 10 WHERE id = 2;"
                          "COMMIT",
                          NULL, NULL, NULL);
    (void)arg;
    return rc;
}

static int leave_open(sqlite3 *connection, void *arg)
{
    (void)arg;
    return sqlite3_exec(connection, "BEGIN; UPDATE a SET n = 0", NULL, NULL, NULL);
}

static void test_a_transaction_in_a_function(void **state)
{
    struct sxe_test_capture capture;
    sxe_sqlite_t *db = open_db(NULL);
    struct seen got;

    (void)state;
    assert_int_equal(
        run(db, "CREATE TABLE a(id, n); INSERT INTO a VALUES (1, 100), (2, 0)", NULL, 0).status, 0);
    done_count = 0;
    assert_int_equal(sxe_sqlite_work(db, transfer, worked, NULL), 0);
    sxe_test_run_until(loop, &done_count, 1);
    assert_int_equal(work_status, 0);
    got = run(db, "SELECT n FROM a WHERE id = 2", NULL, 0);
    assert_int_equal(got.first, 10);
    sxe_test_capture_start(&capture); /* a function that leaves its transaction open */
    assert_int_equal(sxe_sqlite_work(db, leave_open, worked, NULL), 0);
    sxe_test_run_until(loop, &done_count, 3);
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "a function left a transaction open: rolled back"));
    got = run(db, "SELECT sum(n) FROM a", NULL, 0);
    assert_int_equal(got.first, 100); /* its update is gone */
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static int sleep_100ms(sqlite3 *connection, void *arg)
{
    (void)connection, (void)arg;
    usleep(100 * 1000);
    return 0;
}

static void test_the_pools_end_cancels_what_waits(void **state)
{
    struct seen got[4] = {{0}};
    sxe_work_pool_t *small;
    sxe_sqlite_t *db;

    (void)state;
    assert_int_equal(
        sxe_work_pool_create(&small, loop, &(struct sxe_work_options){.threads = 1, .queue = 4}),
        0);
    assert_int_equal(sxe_sqlite_open(&db, small, path, NULL), 0);
    assert_int_equal(sxe_sqlite_work(db, sleep_100ms, worked, NULL), 0); /* holds the thread */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sxe_sqlite_run(db, "SELECT ?", &SXE_SQLITE_INT(i), 1, seen, &got[i]), 0);
    }
    assert_int_equal(sxe_sqlite_run(db, "SELECT 5", NULL, 0, seen, &got[3]), -ENOBUFS);
    sxe_work_pool_destroy(small); /* what had not started says -ECANCELED */
    assert_int_equal(done_count, 4);
    assert_true(work_status == 0 || work_status == -ECANCELED);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(got[i].called, 1);
        assert_int_equal(got[i].status, -ECANCELED);
        assert_string_equal(got[i].message, "the pool was destroyed before it ran");
    }
    assert_int_equal(got[3].called, 0);
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static void test_closing_with_a_statement_out(void **state)
{
    struct sxe_test_capture capture;
    sxe_sqlite_t *db = open_db(NULL);
    struct seen got = {0};

    (void)state;
    assert_int_equal(sxe_sqlite_run(db, "SELECT 1", NULL, 0, seen, &got), 0);
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe_sqlite_close(db), -EBUSY); /* nothing is closed */
    sxe_test_capture_stop();
    assert_non_null(strstr(capture.text, "1 statements are out: the database stays open"));
    sxe_test_run_until(loop, &done_count, 1);
    assert_int_equal(got.status, 0);
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static void test_what_an_outsider_found(void **state)
{
    sxe_sqlite_t *db = open_db(&(struct sxe_sqlite_options){.result_bytes = 2048});
    struct seen got;

    (void)state;
    assert_int_equal(
        run(db, "CREATE TABLE o(id INTEGER PRIMARY KEY, s TEXT NOT NULL, b BLOB)", NULL, 0).status,
        0);
    /* an empty text or blob given as (NULL, 0) is empty, not NULL */
    got = run(db, "INSERT INTO o(s, b) VALUES (?, ?)",
              (struct sxe_sqlite_value[]){SXE_SQLITE_TEXT(NULL, 0), SXE_SQLITE_BLOB(NULL, 0)}, 2);
    assert_int_equal(got.status, 0);
    got = run(db, "SELECT typeof(s) || typeof(b) FROM o", NULL, 0);
    assert_string_equal(got.text, "textblob");
    /* a rowid used again after a delete is still said */
    assert_int_equal(run(db, "DELETE FROM o", NULL, 0).status, 0);
    got = run(db, "INSERT INTO o(s) VALUES ('again')", NULL, 0);
    assert_int_equal(got.last_id, 1);
    /* a comment after the statement is no second statement */
    got = run(db, "SELECT ? -- the id\n; /* done */", &SXE_SQLITE_INT(5), 1);
    assert_int_equal(got.status, 0);
    assert_int_equal(got.first, 5);
    /* a statement that writes and returns more than result_bytes: its changes are whole */
    got = run(db,
              "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 200) "
              "INSERT INTO o(s) SELECT 'row ' || i FROM k RETURNING id, s",
              NULL, 0);
    assert_int_equal(got.status, -EFBIG);
    assert_string_equal(got.message, "the rows pass result_bytes (2048); its changes were made");
    got = run(db, "SELECT count(*) FROM o", NULL, 0);
    assert_int_equal(got.first, 201);
    /* a value past the limit is refused before it is copied */
    got = run(db, "SELECT zeroblob(100000)", NULL, 0);
    assert_int_equal(got.status, -EFBIG);
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static void test_a_file_deleted_while_open(void **state)
{
    char wal[128], shm[128];
    sxe_sqlite_t *db = open_db(&(struct sxe_sqlite_options){.setup = "CREATE TABLE d(x)"});
    struct seen got;

    (void)state;
    assert_int_equal(run(db, "INSERT INTO d VALUES (1)", NULL, 0).status, 0);
    snprintf(wal, sizeof(wal), "%s-wal", path);
    snprintf(shm, sizeof(shm), "%s-shm", path);
    assert_int_equal(unlink(path), 0);
    unlink(wal);
    unlink(shm);
    got = run(db, "INSERT INTO d VALUES (2)", NULL, 0); /* it would go where nobody reads */
    assert_int_equal(got.status, SQLITE_READONLY);
    assert_string_equal(got.message,
                        "the database file was deleted or replaced since it was opened");
    got = run(db, "INSERT INTO d VALUES (3)", NULL, 0); /* and no new file is made in its place */
    assert_int_equal(got.status, SQLITE_CANTOPEN);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static void invalid_sql(void)
{
    sxe_sqlite_t *db = open_db(NULL);
    struct seen got = {0};

    assert_int_equal(sxe_sqlite_run(db, NULL, NULL, 0, seen, &got), -EINVAL);
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static void invalid_type(void)
{
    sxe_sqlite_t *db = open_db(NULL);
    struct sxe_sqlite_value odd = {.type = (enum sxe_sqlite_type)9};
    struct seen got = {0};

    assert_int_equal(sxe_sqlite_run(db, "SELECT ?", &odd, 1, seen, &got), -EINVAL);
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static void invalid_function(void)
{
    sxe_sqlite_t *db = open_db(NULL);

    assert_int_equal(sxe_sqlite_work(db, NULL, worked, NULL), -EINVAL);
    assert_int_equal(sxe_sqlite_close(db), 0);
}

static void invalid_options(void)
{
    sxe_sqlite_t *db;

    assert_int_equal(
        sxe_sqlite_open(&db, pool, path, &(struct sxe_sqlite_options){.statements = 4097}),
        -EINVAL);
}

static void invalid_busy(void)
{
    sxe_sqlite_t *db;

    assert_int_equal(
        sxe_sqlite_open(&db, pool, path, &(struct sxe_sqlite_options){.busy_ms = UINT32_MAX}),
        -EINVAL);
}

static void test_invalid_use(void **state)
{
    static const struct sxe_test_invalid_use uses[] = {
        {"a NULL statement", invalid_sql, "sql != NULL"},
        {"a parameter of no type", invalid_type, "params[i].type <= SXE_SQLITE_BLOB"},
        {"work without a function", invalid_function, "fn != NULL"},
        {"4097 statements kept", invalid_options, "given.statements <= STATEMENTS_MAX"},
        {"a wait past INT32_MAX ms", invalid_busy, "given.busy_ms <= INT32_MAX"},
    };

    (void)state;
    sxe_test_invalid_uses(uses, sizeof(uses) / sizeof(uses[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_schema_then_inserts_and_a_select, setup, teardown),
        cmocka_unit_test_setup_teardown(test_values_of_every_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_thousand_writers_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_come_back_in_sqlites_words, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_lock_held_elsewhere_is_waited_for_then_busy, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_full_disk_fails_the_statement_and_loses_nothing_acknowledged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files_that_are_not_databases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_database_corrupted_after_it_was_opened, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_calls_as_if_it_were_plain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_transaction_in_a_function, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_pools_end_cancels_what_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_closing_with_a_statement_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_what_an_outsider_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_file_deleted_while_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_use, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
