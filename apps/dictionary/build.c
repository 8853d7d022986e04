/*
 * sxe-dict-build: turns a dictd dictionary (GCIDE, from Debian's dict-gcide) into the server's
 * data directory: an sxe_map of words to ready-to-send JSON entries, and the sorted word list.
 *
 * Usage: sxe-dict-build [-i INDEX] [-d DICT.dz] DIRECTORY
 *   INDEX    dictd's index: a line per entry, "headword TAB offset TAB length", the numbers in
 *            dictd's base 64 (default /usr/share/dictd/gcide.index)
 *   DICT.dz  the entries' text, gzip-compressed (dictzip is gzip with an index to seek by; this
 *            reads it whole) (default /usr/share/dictd/gcide.dict.dz)
 * Entries of one word in any letter case are joined, in the index's order, under the first
 * headword. The files are written beside their final names and renamed into place, so a server
 * never opens a half-written one.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <sxe/json.h>

#include "dictionary.h"

#define DEFAULT_INDEX "/usr/share/dictd/gcide.index"
#define DEFAULT_DICT  "/usr/share/dictd/gcide.dict.dz"

#define HELP                                                                                       \
    "usage: sxe-dict-build [-i INDEX] [-d DICT.dz] DIRECTORY\n"                                    \
    "\n"                                                                                           \
    "Makes sxe-dict's data in DIRECTORY (made if missing) from a dictd dictionary: its\n"          \
    "dictionary.map and word list, written aside and renamed into place.\n"                        \
    "\n"                                                                                           \
    "  -i INDEX     the dictd index (" DEFAULT_INDEX ")\n"                                         \
    "  -d DICT.dz   its entries (" DEFAULT_DICT ")\n"                                              \
    "  -h, --help   this text\n"

struct entry {
    char *folded;   /* the key: the headword in lower case */
    char *headword; /* as the index writes it */
    uint64_t offset, length;
    uint32_t order; /* its line in the index: entries of a word keep this order */
};

static void *must(void *pointer)
{
    if (pointer == NULL) {
        fprintf(stderr, "sxe-dict-build: out of memory\n");
        exit(1);
    }
    return pointer;
}

/* dictd's base 64 number: digits A-Z a-z 0-9 + /, most significant first. */
static int decode_number(const char *text, uint64_t *value)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    *value = 0;
    if (*text == '\0') {
        return -1;
    }
    for (; *text != '\0'; text++) {
        const char *digit = strchr(digits, *text);
        if (digit == NULL || *value > (UINT64_MAX >> 6)) {
            return -1;
        }
        *value = *value * 64 + (uint64_t)(digit - digits);
    }
    return 0;
}

/* Reads the whole gzip file at path. */
static char *read_dict(const char *path, size_t *size)
{
    gzFile file = gzopen(path, "rb");
    size_t capacity = 64u << 20;
    char *text = must(malloc(capacity));
    int got;

    if (file == NULL) {
        fprintf(stderr, "sxe-dict-build: cannot open %s: %s\n", path, strerror(errno));
        exit(1);
    }
    *size = 0;
    while ((got = gzread(file, text + *size, (unsigned)(capacity - *size))) > 0) {
        *size += (size_t)got;
        if (*size == capacity) {
            text = must(realloc(text, capacity *= 2));
        }
    }
    if (got < 0) {
        int number;
        fprintf(stderr, "sxe-dict-build: %s: %s\n", path, gzerror(file, &number));
        exit(1);
    }
    gzclose(file);
    return text;
}

/* Reads the index; entries whose headword starts with "00-" describe the database and are left. */
static struct entry *read_index(const char *path, size_t dict_size, size_t *count)
{
    FILE *file = fopen(path, "r");
    size_t capacity = 1024, line_number = 0;
    struct entry *entries = must(malloc(capacity * sizeof(*entries)));
    char line[4096];

