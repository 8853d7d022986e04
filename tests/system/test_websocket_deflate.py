"""examples/ws-echo with permessage-deflate (RFC 7692), the real binary over loopback: the
negotiation of offers (§5, §7.1: parameters, their values, quoting, repeated or unknown ones,
several offers in one field or over several fields, declined offers followed by one taken);
compressed messages both ways (§6, §7.2: the 00 00 ff ff tail left off, text checked as UTF-8
once inflated, sizes from empty to 1 MiB, the server compressing its echo when that makes it
smaller and keeping to the window it promised, no context takeover either way); the payloads of
RFC 7692 §7.2.3; fragmented compressed messages with control frames between fragments; and the
failures: RSV1 on a continuation or control frame or with no extension agreed (1002), data that
is not deflate or text that is not UTF-8 once inflated (1007), a "zip bomb" past the message
limit (1009), each followed by the server closing TCP.

This is the ground of Autobahn|Testsuite's sections 12 and 13 (permessage-deflate). Autobahn
itself needs Python 2 (or its Docker image), neither of which is available here, so the cases
are written from the RFC instead. The raw client, its frame builder and the two servers come
from test_websocket.py (the RFC 6455 suite); the client here (DeflateClient) also offers the
extension, compresses what it sends and decompresses what it gets. Two independent clients,
websockets (which offers "permessage-deflate; client_max_window_bits" by default) and wsproto
(with its PerMessageDeflate extension), check the same from outside.
"""
import asyncio
import random
import socket
import zlib

import pytest

# The same two ws-echo servers as the RFC 6455 suite (module-scoped: this module gets its own).
from wsraw import server, small_server  # noqa: F401  (fixtures)
from wsraw import (BINARY, CLOSE, CONT, MiB, NAMES, PING, PONG, SMALL_LIMIT, TEXT,
                            TIMEOUT, RawClient, accept_for, close_payload, describe, frame,
                            handshake, new_key, split_in, text_of)

TAIL = b"\x00\x00\xff\xff"  # RFC 7692 §7.2.1: left off each compressed message
BASE = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
OFFER = "permessage-deflate; client_max_window_bits"  # what browsers (and websockets) offer
RSV1 = 4             # the rsv argument of frame(): RSV1 is the highest of the three bits


def answer(bits=15) -> str:
    """The server's whole answer to an offer asking for a window of bits."""
    return BASE + (f"; server_max_window_bits={bits}" if bits < 15 else "")


def parse_extensions(values) -> list:
    """Sec-WebSocket-Extensions field values as [(name, [(param, value or None), ...]), ...],
    names in lower case, values unquoted (RFC 6455 §9.1)."""
    parsed = []
    for value in values:
        for offer in value.split(","):
            if not offer.strip():
                continue
            name, *params = [part.strip() for part in offer.split(";")]
            pairs = []
            for param in params:
                key, equals, val = param.partition("=")
                pairs.append((key.strip().lower(), val.strip().strip('"') if equals else None))
            parsed.append((name.lower(), pairs))
    return parsed


def deflate(data: bytes, bits=15, level=zlib.Z_DEFAULT_COMPRESSION, zdict=None) -> bytes:
    """data compressed on its own as RFC 7692 §7.2.1 says: raw DEFLATE, flushed, its 00 00 ff ff
    tail left off."""
    options = {"zdict": zdict} if zdict is not None else {}
    compressor = zlib.compressobj(level, zlib.DEFLATED, -bits, **options)
    out = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(TAIL)
    return out[:-4]


def inflate(data: bytes, bits=15, inflater=None) -> bytes:
    """A compressed message's payload inflated (§7.2.2: the tail put back), with a window of bits:
    a back reference further than that fails (zlib: invalid distance too far back)."""
    inflater = inflater or zlib.decompressobj(-bits)
    return inflater.decompress(data + TAIL) + inflater.flush()


