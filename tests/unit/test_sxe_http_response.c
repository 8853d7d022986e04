/*
 * sxe-http's response reader (tools/sxe-http/response.c, compiled into this program): status
 * lines at each byte, Content-Length and chunked framing at their edges, bodiless answers, 1xx
 * answers before the real one, Connection: close, trailers, the limits of a head, a chunk-size
 * line and a trailer section, and responses fed whole, in two pieces at every split and back to
 * back. The system tests run sxe-http against servers; this pins the reader's rules one by one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "response.h"
#include "sxe_test.h"

/* Reads text (responses back to back) whole: the statuses of the responses done, in out, and the
 * result that ended it (RESPONSE_MORE if all was used without an error). */
static enum response_result read_all(const char *text, size_t len, bool head, int *statuses,
                                     int *count)
{
    struct response_reader reader;
    size_t used = 0;

    response_reader_init(&reader, head, false);
    *count = 0;
    for (;;) {
        size_t consumed = 0;
        enum response_result result = response_read(&reader, text + used, len - used, &consumed);
        assert_true(consumed <= len - used);
        used += consumed;
        if (result == RESPONSE_DONE) {
            statuses[(*count)++] = reader.status;
            continue;
        }
        if (result == RESPONSE_BAD_LENGTH || used == len || consumed == 0) {
            return result;
        }
    }
}

/* The same, as the bytes come in two pieces split at split, keeping what was not consumed. */
static enum response_result read_split(const char *text, size_t len, size_t split, bool head,
                                       int *statuses, int *count)
{
    struct response_reader reader;
    char buffer[70000];
    size_t have = 0, fed = 0;

    assert_true(len <= sizeof(buffer));
    response_reader_init(&reader, head, false);
    *count = 0;
    for (int piece = 0; piece < 2; piece++) {
        size_t more = piece == 0 ? split : len - split;
        memcpy(buffer + have, text + fed, more);
        have += more;
        fed += more;
        for (;;) {
            size_t consumed = 0;
            enum response_result result = response_read(&reader, buffer, have, &consumed);
            memmove(buffer, buffer + consumed, have - consumed);
            have -= consumed;
            if (result == RESPONSE_BAD_LENGTH) {
                return result;
            }
            if (result == RESPONSE_DONE) {
                statuses[(*count)++] = reader.status;
                continue;
            }
            break;
        }
    }
    return RESPONSE_MORE;
}

/* text must read as the statuses given (0-terminated), whole and split anywhere. */
static void expect_read(const char *text, bool head, const int *want)
{
    int statuses[16], count, wanted = 0;
    size_t len = strlen(text);

    while (want[wanted] != 0) {
        wanted++;
    }
    enum response_result result = read_all(text, len, head, statuses, &count);
    if (result == RESPONSE_BAD_LENGTH || count != wanted) {
        fail_msg("\"%s\": %d responses (result %d), want %d", text, count, result, wanted);
    }
    for (int i = 0; i < count; i++) {
        assert_int_equal(statuses[i], want[i]);
    }
    for (size_t split = 0; split <= len; split++) {
        result = read_split(text, len, split, head, statuses, &count);
        if (result == RESPONSE_BAD_LENGTH || count != wanted) {
            fail_msg("\"%s\" split at %zu: %d responses, want %d", text, split, count, wanted);
        }
    }
}

static void expect_bad(const char *text, bool head)
{
    int statuses[16], count;
    if (read_all(text, strlen(text), head, statuses, &count) != RESPONSE_BAD_LENGTH) {
        fail_msg("\"%s\": not refused (%d read)", text, count);
    }
}

