"""examples/ws-echo against RFC 6455, continued from test_websocket.py: fragmentation with control
frames between fragments (§5.4); UTF-8 checks of text (§8.1), one frame and one byte per fragment;
the closing handshake and its status codes (§5.5.1, §7.4); message limits (1009) and many
messages. Raw frames through wsraw.RawClient, against ws-echo direct and through the proxy."""
import asyncio
import collections
import os
import signal
import socket
import struct
import time

import pytest

from wsraw import server, small_server  # noqa: F401  (fixtures)
from wsraw import (TIMEOUT, CONT, TEXT, BINARY, CLOSE, PING, PONG, SMALL_LIMIT, KiB, MiB,
                   apply_mask, frame_head, frame, fragmented, split, split_in, close_payload,
                   text_of, binary_of, payload_of, handshake, Server, OPCODES,
                   echo_all_at_once)


# --- §5.4 Fragmentation (Autobahn 5.x) ----------------------------------------------------------

@pytest.mark.parametrize("count", [1, 2, 3, 4, 16, 100, 1000])
@OPCODES
def test_fragmented_message_is_echoed_whole(server, opcode, count):
    """§5.4: a message in N fragments (split anywhere, characters too) is echoed as one."""
    payload = payload_of(3000, opcode)
    with server.connect() as ws:
        ws.send(fragmented(opcode, split_in(payload, count)))
        ws.expect_echo(opcode, payload)
        ws.finish()


EMPTY_FRAGMENTS = {
    "empty-first": [b"", b"Hello", b", World"],
    "empty-middle": [b"Hello", b"", b", World"],
    "empty-last": [b"Hello", b", World", b""],
    "all-empty": [b"", b"", b""],
    "one-empty-frame": [b""],
    "many-empty": [b""] * 50 + [b"x"] + [b""] * 50,
}


@pytest.mark.parametrize("parts", EMPTY_FRAGMENTS.values(), ids=EMPTY_FRAGMENTS.keys())
@OPCODES
def test_empty_fragments(server, opcode, parts):
    """Autobahn 6.1: fragments may be empty; the message is all of them joined."""
    with server.connect() as ws:
        ws.send(fragmented(opcode, parts))
        ws.expect_echo(opcode, b"".join(parts))
        ws.finish()


@OPCODES
def test_fragments_in_separate_writes(server, opcode):
    """Fragments arriving apart (Autobahn 5.4-5.5): the echo waits for the last."""
    payload = payload_of(100, opcode)
    with server.connect() as ws:
        for i, part in enumerate(split(payload, 25)):
            ws.send_frame(opcode if i == 0 else CONT, part, fin=i == 3)
            time.sleep(0.02)  # the sleep is the test: fragments that come apart
        ws.expect_echo(opcode, payload)
        ws.finish()


@pytest.mark.parametrize("where", ["after-first", "between-each", "before-last"])
@pytest.mark.parametrize("how", ["one-write", "chopped"])
def test_ping_between_fragments_is_answered_first(server, where, how):
    """§5.4: control frames MAY come between fragments and are answered there: each pong comes
    before the echo of the message (Autobahn 5.6-5.8)."""
    parts = [b"Hel", b"lo, ", b"World", b"!"]
    frames = [frame(TEXT if i == 0 else CONT, part, fin=i == 3) for i, part in enumerate(parts)]
    pings = {"after-first": [1], "between-each": [1, 2, 3], "before-last": [3]}[where]
    data = b""
    for i, data_frame in enumerate(frames):
        if i in pings:
            data += frame(PING, b"ping %d" % i)
        data += data_frame
    with server.connect() as ws:
        ws.send(data) if how == "one-write" else ws.send_chopped(data, head=len(data))
        for i in pings:
            ws.expect_pong(b"ping %d" % i)
        ws.expect_echo(TEXT, b"Hello, World!")
        ws.finish()


def test_pong_between_fragments_is_ignored(server):
    with server.connect() as ws:
        ws.send(frame(BINARY, b"ab", fin=False) + frame(PONG, b"x") + frame(CONT, b"cd"))
        ws.expect_echo(BINARY, b"abcd")
        ws.finish()


def test_close_between_fragments_ends_it(server):
    """§5.5.1: a close between fragments is answered; the unfinished message is dropped."""
    with server.connect() as ws:
        ws.send(frame(TEXT, b"unfin", fin=False) + frame(CLOSE, close_payload(1000)) +
                frame(CONT, b"ished"))
        ws.expect_close(1000, reply=False)