def inflate_strictly(data: bytes, bits: int) -> bytes:
    """inflate() one output byte per call: zlib reads back references from the output of the
    same call as well as from its window, so only thus does a reference further back than 2^bits
    bytes fail (invalid distance too far back) wherever it is."""
    inflater = zlib.decompressobj(-bits)
    out, pending = bytearray(), data + TAIL
    while True:
        chunk = inflater.decompress(pending, 1)
        out += chunk
        pending = inflater.unconsumed_tail
        if not chunk and not pending:
            return bytes(out + inflater.flush())


def random_bytes(size, seed=None) -> bytes:
    return random.Random(size if seed is None else seed).randbytes(size)


def random_text(size) -> bytes:
    """Text that hardly compresses: random letters, digits and punctuation, exactly size bytes."""
    rng = random.Random(size)
    return bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:-"
                            ) for _ in range(size))


class DeflateClient(RawClient):
    """RawClient offering permessage-deflate (offer: a field value, a list of them for several
    fields, or None for no offer). It checks the 101, records what was agreed, compresses what
    it is asked to and checks the server's frames against what was agreed: RSV1 only on the
    first frame of a text or binary message, and only with the extension agreed; RSV2 and RSV3
    never."""

    def __init__(self, port, offer=OFFER):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer, self.offset = bytearray(), 0
        self.key = new_key()
        fields = {"Sec-WebSocket-Extensions": offer} if offer is not None else {}
        self.sock.sendall(handshake(self.key, fields))
        self.response = response = self.read_response()
        assert response.status == 101, response
        assert response.values("sec-websocket-accept") == [accept_for(self.key)], response
        self.answer = response.values("sec-websocket-extensions")
        extensions = parse_extensions(self.answer)
        assert len(extensions) <= 1, f"more than one extension in the answer: {self.answer}"
        self.agreed = dict(extensions[0][1]) if extensions else None
        if extensions:
            name, params = extensions[0]
            assert name == "permessage-deflate", f"an extension never offered: {self.answer}"
            assert len(self.agreed) == len(params), f"a parameter repeated: {self.answer}"
        agreed = self.agreed or {}
        self.server_bits = int(agreed.get("server_max_window_bits") or 15)
        self.client_bits = int(agreed.get("client_max_window_bits") or 15)
        # §7.1.1.1: without server_no_context_takeover the server may compress each message
        # against the ones before, so one inflater must then read them all.
        self.inflater = None if "server_no_context_takeover" in agreed else \
            zlib.decompressobj(-self.server_bits)

    def check_rsv(self, fin, rsv, opcode, payload):
        """RSV1 allowed where RFC 7692 puts it: a message's first frame, with the extension."""
        shown = describe(fin, rsv, opcode, payload)
        assert rsv & 3 == 0, f"RSV2/RSV3 set (no extension defines them) in {shown}"
        if rsv:
            assert self.agreed is not None, f"RSV1 with no extension agreed, in {shown}"
            assert opcode in (TEXT, BINARY), f"RFC 7692 §6.1: RSV1 on {shown}"

    def read_compressed(self):
        """The next message, whole (fragments joined): (opcode, payload as sent, compressed)."""
        fin, rsv, opcode, payload = self.read_frame()
        assert opcode in (TEXT, BINARY), \
            f"expected a message, got {describe(fin, rsv, opcode, payload)}"
        parts = [payload]
        while not fin:
            fin, more, got, payload = self.read_frame()
            assert got == CONT and not more, \
                f"expected a continuation, got {describe(fin, more, got, payload)}"
            parts.append(payload)
        return opcode, b"".join(parts), bool(rsv)

    def read_message(self):
        """The next message inflated if it came compressed: (opcode, data)."""
        return self.read_message_and_form()[:2]

    def read_message_and_form(self):
        """(opcode, data, compressed, bytes on the wire)."""
        opcode, payload, compressed = self.read_compressed()
        if not compressed:
            return opcode, payload, False, len(payload)
        assert not payload.endswith(TAIL), "§7.2.1: the 00 00 ff ff tail was not left off"
        try:
            data = inflate_strictly(payload, self.server_bits) \
                if self.server_bits < 15 and self.inflater is None else \
                inflate(payload, self.server_bits, self.inflater)
        except zlib.error as error:
            raise AssertionError(f"the server's compressed {NAMES[opcode]} of {len(payload)} bytes "
                                 f"does not inflate with a window of {self.server_bits} bits "
                                 f"({error}): {payload[:40]!r}") from None
        return opcode, data, True, len(payload)

    def expect_echo(self, opcode, payload):
        """The echo of payload, inflated if need be. Returns (compressed, bytes on the wire)."""
        got, data, compressed, wire = self.read_message_and_form()
        assert got == opcode, f"expected the echo as {NAMES[opcode]}, got {NAMES[got]}"
        if data != payload:
            at = next((i for i, (a, b) in enumerate(zip(data, payload)) if a != b),
                      min(len(data), len(payload)))
            raise AssertionError(f"the echo differs: {len(data)} bytes for {len(payload)}, "
                                 f"first difference at byte {at}")
        if compressed:
            assert wire < len(payload), \
                f"compressed into {wire} bytes, no fewer than its {len(payload)}"
        return compressed, wire

    def send_message(self, opcode, data, parts=1, compress=True):
        """data as one message of parts frames, compressed (RSV1 on the first frame alone)."""
        payload = deflate(data, self.client_bits) if compress else data
        pieces = split_in(payload, parts) if isinstance(parts, int) else parts(payload)
        self.send(b"".join(frame(opcode if i == 0 else CONT, piece, fin=i == len(pieces) - 1,
                                 rsv=RSV1 if compress and i == 0 else 0)
                           for i, piece in enumerate(pieces)))


