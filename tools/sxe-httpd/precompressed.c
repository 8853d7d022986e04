/*
 * sxe-httpd's precompressed sidecars: see precompressed.h. A sidecar's entry is cached beside its
 * original's, under the key "br:/path" (a request path always starts with '/', so no request's
 * own key can be one), and checked again at most once a second as every entry is.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "precompressed.h"

static const struct {
    const char *name;   /* the content coding (RFC 9110 §8.4.1) */
    const char *suffix; /* the sidecar's, after the original's name */
} codings[] = {
    [CODING_BR] = {"br", ".br"}, [CODING_ZSTD] = {"zstd", ".zst"}, [CODING_GZIP] = {"gzip", ".gz"}};

const char *precompressed_coding(unsigned which)
{
    return codings[which].name;
}

#define CODINGS (sizeof(codings) / sizeof(codings[0]))

unsigned precompressed_sidecars(const char *resolved, uint64_t mtime_ns)
{
    char path[PATH_MAX + 8];
    struct stat status;
    unsigned sidecars = 0;

    for (unsigned i = 0; i < CODINGS; i++) {
        snprintf(path, sizeof(path), "%s%s", resolved, codings[i].suffix);
        /* A link could lead out of the root: only a regular file in the original's directory. */
        if (lstat(path, &status) == 0 && S_ISREG(status.st_mode) &&
            stat_mtime_ns(&status) >= mtime_ns) {
            sidecars |= 1u << i;
        }
    }
    return sidecars;
}

/* A weight (RFC 9110 §12.4.2: "0" to "1", three decimals at most) in thousandths, or -1. */
static int weight(const char *text, size_t len)
{
    if (len == 0 || len > 5 || (text[0] != '0' && text[0] != '1') || (len > 1 && text[1] != '.')) {
        return -1;
    }
    int thousandths = (text[0] - '0') * 1000;
    for (size_t i = 2, scale = 100; i < len; i++, scale /= 10) {
        if (text[i] < '0' || text[i] > '9') {
            return -1;
        }
        thousandths += (text[i] - '0') * (int)scale;
    }
    return thousandths <= 1000 ? thousandths : -1;
}

/* One element of the list, "coding[;q=W][;other]": its weight into named or star. */
static void element(const char *text, size_t len, int named[CODINGS], int *star)
{
    size_t end = 0, q = 1000;

    while (end < len && text[end] != ';' && text[end] != ' ' && text[end] != '\t') {
        end++;
    }
    for (const char *param = memchr(text, ';', len); param != NULL;
         param = memchr(param + 1, ';', len - (size_t)(param + 1 - text))) {
        const char *value = param + 1;
        while (value < text + len && (*value == ' ' || *value == '\t')) {
            value++;
        }
        if (text + len - value >= 2 && (value[0] == 'q' || value[0] == 'Q') && value[1] == '=') {
            const char *stop = memchr(value, ';', (size_t)(text + len - value));
            size_t value_len = (size_t)((stop ? stop : text + len) - value) - 2;
            while (value_len > 0 &&
                   (value[2 + value_len - 1] == ' ' || value[2 + value_len - 1] == '\t')) {
                value_len--;
            }
            int parsed = weight(value + 2, value_len);
            q = parsed < 0 ? 0 : (size_t)parsed; /* a weight that does not parse refuses */
        }
    }
    if (end == 1 && text[0] == '*') {
        *star = (int)q;
        return;
    }
    for (unsigned i = 0; i < CODINGS; i++) {
        if ((strlen(codings[i].name) == end && strncasecmp(text, codings[i].name, end) == 0) ||
            (i == CODINGS - 1 && end == 6 && strncasecmp(text, "x-gzip", 6) == 0)) {
            named[i] = (int)q;
        }
    }
}

/* One Accept-Encoding value's elements, weighed into named and star. */
static void weigh(const char *value, size_t len, int named[CODINGS], int *star)
{
    for (size_t at = 0; at < len;) {
        while (at < len && (value[at] == ' ' || value[at] == '\t' || value[at] == ',')) {
            at++;
        }
        const char *comma = memchr(value + at, ',', len - at);
        size_t stop = comma != NULL ? (size_t)(comma - value) : len;
        if (stop > at) {
            element(value + at, stop - at, named, star);
        }
        at = stop;
    }
}

int precompressed_choose(const struct sxe_http_request_head *request, unsigned sidecars)
{
    int named[CODINGS] = {-1, -1, -1}, star = -1, best = -1, best_weight = 0;

    for (unsigned i = 0; i < request->header_count; i++) { /* every line: one list (§5.3) */
        const struct sxe_http_header *field = &request->headers[i];
        if (field->name_len == 15 && strncasecmp(field->name, "Accept-Encoding", 15) == 0) {
            weigh(field->value, field->value_len, named, &star);
        }
    }
    for (unsigned i = 0; i < CODINGS; i++) {
        int w = named[i] >= 0 ? named[i] : star;
        if ((sidecars & (1u << i)) && w > best_weight) {
            best = (int)i;
            best_weight = w;
        }
    }
    return best;
}

struct file *precompressed_pick(sxe_http_t *http, struct file *file, uint64_t now)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    unsigned sidecars = __atomic_load_n(&file->sidecars, __ATOMIC_RELAXED);
    int which;

    if (sidecars == 0 || sxe_http_request_header(request, "Range") != NULL ||
        (which = precompressed_choose(request, sidecars)) < 0) {
        return file;
    }
    char key[CACHE_KEY_MAX], path[PATH_MAX + 8];
    int key_len = snprintf(key, sizeof(key), "%s:%s", codings[which].name, file->key);
    bool cacheable = file->key_len > 0 && key_len < (int)sizeof(key);
    struct file *variant = cacheable ? cache_find(key, (size_t)key_len) : NULL;
    if (variant != NULL && cache_fresh(variant, now)) {
        file_unref(file);
        return variant;
    }
    snprintf(path, sizeof(path), "%s%s", file->resolved, codings[which].suffix);
    struct stat status;
    /* Not blocking: a FIFO put there since the check would hold the loop until a writer came. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &status) < 0 || !S_ISREG(status.st_mode) ||
        stat_mtime_ns(&status) < file->mtime_ns) { /* gone or stale since the original's check */
        if (fd >= 0) {
            close(fd);
        }
        if (variant != NULL) {
            file_unref(variant);
        }
        return file;
    }
    if (variant != NULL && file_unchanged(variant, &status)) {
        close(fd);
        cache_checked(variant, now);
        file_unref(file);
        return variant;
    }
    if (variant != NULL) {
        file_unref(variant);
    }
    if ((variant = file_load(cacheable ? key : "", path, fd, &status, file->type,
                             codings[which].name, file->added)) == NULL) {
        return file; /* memory is short: the original will do */
    }
    cache_checked(variant, now);
    if (cacheable) {
        cache_keep(variant);
    }
    file_unref(file);
    return variant;
}
