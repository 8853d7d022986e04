"""examples/ws-echo, the real binary over loopback, against RFC 6455 (WebSocket): the opening
handshake (§4: the accept key, 400, 426, 405, 404, sub-protocols), framing in all three length
forms (§5.2), whole or chopped into single bytes, pipelined; masking (§5.3); reserved bits and
opcodes (§5.2); ping and pong (§5.5.2-3); fragmentation with control frames between fragments
(§5.4); UTF-8 checks of text (§8.1), one frame and one byte per fragment; the closing handshake
and its status codes (§5.5.1, §7.4); message limits (1009) and many messages.

Autobahn|Testsuite, the usual conformance suite, needs Python 2 (or its Docker image), which is not
available here, so this file covers its sections 1-7 and 9 from the RFC instead, with its cases as
the model (its section 6 is the Markus Kuhn UTF-8 stress test, rebuilt below). Sections 12-13
(permessage-deflate) come with compression.

Most tests speak raw frames through RawClient below (its own frame builder: random mask keys, all
three length forms, any bit set); a few drive the server with two independent client
implementations, websockets (asyncio) and wsproto (a state machine over a plain socket). One
ws-echo serves the module; a second one runs with a 64 KiB message limit.
"""
import asyncio
import base64
import collections
import functools
import hashlib
import os
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import wait_for_port

TIMEOUT = 3.0  # seconds any single read may take: a broken server fails a test, never hangs it
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
NAMES = {CONT: "continuation", TEXT: "text", BINARY: "binary", CLOSE: "close", PING: "ping",
         PONG: "pong"}
DEFAULT_LIMIT = 1 << 20  # ws-echo's default message limit, 1 MiB
SMALL_LIMIT = 65536      # the limit the second server is started with
KiB, MiB = 1024, 1 << 20


# --- Frames -------------------------------------------------------------------------------------

