/*
 * sxe-httpd's media types (mime.h). The file's extensions are sorted once, and a file's type is
 * found by a binary search when the file is first cached (never per request). A type the file
 * gives an extension wins over the built-in one, as nginx's types block replaces its own; a text
 * type gets "; charset=utf-8", as the built-in ones have. A host's --type wins over both, and the
 * default host's --type over them for every host.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mime.h"

static const struct known {
    const char *extension;
    const char *type;
} built_in[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/x-icon"},
    {"pdf", "application/pdf"},
    {"wasm", "application/wasm"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tar", "application/x-tar"},
};

/* The file's, sorted by extension (case folded); each line's type is one string, as sent. */
static struct known *loaded;
static size_t loaded_count;

/* --type EXT=TYPE, by host, in the order given. */
static struct {
    unsigned host;
    char extension[32];
    char type[MIME_TYPE_MOST + 16];
} given[MIME_GIVEN_MOST];
static unsigned given_count;

const char *mime_add(unsigned host, const char *spec)
{
    const char *equals = strchr(spec, '=');
    size_t extension_len = equals != NULL ? (size_t)(equals - spec) : 0;

    if (given_count == MIME_GIVEN_MOST) {
        return "is given too often (256 at most)";
    }
    bool plain = equals != NULL;
    for (const char *at = equals != NULL ? equals + 1 : ""; *at != '\0'; at++) {
        plain = plain && (unsigned char)*at >= 0x20 && *at != 0x7f; /* it goes in a field */
    }
    if (!plain || extension_len == 0 || extension_len >= sizeof(given[0].extension) ||
        strcspn(spec, "/. \t") < extension_len || strchr(equals + 1, '/') == NULL ||
        strlen(equals + 1) > MIME_TYPE_MOST) {
        return "must be EXT=TYPE: an extension without its dot, and a type such as text/plain";
    }
    given[given_count].host = host;
    memcpy(given[given_count].extension, spec, extension_len);
    given[given_count].extension[extension_len] = '\0';
    snprintf(given[given_count].type, sizeof(given[0].type), "%s%s", equals + 1,
             strncmp(equals + 1, "text/", 5) == 0 && strchr(equals + 1, ';') == NULL
                 ? "; charset=utf-8"
                 : "");
    given_count++;
    return NULL;
}

static int by_extension(const void *a, const void *b)
{
    return strcasecmp(((const struct known *)a)->extension, ((const struct known *)b)->extension);
}

/* Adds line's type for each of its extensions. @return 0 or -ENOMEM. */
static int take_line(char *line, size_t *room)
{
    char *save = NULL;
    const char *type = strtok_r(line, " \t\r\n", &save);

    if (type == NULL || type[0] == '#' || strchr(type, '/') == NULL ||
        strlen(type) > MIME_TYPE_MOST) {
        return 0; /* a comment, or not a type (RFC 6838: 127 bytes a name, each side of the '/') */
    }
    const char *suffix = strncmp(type, "text/", 5) == 0 ? "; charset=utf-8" : "";
    size_t type_len = strlen(type) + strlen(suffix) + 1;
    char *sent = NULL;
    for (char *extension; (extension = strtok_r(NULL, " \t\r\n", &save)) != NULL;) {
        if (extension[0] == '#') {
            break;
        }
        if (sent == NULL && (sent = malloc(type_len)) == NULL) {
            return -ENOMEM;
        }
        snprintf(sent, type_len, "%s%s", type, suffix);
        if (loaded_count == *room) {
            size_t bigger = *room ? *room * 2 : 1024;
            struct known *grown = realloc(loaded, bigger * sizeof(*grown));
            if (grown == NULL) {
                return -ENOMEM;
            }
            loaded = grown;
            *room = bigger;
        }
        char *copy = strdup(extension);
        if (copy == NULL) {
            return -ENOMEM;
        }
        loaded[loaded_count++] = (struct known){.extension = copy, .type = sent};
    }
    return 0;
}

int mime_load(const char *path, bool required)
{
    FILE *file = fopen(path, "r");
    char line[4096];
    size_t room = 0;
    int rc = 0;

    if (file == NULL) {
        return required || errno != ENOENT ? -errno : 0;
    }
    while (rc == 0 && fgets(line, sizeof(line), file) != NULL) {
        rc = take_line(line, &room);
    }
    if (rc == 0 && ferror(file)) {
        rc = -EIO;
    }
    fclose(file);
    if (loaded_count > 0) {
        qsort(loaded, loaded_count, sizeof(*loaded), by_extension);
    }
    return rc;
}

const char *mime_type(unsigned host, const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');

    if (dot == NULL || (slash != NULL && dot < slash)) {
        return "application/octet-stream";
    }
    const char *found_given = NULL; /* the host's own, else the default host's */
    for (unsigned i = 0; i < given_count; i++) {
        if ((given[i].host == host || (given[i].host == 0 && found_given == NULL)) &&
            strcasecmp(dot + 1, given[i].extension) == 0) {
            found_given = given[i].type;
        }
    }
    if (found_given != NULL) {
        return found_given;
    }
    struct known key = {.extension = dot + 1};
    const struct known *found =
        loaded_count > 0 ? bsearch(&key, loaded, loaded_count, sizeof(*loaded), by_extension)
                         : NULL;
    if (found != NULL) {
        return found->type;
    }
    for (size_t i = 0; i < sizeof(built_in) / sizeof(built_in[0]); i++) {
        if (strcasecmp(dot + 1, built_in[i].extension) == 0) {
            return built_in[i].type;
        }
    }
    return "application/octet-stream";
}
