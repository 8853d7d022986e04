#define _GNU_SOURCE /* memmem, strncasecmp */
#include "response.h"

#include <string.h>
#include <strings.h>

enum { HEAD, BODY, CHUNK_SIZE, CHUNK_DATA, CHUNK_END, TRAILERS };

void response_reader_init(struct response_reader *reader, bool head_request, bool hashing)
{
    *reader = (struct response_reader){.state = HEAD,
                                       .head_request = head_request,
                                       .hashing = hashing,
                                       .hash = RESPONSE_HASH_START};
}

uint64_t response_hash(uint64_t hash, const char *data, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        hash = (hash ^ (unsigned char)data[i]) * 1099511628211ULL;
    }
    return hash;
}

/* len bytes of the body, at data: counted, and hashed when the reader samples this one. */
static void body_bytes(struct response_reader *reader, const char *data, size_t len)
{
    reader->body_len += len;
    if (reader->hashing) {
        reader->hash = response_hash(reader->hash, data, len);
    }
}

/* A header's value, if line (without CRLF) is that header; NULL otherwise. */
static const char *header_value(const char *line, size_t len, const char *name, size_t *value_len)
{
    size_t name_len = strlen(name);

    if (len <= name_len || line[name_len] != ':' || strncasecmp(line, name, name_len) != 0) {
        return NULL;
    }
    const char *value = line + name_len + 1;
    const char *end = line + len;
    while (value < end && (*value == ' ' || *value == '\t')) {
        value++;
    }
    while (end > value && (end[-1] == ' ' || end[-1] == '\t')) {
        end--;
    }
    *value_len = (size_t)(end - value);
    return value;
}

static bool parse_decimal(const char *text, size_t len, uint64_t *value)
{
    *value = 0;
    if (len == 0 || len > 18) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9') {
            return false;
        }
        *value = *value * 10 + (uint64_t)(text[i] - '0');
    }
    return true;
}

/* Parses the head (status line and headers, head_len bytes ending in the blank line). */
static enum response_result parse_head(struct response_reader *reader, const char *head,
                                       size_t head_len)
{
    bool has_length = false;
    bool chunked = false;
    uint64_t length = 0;

    if (head_len < 12 || memcmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ' || head[9] < '1' ||
        head[9] > '5' || head[10] < '0' || head[10] > '9' || head[11] < '0' || head[11] > '9') {
        return RESPONSE_BAD_LENGTH;
    }
    reader->status = (head[9] - '0') * 100 + (head[10] - '0') * 10 + (head[11] - '0');
    reader->close_after = head[7] == '0';

    const char *line = (const char *)memchr(head, '\n', head_len) + 1;
    const char *end = head + head_len;
    while (line < end) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        size_t len = (size_t)(eol - line);
        if (len > 0 && line[len - 1] == '\r') {
            len--;
        }
        size_t value_len;
        const char *value;
        if ((value = header_value(line, len, "Content-Length", &value_len)) != NULL) {
            uint64_t parsed;
            if (!parse_decimal(value, value_len, &parsed) || (has_length && parsed != length)) {
                return RESPONSE_BAD_LENGTH;
            }
            has_length = true;
            length = parsed;
        } else if ((value = header_value(line, len, "Transfer-Encoding", &value_len)) != NULL) {
            if (value_len != 7 || strncasecmp(value, "chunked", 7) != 0) {
                return RESPONSE_BAD_LENGTH;
            }
            chunked = true;
        } else if ((value = header_value(line, len, "Connection", &value_len)) != NULL) {
            reader->close_after = value_len == 5 && strncasecmp(value, "close", 5) == 0;
        }
        line = eol + 1;
    }

    if (reader->head_request || reader->status < 200 || reader->status == 204 ||
        reader->status == 304) {
        reader->state = HEAD;
        return reader->status < 200 ? RESPONSE_MORE : RESPONSE_DONE;
    }
    if (chunked && has_length) {
        return RESPONSE_BAD_LENGTH;
    }
    if (chunked) {
        reader->state = CHUNK_SIZE;
        return RESPONSE_MORE;
    }
    if (!has_length) {
        return RESPONSE_BAD_LENGTH; /* a body framed by the close cannot be kept alive */
    }
    reader->body_left = length;
    reader->state = BODY;
    return RESPONSE_MORE;
}