CONTINUATIONS = {
    # name: (frames as (opcode, payload, fin), the echoes expected before the 1002)
    "fin": ([(CONT, b"x", True)], []),
    "not-fin": ([(CONT, b"x", False), (CONT, b"y", True)], []),
    "empty-fin": ([(CONT, b"", True)], []),
    "then-a-message": ([(CONT, b"x", True), (TEXT, b"message", True)], []),
    "after-a-message": ([(TEXT, b"first", True), (CONT, b"second", True)], [b"first"]),
    "after-a-fragmented-message": ([(TEXT, b"a", False), (CONT, b"b", True), (CONT, b"c", True)],
                                   [b"ab"]),
}


@pytest.mark.parametrize("frames,echoes", CONTINUATIONS.values(), ids=CONTINUATIONS.keys())
def test_continuation_without_a_message_fails(server, frames, echoes):
    """§5.4: a continuation frame with no message begun is a protocol error: 1002 (Autobahn
    5.9-5.14); what was whole before it is echoed, nothing after."""
    with server.connect() as ws:
        ws.send(b"".join(frame(opcode, payload, fin=fin) for opcode, payload, fin in frames))
        for echo in echoes:
            ws.expect_echo(TEXT, echo)
        ws.expect_close(1002)


@pytest.mark.parametrize("second_fin", [True, False], ids=["then-whole", "then-fragment"])
@pytest.mark.parametrize("first,second", [(TEXT, TEXT), (TEXT, BINARY), (BINARY, TEXT),
                                          (BINARY, BINARY)],
                         ids=["text-text", "text-binary", "binary-text", "binary-binary"])
def test_new_message_inside_a_fragmented_one_fails(server, first, second, second_fin):
    """§5.4: the fragments of one message cannot be interleaved with another (no extension says
    they may): a text or binary frame while one is unfinished is 1002, nothing echoed."""
    with server.connect() as ws:
        ws.send(frame(first, b"begun", fin=False) + frame(second, b"new", fin=second_fin) +
                frame(CONT, b"end"))
        ws.expect_close(1002)


# --- §8.1 UTF-8 (Autobahn 6.x) ------------------------------------------------------------------

KAPPA = "κόσμε".encode()  # ce ba e1 bd b9 cf 83 ce bc ce b5
INCOMPLETE = [b"\xc0", b"\xe0\x80", b"\xf0\x80\x80", b"\xf8\x80\x80\x80", b"\xfc\x80\x80\x80\x80",
              b"\xdf", b"\xef\xbf", b"\xf7\xbf\xbf", b"\xfb\xbf\xbf\xbf", b"\xfd\xbf\xbf\xbf\xbf"]
NONCHARACTERS = [chr(c).encode() for c in [0xFDD0, 0xFDEF, 0xFFFE, 0xFFFF] +
                 [plane * 0x10000 + low for plane in range(1, 17) for low in (0xFFFE, 0xFFFF)]]

