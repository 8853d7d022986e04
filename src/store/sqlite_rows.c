/*
 * A statement's rows, copied out of SQLite on the pool thread that ran it, for the loop's thread
 * to read after the statement and its connection have moved on. Two growing arrays: the values,
 * and the bytes of the column names, texts and blobs. Until the rows are finished a value's bytes
 * are an offset into the second (it may move as it grows); then a pointer.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

static const struct sxe_sqlite_value null_value = {.type = SXE_SQLITE_NULL};

void sxe__sqlite_rows_fail(struct sxe_sqlite_rows *rows, int status, const char *message)
{
    rows->status = status;
    snprintf(rows->message, sizeof(rows->message), "%s", message);
    sxe__sqlite_rows_clear(rows);
}

/* The bytes the rows hold, counted against options.result_bytes. */
static size_t held(const struct sxe_sqlite_rows *rows, size_t more_values, size_t more_bytes)
{
    return (rows->row_count * rows->columns + more_values) * sizeof(struct sxe_sqlite_value) +
           rows->bytes_len + more_bytes;
}

static int too_big(struct sxe_sqlite_rows *rows)
{
    char message[80];

    snprintf(message, sizeof(message), "the rows pass result_bytes (%u)", rows->limit);
    sxe__sqlite_rows_fail(rows, -EFBIG, message);
    return -EFBIG;
}

static int no_memory(struct sxe_sqlite_rows *rows)
{
    sxe__sqlite_rows_fail(rows, -ENOMEM, "out of memory for the rows");
    return -ENOMEM;
}

/* Room for len more bytes; their offset in *at. */
static int bytes_add(struct sxe_sqlite_rows *rows, const void *data, size_t len, size_t *at)
{
    if (held(rows, 0, len + 1) > rows->limit) {
        return too_big(rows);
    }
    if (rows->bytes_len + len + 1 > rows->bytes_cap) {
        size_t cap = rows->bytes_cap ? rows->bytes_cap : 256;
        while (cap < rows->bytes_len + len + 1) {
            cap *= 2;
        }
        char *bytes = realloc(rows->bytes, cap);
        if (bytes == NULL) {
            return no_memory(rows);
        }
        rows->bytes = bytes;
        rows->bytes_cap = cap;
    }
    *at = rows->bytes_len;
    if (len > 0) {
        memcpy(rows->bytes + rows->bytes_len, data, len);
    }
    rows->bytes[rows->bytes_len + len] = '\0';
    rows->bytes_len += len + 1;
    return 0;
}

void sxe__sqlite_rows_clear(struct sxe_sqlite_rows *rows)
{
    free(rows->values);
    free(rows->bytes);
    free(rows->names);
    rows->values = NULL;
    rows->bytes = NULL;
    rows->names = NULL;
    rows->values_cap = rows->bytes_len = rows->bytes_cap = rows->row_count = 0;
    rows->columns = 0;
}

int sxe__sqlite_rows_start(struct sxe_sqlite_rows *rows, sqlite3_stmt *stmt)
{
    unsigned columns = (unsigned)sqlite3_column_count(stmt);

    sxe__sqlite_rows_clear(rows); /* the rows of an earlier statement of the same text */
    if (columns == 0) {
        return 0;
    }
    if ((rows->names = calloc(columns, sizeof(*rows->names))) == NULL) {
        return no_memory(rows);
    }
    rows->columns = columns;
    for (unsigned i = 0; i < columns; i++) {
        const char *name = sqlite3_column_name(stmt, (int)i);
        if (name == NULL) {
            return no_memory(rows);
        }
        if (bytes_add(rows, name, strlen(name), &rows->names[i]) < 0) {
            return rows->status;
        }
    }
    return 0;
}

static int value_copy(struct sxe_sqlite_rows *rows, sqlite3_stmt *stmt, int i,
                      struct sxe_sqlite_value *value)
{
    size_t at;

