/*
 * sxe-httpd's directory listings: an HTML page of a directory's entries (hidden ones left out),
 * sorted by name, each name escaped for HTML and its link percent-encoded.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "listing.h"

/* Writes s into out, HTML-escaped. */
static size_t html_escape(const char *s, char *out, size_t size)
{
    size_t used = 0;

    for (; *s != '\0' && used + 7 < size; s++) {
        const char *entity = *s == '&'    ? "&amp;"
                             : *s == '<'  ? "&lt;"
                             : *s == '>'  ? "&gt;"
                             : *s == '"'  ? "&quot;"
                             : *s == '\'' ? "&#39;"
                                          : NULL;
        if (entity != NULL) {
            used += (size_t)snprintf(out + used, size - used, "%s", entity);
        } else {
            out[used++] = *s;
        }
    }
    out[used] = '\0';
    return used;
}

/* Writes s into out with every byte but unreserved ones percent-encoded, for a link. */
static size_t url_escape(const char *s, char *out, size_t size)
{
    size_t used = 0;

    for (; *s != '\0' && used + 4 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            out[used++] = (char)c;
        } else {
            used += (size_t)snprintf(out + used, size - used, "%%%02X", c);
        }
    }
    out[used] = '\0';
    return used;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

const char *listing_page(const char *path, const char *url_path, size_t *len)
{
    static char page[1 << 16];
    char escaped[1024], link[3072];
    char *names[1024];
    size_t count = 0;
    DIR *dir = opendir(path);

    if (dir == NULL) {
        return NULL;
    }
    for (struct dirent *entry; (entry = readdir(dir)) != NULL && count < 1024;) {
        if (entry->d_name[0] != '.') {
            names[count++] = strdup(entry->d_name);
        }
    }
    closedir(dir);
    qsort(names, count, sizeof(names[0]), compare_names);

    html_escape(url_path, escaped, sizeof(escaped));
    int used = snprintf(page, sizeof(page),
                        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of %s"
                        "</title></head>\n<body><h1>Index of %s</h1>\n<ul>\n",
                        escaped, escaped);
    for (size_t i = 0; i < count; i++) {
        html_escape(names[i], escaped, sizeof(escaped));
        url_escape(names[i], link, sizeof(link));
        if ((size_t)used < sizeof(page)) {
            used += snprintf(page + used, sizeof(page) - (size_t)used,
                             "<li><a href=\"%s\">%s</a></li>\n", link, escaped);
        }
        free(names[i]);
    }
    if ((size_t)used < sizeof(page)) {
        used += snprintf(page + used, sizeof(page) - (size_t)used, "</ul></body></html>\n");
    }
    *len = (size_t)used < sizeof(page) ? (size_t)used : sizeof(page) - 1;
    return page;
}
