/*
 * The WebSocket frame reader on its own: every way a peer breaks RFC 6455 §5 gives its close code
 * and its reason (the reason is the close frame's text, so a peer reads it), and the frames next to
 * each rule's edge are taken. Frames are built byte by byte here, not by the library's encoder.
 */
#include <string.h>

#include "sxe_test.h"
#include "websocket/ws.h"

#define LONG_LEN (1u << 31) /* a 64-bit length: 127, then 8 bytes */

struct frame {
    bool more;      /* fin clear: a fragment */
    uint8_t rsv;    /* RSV1 is 4 */
    uint8_t opcode; /* 0 continuation, 1 text, 2 binary, 8 close, 9 ping, 10 pong */
    const char *payload;
    uint64_t len;    /* the length the head says, when not the payload's (no payload then) */
    bool wrong_mask; /* masked by a server, or unmasked by a client */
};

/* Appends frame to out at *end, as a client sends it (masked) unless from_server. */
static void put(uint8_t *out, size_t *end, const struct frame *frame, bool from_server)
{
    bool unmasked = from_server != frame->wrong_mask;
    static const uint8_t mask[4] = {0x12, 0x34, 0x56, 0x78};
    size_t payload = frame->payload != NULL ? strlen(frame->payload) : 0;
    uint64_t len = frame->len != 0 ? frame->len : payload;
    uint8_t *at = out + *end;

    *at++ = (uint8_t)((frame->more ? 0 : 0x80) | frame->rsv << 4 | frame->opcode);
    uint8_t masked = unmasked ? 0 : 0x80;
    if (len < 126) {
        *at++ = (uint8_t)(masked | len);
    } else if (len < 65536) {
        *at++ = masked | 126;
        *at++ = (uint8_t)(len >> 8);
        *at++ = (uint8_t)len;
    } else {
        *at++ = masked | 127;
        for (int shift = 56; shift >= 0; shift -= 8) {
            *at++ = (uint8_t)(len >> shift);
        }
    }
    if (!unmasked) {
        memcpy(at, mask, 4);
        at += 4;
    }
    for (size_t i = 0; i < payload; i++) {
        *at++ = (uint8_t)(frame->payload[i] ^ (unmasked ? 0 : mask[i % 4]));
    }
    *end = (size_t)(at - out);
}

/* Reads the frames one by one as a server's reader (a client's with client): each but the last
 * must be taken; @return what the last one gives, with *event. */
static int read_frames(const struct frame *frames, size_t count, bool client, bool deflate,
                       size_t most, struct sxe__ws_event *event)
{
    static uint8_t data[4096];
    struct sxe__ws_reader reader = {.client = client, .deflate = deflate};
    size_t end = 0, at = 0;
    int got = SXE__WS_MORE;

    for (size_t i = 0; i < count; i++) {
        put(data, &end, &frames[i], client);
    }
    for (size_t i = 0; i < count; i++) {
        memset(event, 0, sizeof(*event));
        got = sxe__ws_read(&reader, data, end, &at, most, event);
        if (i + 1 < count) {
            assert_true(got == SXE__WS_FRAGMENT || got == SXE__WS_MESSAGE ||
                        got == SXE__WS_CONTROL);
        }
    }
    return got;
}

#define READ(client, deflate, most, event, ...)                                                    \
    read_frames((const struct frame[]){__VA_ARGS__},                                               \
                sizeof((const struct frame[]){__VA_ARGS__}) / sizeof(struct frame), client,        \
                deflate, most, event)

static void assert_failed(int got, const struct sxe__ws_event *event, unsigned code,
                          const char *reason)
{
    assert_int_equal(got, SXE__WS_ERROR);
    assert_int_equal(event->code, code);
    assert_non_null(event->error);
    assert_string_equal(event->error, reason);
}

/* Each rule of §5.2-5.5, broken: 1002 (protocol error), with what was wrong. */
static void test_protocol_errors_say_why(void **state)
{
    struct sxe__ws_event event;

    (void)state;
    assert_failed(
        READ(false, false, 100, &event, {.opcode = 1, .payload = "hi", .wrong_mask = true}), &event,
        SXE_WS_CLOSE_PROTOCOL, "client frames must be masked");
    assert_failed(
        READ(true, false, 100, &event, {.opcode = 1, .payload = "hi", .wrong_mask = true}), &event,
        SXE_WS_CLOSE_PROTOCOL, "server frames are not masked");
    assert_int_equal(READ(true, false, 100, &event, {.opcode = 1, .payload = "hi"}),
                     SXE__WS_MESSAGE);
    assert_memory_equal(event.data, "hi", 2);
    for (uint8_t rsv = 1; rsv < 8; rsv++) { /* RSV1 alone, and only with deflate agreed */
        for (int deflate = 0; deflate < 2; deflate++) {
            if (rsv == 4 && deflate) {
                continue;
            }
            assert_failed(READ(false, deflate, 100, &event, {.rsv = rsv, .opcode = 2}), &event,
                          SXE_WS_CLOSE_PROTOCOL, "reserved bits set");
        }
    }
    assert_failed(READ(false, true, 100, &event, {.more = true, .rsv = 4, .opcode = 1},
                       {.rsv = 4, .opcode = 0, .payload = "x"}),
                  &event, SXE_WS_CLOSE_PROTOCOL, "reserved bits set"); /* on a continuation */
    assert_failed(READ(false, true, 100, &event, {.rsv = 4, .opcode = 9}), &event,
                  SXE_WS_CLOSE_PROTOCOL, "reserved bits set"); /* on a control frame */
    for (uint8_t opcode = 3; opcode < 16; opcode++) {
        if (opcode < 8 || opcode > 10) {
            assert_failed(READ(false, false, 100, &event, {.opcode = opcode}), &event,
                          SXE_WS_CLOSE_PROTOCOL, "reserved opcode");
        }
    }
    assert_failed(READ(false, false, 1000, &event, {.more = true, .opcode = 9}), &event,
                  SXE_WS_CLOSE_PROTOCOL, "control frames are short and whole");
    assert_failed(READ(false, false, 1000, &event, {.opcode = 10, .len = 126}), &event,
                  SXE_WS_CLOSE_PROTOCOL, "control frames are short and whole");
    assert_failed(READ(false, false, 100, &event, {.opcode = 0, .payload = "x"}), &event,
                  SXE_WS_CLOSE_PROTOCOL, "a continuation of no message");
    assert_failed(READ(false, false, 100, &event, {.more = true, .opcode = 1, .payload = "a"},
                       {.opcode = 2, .payload = "b"}),
                  &event, SXE_WS_CLOSE_PROTOCOL, "a new message inside a fragmented one");
    assert_failed(READ(false, false, 100, &event, {.opcode = 2, .len = (uint64_t)1 << 63}), &event,
                  SXE_WS_CLOSE_PROTOCOL, "a length with its top bit set");
}

