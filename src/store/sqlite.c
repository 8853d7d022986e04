/*
 * SQLite on a work pool: see sxe/sqlite.h.
 *
 * A statement travels as one block made on the loop's thread: its rows (empty), then its
 * parameters, their bytes and its text, all copied. A pool thread takes an idle connection (or
 * opens one: there are never more than threads running statements at once), finds the text among
 * that connection's prepared statements or compiles it, binds, steps, and copies each row out
 * (sqlite_rows.c). The loop's thread then hands the rows to the callback and frees the block.
 * Connections are opened without SQLite's own mutexes (SQLITE_OPEN_NOMUTEX): one is used by one
 * thread at a time, handed between threads under the database's lock.
 */
#define SXE_LOG_MODULE sqlite_log
#include "sxe/log.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "sxe/fiber.h"

static struct sxe_log_module sqlite_log = SXE_LOG_MODULE_INIT(SQLITE);

#define DEFAULT_BUSY_MS      5000
#define DEFAULT_STATEMENTS   32
#define STATEMENTS_MAX       4096
#define DEFAULT_RESULT_BYTES (1u << 20)

struct cached {
    sqlite3_stmt *stmt;
    char *sql;
    size_t len;
    uint64_t used; /* the connection's clock when last used: the least is dropped first */
};

struct connection {
    sqlite3 *handle;
    struct connection *next_idle; /* under the database's lock */
    struct connection *next;      /* every connection, under the lock */
    uint64_t clock;
    struct cached cache[]; /* options.statements */
};

struct sxe_sqlite {
    sxe_work_pool_t *pool;
    struct sxe_sqlite_options options;
    uint32_t out; /* the loop's thread: statements not yet called back */
    pthread_mutex_t lock;
    struct connection *idle, *all;
    char path[];
};

/* An SQLite failure, for sxe_sqlite_open()'s return. */
static int open_error(int code, int os_errno)
{
    switch (code & 0xff) {
    case SQLITE_CANTOPEN:
        return os_errno > 0 ? -os_errno : -EIO;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
        return -EBADMSG;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
        return -EACCES;
    case SQLITE_NOMEM:
        return -ENOMEM;
    case SQLITE_ERROR: /* a statement of options.setup */
        return -EINVAL;
    default:
        return -EIO;
    }
}

