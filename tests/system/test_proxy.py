"""sxe-httpd --proxy, the real binary, in front of scripted upstreams over loopback: re-framed
requests (hop-by-hop fields dropped, X-Forwarded-For and Via added), kept-alive upstream
connections, large answers streamed to slow readers, upstream faults (refused, hung, malformed,
cut off), balancing and passive health checks, and a client that leaves."""
import hashlib
import json
import os
import socket
import subprocess
import threading
import time

import pytest

from conftest import read_reply
from scripted import Scripted, made
from test_sxe_httpd import exchange, free_port, httpd, refused_port, root  # noqa: F401


class Upstream(Scripted):
    """A scripted HTTP/1.1 upstream: keep-alive, one thread per connection. Paths:
    /big?n=N (N bytes by Content-Length), /chunked?n=N, /hang, /bad (Content-Length with
    Transfer-Encoding), /cut (100 bytes promised, 10 sent, then the close), /digest (the
    body's length and SHA-256, read as it comes; /digest?wait=S first waits S seconds), /early
    (413 before reading the body, then the close); anything else is answered with a JSON echo
    of the request and the connection's number. Request bodies come by Content-Length or
    chunked."""

    def __init__(self, name="up"):
        self.name = name
        self.token = os.urandom(4).hex()
        self.closed = 0
        self.most_heads = 0  # the most request heads one read brought
        self.heads = 0  # request heads read, in all
        super().__init__()

    def served(self, number):
        with self.lock:
            self.closed += 1

    def serve(self, conn, number):
        data = b""
        while True:
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
                self.most_heads = max(self.most_heads, data.count(b"\r\n\r\n"))
            head, _, data = data.partition(b"\r\n\r\n")
            with self.lock:
                self.heads += 1
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ")
            fields = [line.split(": ", 1) for line in lines[1:]]
            named = dict((k.lower(), v) for k, v in fields)
            if target.endswith("/early"):
                conn.sendall(b"HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n"
                             b"Content-Length: 5\r\n\r\nearly")
                conn.shutdown(socket.SHUT_WR)
                while conn.recv(65536):  # the rest is read and dropped, then the close
                    pass
                return
            digest = hashlib.sha256() if "/digest" in target else None
            if "wait=" in target:  # the sleep is the test: an upstream slow to read
                time.sleep(float(target.partition("wait=")[2]))
            body, data = self._body(conn, data, named, digest)
            if digest is not None:
                body = json.dumps({"length": body, "sha256": digest.hexdigest(),
                                   "framing": named.get("transfer-encoding",
                                                        named.get("content-length"))})
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                             % len(body) + body.encode())
            elif not self._answer(conn, number, method, target, fields, body):
                return

    @staticmethod
    def _body(conn, data, named, digest):
        """Reads a request body after its head: (the body, or its length when digested, and
        the bytes after it)."""
        def more():
            chunk = conn.recv(1 << 20)
            if not chunk:
                raise OSError("closed in the body")
            return chunk

        def take(data, count):
            kept, length = bytearray(), 0
            while count > 0:
                if not data:
                    data = more()
                piece, data = data[:count], data[count:]
                count -= len(piece)
                length += len(piece)
                if digest is not None:
                    digest.update(piece)
                else:
                    kept += piece
            return (length if digest is not None else bytes(kept)), data

        if named.get("transfer-encoding") != "chunked":
            return take(data, int(named.get("content-length", 0)))
        body, length = b"", 0
        while True:
            while b"\r\n" not in data:
                data += more()
            line, _, data = data.partition(b"\r\n")
            size = int(line, 16)
            if size == 0:
                while len(data) < 2:
                    data += more()
                return (length if digest is not None else body), data[2:]
            piece, data = take(data, size)
            if digest is not None:
                length += piece
            else:
                body += piece
            while len(data) < 2:
                data += more()
            data = data[2:]

    def _answer(self, conn, number, method, target, fields, body):
        path, _, query = target.partition("?")
        size = int(query[2:]) if query.startswith("n=") else 0
        if path.endswith("/big"):
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n".encode())
            block = bytes(range(256)) * 256
            for at in range(0, size, len(block)):
                conn.sendall(block[:min(len(block), size - at)])
        elif path.endswith("/chunked"):
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            block = bytes(range(256)) * 64
            for at in range(0, size, len(block)):
                piece = block[:min(len(block), size - at)]
                conn.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            conn.sendall(b"0\r\n\r\n")
        elif path.endswith("/hang"):
            conn.recv(1)  # until the proxy gives up and closes
            return False
        elif path.endswith("/bad"):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        elif path.endswith("/cut"):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            return False
        else:
            echo = json.dumps({"name": self.name, "token": self.token, "connection": number,
                               "method": method, "target": target, "fields": fields,
                               "body": body.decode("latin-1")}).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(echo) + (b"" if method == "HEAD" else echo))
        return True

