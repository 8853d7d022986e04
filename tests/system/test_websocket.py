"""examples/ws-echo, the real binary over loopback, against RFC 6455 (WebSocket): the opening
handshake (§4: the accept key, 400, 426, 405, 404, sub-protocols), framing in all three length
forms (§5.2), whole or chopped into single bytes, pipelined; masking (§5.3); reserved bits and
opcodes (§5.2); ping and pong (§5.5.2-3). Fragmentation, UTF-8, closing and limits are in
test_websocket_messages.py.

Autobahn|Testsuite, the usual conformance suite, needs Python 2 (or its Docker image), which is not
available here, so this file covers its sections 1-7 and 9 from the RFC instead, with its cases as
the model (its section 6 is the Markus Kuhn UTF-8 stress test, rebuilt below). Sections 12-13
(permessage-deflate) come with compression.

Most tests speak raw frames through wsraw.RawClient (its own frame builder: random mask keys, all
three length forms, any bit set); a few drive the server with two independent client
implementations, websockets (asyncio) and wsproto (a state machine over a plain socket). One
ws-echo serves each module (direct, and through sxe-httpd's proxy); a second one runs with a 64 KiB
message limit.
"""
import base64
import os
import struct
import time

import pytest

from wsraw import server  # noqa: F401  (fixtures)
from wsraw import (GUID, CONT, TEXT, BINARY, CLOSE, PING, PONG, DEFAULT_LIMIT, KiB, MiB,
                   apply_mask, frame_head, frame, fragmented, close_payload, binary_of,
                   payload_of, describe, new_key, handshake, RawClient, OPCODES, echo_all_at_once)


# --- §4 The opening handshake -------------------------------------------------------------------

def test_handshake_answers_the_rfc_example_key(server):
    """§1.3: the key dGhlIHNhbXBsZSBub25jZQ== is answered s3pPLMBiTxaQ9kYGzzhZRbK+xOo=."""
    with server.connect(key="dGhlIHNhbXBsZSBub25jZQ==") as ws:
        assert ws.response.values("sec-websocket-accept") == ["s3pPLMBiTxaQ9kYGzzhZRbK+xOo="]
        ws.finish()


@pytest.mark.parametrize("key", [
    "AAAAAAAAAAAAAAAAAAAAAA==", "/////////////////////w==", "+++++++++++++++++++++w==",
    "0123456789abcdefABCDEg==", base64.b64encode(os.urandom(16)).decode(),
], ids=["zeros", "ones", "plus-signs", "alphanumeric", "random"])
def test_handshake_accept_key(server, key):
    """§4.2.2: Sec-WebSocket-Accept is Base64(SHA-1(key + GUID)) for any 16-byte key."""
    with server.connect(key=key) as ws:
        ws.send_frame(TEXT, b"after the handshake")
        ws.expect_echo(TEXT, b"after the handshake")
        ws.finish()


ACCEPTED = {
    "standard": ({}, {}),
    "connection-keep-alive-upgrade": ({"Connection": "keep-alive, Upgrade"}, {}),
    "connection-upgrade-keep-alive": ({"Connection": "Upgrade, keep-alive"}, {}),
    "connection-no-spaces": ({"Connection": "keep-alive,Upgrade"}, {}),
    "connection-lower-case": ({"Connection": "upgrade"}, {}),
    "connection-upper-case": ({"Connection": "UPGRADE"}, {}),
    "connection-two-lines": ({"Connection": ["keep-alive", "Upgrade"]}, {}),
    "upgrade-capitalised": ({"Upgrade": "WebSocket"}, {}),
    "upgrade-upper-case": ({"Upgrade": "WEBSOCKET"}, {}),
    "field-names-lower-case": ({}, {"lower": True}),
    "origin-and-user-agent": ({"Origin": "http://example.com", "User-Agent": "pytest"}, {}),
    "unknown-extension-offered": ({"Sec-WebSocket-Extensions": "x-unknown; level=1"}, {}),
    "query-string": ({}, {"path": "/?room=1&user=2"}),
    "host-with-port": ({"Host": "localhost:80"}, {}),
}


