/**
 * @file sxe/http_parser.h
 * @brief HTTP/1.1 requests (and response heads): a strict, incremental, zero-copy parser.
 *
 * The parser reads a request from the bytes a connection has buffered, a few at a time or all at
 * once, and gives the same verdict either way. It keeps a small state per connection and scans
 * each byte once: when more bytes arrive it resumes where it stopped, and it rejects a bad byte as
 * soon as it sees it. The request it returns points into the caller's bytes.
 *
 * It is strict RFC 9112 and refuses what request smuggling relies on: Content-Length together
 * with Transfer-Encoding; differing Content-Length values, or signs, spaces or lists in one; any
 * Transfer-Encoding but a single final "chunked"; bad or overflowing chunk sizes; NUL, CR or LF in
 * header values; obsolete line folding; whitespace before a header's colon; bytes that are not
 * token characters in methods and header names; bare LF line ends; versions other than HTTP/1.0
 * and HTTP/1.1. Transfer-Encoding is read as a list whose empty elements are ignored (", chunked"
 * is chunked); chunked twice, or not last, is 400; any other coding is 501.
 *
 * Host (RFC 9112 §3.2): more than one Host field, or one whose value is not uri-host [":" port]
 * (empty, userinfo, a path, spaces, a list), is 400. A missing Host in HTTP/1.1 is reported
 * (host_count) for the server to answer 400.
 *
 * Request targets (RFC 9112 §3.2): origin-form ("/path?query"); absolute-form
 * ("http://authority/path?query", http or https), whose authority becomes the request's host and
 * whose path becomes its target; asterisk-form ("*") for OPTIONS only; authority-form for CONNECT
 * only. Anything else is 400.
 *
 * A refusal returns -EPROTO, an error like any other, and leaves in the parser the HTTP status for
 * the server to send (sxe_http_parser_status()): 400, 413 (body too large), 414 (request line too
 * long), 431 (header section too large or too many fields), 501 (unknown method or transfer
 * coding), 505 (HTTP version).
 */
#ifndef SXE_HTTP_PARSER_H
#define SXE_HTTP_PARSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sxe/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Limits a request must stay within. */
struct sxe_http_limits {
    uint32_t request_line; /**< Longest request line, CRLF included (8192): else 414. */
    uint32_t header_bytes; /**< Longest header section, request line included (16384): else 431. */
    uint32_t header_count; /**< Most header fields (100): else 431. */
    uint64_t body_bytes;   /**< Largest body, chunked or not (1 MiB): else 413. */
};

/** The limits above, as a ready-made default. */
extern const struct sxe_http_limits sxe_http_default_limits;

/** The most header fields a request can report (the largest header_count allowed). */
#define SXE_HTTP_HEADERS_MAX 128

struct sxe_http_header {
    const char *name;
    size_t name_len;
    const char *value; /**< Without leading or trailing whitespace. */
    size_t value_len;
};

/**
 * A parsed request head. Every pointer points into the bytes given to the parser, but one: the
 * target of an absolute-form request without a path ("http://host") is the constant "/".
 */
struct sxe_http_request_head {
    const char *method;
    size_t method_len;
    const char *target;
    size_t target_len;
    int minor_version; /**< 0 for HTTP/1.0, 1 for HTTP/1.1. */
    unsigned header_count;
    struct sxe_http_header headers[SXE_HTTP_HEADERS_MAX];
    uint64_t content_length; /**< When has_body and not chunked. */
    bool has_body;           /**< Content-Length > 0, or chunked. */
    bool chunked;
    bool keep_alive; /**< The connection may carry another request after this one. */
    /**
     * Connection: upgrade with an Upgrade field: the client asks to switch protocols. A server
     * that does not take the protocol offered ignores it and answers as usual (RFC 9110 §7.8).
     */
    bool upgrade;
    bool tunnel;          /**< CONNECT or PRI: the bytes after the head are not HTTP/1. */
    bool expect_continue; /**< Expect: 100-continue. */
    unsigned host_count;  /**< Host fields seen (0 or 1); HTTP/1.1 requires one. */
    /**
     * The authority the request is for: an absolute-form target's, else the Host field's value;
     * NULL (host_len 0) when there is neither. Checked to be uri-host [":" port].
     */
    const char *host;
    size_t host_len;
};

/**
 * Per-connection parser state. Zero it (or call sxe_http_parser_init()) before the first request;
 * sxe_http_parse_request_head() and sxe_http_parse_body() reset it between requests themselves.
 */
