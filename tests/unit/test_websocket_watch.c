/*
 * Messages under way (src/websocket/watch.c), on the fake clock: a message that stalls is closed
 * 1008 at message_timeout whatever keeps the socket alive meanwhile (pings between fragments, a
 * byte at a time); one in a large buffer that comes slower than message_rate is closed sooner,
 * and its buffer let go; messages that keep coming whole are never closed, however long the
 * stream of them lasts.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "websocket_test.h"

#define SECOND SXE_NS_PER_SEC

static const struct sxe_ws_options three_seconds = {.message_timeout = 3 * SECOND,
                                                    .message_rate = 50000};

/* Reads frames until the close; asserts its code. */
static void expect_close(int fd, unsigned code)
{
    uint8_t payload[128];
    size_t len;
    int opcode;

    while ((opcode = read_frame(fd, payload, sizeof(payload), &len)) == SXE__WS_PONG) {
    }
    assert_int_equal(opcode, SXE__WS_CLOSE);
    assert_int_equal(payload[0] << 8 | payload[1], code);
    expect_end(fd);
}

/* A socket whose small sends each leave at once: Nagle's algorithm would hold one back until the
 * server's delayed ACK, in real time, while the fake clock runs on. */
static int open_eager_socket(void)
{
    int fd = open_socket(NULL, 0), on = 1;
    assert_int_equal(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)), 0);
    return fd;
}

static uint64_t slow_messages(void)
{
    struct sxe_ws_server_stats stats;
    sxe_ws_server_stats(server, &stats);
    return stats.slow_messages;
}

static void test_pings_between_fragments_do_not_keep_a_stalled_message(void **state)
{
    uint8_t payload[128];
    size_t len;

    (void)state;
    start(&three_seconds);
    int fd = open_eager_socket();
    send_frame(fd, false, SXE_WS_TEXT, "ab", 2);
    pump(0);
    for (int i = 0; i < 5; i++) { /* 2.5 s of pings, each answered: the socket is alive */
        pump(SECOND / 2);
        send_frame(fd, true, SXE__WS_PING, "p", 1);
        pump(0);
        assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), SXE__WS_PONG);
    }
    assert_int_equal(seen.closes, 0);
    pump(SECOND / 2); /* 3 s since the message began */
    expect_close(fd, SXE_WS_CLOSE_POLICY);
    assert_int_equal(seen.closes, 1);
    assert_int_equal(seen.close_code, SXE_WS_CLOSE_POLICY);
    assert_int_equal(seen.messages, 0);
    assert_int_equal(slow_messages(), 1);
    close(fd);
}

static void test_a_frame_a_byte_at_a_time_is_closed_in_time(void **state)
{
    uint8_t frame[256];

    (void)state;
    start(&three_seconds);
    int fd = open_eager_socket();
    assert_int_equal(client_frame(frame, true, SXE_WS_TEXT, "!a short message", 16), 22);
    for (size_t i = 0; i < 6; i++) { /* a byte every half second: life to the idle timeout */
        assert_int_equal(send(fd, frame + i, 1, 0), 1);
        pump(SECOND / 2);
    }
    pump(SECOND / 2);
    expect_close(fd, SXE_WS_CLOSE_POLICY); /* 3 s after the first byte */
    assert_int_equal(seen.messages, 0);
    close(fd);
}

static void test_tiny_fragments_are_no_progress(void **state)
{
    (void)state;
    start(&three_seconds);
    int fd = open_eager_socket();
    send_frame(fd, false, SXE_WS_TEXT, "!", 1);
    for (int i = 0; i < 5; i++) { /* each fragment whole, the message never */
        pump(SECOND / 2);
        send_frame(fd, false, SXE__WS_CONTINUATION, "x", 1);
    }
    pump(SECOND); /* 3 to 4 s after it began: the deadline is checked once a second */
    expect_close(fd, SXE_WS_CLOSE_POLICY);
    close(fd);
}

static void test_a_stream_of_whole_messages_is_never_too_slow(void **state)
{
    uint8_t frames[2048];
    size_t len = 0;

    (void)state;
    start(&three_seconds);
    int fd = open_eager_socket();
    for (int i = 0; i < 20; i++) {
        len += client_frame(frames + len, true, SXE_WS_TEXT, "!message", 8);
    }
    /* Each send ends in the middle of a message, and finishes the one before: 10 s of it. */
    size_t step = len / 20 - 1, at = 0;
    for (int i = 0; i < 20; i++) {
        size_t piece = i == 19 ? len - at : step;
        if (send(fd, frames + at, piece, MSG_NOSIGNAL) != (ssize_t)piece) {
            fail_msg("closed at %d: %d %s, %d messages", i, seen.close_code, seen.close_reason,
                     seen.messages);
        }
        at += piece;
        pump(SECOND / 2);
    }
    pump(0);
    assert_int_equal(seen.messages, 20);
    assert_int_equal(seen.closes, 0);
    assert_int_equal(slow_messages(), 0);
    close(fd);
}

/* Sends len bytes of data, however the socket takes them, turning the loop meanwhile, until
 * they are all sent or the server has closed. */