def connect(server, offer=OFFER) -> DeflateClient:
    assert server.process.poll() is None, f"ws-echo exited {server.process.returncode}: " \
        f"{server.log()}"
    client = DeflateClient(server.port, offer)
    if offer == OFFER:
        assert client.answer == [BASE], client.response
    return client




# --- Negotiation (RFC 7692 §5, §7.1) ------------------------------------------------------------

PD = "permessage-deflate"
NEGOTIATION = {
    # Offers taken: the answer always has both no_context_takeover parameters (§7.1.1: a server
    # may add them to any offer), and server_max_window_bits when the offer asked for under 15.
    "bare": (PD, 15),
    "client-max-window-bits": (f"{PD}; client_max_window_bits", 15),
    "client-max-window-bits-8": (f"{PD}; client_max_window_bits=8", 15),
    "client-max-window-bits-quoted": (f'{PD}; client_max_window_bits="12"', 15),
    "server-no-context-takeover": (f"{PD}; server_no_context_takeover", 15),
    "server-max-window-bits-9": (f"{PD}; server_max_window_bits=9", 9),
    "server-max-window-bits-quoted": (f'{PD}; server_max_window_bits="12"', 12),
    "every-parameter": (f"{PD}; client_max_window_bits=10; server_max_window_bits=11; "
                        "client_no_context_takeover; server_no_context_takeover", 11),
    "no-spaces": (f"{PD};server_max_window_bits=13;client_max_window_bits", 13),
    "spaces-around": (f"  {PD} ;  server_max_window_bits=14 ", 14),
    "wsproto-offer": (f"{PD}; client_max_window_bits=15; server_max_window_bits=15", 15),
    # Offers declined (§7.1: an unknown parameter, a repeated one, an invalid value).
    "server-max-window-bits-8": (f"{PD}; server_max_window_bits=8", None),
    "server-max-window-bits-16": (f"{PD}; server_max_window_bits=16", None),
    "server-max-window-bits-no-value": (f"{PD}; server_max_window_bits", None),
    "server-max-window-bits-leading-zero": (f"{PD}; server_max_window_bits=010", None),
    "server-max-window-bits-open-quote": (f'{PD}; server_max_window_bits="10', None),
    "client-max-window-bits-7": (f"{PD}; client_max_window_bits=7", None),
    "value-on-no-context-takeover": (f"{PD}; server_no_context_takeover=1", None),
    "repeated-parameter": (f"{PD}; client_no_context_takeover; client_no_context_takeover", None),
    "unknown-parameter": (f"{PD}; x-level=9", None),
    "other-extension": ("x-webkit-deflate-frame", None),
    "all-offers-declined": (f"{PD}; server_max_window_bits=8, {PD}; mystery", None),
    # Several offers: the first that can be taken is.
    "other-extension-then-ours": (f"x-webkit-deflate-frame, {PD}; server_max_window_bits=9", 9),
    "declined-then-taken": (f"{PD}; server_max_window_bits=8, {PD}; server_max_window_bits=10",
                            10),
    "first-of-two-good": (f"{PD}; server_max_window_bits=10, {PD}", 10),
    "two-fields-declined-then-taken": ([f"{PD}; mystery", f"{PD}; server_max_window_bits=12"], 12),
    "two-fields-first-taken": ([f"{PD}; server_max_window_bits=9", PD], 9),
}