UTF8_GROUPS = [
    # (slug, valid (None: all prefixes, as Python's strict decoder says), sequences); after the
    # sections of http://www.cl.cam.ac.uk/~mgk25/ucs/examples/UTF-8-test.txt, as Autobahn 6.x.
    ("valid-text", True, [b"hello\x24world", b"hello\xc2\xa2world", b"hello\xe2\x82\xacworld",
                          b"hello\xf0\xa4\xad\xa2world", KAPPA,
                          "Hello-µ@ßöäüàá-UTF-8!!".encode()]),
    ("kappa-prefix", None, [KAPPA[:i] for i in range(1, len(KAPPA) + 1)]),
    ("first-of-length", True, [b"\x00", b"\xc2\x80", b"\xe0\xa0\x80", b"\xf0\x90\x80\x80"]),
    ("first-5-6-byte", False, [b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80"]),
    ("last-of-length", True, [b"\x7f", b"\xdf\xbf", b"\xef\xbf\xbf", b"\xf4\x8f\xbf\xbf"]),
    ("past-10ffff", False, [b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf7\xbf\xbf\xbf",
                            b"\xfb\xbf\xbf\xbf\xbf", b"\xfd\xbf\xbf\xbf\xbf\xbf"]),
    ("boundary", True, [b"\xed\x9f\xbf", b"\xee\x80\x80", b"\xef\xbf\xbd", b"\xf0\x9f\x98\x80",
                        b"\xf3\xbf\xbf\xbf"]),
    ("lone-continuation", False, [b"\x80", b"\xbf", b"\x80\xbf", b"\x80\xbf\x80",
                                  b"\x80\xbf\x80\xbf", b"\x80\xbf\x80\xbf\x80",
                                  b"\x80\xbf\x80\xbf\x80\xbf", bytes(range(0x80, 0xC0)),
                                  b"a\x80b", KAPPA + b"\x80"]),
    ("lonely-start", False, [b"".join(bytes([b, 0x20]) for b in range(low, high + 1))
                             for low, high in [(0xC0, 0xDF), (0xE0, 0xEF), (0xF0, 0xF7),
                                               (0xF8, 0xFB), (0xFC, 0xFD)]]),
    ("last-byte-missing", False, INCOMPLETE + [b"\xc2", b"\xe0\xa0", b"\xf0\x90\x80",
                                               b"\xf4\x8f\xbf", b"hello\xce", b"hello\xe2\x82"]),
    ("incomplete-concatenated", False, [b"".join(INCOMPLETE)]),
    ("impossible-byte", False, [b"\xfe", b"\xff", b"\xfe\xfe\xff\xff", b"a\xffb"]),
    ("overlong-slash", False, [b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf",
                               b"\xf8\x80\x80\x80\xaf", b"\xfc\x80\x80\x80\x80\xaf"]),
    ("overlong-maximum", False, [b"\xc1\xbf", b"\xe0\x9f\xbf", b"\xf0\x8f\xbf\xbf",
                                 b"\xf8\x87\xbf\xbf\xbf", b"\xfc\x83\xbf\xbf\xbf\xbf"]),
    ("overlong-nul", False, [b"\xc0\x80", b"\xe0\x80\x80", b"\xf0\x80\x80\x80",
                             b"\xf8\x80\x80\x80\x80", b"\xfc\x80\x80\x80\x80\x80"]),
    ("surrogate", False, [b"\xed\xa0\x80", b"\xed\xad\xbf", b"\xed\xae\x80", b"\xed\xaf\xbf",
                          b"\xed\xb0\x80", b"\xed\xbe\x80", b"\xed\xbf\xbf"]),
    ("surrogate-pair", False, [high + low for high in [b"\xed\xa0\x80", b"\xed\xad\xbf",
                                                       b"\xed\xae\x80", b"\xed\xaf\xbf"]
                               for low in [b"\xed\xb0\x80", b"\xed\xbf\xbf"]]),
    ("noncharacter", True, NONCHARACTERS),
    ("special", True, [chr(c).encode() for c in range(0xFFF9, 0x10000)]),
    ("invalid-in-middle", False, [KAPPA + b"\xed\xa0\x80edited", b"hello\xffworld",
                                  b"hello\xc0\xafworld", KAPPA + b"\xf4\x90\x80\x80" + KAPPA,
                                  b"ok\xe2\x82ok"]),
]


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")  # Python's decoder is strict: RFC 3629, no surrogates
        return True
    except UnicodeDecodeError:
        return False


UTF8_CASES = []
for _slug, _valid, _sequences in UTF8_GROUPS:
    for _i, _data in enumerate(_sequences, 1):
        assert _valid is None or _valid == _decodes(_data), (_slug, _data)  # the table is right
        _ok = _decodes(_data)
        _id = f"{_slug}-{_i}-{'valid' if _ok else 'invalid'}-{_data[:8].hex()}"
        UTF8_CASES.append(pytest.param(_data, _ok, id=_id))


@pytest.mark.parametrize("payload,valid", UTF8_CASES)
def test_utf8_in_one_frame(server, payload, valid):
    """§8.1: text that is UTF-8 (RFC 3629: noncharacters included) is echoed; text that is not
    (overlongs, surrogates, past U+10FFFF, 5/6-byte forms, lone or missing continuation bytes,
    0xFE/0xFF) fails the connection with 1007 (§7.4.1)."""
    with server.connect() as ws:
        ws.send_frame(TEXT, payload)
        if valid:
            ws.expect_echo(TEXT, payload)
            ws.finish()
        else:
            ws.expect_close(1007)


@pytest.mark.parametrize("payload,valid", UTF8_CASES)
def test_utf8_one_byte_per_fragment(server, payload, valid):
    """The same, each byte its own fragment: characters split across fragments are valid; the
    check runs over the whole message, not frame by frame."""
    with server.connect() as ws:
        ws.send(fragmented(TEXT, split(payload, 1)))
        if valid:
            ws.expect_echo(TEXT, payload)
            ws.finish()
        else:
            ws.expect_close(1007)


SPLIT_TEXT = "aé€𝄞z".encode()  # 1-, 2-, 3- and 4-byte characters


@pytest.mark.parametrize("cut", range(len(SPLIT_TEXT) + 1))
def test_utf8_split_between_two_fragments(server, cut):
    """Autobahn 6.2.2-6.2.3: two fragments cut at every byte, inside characters too."""
    with server.connect() as ws:
        ws.send(fragmented(TEXT, [SPLIT_TEXT[:cut], SPLIT_TEXT[cut:]]))
        ws.expect_echo(TEXT, SPLIT_TEXT)
        ws.finish()


@pytest.mark.parametrize("first,second", [(KAPPA, b"\xf4\x90\x80\x80"),
                                          (KAPPA + b"\xf4", b"\x90\x80\x80")],
                         ids=["invalid-fragment", "invalid-across-fragments"])
def test_utf8_fails_fast_at_the_first_invalid_fragment(server, first, second):
    """Autobahn 6.4.1-6.4.2: the message is failed (1007) when the fragment that makes it
    invalid arrives, without waiting for the rest of the message (never sent here)."""
    with server.connect() as ws:
        ws.send(frame(TEXT, first, fin=False))
        time.sleep(0.05)  # the sleep is the test: fragments that come apart
        ws.send(frame(CONT, second, fin=False))
        ws.expect_close(1007)


@pytest.mark.parametrize("parts", [[KAPPA, b"\xf4\x90\x80\x80", b"edited"],
                                   [KAPPA + b"\xf4", b"\x90", b"\x80\x80edited"]],
                         ids=["invalid-chop", "invalid-across-chops"])
def test_utf8_invalid_in_chops_of_one_frame(server, parts):
    """Autobahn 6.4.3-6.4.4: one frame arriving in three chops; failing at the second chop is
    the strict behaviour, at the end of the frame the lenient one: either way 1007."""
    payload = b"".join(parts)
    key = os.urandom(4)
    data = frame_head(TEXT, len(payload), key=key) + apply_mask(payload, key)
    cut1 = len(data) - len(payload) + len(parts[0])
    cut2 = cut1 + len(parts[1])
    with server.connect() as ws:
        for piece in (data[:cut1], data[cut1:cut2], data[cut2:]):
            ws.send_quietly(piece)
            time.sleep(0.05)  # the sleep is the test: chops that come apart
        ws.expect_close(1007)


@pytest.mark.parametrize("payload", [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", KAPPA[:-1],
                                     bytes(range(256))],
                         ids=["ff", "overlong", "surrogate", "truncated", "all-bytes"])
def test_binary_is_not_checked_as_utf8(server, payload):
    """§5.6: binary data is the application's: bytes that are not UTF-8 are echoed."""
    with server.connect() as ws:
        ws.send(frame(BINARY, payload) + fragmented(BINARY, split(payload, 1)))
        ws.expect_echo(BINARY, payload)
        ws.expect_echo(BINARY, payload)
        ws.finish()


# --- §5.5.1, §7 Closing (Autobahn 7.x) ----------------------------------------------------------

VALID_CODES = [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999]


@pytest.mark.parametrize("reason", [b"", "a reason: κόσμε".encode()], ids=["no-reason", "reason"])
@pytest.mark.parametrize("code", VALID_CODES)
def test_close_with_a_valid_code_is_answered(server, code, reason):
    """§5.5.1: a close is answered with a close, typically echoing its code (Autobahn 7.7 takes
    the code or 1000); then the server closes TCP first (§7.1.1)."""
    with server.connect() as ws:
        ws.send_frame(CLOSE, close_payload(code, reason))
        ws.expect_close((code, 1000), reply=False)


@pytest.mark.parametrize("code", [1012, 1013, 1014])
def test_close_with_a_later_registered_code(server, code):
    """1012-1014 were registered after RFC 6455 (IANA's WebSocket Close Code Number Registry);
    Autobahn dropped them from its invalid codes: echoed, 1000 or 1002 are all fine."""
    with server.connect() as ws:
        ws.send_frame(CLOSE, close_payload(code))
        ws.expect_close((code, 1000, 1002), reply=False)


@pytest.mark.parametrize("code", [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000,
                                  65535])
def test_close_with_an_invalid_code_fails(server, code):
    """§7.4: codes below 1000, the reserved 1004, 1005, 1006 and 1015 (never sent), unassigned
    1016-2999 and codes past 4999 are a protocol error: 1002 (Autobahn 7.9, 7.13)."""
    with server.connect() as ws:
        ws.send_frame(CLOSE, close_payload(code))
        ws.expect_close(1002, reply=False)


def test_close_with_a_one_byte_payload_fails(server):
    """§5.5.1: a close body starts with a 2-byte code: one byte is 1002 (Autobahn 7.3.2)."""
    with server.connect() as ws:
        ws.send_frame(CLOSE, b"\x03")
        ws.expect_close(1002, reply=False)


@pytest.mark.parametrize("reason", [KAPPA + b"\xed\xa0\x80edited", b"\xff", b"\xc0\xaf",
                                    b"abc\xe2\x82", b"\xf4\x90\x80\x80"],
                         ids=["surrogate", "ff", "overlong", "truncated", "past-10ffff"])
def test_close_with_a_reason_not_utf8_fails(server, reason):
    """§5.5.1, §8.1: the reason is UTF-8: otherwise 1007 (Autobahn 7.5.1)."""
    with server.connect() as ws:
        ws.send_frame(CLOSE, close_payload(1000, reason))
        ws.expect_close(1007, reply=False)


@pytest.mark.parametrize("reason", [b"", b"x", "κόσμε".encode(), b"*" * 123,
                                    "é".encode() * 61 + b"x"],
                         ids=["empty", "one-byte", "kappa", "123-bytes", "123-bytes-utf8"])
def test_close_reasons_up_to_the_limit(server, reason):
    """§5.5: a close payload of up to 125 bytes (the code and 123 bytes of reason) is fine."""
    with server.connect() as ws:
        ws.send_frame(CLOSE, close_payload(1000, reason))
        ws.expect_close(1000, reply=False)


@pytest.mark.parametrize("length", [126, 200, 65535])
def test_close_over_125_bytes_fails(server, length):
    """§5.5: a close frame of more than 125 bytes is 1002 (Autobahn 7.3.6)."""
    with server.connect() as ws:
        ws.send_quietly(frame(CLOSE, close_payload(1000, b"*" * (length - 2))))
        ws.expect_close(1002, reply=False)


def test_close_without_a_code(server):
    """§5.5.1: a close with no body is answered with a close (empty, or 1000) (Autobahn 7.3.1)."""
    with server.connect() as ws:
        ws.send_frame(CLOSE)
        ws.expect_close((None, 1000), reply=False)


AFTER_CLOSE = {
    "text": frame(TEXT, b"not echoed"),
    "binary": frame(BINARY, b"not echoed"),
    "ping": frame(PING, b"not answered"),
    "second-close": frame(CLOSE, close_payload(1000)),
    "invalid-frame": frame(TEXT, b"x", rsv=7) + frame(TEXT, b"\xff"),
}


@pytest.mark.parametrize("after", AFTER_CLOSE.values(), ids=AFTER_CLOSE.keys())
def test_frames_after_the_close_are_ignored(server, after):
    """§5.5.1: after its close, the client sends nothing the server acts on: no echo, no pong,
    no second close, no error code (Autobahn 7.1.2-7.1.4)."""
    with server.connect() as ws:
        ws.send(frame(CLOSE, close_payload(1000)) + after)
        ws.expect_close(1000, reply=False)


def test_unfinished_message_then_close(server):
    """Autobahn 7.1.5: a fragment, a close, the last fragment: the close is answered, no echo."""
    with server.connect() as ws:
        ws.send(frame(TEXT, b"fragment1", fin=False) + frame(CLOSE, close_payload(1000)) +
                frame(CONT, b"fragment2"))
        ws.expect_close(1000, reply=False)


def test_message_before_the_close_is_echoed(server):
    """A 256 KiB message, a close and a ping back to back: the message (whole before the close)
    is echoed, the close answered, the ping not (Autobahn 7.1.6)."""
    payload = text_of(256 * KiB)
    with server.connect() as ws:
        ws.send(frame(TEXT, payload) + frame(CLOSE, close_payload(1000)) + frame(PING, b"no"))
        ws.expect_echo(TEXT, payload)
        ws.expect_close(1000, reply=False)


def test_nothing_is_echoed_after_the_server_fails_the_connection(server):
    """§7.1.7: once the server has failed the connection, it processes nothing more."""
    with server.connect() as ws:
        ws.send(frame(TEXT, b"\xff") + frame(TEXT, b"valid") + frame(PING, b"p") +
                frame(CLOSE, close_payload(1000)))
        ws.expect_close(1007)


def test_sigterm_closes_open_sockets_as_going_away(build_dir, tmp_path):
    """On SIGTERM, every open socket gets a close frame with 1001 (going away, §7.4.1) before TCP
    closes, and ws-echo exits 0."""
    echo = Server(build_dir, tmp_path / "ws-echo.log")
    try:
        clients = [echo.connect() for _ in range(5)]
        for ws in clients:
            ws.send_frame(TEXT, b"hi")
            ws.expect_echo(TEXT, b"hi")
        echo.process.send_signal(signal.SIGTERM)
        for ws in clients:
            ws.expect_close(1001)
            ws.sock.close()
    finally:
        assert echo.stop() == 0, echo.log()


# --- Limits and load (Autobahn 9.x) -------------------------------------------------------------

@pytest.mark.parametrize("fragment", [None, 64, 4 * KiB, 64 * KiB],
                         ids=["one-frame", "64B-fragments", "4KiB-fragments", "64KiB-fragments"])
@OPCODES
@pytest.mark.parametrize("size", [64 * KiB, 256 * KiB, MiB], ids=["64KiB", "256KiB", "1MiB"])
def test_large_messages(server, size, opcode, fragment):
    """Autobahn 9.1-9.4: text and binary messages up to the 1 MiB limit, whole or in fragments of
    64 B to 64 KiB (text split inside characters), echoed exactly."""
    payload = payload_of(size, opcode)
    data = frame(opcode, payload) if fragment is None else \
        fragmented(opcode, split(payload, fragment))
    with server.connect() as ws:
        done = ws.send_in_background(data)
        ws.expect_echo(opcode, payload)
        done()
        ws.finish()


@pytest.mark.parametrize("shape", ["one-frame", "1KiB-fragments"])
@OPCODES
def test_message_at_the_limit_is_echoed(small_server, opcode, shape):
    """A message of exactly the limit (65536 bytes here) is taken."""
    payload = payload_of(SMALL_LIMIT, opcode)
    data = frame(opcode, payload) if shape == "one-frame" else \
        fragmented(opcode, split(payload, KiB))
    with small_server.connect() as ws:
        ws.send(data)
        ws.expect_echo(opcode, payload)
        ws.finish()


@pytest.mark.parametrize("shape", ["one-frame", "two-fragments", "1KiB-fragments",
                                   "after-a-message"])
@OPCODES
def test_message_over_the_limit_is_1009(small_server, opcode, shape):
    """§7.4.1: a message one byte over the limit gets 1009 (message too big), whole or in
    fragments, also after a message that fitted."""
    payload = payload_of(SMALL_LIMIT + 1, opcode)
    data = {"one-frame": lambda: frame(opcode, payload),
            "two-fragments": lambda: fragmented(opcode, split_in(payload, 2)),
            "1KiB-fragments": lambda: fragmented(opcode, split(payload, KiB)),
            "after-a-message": lambda: frame(opcode, payload[:100]) + frame(opcode, payload)}
    with small_server.connect() as ws:
        done = ws.send_in_background(data[shape](), quietly=True)
        if shape == "after-a-message":
            ws.expect_echo(opcode, payload[:100])
        ws.expect_close(1009)
        done()


@OPCODES
def test_default_limit_is_one_mebibyte(server, opcode):
    """The default limit: 1 MiB + 1 byte gets 1009."""
    with server.connect() as ws:
        done = ws.send_in_background(frame(opcode, payload_of(MiB + 1, opcode)), quietly=True)
        ws.expect_close(1009)
        done()


def test_ten_thousand_small_messages_in_one_write(server):
    """10,000 messages of 16 bytes, text and binary in turn, sent at once: all echoed in order."""
    messages = [(TEXT, b"text %010d!" % i) if i % 2 else
                (BINARY, struct.pack("!QQ", i, ~i & 0xFFFF)) for i in range(10000)]
    echo_all_at_once(server, messages)


def test_two_thousand_round_trips(server):
    """2,000 messages, each awaited before the next."""
    with server.connect() as ws:
        for i in range(2000):
            ws.send_frame(TEXT, b"round trip %d" % i)
            ws.expect_echo(TEXT, b"round trip %d" % i)
        ws.finish()


def test_many_sockets_at_once_keep_their_own_messages(server):
    """50 sockets open together, messages interleaved: each gets its own echoes only."""
    clients = [server.connect() for _ in range(50)]
    try:
        for round_ in range(5):
            for i, ws in enumerate(clients):
                ws.send(fragmented(TEXT, [b"socket %d " % i, b"round %d" % round_]))
            for i, ws in enumerate(clients):
                ws.expect_echo(TEXT, b"socket %d round %d" % (i, round_))
        for ws in clients:
            ws.finish()
    finally:
        for ws in clients:
            ws.sock.close()


def test_server_survives_a_client_that_vanishes_mid_message(server):
    """A client that leaves inside a frame and inside a fragmented message does not disturb
    the server."""
    for data in (frame(BINARY, bytes(100000))[:50000], frame(TEXT, b"abc", fin=False)):
        ws = server.connect()
        ws.send(data)
        ws.sock.close()
    with server.connect() as ws:
        ws.send_frame(TEXT, b"still here")
        ws.expect_echo(TEXT, b"still here")
        ws.finish()


# --- Independent peers: websockets and wsproto --------------------------------------------------

def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 20))