/* A message over the limit (whole, or joined from fragments) is 1009; text that is not UTF-8,
 * 1007; each just under its edge is taken. */
static void test_limits_and_text(void **state)
{
    struct sxe__ws_event event;

    (void)state;
    assert_int_equal(READ(false, false, 5, &event, {.opcode = 2, .payload = "12345"}),
                     SXE__WS_MESSAGE);
    assert_int_equal(event.len, 5);
    assert_failed(READ(false, false, 5, &event, {.opcode = 2, .payload = "123456"}), &event,
                  SXE_WS_CLOSE_TOO_BIG, "message too big");
    assert_failed(READ(false, false, 5, &event, {.more = true, .opcode = 1, .payload = "123"},
                       {.opcode = 0, .payload = "456"}),
                  &event, SXE_WS_CLOSE_TOO_BIG, "message too big");
    assert_int_equal(READ(false, false, 6, &event, {.more = true, .opcode = 1, .payload = "123"},
                          {.opcode = 0, .payload = "456"}),
                     SXE__WS_MESSAGE);
    assert_int_equal(event.len, 6);
    assert_memory_equal(event.data, "123456", 6);
    assert_failed(READ(false, false, LONG_LEN, &event, {.opcode = 2, .len = LONG_LEN + 1ull}),
                  &event, SXE_WS_CLOSE_TOO_BIG, "message too big");
    /* A compressed message may be longer on the wire than the limit, by deflate's worst case. */
    assert_int_equal(READ(false, true, 1000, &event, {.rsv = 4, .opcode = 2, .len = 1000}),
                     SXE__WS_MORE);
    assert_failed(READ(false, true, 1000, &event,
                       {.rsv = 4, .opcode = 2, .len = SXE__WS_DEFLATED_MOST(1000) + 1}),
                  &event, SXE_WS_CLOSE_TOO_BIG, "message too big");
    assert_failed(READ(false, false, 100, &event, {.opcode = 1, .payload = "\xc3"}), &event,
                  SXE_WS_CLOSE_INVALID_DATA, "text is not UTF-8");
    assert_failed(READ(false, false, 100, &event, {.more = true, .opcode = 1, .payload = "a\xc3"},
                       {.opcode = 0, .payload = "b"}),
                  &event, SXE_WS_CLOSE_INVALID_DATA, "text is not UTF-8");
    assert_failed(READ(false, false, 100, &event, {.more = true, .opcode = 1, .payload = "a"},
                       {.opcode = 0, .payload = "\xc3"}),
                  &event, SXE_WS_CLOSE_INVALID_DATA, "text is not UTF-8"); /* ends cut */
    assert_int_equal(READ(false, false, 100, &event, {.more = true, .opcode = 1, .payload = "\xc3"},
                          {.opcode = 0, .payload = "\xa9"}),
                     SXE__WS_MESSAGE); /* a character split between fragments */
    assert_int_equal(READ(false, false, 100, &event, {.opcode = 2, .payload = "\xc3"}),
                     SXE__WS_MESSAGE); /* binary is not checked */
    assert_int_equal(READ(false, true, 100, &event, {.rsv = 4, .opcode = 1, .payload = "\xc3"}),
                     SXE__WS_MESSAGE); /* compressed text is checked once inflated */
    assert_true(event.compressed);
}

/* Control frames come between fragments; a partial frame waits for its end. */
static void test_frames_taken(void **state)
{
    struct sxe__ws_event event;

    (void)state;
    assert_int_equal(READ(false, false, 100, &event, {.opcode = 9, .len = 0}), SXE__WS_CONTROL);
    assert_int_equal(event.opcode, 9);
    assert_int_equal(READ(false, false, 1000, &event, {.opcode = 10, .len = 125}), SXE__WS_MORE);
    assert_int_equal(READ(false, false, 100, &event, {.more = true, .opcode = 2, .payload = "ab"},
                          {.opcode = 9, .payload = "p"}, {.opcode = 0, .payload = "cd"}),
                     SXE__WS_MESSAGE);
    assert_int_equal(event.opcode, 2);
    assert_int_equal(event.len, 4);
    assert_memory_equal(event.data, "abcd", 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol_errors_say_why),
        cmocka_unit_test(test_limits_and_text),
        cmocka_unit_test(test_frames_taken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
