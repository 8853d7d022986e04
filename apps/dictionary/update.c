/*
 * sxe-dict-update: changes the dictionary while its servers run. Reads lines from a file (or
 * standard input) and applies them all as one transaction of the map, published with one atomic
 * step: every request answered after it sees all of the changes, every request before sees none.
 *
 * Usage: sxe-dict-update DATA [FILE]
 *   Each line is "word TAB definition" (the two characters \n in the definition are a newline),
 *   or "word TAB" alone, which deletes the word. New words are found by /d/ at once; prefix
 *   suggestions come from the word list made by sxe-dict-build, so they list them only after the
 *   next build.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sxe/json.h>

#include "dictionary.h"

/* Turns the two characters \n into a newline, in place. @return the new length. */
static size_t unescape_newlines(char *text)
{
    size_t from = 0, to = 0;

    while (text[from] != '\0') {
        if (text[from] == '\\' && text[from + 1] == 'n') {
            text[to++] = '\n';
            from += 2;
        } else {
            text[to++] = text[from++];
        }
    }
    text[to] = '\0';
    return to;
}

/* Applies one line in the open transaction. @return 0, or -errno after saying why. */
static int apply(sxe_map_t *map, char *line, unsigned line_number, char *value, size_t value_size)
{
    char *definition = strchr(line, '\t'), folded[DICTIONARY_WORD_MAX];
    size_t word_len;
    int rc;

    line[strcspn(line, "\n")] = '\0';
    if (definition == NULL || (word_len = (size_t)(definition - line)) == 0 ||
        word_len > DICTIONARY_WORD_MAX) {
        fprintf(stderr, "sxe-dict-update: line %u: not \"word TAB definition\"\n", line_number);
        return -EINVAL;
    }
    *definition++ = '\0';
    dictionary_fold(folded, line, word_len);
    if (*definition == '\0') {
        rc = sxe_map_delete(map, folded, word_len);
        return rc == -ENOENT ? 0 : rc;
    }
    size_t definition_len = unescape_newlines(definition);
    size_t len = (size_t)sprintf(value, "\"word\":");
    len += (size_t)sxe_json_string(value + len, value_size - len, line, word_len);
    len += (size_t)sprintf(value + len, ",\"definition\":");
    ssize_t written = sxe_json_string(value + len, value_size - len, definition, definition_len);
    if (written < 0) {
        fprintf(stderr, "sxe-dict-update: line %u: the definition is too long\n", line_number);
        return -EMSGSIZE;
    }
    rc = sxe_map_put(map, folded, word_len, value, len + (size_t)written);
    return rc < 0 ? rc : 0;
}

int main(int argc, char **argv)
{
    static char line[1 << 20], value[6 * (1 << 20) + 256];
    char path[4096];
    unsigned line_number = 0;
    sxe_map_t *map;
    int rc;

    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: sxe-dict-update DATA [FILE]\n");
        return 2;
    }
    FILE *input = argc == 3 ? fopen(argv[2], "r") : stdin;
    if (input == NULL) {
        perror(argv[2]);
        return 1;
    }
    snprintf(path, sizeof(path), "%s/dictionary.map", argv[1]);
    if ((rc = sxe_map_attach(&map, path, NULL, 0)) < 0 || (rc = sxe_map_write_begin(map)) < 0) {
        fprintf(stderr, "sxe-dict-update: cannot open %s: %s\n", path, sxe_strerror(rc));
        return 1;
    }
    while (fgets(line, sizeof(line), input) != NULL) {
        if ((rc = apply(map, line, ++line_number, value, sizeof(value))) < 0) {
            fprintf(stderr, "sxe-dict-update: line %u: %s; nothing was changed\n", line_number,
                    sxe_strerror(rc));
            sxe_map_abort(map);
            return 1;
        }
    }
    if ((rc = sxe_map_commit(map)) < 0) {
        fprintf(stderr, "sxe-dict-update: cannot publish: %s\n", sxe_strerror(rc));
        return 1;
    }
    printf("sxe-dict-update: %u changes published as version %llu\n", line_number,
           (unsigned long long)sxe_map_version(map));
    sxe_map_detach(map);
    return 0;
}
