/*
 * The HTTP client's streamed request bodies (request.body_streamed, sxe_http_call_write()), against
 * real sockets on one loop: an sxe HTTP server whose streamed route "/sum" reads the body in pieces
 * and answers its length and checksum, whose "/refuse" answers 413 before reading it, and a
 * scripted upstream that reads nothing until told (backpressure) and then answers the byte count it
 * got.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "sxe/clock.h"
#include "sxe/conn.h"
#include "sxe/http.h"
#include "sxe/http_client.h"
#include "http/client/client.h"
#include "sxe_test.h"

#define PIECE         (16 * 1024)
#define SCRIPTED_BODY (32u << 20) /* more than the kernel's socket buffers hold */

static sxe_loop_t *loop;
static sxe_http_server_t *server;
static sxe_conn_t *listener, *holding; /* the scripted upstream, and its connection */
static bool hold;                      /* the scripted upstream reads nothing */
static bool scripted_head;             /* it has read the request's head */
static size_t scripted_got;            /* body bytes it has read */
static char server_address[64], scripted_address[64];
static sxe_http_client_t *client;
static int finished;

/* What the server's /sum route read of a body. */
static struct {
    uint64_t len, sum;
} got;

/* One upload: what to send, how it went, how it ended. */
struct upload {
    size_t total, sent;
    size_t stop_at;    /* the writer pauses here until the test goes on (0: never) */
    bool empty_writes; /* the writer writes nothing (len 0) before each piece, too */
    int fulls, writables;
    bool ended;
    int err, status, order;
    char body[64];
    sxe_http_call_t *call;
};

static uint8_t byte_at(size_t offset)
{
    return (uint8_t)(offset * 7 + offset / 4099);
}

static uint64_t weigh(uint64_t sum, const char *data, size_t len, uint64_t offset)
{
    for (size_t i = 0; i < len; i++) {
        sum += (uint8_t)data[i] * ((offset + i) % 251 + 1);
    }
    return sum;
}

static void summed(sxe_http_t *held, const char *data, size_t len, bool done, void *arg)
{
    char answer[64];

    (void)arg;
    got.sum = weigh(got.sum, data, len, got.len);
    got.len += len;
    if (done) {
        int n = snprintf(answer, sizeof(answer), "%llu %llu", (unsigned long long)got.len,
                         (unsigned long long)got.sum);
        sxe_http_respond(held, 200, "text/plain", answer, (size_t)n);
    }
}

static void sum_route(sxe_http_t *http, void *arg)
{
    sxe_http_t *held = http;

    (void)arg;
    assert_int_equal(sxe_http_defer(http, NULL, NULL), 0);
    memset(&got, 0, sizeof(got));
    assert_int_equal(sxe_http_body_stream(held, summed, NULL), 0);
}

static void refuse_route(sxe_http_t *http, void *arg)
{
    (void)arg;
    sxe_http_respond(http, 413, "text/plain", "too big\n", 8);
}

/* The scripted upstream: skips the head, counts the body, answers when it has all come. */
static size_t script(sxe_conn_t *conn, const char *data, size_t len)
{
    const char *end;

    holding = conn;
    if (hold) {
        (void)sxe_conn_pause(conn);
        return 0;
    }
    if (!scripted_head) {
        if ((end = memmem(data, len, "\r\n\r\n", 4)) == NULL) {
            return 0;
        }
        scripted_head = true;
        scripted_got += len - (size_t)(end + 4 - data);
    } else {
        scripted_got += len;
    }
    if (scripted_got == SCRIPTED_BODY) {
        (void)sxe_conn_write(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 40);
    }
    return len;
}

static const struct sxe_conn_handlers script_handlers = {.on_read = script};

