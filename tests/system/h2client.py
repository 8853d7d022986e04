"""An HTTP/2 client for the tests, on python3-h2 (Debian's), whose state machine checks every frame
the server sends; raw frames for what a client must not send; and the servers the tests start."""
import signal
import socket
import subprocess
import time

import h2.config
import h2.connection
import h2.events
import pytest

from conftest import _example_server, wait_for_port
from test_sxe_httpd import Httpd, free_port, root  # noqa: F401 (root is a fixture)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class Client:
    """One HTTP/2 connection: requests go out on streams, frames are read until a condition."""

    def __init__(self, port, context=None, window=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        if context is not None:  # TLS: ALPN must choose h2
            self.sock = context.wrap_socket(self.sock, server_hostname="localhost")
            assert self.sock.selected_alpn_protocol() == "h2"
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        if window is not None:  # each stream's window, and the connection's as large
            self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
            if window > 65535:
                self.conn.increment_flow_control_window(window - 65535)
        self.streams = {}
        self.terminated = None
        self.hold_window = False  # True: the data read is not acknowledged
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, path, method="GET", body=None, headers=()):
        stream = self.conn.get_next_available_stream_id()
        self.streams[stream] = {"headers": None, "data": b"", "ended": False, "reset": None}
        fields = [(":method", method), (":path", path), (":scheme", "http"),
                  (":authority", "127.0.0.1"), *headers]
        self.conn.send_headers(stream, fields, end_stream=body is None)
        self.flush()
        if body is not None:
            self.send_body(stream, body)
        return stream

    def send_body(self, stream, body):
        """Sends body as its stream's windows allow, reading the server's updates meanwhile."""
        if not body:
            self.conn.send_data(stream, b"", end_stream=True)
            self.flush()
        at = 0
        while at < len(body):
            room = min(self.conn.local_flow_control_window(stream),
                       self.conn.max_outbound_frame_size, len(body) - at)
            if room == 0:
                self.read_some()
                continue
            self.conn.send_data(stream, body[at:at + room], end_stream=at + room == len(body))
            at += room
            self.flush()

    def read_some(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        for event in self.conn.receive_data(data):
            stream = getattr(event, "stream_id", None)
            if isinstance(event, h2.events.ResponseReceived):
                self.streams[stream]["headers"] = dict(event.headers)
            elif isinstance(event, h2.events.DataReceived):
                if not isinstance(self.streams[stream]["data"], bytearray):  # grows in place
                    self.streams[stream]["data"] = bytearray(self.streams[stream]["data"])
                self.streams[stream]["data"] += event.data
                if not self.hold_window:
                    self.conn.acknowledge_received_data(event.flow_controlled_length, stream)
            elif isinstance(event, h2.events.StreamEnded):
                self.streams[stream]["ended"] = True
            elif isinstance(event, h2.events.StreamReset):
                self.streams[stream]["reset"] = event.error_code
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.terminated = event.error_code
        self.flush()

    def until(self, done, timeout=5.0):
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, "timed out waiting for the server"
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            self.read_some()

    def get(self, path, **options):
        """One whole request: (status, headers, body)."""
        stream = self.request(path, **options)
        self.until(lambda: self.streams[stream]["ended"] or self.streams[stream]["reset"])
        answer = self.streams[stream]
        return int(answer["headers"][":status"]), answer["headers"], answer["data"]

    def close(self):
        self.sock.close()


def frame(kind, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + \
        payload


def frames_until_closed(port, frames):
    """Sends the preface, an empty SETTINGS and frames: the frames the server sent until it closed
    the connection, each as (type, flags, stream, payload). A close that resets (the server did
    not read all that was sent) ends them too."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(PREFACE + frame(4, 0, 0, b"") + frames)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed under the sending: what it sent first is read below
        seen = b""
        try:
            while chunk := sock.recv(65536):
                seen += chunk
        except ConnectionResetError:
            pass
    found, at = [], 0
    while at + 9 <= len(seen):
        length = int.from_bytes(seen[at:at + 3], "big")
        found.append((seen[at + 3], seen[at + 4], int.from_bytes(seen[at + 5:at + 9], "big"),
                      seen[at + 9:at + 9 + length]))
        at += 9 + length
    return found


def goaway_code(port, frames):
    """Sends the preface, an empty SETTINGS and frames: the code of the GOAWAY that ends it."""
    codes = [int.from_bytes(payload[4:8], "big")
             for kind, _, _, payload in frames_until_closed(port, frames) if kind == 7]
    return codes[0] if codes else None


@pytest.fixture
def httpd(build_dir, root):  # noqa: F811
    server = Httpd(build_dir, root)
    yield server
    if server.process.poll() is None:
        assert server.stop() == 0


@pytest.fixture
def example(build_dir):
    """Starts examples/NAME on a free port; each is stopped (and must exit 0) at the end."""
    running = []

    def start(name):
        servers = _example_server(build_dir, name, lambda port: f"127.0.0.1:{port}")
        running.append(servers)
        return next(servers)
    yield start
    for servers in running:
        next(servers, None)


def start_example(build_dir, name, *args):
    port = free_port()
    process = subprocess.Popen([str(build_dir / "examples" / name), f"127.0.0.1:{port}",
                                *map(str, args)], stderr=subprocess.DEVNULL)
    wait_for_port(port, process, name)
    return port, process


def stop_example(process):
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0