/* A new connection, in the database's list; 0 or SQLite's code, its reason in message. */
static int connection_open(sxe_sqlite_t *db, bool create, struct connection **opened, char *message,
                           size_t size, int *os_errno)
{
    int flags = db->options.read_only ? SQLITE_OPEN_READONLY
                : create              ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                                      : SQLITE_OPEN_READWRITE; /* a file gone stays gone */
    struct connection *c = calloc(1, sizeof(*c) + db->options.statements * sizeof(c->cache[0]));
    int rc;

    if (c == NULL) {
        snprintf(message, size, "out of memory for a connection");
        return SQLITE_NOMEM;
    }
    rc = sqlite3_open_v2(db->path, &c->handle, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_busy_timeout(c->handle, (int)db->options.busy_ms);
    }
    if (rc == SQLITE_OK) { /* a commit called back with 0 has reached the disk */
        rc = sqlite3_exec(c->handle, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
    }
    if (rc != SQLITE_OK) {
        snprintf(message, size, "%s", c->handle ? sqlite3_errmsg(c->handle) : sqlite3_errstr(rc));
        *os_errno = c->handle ? sqlite3_system_errno(c->handle) : 0;
        sqlite3_close_v2(c->handle);
        free(c);
        return rc & 0xff;
    }
    pthread_mutex_lock(&db->lock);
    c->next = db->all;
    db->all = c;
    pthread_mutex_unlock(&db->lock);
    *opened = c;
    return SQLITE_OK;
}

static int connection_take(sxe_sqlite_t *db, struct connection **taken, char *message, size_t size)
{
    int os_errno;

    pthread_mutex_lock(&db->lock);
    if ((*taken = db->idle) != NULL) {
        db->idle = (*taken)->next_idle;
    }
    pthread_mutex_unlock(&db->lock);
    return *taken ? SQLITE_OK : connection_open(db, false, taken, message, size, &os_errno);
}

static void connection_give(sxe_sqlite_t *db, struct connection *c)
{
    pthread_mutex_lock(&db->lock);
    c->next_idle = db->idle;
    db->idle = c;
    pthread_mutex_unlock(&db->lock);
}

static void connection_free(const sxe_sqlite_t *db, struct connection *c)
{
    for (uint32_t i = 0; i < db->options.statements; i++) {
        sqlite3_finalize(c->cache[i].stmt);
        free(c->cache[i].sql);
    }
    sqlite3_close_v2(c->handle);
    free(c);
}

static void connections_close(sxe_sqlite_t *db)
{
    for (struct connection *c = db->all, *next; c != NULL; c = next) {
        next = c->next;
        connection_free(db, c);
    }
    db->all = db->idle = NULL;
}

/* The connection's prepared statement for this text, or NULL. */
static sqlite3_stmt *cache_find(struct connection *c, uint32_t size, const char *sql, size_t len)
{
    for (uint32_t i = 0; i < size; i++) {
        struct cached *e = &c->cache[i];
        if (e->stmt != NULL && e->len == len && memcmp(e->sql, sql, len) == 0) {
            e->used = ++c->clock;
            return e->stmt;
        }
    }
    return NULL;
}

/* Keeps stmt for its text, in place of the least used; without memory it is simply not kept. */
static bool cache_put(struct connection *c, uint32_t size, const char *sql, size_t len,
                      sqlite3_stmt *stmt)
{
    struct cached *e = &c->cache[0];
    char *copy = malloc(len);

    if (copy == NULL) {
        return false;
    }
    for (uint32_t i = 1; i < size; i++) {
        if (c->cache[i].used < e->used) {
            e = &c->cache[i];
        }
    }
    sqlite3_finalize(e->stmt);
    free(e->sql);
    memcpy(copy, sql, len);
    *e = (struct cached){.stmt = stmt, .sql = copy, .len = len, .used = ++c->clock};
    return true;
}

static int bind_value(sqlite3_stmt *stmt, int i, const struct sxe_sqlite_value *value)
{
    switch (value->type) {
    case SXE_SQLITE_INTEGER:
        return sqlite3_bind_int64(stmt, i, value->integer);
    case SXE_SQLITE_REAL:
        return sqlite3_bind_double(stmt, i, value->real);
    case SXE_SQLITE_TEXT:
        return sqlite3_bind_text64(stmt, i, value->bytes.data, value->bytes.len, SQLITE_STATIC,
                                   SQLITE_UTF8);
    case SXE_SQLITE_BLOB:
        return sqlite3_bind_blob64(stmt, i, value->bytes.data, value->bytes.len, SQLITE_STATIC);
    default:
        return sqlite3_bind_null(stmt, i);
    }
}

static void fail(struct sxe_sqlite_rows *rows, sqlite3 *handle, int rc)
{
    sxe__sqlite_rows_fail(rows, rc & 0xff, sqlite3_errmsg(handle));
}

/* Binds, steps to the end and copies the rows; the statement is left reset, bound to nothing. */
static void run_one(sqlite3 *handle, struct sxe_sqlite_rows *rows, sqlite3_stmt *stmt)
{
    const struct sxe__sqlite_request *request = &rows->request;
    int wanted = sqlite3_bind_parameter_count(stmt);
    sqlite3_int64 changes = sqlite3_total_changes64(handle);
    int rc = SQLITE_OK;

    if ((unsigned)wanted != request->count) {
        char message[96];
        snprintf(message, sizeof(message), "the statement takes %d parameters, and %u were given",
                 wanted, request->count);
        sxe__sqlite_rows_fail(rows, SQLITE_RANGE, message);
        return;
    }
    for (unsigned i = 0; i < request->count && rc == SQLITE_OK; i++) {
        rc = bind_value(stmt, (int)i + 1, &request->params[i]);
    }
    if (rc != SQLITE_OK) {
        fail(rows, handle, rc);
    } else if (sxe__sqlite_rows_start(rows, stmt) == 0) {
        bool writes = !sqlite3_stmt_readonly(stmt);
        sqlite3_set_last_insert_rowid(handle, 0);
        while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
            if (rows->status == 0) {
                (void)sxe__sqlite_rows_add(rows, stmt);
            } else if (!writes) {
                break; /* a statement that writes goes to its end: its changes are whole */
            }
        }
        if (rows->status == 0 && rc != SQLITE_DONE) {
            fail(rows, handle, rc);
        } else if (rows->status == 0) {
            rows->changes = sqlite3_total_changes64(handle) - changes;
            rows->last_id = sqlite3_last_insert_rowid(handle);
        } else if (writes && rc == SQLITE_DONE) { /* INSERT ... RETURNING too much */
            size_t len = strlen(rows->message);
            snprintf(rows->message + len, sizeof(rows->message) - len, "; its changes were made");
        }
    }
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
}

