/*
 * sxe-httpd's answers with a file: see send.h.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fields.h"
#include "send.h"

/* A response's headers with the fields --header adds (the thread's: a handler's stack may be a
 * fiber's). */
static __thread char with_added[512 + 64 + FIELDS_ROOM];

/* Whether an If-None-Match value lists etag (or is "*"). */
static bool etag_matches(const struct sxe_http_header *header, const char *etag)
{
    size_t etag_len = strlen(etag);
    const char *at = header->value;
    const char *end = header->value + header->value_len;

    while (at < end) {
        while (at < end && (*at == ' ' || *at == ',' || *at == '\t')) {
            at++;
        }
        const char *item = at;
        while (at < end && *at != ',') {
            at++;
        }
        const char *item_end = at;
        while (item_end > item && (item_end[-1] == ' ' || item_end[-1] == '\t')) {
            item_end--;
        }
        if (item_end - item == 1 && *item == '*') {
            return true;
        }
        if (item_end - item >= 2 && item[0] == 'W' && item[1] == '/') {
            item += 2; /* weak comparison, as If-None-Match asks */
        }
        if ((size_t)(item_end - item) == etag_len && memcmp(item, etag, etag_len) == 0) {
            return true;
        }
    }
    return false;
}

/*
 * Parses a single byte range against size. Returns 1 and sets first and last for a satisfiable one,
 * 0 to ignore the header (several ranges, or not bytes), -1 for an unsatisfiable one.
 */
static int parse_range(const struct sxe_http_header *header, uint64_t size, uint64_t *first,
                       uint64_t *last)
{
    char text[64];
    char *end;

    if (header->value_len >= sizeof(text) || header->value_len < 7 ||
        strncmp(header->value, "bytes=", 6) != 0) {
        return 0;
    }
    memcpy(text, header->value + 6, header->value_len - 6);
    text[header->value_len - 6] = '\0';
    if (strchr(text, ',') != NULL) {
        return 0; /* several ranges: answer with the whole file */
    }
    if (text[0] == '-') {
        uint64_t suffix = strtoull(text + 1, &end, 10);
        if (*end != '\0' || end == text + 1 || suffix == 0 || size == 0) {
            return -1;
        }
        *first = suffix >= size ? 0 : size - suffix;
        *last = size - 1;
        return 1;
    }
    if (!isdigit((unsigned char)text[0])) {
        return -1;
    }
    *first = strtoull(text, &end, 10);
    if (*end != '-') {
        return -1;
    }
    const char *second = end + 1;
    *last = *second == '\0' ? size - 1 : strtoull(second, &end, 10);
    if ((*second != '\0' && *end != '\0') || *first >= size || *last < *first) {
        return -1;
    }
    if (*last >= size) {
        *last = size - 1;
    }
    return 1;
}

/*
 * Whether an If-Range validator (RFC 9110 §13.1.5) names the file as it is: its strong ETag,
 * byte for byte (a weak one never matches), or its Last-Modified date exactly.
 */
static bool if_range_matches(const struct sxe_http_header *if_range, const struct file *file)
{
    const char *validator = if_range->value;
    size_t len = if_range->value_len;
    const char *current = validator[0] == '"' ? file->etag : file->modified;

    return len > 0 && len == strlen(current) && memcmp(validator, current, len) == 0;
}

bool send_not_modified(sxe_http_t *http, const struct file *file, const char *etag)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    /* If-None-Match wins over If-Modified-Since. */
    const struct sxe_http_header *none_match = sxe_http_request_header(request, "If-None-Match");
    const struct sxe_http_header *since = sxe_http_request_header(request, "If-Modified-Since");
    bool not_modified = false;

    if (none_match != NULL) {
        not_modified = etag_matches(none_match, etag);
    } else if (since != NULL && since->value_len < 64) {
        char text[64];
        struct tm when = {0};
        memcpy(text, since->value, since->value_len);
        text[since->value_len] = '\0';
        const char *end = strptime(text, "%a, %d %b %Y %H:%M:%S GMT", &when);
        not_modified = end != NULL && *end == '\0' && file->mtime <= timegm(&when);
    }
    if (not_modified) {
        snprintf(with_added, sizeof(with_added), "ETag: %s\r\nLast-Modified: %s\r\n%s", etag,
                 file->modified, file->added);
        if (sxe_http_start(http, 304, with_added, -1) == 0) {
            (void)sxe_http_finish(http);
        }
    }
    return not_modified;
}

/* Sends the file, honouring conditional requests and a range; takes the caller's reference. */
void send_file(sxe_http_t *http, struct file *file)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    char *headers = with_added;
    size_t headers_size = sizeof(with_added);
    uint64_t first = 0, last = file->size ? file->size - 1 : 0;
    int code = 200;

    if (send_not_modified(http, file, file->etag)) {
        file_unref(file);
        return;
    }

    const struct sxe_http_header *range = sxe_http_request_header(request, "Range");
    const struct sxe_http_header *if_range = sxe_http_request_header(request, "If-Range");
    if (range != NULL && if_range != NULL && !if_range_matches(if_range, file)) {
        range = NULL; /* the file changed since the client's copy: all of it, not a piece */
    }
    int ranged = range != NULL ? parse_range(range, file->size, &first, &last) : 0;
    if (ranged < 0) {
        snprintf(headers, headers_size, "Content-Range: bytes */%" PRIu64 "\r\n", file->size);
        (void)sxe_http_respond_with(http, 416, "text/plain; charset=utf-8", headers,
                                    "416 Range Not Satisfiable\n", 26);
        file_unref(file);
        return;
    }
    uint64_t length = file->size;
    const char *ready = file->headers;
    if (ranged > 0) {
        code = 206;
        length = last - first + 1;
        snprintf(headers, headers_size,
                 "%sContent-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n", file->headers,
                 first, last, file->size);
        ready = headers;
    }
    if (sxe_http_start(http, code, ready, (int64_t)length) < 0) {
        file_unref(file); /* the module closes the connection: nothing more to send */
        return;
    }
    /* The reference goes to the response: dropped once the body is sent or dropped, or at once
     * when it cannot be queued (the module then closes the connection). */
    int rc =
        file->content != NULL
            ? sxe_http_send_ref(http, file->content + first, (size_t)length, file_unref, file)
            : sxe_http_sendfile_ref(http, file->fd, (off_t)first, (size_t)length, file_unref, file);
    if (rc == 0) {
        (void)sxe_http_finish(http);
    }
}