def uri(server, path="/"):
    return f"ws://127.0.0.1:{server.port}{path}"


def test_websockets_echoes_text_and_binary(server):
    """The websockets library as client: text and binary, empty to 1 MiB, a clean close."""
    import websockets

    messages = ["", "Hello", "κόσμε 𝄞" * 1000, text_of(MiB).decode(), b"", b"\x00\xff" * 40000,
                binary_of(MiB)]

    async def main():
        async with websockets.connect(uri(server), max_size=None, open_timeout=5,
                                      close_timeout=5) as ws:
            for message in messages:
                await ws.send(message)
                assert await ws.recv() == message
        return ws.close_code

    assert run(main()) == 1000


def test_websockets_ping(server):
    import websockets

    async def main():
        async with websockets.connect(uri(server), open_timeout=5, close_timeout=5) as ws:
            for payload in [b"", b"abc", bytes(range(125))]:
                waiter = await ws.ping(payload)
                await asyncio.wait_for(waiter, 2)
            await ws.send("after the pings")
            return await ws.recv()

    assert run(main()) == "after the pings"


def test_websockets_fragmented_messages(server):
    """websockets sends an iterable as one fragmented message."""
    import websockets

    async def main():
        async with websockets.connect(uri(server), open_timeout=5, close_timeout=5) as ws:
            await ws.send(["Hel", "lo, ", "", "κόσμε"])
            text = await ws.recv()
            await ws.send([b"\x00", b"\x01" * 1000, b"\x02"])
            return text, await ws.recv()

    assert run(main()) == ("Hello, κόσμε", b"\x00" + b"\x01" * 1000 + b"\x02")


