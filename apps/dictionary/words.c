/*
 * The dictionary's data files: the map's shape, case folding, and the sorted word list, mapped
 * read-only and searched by binary search.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dictionary.h"

void dictionary_map_options(struct sxe_map_options *options, uint64_t words, uint64_t bytes)
{
    memset(options, 0, sizeof(*options));
    options->name = "dictionary";
    options->capacity = 2 * words + 1024;
    options->key_size = SXE_MAP_VARIABLE;
    options->value_size = SXE_MAP_VARIABLE;
    /* Blocks round a record up by at most a half (escaping adds a little), and updates add
     * entries and old versions that wait until no reader sees them. */
    options->arena_bytes = 4 * bytes + (64u << 20);
    options->readers_max = 4096;
    options->seed = 0x6463746e72790001ULL;
}

void dictionary_fold(char *out, const char *word, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = word[i];
        out[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
}

int words_open(struct words *words, const char *path)
{
    struct stat status;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = 0;

    if (fd < 0 || fstat(fd, &status) < 0) {
        rc = -errno;
        fprintf(stderr, "dictionary: cannot open the word list %s: %s\n", path, strerror(-rc));
        goto out;
    }
    words->size = (size_t)status.st_size;
    words->file = mmap(NULL, words->size, PROT_READ, MAP_SHARED, fd, 0);
    if (words->file == MAP_FAILED) {
        rc = -errno;
        fprintf(stderr, "dictionary: cannot map the word list %s: %s\n", path, strerror(-rc));
        goto out;
    }
    if (words->size < sizeof(struct words_file) || memcmp(words->file->magic, "SXEWORDS", 8) != 0 ||
        (words->size - sizeof(struct words_file)) / sizeof(uint32_t) < words->file->count) {
        fprintf(stderr, "dictionary: %s is not a word list made by sxe-dict-build\n", path);
        munmap((void *)(uintptr_t)words->file, words->size);
        rc = -EPROTO;
    }

out:
    if (fd >= 0) {
        close(fd);
    }
    return rc;
}

void words_close(struct words *words)
{
    munmap((void *)(uintptr_t)words->file, words->size);
}

const char *words_at(const struct words *words, uint32_t index)
{
    return (const char *)words->file + words->file->offsets[index];
}

uint32_t words_lower_bound(const struct words *words, const char *prefix, size_t len)
{
    uint32_t low = 0, high = words->file->count;

    while (low < high) {
        uint32_t middle = low + (high - low) / 2;
        const char *word = words_at(words, middle);
        size_t word_len = strlen(word);
        int order = memcmp(word, prefix, word_len < len ? word_len : len);
        if (order < 0 || (order == 0 && word_len < len)) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    return low;
}
