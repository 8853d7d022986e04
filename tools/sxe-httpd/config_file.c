/*
 * sxe-httpd's configuration file (config_file.h): libyaml's events, walked as a small state
 * machine over the one shape the file may have, a mapping of keys to scalars or lists of
 * scalars, with `hosts:` a mapping of names to mappings of that kind. YAML is what h2o's
 * operators write; libyaml (Debian's libyaml-dev) does the reading.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_file.h"

#ifdef SXE_HAVE_YAML
#include <yaml.h>

/* `- /a X-A: b` is a mapping to YAML: the likeliest reason for one where a value was due. */
#define QUOTE " (quote a value that holds ': ')"

/* Where the walk is: what the next event may be. HOSTS: a host's name or the end of `hosts:`;
 * HOST: the mapping that follows a host's name. */
enum place { BEFORE, TOP, KEY, VALUE, LIST, AFTER, HOSTS_START, HOSTS, HOST };

struct walk {
    struct config_file *file;
    enum place place;
    char *key; /* the key whose value comes next */
    unsigned key_line;
    unsigned listed; /* values in the key's list so far */
    unsigned host;   /* the host whose mapping is walked, or 0 */
    size_t before;   /* entries before the host's */
    bool had_hosts;  /* `hosts:` was read (its line: hosts_line) */
    unsigned hosts_line;
    size_t room;
};

static int __attribute__((format(printf, 3, 4)))
refuse(struct config_file *file, unsigned line, const char *format, ...)
{
    va_list args;

    va_start(args, format);
    vsnprintf(file->why, sizeof(file->why), format, args);
    va_end(args);
    file->line = line;
    return -1;
}

static bool is_null(const yaml_event_t *event)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    const char *value = (const char *)event->data.scalar.value;

    if (event->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        return false;
    }
    for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++) {
        if (strcmp(value, nulls[i]) == 0) {
            return true;
        }
    }
    return false;
}

static int add(struct walk *walk, const yaml_event_t *event, bool listed)
{
    struct config_file *file = walk->file;
    unsigned line = (unsigned)event->start_mark.line + 1;

    if (is_null(event)) {
        return refuse(file, line, "'%s' has no value", walk->key);
    }
    if (strlen((const char *)event->data.scalar.value) != event->data.scalar.length) {
        return refuse(file, line, "'%s' holds a NUL byte in its value", walk->key);
    }
    if (file->count == CONFIG_FILE_VALUES_MOST) {
        return refuse(file, line, "more than %d values: not a configuration of sxe-httpd",
                      CONFIG_FILE_VALUES_MOST);
    }
    if (file->count == walk->room) {
        size_t room = walk->room ? walk->room * 2 : 16;
        struct config_entry *entries = realloc(file->entries, room * sizeof(*entries));
        if (entries == NULL) {
            return refuse(file, line, "%s", "out of memory");
        }
        file->entries = entries;
        walk->room = room;
    }
    char *value = strdup((const char *)event->data.scalar.value);
    if (value == NULL) {
        return refuse(file, line, "%s", "out of memory");
    }
    file->entries[file->count++] = (struct config_entry){.key = walk->key,
                                                         .value = value,
                                                         .line = line,
                                                         .key_line = walk->key_line,
                                                         .host = walk->host,
                                                         .listed = listed};
    walk->listed++;
    return 0;
}

/* The key walked last, freed if no entry holds it (an empty list's). */
static void drop_key(struct walk *walk)
{
    struct config_file *file = walk->file;

    if (walk->key != NULL &&
        (file->count == 0 || file->entries[file->count - 1].key != walk->key)) {
        free(walk->key);
    }
    walk->key = NULL;
}