    switch (sqlite3_column_type(stmt, i)) {
    case SQLITE_INTEGER:
        *value = (struct sxe_sqlite_value){.type = SXE_SQLITE_INTEGER,
                                           .integer = sqlite3_column_int64(stmt, i)};
        return 0;
    case SQLITE_FLOAT:
        *value = (struct sxe_sqlite_value){.type = SXE_SQLITE_REAL,
                                           .real = sqlite3_column_double(stmt, i)};
        return 0;
    case SQLITE_NULL:
        *value = null_value;
        return 0;
    default: { /* text and blobs: their length first, checked before SQLite reads them whole */
        int text = sqlite3_column_type(stmt, i) == SQLITE_TEXT;
        size_t len = (size_t)sqlite3_column_bytes(stmt, i); /* UTF-8 or a blob: nothing changes */
        if (held(rows, 0, len + 1) > rows->limit) {
            return too_big(rows);
        }
        const void *data =
            text ? (const void *)sqlite3_column_text(stmt, i) : sqlite3_column_blob(stmt, i);
        if (data == NULL && len > 0) {
            return no_memory(rows);
        }
        if (bytes_add(rows, data, len, &at) < 0) {
            return rows->status;
        }
        *value = (struct sxe_sqlite_value){.type = text ? SXE_SQLITE_TEXT : SXE_SQLITE_BLOB,
                                           .bytes = {(const void *)(uintptr_t)at, len}};
        return 0;
    }
    }
}

int sxe__sqlite_rows_add(struct sxe_sqlite_rows *rows, sqlite3_stmt *stmt)
{
    size_t first = rows->row_count * rows->columns;

    if (held(rows, rows->columns, 0) > rows->limit) {
        return too_big(rows);
    }
    if (first + rows->columns > rows->values_cap) {
        size_t cap = rows->values_cap ? rows->values_cap * 2 : 16 * (size_t)rows->columns;
        struct sxe_sqlite_value *values = realloc(rows->values, cap * sizeof(*values));
        if (values == NULL) {
            return no_memory(rows);
        }
        rows->values = values;
        rows->values_cap = cap;
    }
    for (unsigned i = 0; i < rows->columns; i++) {
        if (value_copy(rows, stmt, (int)i, &rows->values[first + i]) < 0) {
            return rows->status;
        }
    }
    rows->row_count++;
    return 0;
}

void sxe__sqlite_rows_finish(struct sxe_sqlite_rows *rows)
{
    for (size_t i = 0; i < rows->row_count * rows->columns; i++) {
        struct sxe_sqlite_value *value = &rows->values[i];
        if (value->type == SXE_SQLITE_TEXT || value->type == SXE_SQLITE_BLOB) {
            value->bytes.data = rows->bytes + (uintptr_t)value->bytes.data;
        }
    }
}

int sxe_sqlite_status(const sxe_sqlite_rows_t *rows)
{
    return rows->status;
}

const char *sxe_sqlite_message(const sxe_sqlite_rows_t *rows)
{
    return rows->message;
}

size_t sxe_sqlite_row_count(const sxe_sqlite_rows_t *rows)
{
    return rows->row_count;
}

unsigned sxe_sqlite_column_count(const sxe_sqlite_rows_t *rows)
{
    return rows->columns;
}

const char *sxe_sqlite_column_name(const sxe_sqlite_rows_t *rows, unsigned column)
{
    return column < rows->columns ? rows->bytes + rows->names[column] : NULL;
}

const struct sxe_sqlite_value *sxe_sqlite_value(const sxe_sqlite_rows_t *rows, size_t row,
                                                unsigned column)
{
    if (row >= rows->row_count || column >= rows->columns) {
        return &null_value;
    }
    return &rows->values[row * rows->columns + column];
}

int64_t sxe_sqlite_changes(const sxe_sqlite_rows_t *rows)
{
    return rows->changes;
}

int64_t sxe_sqlite_last_id(const sxe_sqlite_rows_t *rows)
{
    return rows->last_id;
}

void sxe_sqlite_rows_free(sxe_sqlite_rows_t *rows)
{
    if (rows != NULL) {
        sxe__sqlite_rows_clear(rows);
        free(rows);
    }
}
