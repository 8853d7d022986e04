/*
 * sxe-httpd's configuration file: a YAML mapping of option names to values, read with libyaml
 * (config_file.c). options.c gives each entry the meaning its command-line option has.
 */
#ifndef SXE_HTTPD_CONFIG_FILE_H
#define SXE_HTTPD_CONFIG_FILE_H

#include <stdbool.h>
#include <stddef.h>

/* One value of the file: `key: value`, or one item of `key: [a, b]` (listed), at the top or in
 * a host's mapping under `hosts:`. The strings are the program's for as long as it runs (the
 * configuration points into them). */
struct config_entry {
    char *key;
    char *value;
    unsigned line;     /* from 1, as an editor counts */
    unsigned key_line; /* the key's */
    unsigned host;     /* 0: the top mapping's; else the host's, hosts[host - 1] */
    bool listed;
};

/* A host of `hosts:`, its key naming it ("example.com, www.example.com"). */
struct config_host {
    char *names;
    unsigned line;
};

struct config_file {
    struct config_entry *entries;
    size_t count;
    struct config_host *hosts; /* in the file's order; each holds one entry or more */
    size_t host_count;
    char why[160]; /* when reading failed: what is wrong */
    unsigned line; /* ... and where (0: not a place in the file, such as a missing file) */
};

#define CONFIG_FILE_VALUES_MOST 4096

/* Reads path's top mapping into file->entries. A key's value is a scalar or a list of scalars,
 * but for `hosts:`, a mapping of host names to mappings of the same kind. A key given twice (in
 * one mapping), an empty list or host, another nested mapping, an alias, a second document, a
 * NUL in a value or more than CONFIG_FILE_VALUES_MOST values are refused.
 * @return 0; or -1 with file->why and file->line set, and nothing kept; -ENOTSUP (file->why
 * says) when built without libyaml. */
int config_file_read(const char *path, struct config_file *file);

#endif