@pytest.mark.parametrize("code,reason", [(1000, ""), (1001, "going"), (3000, "app"),
                                         (4999, "κόσμε")])
def test_websockets_close_code(server, code, reason):
    import websockets

    async def main():
        ws = await websockets.connect(uri(server), open_timeout=5, close_timeout=5)
        await ws.close(code, reason)
        return ws.close_code

    assert run(main()) in (code, 1000)


@pytest.mark.parametrize("offered,chosen", [(["chat"], "chat"), (["chat", "echo"], "echo"),
                                            (["superchat"], None)])
def test_websockets_subprotocols(server, offered, chosen):
    import websockets

    async def main():
        async with websockets.connect(uri(server), subprotocols=offered, open_timeout=5,
                                      close_timeout=5) as ws:
            return ws.subprotocol

    assert run(main()) == chosen


def test_websockets_refused_on_another_path(server):
    import websockets

    async def main():
        try:
            await websockets.connect(uri(server, "/elsewhere"), open_timeout=5)
        except websockets.exceptions.InvalidStatusCode as error:
            return error.status_code
        return "connected"

    assert run(main()) == 404


def test_websockets_many_clients_at_once(server):
    """20 websockets clients, 50 messages each, concurrently."""
    import websockets

    async def client(n):
        async with websockets.connect(uri(server), open_timeout=5, close_timeout=5) as ws:
            for i in range(50):
                message = f"client {n} message {i}" if i % 2 else b"%d:%d" % (n, i)
                await ws.send(message)
                assert await ws.recv() == message
        return ws.close_code

    async def main():
        return await asyncio.gather(*(client(n) for n in range(20)))

    assert run(main()) == [1000] * 20