static int setup(void **state)
{
    struct sxe_loop_options options = {.connections = 64, .timers = 128};
    struct sxe_http_server_options server_options = {.deferred = 8};
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in address;
    socklen_t len = sizeof(address);

    (void)state;
    finished = 0;
    hold = scripted_head = false;
    scripted_got = 0;
    holding = NULL;
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    assert_int_equal(sxe_http_server_create(&server, loop, &server_options), 0);
    assert_int_equal(
        sxe_http_server_route(server, NULL, "/sum", SXE_HTTP_ROUTE_STREAM, sum_route, NULL), 0);
    assert_int_equal(
        sxe_http_server_route(server, NULL, "/refuse", SXE_HTTP_ROUTE_STREAM, refuse_route, NULL),
        0);
    assert_int_equal(sxe_http_server_listen(server, "127.0.0.1:0"), 0);
    snprintf(server_address, sizeof(server_address), "127.0.0.1:%d", sxe_http_server_port(server));
    assert_int_equal(sxe_conn_listen(loop, &listener, (struct sockaddr *)&any, sizeof(any), NULL,
                                     &script_handlers, NULL),
                     0);
    assert_int_equal(sxe_conn_local(listener, (struct sockaddr *)&address, &len), 0);
    snprintf(scripted_address, sizeof(scripted_address), "127.0.0.1:%d", ntohs(address.sin_port));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_http_client_destroy(client);
    client = NULL;
    sxe_http_server_destroy(server);
    sxe_loop_destroy(loop);
    return 0;
}

static void make_client(const char *address, uint64_t timeout)
{
    struct sxe_http_client_options options = {.connections = 4, .timeout = timeout};
    assert_int_equal(sxe_http_client_create(&client, loop, address, &options), 0);
}

/* Turns the loop for ms milliseconds, whatever happens. */
static void run_for(unsigned ms)
{
    uint64_t until = sxe_clock_mono_ns() + ms * SXE_NS_PER_MSEC;

    while (sxe_clock_mono_ns() < until) {
        assert_true(sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) >= 0);
    }
}

/* Writes the upload's next pieces until the upstream is full, the writer stops, or all is sent. */
static void pump(struct upload *upload)
{
    char piece[PIECE];

    while (upload->sent < upload->total &&
           (upload->stop_at == 0 || upload->sent != upload->stop_at)) {
        size_t end = upload->stop_at != 0 ? upload->stop_at : upload->total;
        size_t len = end - upload->sent < PIECE ? end - upload->sent : PIECE;
        for (size_t i = 0; i < len; i++) {
            piece[i] = (char)byte_at(upload->sent + i);
        }
        if (upload->empty_writes) {
            assert_int_equal(sxe_http_call_write(upload->call, piece, 0), 0);
        }
        assert_int_equal(sxe_http_call_write(upload->call, piece, len), 0);
        upload->sent += len;
        if (sxe_http_call_backed_up(upload->call)) {
            upload->fulls++;
            return;
        }
    }
    if (upload->sent == upload->total && !upload->ended) {
        upload->ended = true;
        assert_int_equal(sxe_http_call_finish(upload->call), 0);
    }
}

static void on_writable(sxe_http_call_t *call, void *arg)
{
    struct upload *upload = arg;

    assert_false(sxe_http_call_backed_up(call));
    upload->writables++;
    if (!upload->ended) {
        pump(upload);
    }
}

static void on_head(sxe_http_call_t *call, const struct sxe_http_response_head *response, void *arg)
{
    struct upload *upload = arg;

    (void)call;
    upload->status = response->status;
}

static void on_body(sxe_http_call_t *call, const char *data, size_t len, void *arg)
{
    struct upload *upload = arg;
    size_t have = strlen(upload->body);

    (void)call;
    snprintf(upload->body + have, sizeof(upload->body) - have, "%.*s", (int)len, data);
}

static void on_done(sxe_http_call_t *call, int err, void *arg)
{
    struct upload *upload = arg;

    (void)call;
    upload->err = err;
    upload->order = ++finished;
    upload->call = NULL;
}

static const struct sxe_http_client_handlers handlers = {
    .on_head = on_head, .on_body = on_body, .on_done = on_done, .on_writable = on_writable};

static void start(struct upload *upload, const char *target, size_t total, bool chunked)
{
    struct sxe_http_client_request request = {.method = "POST",
                                              .target = target,
                                              .body_streamed = true,
                                              .body_len = chunked ? SXE_HTTP_BODY_UNKNOWN : total};
    upload->total = total;
    assert_int_equal(sxe_http_client_stream(client, &request, &handlers, upload, &upload->call), 0);
}

