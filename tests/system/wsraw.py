"""The raw WebSocket peer of the system tests: a frame builder (random mask keys, all three length
forms, any bit set), the opening handshake, RawClient, and the ws-echo servers the tests run
against (direct, and through sxe-httpd's proxy; one with a 64 KiB message limit) as fixtures.
test_websocket.py, test_websocket_messages.py and test_websocket_deflate.py use them."""
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


def echo_all_at_once(server, messages):
    """Sends every (opcode, payload) in one write and expects each echo, in order."""
    with server.connect() as ws:
        done = ws.send_in_background(b"".join(frame(op, payload) for op, payload in messages))
        for opcode, payload in messages:
            ws.expect_echo(opcode, payload)
        done()
        ws.finish()


OPCODES = pytest.mark.parametrize("opcode", [TEXT, BINARY], ids=["text", "binary"])
