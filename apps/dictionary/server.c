/*
 * sxe-dict: an online dictionary. Serves GET /d/WORD (the word's entry as JSON, or 404 with
 * suggestions), GET /s/PREFIX (up to 10 words that start with it, each with its first line) and
 * its page, on the HTTP module, with a worker per core.
 *
 * Usage: HELP below (sxe-dict --help).
 *
 * The data is an sxe_map mapped by every worker: each request reads one snapshot (no lock, no
 * copy until the response), so an update published by sxe-dict-update while it serves is seen
 * whole by the requests after it and not at all by the requests before.
 */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sxe/sxe.h>

#include "dictionary.h"

struct dictionary {
    sxe_map_t *map;
    struct words words;
    const char *page;
    size_t page_size;
};

/* The page served at / unless -p names another: apps/dictionary/www/index.html, built in. */
__asm__(".section .rodata\n"
        ".global sxe_dictionary_page, sxe_dictionary_page_end\n"
        "sxe_dictionary_page:\n"
        ".incbin \"" SXE_DICTIONARY_PAGE "\"\n"
        "sxe_dictionary_page_end:\n"
        ".previous\n");
extern const char sxe_dictionary_page[], sxe_dictionary_page_end[];

#define HELP                                                                                       \
    "usage: sxe-dict -D DATA [-l IP:PORT] [-w WORKERS] [-c CONNECTIONS] [-t IDLE] [-p PAGE]\n"     \
    "                [-k CERT -K KEY]\n"                                                           \
    "\n"                                                                                           \
    "Serves the dictionary in DATA: GET /d/WORD (its entry as JSON, or 404 with suggestions),\n"   \
    "GET /s/PREFIX (up to 10 words that start with it) and its page at /.\n"                       \
    "\n"                                                                                           \
    "  -D DATA          a directory made by sxe-dict-build (required)\n"                           \
    "  -l IP:PORT       where to listen (127.0.0.1:8080)\n"                                        \
    "  -w WORKERS       worker processes (one per CPU); 0 serves on one loop in this process\n"    \
    "  -c CONNECTIONS   the most connections per worker, 16 to 1000000 (10000)\n"                  \
    "  -t IDLE          seconds a kept-alive connection may wait for its next request (60)\n"      \
    "  -p PAGE          the page served at / (the one built in)\n"                                 \
    "  -k CERT -K KEY   serve HTTPS with this certificate and key\n"                               \
    "  -h, --help       this text\n"

static void respond_error(sxe_http_t *http, int status, const char *message)
{
    sxe_http_respondf(http, status, "application/json", NULL, "{\"error\":\"%s\"}\n", message);
}

/*
 * The word in the path after the route's prefix, percent-decoded, checked and folded into word.
 * @return its length (SIZE_MAX for an empty word, when empty_ok), or 0 after answering the
 *         request with why it cannot be looked up.
 */
static size_t requested_word(sxe_http_t *http, char *word, bool empty_ok)
{
    size_t raw_len;
    const char *raw = sxe_http_path_rest(http, &raw_len);
    ssize_t len = sxe_http_percent_decode(raw, raw_len, word, DICTIONARY_WORD_MAX + 1, false);

    if (len < 0) { /* -ENOBUFS: the server refused malformed escapes before routing */
        respond_error(http, 414, "the word is longer than 100 bytes");
    } else if (len == 0 && !empty_ok) {
        respond_error(http, 400, "no word");
    } else if (memchr(word, '\0', (size_t)len) != NULL || !sxe_utf8_valid(word, (size_t)len)) {
        respond_error(http, 400, "the word is not UTF-8 text");
    } else {
        dictionary_fold(word, word, (size_t)len);
        return len == 0 ? SIZE_MAX : (size_t)len;
    }
    return 0;
}

/* The first index of the words that start with the len bytes at prefix, and how many (≤ max). */
static uint32_t with_prefix(const struct words *words, const char *prefix, size_t len,
                            uint32_t *first)
{
    uint32_t count = 0;

    *first = words_lower_bound(words, prefix, len);
    while (count < DICTIONARY_SUGGESTIONS && *first + count < words->file->count &&
           strncmp(words_at(words, *first + count), prefix, len) == 0) {
        count++;
    }
    return count;
}

/* Appends text to the response buffer, or fails the whole response on overflow. */
struct out {
    char *at;
    size_t len, size;
    bool full;
};

static void append(struct out *out, const char *text, size_t len)
{
    if (out->full || len > out->size - out->len) {
        out->full = true;
        return;
    }
    memcpy(out->at + out->len, text, len);
    out->len += len;
}

static void append_json(struct out *out, const char *text, size_t len)
{
    ssize_t written = sxe_json_string(out->at + out->len, out->size - out->len, text, len);
    if (written < 0) {
        out->full = true;
    } else {
        out->len += (size_t)written;
    }
}

