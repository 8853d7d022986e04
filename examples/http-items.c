/*
 * A store of items over HTTP, kept in SQLite: POST /items with {"name": NAME} adds one (201 and
 * its id), GET /items lists the latest 100, newest first. The handlers run on fibers, where
 * sxe_sqlite_call() reads as a plain call while the loop serves everyone else; the statements
 * run on a work pool's threads, against one file in WAL mode that other processes may share.
 *
 *     http-items [IP:PORT] [FILE]        (127.0.0.1:8080, items.db)
 *     curl -d '{"name": "tea"}' http://127.0.0.1:8080/items
 *     curl http://127.0.0.1:8080/items
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sxe/sxe.h>

static sxe_sqlite_t *db;

static void failed(sxe_http_t *http, const sxe_sqlite_rows_t *rows)
{
    char quoted[1024] = "\"busy\""; /* no rows: the pool's queue is full */
    if (rows != NULL)
        (void)sxe_json_string(quoted, sizeof(quoted), sxe_sqlite_message(rows),
                              strlen(sxe_sqlite_message(rows)));
    sxe_http_respondf(http, rows ? 500 : 503, "application/json", NULL, "{\"error\": %s}\n",
                      quoted);
}

static void add(sxe_http_t *http, void *arg) /* on a fiber */
{
    sxe_json_t *json;
    sxe_sqlite_rows_t *rows = NULL;
    size_t len;
    (void)arg;
    if (sxe_http_json(http, &json, NULL) < 0) /* not JSON, or too big: answered */
        return;
    const char *name = sxe_json_text(sxe_json_get(json, "name"), &len);
    if (name == NULL || len == 0 || len > 64 || strlen(name) != len)
        sxe_http_respondf(http, 422, "application/json", NULL,
                          "{\"error\": \"want a name of 1 to 64 bytes\"}\n");
    else if (sxe_sqlite_call(db, "INSERT INTO items(name) VALUES (?)", &SXE_SQLITE_TEXT(name, len),
                             1, &rows) != 0)
        failed(http, rows);
    else
        sxe_http_respondf(http, 201, "application/json", NULL, "{\"id\": %lld}\n",
                          (long long)sxe_sqlite_last_id(rows));
    sxe_sqlite_rows_free(rows);
    sxe_json_free(json);
}

static void list(sxe_http_t *http, void *arg) /* on a fiber */
{
    sxe_sqlite_rows_t *rows;
    (void)arg;
    if (sxe_sqlite_call(db, "SELECT id, name FROM items ORDER BY id DESC LIMIT 100", NULL, 0,
                        &rows) != 0) {
        failed(http, rows);
        sxe_sqlite_rows_free(rows);
        return;
    }
    char quoted[400];
    size_t count = sxe_sqlite_row_count(rows), size = 8 + count * (sizeof(quoted) + 48), used = 1;
    char *out = malloc(size); /* room for each item at its longest: no snprintf is cut */
    if (out == NULL) {
        sxe_http_respond(http, 503, "text/plain", "out of memory\n", 14);
        sxe_sqlite_rows_free(rows);
        return;
    }
    out[0] = '[';
    for (size_t i = 0; i < count; i++) {
        const struct sxe_sqlite_value *name = sxe_sqlite_value(rows, i, 1);
        if (name->type != SXE_SQLITE_TEXT ||
            sxe_json_string(quoted, sizeof(quoted), name->bytes.data, name->bytes.len) < 0)
            strcpy(quoted, "null"); /* not text of 64 bytes, as another writer may leave */
        used += (size_t)snprintf(out + used, size - used, "%s{\"id\": %lld, \"name\": %s}",
                                 i ? ", " : "", (long long)sxe_sqlite_value(rows, i, 0)->integer,
                                 quoted);
    }
    used += (size_t)snprintf(out + used, size - used, "]\n");
    sxe_http_respond(http, 200, "application/json", out, used);
    free(out);
    sxe_sqlite_rows_free(rows);
}

int main(int argc, char **argv)
{
    struct sxe_http_server_options options = {.fibers = 1024, .deferred = 1024};
    struct sxe_sqlite_options store = {
        .setup = "CREATE TABLE IF NOT EXISTS items(id INTEGER PRIMARY KEY, name TEXT NOT NULL)"};
    const char *address = argc > 1 ? argv[1] : "127.0.0.1:8080";
    const char *file = argc > 2 ? argv[2] : "items.db";
    sxe_http_server_t *server = NULL;
    sxe_work_pool_t *pool = NULL;
    int rc;

    if ((rc = sxe_http_server_create(&server, NULL, &options)) < 0 ||
        (rc = sxe_work_pool_create(&pool, sxe_http_server_loop(server), NULL)) < 0 ||
        (rc = sxe_sqlite_open(&db, pool, file, &store)) < 0 ||
        (rc = sxe_http_server_route(server, "POST", "/items", SXE_HTTP_ROUTE_FIBER, add, NULL)) <
            0 ||
        (rc = sxe_http_server_route(server, "GET", "/items", SXE_HTTP_ROUTE_FIBER, list, NULL)) <
            0 ||
        (rc = sxe_http_server_listen(server, address)) < 0) {
        fprintf(stderr, "http-items: cannot serve %s on %s: %s\n", file, address, sxe_strerror(rc));
    } else {
        rc = sxe_http_server_run(server);
    }
    sxe_work_pool_destroy(pool); /* calls back every statement still out */
    (void)sxe_sqlite_close(db);
    sxe_http_server_destroy(server);
    return rc < 0;
}