@pytest.mark.parametrize("offer,bits", NEGOTIATION.values(), ids=NEGOTIATION.keys())
def test_negotiation(server, offer, bits):
    """Each offer is answered as RFC 7692 §7.1 and the server's rules say (bits: the window the
    answer must promise, None for no extension); then a compressible message is echoed, sent
    compressed and come back compressed when the extension was agreed, plain when not."""
    with connect(server, offer) as ws:
        if bits is None:
            assert ws.answer == [], f"{offer!r} should have been declined: {ws.response}"
        else:
            assert ws.answer, f"{offer!r} should have been taken: {ws.response}"
            assert parse_extensions(ws.answer) == parse_extensions([answer(bits)]), \
                f"{offer!r} answered {ws.answer}, expected {answer(bits)!r}"
            assert ws.answer == [answer(bits)]
        message = text_of(300)
        ws.send_message(TEXT, message, compress=bits is not None)
        compressed, _ = ws.expect_echo(TEXT, message)
        assert compressed == (bits is not None)
        ws.finish()


# --- Compressed messages (§6, §7.2) ------------------------------------------------------------

SIZES = [0, 1, 31, 32, 100, 1000, 65536, 300000, MiB]
KINDS = {"text-compressible": (TEXT, text_of), "binary-random": (BINARY, random_bytes)}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", KINDS, ids=KINDS.keys())
def test_compressed_echo(server, kind, size):
    """A compressed message of size bytes comes back equal (inflated when it comes with RSV1).
    Under 32 bytes it comes back plain; repetitive text of 100 bytes or more comes back
    compressed, and anything that comes compressed is smaller than it was."""
    opcode, make = KINDS[kind]
    data = make(size)
    with connect(server) as ws:
        ws.send_message(opcode, data)
        compressed, wire = ws.expect_echo(opcode, data)
        if size < 32:
            assert not compressed, f"a {size}-byte message came back compressed"
        if opcode == TEXT and size >= 100:
            assert compressed, f"{size} bytes of repetitive text came back uncompressed"
        ws.finish()


@pytest.mark.parametrize("size", [32, MiB])
def test_compressible_echo_comes_back_compressed(server, size):
    """From 32 bytes on, a message that compresses well (one letter, zeros) is echoed compressed,
    whether it was sent compressed or not."""
    with connect(server) as ws:
        for opcode, data in [(TEXT, b"a" * size), (BINARY, bytes(size))]:
            for compress in (True, False):
                ws.send_message(opcode, data, compress=compress)
                compressed, wire = ws.expect_echo(opcode, data)
                assert compressed, f"{size} bytes of {data[:1]!r} came back uncompressed"
        ws.finish()


