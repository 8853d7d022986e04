/*
 * The HTTP client's request heads (sxe/http_client.h) against a raw upstream that records every
 * byte it is sent: a target too long for one formatted line leaves in pieces and arrives whole,
 * and a head the connection cannot take (past the loop's write_limit at each of its pieces in turn)
 * fails its call with -ENOBUFS and nothing else, and on a pooled connection closes it; a connection
 * that cannot be opened fails its call, and a full queue refuses one at once. The client's other
 * behaviour is tested in test_http_client.c and test_http_client_upload.c.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sxe/conn.h"
#include "sxe/http_client.h"
#include "sys.h"
#include "sxe_test.h"

static sxe_loop_t *loop;
static sxe_conn_t *listener;
static sxe_http_client_t *client;
static char address[64];
static char heard[8192]; /* every byte the upstream was sent, over all its connections */
static size_t heard_len;
static int finished;

/* A fixed Host, so the request's length does not depend on the port. */
static const struct sxe_http_client_options client_options = {.host = "upstream.test"};

static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
static const char closing_reply[] =
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

/* What each connection the upstream accepted was sent, in the order they first sent it. */
static struct inbox {
    char text[4096];
    size_t len;
    size_t answered; /* where the next request starts */
} inboxes[4];
static unsigned inbox_count;

/*
 * Records what arrives, and answers each whole request (a head, and a body of 5 if announced);
 * "/close" is answered with Connection: close, and the connection closed.
 */
static size_t upstream(sxe_conn_t *conn, const char *data, size_t len)
{
    struct inbox *inbox = sxe_conn_user(conn);

    if (inbox == NULL) {
        assert_true(inbox_count < sizeof(inboxes) / sizeof(inboxes[0]));
        inbox = &inboxes[inbox_count++];
        sxe_conn_set_user(conn, inbox);
    }
    assert_true(heard_len + len < sizeof(heard) && inbox->len + len < sizeof(inbox->text));
    memcpy(heard + heard_len, data, len);
    heard_len += len;
    heard[heard_len] = '\0';
    memcpy(inbox->text + inbox->len, data, len);
    inbox->len += len;
    inbox->text[inbox->len] = '\0';
    const char *request = inbox->text + inbox->answered;
    const char *end = strstr(request, "\r\n\r\n");
    size_t body = strstr(request, "Content-Length: 5\r\n") != NULL ? 5 : 0;
    if (end != NULL && (size_t)(end + 4 - inbox->text) + body <= inbox->len) {
        bool close = strncmp(request, "GET /close ", 11) == 0;
        inbox->answered = (size_t)(end + 4 - inbox->text) + body;
        (void)sxe_conn_write(conn, close ? closing_reply : reply,
                             strlen(close ? closing_reply : reply));
        if (close) {
            (void)sxe_conn_close_when_sent(conn);
        }
    }
    return len;
}

static const struct sxe_conn_handlers upstream_handlers = {.on_read = upstream};

/* A loop whose connections may queue write_limit bytes, the upstream, and a client of it. */
static void start(uint32_t write_limit)
{
    struct sxe_loop_options options = {
        .connections = 16, .timers = 16, .buffer_size = 4096, .write_limit = write_limit};
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in bound;
    socklen_t bound_len = sizeof(bound);

    finished = 0;
    heard_len = 0;
    heard[0] = '\0';
    memset(inboxes, 0, sizeof(inboxes));
    inbox_count = 0;
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    assert_int_equal(sxe_conn_listen(loop, &listener, (struct sockaddr *)&any, sizeof(any), NULL,
                                     &upstream_handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&bound, &bound_len), 0);
    snprintf(address, sizeof(address), "127.0.0.1:%d", ntohs(bound.sin_port));
    assert_int_equal(sxe_http_client_create(&client, loop, address, &client_options), 0);
}

static void stop(void)
{
    sxe_http_client_destroy(client);
    sxe_loop_destroy(loop);
}

