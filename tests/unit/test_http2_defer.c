/*
 * Held requests over HTTP/2 (h2c), through real sockets under fake time, with an nghttp2 client
 * session as the peer: answered later from a timer while other streams are answered at once,
 * a held request never answered (503 on its stream, the connection goes on), a stream reset under a
 * held request (its on_cancel, and no answer after), a connection closed under held requests, a
 * fiber route, an upgrade refused, a fiber that waits between reads of a streamed body, and the
 * log hook's version.
 */
#include <nghttp2/nghttp2.h>
#include <poll.h>

#include "http_defer_test.h"

#define STREAMS 8

/* What the client heard, per stream (by its id / 2). */
static struct heard {
    int status;
    char body[512];
    size_t body_len;
    bool closed;
    uint32_t error; /* its RST_STREAM's code, or 0 */
} heard[STREAMS];
static uint32_t goaway_code = UINT32_MAX;

static struct heard *heard_of(int32_t id)
{
    assert_true(id > 0 && id / 2 < STREAMS);
    return &heard[id / 2];
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t name_len, const uint8_t *value, size_t value_len, uint8_t flags,
                     void *user)
{
    (void)session, (void)flags, (void)user, (void)value_len;
    if (name_len == 7 && memcmp(name, ":status", 7) == 0) {
        heard_of(frame->hd.stream_id)->status = atoi((const char *)value);
    }
    return 0;
}

static int on_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                   size_t len, void *user)
{
    struct heard *one = heard_of(id);

    (void)session, (void)flags, (void)user;
    assert_true(one->body_len + len < sizeof(one->body));
    memcpy(one->body + one->body_len, data, len);
    one->body_len += len;
    return 0;
}

static int on_close(nghttp2_session *session, int32_t id, uint32_t error, void *user)
{
    (void)session, (void)user;
    heard_of(id)->closed = true;
    heard_of(id)->error = error;
    return 0;
}

static int on_frame(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
    (void)session, (void)user;
    if (frame->hd.type == NGHTTP2_GOAWAY) {
        goaway_code = frame->goaway.error_code;
    }
    return 0;
}

static nghttp2_session *session;
static int fd;

/* Sends what the client session has queued. */
static void send_all(void)
{
    const uint8_t *data;
    ssize_t len;

    while ((len = nghttp2_session_mem_send(session, &data)) > 0) {
        assert_int_equal(write(fd, data, (size_t)len), len);
    }
}

/* Turns the server's loop (fake time moved on by ns), then goes on turning it and reading what it
 * sent for 12 rounds: a loaded machine's loopback may hand bytes over a few milliseconds late. */
static void exchange(uint64_t ns)
{
    uint8_t buf[16384];
    ssize_t len;

    send_all();
    pump(ns);
    for (int round = 0; round < 12; round++) {
        while (poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, 2) == 1 &&
               (len = read(fd, buf, sizeof(buf))) > 0) {
            assert_int_equal(nghttp2_session_mem_recv(session, buf, (size_t)len), len);
        }
        send_all();
        pump(0);
    }
}

static int32_t get(const char *path)
{
    nghttp2_nv fields[] = {
        {(uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0},
        {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
        {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
        {(uint8_t *)":authority", (uint8_t *)"x", 10, 1, 0},
        {(uint8_t *)"x-tag", (uint8_t *)"h2", 5, 2, 0},
    };
    int32_t id = nghttp2_submit_request(session, NULL, fields, 5, NULL, NULL);
    assert_true(id > 0);
    return id;
}

static int h2_setup(void **state)
{
    nghttp2_session_callbacks *callbacks;

    setup(state);
    memset(heard, 0, sizeof(heard));
    goaway_code = UINT32_MAX;
    fd = client();
    assert_int_equal(nghttp2_session_callbacks_new(&callbacks), 0);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_close);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame);
    assert_int_equal(nghttp2_session_client_new(&session, callbacks, NULL), 0);
    nghttp2_session_callbacks_del(callbacks);
    assert_int_equal(nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, NULL, 0), 0);
    return 0;
}

static int h2_teardown(void **state)
{
    nghttp2_session_del(session);
    if (fd >= 0) {
        close(fd);
    }
    return teardown(state);
}

static void test_held_and_direct_streams_on_one_connection(void **state)
{
    (void)state;
    int32_t held = get("/later/1"), direct = get("/");
    exchange(0);
    assert_int_equal(heard_of(direct)->status, 200);
    assert_true(heard_of(direct)->closed);
    assert_int_equal(heard_of(held)->status, 0); /* still held */
    struct sxe_http_defer_stats stats;
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 1);

    exchange(10 * SXE_NS_PER_MSEC); /* its timer answers it */
    exchange(0);
    assert_int_equal(heard_of(held)->status, 200);
    assert_true(heard_of(held)->closed);
    assert_int_equal(heard_of(held)->error, NGHTTP2_NO_ERROR);
    assert_string_equal(heard_of(held)->body,
                        "later /later/1 tag=h2 user=u1 body= path=/later/1\n");
    assert_int_equal(pendings[0].rc, 0);
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 0);
    assert_non_null(strstr(log_lines, "/ 200 6\n"));
    assert_non_null(strstr(log_lines, "/later/1 200 "));
}