    if (file == NULL) {
        fprintf(stderr, "sxe-dict-build: cannot open %s: %s\n", path, strerror(errno));
        exit(1);
    }
    *count = 0;
    while (fgets(line, sizeof(line), file) != NULL) {
        char *offset = strchr(line, '\t'), *length = offset ? strchr(offset + 1, '\t') : NULL;
        struct entry entry;
        line_number++;
        line[strcspn(line, "\n")] = '\0';
        if (length == NULL) {
            fprintf(stderr, "sxe-dict-build: %s:%zu: not \"word TAB offset TAB length\"\n", path,
                    line_number);
            exit(1);
        }
        *offset++ = '\0';
        *length++ = '\0';
        if (decode_number(offset, &entry.offset) < 0 || decode_number(length, &entry.length) < 0 ||
            entry.offset > dict_size || entry.length > dict_size - entry.offset) {
            fprintf(stderr, "sxe-dict-build: %s:%zu: a bad offset or length\n", path, line_number);
            exit(1);
        }
        size_t word_len = strlen(line);
        if (word_len == 0 || word_len > DICTIONARY_WORD_MAX || strncmp(line, "00-", 3) == 0) {
            continue;
        }
        entry.headword = must(strdup(line));
        entry.folded = must(strdup(line));
        dictionary_fold(entry.folded, line, word_len);
        entry.order = (uint32_t)line_number;
        if (*count == capacity) {
            entries = must(realloc(entries, (capacity *= 2) * sizeof(*entries)));
        }
        entries[(*count)++] = entry;
    }
    fclose(file);
    return entries;
}

static int by_word_then_order(const void *a, const void *b)
{
    const struct entry *left = a, *right = b;
    int order = strcmp(left->folded, right->folded);
    return order != 0 ? order : left->order < right->order ? -1 : left->order > right->order;
}

/* Puts the word of entries[first .. end) into the map: "word":"...","definition":"...". */
static void put_word(sxe_map_t *map, const char *dict, const struct entry *entries, size_t first,
                     size_t end, char **buffer, size_t *buffer_size)
{
    size_t text_size = 0;
    for (size_t i = first; i < end; i++) {
        text_size += entries[i].length + 1;
    }
    char *text = must(malloc(text_size + 1)), *at = text;
    for (size_t i = first; i < end; i++) {
        if (i > first) {
            *at++ = '\n';
        }
        memcpy(at, dict + entries[i].offset, entries[i].length);
        at += entries[i].length;
    }
    size_t need = 6 * (text_size + DICTIONARY_WORD_MAX) + 64;
    if (*buffer_size < need) {
        *buffer = must(realloc(*buffer, *buffer_size = need));
    }
    size_t len = (size_t)sprintf(*buffer, "\"word\":");
    len += (size_t)sxe_json_string(*buffer + len, need - len, entries[first].headword,
                                   strlen(entries[first].headword));
    len += (size_t)sprintf(*buffer + len, ",\"definition\":");
    len += (size_t)sxe_json_string(*buffer + len, need - len, text, (size_t)(at - text));
    int rc = sxe_map_put(map, entries[first].folded, strlen(entries[first].folded), *buffer, len);
    if (rc < 0) {
        fprintf(stderr, "sxe-dict-build: cannot put %s: %s\n", entries[first].folded,
                sxe_strerror(rc));
        exit(1);
    }
    free(text);
}