static void done(sxe_http_call_t *call, int err, const struct sxe_http_response_head *response,
                 const char *body, size_t body_len, void *arg)
{
    (void)call;
    (void)body;
    *(int *)arg = err == 0 ? response->status * 1000 + (int)body_len : err;
    finished++;
}

/* Fetches request on the client and turns the loop until it ends. @return its result. */
static int fetch(const struct sxe_http_client_request *request)
{
    int result = 0;

    assert_int_equal(sxe_http_client_fetch(client, request, done, &result, NULL), 0);
    sxe_test_run_until(loop, &finished, finished + 1);
    return result;
}

static char long_target[1200];

/* A POST with a target of 1199 bytes, a header and a body of 5; its pieces as they are written. */
static struct sxe_http_client_request long_request(const char *pieces[], size_t *count)
{
    memset(long_target, 'a', sizeof(long_target) - 1);
    long_target[0] = '/';
    long_target[sizeof(long_target) - 1] = '\0';
    const char *in_order[] = {"POST",
                              " ",
                              long_target,
                              " HTTP/1.1\r\nHost: ",
                              "upstream.test",
                              "\r\n",
                              "Content-Length: 5\r\n",
                              "X-A: 1\r\n",
                              "\r\n",
                              "hello"};
    memcpy(pieces, in_order, sizeof(in_order));
    *count = sizeof(in_order) / sizeof(in_order[0]);
    return (struct sxe_http_client_request){.method = "POST",
                                            .target = long_target,
                                            .headers = "X-A: 1\r\n",
                                            .body = "hello",
                                            .body_len = 5};
}

/* A target too long to format with the rest of the request line leaves in pieces, whole. */
static void test_a_long_target_arrives_whole(void **state)
{
    const char *pieces[10];
    char expected[4096] = "";
    size_t count;

    (void)state;
    start(0);
    struct sxe_http_client_request request = long_request(pieces, &count);
    for (size_t i = 0; i < count; i++) {
        strcat(expected, pieces[i]);
    }
    assert_int_equal(fetch(&request), 200 * 1000 + 2);
    assert_string_equal(heard, expected);
    stop();
}

/*
 * The head and body are gathered in one corked send, so a connection that may queue fewer bytes
 * than the whole request refuses the piece that would pass the limit: for each piece in turn, a
 * limit one byte short of its end. The call fails with -ENOBUFS, is counted failed, and the
 * upstream never sees a whole request. With room for all of it, it is sent.
 */
static void test_a_request_past_the_write_limit_fails_at_each_piece(void **state)
{
    const char *pieces[10];
    size_t count, written = 0;
    struct sxe_http_client_stats stats;

    (void)state;
    for (size_t i = 0;; i++) {
        struct sxe_http_client_request request = long_request(pieces, &count);
        size_t total = written + (i < count ? strlen(pieces[i]) : 0);
        start((uint32_t)(i < count ? total - 1 : total));
        int result = fetch(&request);
        sxe_http_client_stats(client, &stats);
        if (i == count) {
            assert_int_equal(result, 200 * 1000 + 2);
            assert_int_equal(heard_len, total);
            stop();
            break;
        }
        if (result != -ENOBUFS) {
            fail_msg("a limit of %zu bytes, one short of piece %zu's end: %d", total - 1, i,
                     result);
        }
        assert_int_equal(stats.failed, 1);
        assert_true(heard_len < total);
        written = total;
        stop();
    }
}

/*
 * A request too big for the loop's write_limit, sent on a pooled connection, is refused at once
 * with -ENOBUFS, and that connection is closed rather than reused with half a head in it: the
 * next request goes out whole on a new one.
 */
