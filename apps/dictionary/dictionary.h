/*
 * The dictionary's data, shared by its programs: the map of words to entries and the sorted word
 * list that prefix suggestions search.
 *
 * A data directory holds two files, both made by sxe-dict-build:
 *   dictionary.map  an sxe_map (sxe/map.h): key the word folded to lower case (ASCII letters
 *                   only; other bytes as they are), value a JSON fragment ready to send,
 *                   "word":"Apple","definition":"..." (the headword as written, then every entry
 *                   of the word joined by blank lines)
 *   words           the folded words in byte order, for prefix searches (see struct words_file)
 */
#ifndef SXE_DICTIONARY_H
#define SXE_DICTIONARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sxe/map.h>

/* The longest word looked up, in bytes; longer requests are refused (GCIDE's longest is 60). */
#define DICTIONARY_WORD_MAX 100

/* Suggestions for a prefix or a miss, at most. */
#define DICTIONARY_SUGGESTIONS 10

/* The map's shape: room for the dictionary's words and as many again added by updates. */
void dictionary_map_options(struct sxe_map_options *options, uint64_t words, uint64_t bytes);

/* Folds word (len bytes) to lower case into out, which holds len bytes. */
void dictionary_fold(char *out, const char *word, size_t len);

/* The word list file: "SXEWORDS", a count, count offsets, then the NUL-terminated words. */
struct words_file {
    char magic[8];
    uint32_t count;
    uint32_t offsets[]; /* from the file's start */
};

struct words {
    const struct words_file *file;
    size_t size;
};

/* Maps the word list at path. @return 0 or -errno, after saying why on stderr. */
int words_open(struct words *words, const char *path);
void words_close(struct words *words);

/* The index of the first word not less than the len bytes at prefix (count if none is). */
uint32_t words_lower_bound(const struct words *words, const char *prefix, size_t len);

/* Word number index, NUL-terminated. */
const char *words_at(const struct words *words, uint32_t index);

/*
 * The programs' command lines (cli.c). dictionary_help() prints text (the usage) to stdout and
 * exits 0; dictionary_wrong() follows getopt's line about a wrong option with a pointer to --help,
 * and exits 2; dictionary_number() is text as a whole number from low to high, or says what option
 * wanted and exits 2.
 */
void dictionary_help(const char *text) __attribute__((noreturn));
void dictionary_wrong(const char *program) __attribute__((noreturn));
unsigned long dictionary_number(const char *program, const char *option, const char *text,
                                unsigned long low, unsigned long high);

#endif