struct sxe_http_parser {
    uint32_t scanned;    /* bytes of the head scanned so far */
    uint32_t start;      /* where the request line starts, after any empty lines */
    uint32_t line_start; /* where the current header line starts */
    uint32_t colon;      /* where its colon is, or 0 */
    uint8_t headers;     /* at most SXE_HTTP_HEADERS_MAX + 1 */
    uint8_t refused;     /* the status of a refusal, less 399; 0 before one */
    uint8_t state;
    uint8_t flags;
    uint8_t connection; /* Connection tokens seen */
    uint8_t host_count;
    uint8_t body_state;
    uint8_t minor_version;
    uint32_t host_at;  /* where the Host field's value starts, if host_count */
    uint32_t host_len; /* and its length */
    uint64_t content_length;
    uint64_t body_left;  /* of the body, or of the current chunk */
    uint64_t body_total; /* body bytes so far, against the limit */
};

void sxe_http_parser_init(struct sxe_http_parser *parser);

/**
 * True when the parser is inside a request: it has seen a byte of one that is not an empty line
 * before it (RFC 9112 lets empty lines precede a request line). A connection that ends when the
 * parser is not busy ended between requests.
 */
bool sxe_http_parser_busy(const struct sxe_http_parser *parser);

/**
 * The HTTP status to answer a refused request with (400, 413, 414, 431, 501 or 505), once
 * sxe_http_parse_request_head() or sxe_http_parse_body() returned -EPROTO; 0 before any refusal.
 */
int sxe_http_parser_status(const struct sxe_http_parser *parser);

/**
 * Parses a request head from data[0..len), which holds the bytes given in earlier calls (for
 * this request) followed by new ones.
 * @return The head's length when it is complete (request is filled in, pointing into data); 0 when
 *         more bytes are needed; or -EPROTO when the bytes can never make a valid request, with
 *         the status to answer in sxe_http_parser_status() (400, 413, 414, 431, 501, 505).
 */
int sxe_http_parse_request_head(struct sxe_http_parser *parser, const char *data, size_t len,
                                const struct sxe_http_limits *limits,
                                struct sxe_http_request_head *request);

/**
 * Whether host[0..len) is an authority a request may name (its Host field, HTTP/2's :authority):
 * uri-host [":" port] (RFC 9110 §7.2), as the parser checks a Host field: an IP literal in
 * brackets, or a reg-name or IPv4 address, then a port of at most five digits; no userinfo, no
 * list.
 */
bool sxe_http_host_valid(const char *host, size_t len);

/** A piece of a request body, pointing into the caller's bytes. */
struct sxe_http_body {
    const char *data;
    size_t len;
    bool done; /**< This was the last piece: the request is complete. */
};

/**
 * Reads body bytes after a head with has_body (chunked framing is removed). Call with the bytes
 * that follow the head, repeatedly, as more arrive.
 * @return How many bytes it consumed (body->data/len is the body data among them, possibly
 *         empty; body->done when the request ended), or -EPROTO with the status in
 *         sxe_http_parser_status(): 400 for bad chunk framing, 413 past the body limit.
 */
long sxe_http_parse_body(struct sxe_http_parser *parser, const char *data, size_t len,
                         const struct sxe_http_limits *limits, struct sxe_http_body *body);

/** The value of the first header called name (case-insensitive), or NULL. */
const struct sxe_http_header *sxe_http_request_header(const struct sxe_http_request_head *request,
                                                      const char *name);

/**
 * A parsed response head (for the client, sxe/http_client.h). Every pointer points into the bytes
 * given to the parser.
 */
struct sxe_http_response_head {
    int status;        /**< 100 to 999. */
    int minor_version; /**< 0 for HTTP/1.0, 1 for HTTP/1.1. */
    const char *reason;
    size_t reason_len;
    unsigned header_count;
    struct sxe_http_header headers[SXE_HTTP_HEADERS_MAX];
    uint64_t content_length; /**< When has_body and neither chunked nor until_close. */
    bool has_body;
    bool chunked;
    bool until_close; /**< The body runs until the server closes the connection. */
    bool keep_alive;  /**< The connection may carry another request after this response. */
};

/**
 * Parses a response head from data[0..len), which holds the bytes given in earlier calls (for this
 * response) followed by new ones, as sxe_http_parse_request_head() does for requests, as strictly:
 * see src/http/parser/response_parser.c for what it refuses. The body is framed by RFC 9112 §6.3:
 * none for HEAD (head_request), 1xx, 204 and 304; else chunked, Content-Length, or until the close.
 * When it has one, read it with sxe_http_parse_body() (not for until_close), which the parser is
 * ready for.
 * @return The head's length when it is complete; 0 when more bytes are needed; -EPROTO for bytes
 *         that can never make a valid response; -EMSGSIZE past limits->header_bytes or
 *         header_count.
 */
int sxe_http_parse_response_head(struct sxe_http_parser *parser, const char *data, size_t len,
                                 const struct sxe_http_limits *limits, bool head_request,
                                 struct sxe_http_response_head *response);

/** The value of a response's first header called name (case-insensitive), or NULL. */
const struct sxe_http_header *
sxe_http_response_header(const struct sxe_http_response_head *response, const char *name);

#ifdef __cplusplus
}
#endif

#endif