@pytest.fixture
def upstreams():
    with made(Upstream) as make:
        yield make


@pytest.fixture
def proxy(httpd):
    """sxe-httpd on one worker, with test_sxe_httpd's root for what is not proxied."""
    return lambda *args: httpd("--workers", "1", *args)


def request(port, raw, timeout=5.0):
    """Sends one raw request on a new connection (it should say close); returns status, fields
    (lower-case names, a list per name) and body."""
    return parse_reply(exchange(port, raw, timeout))


def parse_reply(data):
    """status, fields (lower-case names, a list per name) and body of a whole response."""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(": ")
        fields.setdefault(name.lower(), []).append(value)
    return int(lines[0].split(" ")[1]), fields, body


def echoed(port, path="/api/echo", extra="", method="GET", body=b""):
    raw = (f"{method} {path} HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n{extra}"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    status, fields, answer = request(port, raw)
    assert status == 200, answer
    return fields, json.loads(answer)


def field(echo, name):
    return [v for k, v in echo["fields"] if k.lower() == name.lower()]


def test_forwards_requests_re_framed_with_forwarding_fields(proxy, upstreams):
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    fields, echo = echoed(server.port, "/api/echo?x=1")
    assert echo["token"] == up.token  # our upstream answered, through our proxy
    assert echo["method"] == "GET" and echo["target"] == "/api/echo?x=1"
    assert field(echo, "Host") == ["example.test"]
    assert field(echo, "X-Forwarded-For") == ["127.0.0.1"]
    assert field(echo, "Via") == ["1.1 sxe-httpd"]
    assert fields["via"] == ["1.1 sxe-httpd"]
    assert fields["server"] == ["sxe"] and "x-hop" not in fields and "keep-alive" not in fields
    _, echo = echoed(server.port, method="POST", body=b"a body")
    assert echo["method"] == "POST" and echo["body"] == "a body"
    assert field(echo, "Content-Length") == ["6"]
    # A chunked request body goes on chunked, re-framed by us (the chunk extension stays behind).
    raw = (b"PUT /api/put HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
    status, _, body = request(server.port, raw)
    echo = json.loads(body)
    assert status == 200 and echo["body"] == "abcde"
    assert field(echo, "Content-Length") == [] and field(echo, "Transfer-Encoding") == ["chunked"]
    status, fields, body = request(
        server.port, b"HEAD /api/head HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert status == 200 and body == b"" and int(fields["content-length"][0]) > 0
    status, _, body = request(server.port, b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert status == 200 and body == b"<h1>home</h1>\n"  # not a proxied prefix: a file
    # An HTTP/1.0 request without a Host, in the exchange a request with one used before: the
    # upstream gets the client's Host (the upstream's address), not the last request's.
    status, _, body = request(server.port, b"GET /api/old HTTP/1.0\r\n\r\n")
    assert status == 200 and field(json.loads(body), "Host") == [f"127.0.0.1:{up.port}"], body
    # Long fields, the longest first (the room the forwarded head takes counts every field, the
    # first too, beyond what the exchange holds inline).
    big, long = b"b" * 3000, b"l" * 600
    status, _, body = request(server.port, b"GET /api/long-field HTTP/1.1\r\nX-Big: " + big +
                              b"\r\nX-Long: " + long + b"\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert status == 200, (status, body[:300])
    assert field(json.loads(body), "X-Big") == [big.decode()]
    assert field(json.loads(body), "X-Long") == [long.decode()]


def test_hop_by_hop_fields_stay_behind_and_forwarding_fields_grow(proxy, upstreams):
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    _, echo = echoed(server.port, extra="Connection: close, X-Secret\r\nX-Secret: 1\r\n"
                     "Keep-Alive: timeout=9\r\nTE: trailers\r\nProxy-Connection: x\r\n"
                     "X-Forwarded-For: 10.0.0.1\r\nVia: 1.0 edge\r\nX-Kept: yes\r\n")
    names = {k.lower() for k, _ in echo["fields"]}
    assert not names & {"x-secret", "keep-alive", "te", "proxy-connection", "expect"}
    assert field(echo, "Connection") == []  # the client's close was for its own hop
    assert field(echo, "X-Kept") == ["yes"]
    assert field(echo, "X-Forwarded-For") == ["10.0.0.1, 127.0.0.1"]
    assert field(echo, "Via") == ["1.0 edge, 1.1 sxe-httpd"]
    # A smuggling-shaped request never reaches the upstream: the parser refuses it first.
    status, _, _ = request(server.port, b"POST /api/x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    assert status == 400
    assert up.connections == 1


def test_upstream_connections_are_kept_alive(proxy, upstreams):
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    seen = {echoed(server.port)[1]["connection"] for _ in range(30)}
    assert len(seen) == 1 and up.connections == 1
    with socket.create_connection(("127.0.0.1", server.port)) as sock:  # pipelined, in order
        sock.sendall(b"".join(b"GET /api/p%d HTTP/1.1\r\nHost: h\r\n\r\n" % i for i in range(5)))
        data = b""
        while data.count(b"HTTP/1.1 200") < 5 or not data.endswith(b"}"):
            data += sock.recv(65536)
    targets = [json.loads(part.split(b"\r\n\r\n", 1)[1].split(b"HTTP/1.1")[0])["target"]
               for part in data.split(b"HTTP/1.1 200 OK")[1:]]
    assert targets == [f"/api/p{i}" for i in range(5)]


def bursts(port, rounds=5, clients=40):
    """From many kept-alive clients, one request each at once, rounds times; checks each answer."""
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(clients)]
    try:
        for round_ in range(rounds):
            for i, sock in enumerate(socks):  # all at once: the proxy takes many in a turn
                sock.sendall(b"GET /api/c%d/r%d HTTP/1.1\r\nHost: h\r\n\r\n" % (i, round_))
            for i, sock in enumerate(socks):
                head, _, body = read_reply(sock).partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 200 ")
                assert json.loads(body)["target"] == f"/api/c{i}/r{round_}"
    finally:
        for sock in socks:
            sock.close()


def test_requests_of_a_turn_share_a_pipelined_upstream_connection(proxy, upstreams):
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}", "--proxy-pipeline", "8")
    echoed(server.port)  # a connection that has carried a whole answer
    bursts(server.port)
    _, echo = echoed(server.port, method="POST", body=b"x")  # not idempotent: alone
    assert echo["body"] == "x"
    assert up.most_heads > 1  # the requests left in batches
    alone = upstreams()  # without the option, one request per connection at a time
    server = proxy("--proxy", f"/api/=127.0.0.1:{alone.port}")
    bursts(server.port)
    assert alone.most_heads == 1


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))


@pytest.mark.parametrize("kind", ["big", "chunked"])
def test_large_answers_stream_to_a_slow_reader_in_bounded_memory(proxy, upstreams, kind):
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    size = 32 << 20
    expected = hashlib.sha256()
    block = bytes(range(256)) * (256 if kind == "big" else 64)
    for at in range(0, size, len(block)):
        expected.update(block[:min(len(block), size - at)])
    before = rss_kb(server.process.pid)
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        sock.sendall(f"GET /api/{kind}?n={size} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
                     .encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        received, digest, chunked = bytearray(body), hashlib.sha256(), kind == "chunked"
        # Re-framed as the upstream framed it: a length it gave, chunks where it sent chunks.
        framing = b"transfer-encoding: chunked" if chunked else b"content-length: %d" % size
        assert framing in head.lower() and (not chunked or b"content-length" not in head.lower())
        # The sleep is the test: a reader that stalls; the upstream must be held back, not buffered.
        time.sleep(0.5)
        peak = rss_kb(server.process.pid)
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            received += chunk
    if chunked:
        body, at = bytearray(), 0
        while True:
            line_end = received.index(b"\r\n", at)
            length = int(received[at:line_end], 16)
            if length == 0:
                break
            body += received[line_end + 2:line_end + 2 + length]
            at = line_end + 4 + length
        received = body
    assert len(received) == size
    digest.update(received)
    assert digest.hexdigest() == expected.hexdigest()
    assert peak - before < 8 * 1024, f"RSS grew {peak - before} KB while the reader stalled"


def send_body(sock, size, chunked, block=bytes(range(256)) * 256):
    """Sends size bytes of a request body, after its head, the way the head said."""
    for at in range(0, size, len(block)):
        piece = block[:min(len(block), size - at)]
        sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n" if chunked else piece)
    if chunked:
        sock.sendall(b"0\r\n\r\n")


def body_digest(size, block=bytes(range(256)) * 256):
    digest = hashlib.sha256()
    for at in range(0, size, len(block)):
        digest.update(block[:min(len(block), size - at)])
    return digest.hexdigest()


@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
def test_request_bodies_of_any_size_stream_to_a_slow_upstream_in_bounded_memory(
        proxy, upstreams, chunked):
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    size = 64 << 20
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}"
    before = rss_kb(server.process.pid)
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(f"POST /api/digest?wait=0.5 HTTP/1.1\r\nHost: h\r\n{framing}\r\n\r\n"
                     .encode())
        sender = threading.Thread(target=send_body, args=(sock, size, chunked))
        sender.start()
        # The sleep is the test: the upstream reads nothing for 0.5 s; the client must be held back.
        time.sleep(0.4)
        peak = rss_kb(server.process.pid)
        sender.join(timeout=60)
        assert not sender.is_alive()
        sock.settimeout(30)
        status, _, body = parse_reply(read_reply(sock))
    assert status == 200
    answer = json.loads(body)
    assert answer["length"] == size and answer["sha256"] == body_digest(size)
    assert answer["framing"] == ("chunked" if chunked else str(size))
    assert peak - before < 8 * 1024, f"RSS grew {peak - before} KB while the upstream waited"


def test_a_body_awaited_with_100_continue_and_bodies_past_the_limit(proxy, upstreams):
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}", "--proxy-max-body", "100000")
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(5)
        sock.sendall(b"POST /api/echo HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                     b"Expect: 100-continue\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(b"hello")
        status, _, body = parse_reply(read_reply(sock))
        echo = json.loads(body)
        assert status == 200 and echo["body"] == "hello" and field(echo, "Expect") == []
    raw = (b"POST /api/echo HTTP/1.1\r\nHost: h\r\nContent-Length: 100001\r\n"
           b"Connection: close\r\n\r\n" + b"x" * 100001)
    assert request(server.port, raw)[0] == 413
    assert echoed(server.port, method="POST", body=b"y" * 100000)[1]["body"] == "y" * 100000


def test_an_upstream_that_answers_before_the_body_ends_is_heard(proxy, upstreams):
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(10)
        sock.sendall(b"POST /api/early HTTP/1.1\r\nHost: h\r\nContent-Length: 16777216\r\n\r\n")
        sock.sendall(b"z" * 65536)  # the rest never needs to come: the answer ends it
        status, fields, body = parse_reply(read_reply(sock))
    assert status == 413 and body == b"early" and fields["connection"] == ["close"]
    assert echoed(server.port)[1]["token"] == up.token  # and it serves on


@pytest.mark.serial
def test_upstream_faults_get_502_and_504(proxy, upstreams):
    up = upstreams()
    dead = refused_port()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}", "--proxy", f"/dead/=127.0.0.1:{dead}",
                   "--proxy-timeout", "1")
    raw = b"GET %s HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
    assert request(server.port, raw % b"/dead/x")[0] == 502
    assert request(server.port, raw % b"/api/bad")[0] == 502
    started = time.monotonic()
    assert request(server.port, raw % b"/api/hang", timeout=5)[0] == 504
    assert time.monotonic() - started < 3
    status, fields, body = request(server.port, raw % b"/api/cut")
    assert status == 200 and fields["content-length"] == ["100"] and len(body) < 100
    assert echoed(server.port)[1]["token"] == up.token  # and it serves on
    server.process.terminate()
    log = server.process.communicate(timeout=10)[1].decode()
    assert "failed for /dead/x: Connection refused; answering 502" in log
    assert "failed for /api/hang: Connection timed out; answering 504" in log
    assert "failed in the middle of /api/cut" in log