def test_short_messages_come_back_uncompressed(server):
    """Under 32 bytes the echo is never compressed, however well it would compress."""
    with connect(server) as ws:
        for size in range(32):
            ws.send_message(BINARY if size % 2 else TEXT, b"a" * size)
        for size in range(32):
            compressed, _ = ws.expect_echo(BINARY if size % 2 else TEXT, b"a" * size)
            assert not compressed, f"the echo of {size} bytes came compressed"
        ws.finish()


def test_compressed_and_plain_messages_mixed(server):
    """After the agreement a client may still send messages plain (RSV1 = 0, §6): 40 messages,
    compressed and plain in turn, text and binary, pipelined in one write."""
    messages = [(TEXT if i % 3 else BINARY, text_of(37 * i), i % 2 == 0) for i in range(40)]
    with connect(server) as ws:
        ws.send(b"".join(frame(opcode, deflate(data) if compress else data,
                               rsv=RSV1 if compress else 0)
                         for opcode, data, compress in messages))
        for opcode, data, _ in messages:
            ws.expect_echo(opcode, data)
        ws.finish()


def window_payload() -> bytes:
    """5000 random bytes, 6000 of a repeated pair, the same 5000 random bytes again: a compressor
    free to look 11000 bytes back shortens the second copy to a few back references; one kept to
    a smaller window compresses only the middle (still smaller than the whole)."""
    block = random_bytes(5000, seed=7)
    return block + b"ab" * 3000 + block


@pytest.mark.parametrize("bits", [9, 10, 12])
def test_server_keeps_to_its_window(server, bits):
    """Offered server_max_window_bits=bits, the server compresses its echo with a window of no
    more than 2^bits bytes: its echo inflates with a window of bits (zlib refuses any back
    reference further than that), where the same payload compressed with the full window does
    not (the test can tell: see inflate_strictly)."""
    data = window_payload()
    assert inflate_strictly(deflate(data, bits), bits) == data
    with pytest.raises(zlib.error, match="too far back"):
        inflate_strictly(deflate(data, 15), bits)
    with connect(server, f"{PD}; server_max_window_bits={bits}") as ws:
        assert ws.answer == [answer(bits)]
        for opcode in (BINARY, TEXT):
            message = data if opcode == BINARY else text_of(20000)
            ws.send_message(opcode, message)
            compressed, _ = ws.expect_echo(opcode, message)  # inflated with a window of bits
            assert compressed
        ws.finish()


def test_no_context_takeover_either_way(server):
    """server_no_context_takeover: each echo inflates on its own (a fresh inflater each time, as
    DeflateClient does), and the same message is compressed the same way every time; the
    client's messages are compressed each on its own too, as client_no_context_takeover asks."""
    message = text_of(5000)
    with connect(server) as ws:
        payloads = []
        for _ in range(3):
            ws.send_message(TEXT, message)
            opcode, payload, compressed = ws.read_compressed()
            assert compressed and inflate(payload) == message
            payloads.append(payload)
        assert payloads[0] == payloads[1] == payloads[2], \
            "the same message compressed differently: compressed against the one before"
        ws.finish()


# RFC 7692 §7.2.3's example payloads, each "Hello" (or nothing), framed as there.
RFC_EXAMPLES = {
    "one-compressed-block": ([bytes.fromhex("f248cdc9c90700")], b"Hello"),
    "uncompressed-block": ([bytes.fromhex("000500faff48656c6c6f00")], b"Hello"),
    "block-with-bfinal": ([bytes.fromhex("f348cdc9c9070000")], b"Hello"),
    "two-blocks": ([bytes.fromhex("f24805000000ffffcac9c90700")], b"Hello"),
    "fragmented": ([bytes.fromhex("f248cd"), bytes.fromhex("c9c90700")], b"Hello"),
    "empty-message": ([b"\x00"], b""),
}