def apply_mask(data: bytes, key: bytes) -> bytes:
    """RFC 6455 §5.3: byte i is XORed with key[i % 4] (both ways)."""
    if not data:
        return b""
    size = len(data)
    stream = (key * (size // 4 + 1))[:size]
    return (int.from_bytes(data, "big") ^ int.from_bytes(stream, "big")).to_bytes(size, "big")


def frame_head(opcode, length, fin=True, rsv=0, key=None, length_form=None) -> bytes:
    """A frame's header for a payload of length bytes (§5.2). length_form is 7, 16 or 64 (the
    minimal one by default); key is the mask key, None for an unmasked frame."""
    form = length_form or (7 if length < 126 else 16 if length < 65536 else 64)
    first = (0x80 if fin else 0) | (rsv << 4) | opcode
    masked = 0x80 if key is not None else 0
    if form == 7:
        head = bytes([first, masked | length])
    elif form == 16:
        head = bytes([first, masked | 126]) + struct.pack("!H", length)
    else:
        head = bytes([first, masked | 127]) + struct.pack("!Q", length)
    return head + (key or b"")


def frame(opcode, payload=b"", fin=True, rsv=0, mask=True, length_form=None, key=None) -> bytes:
    """A whole client frame, masked with a random key unless mask is False."""
    if mask:
        key = os.urandom(4) if key is None else key
        return frame_head(opcode, len(payload), fin, rsv, key, length_form) + \
            apply_mask(payload, key)
    return frame_head(opcode, len(payload), fin, rsv, None, length_form) + payload


def fragmented(opcode, parts, **options) -> bytes:
    """One message as len(parts) frames: opcode first, then continuations, FIN on the last."""
    return b"".join(frame(opcode if i == 0 else CONT, part, fin=i == len(parts) - 1, **options)
                    for i, part in enumerate(parts))


def split(data: bytes, size: int) -> list:
    """data in pieces of size bytes (at least one piece, maybe empty)."""
    return [data[i:i + size] for i in range(0, len(data), size)] or [b""]


def split_in(data: bytes, count: int) -> list:
    """data in count pieces as even as can be (pieces may be empty when count > len(data))."""
    edges = [len(data) * i // count for i in range(count + 1)]
    return [data[edges[i]:edges[i + 1]] for i in range(count)]


def close_payload(code, reason=b"") -> bytes:
    return struct.pack("!H", code) + reason


@functools.lru_cache(maxsize=None)
def text_of(length: int) -> bytes:
    """Valid UTF-8 of exactly length bytes, with 1-, 2-, 3- and 4-byte characters."""
    unit = "sxe κόσμε € 𝄞 ".encode()
    data = (unit * (length // len(unit) + 1))[:length]
    while True:
        try:
            data.decode()
            return data
        except UnicodeDecodeError as error:  # a character cut at the end: pad with dots
            data = data[:error.start] + b"." * (length - error.start)


@functools.lru_cache(maxsize=None)
def binary_of(length: int) -> bytes:
    """length bytes taking every value, with no period of 4 (masks must not cancel out)."""
    unit = bytes(range(256)) + bytes(range(254, -1, -1))  # 511 bytes
    return (unit * (length // len(unit) + 1))[:length]


def payload_of(length, opcode):
    return text_of(length) if opcode == TEXT else binary_of(length)


def describe(fin, rsv, opcode, payload) -> str:
    name = NAMES.get(opcode, f"opcode {opcode:#x}")
    if opcode == CLOSE and len(payload) >= 2:
        return f"close {struct.unpack('!H', payload[:2])[0]} {payload[2:]!r}"
    shown = payload[:40] + (b"..." if len(payload) > 40 else b"")
    return f"{name}{'' if fin else ' (FIN=0)'} of {len(payload)} bytes {shown!r}"


# --- HTTP ---------------------------------------------------------------------------------------

def new_key() -> str:
    return base64.b64encode(os.urandom(16)).decode()


def accept_for(key: str) -> str:
    """Sec-WebSocket-Accept for a key (§4.2.2 item 5.4): Base64 of SHA-1 of key + GUID."""
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def handshake(key=None, fields=None, path="/", method="GET", version="HTTP/1.1",
              lower=False) -> bytes:
    """A client's opening handshake (§4.1). fields replaces fields by name (any case), adds new
    ones, drops those set to None and repeats those given a list; lower writes names in lower
    case."""
    standard = [("Host", "127.0.0.1"), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
                ("Sec-WebSocket-Key", key or new_key()), ("Sec-WebSocket-Version", "13")]
    changes = {name.lower(): (name, value) for name, value in (fields or {}).items()}
    lines = []
    for name, value in standard + [change for change in changes.values()
                                   if change[0].lower() not in {n.lower() for n, _ in standard}]:
        name, value = changes.get(name.lower(), (name, value))
        for one in value if isinstance(value, list) else [value]:
            if one is not None:
                lines.append(f"{name.lower() if lower else name}: {one}\r\n")
    return f"{method} {path} {version}\r\n{''.join(lines)}\r\n".encode()


class Response:
    """An HTTP response's status, fields (names in lower case) and head as received."""

    def __init__(self, head: bytes):
        self.head = head
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.fields = [(name.strip().lower(), value.strip())
                       for name, _, value in (line.partition(":") for line in lines[1:] if line)]

    def values(self, name):
        return [value for field, value in self.fields if field == name]

    def tokens(self, name):
        """A list field's members, in lower case, over all its lines (RFC 9110 §5.6.1)."""
        return [token.strip().lower() for value in self.values(name) for token in value.split(",")
                if token.strip()]

    def __repr__(self):
        return repr(self.head)


# --- The raw client -----------------------------------------------------------------------------

class RawClient:
    """A WebSocket client of raw frames: it opens the connection with a handshake it checks, then
    sends any frame, well-formed or not, and reads frames checking what RFC 6455 asks of a
    server's frames (§5.1: never masked; no reserved bits without an extension; minimal lengths;
    control frames whole and at most 125 bytes)."""

    def __init__(self, port, key=None, request=None, protocols=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer, self.offset = bytearray(), 0
        self.key = key or new_key()
        fields = {"Sec-WebSocket-Protocol": protocols} if protocols is not None else None
        self.sock.sendall(request or handshake(self.key, fields))
        self.response = self.read_response()
        response = self.response
        assert response.status == 101, response
        assert response.tokens("upgrade") == ["websocket"], response
        assert "upgrade" in response.tokens("connection"), response
        assert response.values("sec-websocket-accept") == [accept_for(self.key.strip())], response
        assert not response.values("sec-websocket-extensions"), response  # none was agreed

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.sock.close()

    # Bytes in and out.

    def recv_exactly(self, size) -> bytes:
        while len(self.buffer) - self.offset < size:
            chunk = self.sock.recv(max(65536, size - (len(self.buffer) - self.offset)))
            if not chunk:
                raise AssertionError(f"the server closed the connection: {size} bytes wanted, "
                                     f"{len(self.buffer) - self.offset} there")
            if self.offset > MiB:
                del self.buffer[:self.offset]
                self.offset = 0
            self.buffer += chunk
        data = bytes(self.buffer[self.offset:self.offset + size])
        self.offset += size
        return data

    def read_response(self) -> Response:
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            assert chunk, f"the server closed the connection after {bytes(self.buffer)!r}"
            self.buffer += chunk
        head, _, rest = bytes(self.buffer).partition(b"\r\n\r\n")
        self.buffer, self.offset = bytearray(rest), 0
        return Response(head)

    def send(self, data: bytes):
        self.sock.sendall(data)

    def send_quietly(self, data: bytes):
        """Sends what the server may already have stopped reading (after it failed us)."""
        try:
            self.sock.sendall(data)
        except OSError:
            pass

    def send_chopped(self, data: bytes, size=1, head=14, pause=0.001):
        """The first head bytes one at a time with a pause (the server sees a header in pieces),
        then the rest size bytes at a time."""
        for i in range(min(head, len(data))):
            self.sock.sendall(data[i:i + 1])
            time.sleep(pause)  # the sleep is the test: a client whose bytes come apart
        for i in range(head, len(data), size):
            self.sock.sendall(data[i:i + size])

    def send_in_background(self, data: bytes, quietly=False):
        """Sends data from a thread while the test reads (no deadlock on big pipelines). Returns
        a function that waits for the sender and (unless quietly) re-raises its error."""
        errors = []

        def run():
            try:
                self.sock.sendall(data)
            except OSError as error:
                errors.append(error)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()

        def done():
            thread.join(timeout=10)
            assert not thread.is_alive(), "the sender is still blocked"
            if errors and not quietly:
                raise errors[0]

        return done

    def send_frame(self, opcode, payload=b"", fin=True, rsv=0, mask=True, length_form=None):
        self.send(frame(opcode, payload, fin, rsv, mask, length_form))

    # Frames in.

    def check_rsv(self, fin, rsv, opcode, payload):
        """§5.2: no RSV bits without an extension (a client that agrees one says otherwise)."""
        assert rsv == 0, f"§5.2: RSV bits {rsv:#o} set with no extension, in " + \
            describe(fin, rsv, opcode, payload)

    def read_frame(self):
        """The next frame from the server: (fin, rsv, opcode, payload)."""
        first, second = self.recv_exactly(2)
        fin, rsv, opcode = bool(first & 0x80), (first >> 4) & 7, first & 0x0F
        assert not second & 0x80, "§5.1: a server MUST NOT mask the frames it sends"
        length = second & 0x7F
        if length == 126:
            length = struct.unpack("!H", self.recv_exactly(2))[0]
            assert length >= 126, f"§5.2: a 16-bit length of {length} is not minimal"
        elif length == 127:
            length = struct.unpack("!Q", self.recv_exactly(8))[0]
            assert 65536 <= length < 1 << 63, f"§5.2: a 64-bit length of {length}"
        payload = self.recv_exactly(length)
        self.check_rsv(fin, rsv, opcode, payload)
        assert opcode in NAMES, f"§5.2: the server sent reserved opcode {opcode:#x}"
        if opcode >= CLOSE:
            assert fin and length <= 125, "§5.5: a control frame fragmented or over 125 bytes"
        return fin, rsv, opcode, payload

    def read_message(self):
        """The next frame, which must be a whole text or binary message: (opcode, payload)."""
        fin, rsv, opcode, payload = self.read_frame()
        assert opcode in (TEXT, BINARY) and fin, \
            f"expected a whole message, got {describe(fin, rsv, opcode, payload)}"
        return opcode, payload

    def expect_echo(self, opcode, payload):
        fin, rsv, got, data = self.read_frame()
        assert (got, fin) == (opcode, True), f"expected the echo ({NAMES[opcode]}, " \
            f"{len(payload)} bytes), got {describe(fin, rsv, got, data)}"
        if data != payload:
            at = next((i for i, (a, b) in enumerate(zip(data, payload)) if a != b),
                      min(len(data), len(payload)))
            raise AssertionError(f"the echo differs: {len(data)} bytes for {len(payload)}, "
                                 f"first difference at byte {at}")

    def expect_pong(self, payload):
        fin, rsv, opcode, data = self.read_frame()
        assert (opcode, data) == (PONG, payload), \
            f"expected pong {payload[:40]!r}, got {describe(fin, rsv, opcode, data)}"

    def expect_close(self, codes, reply=True):
        """The next frame must be a close with one of codes (an int, or a tuple where None stands
        for a close without a code); then, after answering it (when reply: §5.5.1, a client that
        did not send a close yet must), the server must close TCP within 2 s, sending nothing
        more. Returns (code, reason)."""
        codes = codes if isinstance(codes, tuple) else (codes,)
        fin, rsv, opcode, payload = self.read_frame()
        assert opcode == CLOSE, \
            f"expected a close {codes}, got {describe(fin, rsv, opcode, payload)}"
        assert len(payload) != 1, "§5.5.1: a close payload of one byte"
        code = struct.unpack("!H", payload[:2])[0] if payload else None
        try:
            reason = payload[2:].decode()
        except UnicodeDecodeError:
            raise AssertionError(f"§5.5.1: the close reason is not UTF-8: {payload!r}") from None
        assert code in codes, f"expected a close {codes}, got close {code} {reason!r}"
        assert code is None or 1000 <= code <= 4999 and code not in (1004, 1005, 1006, 1015), \
            f"§7.4: the server sent close code {code}"
        if reply:
            self.send_quietly(frame(CLOSE, payload[:2]))
        self.expect_eof()
        return code, reason

    def expect_eof(self, timeout=2.0):
        """The server closes TCP (within timeout) without sending another byte."""
        left = bytes(self.buffer[self.offset:])
        assert not left, f"the server sent {left[:60]!r} after its close frame"
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            return
        except socket.timeout:
            raise AssertionError(f"the server did not close TCP within {timeout} s") from None
        assert data == b"", f"the server sent {data[:60]!r} after its close frame"

    def finish(self):
        """The closing handshake from this side (§7.1.2): close 1000 answered by close 1000, then
        the server closes TCP. Proves the connection was still in order."""
        self.send_frame(CLOSE, close_payload(1000))
        self.expect_close(1000, reply=False)


# --- Servers ------------------------------------------------------------------------------------

def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """ws-echo on a free loopback port, its output in a file (a pipe nobody reads could fill)."""

    def __init__(self, build_dir, log_path, *args):
        program = build_dir / "examples" / "ws-echo"
        assert program.exists(), f"{program} was not built"
        self.port = free_port()
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen([str(program), f"127.0.0.1:{self.port}", *args],
                                            stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_port(self.port, self.process, "ws-echo")
        except BaseException:
            self.process.kill()
            self.process.wait()
            raise

    def connect(self, **options) -> RawClient:
        assert self.process.poll() is None, f"ws-echo exited {self.process.returncode}: " \
            f"{self.log()}"
        return RawClient(self.port, **options)

    def exchange(self, request: bytes) -> Response:
        """Sends request on a new connection and returns the response's head."""
        assert self.process.poll() is None, f"ws-echo exited {self.process.returncode}"
        with socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT) as sock:
            sock.sendall(request)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                assert chunk, f"the server closed the connection after {data!r}"
                data += chunk
            return Response(data.partition(b"\r\n\r\n")[0])

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-2000:]

    def stop(self):
        """SIGTERM; returns the exit status (it must stop within 10 s)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return "still running 10 s after SIGTERM"


class Proxied(Server):
    """ws-echo behind sxe-httpd's proxy (one worker): every check of the module passes through the
    proxy's upgrade and tunnel, and must come out the same."""

    def __init__(self, build_dir, log_path, *args):
        super().__init__(build_dir, log_path, *args)
        program = build_dir / "tools" / "sxe-httpd"
        upstream = self.port
        self.port = free_port()
        root = log_path.parent / "www"
        root.mkdir()
        with open(log_path.with_suffix(".proxy.log"), "wb") as log:
            self.proxy = subprocess.Popen(
                [str(program), "--root", str(root), "--listen", f"127.0.0.1:{self.port}",
                 "--workers", "1", "--proxy", f"/=127.0.0.1:{upstream}"],
                stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_port(self.port, self.proxy, "sxe-httpd")
        except BaseException:
            self.proxy.kill()
            super().stop()
            raise

    def stop(self):
        self.proxy.send_signal(signal.SIGTERM)
        assert self.proxy.wait(timeout=10) == 0
        return super().stop()


@pytest.fixture(scope="module", params=[Server, Proxied], ids=["direct", "proxied"])
def server(request, build_dir, tmp_path_factory):
    """One ws-echo with the default message limit (1 MiB) for most of the module: reached
    directly, and through sxe-httpd's proxy."""
    echo = request.param(build_dir, tmp_path_factory.mktemp("ws-echo") / "ws-echo.log")
    yield echo
    assert echo.stop() == 0, echo.log()


@pytest.fixture(scope="module")
def small_server(build_dir, tmp_path_factory):
    """ws-echo with a message limit of 64 KiB (its second argument)."""
    echo = Server(build_dir, tmp_path_factory.mktemp("ws-echo-small") / "ws-echo.log",
                  str(SMALL_LIMIT))
    yield echo
    assert echo.stop() == 0, echo.log()


OPCODES = pytest.mark.parametrize("opcode", [TEXT, BINARY], ids=["text", "binary"])


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


def echo_all_at_once(server, messages):
    """Sends every (opcode, payload) in one write and expects each echo, in order."""
    with server.connect() as ws:
        done = ws.send_in_background(b"".join(frame(op, payload) for op, payload in messages))
        for opcode, payload in messages:
            ws.expect_echo(opcode, payload)
        done()
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