@pytest.mark.parametrize("fields,options", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_handshake_is_accepted(server, fields, options):
    """§4.2.1: Upgrade and Connection are case-insensitive, Connection a token list; other fields,
    an extension the server does not know and a query do not matter. The 101 has Upgrade,
    Connection, the right Sec-WebSocket-Accept and no extension (RawClient checks), and the
    socket echoes."""
    key = new_key()
    with server.connect(key=key, request=handshake(key, fields, **options)) as ws:
        assert not ws.response.values("sec-websocket-protocol")
        ws.send_frame(TEXT, b"hello")
        ws.expect_echo(TEXT, b"hello")
        ws.finish()


def test_handshake_key_with_spaces_around_it(server):
    """RFC 9110 §5.5: whitespace around a field value is not part of it; the accept key is of
    the key itself."""
    key = new_key()
    request = handshake(key, {"Sec-WebSocket-Key": f"  {key}  "})
    with server.connect(key=key, request=request) as ws:
        ws.finish()


def key_of(size):
    return base64.b64encode(os.urandom(size)).decode()


NOT_UPGRADE = {"Upgrade": None, "Connection": None, "Sec-WebSocket-Key": None,
               "Sec-WebSocket-Version": None}
REFUSED = {
    # name: (fields, handshake options, statuses)
    "key-missing": ({"Sec-WebSocket-Key": None}, {}, {400}),
    "key-empty": ({"Sec-WebSocket-Key": ""}, {}, {400}),
    "key-short": ({"Sec-WebSocket-Key": "abc"}, {}, {400}),
    "key-of-15-bytes": ({"Sec-WebSocket-Key": key_of(15)}, {}, {400}),
    "key-of-17-bytes": ({"Sec-WebSocket-Key": key_of(17)}, {}, {400}),
    "key-of-32-bytes": ({"Sec-WebSocket-Key": key_of(32)}, {}, {400}),
    "key-not-base64": ({"Sec-WebSocket-Key": "!!!!!!!!!!!!!!!!!!!!!!=="}, {}, {400}),
    "key-16-characters": ({"Sec-WebSocket-Key": "0123456789abcdef"}, {}, {400}),
    "key-twice": ({"Sec-WebSocket-Key": [key_of(16), key_of(16)]}, {}, {400}),
    "version-7": ({"Sec-WebSocket-Version": "7"}, {}, {426}),
    "version-8": ({"Sec-WebSocket-Version": "8"}, {}, {426}),
    "version-12": ({"Sec-WebSocket-Version": "12"}, {}, {426}),
    "version-14": ({"Sec-WebSocket-Version": "14"}, {}, {426}),
    "version-missing": ({"Sec-WebSocket-Version": None}, {}, {400, 426}),
    "version-not-a-number": ({"Sec-WebSocket-Version": "abc"}, {}, {400, 426}),
    "plain-get": (NOT_UPGRADE, {}, {426}),
    "upgrade-missing": ({"Upgrade": None}, {}, {400, 426}),
    "upgrade-h2c": ({"Upgrade": "h2c"}, {}, {400, 426}),
    "connection-missing": ({"Connection": None}, {}, {400, 426}),
    "connection-without-upgrade": ({"Connection": "keep-alive"}, {}, {400, 426}),
    "http-1.0": ({}, {"version": "HTTP/1.0"}, {400, 426}),
    "host-missing": ({"Host": None}, {}, {400}),
    "post": ({}, {"method": "POST"}, {405}),
    "post-plain": ({**NOT_UPGRADE, "Content-Length": "0"}, {"method": "POST"}, {405}),
    "put": ({"Content-Length": "0"}, {"method": "PUT"}, {405}),
    "path-chat": ({}, {"path": "/chat"}, {404}),
    "path-nested": ({}, {"path": "/a/b"}, {404}),
    "path-index": ({}, {"path": "/index.html"}, {404}),
}


@pytest.mark.parametrize("fields,options,statuses", REFUSED.values(), ids=REFUSED.keys())
def test_handshake_is_refused(server, fields, options, statuses):
    """§4.2.1-2: a key that is not Base64 of 16 bytes (or twice, §11.3.1) is 400; a version
    other than 13 is 426 with Sec-WebSocket-Version: 13 (§4.4); a request that is no WebSocket
    handshake is 400 or 426; only GET (§4.1): 405 with Allow (RFC 9110 §15.5.6); only "/": 404;
    no Host is 400 (RFC 9112 §3.2). A 426 names what to upgrade to (RFC 9110 §15.5.22)."""
    response = server.exchange(handshake(None, fields, **options))
    assert response.status in statuses, response
    assert response.status != 101
    if response.status == 426:
        assert response.tokens("sec-websocket-version") == ["13"], response
        assert "websocket" in response.tokens("upgrade"), response
    if response.status == 405:
        assert "get" in response.tokens("allow"), response


PROTOCOLS = {
    "none-offered": (None, None),
    "chat": ("chat", "chat"),
    "echo": ("echo", "echo"),
    "chat-echo": ("chat, echo", "echo"),
    "echo-chat": ("echo, chat", "echo"),
    "chat-echo-no-space": ("chat,echo", "echo"),
    "unknown-then-chat": ("superchat, chat", "chat"),
    "unknown-only": ("superchat", None),
    "two-unknown": ("foo, bar", None),
    "two-lines-chat-echo": (["chat", "echo"], "echo"),
    "two-lines-unknown-chat": (["foo", "chat"], "chat"),
    "spaces-around": ("  chat  ", "chat"),
}


@pytest.mark.parametrize("offered,chosen", PROTOCOLS.values(), ids=PROTOCOLS.keys())
def test_subprotocol_selection(server, offered, chosen):
    """§4.2.2 item 5.4 / §11.3.4: the server picks the first of its own ("echo", then "chat")
    that the client offers, once; it sends no Sec-WebSocket-Protocol when it picks none."""
    with server.connect(protocols=offered) as ws:
        assert ws.response.values("sec-websocket-protocol") == ([chosen] if chosen else []), \
            ws.response
        ws.send_frame(TEXT, b"hi")
        ws.expect_echo(TEXT, b"hi")
        ws.finish()


# --- §5.2 Framing (Autobahn 1.x) ----------------------------------------------------------------

LENGTHS = [0, 1, 125, 126, 127, 128, 65535, 65536, 65537, MiB]


@pytest.mark.parametrize("how", ["one-write", "chopped"])
@pytest.mark.parametrize("length", LENGTHS)
@OPCODES
def test_message_length_forms(server, opcode, length, how):
    """§5.2: lengths in the 7-, 16- and 64-bit forms and their edges, text and binary, whole or
    chopped (the header a byte at a time, the payload in 1- or 997-byte writes): the echo is
    exact."""
    payload = payload_of(length, opcode)
    with server.connect() as ws:
        data = frame(opcode, payload)
        if how == "one-write":
            ws.send(data)
        else:
            ws.send_chopped(data, size=1 if length <= 256 else 997)
        ws.expect_echo(opcode, payload)
        ws.finish()


def test_every_length_in_turn_on_one_connection(server):
    """One connection, lengths 0-300 and the edges, text and binary in turn."""
    with server.connect() as ws:
        for length in list(range(301)) + [65535, 65536, 65537]:
            opcode = TEXT if length % 2 else BINARY
            ws.send_frame(opcode, payload_of(length, opcode))
            ws.expect_echo(opcode, payload_of(length, opcode))
        ws.finish()


def test_pipelined_messages_in_one_write(server):
    """Many messages of all length forms in one write: every echo, in order."""
    messages = [(TEXT if i % 3 else BINARY, payload_of(length, TEXT if i % 3 else BINARY))
                for i, length in enumerate([0, 1, 5, 125, 126, 127, 128, 1000, 65535, 65536, 65537,
                                            200000] * 4 + [16] * 200)]
    echo_all_at_once(server, messages)


def test_message_split_across_reads_at_every_offset(server):
    """Two messages in one stream cut at every byte offset into two writes: both echoed."""
    first, second = frame(TEXT, b"x" * 130), frame(BINARY, b"y" * 7)
    data = first + second
    with server.connect() as ws:
        for cut in range(1, len(data)):
            ws.send(data[:cut])
            time.sleep(0.002)  # the sleep is the test: the two writes come apart
            ws.send(data[cut:])
            ws.expect_echo(TEXT, b"x" * 130)
            ws.expect_echo(BINARY, b"y" * 7)
        ws.finish()


@pytest.mark.parametrize("length,form", [(0, 16), (5, 16), (125, 16), (5, 64), (200, 64),
                                         (65535, 64)])
def test_non_minimal_length_is_echoed_or_refused(server, length, form):
    """§5.2 says the minimal length form MUST be used; a server may take a longer one or fail the
    connection (1002), but nothing else."""
    payload = binary_of(length)
    with server.connect() as ws:
        ws.send_frame(BINARY, payload, length_form=form)
        fin, rsv, opcode, data = ws.read_frame()
        if opcode == CLOSE:
            assert struct.unpack("!H", data[:2])[0] == 1002, describe(fin, rsv, opcode, data)
            ws.send_quietly(frame(CLOSE, data[:2]))
            ws.expect_eof()
        else:
            assert (opcode, data) == (BINARY, payload), describe(fin, rsv, opcode, data)
            ws.finish()


def test_64_bit_length_with_its_top_bit_set_fails(server):
    """§5.2: the most significant bit of a 64-bit length MUST be 0: the server fails the
    connection (1002, or 1009 taking it for a huge length) without waiting for the payload."""
    key = os.urandom(4)
    head = bytes([0x80 | BINARY, 0x80 | 127]) + struct.pack("!Q", (1 << 63) | 10) + key
    with server.connect() as ws:
        done = ws.send_in_background(head + bytes(DEFAULT_LIMIT + KiB), quietly=True)
        ws.expect_close((1002, 1009))
        done()


def test_huge_declared_length_is_too_big(server):
    """A frame declaring 2^40 bytes (more than the 1 MiB limit): 1009 (§7.4.1) by the time the
    limit has been passed."""
    key = os.urandom(4)
    with server.connect() as ws:
        done = ws.send_in_background(frame_head(BINARY, 1 << 40, key=key) +
                                     apply_mask(bytes(DEFAULT_LIMIT + KiB), key), quietly=True)
        ws.expect_close(1009)
        done()


# --- §5.3 Masking -------------------------------------------------------------------------------

@pytest.mark.parametrize("key", [b"\0\0\0\0", b"\xff\xff\xff\xff", b"\x01\x02\x03\x04",
                                 b"\x80\x00\x00\x01"], ids=["zero", "ones", "counting", "edges"])
@pytest.mark.parametrize("length", [3, 13, 1001, 70001])
def test_mask_keys(server, key, length):
    """§5.3: any key, the all-zero one too (still a masked frame), unmasks to the payload,
    whatever the payload's length modulo 4."""
    payload = binary_of(length)
    with server.connect() as ws:
        ws.send(frame(BINARY, payload, key=key))
        ws.expect_echo(BINARY, payload)
        ws.finish()


UNMASKED = {
    "text": lambda: frame(TEXT, b"unmasked", mask=False),
    "binary": lambda: frame(BINARY, b"\x00\x01unmasked", mask=False),
    "empty-text": lambda: frame(TEXT, b"", mask=False),
    "ping": lambda: frame(PING, b"unmasked", mask=False),
    "pong": lambda: frame(PONG, b"unmasked", mask=False),
    "close": lambda: frame(CLOSE, close_payload(1000), mask=False),
    "continuation": lambda: frame(TEXT, b"masked ", fin=False) +
    frame(CONT, b"unmasked", mask=False),
    "16-bit-length": lambda: frame(BINARY, bytes(300), mask=False),
}


@pytest.mark.parametrize("build", UNMASKED.values(), ids=UNMASKED.keys())
def test_unmasked_frame_fails_the_connection(server, build):
    """§5.1: a server MUST close the connection on a frame that is not masked (with 1002,
    §7.4.1); the masked message sent after it is not echoed."""
    with server.connect() as ws:
        ws.send(build() + frame(TEXT, b"after"))
        ws.expect_close(1002)


def test_unmasked_frame_after_a_message(server):
    """A valid message is echoed, then an unmasked one fails the connection."""
    with server.connect() as ws:
        ws.send(frame(TEXT, b"first") + frame(TEXT, b"second", mask=False) + frame(PING, b"p"))
        ws.expect_echo(TEXT, b"first")
        ws.expect_close(1002)


# --- §5.2 Reserved bits and opcodes (Autobahn 3.x, 4.x) -----------------------------------------

RSV_CASES = {
    "text": lambda rsv: frame(TEXT, b"Hello", rsv=rsv),
    "binary": lambda rsv: frame(BINARY, b"\x00\xff" * 10, rsv=rsv),
    "ping": lambda rsv: frame(PING, b"ping", rsv=rsv),
    "pong": lambda rsv: frame(PONG, b"pong", rsv=rsv),
    "close": lambda rsv: frame(CLOSE, close_payload(1000), rsv=rsv),
    "continuation": lambda rsv: frame(TEXT, b"Hel", fin=False) + frame(CONT, b"lo", rsv=rsv),
    "after-a-message": lambda rsv: frame(TEXT, b"first") + frame(TEXT, b"second", rsv=rsv) +
    frame(PING, b"not answered"),
}


@pytest.mark.parametrize("rsv", range(1, 8))
@pytest.mark.parametrize("case", RSV_CASES.keys())
def test_reserved_bits_fail_the_connection(server, case, rsv):
    """§5.2: RSV1-3 MUST be 0 unless an extension says otherwise: 1002, in any frame. A message
    before it is echoed; the ping after it is not answered (Autobahn 3.2)."""
    with server.connect() as ws:
        ws.send(RSV_CASES[case](rsv))
        if case == "after-a-message":
            ws.expect_echo(TEXT, b"first")
        ws.expect_close(1002)


@pytest.mark.parametrize("opcode", [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF],
                         ids=lambda op: f"{op:#x}")
@pytest.mark.parametrize("case", ["empty", "with-payload", "after-a-message", "mid-message"])
def test_reserved_opcodes_fail_the_connection(server, case, opcode):
    """§5.2: opcodes 3-7 and 0xB-0xF are reserved: 1002. A message before one is echoed; the
    ping after one is not answered (Autobahn 4.1.3, 4.2.3)."""
    with server.connect() as ws:
        if case == "empty":
            ws.send(frame(opcode))
        elif case == "with-payload":
            ws.send(frame(opcode, b"reserved opcode payload"))
        elif case == "after-a-message":
            ws.send(frame(TEXT, b"first") + frame(opcode, b"reserved") + frame(PING, b"no"))
            ws.expect_echo(TEXT, b"first")
        else:
            ws.send(frame(TEXT, b"fir", fin=False) + frame(opcode, b"x") + frame(CONT, b"st"))
        ws.expect_close(1002)


# --- §5.5.2-3 Ping and pong (Autobahn 2.x) ------------------------------------------------------

PING_PAYLOADS = {
    "empty": b"",
    "one-byte": b"x",
    "text": b"Hello, World!",
    "utf8": "κόσμε 𝄞".encode(),
    "binary-125": bytes(range(125)),
    "ff-125": b"\xff" * 125,
    "not-utf8": b"\xff\xfe\xc0\xaf\xed\xa0\x80",
    "nul-bytes": bytes(10),
}


@pytest.mark.parametrize("how", ["one-write", "chopped"])
@pytest.mark.parametrize("payload", PING_PAYLOADS.values(), ids=PING_PAYLOADS.keys())
def test_ping_is_answered_with_its_payload(server, payload, how):
    """§5.5.3: a pong's application data is the ping's, whatever it is (0-125 bytes)."""
    with server.connect() as ws:
        data = frame(PING, payload)
        if how == "one-write":
            ws.send(data)
        else:
            ws.send_chopped(data)
        ws.expect_pong(payload)
        ws.finish()


@pytest.mark.parametrize("length", [126, 127, 1000, 65535, 65536])
def test_ping_over_125_bytes_fails(server, length):
    """§5.5: control frames have at most 125 bytes of payload: 1002 (Autobahn 2.5)."""
    with server.connect() as ws:
        done = ws.send_in_background(frame(PING, binary_of(length)), quietly=True)
        ws.expect_close(1002)
        done()


def test_pong_over_125_bytes_fails(server):
    with server.connect() as ws:
        ws.send(frame(PONG, bytes(126)))
        ws.expect_close(1002)


@pytest.mark.parametrize("opcode", [PING, PONG, CLOSE], ids=["ping", "pong", "close"])
def test_fragmented_control_frame_fails(server, opcode):
    """§5.5: control frames MUST NOT be fragmented: 1002 (Autobahn 5.1, 5.2)."""
    first = close_payload(1000) if opcode == CLOSE else b"frag"
    with server.connect() as ws:
        ws.send(frame(opcode, first, fin=False) + frame(CONT, b"ment"))
        ws.expect_close(1002)


def test_fragmented_ping_within_a_message_fails(server):
    with server.connect() as ws:
        ws.send(frame(TEXT, b"a", fin=False) + frame(PING, b"x", fin=False) + frame(CONT, b"b"))
        ws.expect_close(1002)


@pytest.mark.parametrize("payload", [b"", b"unsolicited", bytes(range(125))],
                         ids=["empty", "text", "binary-125"])
def test_unsolicited_pong_is_ignored(server, payload):
    """§5.5.3: an unsolicited pong is a heartbeat, not answered: the next frame is the echo of
    the message after it (Autobahn 2.7, 2.8)."""
    with server.connect() as ws:
        ws.send(frame(PONG, payload) + frame(TEXT, b"after the pong"))
        ws.expect_echo(TEXT, b"after the pong")
        ws.finish()


@pytest.mark.parametrize("how", ["one-write", "chopped"])
def test_ten_pings_get_ten_pongs_in_order(server, how):
    """Autobahn 2.10, 2.11: ten pings sent together, ten pongs in order (§5.5.3 allows answering
    only the last of pings not yet answered; Autobahn checks for all of them anyway)."""
    data = b"".join(frame(PING, b"payload-%d" % i) for i in range(10))
    with server.connect() as ws:
        ws.send(data) if how == "one-write" else ws.send_chopped(data, head=len(data))
        for i in range(10):
            ws.expect_pong(b"payload-%d" % i)
        ws.finish()


def test_pings_one_at_a_time(server):
    """§5.5.2: a ping MUST be answered: 200 of them, each awaited, with their payloads."""
    with server.connect() as ws:
        for i in range(200):
            ws.send_frame(PING, b"%d" % i)
            ws.expect_pong(b"%d" % i)
        ws.finish()


def test_pings_between_messages_keep_their_order(server):
    with server.connect() as ws:
        ws.send(frame(TEXT, b"one") + frame(PING, b"p") + frame(BINARY, b"two"))
        ws.expect_echo(TEXT, b"one")
        ws.expect_pong(b"p")
        ws.expect_echo(BINARY, b"two")
        ws.finish()
