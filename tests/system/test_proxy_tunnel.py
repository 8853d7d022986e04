"""Upgrades through sxe-httpd's proxy: an upgrade request on a proxied prefix goes to the upstream
with its Upgrade, and a 101 joins the client's connection and the upstream's into a tunnel that
relays bytes both ways unchanged, with backpressure, half-closes, closes and an idle timeout.
(WebSocket through the proxy, checked frame by frame, is test_websocket.py's "proxied" server and
test_ws_chat.py's in Chromium.) The upstream here is a scripted socket that speaks a protocol of
its own after the 101: an echo, or a flood of bytes."""
import hashlib
import socket
import threading
import time

import pytest

from conftest import wait_until
from scripted import Scripted, made
from test_proxy import proxy  # noqa: F401 (fixture)
from test_sxe_httpd import httpd, root  # noqa: F401 (fixtures)

UPGRADE = (b"GET /up/%s HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: raw-test\r\n"
           b"X-Sent: along\r\n\r\n")


class Switching(Scripted):
    """An upstream that answers upgrade requests by path: /echo (101, then echoes; on the
    proxy's FIN it says "bye" and closes), /flood?N (101, then N bytes, then the close),
    /say-and-go (101 and 4 bytes in one send, then the close), /sink (101, then it reads and
    never writes), /silent (101, then nothing), /no-field (101 without Upgrade), /refuse (200,
    no switch)."""

    def __init__(self):
        self.heads = []
        self.sunk = 0  # bytes /sink took
        self.ended = threading.Event()  # a tunnel's upstream side saw the proxy close or FIN
        super().__init__()

    def serve(self, conn, number):
        if (read := self.read_head(conn)) is None:
            return
        head, rest = read
        self.heads.append(head.decode("latin-1"))
        path = head.split(b" ")[1].decode()
        switched = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n" \
                   b"Upgrade: raw-test\r\nX-Answer: yes\r\n\r\n"
        if path.endswith("/refuse"):
            # It closes once it has answered (every connection here serves one request), and
            # says so: else the proxy may send the next request on it as it closes (a request
            # to switch is never sent twice) and answer 502.
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\n"
                         b"refused")
        elif path.endswith("/no-field"):
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n")
        elif "/flood" in path:
            conn.sendall(switched)
            block = bytes(range(256)) * 256
            left = int(path.partition("?")[2])
            while left > 0:
                conn.sendall(block[:min(left, len(block))])
                left -= len(block)
        elif path.endswith("/say-and-go"):
            conn.sendall(switched + b"said")  # and the close at once
        elif path.endswith("/sink"):  # takes everything, says nothing
            conn.sendall(switched)
            while chunk := conn.recv(65536):
                self.sunk += len(chunk)
            self.ended.set()
        elif path.endswith("/silent"):
            conn.sendall(switched)
            conn.recv(1)
            self.ended.set()
        else:
            conn.sendall(switched + rest)  # what came behind the request is echoed too
            while chunk := conn.recv(65536):
                conn.sendall(chunk)
            self.ended.set()
            conn.sendall(b"bye")


@pytest.fixture
def switching():
    with made(Switching) as make:
        yield make()


def opened(port, path, behind=b""):
    """A client socket whose upgrade was answered 101: (socket, the 101's head)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(UPGRADE % path.encode() + behind)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(1)
    return sock, data.decode("latin-1")


def read_exactly(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(min(65536, count - len(data)))
        assert chunk, f"closed after {len(data)} of {count} bytes"
        data += chunk
    return data


def test_an_upgrade_joins_the_client_and_the_upstream(proxy, switching):
    server = proxy("--proxy", f"/up/=127.0.0.1:{switching.port}", "--access-log", "-")
    sock, head = opened(server.port, "echo", behind=b"early bytes|")
    with sock:
        assert head.startswith("HTTP/1.1 101 Switching Protocols\r\n"), head
        assert "Upgrade: raw-test\r\n" in head and "X-Answer: yes\r\n" in head
        assert "Connection: upgrade\r\n" in head and "Via: 1.1 sxe-httpd\r\n" in head
        assert read_exactly(sock, 12) == b"early bytes|"  # sent before the 101, relayed after
        for size in (1, 1000, 300_000):
            payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
            sock.sendall(payload)
            assert read_exactly(sock, size) == payload
        sock.shutdown(socket.SHUT_WR)  # our FIN reaches the upstream, which answers after it
        assert read_exactly(sock, 3) == b"bye"
        assert sock.recv(1) == b""  # and its close reaches us
    up_head = switching.heads[0]
    assert "Upgrade: raw-test\r\n" in up_head and "Connection: upgrade\r\n" in up_head
    assert "X-Sent: along\r\n" in up_head and "X-Forwarded-For: 127.0.0.1\r\n" in up_head
    assert server.stop() == 0
    assert b'"GET /up/echo HTTP/1.1" 101 0' in server.process.stdout.read()


def test_bytes_with_the_101_arrive_before_the_upstreams_close(proxy, switching):
    """The 101, its protocol's first bytes and the close, all at once: the bytes are the new
    handlers' first, and the end of the stream comes after them (it once overtook them, and the
    client's side was shut before they were written)."""
    server = proxy("--proxy", f"/up/=127.0.0.1:{switching.port}")
    for _ in range(20):
        sock, _ = opened(server.port, "say-and-go")
        with sock:
            assert read_exactly(sock, 4) == b"said"
            assert sock.recv(1) == b""


