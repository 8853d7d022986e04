/*
 * Reading JSON in a build without it (-DSXE_JSON=OFF): nothing parses, so no value exists, and
 * every accessor answers as it does for NULL.
 */
#include <errno.h>
#include <stdio.h>

#include "sxe/json.h"

int sxe_json_parse(sxe_json_t **root, const char *text, size_t len,
                   const struct sxe_json_limits *limits, struct sxe_json_error *error)
{
    (void)text, (void)len, (void)limits;
    if (root != NULL) {
        *root = NULL;
    }
    if (error != NULL) {
        *error = (struct sxe_json_error){0};
        snprintf(error->text, sizeof(error->text), "built without JSON reading (-DSXE_JSON=OFF)");
    }
    return -ENOTSUP;
}

void sxe_json_free(sxe_json_t *root)
{
    (void)root;
}

enum sxe_json_type sxe_json_type(const sxe_json_t *value)
{
    (void)value;
    return SXE_JSON_NONE;
}

sxe_json_t *sxe_json_get(const sxe_json_t *object, const char *key)
{
    (void)object, (void)key;
    return NULL;
}

sxe_json_t *sxe_json_at(const sxe_json_t *array, size_t index)
{
    (void)array, (void)index;
    return NULL;
}

size_t sxe_json_size(const sxe_json_t *value)
{
    (void)value;
    return 0;
}

const char *sxe_json_text(const sxe_json_t *value, size_t *len)
{
    (void)value, (void)len;
    return NULL;
}

int sxe_json_integer(const sxe_json_t *value, int64_t *integer)
{
    (void)value, (void)integer;
    return -EINVAL;
}

int sxe_json_number(const sxe_json_t *value, double *number)
{
    (void)value, (void)number;
    return -EINVAL;
}

bool sxe_json_true(const sxe_json_t *value)
{
    (void)value;
    return false;
}

bool sxe_json_next(const sxe_json_t *object, size_t *cursor, const char **key, sxe_json_t **value)
{
    (void)object, (void)cursor, (void)key, (void)value;
    return false;
}