static void test_status_lines(void **state)
{
    (void)state;
    expect_read("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, (int[]){200, 0});
    expect_read("HTTP/1.0 599 X\r\nContent-Length: 0\r\n\r\n", false, (int[]){599, 0});
    expect_bad("HTTP/1.1 600 X\r\nContent-Length: 0\r\n\r\n", false);
    expect_bad("HTTP/1.1 099 X\r\nContent-Length: 0\r\n\r\n", false);
    expect_bad("HTTP/1.1 2/0 X\r\nContent-Length: 0\r\n\r\n", false);
    expect_bad("HTTP/1.1 2:0 X\r\nContent-Length: 0\r\n\r\n", false);
    expect_bad("HTTP/1.1 20/ X\r\nContent-Length: 0\r\n\r\n", false);
    expect_bad("HTTP/1.1 20: X\r\nContent-Length: 0\r\n\r\n", false);
    expect_bad("HTTP/1.1-200 X\r\nContent-Length: 0\r\n\r\n", false);
    expect_bad("HTTP/2.1 200 X\r\nContent-Length: 0\r\n\r\n", false);
    expect_bad("HTTP/1.1 20\r\n\r\n", false);
    int statuses[4], count;
    const char *digits = "HTTP/1.1 209 X\r\nContent-Length: 0\r\n\r\n";
    assert_int_equal(read_all(digits, strlen(digits), false, statuses, &count), RESPONSE_MORE);
    assert_int_equal(statuses[0], 209);
}

static void test_bodies_by_length_and_chunks(void **state)
{
    (void)state;
    expect_read("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, (int[]){200, 0});
    expect_read("HTTP/1.1 200 OK\r\ncontent-length:\t 5 \t\r\n\r\nhello", false, (int[]){200, 0});
    expect_read("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", false,
                (int[]){200, 0});
    expect_read("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n"
                "5\r\nhello\r\nA;ext=1\r\n0123456789\r\nb \r\n0123456789a\r\n"
                "0\r\nTrailer: x\r\n\r\n",
                false, (int[]){200, 0});
    expect_read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\n\n", false,
                (int[]){200, 0});
    /* Trailer lines ended by a bare LF, each consumed whole: the next response starts after. */
    expect_read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\nTrailer: x\n\n"
                "HTTP/1.1 202 B\r\nContent-Length: 0\r\n\r\n",
                false, (int[]){200, 202, 0});
    expect_read(
        "HTTP/1.1 201 A\r\nContent-Length: 2\r\n\r\nabHTTP/1.1 202 B\r\nContent-Length: 0\r\n"
        "\r\nHTTP/1.1 203 C\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
        false, (int[]){201, 202, 203, 0});
    /* 1xx first, then the answer; bodiless ones whatever they say. */
    expect_read("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", false,
                (int[]){200, 0});
    expect_read(
        "HTTP/1.1 199 X\r\nContent-Length: 9\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
        "\r\n",
        false, (int[]){200, 0});
    expect_read("HTTP/1.1 204 No\r\nContent-Length: 9\r\n\r\nHTTP/1.1 304 No\r\n\r\n", false,
                (int[]){204, 304, 0});
    expect_read("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nHTTP/1.1 200 OK\r\n"
                "Transfer-Encoding: chunked\r\n\r\n",
                true, (int[]){200, 200, 0});

    expect_bad("HTTP/1.1 200 OK\r\n\r\n", false); /* framed by the close */
    expect_bad("HTTP/1.1 205 OK\r\n\r\n", false);
    expect_bad("HTTP/1.1 303 OK\r\n\r\n", false);
    expect_bad("HTTP/1.1 305 OK\r\n\r\n", false);
    expect_bad("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", false);
    expect_bad("HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", false);
    expect_bad("HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456789\r\n\r\n", false); /* 19 */
    expect_bad("HTTP/1.1 200 OK\r\nContent-Length: 1/\r\n\r\n", false);
    expect_bad("HTTP/1.1 200 OK\r\nContent-Length: 1:\r\n\r\n", false);
    expect_bad("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", false);
    expect_bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false);
    expect_bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunke\r\n\r\n", false);
    expect_bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\ng\r\n", false);
    expect_bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", false);
    expect_bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1x\r\n", false);
    expect_bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n", false);
    expect_bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n", false);
    expect_read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                "0000000000000000000000001\r\nx\r\n0\r\n\r\n",
                false, (int[]){200, 0});
    expect_read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfF\r\n"
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\r\n0\r\n\r\n",
                false, (int[]){200, 0});
}

static void test_connection_close(void **state)
{
    struct response_reader reader;
    size_t consumed;

    (void)state;
    static const struct {
        const char *head;
        bool close;
    } cases[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false},
        {"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", true},
        {"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n", true},
        {"HTTP/1.1 200 OK\r\nConnection: \tclose \r\nContent-Length: 0\r\n\r\n", true},
        {"HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 0\r\n\r\n", false},
        {"HTTP/1.1 200 OK\r\nConnection: clos\r\nContent-Length: 0\r\n\r\n", false},
        {"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", false},
        {"HTTP/1.1 200 OK\r\nConnections: close\r\nContent-Length: 0\r\n\r\n", false},
        {"HTTP/1.1 200 OK\r\nConnection:close\r\nContent-Length: 0\r\n\r\n", true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        response_reader_init(&reader, false, false);
        assert_int_equal(response_read(&reader, cases[i].head, strlen(cases[i].head), &consumed),
                         RESPONSE_DONE);
        if (reader.close_after != cases[i].close) {
            fail_msg("\"%s\": close_after %d", cases[i].head, reader.close_after);
        }
    }
}

/* A head, a chunk-size line and a trailer section each have a limit. */
static void test_limits(void **state)
{
    static char text[RESPONSE_HEAD_MAX + 2048];
    struct response_reader reader;
    size_t consumed;

    (void)state;
    memset(text, 'x', sizeof(text));
    memcpy(text, "HTTP/1.1 200 OK\r\nX: ", 20);
    response_reader_init(&reader, false, false);
    assert_int_equal(response_read(&reader, text, RESPONSE_HEAD_MAX, &consumed), RESPONSE_MORE);
    assert_int_equal(response_read(&reader, text, RESPONSE_HEAD_MAX + 1, &consumed),
                     RESPONSE_BAD_LENGTH);

    const char *head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    size_t head_len = strlen(head);
    memcpy(text, head, head_len);
    memset(text + head_len, '0', 1100);
    response_reader_init(&reader, false, false);
    assert_int_equal(response_read(&reader, text, head_len + 1024, &consumed), RESPONSE_MORE);
    assert_int_equal(consumed, head_len);
    response_reader_init(&reader, false, false);
    assert_int_equal(response_read(&reader, text, head_len + 1025, &consumed), RESPONSE_BAD_LENGTH);

    memcpy(text + head_len, "0\r\n", 3);
    memset(text + head_len + 3, 'x', RESPONSE_HEAD_MAX + 1);
    response_reader_init(&reader, false, false);
    assert_int_equal(response_read(&reader, text, head_len + 3 + RESPONSE_HEAD_MAX, &consumed),
                     RESPONSE_MORE);
    assert_int_equal(consumed, head_len + 3);
    response_reader_init(&reader, false, false);
    assert_int_equal(response_read(&reader, text, head_len + 3 + RESPONSE_HEAD_MAX + 1, &consumed),
                     RESPONSE_BAD_LENGTH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_lines),
        cmocka_unit_test(test_bodies_by_length_and_chunks),
        cmocka_unit_test(test_connection_close),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