static void send_all(int fd, const uint8_t *data, size_t len)
{
    for (size_t sent = 0; sent < len; pump(0)) {
        ssize_t put = send(fd, data + sent, len - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (put < 0 && errno != EAGAIN) {
            return;
        }
        sent += put > 0 ? (size_t)put : 0;
    }
}

/* The payload of a binary message of len bytes not echoed ('!' first), after its head is sent:
 * the caller sends the payload as it likes. */
static const uint8_t *large_message_begun(int fd, size_t len)
{
    static uint8_t payload[250000];
    static const uint8_t mask[4] = {0, 0, 0, 0};
    uint8_t frame[SXE__WS_HEAD_MAX];

    assert_true(len <= sizeof(payload));
    payload[0] = '!';
    size_t head = sxe__ws_frame_encode(frame, true, SXE_WS_BINARY, len, mask);
    assert_int_equal(send(fd, frame, head, 0), (ssize_t)head);
    return payload;
}

static void test_a_large_message_must_keep_its_rate(void **state)
{
    struct sxe_loop_stats stats;

    (void)state;
    start(&three_seconds);
    sxe_loop_t *loop = sxe_http_server_loop(http);
    int fd = open_eager_socket();
    const uint8_t *big = large_message_begun(fd, 200000);
    send_all(fd, big, 100000); /* past the ordinary buffer: a large one holds it */
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.large_buffers_in_use, 1);
    for (int i = 0; i < 8; i++) { /* then 1 KB a half second: 2 KB/s, under the 50 KB/s asked */
        pump(SECOND / 2);
        send_all(fd, big + 100000 + 1000 * i, 1000);
    }
    expect_close(fd, SXE_WS_CLOSE_POLICY); /* judged over its first three seconds and more */
    assert_int_equal(slow_messages(), 1);
    sxe_loop_stats(loop, &stats);
    assert_int_equal(stats.large_buffers_in_use, 0); /* let go for the next */
    close(fd);
}

static void test_a_large_message_at_its_rate_arrives(void **state)
{
    (void)state;
    start(&three_seconds);
    int fd = open_eager_socket();
    const uint8_t *big = large_message_begun(fd, 200000);
    for (size_t at = 0; at < 200000; at += 40000) { /* 80 KB/s: over the 50 KB/s asked */
        send_all(fd, big + at, 40000);
        pump(SECOND / 2);
    }
    pump(0);
    assert_int_equal(seen.messages, 1);
    assert_int_equal(seen.last_len, 255);
    assert_int_equal(seen.closes, 0);
    close(fd);
}

/* A pause of two and a half seconds between two bursts is not a stall: the rate is judged over
 * three seconds and more. */
static void test_a_pause_between_bursts_is_not_a_stall(void **state)
{
    static const struct sxe_ws_options options = {.message_rate = 20000};

    (void)state;
    start(&options);
    int fd = open_eager_socket();
    const uint8_t *big = large_message_begun(fd, 250000);
    send_all(fd, big, 100000);
    pump(SECOND / 2);
    pump(SECOND);
    pump(SECOND); /* 2.5 s without a byte */
    send_all(fd, big + 100000, 250000 - 100000);
    pump(0);
    assert_int_equal(seen.messages, 1);
    assert_int_equal(seen.closes, 0);
    close(fd);
}

/* Sockets leave the watch however they end: the program's close, the peer's going away. The one
 * left is still closed in time, and the lists stay whole (ASan and the table's checks see to it).
 */
static void test_sockets_that_close_with_a_message_under_way(void **state)
{
    (void)state;
    start(&three_seconds);
    int closed_by_program = open_eager_socket(), gone = open_eager_socket();
    int left = open_eager_socket();
    send_frame(closed_by_program, false, SXE_WS_TEXT, "a", 1);
    send_frame(gone, false, SXE_WS_TEXT, "b", 1);
    send_frame(left, false, SXE_WS_TEXT, "c", 1);
    pump(0);
    assert_int_equal(sxe_ws_close(seen.sockets[0], SXE_WS_CLOSE_NORMAL, "bye"), 0);
    close(gone);
    pump(0);
    assert_int_equal(seen.closes, 1); /* gone's: the program's close waits for its answer */
    assert_int_equal(seen.close_code, SXE_WS_CLOSE_ABNORMAL);
    pump(SECOND);
    pump(SECOND);
    pump(SECOND);
    pump(SECOND);
    expect_close(left, SXE_WS_CLOSE_POLICY);
    assert_int_equal(slow_messages(), 1); /* only the one still open and still under way */
    close(closed_by_program);
    close(left);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_pings_between_fragments_do_not_keep_a_stalled_message,
                                  teardown),
        cmocka_unit_test_teardown(test_a_frame_a_byte_at_a_time_is_closed_in_time, teardown),
        cmocka_unit_test_teardown(test_tiny_fragments_are_no_progress, teardown),
        cmocka_unit_test_teardown(test_a_stream_of_whole_messages_is_never_too_slow, teardown),
        cmocka_unit_test_teardown(test_a_large_message_must_keep_its_rate, teardown),
        cmocka_unit_test_teardown(test_a_large_message_at_its_rate_arrives, teardown),
        cmocka_unit_test_teardown(test_sockets_that_close_with_a_message_under_way, teardown),
        cmocka_unit_test_teardown(test_a_pause_between_bursts_is_not_a_stall, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
