/*
 * Chunked request bodies (RFC 9112 §7.1), decoded by sxe_http_parse_body(): thousands of seeded
 * random encodings (sizes in either case, with leading zeros; extensions named, valued, quoted
 * with escapes, with whitespace around them; trailers), each decoded whole and fed in pieces cut
 * at random, must give back the body and end where the encoding ends; each one broken at one
 * place must be refused with 400; the body limit holds to the byte across chunks (413); and a
 * table of the rules' edges. test_http_parser.c runs llhttp's corpus; this covers the states of
 * the chunked decoder in every order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/parser/parser.h"
#include "sxe/http.h"
#include "sxe_test.h"

static const char head[] = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";

static uint64_t random_state;

static uint64_t next_random(void)
{
    return sxe_test_random(&random_state);
}

static unsigned pick(unsigned n)
{
    return (unsigned)(next_random() % n);
}

/*
 * Decodes encoded (the body after the head), fed in pieces of at most step bytes (0: whole) as a
 * connection keeps what is unconsumed. @return the status (0 when the body ended, with out and
 * *out_len its bytes and *end where it ended), or -1 if it never ended.
 */
static int decode(const char *encoded, size_t len, size_t step, uint64_t body_bytes, char *out,
                  size_t *out_len, size_t *end)
{
    struct sxe_http_limits limits = sxe_http_default_limits;
    struct sxe_http_parser parser;
    struct sxe_http_request_head request;
    static char buffer[1 << 16];
    size_t available = 0, base = 0;

    limits.body_bytes = body_bytes;
    sxe_http_parser_init(&parser);
    assert_int_equal(
        sxe_http_parse_request_head(&parser, head, sizeof(head) - 1, &limits, &request),
        (int)sizeof(head) - 1);
    assert_true(request.chunked);
    memcpy(buffer, encoded, len);
    *out_len = 0;
    for (;;) {
        if (base == available) {
            if (available == len) {
                return -1;
            }
            available = step == 0 || available + step > len ? len : available + step;
        }
        struct sxe_http_body body;
        long rc = sxe_http_parse_body(&parser, buffer + base, available - base, &limits, &body);
        if (rc < 0) {
            assert_int_equal(rc, -EPROTO);
            return sxe_http_parser_status(&parser);
        }
        if (body.len > 0) {
            assert_true(body.data >= buffer + base && body.data + body.len <= buffer + available);
            memcpy(out + *out_len, body.data, body.len);
            *out_len += body.len;
        }
        base += (size_t)rc;
        if (body.done) {
            *end = base;
            return 0;
        }
        if (rc == 0) {
            if (available == len) {
                return -1;
            }
            available = step == 0 || available + step > len ? len : available + step;
        }
    }
}

static const char tchars[] = "abcXYZ019!#$%&'*+-.^_`|~";
static const char qdtext[] = "ab \t!#~\x80\xff()";

static size_t put(char *at, const char *text)
{
    memcpy(at, text, strlen(text));
    return strlen(text);
}

static size_t put_token(char *at)
{
    size_t len = 1 + pick(4);
    for (size_t i = 0; i < len; i++) {
        at[i] = tchars[pick(sizeof(tchars) - 1)];
    }
    return len;
}

static size_t put_space(char *at)
{
    static const char *const spaces[] = {"", "", " ", "\t", " \t "};
    return put(at, spaces[pick(5)]);
}

/* A chunk's extensions: ;name[=token|="quoted\"text"], with whitespace before each part. */
static size_t put_extensions(char *at)
{
    size_t len = 0;
    for (unsigned n = pick(3); n > 0; n--) {
        len += put_space(at + len);
        at[len++] = ';';
        len += put_space(at + len);
        len += put_token(at + len);
        switch (pick(3)) {
        case 0:
            break;
        case 1:
            at[len++] = '=';
            len += put_token(at + len);
            break;
        default:
            at[len++] = '=';
            at[len++] = '"';
            for (unsigned i = pick(5); i > 0; i--) {
                if (pick(4) == 0) {
                    at[len++] = '\\';
                    at[len++] = pick(2) ? '"' : 'q';
                } else {
                    at[len++] = qdtext[pick(sizeof(qdtext) - 1)];
                }
            }
            at[len++] = '"';
            break;
        }
    }
    return len;
}

/* A random valid encoding of a random body. @return its length; the body in body. */
static size_t encode(char *at, char *body, size_t *body_len)
{
    size_t len = 0;
    *body_len = 0;
    for (unsigned chunks = pick(5); chunks > 0; chunks--) {
        size_t size = 1 + pick(300);
        char digits[32];
        snprintf(digits, sizeof(digits), pick(2) ? "%.*s%zx" : "%.*s%zX", (int)pick(3), "000",
                 size);
        len += put(at + len, digits);
        len += put_extensions(at + len);
        len += put(at + len, "\r\n");
        for (size_t i = 0; i < size; i++) {
            char c = (char)next_random();
            at[len++] = c;
            body[(*body_len)++] = c;
        }
        len += put(at + len, "\r\n");
    }
    len += put(at + len, pick(2) ? "0" : "000");
    len += put_extensions(at + len);
    len += put(at + len, "\r\n");
    for (unsigned trailers = pick(3); trailers > 0; trailers--) {
        len += put_token(at + len);
        len += put(at + len, pick(2) ? ": v\tx\x80" : ":");
        len += put(at + len, "\r\n");
    }
    len += put(at + len, "\r\n");
    return len;
}

