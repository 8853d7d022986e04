/*
 * An incremental HTTP/1.1 response reader for sxe-http: it frames responses (Content-Length,
 * chunked, or none for HEAD, 1xx, 204 and 304) and checks them, consuming bytes as it goes so a
 * body of any size passes through a small buffer.
 */
#ifndef SXE_HTTP_RESPONSE_H
#define SXE_HTTP_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum response_result {
    RESPONSE_MORE,       /* consumed what it could; needs more bytes */
    RESPONSE_DONE,       /* one whole response read; status is set */
    RESPONSE_BAD_LENGTH, /* framing broken: bad or missing length, bad chunk, header too large */
};

struct response_reader {
    int state;
    int status;         /* of the response being read, once its head is parsed */
    bool head_request;  /* the request was HEAD: no body follows */
    bool close_after;   /* the response said Connection: close */
    uint64_t body_left; /* bytes left of the body or of the current chunk */
    uint64_t body_len;  /* bytes of the body read so far (chunked framing left out) */
    bool hashing;       /* hash the body's bytes (a sample checked against --body) */
    uint64_t hash;      /* FNV-1a of the body's bytes so far, when hashing */
};

/* FNV-1a of len bytes, continued from hash (start with RESPONSE_HASH_START). */
#define RESPONSE_HASH_START 14695981039346656037ULL
uint64_t response_hash(uint64_t hash, const char *data, size_t len);

/* The most bytes a response head may take. */
#define RESPONSE_HEAD_MAX 16384

/* Makes the reader ready for a response; with hashing, its body's bytes are hashed. */
void response_reader_init(struct response_reader *reader, bool head_request, bool hashing);

/*
 * Reads from data[0..len). Sets *consumed to the bytes used (the caller drops them, keeps the
 * rest and calls again with more). Returns RESPONSE_DONE after each whole response; call again
 * for the next one with the remaining bytes.
 */
enum response_result response_read(struct response_reader *reader, const char *data, size_t len,
                                   size_t *consumed);

#endif