static void test_a_request_refused_on_a_pooled_connection_closes_it(void **state)
{
    struct sxe_http_client_request small = {.target = "/"};
    const char *pieces[10];
    size_t count;
    struct sxe_http_client_stats stats;
    int result = 0;

    (void)state;
    start(512);
    assert_int_equal(fetch(&small), 200 * 1000 + 2);
    struct sxe_http_client_request request = long_request(pieces, &count);
    assert_int_equal(sxe_http_client_fetch(client, &request, done, &result, NULL), -ENOBUFS);
    assert_int_equal(fetch(&small), 200 * 1000 + 2);
    assert_int_equal(inbox_count, 2);
    assert_string_equal(inboxes[1].text, "GET / HTTP/1.1\r\nHost: upstream.test\r\n\r\n");
    /* What the first connection got after its answer was cut short: a start of the request. */
    assert_int_equal(strncmp(inboxes[0].text + inboxes[0].answered, "POST ",
                             inboxes[0].len - inboxes[0].answered),
                     0);
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.connects, 2);
    assert_int_equal(stats.requests, 2);
    stop();
}

/*
 * A connection that cannot be opened fails its call with the system's error: at once when the
 * call is made, and through its callback when the call waited in the queue for a connection.
 */
static void test_a_connection_that_cannot_be_opened_fails_its_call(void **state)
{
    struct sxe_http_client_options one = client_options;
    struct sxe_http_client_request closing = {.target = "/close"}, small = {.target = "/"};
    int first = 0, queued = 0;

    (void)state;
    start(0);
    sxe__sys_fail(SXE_SYS_socket, 1, 1, EMFILE);
    assert_int_equal(sxe_http_client_fetch(client, &small, done, &first, NULL), -EMFILE);
    sxe_http_client_destroy(client);
    one.connections = 1;
    assert_int_equal(sxe_http_client_create(&client, loop, address, &one), 0);
    sxe__sys_fail(SXE_SYS_socket, 2, 1, EMFILE); /* the second connection: the queued call's */
    assert_int_equal(sxe_http_client_fetch(client, &closing, done, &first, NULL), 0);
    assert_int_equal(sxe_http_client_fetch(client, &small, done, &queued, NULL), 0);
    sxe_test_run_until(loop, &finished, 2);
    assert_int_equal(first, 200 * 1000 + 2);
    assert_int_equal(queued, -EMFILE);
    sxe__sys_reset();
    assert_int_equal(fetch(&small), 200 * 1000 + 2);
    stop();
}

/*
 * With every connection busy and the queue full, a call is refused at once with -ENOBUFS and
 * counted; the calls already taken are answered, in order.
 */
static void test_a_call_past_a_full_queue_is_refused(void **state)
{
    struct sxe_http_client_options small_queue = client_options;
    struct sxe_http_client_request request = {.target = "/"};
    struct sxe_http_client_stats stats;
    int first = 0, second = 0, third = 0;

    (void)state;
    start(0);
    sxe_http_client_destroy(client);
    small_queue.connections = 1;
    small_queue.queue = 1;
    assert_int_equal(sxe_http_client_create(&client, loop, address, &small_queue), 0);
    assert_int_equal(sxe_http_client_fetch(client, &request, done, &first, NULL), 0);
    assert_int_equal(sxe_http_client_fetch(client, &request, done, &second, NULL), 0);
    assert_int_equal(sxe_http_client_fetch(client, &request, done, &third, NULL), -ENOBUFS);
    sxe_test_run_until(loop, &finished, 2);
    assert_int_equal(first, 200 * 1000 + 2);
    assert_int_equal(second, 200 * 1000 + 2);
    assert_int_equal(third, 0);
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.refused, 1);
    assert_int_equal(stats.requests, 2);
    stop();
}

/* Puts the seam back, whatever a failed test left armed. */
static int reset(void **state)
{
    (void)state;
    sxe__sys_reset();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_long_target_arrives_whole),
        cmocka_unit_test(test_a_request_past_the_write_limit_fails_at_each_piece),
        cmocka_unit_test(test_a_request_refused_on_a_pooled_connection_closes_it),
        cmocka_unit_test_teardown(test_a_connection_that_cannot_be_opened_fails_its_call, reset),
        cmocka_unit_test(test_a_call_past_a_full_queue_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
