/*
 * sxe-httpd's added fields (fields.h): a list of prefixes, each with one field line, read once at
 * start. A file's are found when it is cached (its ready headers hold them), so a file served from
 * the cache pays nothing for them; a proxied answer's are found as its head goes out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sxe/http.h>

#include "fields.h"
#include "hosts.h"

struct field {
    unsigned host; /* 0: the default host's, which go on every host's answers */
    const char *prefix;
    size_t prefix_len;
    char *line; /* "Name: value\r\n" */
    size_t line_len;
};

static struct field fields[FIELDS_MOST];
static unsigned count;
static size_t bytes[HOSTS_MOST + 1]; /* of each host's fields' lines */
static size_t most_bytes;            /* of the hosts' but the default's, the most */

/* Whether c may be in a field's name (RFC 9110 5.6.2's tchar). */
static bool token(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

const char *fields_add(unsigned host, const char *text)
{
    const char *space = strchr(text, ' ');
    const char *colon = space != NULL ? strchr(space + 1, ':') : NULL;

    if (count == FIELDS_MOST) {
        return "is given too often (1,024 at most)";
    }
    if (text[0] != '/' || space == NULL || colon == NULL || colon == space + 1) {
        return "must be a PREFIX starting with /, a space, then Name: value";
    }
    if (strlen(text) >= FIELDS_LINE_MOST) {
        return "is too long (1,023 bytes at most)";
    }
    for (const char *at = space + 1; at < colon; at++) {
        if (!token((unsigned char)*at)) {
            return "has a field name that is not a token";
        }
    }
    const char *value = colon + 1;
    while (*value == ' ' || *value == '\t') {
        value++;
    }
    size_t value_len = strlen(value);
    while (value_len > 0 && (value[value_len - 1] == ' ' || value[value_len - 1] == '\t')) {
        value_len--;
    }
    for (size_t i = 0; i < value_len; i++) {
        unsigned char c = (unsigned char)value[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            return "has a control character in its value";
        }
    }
    size_t line_len = (size_t)(colon - space) + value_len + 3;
    size_t others = host == 0 ? most_bytes : bytes[0]; /* the fields that go out with these */
    if (bytes[host] + others + line_len > FIELDS_BYTES_MOST) {
        return "would make a host's fields longer than 8 KB together";
    }
    struct field *field = &fields[count];
    field->host = host;
    field->prefix = text; /* the argument's or the file's: it lasts */
    field->prefix_len = (size_t)(space - text);
    if ((field->line = malloc(line_len + 1)) == NULL) {
        return "cannot be taken: out of memory";
    }
    field->line_len = (size_t)snprintf(field->line, line_len + 1, "%.*s: %.*s\r\n",
                                       (int)(colon - space - 1), space + 1, (int)value_len, value);
    bytes[host] += field->line_len;
    if (host != 0 && bytes[host] > most_bytes) {
        most_bytes = bytes[host];
    }
    count++;
    return NULL;
}

bool fields_for_status(int status)
{
    return status == 200 || status == 201 || status == 204 || status == 206 ||
           (status >= 301 && status <= 304) || status == 307 || status == 308;
}

size_t fields_for(unsigned host, const char *path, size_t len, char *out, size_t size)
{
    size_t used = 0;

    for (unsigned i = 0; i < count; i++) {
        const struct field *field = &fields[i];
        if ((field->host == 0 || field->host == host) && field->prefix_len <= len &&
            memcmp(path, field->prefix, field->prefix_len) == 0 && used + field->line_len < size) {
            memcpy(out + used, field->line, field->line_len);
            used += field->line_len;
        }
    }
    if (size > 0) {
        out[used] = '\0';
    }
    return used;
}

size_t fields_for_encoded(unsigned host, const char *path, size_t len, char *out, size_t size)
{
    static __thread char decoded[16384], normal[16384];

    if (count == 0) {
        return fields_for(host, path, len, out, size); /* nothing to match: no decoding */
    }
    ssize_t decoded_len = sxe_http_percent_decode(path, len, decoded, sizeof(decoded), false);
    if (decoded_len < 0) {
        return fields_for(host, path, len, out, size); /* too long to be served anyway */
    }
    ssize_t normal_len =
        sxe_http_path_normalize(decoded, (size_t)decoded_len, normal, sizeof(normal));
    return normal_len >= 0 ? fields_for(host, normal, (size_t)normal_len, out, size)
                           : fields_for(host, decoded, (size_t)decoded_len, out, size);
}
