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
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sxe/json.h>

#include "dictionary.h"

#define HELP                                                                                       \
    "usage: sxe-dict-update DATA [FILE]\n"                                                         \
    "\n"                                                                                           \
    "Applies the lines of FILE (or standard input) to the dictionary in DATA as one change,\n"     \
    "which its servers see whole from the next request on. Each line is \"word TAB definition\"\n" \
    "(\\n in the definition is a newline), or \"word TAB\", which deletes the word.\n"             \
    "\n"                                                                                           \
    "  -h, --help   this text\n"

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

    static const struct option long_options[] = {{"help", no_argument, NULL, 'h'}, {0}};
    int option;
    while ((option = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        if (option == 'h') {
            dictionary_help(HELP);
        }
        dictionary_wrong("sxe-dict-update"); /* getopt said which */
    }
    if (argc - optind < 1 || argc - optind > 2) {
        fprintf(stderr, "sxe-dict-update: %s\n",
                argc == optind ? "name the DATA directory" : "takes DATA and at most one FILE");
        dictionary_wrong("sxe-dict-update");
    }
    const char *data = argv[optind], *file = argc - optind == 2 ? argv[optind + 1] : NULL;
    FILE *input = file != NULL ? fopen(file, "r") : stdin;
    if (input == NULL) {
        fprintf(stderr, "sxe-dict-update: cannot read %s: %s\n", file, strerror(errno));
        return 1;
    }
    snprintf(path, sizeof(path), "%s/dictionary.map", data);
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