static void expected_sum(size_t total, char *out, size_t size)
{
    uint64_t sum = 0;

    for (size_t at = 0; at < total; at++) {
        char byte = (char)byte_at(at);
        sum = weigh(sum, &byte, 1, at);
    }
    snprintf(out, size, "%zu %llu", total, (unsigned long long)sum);
}

static void test_a_body_of_any_size_goes_in_pieces_with_a_length_or_chunked(void **state)
{
    struct upload sized = {0}, chunked = {0}, empty = {0}, nothing = {.empty_writes = true};
    char want[64];

    (void)state;
    make_client(server_address, 5 * SXE_NS_PER_SEC);
    start(&sized, "/sum", 3 * 1024 * 1024 + 17, false);
    sxe_test_run_until(loop, &finished, 1);
    expected_sum(sized.total, want, sizeof(want));
    assert_int_equal(sized.err, 0);
    assert_int_equal(sized.status, 200);
    assert_string_equal(sized.body, want);
    assert_true(sized.writables >= 1);

    start(&chunked, "/sum", 2 * 1024 * 1024 + 5, true);
    sxe_test_run_until(loop, &finished, 2);
    expected_sum(chunked.total, want, sizeof(want));
    assert_int_equal(chunked.err, 0);
    assert_string_equal(chunked.body, want);

    start(&empty, "/sum", 0, true); /* an empty chunked body: the last chunk alone */
    sxe_test_run_until(loop, &finished, 3);
    assert_int_equal(empty.err, 0);
    assert_string_equal(empty.body, "0 0");

    /* Writes of nothing write nothing: no empty chunk, which would end a chunked body early. */
    start(&nothing, "/sum", 100 * 1000, true);
    sxe_test_run_until(loop, &finished, 4);
    expected_sum(nothing.total, want, sizeof(want));
    assert_int_equal(nothing.err, 0);
    assert_string_equal(nothing.body, want);

    struct sxe_http_client_stats stats;
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.connects, 1); /* each whole body left the connection reusable */
    assert_int_equal(stats.requests, 4);
}

/* Runs the upload against an upstream that reads nothing: the writer goes on as the kernel's
 * buffers take its queue, until they are full and it writes no more. */
static void fill_to_the_kernel(struct upload *upload)
{
    size_t sent;

    sxe_test_run_until(loop, &upload->fulls, 1);
    do {
        sent = upload->sent;
        run_for(200);
    } while (upload->sent != sent);
}

static void test_a_slow_upstream_holds_the_writer_back_and_a_silent_one_times_out(void **state)
{
    struct upload upload = {0};

    (void)state;
    make_client(scripted_address, 2 * SXE_NS_PER_SEC);
    hold = true;
    start(&upload, "/", SCRIPTED_BODY, false);
    fill_to_the_kernel(&upload);
    assert_true(upload.sent < upload.total);
    assert_int_equal(upload.writables, upload.fulls); /* it waits for the last "full" to drain */
    hold = false; /* the upstream reads again: the writer goes on, the answer comes */
    assert_non_null(holding);
    (void)sxe_conn_resume(holding);
    sxe_test_run_until(loop, &finished, 1);
    assert_int_equal(upload.err, 0);
    assert_string_equal(upload.body, "ok");
    assert_int_equal(upload.sent, upload.total);
    assert_true(upload.writables > 1);

    struct upload silent = {0}; /* an upstream that stops reading for longer than the timeout */
    sxe_http_client_destroy(client);
    make_client(scripted_address, 200 * SXE_NS_PER_MSEC);
    hold = true;
    scripted_head = false;
    scripted_got = 0;
    start(&silent, "/", SCRIPTED_BODY, false);
    sxe_test_run_until(loop, &finished, 2);
    assert_int_equal(silent.err, -ETIMEDOUT);
    assert_true(silent.fulls >= 1);
}