static void test_a_held_stream_never_answered_gets_503_and_the_connection_goes_on(void **state)
{
    (void)state;
    int32_t never = get("/never");
    exchange(0);
    exchange(SXE_NS_PER_SEC + 1); /* past the response timeout */
    exchange(0);
    assert_int_equal(heard_of(never)->status, 503);
    assert_true(heard_of(never)->closed);
    assert_int_equal(cancels, 1); /* its stream's end cancels the hold: on_cancel is told */
    struct sxe_http_defer_stats stats;
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.timed_out, 1);
    assert_int_equal(stats.held, 0);
    int32_t after = get("/");
    exchange(0);
    assert_int_equal(heard_of(after)->status, 200);
    assert_int_equal(goaway_code, UINT32_MAX);
}

static void test_a_reset_stream_cancels_its_held_request_alone(void **state)
{
    (void)state;
    int32_t cancelled = get("/cancel/1"), other = get("/later/2");
    exchange(0);
    assert_int_equal(
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, cancelled, NGHTTP2_CANCEL), 0);
    exchange(0);
    assert_int_equal(cancels, 1);
    assert_int_equal(cancel_rc, -ECANCELED); /* an answer from on_cancel is refused */
    exchange(10 * SXE_NS_PER_MSEC); /* the other's timer answers it; the reset one's was stopped */
    exchange(0);
    assert_int_equal(heard_of(other)->status, 200);
    assert_int_equal(heard_of(cancelled)->status, 0);
    struct sxe_http_defer_stats stats;
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.cancelled, 1);
    assert_int_equal(stats.held, 0);
}

static void test_a_closed_connection_cancels_its_held_streams(void **state)
{
    (void)state;
    get("/cancel/1");
    get("/never");
    exchange(0);
    struct sxe_http_defer_stats stats;
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 2);
    close(fd);
    fd = -1;
    pump(0);
    assert_int_equal(cancels, 2);
    sxe_http_server_defer_stats(server, &stats);
    assert_int_equal(stats.held, 0);
    assert_int_equal(stats.cancelled, 2);
}

static void test_a_fiber_route_and_an_upgrade_over_h2(void **state)
{
    (void)state;
    int32_t fiber = get("/fiber"), upgrade = get("/switch");
    exchange(0);
    exchange(10 * SXE_NS_PER_MSEC);
    exchange(0);
    assert_int_equal(heard_of(fiber)->status, 200);
    assert_string_equal(heard_of(fiber)->body, "from a fiber\n");
    assert_int_equal(fiber_rc, 0);
    assert_int_equal(switch_rc, -EPROTONOSUPPORT); /* a stream cannot switch protocols */
    sxe_http_server_defer_stats(server, &(struct sxe_http_defer_stats){0});
    assert_int_equal(heard_of(upgrade)->status, 0); /* held still, until its timeout */
    exchange(SXE_NS_PER_SEC + 1);
    exchange(0);
    assert_int_equal(heard_of(upgrade)->status, 503);
}

/* The body PUT sends: 10,000 bytes, one read of 1,000 after each 5 ms wait. */
static size_t put_left;

static ssize_t put_body(nghttp2_session *client, int32_t id, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *source, void *user)
{
    size_t part = length < put_left ? length : put_left;

    (void)client, (void)id, (void)source, (void)user;
    memset(buf, 'p', part);
    put_left -= part;
    if (put_left == 0) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return (ssize_t)part;
}

/* A fiber that waits between reads of a streamed body finds the bytes kept meanwhile at once, and
 * goes on (it once woke itself, which failed, and waited for ever). */
static void test_a_fiber_that_waits_between_reads_of_a_streamed_body(void **state)
{
    nghttp2_nv fields[] = {
        {(uint8_t *)":method", (uint8_t *)"PUT", 7, 3, 0},
        {(uint8_t *)":path", (uint8_t *)"/slow", 5, 5, 0},
        {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
        {(uint8_t *)":authority", (uint8_t *)"x", 10, 1, 0},
    };
    nghttp2_data_provider body = {.read_callback = put_body};

    (void)state;
    put_left = 10000;
    int32_t id = nghttp2_submit_request(session, NULL, fields, 4, &body, NULL);
    assert_true(id > 0);
    for (int i = 0; i < 60 && heard_of(id)->status == 0; i++) {
        exchange(10 * SXE_NS_PER_MSEC);
    }
    assert_int_equal(heard_of(id)->status, 200);
    assert_string_equal(heard_of(id)->body, "read 10000\n");
    assert_int_equal(fiber_rc, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_held_and_direct_streams_on_one_connection, h2_setup,
                                        h2_teardown),
        cmocka_unit_test_setup_teardown(
            test_a_held_stream_never_answered_gets_503_and_the_connection_goes_on, h2_setup,
            h2_teardown),
        cmocka_unit_test_setup_teardown(test_a_reset_stream_cancels_its_held_request_alone,
                                        h2_setup, h2_teardown),
        cmocka_unit_test_setup_teardown(test_a_closed_connection_cancels_its_held_streams, h2_setup,
                                        h2_teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_route_and_an_upgrade_over_h2, h2_setup,
                                        h2_teardown),
        cmocka_unit_test_setup_teardown(test_a_fiber_that_waits_between_reads_of_a_streamed_body,
                                        h2_setup, h2_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