/* Whether nothing but spaces, semicolons and comments is left. */
static bool blank(const char *at)
{
    for (;;) {
        at += strspn(at, " \t\r\n;");
        if (at[0] == '-' && at[1] == '-') {
            at += strcspn(at, "\n");
        } else if (at[0] == '/' && at[1] == '*') {
            const char *end = strstr(at + 2, "*/");
            at = end ? end + 2 : at + strlen(at);
        } else {
            return *at == '\0';
        }
    }
}

/* The request's text: one statement (kept prepared), or several run in turn (none kept). */
static void run_text(sxe_sqlite_t *db, struct connection *c, struct sxe_sqlite_rows *rows)
{
    const struct sxe__sqlite_request *request = &rows->request;
    uint32_t size = db->options.statements;
    sqlite3_stmt *stmt = cache_find(c, size, request->sql, request->sql_len);
    const char *at = request->sql, *tail;

    if (stmt != NULL) {
        run_one(c->handle, rows, stmt);
        return;
    }
    for (bool first = true; rows->status == 0 && !blank(at); first = false, at = tail) {
        int rc = sqlite3_prepare_v3(c->handle, at, -1, first ? SQLITE_PREPARE_PERSISTENT : 0, &stmt,
                                    &tail);
        if (rc != SQLITE_OK) {
            fail(rows, c->handle, rc);
        } else if (stmt == NULL) { /* a comment */
        } else if (first && blank(tail)) {
            run_one(c->handle, rows, stmt);
            if (!cache_put(c, size, request->sql, request->sql_len, stmt)) {
                sqlite3_finalize(stmt);
            }
        } else if (request->count > 0) {
            sqlite3_finalize(stmt);
            sxe__sqlite_rows_fail(rows, SQLITE_MISUSE,
                                  "parameters bind to one statement, and the text holds more");
        } else {
            run_one(c->handle, rows, stmt);
            sqlite3_finalize(stmt);
        }
    }
}

/* Whether the file the connection has open is no longer the one at its path (deleted, or
 * replaced by another process): a statement there would write where nobody reads. */