/* A key of the top mapping: a scalar given once. */
static int take_key(struct walk *walk, const yaml_event_t *event)
{
    struct config_file *file = walk->file;
    unsigned line = (unsigned)event->start_mark.line + 1;

    if (event->type != YAML_SCALAR_EVENT ||
        strlen((const char *)event->data.scalar.value) != event->data.scalar.length) {
        return refuse(file, line, "%s", "a key must be a name, such as root or listen");
    }
    const char *key = (const char *)event->data.scalar.value;
    for (size_t i = 0; i < file->count; i++) {
        if (file->entries[i].host == walk->host && strcmp(file->entries[i].key, key) == 0) {
            return refuse(file, line, "'%s' is given twice (first on line %u)", key,
                          file->entries[i].key_line);
        }
    }
    drop_key(walk);
    if (strcmp(key, "hosts") == 0) {
        if (walk->host != 0) {
            return refuse(file, line, "%s", "'hosts' is of the top mapping, not of a host");
        }
        if (walk->had_hosts) {
            return refuse(file, line, "'hosts' is given twice (first on line %u)",
                          walk->hosts_line);
        }
        walk->had_hosts = true;
        walk->hosts_line = line;
        walk->place = HOSTS_START;
        return 0;
    }
    if ((walk->key = strdup(key)) == NULL) {
        return refuse(file, line, "%s", "out of memory");
    }
    walk->key_line = line;
    walk->listed = 0;
    walk->place = VALUE;
    return 0;
}

/* A host's name, the key of its mapping under `hosts:`. */
static int take_host(struct walk *walk, const yaml_event_t *event)
{
    struct config_file *file = walk->file;
    unsigned line = (unsigned)event->start_mark.line + 1;

    if (event->type != YAML_SCALAR_EVENT || is_null(event) ||
        strlen((const char *)event->data.scalar.value) != event->data.scalar.length) {
        return refuse(file, line, "%s", "'hosts' maps host names (example.com) to their keys");
    }
    struct config_host *hosts = realloc(file->hosts, (file->host_count + 1) * sizeof(*hosts));
    if (hosts == NULL) {
        return refuse(file, line, "%s", "out of memory");
    }
    file->hosts = hosts;
    if ((hosts[file->host_count].names = strdup((const char *)event->data.scalar.value)) == NULL) {
        return refuse(file, line, "%s", "out of memory");
    }
    hosts[file->host_count].line = line;
    walk->host = (unsigned)++file->host_count;
    walk->before = file->count;
    walk->place = HOST;
    return 0;
}

/* The end of a host's mapping: it must have said something. */
static int end_host(struct walk *walk)
{
    const struct config_host *host = &walk->file->hosts[walk->host - 1];

    if (walk->file->count == walk->before) {
        return refuse(walk->file, host->line,
                      "the host '%s' has no keys: give it a root or a proxy", host->names);
    }
    walk->host = 0;
    walk->place = HOSTS;
    return 0;
}

static int step(struct walk *walk, const yaml_event_t *event)
{
    struct config_file *file = walk->file;
    unsigned line = (unsigned)event->start_mark.line + 1;

    if (event->type == YAML_ALIAS_EVENT) {
        return refuse(file, line, "%s", "aliases (*name) are not read here: write the value");
    }
    switch (walk->place) {
    case BEFORE: /* the stream's and the document's starts */
        if (event->type == YAML_MAPPING_START_EVENT) {
            walk->place = KEY;
        } else if (event->type == YAML_SCALAR_EVENT && is_null(event)) {
            walk->place = TOP; /* a document with nothing in it */
        } else if (event->type == YAML_SCALAR_EVENT || event->type == YAML_SEQUENCE_START_EVENT) {
            return refuse(file, line, "%s", "the file must be a mapping of keys to values");
        }
        return 0;
    case KEY:
        if (event->type == YAML_MAPPING_END_EVENT) {
            if (walk->host != 0) {
                return end_host(walk);
            }
            walk->place = TOP;
            return 0;
        }
        return take_key(walk, event);
    case HOSTS_START:
        if (event->type != YAML_MAPPING_START_EVENT) {
            return refuse(file, line, "%s", "'hosts' maps host names (example.com) to their keys");
        }
        walk->place = HOSTS;
        return 0;
    case HOSTS:
        if (event->type == YAML_MAPPING_END_EVENT) {
            walk->place = KEY;
            return 0;
        }
        return take_host(walk, event);
    case HOST:
        if (event->type != YAML_MAPPING_START_EVENT) {
            return refuse(file, line, "the host '%s' takes a mapping of keys (root: /srv/www)",
                          file->hosts[walk->host - 1].names);
        }
        walk->place = KEY;
        return 0;
    case VALUE:
        if (event->type == YAML_SEQUENCE_START_EVENT) {
            walk->place = LIST;
            return 0;
        }
        if (event->type != YAML_SCALAR_EVENT) {
            return refuse(file, line, "'%s' takes a value or a list of values, not a mapping%s",
                          walk->key, QUOTE);
        }
        walk->place = KEY;
        return add(walk, event, false);
    case LIST:
        if (event->type == YAML_SEQUENCE_END_EVENT) {
            walk->place = KEY;
            return walk->listed > 0
                       ? 0
                       : refuse(file, walk->key_line,
                                "'%s' lists nothing: give it values, or leave it out", walk->key);
        }
        if (event->type != YAML_SCALAR_EVENT) {
            return refuse(file, line, "'%s' lists values, not lists or mappings%s", walk->key,
                          event->type == YAML_MAPPING_START_EVENT ? QUOTE : "");
        }
        return add(walk, event, true);
    case TOP: /* the document's end */
        walk->place = event->type == YAML_DOCUMENT_END_EVENT ? AFTER : TOP;
        return 0;
    case AFTER:
        if (event->type == YAML_DOCUMENT_START_EVENT) {
            return refuse(file, line, "%s", "one document only (a second starts here)");
        }
        return 0;
    }
    return 0;
}