def test_a_failed_upstream_is_skipped_and_requests_go_to_the_others(proxy, upstreams):
    up = upstreams("live")
    dead = refused_port()
    server = proxy("--proxy", f"/api/=127.0.0.1:{dead},127.0.0.1:{up.port}")
    names = [echoed(server.port)[1]["name"] for _ in range(20)]
    assert names == ["live"] * 20
    server.process.terminate()
    log = server.process.communicate(timeout=10)[1].decode()
    assert log.count("trying another") == 1  # then skipped for 10 s (its fail timeout)


def test_balancing_least_connections_and_round_robin(proxy, upstreams):
    a, b = upstreams("a"), upstreams("b")
    spec = f"/api/=127.0.0.1:{a.port},127.0.0.1:{b.port}"
    server = proxy("--proxy", spec, "--balance", "round-robin")
    names = [echoed(server.port)[1]["name"] for _ in range(6)]
    assert names in (["a", "b"] * 3, ["b", "a"] * 3)
    server = proxy("--proxy", spec)
    names = [echoed(server.port)[1]["name"] for _ in range(6)]
    assert set(names) == {"a", "b"}  # idle ties rotate


def test_longest_prefix_wins(proxy, upstreams):
    a, b = upstreams("a"), upstreams("b")
    server = proxy("--proxy", f"/api/=127.0.0.1:{a.port}", "--proxy", f"/api/v2/=127.0.0.1:{b.port}")
    assert echoed(server.port, "/api/v2/x")[1]["name"] == "b"
    assert echoed(server.port, "/api/v1/x")[1]["name"] == "a"


