"""sxe-httpd --proxy to upstreams given by name, resolved by a name server of the test's own
(--resolver): the name's answer is cached for its TTL, the connections made after it moves go to
its new address, a name that does not exist gets 502 and says why in the log, a silent name
server gets 504, and names that are not names are refused at start."""
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import wait_until
from scripted import Scripted, made
from test_sxe_httpd import exchange, httpd, root  # noqa: F401


class NameServer:
    """DNS over UDP on 127.0.0.1 and a free port: A records from self.names (name -> address,
    with a TTL of 1 s), no AAAA, NXDOMAIN for other names, no answer at all for silent.test.
    self.asked counts the questions by name."""

    def __init__(self):
        self.names = {}
        self.asked = {}
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                query, peer = self.sock.recvfrom(512)
            except OSError:
                return
            answer = self._answer(query)
            if answer is not None:
                self.sock.sendto(answer, peer)

    def _answer(self, query):
        at, labels = 12, []
        while query[at] != 0:
            labels.append(query[at + 1:at + 1 + query[at]].decode().lower())
            at += 1 + query[at]
        name = ".".join(labels)
        qtype = struct.unpack("!H", query[at + 1:at + 3])[0]
        end = at + 5
        with self.lock:
            self.asked[name] = self.asked.get(name, 0) + 1
            address = self.names.get(name)
        if name == "silent.test":
            return None
        records, rcode = b"", 0 if address is not None else 3
        if address is not None and qtype == 1:
            records = struct.pack("!HHHIH", 0xC00C, 1, 1, 1, 4) + socket.inet_aton(address)
        flags = 0x8180 | (query[2] & 1) << 8 | rcode
        head = query[:2] + struct.pack("!HHHHH", flags, 1, 1 if records else 0, 0, 0)
        return head + query[12:end] + records

    def stop(self):
        self.sock.close()


class Named(Scripted):
    """An upstream that answers every request with its name, and closes: each proxied request
    takes a new connection, so each one asks where the name points now."""

    def __init__(self, name, host="127.0.0.1", port=0):
        self.name = name
        super().__init__(host, port)

    def serve(self, conn, number):
        if self.read_head(conn) is not None:
            conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(self.name), self.name.encode()))


@pytest.fixture
def dns():
    server = NameServer()
    yield server
    server.stop()


@pytest.fixture
def upstreams():
    with made(Named) as make:
        yield make


def get(port):
    data = exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout=5)
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body.decode()


def twins(upstreams):
    """Upstreams "A" on 127.0.0.1 and "B" on 127.0.0.2, on one port."""
    for _ in range(20):
        a = upstreams("A")
        try:
            return a, upstreams("B", "127.0.0.2", a.port)
        except OSError:  # the port is taken on 127.0.0.2: another pair
            a.stop()
    pytest.fail("no port free on both 127.0.0.1 and 127.0.0.2")


def test_an_upstream_by_name_follows_the_name(httpd, dns, upstreams):
    a, _ = twins(upstreams)
    dns.names["up.test"] = "127.0.0.1"
    server = httpd("--workers", "1", "--proxy", f"/=up.test:{a.port}",
                   "--resolver", f"127.0.0.1:{dns.port}")
    started = time.monotonic()
    for _ in range(20):
        assert get(server.port) == (200, "A")
    if time.monotonic() - started < 0.9:  # within the answer's TTL: asked once (A and AAAA)
        assert dns.asked["up.test"] <= 2, dns.asked
    dns.names["up.test"] = "127.0.0.2"
    wait_until(lambda: get(server.port) == (200, "B"), timeout=5,
               what="the proxy to follow the name to 127.0.0.2")
    assert get(server.port) == (200, "B")


def test_a_name_that_does_not_exist_gets_502_and_the_log_says_why(httpd, dns):
    server = httpd("--workers", "1", "--proxy", "/=nx.test:80",
                   "--resolver", f"127.0.0.1:{dns.port}")
    assert get(server.port)[0] == 502
    assert get(server.port)[0] == 502
    assert dns.asked["nx.test"] <= 2  # the failure is remembered for a second
    server.stop()
    assert b"cannot resolve nx.test" in server.process.stderr.read()


def test_a_silent_name_server_gets_504(httpd, dns):
    server = httpd("--workers", "1", "--proxy", "/=silent.test:80", "--proxy-timeout", "1",
                   "--resolver", f"127.0.0.1:{dns.port}")
    started = time.monotonic()
    assert get(server.port)[0] == 504
    assert time.monotonic() - started < 4


@pytest.mark.parametrize("args, why", [
    (["--proxy", "/=bad..name:80"], b"HOST an IP address or a host name"),
    (["--proxy", "/=up.test"], b"expected HOST:PORT"),
    (["--proxy", "/=up.test:99999"], b"expected HOST:PORT"),
    (["--proxy", "/=up.test:0"], b"expected HOST:PORT"),
    (["--proxy", "/=[up.test]:80"], b"expected HOST:PORT"),
    (["--proxy", "/=up.test..:80"], b"HOST an IP address or a host name"),
    (["--resolver", "ns.test"], b"expected IP[:PORT] name servers"),
    (["--resolver", ""], b"expected IP[:PORT] name servers"),
])
def test_names_that_are_not_are_refused_at_start(build_dir, root, args, why):
    done = subprocess.run([str(build_dir / "tools" / "sxe-httpd"), "--root", str(root),
                           "--listen", "127.0.0.1:0", *args], capture_output=True, timeout=10)
    assert done.returncode == 2, done.stderr
    assert why in done.stderr