@pytest.mark.parametrize("frames,message", RFC_EXAMPLES.values(), ids=RFC_EXAMPLES.keys())
def test_rfc_7692_examples(server, frames, message):
    """The compressed payloads of RFC 7692 §7.2.3 are all read as the RFC says: one compressed
    block, a stored block, a block with BFINAL set followed by the 00 byte that makes room for
    the tail (§7.2.3.4), two blocks, the fragmented example, and the empty message."""
    with connect(server) as ws:
        ws.send(b"".join(frame(TEXT if i == 0 else CONT, part, fin=i == len(frames) - 1,
                               rsv=RSV1 if i == 0 else 0) for i, part in enumerate(frames)))
        ws.expect_echo(TEXT, message)
        ws.finish()


# --- Fragmented compressed messages (§6.1: RSV1 on the first frame alone) ----------------------

FRAGMENTS = {
    "two": 2,
    "three": 3,
    "per-byte": lambda payload: [payload[i:i + 1] for i in range(len(payload))],
    "empty-first-and-last": lambda payload: [b"", payload[:10], payload[10:], b""],
}


@pytest.mark.parametrize("parts", FRAGMENTS.values(), ids=FRAGMENTS.keys())
def test_fragmented_compressed_message(server, parts):
    """A compressed message's payload cut into frames (RSV1 on the first only) is one message:
    text and binary each come back as one echo."""
    with connect(server) as ws:
        for opcode, data in [(TEXT, text_of(3000)), (BINARY, window_payload()[:600])]:
            ws.send_message(opcode, data, parts=parts)
            ws.expect_echo(opcode, data)
        ws.finish()


def test_ping_between_compressed_fragments(server):
    """Pings between the frames of a compressed message are answered at once (§5.4), each
    uncompressed, then the message is echoed whole."""
    data = text_of(4000)
    pieces = split_in(deflate(data), 3)
    with connect(server) as ws:
        ws.send(frame(TEXT, pieces[0], fin=False, rsv=RSV1) + frame(PING, b"one"))
        ws.expect_pong(b"one")
        ws.send(frame(CONT, pieces[1], fin=False) + frame(PING, b"two"))
        ws.expect_pong(b"two")
        ws.send(frame(CONT, pieces[2]))
        ws.expect_echo(TEXT, data)
        ws.finish()


# --- Failures ---------------------------------------------------------------------------------

@pytest.mark.parametrize("first_rsv", [RSV1, 0], ids=["compressed-message", "plain-message"])
def test_rsv1_on_a_continuation_fails(server, first_rsv):
    """RSV1 on a continuation frame is a protocol error (§6.1): 1002, then TCP closes."""
    payload = deflate(text_of(200)) if first_rsv else text_of(200)
    with connect(server) as ws:
        ws.send(frame(TEXT, payload[:50], fin=False, rsv=first_rsv))
        ws.send_quietly(frame(CONT, payload[50:], rsv=RSV1))
        ws.expect_close(1002)


@pytest.mark.parametrize("opcode,payload", [(PING, b"ping"), (PONG, b"pong"),
                                            (CLOSE, close_payload(1000))],
                         ids=["ping", "pong", "close"])
def test_rsv1_on_a_control_frame_fails(server, opcode, payload):
    """Control frames are never compressed (§6.1): RSV1 on one is 1002."""
    with connect(server) as ws:
        ws.send(frame(opcode, payload, rsv=RSV1))
        ws.expect_close(1002)


@pytest.mark.parametrize("offer", [None, f"{PD}; server_max_window_bits=8"],
                         ids=["not-offered", "offer-declined"])
def test_rsv1_without_the_extension_fails(server, offer):
    """With no extension agreed (none offered, or the offer declined) RSV1 means nothing: 1002
    (RFC 6455 §5.2)."""
    with connect(server, offer) as ws:
        assert ws.answer == []
        ws.send(frame(TEXT, deflate(text_of(100)), rsv=RSV1))
        ws.expect_close(1002)