static void test_a_slow_writer_is_not_a_silent_upstream(void **state)
{
    struct upload upload = {0};
    char want[64];

    (void)state;
    make_client(server_address, 150 * SXE_NS_PER_MSEC);
    upload.stop_at = PIECE; /* one piece, then the writer waits longer than the timeout */
    start(&upload, "/sum", 4 * PIECE, false);
    run_for(400);
    assert_int_equal(finished, 0);
    assert_int_equal(upload.sent, PIECE);
    upload.stop_at = 0;
    pump(&upload);
    sxe_test_run_until(loop, &finished, 1);
    expected_sum(upload.total, want, sizeof(want));
    assert_int_equal(upload.err, 0);
    assert_string_equal(upload.body, want);
}

static void test_an_early_answer_ends_the_call_and_the_connection(void **state)
{
    struct upload upload = {0}, after = {0};
    char want[64];

    (void)state;
    make_client(server_address, 5 * SXE_NS_PER_SEC);
    upload.stop_at = 2 * PIECE; /* the rest would be written after the answer: it never is */
    start(&upload, "/refuse", 64u << 20, false);
    sxe_test_run_until(loop, &finished, 1);
    assert_int_equal(upload.err, 0);
    assert_int_equal(upload.status, 413);
    assert_null(upload.call);

    start(&after, "/sum", 100, false); /* a new connection: the first could not be reused */
    sxe_test_run_until(loop, &finished, 2);
    expected_sum(after.total, want, sizeof(want));
    assert_string_equal(after.body, want);
    struct sxe_http_client_stats stats;
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.connects, 2);
}

/* A fetch to warm the pool: its connection is reused by the next call. */
static void warmed(sxe_http_call_t *call, int err, const struct sxe_http_response_head *response,
                   const char *body, size_t body_len, void *arg)
{
    (void)call, (void)response, (void)body, (void)body_len, (void)arg;
    assert_int_equal(err, 0);
    finished++;
}

static void test_a_call_not_yet_writable_is_sent_again_on_a_dead_pooled_connection(void **state)
{
    struct upload upload = {0};
    char want[64];

    (void)state;
    make_client(server_address, 5 * SXE_NS_PER_SEC);
    assert_int_equal(sxe_http_client_fetch(client,
                                           &(struct sxe_http_client_request){.target = "/refuse"},
                                           warmed, NULL, NULL),
                     0);
    sxe_test_run_until(loop, &finished, 1);
    start(&upload, "/sum", 1000, false); /* on the pooled connection, which dies before a write */
    assert_non_null(client->ups[0].conn);
    sxe_conn_close(client->ups[0].conn);
    sxe_test_run_until(loop, &finished, 2);
    expected_sum(upload.total, want, sizeof(want));
    assert_int_equal(upload.err, 0);
    assert_string_equal(upload.body, want);
    struct sxe_http_client_stats stats;
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.retried, 1);
    assert_int_equal(stats.connects, 2);
}

static void test_a_writer_that_ignores_full_is_refused_and_its_call_cancelled(void **state)
{
    struct upload upload = {0};
    static char piece[PIECE];
    int rc;

    (void)state;
    make_client(scripted_address, 5 * SXE_NS_PER_SEC);
    hold = true;
    upload.stop_at = 1;
    start(&upload, "/", SCRIPTED_BODY, false);
    sxe_test_run_until(loop, &upload.writables, 1);
    do { /* past high_water, and on past the loop's write_limit */
        rc = sxe_http_call_write(upload.call, piece, sizeof(piece));
    } while (rc >= 0);
    assert_int_equal(rc, -ENOBUFS);
    run_for(100);
    assert_int_equal(finished, 0); /* cancelled: no callback of it follows */
    struct sxe_http_client_stats stats;
    sxe_http_client_stats(client, &stats);
    assert_int_equal(stats.open, 0);
}

/* A chunked body's end written while the upstream is full: the caller owes nothing more after it,
 * so the call is not backed up, whatever the last chunk left in the connection's queue. */
