/*
 * Reading frames into messages (RFC 6455 §5), for either side: a pure function of the bytes and a
 * few counters, so the fuzzer drives exactly what the sockets run.
 *
 * The bytes are the connection's unconsumed input, whose front holds the fragments of a message
 * under way joined so far (reader->assembled bytes). A frame is handled once it is whole: a
 * message of one frame is unmasked where it lies and handed out from there; a fragment is
 * unmasked and joined at the front. When a read ends, sxe__ws_read_done() moves the joined part up
 * to just before the bytes not yet parsed, so that what lies before it can be consumed and the
 * core's compaction brings it back to the front for the next read.
 */
#include <string.h>

#include "sxe/utf8.h"
#include "websocket/ws.h"

/* Checks a frame's head against the protocol and the message under way; NULL if it is fine. */
static const char *frame_error(const struct sxe__ws_reader *reader,
                               const struct sxe__ws_frame *frame, size_t most, unsigned *code)
{
    *code = SXE_WS_CLOSE_PROTOCOL;
    if (frame->masked == reader->client) {
        return reader->client ? "server frames are not masked" : "client frames must be masked";
    }
    bool first_data = frame->opcode == SXE_WS_TEXT || frame->opcode == SXE_WS_BINARY;
    if (frame->rsv != 0 && (frame->rsv != 4 || !reader->deflate || !first_data)) {
        return "reserved bits set"; /* RSV1 marks a compressed message's first frame alone */
    }
    if (frame->opcode >= 8) {
        if (frame->opcode > SXE__WS_PONG) {
            return "reserved opcode";
        }
        return !frame->fin || frame->len > 125 ? "control frames are short and whole" : NULL;
    }
    if (frame->opcode > SXE_WS_BINARY) {
        return "reserved opcode";
    }
    if ((frame->opcode == SXE__WS_CONTINUATION) != (reader->message != 0)) {
        return frame->opcode == SXE__WS_CONTINUATION ? "a continuation of no message"
                                                     : "a new message inside a fragmented one";
    }
    bool compressed = frame->opcode == SXE__WS_CONTINUATION ? reader->compressed : frame->rsv != 0;
    if (reader->assembled + frame->len > (compressed ? SXE__WS_DEFLATED_MOST(most) : most)) {
        *code = SXE_WS_CLOSE_TOO_BIG;
        return "message too big";
    }
    return NULL;
}

static int error(struct sxe__ws_event *event, unsigned code, const char *why)
{
    event->code = code;
    event->error = why;
    return SXE__WS_ERROR;
}

/* A data frame, whole and unmasked: a message of its own, or joined to the one under way. */
static int data_frame(struct sxe__ws_reader *reader, uint8_t *front,
                      const struct sxe__ws_frame *frame, uint8_t *payload,
                      struct sxe__ws_event *event)
{
    bool bad;

    if (frame->opcode != SXE__WS_CONTINUATION) {
        reader->compressed = frame->rsv != 0;
    }
    event->compressed = reader->compressed; /* compressed text is checked once inflated */
    if (frame->fin && frame->opcode != SXE__WS_CONTINUATION) {
        if (frame->opcode == SXE_WS_TEXT && !reader->compressed &&
            !sxe_utf8_valid(payload, (size_t)frame->len)) {
            return error(event, SXE_WS_CLOSE_INVALID_DATA, "text is not UTF-8");
        }
        event->opcode = frame->opcode;
        event->data = payload;
        event->len = (size_t)frame->len;
        return SXE__WS_MESSAGE;
    }
    if (frame->opcode != SXE__WS_CONTINUATION) {
        reader->message = frame->opcode;
    }
    memmove(front + reader->assembled, payload, (size_t)frame->len);
    reader->assembled += (uint32_t)frame->len;
    if (reader->message == SXE_WS_TEXT && !reader->compressed) {
        reader->checked += (uint32_t)sxe_utf8_check(front + reader->checked,
                                                    reader->assembled - reader->checked, &bad);
        if (bad || (frame->fin && reader->checked != reader->assembled)) {
            return error(event, SXE_WS_CLOSE_INVALID_DATA, "text is not UTF-8");
        }
    }
    if (!frame->fin) {
        return SXE__WS_FRAGMENT;
    }
    event->opcode = reader->message;
    event->data = front;
    event->len = reader->assembled;
    reader->message = 0;
    reader->assembled = reader->checked = 0;
    return SXE__WS_MESSAGE;
}

int sxe__ws_read(struct sxe__ws_reader *reader, uint8_t *data, size_t len, size_t *at, size_t most,
                 struct sxe__ws_event *event)
{
    struct sxe__ws_frame frame;
    unsigned code;
    int head = sxe__ws_frame_head(data + *at, len - *at, &frame);

    event->compressed = false;

    if (head < 0) {
        return error(event, SXE_WS_CLOSE_PROTOCOL, "a length with its top bit set");
    }
    if (head == 0) {
        return SXE__WS_MORE;
    }
    const char *why = frame_error(reader, &frame, most, &code);
    if (why != NULL) {
        return error(event, code, why);
    }
    if (frame.len > len - *at - (size_t)head) {
        return SXE__WS_MORE; /* the payload is still coming */
    }
    uint8_t *payload = data + *at + head;
    if (frame.masked) {
        sxe__ws_unmask(payload, (size_t)frame.len, frame.mask, 0);
    }
    *at += (size_t)head + (size_t)frame.len;
    if (frame.opcode >= 8) {
        event->opcode = frame.opcode;
        event->data = payload;
        event->len = (size_t)frame.len;
        return SXE__WS_CONTROL;
    }
    return data_frame(reader, data, &frame, payload, event);
}

size_t sxe__ws_read_done(const struct sxe__ws_reader *reader, uint8_t *data, size_t at)
{
    memmove(data + at - reader->assembled, data, reader->assembled);
    return at - reader->assembled;
}