/* The first line of an entry's definition, still escaped: up to the first \n, at most 160 bytes,
 * never cut inside an escape or a UTF-8 character. */
static size_t first_line(const char *definition, size_t len)
{
    size_t at = 0;

    while (at < len && at < 160 && definition[at] != '"') {
        if (definition[at] == '\\') {
            if (at + 1 < len && definition[at + 1] == 'n') {
                break;
            }
            at += at + 1 < len && definition[at + 1] == 'u' ? 6 : 2;
            continue;
        }
        at++;
        while (at < len && ((unsigned char)definition[at] & 0xc0) == 0x80) {
            at++;
        }
    }
    return at < len ? at : len;
}

/* Appends {"word":..., "short":...} for the folded word's entry, or only its word if it has none
 * in the snapshot (an update deleted it). */
static void append_suggestion(struct out *out, const struct sxe_map_reader *reader,
                              const char *word)
{
    static const char definition_key[] = ",\"definition\":\"";
    size_t value_len;
    const char *value = sxe_map_find(reader, word, strlen(word), &value_len);
    const char *definition =
        value ? memmem(value, value_len, definition_key, sizeof(definition_key) - 1) : NULL;

    append(out, "{", 1);
    if (definition == NULL) {
        append(out, "\"word\":", 7);
        append_json(out, word, strlen(word));
    } else {
        definition += sizeof(definition_key) - 1;
        append(out, value, (size_t)(definition - value) - sizeof(definition_key) + 1);
        append(out, ",\"short\":\"", 10);
        append(out, definition, first_line(definition, value_len - (size_t)(definition - value)));
        append(out, "\"", 1);
    }
    append(out, "}", 1);
}

/* Answers with the words that start with prefix, or with the longest start of it that any word
 * has: {"prefix":..., "suggestions":[...]} (or, for a miss, an error and the suggestions). */
static void respond_suggestions(sxe_http_t *http, struct dictionary *dictionary,
                                const struct sxe_map_reader *reader, int status, const char *word,
                                size_t len)
{
    char buffer[32768];
    struct out out = {.at = buffer, .size = sizeof(buffer)};
    uint32_t first = 0, count = 0;
    size_t prefix_len = len;

    while (prefix_len > 0 &&
           (count = with_prefix(&dictionary->words, word, prefix_len, &first)) == 0 &&
           status == 404) {
        prefix_len--;
    }
    append(&out, status == 404 ? "{\"error\":\"not found\",\"word\":" : "{\"prefix\":",
           status == 404 ? 28 : 10);
    append_json(&out, word, len);
    append(&out, ",\"suggestions\":[", 16);
    for (uint32_t i = 0; i < count; i++) {
        append(&out, ",", i > 0);
        append_suggestion(&out, reader, words_at(&dictionary->words, first + i));
    }
    append(&out, "]}\n", 3);
    if (out.full) {
        respond_error(http, 500, "the suggestions do not fit in the response");
        return;
    }
    sxe_http_respond(http, status, "application/json", buffer, out.len);
}

static void lookup(sxe_http_t *http, void *arg)
{
    struct dictionary *dictionary = arg;
    struct sxe_map_reader reader;
    char word[DICTIONARY_WORD_MAX + 1];
    size_t len = requested_word(http, word, false), value_len;

    if (len == 0) {
        return;
    }
    if (sxe_map_read_begin(dictionary->map, &reader) < 0) {
        respond_error(http, 503, "too many readers");
        return;
    }
    const char *value = sxe_map_find(&reader, word, len, &value_len);
    if (value == NULL) {
        respond_suggestions(http, dictionary, &reader, 404, word, len);
    } else if (sxe_http_start(http, 200, "Content-Type: application/json\r\n",
                              (int64_t)value_len + 3) == 0 &&
               sxe_http_send(http, "{", 1) == 0 && sxe_http_send(http, value, value_len) == 0 &&
               sxe_http_send(http, "}\n", 2) == 0) {
        sxe_http_finish(http);
    }
    sxe_map_read_end(&reader);
}

static void suggest(sxe_http_t *http, void *arg)
{
    struct dictionary *dictionary = arg;
    struct sxe_map_reader reader;
    char word[DICTIONARY_WORD_MAX + 1];
    size_t len = requested_word(http, word, true);

    if (len == 0) {
        return;
    }
    if (sxe_map_read_begin(dictionary->map, &reader) < 0) {
        respond_error(http, 503, "too many readers");
        return;
    }
    respond_suggestions(http, dictionary, &reader, 200, word, len == SIZE_MAX ? 0 : len);
    sxe_map_read_end(&reader);
}

static void page(sxe_http_t *http, void *arg)
{
    struct dictionary *dictionary = arg;
    sxe_http_respond(http, 200, "text/html; charset=utf-8", dictionary->page,
                     dictionary->page_size);
}