static bool moved(struct connection *c)
{
    int moved = 0;

    return sqlite3_file_control(c->handle, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK &&
           moved;
}

/* Drops a connection whose file moved: the next statement opens the path again. */
static void connection_drop(sxe_sqlite_t *db, struct connection *c)
{
    pthread_mutex_lock(&db->lock);
    for (struct connection **at = &db->all; *at != NULL; at = &(*at)->next) {
        if (*at == c) {
            *at = c->next;
            break;
        }
    }
    pthread_mutex_unlock(&db->lock);
    connection_free(db, c);
}

static void statement_work(void *arg) /* on a pool thread */
{
    struct sxe_sqlite_rows *rows = arg;
    struct sxe__sqlite_request *request = &rows->request;
    sxe_sqlite_t *db = request->db;
    struct connection *c;
    int rc = connection_take(db, &c, rows->message, sizeof(rows->message));

    if (rc != SQLITE_OK) {
        rows->status = request->fn_status = rc;
        return;
    }
    if (moved(c)) {
        SXE_LOG_ERROR("sqlite: %s: the file was deleted or replaced since it was opened", db->path);
        sxe__sqlite_rows_fail(rows, SQLITE_READONLY,
                              "the database file was deleted or replaced since it was opened");
        request->fn_status = SQLITE_READONLY;
        connection_drop(db, c);
        return;
    }
    if (request->fn != NULL) {
        request->fn_status = request->fn(c->handle, request->arg);
        if (!sqlite3_get_autocommit(c->handle)) {
            SXE_LOG_ERROR("sqlite: %s: a function left a transaction open: rolled back", db->path);
            sqlite3_exec(c->handle, "ROLLBACK", NULL, NULL, NULL);
        }
    } else {
        run_text(db, c, rows);
        sxe__sqlite_rows_finish(rows);
    }
    connection_give(db, c);
}

struct call {
    sxe_fiber_t *fiber;
    struct sxe_sqlite_rows *rows;
};

static void statement_done(void *arg, int status) /* on the loop's thread */
{
    struct sxe_sqlite_rows *rows = arg;
    struct sxe__sqlite_request *request = &rows->request;

    request->db->out--;
    if (status == -ECANCELED) {
        sxe__sqlite_rows_fail(rows, -ECANCELED, "the pool was destroyed before it ran");
        request->fn_status = -ECANCELED;
    }
    if (request->fn != NULL) {
        request->work_done(request->arg, request->fn_status);
        sxe_sqlite_rows_free(rows);
    } else if (request->keep) {
        struct call *call = request->arg;
        call->rows = rows;
        sxe_fiber_wake(call->fiber, 0);
    } else {
        request->done(request->arg, rows);
        sxe_sqlite_rows_free(rows);
    }
}

/* Copies the statement into one block and gives it to the pool. */
static int submit(sxe_sqlite_t *db, const char *sql, const struct sxe_sqlite_value *params,
                  unsigned count, const struct sxe__sqlite_request *how)
{
    size_t sql_len = sql ? strlen(sql) : 0;
    size_t size = sizeof(struct sxe_sqlite_rows) + count * sizeof(*params) + sql_len + 1;
    struct sxe_sqlite_rows *rows;
    int rc;

    if (!SXE_CHECK(db != NULL && sql != NULL && (count == 0 || params != NULL))) {
        return -EINVAL;
    }
    for (unsigned i = 0; i < count; i++) {
        bool bytes = params[i].type == SXE_SQLITE_TEXT || params[i].type == SXE_SQLITE_BLOB;
        if (!SXE_CHECK(params[i].type <= SXE_SQLITE_BLOB) ||
            !SXE_CHECK(!bytes || params[i].bytes.data != NULL || params[i].bytes.len == 0)) {
            return -EINVAL;
        }
        if (bytes && params[i].bytes.len > SIZE_MAX / 2 - size) {
            return -ENOMEM;
        }
        size += bytes ? params[i].bytes.len : 0;
    }
    if ((rows = malloc(size)) == NULL) {
        return -ENOMEM;
    }
    memset(rows, 0, sizeof(*rows));
    rows->limit = db->options.result_bytes;
    rows->request = *how;
    rows->request.db = db;
    rows->request.count = count;
    rows->request.params = (struct sxe_sqlite_value *)(rows + 1);
    char *at = (char *)(rows->request.params + count);
    for (unsigned i = 0; i < count; i++) {
        struct sxe_sqlite_value *param = &rows->request.params[i];
        *param = params[i];
        if (param->type == SXE_SQLITE_TEXT || param->type == SXE_SQLITE_BLOB) {
            if (param->bytes.len > 0) {
                memcpy(at, param->bytes.data, param->bytes.len);
            }
            param->bytes.data = at; /* never NULL: SQLite binds NULL for that */
            at += param->bytes.len;
        }
    }
    rows->request.sql = memcpy(at, sql, sql_len + 1);
    rows->request.sql_len = sql_len;
    if ((rc = sxe_work_submit(db->pool, statement_work, statement_done, rows, NULL)) < 0) {
        free(rows);
        return rc;
    }
    db->out++;
    return 0;
}

int sxe_sqlite_run(sxe_sqlite_t *db, const char *sql, const struct sxe_sqlite_value *params,
                   unsigned count, sxe_sqlite_done_t done, void *arg)
{
    if (!SXE_CHECK(done != NULL)) {
        return -EINVAL;
    }
    return submit(db, sql, params, count, &(struct sxe__sqlite_request){.done = done, .arg = arg});
}

int sxe_sqlite_call(sxe_sqlite_t *db, const char *sql, const struct sxe_sqlite_value *params,
                    unsigned count, sxe_sqlite_rows_t **rows)
{
    struct call call = {.fiber = sxe_fiber_self()};
    int rc;

    *rows = NULL;
    if (call.fiber == NULL) {
        return -EPERM;
    }
    if ((rc = submit(db, sql, params, count,
                     &(struct sxe__sqlite_request){.keep = true, .arg = &call})) < 0) {
        return rc;
    }
    sxe_fiber_wait();
    *rows = call.rows;
    return call.rows->status;
}

int sxe_sqlite_work(sxe_sqlite_t *db, sxe_sqlite_fn_t fn, sxe_sqlite_work_done_t done, void *arg)
{
    if (!SXE_CHECK(fn != NULL && done != NULL)) {
        return -EINVAL;
    }
    return submit(db, "", NULL, 0,
                  &(struct sxe__sqlite_request){.fn = fn, .work_done = done, .arg = arg});
}

/* On the loop's thread at open: the file is a database, in WAL mode unless read-only, set up. */
static int first_connection(sxe_sqlite_t *db)
{
    struct connection *c;
    char message[160];
    int os_errno = 0;
    int rc = connection_open(db, true, &c, message, sizeof(message), &os_errno);

    if (rc == SQLITE_OK && !db->options.read_only) {
        rc = sqlite3_exec(c->handle, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
    }
    if (rc == SQLITE_OK) {
        rc = sqlite3_exec(c->handle, "SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL);
    }
    if (rc == SQLITE_OK && db->options.setup != NULL) {
        rc = sqlite3_exec(c->handle, db->options.setup, NULL, NULL, NULL);
    }
    if (rc != SQLITE_OK && db->all != NULL) {
        snprintf(message, sizeof(message), "%s", sqlite3_errmsg(c->handle));
        os_errno = sqlite3_system_errno(c->handle);
    }
    if (rc != SQLITE_OK) {
        SXE_LOG_ERROR("sqlite: %s: %s%s%s%s", db->path, message, os_errno ? " (" : "",
                      os_errno ? strerror(os_errno) : "", os_errno ? ")" : "");
        return open_error(rc, os_errno);
    }
    connection_give(db, c);
    return 0;
}

int sxe_sqlite_open(sxe_sqlite_t **opened, sxe_work_pool_t *pool, const char *path,
                    const struct sxe_sqlite_options *options)
{
    struct sxe_sqlite_options given = options ? *options : (struct sxe_sqlite_options){0};
    sxe_sqlite_t *db;
    int rc;

    if (!SXE_CHECK(opened != NULL && pool != NULL && path != NULL) ||
        !SXE_CHECK(given.statements <= STATEMENTS_MAX && given.busy_ms <= INT32_MAX)) {
        return -EINVAL;
    }
    *opened = NULL;
    if ((db = calloc(1, sizeof(*db) + strlen(path) + 1)) == NULL) {
        return -ENOMEM;
    }
    db->pool = pool;
    db->options = given;
    db->options.busy_ms = given.busy_ms ? given.busy_ms : DEFAULT_BUSY_MS;
    db->options.statements = given.statements ? given.statements : DEFAULT_STATEMENTS;
    db->options.result_bytes = given.result_bytes ? given.result_bytes : DEFAULT_RESULT_BYTES;
    strcpy(db->path, path);
    pthread_mutex_init(&db->lock, NULL);
    if ((rc = first_connection(db)) < 0) {
        connections_close(db);
        pthread_mutex_destroy(&db->lock);
        free(db);
        return rc;
    }
    *opened = db;
    return 0;
}

int sxe_sqlite_close(sxe_sqlite_t *db)
{
    if (db == NULL) {
        return 0;
    }
    if (db->out != 0) { /* not yet called back, or abandoned by the pool's end */
        SXE_LOG_ERROR("sqlite: %s: %u statements are out: the database stays open", db->path,
                      db->out);
        return -EBUSY;
    }
    connections_close(db);
    pthread_mutex_destroy(&db->lock);
    free(db);
    return 0;
}