class WsprotoClient:
    """wsproto's client state machine over a plain socket."""

    def __init__(self, port, path="/", subprotocols=()):
        from wsproto import ConnectionType, WSConnection
        from wsproto.events import Request

        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.pending = collections.deque()
        self.send(Request(host=f"127.0.0.1:{port}", target=path, subprotocols=list(subprotocols)))

    def send(self, event):
        self.sock.sendall(self.ws.send(event))

    def next_event(self):
        while not self.pending:
            data = self.sock.recv(65536)
            self.ws.receive_data(data or None)
            self.pending.extend(self.ws.events())
            assert data or self.pending, "the server closed the connection"
        return self.pending.popleft()

    def message(self):
        """The next whole message, however wsproto hands it over."""
        from wsproto.events import Message

        parts = []
        while True:
            event = self.next_event()
            assert isinstance(event, Message), event
            parts.append(event.data)
            if event.message_finished:
                return parts[0][:0].join(parts)

    def close(self, code=1000, reason=""):
        """The closing handshake; returns the server's close event after TCP's close."""
        from wsproto.events import CloseConnection

        self.send(CloseConnection(code=code, reason=reason))
        event = self.next_event()
        assert isinstance(event, CloseConnection), event
        assert self.sock.recv(1) == b""
        self.sock.close()
        return event