/* What libyaml could not read, and where: a byte that is not UTF-8 (or a control character) is
 * known by its offset only, a problem inside a quoted scalar or a flow also by where that began. */
static int not_yaml(const yaml_parser_t *parser, FILE *in, struct config_file *file)
{
    unsigned line = (unsigned)parser->problem_mark.line + 1;
    char began[48] = "";

    if (parser->error == YAML_READER_ERROR) {
        line = 1;
        rewind(in);
        for (size_t at = 0; at < parser->problem_offset; at++) {
            int c = getc(in);
            if (c == EOF) {
                break;
            }
            line += c == '\n';
        }
    } else if (parser->context != NULL && parser->context_mark.line != parser->problem_mark.line) {
        snprintf(began, sizeof(began), " that began on line %u",
                 (unsigned)parser->context_mark.line + 1);
    }
    return refuse(file, line, "%s%s%s%s", parser->problem ? parser->problem : "not YAML",
                  parser->context ? " " : "", parser->context ? parser->context : "", began);
}

int config_file_read(const char *path, struct config_file *file)
{
    FILE *in = fopen(path, "r");
    yaml_parser_t parser;
    yaml_event_t event;
    struct walk walk = {.file = file, .place = BEFORE};
    int rc = 0;

    struct stat status;

    *file = (struct config_file){0};
    if (in == NULL) {
        return refuse(file, 0, "%s", strerror(errno));
    }
    if (fstat(fileno(in), &status) == 0 && S_ISDIR(status.st_mode)) {
        fclose(in);
        return refuse(file, 0, "%s", strerror(EISDIR));
    }
    if (!yaml_parser_initialize(&parser)) {
        fclose(in);
        return refuse(file, 0, "%s", "out of memory");
    }
    yaml_parser_set_input_file(&parser, in);
    for (bool done = false; !done && rc == 0;) {
        if (!yaml_parser_parse(&parser, &event)) {
            rc = not_yaml(&parser, in, file);
            break;
        }
        done = event.type == YAML_STREAM_END_EVENT;
        rc = step(&walk, &event);
        yaml_event_delete(&event);
    }
    drop_key(&walk);
    if (rc < 0) { /* what was read goes: the caller exits, and leaves nothing behind */
        for (size_t i = 0; i < file->count; i++) {
            if (i + 1 == file->count || file->entries[i + 1].key != file->entries[i].key) {
                free(file->entries[i].key);
            }
            free(file->entries[i].value);
        }
        free(file->entries);
        file->entries = NULL;
        file->count = 0;
        for (size_t i = 0; i < file->host_count; i++) {
            free(file->hosts[i].names);
        }
        free(file->hosts);
        file->hosts = NULL;
        file->host_count = 0;
    }
    yaml_parser_delete(&parser);
    fclose(in);
    return rc;
}

#else

int config_file_read(const char *path, struct config_file *file)
{
    (void)path;
    *file = (struct config_file){0};
    snprintf(file->why, sizeof(file->why), "%s",
             "this sxe-httpd was built without libyaml (libyaml-dev): give options instead");
    return -ENOTSUP;
}

#endif