static void test_the_end_of_a_body_leaves_the_writer_owing_nothing(void **state)
{
    struct upload upload = {0};

    (void)state;
    make_client(scripted_address, 5 * SXE_NS_PER_SEC);
    hold = true;
    start(&upload, "/", SCRIPTED_BODY, true);
    fill_to_the_kernel(&upload);
    static const char piece[4096];
    do { /* a piece more, until the queue is past high_water (each write asks again) */
        assert_int_equal(sxe_http_call_write(upload.call, piece, sizeof(piece)), 0);
    } while (!sxe_http_call_backed_up(upload.call));
    int writables = upload.writables;
    upload.ended = true;
    assert_int_equal(sxe_http_call_finish(upload.call), 0);
    assert_false(sxe_http_call_backed_up(upload.call));
    hold = false; /* the upstream reads again: the queue drains, and no "writable" follows */
    (void)sxe_conn_resume(holding);
    run_for(200);
    assert_int_equal(upload.writables, writables);
    sxe_http_call_cancel(upload.call);
    assert_int_equal(finished, 0);
}

static void write_too_soon(void *arg)
{
    struct upload *upload = arg;

    (void)sxe_http_call_write(upload->call, "x", 1);
}

/* Writes 10 bytes where the length leaves 5: an assertion, in a child. */
static void write_past_the_length(void *arg)
{
    struct upload *upload = arg;

    upload->stop_at = 5;
    sxe_test_run_until(loop, &upload->writables, 1);
    (void)sxe_http_call_write(upload->call, "0123456789", 10);
}

static void test_invalid_use_is_refused(void **state)
{
    struct upload upload = {0};
    struct sxe_http_client_request with_body = {
        .method = "POST", .target = "/sum", .body_streamed = true, .body = "x", .body_len = 1};
    struct sxe_http_client_handlers no_writable = handlers;

    (void)state;
    no_writable.on_writable = NULL;
    make_client(server_address, 5 * SXE_NS_PER_SEC);
    start(&upload, "/sum", 10, false);
#ifdef SXE_DEBUG
    const char *const expected[] = {"call->writable", NULL};
    sxe_test_expect_abort(write_too_soon, &upload, expected);
    const char *const past[] = {"len <= call->body_left", NULL};
    sxe_test_expect_abort(write_past_the_length, &upload, past);
    sxe_http_call_cancel(upload.call); /* upload is this function's: no callback may outlive it */
    (void)with_body, (void)no_writable;
#else
    (void)write_too_soon, (void)write_past_the_length;
    assert_int_equal(sxe_http_call_write(upload.call, "x", 1), -EINVAL); /* before on_writable */
    assert_int_equal(sxe_http_client_stream(client, &with_body, &handlers, &upload, NULL), -EINVAL);
    with_body.body = NULL;
    assert_int_equal(sxe_http_client_stream(client, &with_body, &no_writable, &upload, NULL),
                     -EINVAL);
    assert_int_equal(sxe_http_client_fetch(client, &with_body, warmed, NULL, NULL), -EINVAL);
    upload.stop_at = 5; /* a body with a length: more than it, or ending short, is refused */
    sxe_test_run_until(loop, &upload.writables, 1);
    assert_int_equal(upload.sent, 5);
    assert_int_equal(sxe_http_call_write(upload.call, "0123456789", 10), -EINVAL);
    assert_int_equal(sxe_http_call_finish(upload.call), -EINVAL);
    upload.stop_at = 0;
    pump(&upload);
    sxe_test_run_until(loop, &finished, 1);
    assert_int_equal(upload.err, 0);
    assert_int_equal(sxe_http_call_write(NULL, "x", 1), -EINVAL);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_a_body_of_any_size_goes_in_pieces_with_a_length_or_chunked, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_slow_upstream_holds_the_writer_back_and_a_silent_one_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_slow_writer_is_not_a_silent_upstream, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_an_early_answer_ends_the_call_and_the_connection,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_call_not_yet_writable_is_sent_again_on_a_dead_pooled_connection, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_a_writer_that_ignores_full_is_refused_and_its_call_cancelled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_end_of_a_body_leaves_the_writer_owing_nothing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_use_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