@pytest.mark.parametrize("rsv", [2, RSV1 | 1], ids=["rsv2", "rsv1-and-rsv3"])
def test_other_reserved_bits_still_fail(server, rsv):
    """permessage-deflate gives meaning to RSV1 alone: RSV2 or RSV3 is still 1002."""
    with connect(server) as ws:
        ws.send(frame(BINARY, deflate(b"x" * 100), rsv=rsv))
        ws.expect_close(1002)


INVALID_DEFLATE = {
    "reserved-block-type": b"\xff\xff\xff\xff",
    "stored-block-bad-length": b"\x00\x05\x00\x00\x00Hello",
    "distance-too-far-back": deflate(b"Hello, Hello", zdict=b"Hello, "),
}


@pytest.mark.parametrize("payload", INVALID_DEFLATE.values(), ids=INVALID_DEFLATE.keys())
def test_invalid_deflate_data_is_1007(server, payload):
    """A compressed message that does not inflate (a reserved block type, a stored block whose
    length and its complement differ, a back reference before the start) is 1007; text and
    binary alike."""
    for opcode in (BINARY, TEXT):
        with connect(server) as ws:
            ws.send(frame(opcode, payload, rsv=RSV1))
            ws.expect_close(1007)


INVALID_TEXT = {
    "byte-ff": [deflate(b"valid, then \xff")],
    "truncated-sequence": [deflate("café".encode()[:-1])],
    "surrogate": [deflate(b"\xed\xa0\x80 surrogate")],
    "fragmented": split_in(deflate(b"a" * 100 + b"\xc3\x28" + b"b" * 100), 3),
}


@pytest.mark.parametrize("frames", INVALID_TEXT.values(), ids=INVALID_TEXT.keys())
def test_compressed_text_not_utf8_is_1007(server, frames):
    """Text is checked as UTF-8 once inflated (RFC 6455 §8.1): 1007."""
    with connect(server) as ws:
        ws.send(b"".join(frame(TEXT if i == 0 else CONT, part, fin=i == len(frames) - 1,
                               rsv=RSV1 if i == 0 else 0) for i, part in enumerate(frames)))
        ws.expect_close(1007)


@pytest.mark.parametrize("parts", [1, 4], ids=["one-frame", "four-frames"])
def test_zip_bomb_is_1009(server, parts):
    """2 MiB of zeros compress to about 2 KB: inflated past the 1 MiB limit, it is 1009."""
    bomb = deflate(bytes(2 * MiB))
    assert len(bomb) < 4096
    pieces = split_in(bomb, parts)
    with connect(server) as ws:
        ws.send(b"".join(frame(BINARY if i == 0 else CONT, piece, fin=i == parts - 1,
                               rsv=RSV1 if i == 0 else 0) for i, piece in enumerate(pieces)))
        ws.expect_close(1009)


@pytest.mark.parametrize("size,code", [(SMALL_LIMIT, None), (SMALL_LIMIT + 1, 1009)],
                         ids=["at-the-limit", "one-byte-over"])
def test_inflated_size_against_a_small_limit(small_server, size, code):
    """With ws-echo's limit at 64 KiB, a compressed message that inflates to exactly 64 KiB is
    echoed, and one that inflates to a byte more is 1009, text and binary."""
    for opcode in (TEXT, BINARY):
        with connect(small_server) as ws:
            data = (b"z" if opcode == TEXT else b"\x00") * size
            ws.send_message(opcode, data)
            if code is None:
                ws.expect_echo(opcode, data)
                ws.finish()
            else:
                ws.expect_close(code)


# --- Independent peers: websockets and wsproto ------------------------------------------------

def run_async(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 30))


def mixed_messages(count):
    """count messages of sizes 0 to 200000, text and binary, compressible and not."""
    sizes = [0, 1, 31, 32, 33, 100, 1000, 4096, 65536, 200000]
    messages = []
    for i in range(count):
        size = sizes[i % len(sizes)]
        kind = i // len(sizes) % 3
        if kind == 0:
            messages.append(text_of(size).decode())
        elif kind == 1:
            messages.append(random_bytes(size, seed=i))
        else:
            messages.append(random_text(size).decode() if size <= 4096 else bytes(size))
    return messages