@pytest.mark.parametrize("sent", [
    b"GET /api/hang HTTP/1.1\r\nHost: h\r\n\r\n",
    b"PUT /api/digest HTTP/1.1\r\nHost: h\r\nContent-Length: 16777216\r\n\r\n" + b"z" * 100000,
], ids=["waiting", "mid-upload"])
def test_a_client_that_leaves_cancels_its_upstream_request(proxy, upstreams, sent):
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(sent)
        deadline = time.monotonic() + 5
        while up.heads == 0:  # forwarded (a call cancelled before its connection has carried a
            assert time.monotonic() < deadline  # byte may keep that connection for the next)
            time.sleep(0.01)
    deadline = time.monotonic() + 5
    while up.closed == 0:  # the proxy closed its upstream connection for the abandoned call
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert echoed(server.port)[1]["token"] == up.token


def test_no_connection_left_for_the_upstream_gets_503(proxy, upstreams):
    """Clients take every slot of the connection table (the server refuses the ones past it by
    closing them): a proxied request then finds no slot for an upstream connection, which is the
    server being full (503), not the upstream failing (502). Once they leave, it proxies again."""
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}", "--connections", "16")
    clients = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(48)]

    def refused():
        closed = []
        for sock in clients:
            try:
                closed.append(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"")
            except BlockingIOError:
                closed.append(False)
        return closed

    def settle():
        counts = [sum(refused())]
        while counts[-1] == 0 or len(counts) < 20 or len(set(counts[-20:])) > 1:  # 200 ms same
            time.sleep(0.01)
            counts.append(sum(refused()))

    settle()
    # A slot may have come free after the refusals (the start-up probe's close, seen late): one
    # more client takes it; the table is full once a client that came after settling is refused.
    while True:
        clients.append(socket.create_connection(("127.0.0.1", server.port)))
        settle()
        if refused()[-1]:
            break
    kept = [sock for sock, closed in zip(clients, refused()) if not closed]
    raw = b"GET /api/echo HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
    kept[-1].sendall(raw)
    assert parse_reply(read_reply(kept[-1]))[0] == 503
    for sock in clients:
        sock.close()
    assert echoed(server.port)[1]["token"] == up.token
    server.process.terminate()
    log = server.process.communicate(timeout=10)[1].decode()
    assert "cannot forward /api/ to" in log and "No buffer space available" in log


def test_bad_proxy_options_are_refused(build_dir):
    for args in (["--proxy", "api=127.0.0.1:1"], ["--proxy", "/api/="],
                 ["--balance", "random"], ["--proxy-timeout", "0"], ["--proxy-pipeline", "65"],
                 ["--proxy-max-body", "-1"]):
        result = subprocess.run(
            [str(build_dir / "tools" / "sxe-httpd"), "--root", "/", *args],
            capture_output=True, timeout=10)
        assert result.returncode == 2, args
        assert b"sxe-httpd: --" in result.stderr