static void test_random_encodings_decode_whole_and_in_pieces(void **state)
{
    static char encoded[8192], body[8192], out[8192];

    (void)state;
    random_state = 7;
    for (int round = 0; round < 2000; round++) {
        size_t body_len, out_len, end;
        size_t len = encode(encoded, body, &body_len);
        memcpy(encoded + len, "GET", 3); /* the next request's first bytes: not the body's */
        for (int way = 0; way < 3; way++) {
            size_t step = way == 0 ? 0 : way == 1 ? 1 : 1 + pick(40);
            int rc = decode(encoded, len + 3, step, 1 << 20, out, &out_len, &end);
            if (rc != 0 || out_len != body_len || memcmp(out, body, body_len) != 0 || end != len) {
                fail_msg("round %d, pieces of %zu: status %d, %zu of %zu bytes, ended at %zu of "
                         "%zu:\n%.*s",
                         round, step, rc, out_len, body_len, end, len, (int)len, encoded);
            }
        }
    }
}

/* One byte of a valid encoding changed where the grammar allows none of its kind: refused. */
static void test_encodings_broken_at_one_place_are_refused(void **state)
{
    static const char *const broken[] = {
        "g\r\nx\r\n0\r\n\r\n",              /* not a hex digit */
        "\r\n0\r\n\r\n",                    /* no size */
        " 1\r\nx\r\n0\r\n\r\n",             /* whitespace before the size */
        "1 x\r\nx\r\n0\r\n\r\n",            /* something other than an extension after it */
        "1 \r\nx\r\n0\r\n\r\n",             /* whitespace, then the end of the line */
        "1;\r\nx\r\n0\r\n\r\n",             /* ';' with no extension */
        "1;=v\r\nx\r\n0\r\n\r\n",           /* a value with no name */
        "1;a=\r\nx\r\n0\r\n\r\n",           /* a name with an empty value */
        "1;a=\"x\r\nx\r\n0\r\n\r\n",        /* a quoted value not closed */
        "1;a=\"\x01\"\r\nx\r\n0\r\n\r\n",   /* a control byte in it */
        "1;a=\"\\\x01\"\r\nx\r\n0\r\n\r\n", /* or escaped */
        "1;a b\r\nx\r\n0\r\n\r\n",          /* a second word after the name */
        "1;a=b c\r\nx\r\n0\r\n\r\n",        /* or after the value */
        "1\rx\r\n0\r\n\r\n",                /* a CR without its LF */
        "1\nx\r\n0\r\n\r\n",                /* a bare LF */
        "1\r\nxy\r\n0\r\n\r\n",             /* data longer than its size */
        "1\r\nx\rX0\r\n\r\n",               /* the data's CR without its LF */
        "1\r\nx\n0\r\n\r\n",                /* its bare LF */
        "0\r\n:v\r\n\r\n",                  /* a trailer with no name */
        "0\r\nn v\r\n\r\n",                 /* a trailer name with a space */
        "0\r\nn:\x01\r\n\r\n",              /* a control byte in a trailer */
        "0\r\nn:v\rX\r\n",                  /* a trailer's CR without its LF */
        "0\r\n\rX",                         /* the end's CR without its LF */
        "0\r\n\n",                          /* a bare LF at the end */
    };
    char out[256];
    size_t out_len, end;

    (void)state;
    for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
        for (size_t step = 0; step < 3; step++) {
            int rc = decode(broken[i], strlen(broken[i]), step, 1 << 20, out, &out_len, &end);
            if (rc != 400) {
                fail_msg("\"%s\" in pieces of %zu: %d, want 400", broken[i], step, rc);
            }
        }
    }
}

/* The body limit, counted over all the chunks, to the byte. */
static void test_the_body_limit_across_chunks(void **state)
{
    char out[256];
    size_t out_len, end;
    const char *body = "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n";

    (void)state;
    assert_int_equal(decode(body, strlen(body), 0, 7, out, &out_len, &end), 0);
    assert_int_equal(out_len, 7);
    assert_int_equal(decode(body, strlen(body), 1, 7, out, &out_len, &end), 0);
    assert_int_equal(decode(body, strlen(body), 0, 6, out, &out_len, &end), 413);
    assert_int_equal(decode(body, strlen(body), 1, 6, out, &out_len, &end), 413);
    assert_int_equal(decode("8\r\n", 3, 0, 7, out, &out_len, &end), 413); /* at the size */
    assert_int_equal(decode("7\r\n", 3, 0, 7, out, &out_len, &end), -1);  /* waits for it */
    assert_int_equal(decode("0\r\n\r\n", 5, 0, 0, out, &out_len, &end), 0);
    assert_int_equal(out_len, 0);
    assert_int_equal(end, 5);
    /* The largest size that fits 64 bits is read; the limit then refuses it. Without a limit, a
     * size past 64 bits is refused as malformed. */
    assert_int_equal(decode("ffffffffffffffff\r\n", 18, 0, 1 << 20, out, &out_len, &end), 413);
    assert_int_equal(decode("0fffffffffffffff1\r\n", 19, 0, UINT64_MAX, out, &out_len, &end), -1);
    assert_int_equal(decode("10000000000000000\r\n", 19, 0, UINT64_MAX, out, &out_len, &end), 400);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_encodings_decode_whole_and_in_pieces),
        cmocka_unit_test(test_encodings_broken_at_one_place_are_refused),
        cmocka_unit_test(test_the_body_limit_across_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