/* Writes the sorted, distinct words in the order of entries. */
static void write_words(const char *path, const struct entry *entries, size_t count, size_t words)
{
    FILE *file = fopen(path, "w");
    struct words_file head = {.magic = "SXEWORDS", .count = (uint32_t)words};
    uint32_t offset = (uint32_t)(sizeof(head) + words * sizeof(uint32_t));

    if (file == NULL) {
        fprintf(stderr, "sxe-dict-build: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    fwrite(&head, sizeof(head), 1, file);
    for (size_t i = 0; i < count; i++) {
        if (i == 0 || strcmp(entries[i].folded, entries[i - 1].folded) != 0) {
            fwrite(&offset, sizeof(offset), 1, file);
            offset += (uint32_t)strlen(entries[i].folded) + 1;
        }
    }
    for (size_t i = 0; i < count; i++) {
        if (i == 0 || strcmp(entries[i].folded, entries[i - 1].folded) != 0) {
            fwrite(entries[i].folded, strlen(entries[i].folded) + 1, 1, file);
        }
    }
    if (fclose(file) != 0) {
        fprintf(stderr, "sxe-dict-build: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static void build(const char *directory, const char *dict, size_t dict_size, struct entry *entries,
                  size_t count)
{
    char map_path[4096], words_path[4096], map_temp[4200], words_temp[4200];
    struct sxe_map_options options;
    size_t words = 0;
    sxe_map_t *map;
    int rc;

    qsort(entries, count, sizeof(*entries), by_word_then_order);
    for (size_t i = 0; i < count; i++) {
        words += i == 0 || strcmp(entries[i].folded, entries[i - 1].folded) != 0;
    }
    snprintf(map_path, sizeof(map_path), "%s/dictionary.map", directory);
    snprintf(words_path, sizeof(words_path), "%s/words", directory);
    snprintf(map_temp, sizeof(map_temp), "%s.new", map_path);
    snprintf(words_temp, sizeof(words_temp), "%s.new", words_path);
    unlink(map_temp);
    dictionary_map_options(&options, words, dict_size);
    if ((rc = sxe_map_attach(&map, map_temp, &options, SXE_MAP_CREATE)) < 0 ||
        (rc = sxe_map_write_begin(map)) < 0) {
        fprintf(stderr, "sxe-dict-build: cannot make %s: %s\n", map_temp, sxe_strerror(rc));
        exit(1);
    }
    char *buffer = NULL;
    size_t buffer_size = 0;
    for (size_t first = 0, end; first < count; first = end) {
        for (end = first + 1;
             end < count && strcmp(entries[end].folded, entries[first].folded) == 0; end++) {
        }
        put_word(map, dict, entries, first, end, &buffer, &buffer_size);
    }
    struct sxe_map_stats stats;
    sxe_map_stats(map, &stats);
    printf("sxe-dict-build: the arena holds %llu MB of %llu\n",
           (unsigned long long)stats.arena_used >> 20, (unsigned long long)stats.arena_bytes >> 20);
    if ((rc = sxe_map_commit(map)) < 0) {
        fprintf(stderr, "sxe-dict-build: cannot commit %s: %s\n", map_temp, sxe_strerror(rc));
        exit(1);
    }
    sxe_map_detach(map);
    write_words(words_temp, entries, count, words);
    if (rename(map_temp, map_path) < 0 || rename(words_temp, words_path) < 0) {
        fprintf(stderr, "sxe-dict-build: cannot rename into %s: %s\n", directory, strerror(errno));
        exit(1);
    }
    printf("sxe-dict-build: %zu words from %zu entries into %s\n", words, count, directory);
    free(buffer);
}

int main(int argc, char **argv)
{
    const char *index_path = DEFAULT_INDEX, *dict_path = DEFAULT_DICT;
    int option;

    static const struct option long_options[] = {{"help", no_argument, NULL, 'h'}, {0}};
    while ((option = getopt_long(argc, argv, "i:d:h", long_options, NULL)) != -1) {
        switch (option) {
        case 'i':
            index_path = optarg;
            break;
        case 'd':
            dict_path = optarg;
            break;
        case 'h':
            dictionary_help(HELP);
        default: /* getopt said which */
            dictionary_wrong("sxe-dict-build");
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "sxe-dict-build: %s\n",
                optind == argc ? "name the DIRECTORY to build in" : "takes one DIRECTORY");
        dictionary_wrong("sxe-dict-build");
    }
    const char *directory = argv[optind];
    size_t dict_size, count;
    char *dict = read_dict(dict_path, &dict_size);
    struct entry *entries = read_index(index_path, dict_size, &count);
    if (count == 0) {
        fprintf(stderr, "sxe-dict-build: %s has no words\n", index_path);
        return 1;
    }
    if (mkdir(directory, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "sxe-dict-build: cannot make %s: %s\n", directory, strerror(errno));
        return 1;
    }
    build(directory, dict, dict_size, entries, count);
    for (size_t i = 0; i < count; i++) {
        free(entries[i].folded);
        free(entries[i].headword);
    }
    free(entries);
    free(dict);
    return 0;
}