@pytest.mark.parametrize("server_bits", [None, 10], ids=["default-offer", "server-window-10"])
def test_websockets_round_trips(server, server_bits):
    """websockets (compression on by default) agrees permessage-deflate with ws-echo and gets 200
    messages of mixed sizes back, inflating the server's compressed ones with the window agreed;
    then a clean close."""
    import websockets
    from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory

    options = {}
    if server_bits is not None:
        options["extensions"] = [ClientPerMessageDeflateFactory(
            server_max_window_bits=server_bits, client_max_window_bits=True)]
    messages = mixed_messages(200)

    async def main():
        async with websockets.connect(f"ws://127.0.0.1:{server.port}/", max_size=None,
                                      open_timeout=5, close_timeout=5, **options) as ws:
            field = ws.response_headers.get_all("Sec-WebSocket-Extensions")
            names = [extension.name for extension in ws.extensions]
            for message in messages:
                await ws.send(message)
                got = await ws.recv()
                assert got == message, f"the echo of a {len(message)}-long message differs"
            settings = (ws.extensions[0].remote_no_context_takeover,
                        ws.extensions[0].remote_max_window_bits)
        return field, names, settings, ws.close_code

    field, names, settings, code = run_async(main())
    assert field == [answer(server_bits or 15)]
    assert names == ["permessage-deflate"]
    assert settings == (True, server_bits or 15)
    assert code == 1000


@pytest.mark.parametrize("server_bits", [None, 9], ids=["default-offer", "server-window-9"])
def test_wsproto_round_trips(server, server_bits):
    """wsproto with its PerMessageDeflate (which offers client_max_window_bits=15 and
    server_max_window_bits=15, or 9): the extension is agreed, messages whole and fragmented come
    back, and the close is clean."""
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import (AcceptConnection, BytesMessage, CloseConnection, Message, Request,
                                TextMessage)
    from wsproto.extensions import PerMessageDeflate

    extension = PerMessageDeflate(server_max_window_bits=server_bits)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)
    ws = WSConnection(ConnectionType.CLIENT)
    events = []

    def next_event():
        while not events:
            data = sock.recv(65536)
            ws.receive_data(data or None)
            events.extend(ws.events())
            assert data or events, "the server closed the connection"
        return events.pop(0)

    def message():
        parts = []
        while True:
            event = next_event()
            assert isinstance(event, Message), event
            parts.append(event.data)
            if event.message_finished:
                return parts[0][:0].join(parts)

    with sock:
        sock.sendall(ws.send(Request(host=f"127.0.0.1:{server.port}", target="/",
                                     extensions=[extension])))
        accepted = next_event()
        assert isinstance(accepted, AcceptConnection), accepted
        assert [e.name for e in accepted.extensions] == ["permessage-deflate"]
        assert extension.enabled() and extension.server_no_context_takeover
        assert extension.server_max_window_bits == (server_bits or 15)
        for text in ["", "Hello", "κόσμε 𝄞" * 5000, text_of(300000).decode()]:
            sock.sendall(ws.send(TextMessage(data=text)))
            assert message() == text
        for data in [b"", bytes(100000), random_bytes(70000), window_payload()]:
            sock.sendall(ws.send(BytesMessage(data=data)))
            assert message() == data
        sock.sendall(ws.send(TextMessage(data="frag", message_finished=False)) +
                     ws.send(TextMessage(data="mented " * 100, message_finished=True)))
        assert message() == "frag" + "mented " * 100
        sock.sendall(ws.send(CloseConnection(code=1000)))
        event = next_event()
        assert isinstance(event, CloseConnection) and event.code == 1000, event
        assert sock.recv(1) == b""