def test_a_client_that_closes_closes_the_upstream(proxy, switching):
    server = proxy("--proxy", f"/up/=127.0.0.1:{switching.port}")
    sock, _ = opened(server.port, "silent")
    sock.close()
    assert switching.ended.wait(5)


def test_a_flood_to_a_slow_reader_is_held_back_not_buffered(proxy, switching):
    """50 MB from the upstream to a client that reads nothing for a second: the proxy stops
    reading the upstream while the client is behind, so its memory stays small, and every byte
    arrives in order."""
    size = 50 << 20
    server = proxy("--proxy", f"/up/=127.0.0.1:{switching.port}")
    sock, _ = opened(server.port, f"flood?{size}")
    with sock:
        time.sleep(1)
        worker = int(open(f"/proc/{server.process.pid}/task/{server.process.pid}/children")
                     .read().split()[0])
        rss_kb = int(next(line for line in open(f"/proc/{worker}/status")
                          if line.startswith("VmRSS:")).split()[1])
        assert rss_kb < 16 << 10, f"the proxy holds {rss_kb} KB for a client that reads nothing"
        digest, got = hashlib.sha256(), 0
        sock.settimeout(10)
        while chunk := sock.recv(1 << 20):
            digest.update(chunk)
            got += len(chunk)
    block = bytes(range(256)) * 256
    expected = hashlib.sha256(block * (size // len(block))).hexdigest()
    assert got == size and digest.hexdigest() == expected


def test_a_tunnel_silent_both_ways_is_closed_and_traffic_keeps_it(proxy, switching):
    server = proxy("--proxy", f"/up/=127.0.0.1:{switching.port}", "--idle-timeout", "1")
    busy, _ = opened(server.port, "echo")
    quiet, _ = opened(server.port, "silent")
    with busy, quiet:
        quiet.settimeout(5)
        started = time.monotonic()
        for _ in range(8):  # 3.2 s of a byte each way every 0.4 s
            busy.sendall(b".")
            assert read_exactly(busy, 1) == b"."
            time.sleep(0.4)
        assert quiet.recv(1) == b""  # closed meanwhile, silent past its second
        assert time.monotonic() - started < 5
        busy.sendall(b"still")
        assert read_exactly(busy, 5) == b"still"


def test_traffic_one_way_keeps_the_silent_side_open(proxy, switching):
    """Bytes only from the client for 3 s, with --idle-timeout 1: the upstream's side hears
    nothing of its own all that time, yet stays open, since the tunnel is not silent."""
    server = proxy("--proxy", f"/up/=127.0.0.1:{switching.port}", "--idle-timeout", "1")
    sock, _ = opened(server.port, "sink")
    with sock:
        for _ in range(8):
            sock.sendall(b"one way|")
            time.sleep(0.4)
        wait_until(lambda: switching.sunk == 64, what="every byte to reach the upstream")
        assert not switching.ended.is_set()
    assert switching.ended.wait(5)  # and the client's close still reaches it


def test_an_upstream_that_does_not_switch_is_answered_as_usual(proxy, switching):
    server = proxy("--proxy", f"/up/=127.0.0.1:{switching.port}")
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    with sock:
        sock.sendall(UPGRADE % b"refuse")
        data = b""
        while not data.endswith(b"refused"):
            data += sock.recv(65536)
        assert data.startswith(b"HTTP/1.1 200 OK\r\n")
        sock.sendall(UPGRADE % b"refuse")  # and the connection is still HTTP
        data = b""
        while not data.endswith(b"refused"):
            data += sock.recv(65536)


def test_a_101_that_does_not_say_to_what_is_a_bad_gateway(proxy, switching):
    server = proxy("--proxy", f"/up/=127.0.0.1:{switching.port}")
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    with sock:
        sock.sendall(UPGRADE % b"no-field")
        data = sock.recv(65536)
    assert data.startswith(b"HTTP/1.1 502 "), data


def test_many_tunnels_at_once(proxy, switching):
    server = proxy("--proxy", f"/up/=127.0.0.1:{switching.port}")
    socks = [opened(server.port, "echo")[0] for _ in range(200)]
    for i, sock in enumerate(socks):
        sock.sendall(b"%d|" % i)
    for i, sock in enumerate(socks):
        expected = b"%d|" % i
        assert read_exactly(sock, len(expected)) == expected
        sock.close()
    wait_until(lambda: len(switching.heads) == 200, what="every upgrade to reach the upstream")