def wsproto_open(server, **options):
    from wsproto.events import AcceptConnection

    client = WsprotoClient(server.port, **options)
    event = client.next_event()
    assert isinstance(event, AcceptConnection), event
    return client, event


def test_wsproto_echoes_text_and_binary(server):
    from wsproto.events import BytesMessage, TextMessage

    client, _ = wsproto_open(server)
    for text in ["", "Hello", "κόσμε 𝄞" * 5000]:
        client.send(TextMessage(data=text))
        assert client.message() == text
    for data in [b"", b"\xff\x00" * 50000]:
        client.send(BytesMessage(data=data))
        assert client.message() == data
    assert client.close().code == 1000


def test_wsproto_ping_and_pong(server):
    from wsproto.events import Ping, Pong, TextMessage

    client, _ = wsproto_open(server)
    client.send(Ping(payload=b"wsproto"))
    event = client.next_event()
    assert isinstance(event, Pong) and event.payload == b"wsproto", event
    client.send(Pong(payload=b"unsolicited"))
    client.send(TextMessage(data="next"))
    assert client.message() == "next"
    client.close()


def test_wsproto_fragmented_messages(server):
    from wsproto.events import BytesMessage, TextMessage

    client, _ = wsproto_open(server)
    client.send(TextMessage(data="frag", message_finished=False))
    client.send(TextMessage(data="ment", message_finished=False))
    client.send(TextMessage(data="ed", message_finished=True))
    assert client.message() == "fragmented"
    client.send(BytesMessage(data=b"\x00" * 70000, message_finished=False))
    client.send(BytesMessage(data=b"\x01", message_finished=True))
    assert client.message() == b"\x00" * 70000 + b"\x01"
    client.close()


@pytest.mark.parametrize("code,reason", [(1000, "done"), (4000, "κόσμε")])
def test_wsproto_close(server, code, reason):
    client, _ = wsproto_open(server)
    assert client.close(code, reason).code in (code, 1000)


@pytest.mark.parametrize("offered,chosen", [(["echo"], "echo"), (["chat", "echo"], "echo"),
                                            (["other", "chat"], "chat"), ([], None)])
def test_wsproto_subprotocols(server, offered, chosen):
    client, accepted = wsproto_open(server, subprotocols=offered)
    assert accepted.subprotocol == chosen
    client.close()


def test_wsproto_refused_on_another_path(server):
    from wsproto.events import RejectConnection

    client = WsprotoClient(server.port, path="/nowhere")
    event = client.next_event()
    assert isinstance(event, RejectConnection) and event.status_code == 404, event
    client.sock.close()
