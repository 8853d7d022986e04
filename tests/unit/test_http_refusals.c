/*
 * The answers the HTTP server gives itself, without a handler (sxe__http_refuse()): for each
 * refusal, the exact status line, the body that says it ("NNN Reason\n") and its length, whether
 * the connection stays open (404 and 405 keep it, the rest close it), the extra field some carry
 * (Allow, Retry-After), and the same refusal of a HEAD request, which has no body. The server is
 * http_server_test.h's.
 */
#include "http_server_test.h"

struct refusal {
    const char *request;
    const char *status; /* "404 Not Found" */
    bool closes;
    const char *field; /* a field the answer must carry, or NULL */
};

/* Sends request on a new connection and checks the refusal it gets, whole. */
static void expect_refusal(const struct refusal *refusal, bool head)
{
    char want[256], body[64];
    bool closed;
    const char *response = exchange(refusal->request, &closed);
    int body_len = snprintf(body, sizeof(body), "%s\n", refusal->status);

    snprintf(want, sizeof(want), "HTTP/1.1 %s\r\n", refusal->status);
    if (strncmp(response, want, strlen(want)) != 0) {
        fail_msg("for %s expected %s, got: %s", refusal->request, want, response);
    }
    snprintf(want, sizeof(want), "\r\nContent-Length: %d\r\n", body_len);
    if (strstr(response, want) == NULL) {
        fail_msg("for %s expected Content-Length %d, got: %s", refusal->request, body_len,
                 response);
    }
    const char *end = strstr(response, "\r\n\r\n");
    assert_non_null(end);
    assert_string_equal(end + 4, head ? "" : body);
    assert_int_equal(closed, refusal->closes);
    assert_int_equal(strstr(response, "\r\nConnection: close\r\n") != NULL, refusal->closes);
    if (refusal->field != NULL && strstr(response, refusal->field) == NULL) {
        fail_msg("for %s expected %s, got: %s", refusal->request, refusal->field, response);
    }
}

static void test_each_refusal_whole(void **state)
{
    static char long_line[400], big_body[256];
    static const struct refusal fixed[] = {
        {"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", "404 Not Found", false, NULL},
        {"DELETE / HTTP/1.1\r\nHost: x\r\n\r\n", "405 Method Not Allowed", false, "\r\nAllow: "},
        {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "400 Bad Request", true, NULL},
        {"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", "501 Not Implemented",
         true, NULL},
        {"CONNECT x:1 HTTP/1.1\r\nHost: x:1\r\n\r\n", "501 Not Implemented", true, NULL},
        {"GET / HTTP/1.1\r\n\r\n", "400 Bad Request", true, NULL}, /* no Host */
        {"GET / HTTP/2.0\r\nHost: x\r\n\r\n", "505 HTTP Version Not Supported", true, NULL},
        /* a method that starts as HEAD does is not HEAD: refused as unknown, with its body */
        {"HEADS /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", "501 Not Implemented", true, NULL},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        expect_refusal(&fixed[i], false);
    }
    /* A request line past the limit (256), and a body past it (4096 bytes). */
    snprintf(long_line, sizeof(long_line), "GET /%0300d HTTP/1.1\r\nHost: x\r\n\r\n", 0);
    expect_refusal(&(struct refusal){long_line, "414 URI Too Long", true, NULL}, false);
    snprintf(big_body, sizeof(big_body),
             "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 5000);
    expect_refusal(&(struct refusal){big_body, "413 Content Too Large", true, NULL}, false);
}

/* The same refusals of HEAD requests: the head says the body's length, and no body follows. (A
 * head the parser refuses is answered before its method is known: that answer has its body.) */
static void test_refusals_of_head_requests_have_no_body(void **state)
{
    static const struct refusal heads[] = {
        {"HEAD /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", "404 Not Found", false, NULL},
        {"HEAD /post HTTP/1.1\r\nHost: x\r\n\r\n", "405 Method Not Allowed", false, "\r\nAllow: "},
        {"HEAD / HTTP/1.1\r\n\r\n", "400 Bad Request", true, NULL},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
        expect_refusal(&heads[i], true);
    }
}

/* 404 and 405 keep the connection: the request behind them is answered on it. */
static void test_a_kept_refusal_serves_the_next_request(void **state)
{
    char response[4096];
    bool closed;

    (void)state;
    int fd = client();
    sxe_test_say(fd, "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\nDELETE / HTTP/1.1\r\nHost: x\r\n\r\n"
                     "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    receive(fd, response, sizeof(response), &closed);
    assert_false(closed);
    const char *second = strstr(response, "HTTP/1.1 405 ");
    assert_non_null(second);
    assert_memory_equal(response, "HTTP/1.1 404 Not Found\r\n", 24);
    assert_non_null(strstr(second, "HTTP/1.1 200 OK\r\n"));
    close(fd);
}

/* A head that never ends is cut off by the header timeout: 408, and the close. */
static void test_a_head_that_never_ends_gets_408(void **state)
{
    char response[1024];
    bool closed;

    (void)state;
    int fd = client();
    sxe_test_say(fd, "GET / HTTP/1.1\r\nHost: x\r\n");
    receive(fd, response, sizeof(response), &closed);
    assert_string_equal(response, "");
    sxe__sys_clock_advance(6 * SXE_NS_PER_SEC);
    receive(fd, response, sizeof(response), &closed);
    assert_memory_equal(response, "HTTP/1.1 408 Request Timeout\r\n", 30);
    assert_non_null(strstr(response, "\r\nContent-Length: 20\r\n"));
    assert_non_null(strstr(response, "\r\n\r\n408 Request Timeout\n"));
    assert_true(closed);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_each_refusal_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals_of_head_requests_have_no_body, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_kept_refusal_serves_the_next_request, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_head_that_never_ends_gets_408, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