static char *read_file(const char *path, size_t *size)
{
    FILE *file = fopen(path, "rb");
    struct stat status;
    char *text = NULL;

    if (file == NULL || fstat(fileno(file), &status) < 0 ||
        (text = malloc((size_t)status.st_size + 1)) == NULL ||
        fread(text, 1, (size_t)status.st_size, file) != (size_t)status.st_size) {
        fprintf(stderr, "sxe-dict: cannot read %s: %s\n", path, strerror(errno));
        exit(1);
    }
    fclose(file);
    *size = (size_t)status.st_size;
    return text;
}

int main(int argc, char **argv)
{
    static const struct option long_options[] = {{"help", no_argument, NULL, 'h'}, {0}};
    const char *data = NULL, *address = "127.0.0.1:8080", *page_path = NULL;
    const char *certificate = NULL, *key = NULL; /* -k, -K: HTTPS */
    struct sxe_http_server_options options = {.workers = sxe_workers_cpus()};
    struct dictionary dictionary;
    char path[4096];
    int option, rc;

    options.loop.connections = 10000;
    while ((option = getopt_long(argc, argv, "D:l:w:c:t:p:k:K:h", long_options, NULL)) != -1) {
        switch (option) {
        case 'D':
            data = optarg;
            break;
        case 'l':
            address = optarg;
            break;
        case 'w':
            options.workers = (unsigned)dictionary_number("sxe-dict", "-w", optarg, 0, 256);
            break;
        case 'c':
            options.loop.connections =
                (uint32_t)dictionary_number("sxe-dict", "-c", optarg, 16, 1000000);
            break;
        case 't':
            options.idle_timeout =
                dictionary_number("sxe-dict", "-t", optarg, 1, 86400) * SXE_NS_PER_SEC;
            break;
        case 'p':
            page_path = optarg;
            break;
        case 'k':
            certificate = optarg;
            break;
        case 'K':
            key = optarg;
            break;
        case 'h':
            dictionary_help(HELP);
        default: /* getopt said which */
            dictionary_wrong("sxe-dict");
        }
    }
    if (data == NULL || optind != argc || (certificate == NULL) != (key == NULL)) {
        fprintf(stderr, "sxe-dict: %s\n",
                data == NULL     ? "-D DATA is required"
                : optind != argc ? "takes no arguments but its options"
                                 : "-k CERT and -K KEY go together");
        dictionary_wrong("sxe-dict");
    }
    /* Made before the workers start, so that they share its session tickets' keys. */
    if (certificate != NULL &&
        (rc = sxe_tls_server_create(
             &options.tls, &(struct sxe_tls_options){.certificate = certificate, .key = key})) <
            0) {
        fprintf(stderr, "sxe-dict: -k %s -K %s: %s (the log above says why)\n", certificate, key,
                sxe_strerror(rc));
        return 1;
    }
    snprintf(path, sizeof(path), "%s/dictionary.map", data);
    if ((rc = sxe_map_attach(&dictionary.map, path, NULL, 0)) < 0) {
        fprintf(stderr, "sxe-dict: cannot open %s: %s\n", path, sxe_strerror(rc));
        return 1;
    }
    snprintf(path, sizeof(path), "%s/words", data);
    if (words_open(&dictionary.words, path) < 0) {
        return 1;
    }
    char *page_read = page_path != NULL ? read_file(page_path, &dictionary.page_size) : NULL;
    dictionary.page = page_read != NULL ? page_read : sxe_dictionary_page;
    if (page_read == NULL) {
        dictionary.page_size = (size_t)(sxe_dictionary_page_end - sxe_dictionary_page);
    }

    sxe_http_server_t *server;
    if ((rc = sxe_http_server_create(&server, NULL, &options)) < 0 ||
        (rc = sxe_http_server_route(server, "GET", "/d/", SXE_HTTP_ROUTE_PREFIX, lookup,
                                    &dictionary)) < 0 ||
        (rc = sxe_http_server_route(server, "GET", "/s/", SXE_HTTP_ROUTE_PREFIX, suggest,
                                    &dictionary)) < 0 ||
        (rc = sxe_http_server_route(server, "GET", "/", 0, page, &dictionary)) < 0 ||
        (rc = sxe_http_server_listen(server, address)) < 0) {
        fprintf(stderr, "sxe-dict: cannot serve on %s: %s\n", address, sxe_strerror(rc));
        return 1;
    }
    printf("sxe-dict: %u words, serving on %s%s with %u workers\n", dictionary.words.file->count,
           options.tls != NULL ? "https://" : "", address, options.workers);
    fflush(stdout);
    rc = sxe_http_server_run(server);
    sxe_http_server_destroy(server);
    sxe_tls_destroy(options.tls);
    words_close(&dictionary.words);
    sxe_map_detach(dictionary.map);
    free(page_read);
    return rc < 0 ? 1 : 0;
}