/* Finds a CRLF-terminated line at data; returns its length without CRLF, or -1 if incomplete. */
static long line_at(const char *data, size_t len)
{
    const char *eol = memchr(data, '\n', len);
    if (eol == NULL) {
        return -1;
    }
    long line_len = eol - data;
    return line_len > 0 && data[line_len - 1] == '\r' ? line_len - 1 : line_len;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

enum response_result response_read(struct response_reader *reader, const char *data, size_t len,
                                   size_t *consumed)
{
    size_t used = 0;

    for (;;) {
        const char *at = data + used;
        size_t left = len - used;
        long line_len;

        switch (reader->state) {
        case HEAD: {
            const char *end = memmem(at, left, "\r\n\r\n", 4);
            if (end == NULL) {
                *consumed = used;
                return left > RESPONSE_HEAD_MAX ? RESPONSE_BAD_LENGTH : RESPONSE_MORE;
            }
            size_t head_len = (size_t)(end - at) + 4;
            enum response_result result = parse_head(reader, at, head_len);
            used += head_len;
            if (result != RESPONSE_MORE) {
                *consumed = used;
                return result;
            }
            break; /* a body follows, or this was a 1xx response and the real one follows */
        }
        case BODY: {
            size_t part = left < reader->body_left ? left : (size_t)reader->body_left;
            body_bytes(reader, at, part);
            used += part;
            reader->body_left -= part;
            if (reader->body_left > 0) {
                *consumed = used;
                return RESPONSE_MORE;
            }
            reader->state = HEAD;
            *consumed = used;
            return RESPONSE_DONE;
        }
        case CHUNK_SIZE: {
            if ((line_len = line_at(at, left)) < 0) {
                *consumed = used;
                return left > 1024 ? RESPONSE_BAD_LENGTH : RESPONSE_MORE;
            }
            uint64_t size = 0;
            long i = 0;
            for (int digit; i < line_len && (digit = hex_digit(at[i])) >= 0; i++) {
                if (size > (UINT64_MAX >> 4)) {
                    return RESPONSE_BAD_LENGTH;
                }
                size = size << 4 | (uint64_t)digit;
            }
            if (i == 0 || (i < line_len && at[i] != ';' && at[i] != ' ' && at[i] != '\t')) {
                return RESPONSE_BAD_LENGTH;
            }
            used += (size_t)line_len + (at[line_len] == '\r' ? 2 : 1);
            reader->body_left = size;
            reader->state = size == 0 ? TRAILERS : CHUNK_DATA;
            break;
        }
        case CHUNK_DATA: {
            size_t part = left < reader->body_left ? left : (size_t)reader->body_left;
            body_bytes(reader, at, part);
            used += part;
            reader->body_left -= part;
            if (reader->body_left > 0) {
                *consumed = used;
                return RESPONSE_MORE;
            }
            reader->state = CHUNK_END;
            break;
        }
        case CHUNK_END:
            if (left < 2) {
                *consumed = used;
                return RESPONSE_MORE;
            }
            if (at[0] != '\r' || at[1] != '\n') {
                return RESPONSE_BAD_LENGTH;
            }
            used += 2;
            reader->state = CHUNK_SIZE;
            break;
        default: /* TRAILERS: header lines until a blank one */
            if ((line_len = line_at(at, left)) < 0) {
                *consumed = used;
                return left > RESPONSE_HEAD_MAX ? RESPONSE_BAD_LENGTH : RESPONSE_MORE;
            }
            used += (size_t)line_len + (at[line_len] == '\r' ? 2 : 1);
            if (line_len == 0) {
                reader->state = HEAD;
                *consumed = used;
                return RESPONSE_DONE;
            }
            break;
        }
    }
}
