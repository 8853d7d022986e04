"""sxe-httpd's proxy attacked from both sides, as an outsider would: clients that spell paths to
climb out of a proxied prefix, smuggle a second request or a field the proxy writes itself, and
upstreams that answer out of the rules (statuses with no class, interim answers forever, framing
that contradicts itself, answers before the request is read, bodies a byte at a time, more than
was asked). Each case names what must happen; the upstreams are scripted sockets over loopback."""
import hashlib
import json
import socket
import threading
import time

import pytest

from scripted import Scripted, made
from test_proxy import echoed, field, proxy, request, upstreams  # noqa: F401 (fixtures)
from test_sxe_httpd import exchange, httpd, root  # noqa: F401 (fixtures)


class Hostile(Scripted):
    """An upstream that misbehaves on purpose, by path; it records every request head it read."""

    def __init__(self):
        self.heads = []
        super().__init__()

    def serve(self, conn, number):
        data = b""
        while (read := self.read_head(conn, data)) is not None:
            head, data = read
            self.heads.append(head.decode("latin-1"))
            target = head.split(b" ")[1].decode()
            if not self._answer(conn, target):
                return

    @staticmethod
    def _answer(conn, target):
        if target.endswith("/status999"):
            conn.sendall(b"HTTP/1.1 999 Whatever\r\nContent-Length: 2\r\n\r\nno")
        elif target.endswith("/interim-flood"):
            for _ in range(40):  # a 102 every 0.2 s for 8 s, and never an answer
                conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\n")
                time.sleep(0.2)
            return False
        elif target.endswith("/cl-and-te"):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nTransfer-Encoding: chunked"
                         b"\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n")
        elif target.endswith("/two-answers"):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none"
                         b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra")
        elif target.endswith("/slow-body"):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
            for byte in b"12345":
                time.sleep(0.3)
                conn.sendall(bytes([byte]))
        elif target.endswith("/split-head"):
            for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Split: yes\r\n\r\nok":
                conn.sendall(bytes([byte]))
        elif "/slow" in target:  # the sleep is the test: a request held for a second
            time.sleep(1)
            body = target.encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        elif target.endswith("/bare-lf"):
            conn.sendall(b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok")
        else:
            body = target.encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        return True

@pytest.fixture
def hostile():
    with made(Hostile) as make:
        yield make


def until_closed(port, raw, timeout=5.0):
    """Sends raw bytes and reads until the server closes, however slowly the answer comes."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(timeout)
        sock.sendall(raw)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def get(port, target, extra=""):
    return request(port, f"GET {target} HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n"
                         f"{extra}\r\n".encode())


# Clients


@pytest.mark.parametrize("target", [
    "/api/../admin/s.txt", "/api/%2e%2e/admin/s.txt", "/api/%2E%2E/admin/s.txt",
    "/api/./../admin/s.txt", "//api/../admin/s.txt", "/api/x/../../admin/s.txt",
    "http://example.test/api/../admin/s.txt",
])
def test_a_path_that_leaves_the_prefix_never_reaches_the_upstream(proxy, hostile, target):
    """The prefix is matched on the normal path, so these are "/admin/s.txt": not proxied, and
    not a file under the root either (404, as nginx answers)."""
    up = hostile()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    status, _, body = get(server.port, target)
    assert status == 404, body
    assert up.heads == []


@pytest.mark.parametrize("target,forwarded", [
    ("/api/a/./b/../c//d?x=%2e%2e", "/api/a/c/d?x=%2e%2e"),  # the query goes as it came
    ("/api/%7e%41", "/api/~A"),
    ("/api/%2e%2e%2fadmin", "/api/..%2Fadmin"),  # an encoded '/' is no separator: one name
    ("/api//x", "/api/x"),
    ("http://other.test/api/y", "/api/y"),
])
def test_the_upstream_gets_the_path_the_prefix_matched(proxy, hostile, target, forwarded):
    up = hostile()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    status, _, body = get(server.port, target)
    assert status == 200 and body == forwarded.encode()
    assert up.heads[0].startswith(f"GET {forwarded} HTTP/1.1\r\n")


def test_above_the_root_or_a_fragment_is_refused_before_any_upstream(proxy, hostile):
    up = hostile()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    for target in ("/api/../../x", "/api/%2e%2e/%2e%2e/x", "/api/x#y", "/api/%zz"):
        assert get(server.port, target)[0] == 400, target
    assert up.heads == []


def test_an_absolute_form_target_names_the_host_the_upstream_sees(proxy, upstreams):
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    _, echo = echoed(server.port, "http://wanted.test:8080/api/echo")
    assert field(echo, "Host") == ["wanted.test:8080"] and echo["target"] == "/api/echo"


def test_an_h2c_upgrade_goes_on_as_a_plain_request(proxy, upstreams):
    """HTTP/2 is not relayed blind: an upgrade to h2c reaches the upstream without Upgrade, as
    nginx sends it, and is answered over HTTP/1.1."""
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    _, echo = echoed(server.port, extra="Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                                         "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n")
    assert field(echo, "Upgrade") == [] and field(echo, "HTTP2-Settings") == []


def test_fields_with_underscores_are_dropped_unless_asked(proxy, upstreams):
    """X_Forwarded_For would reach a CGI upstream as HTTP_X_FORWARDED_FOR, the proxy's own."""
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    extra = "X_Forwarded_For: 6.6.6.6\r\nX_Real_IP: 6.6.6.6\r\nX-Kept: yes\r\n"
    _, echo = echoed(server.port, extra=extra)
    names = [name.lower() for name, _ in echo["fields"]]
    assert "x_forwarded_for" not in names and "x_real_ip" not in names
    assert field(echo, "X-Kept") == ["yes"] and field(echo, "X-Forwarded-For") == ["127.0.0.1"]
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}", "--proxy-underscores")
    _, echo = echoed(server.port, extra=extra)
    assert field(echo, "X_Real_IP") == ["6.6.6.6"]


@pytest.mark.parametrize("raw", [
    # Content-Length and Transfer-Encoding together, either order.
    b"POST /api/a HTTP/1.1\r\nHost: h\r\nContent-Length: 30\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"0\r\n\r\nGET /api/smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
    b"POST /api/a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
    b"0\r\n\r\nGET /api/smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
    # A coding before chunked, two Content-Lengths, a bare LF, obsolete folding.
    b"POST /api/a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    b"POST /api/a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 40\r\n\r\nabc",
    b"GET /api/a HTTP/1.1\nHost: h\n\nGET /api/smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
    b"GET /api/a HTTP/1.1\r\nHost: h\r\nX: a\r\n Transfer-Encoding: chunked\r\n\r\n",
])
def test_smuggling_through_the_proxy_is_refused_before_the_upstream(proxy, hostile, raw):
    up = hostile()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    data = exchange(server.port, raw)
    assert data.split(b" ")[1] in (b"400", b"501"), data
    assert all("smuggled" not in head for head in up.heads) and len(up.heads) == 0


def test_a_held_request_keeps_its_bytes_while_its_buffer_is_full(proxy, hostile, root):
    """A proxied request waits for its upstream with its connection's buffer full behind it
    (66,560 bytes: the request and pipelined bytes). Reading waits: nothing overflows, no 431 is
    sent, and the buffer is not given to another connection while the request still points into
    it (it once was: the held request was then logged with another client's headers)."""
    up = hostile()
    log = root.parent / "access.log"
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}", "--access-log", str(log))
    first = b"GET /api/slow/" + b"T" * 400 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as held:
        held.sendall(first + b"Z" * (66560 - len(first)))
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as other:
            other.sendall(b"GET /api/victim HTTP/1.1\r\nHost: x\r\nCookie: session=VICTIM\r\n"
                          b"Connection: close\r\n\r\n")
            assert other.recv(65536).endswith(b"/api/victim")
        answer = b""
        while chunk := held.recv(65536):
            answer += chunk
    # Its own answer, then a 414 for the pipelined bytes (a request line too long): no 431.
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer
    assert b"T" * 400 + b"HTTP/1.1 414 URI Too Long\r\n" in answer, answer
    assert server.stop() == 0
    lines = log.read_text().splitlines()
    assert any(f'"GET /api/slow/{"T" * 400} HTTP/1.1" 200' in line for line in lines), lines
    assert not any("VICTIM" in line for line in lines)


def test_an_upload_slower_than_the_idle_timeout_still_arrives(proxy, upstreams):
    """A body that keeps coming for longer than --idle-timeout: the upstream's connection only
    sends meanwhile, and once was closed for idle by the age of its last read (504)."""
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}", "--idle-timeout", "2",
                   "--body-rate", "512")
    body = bytes(range(256)) * 16  # 4 KB, 512 B a half second: 4 s (under the default least rate)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST /api/digest HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body))
        for at in range(0, len(body), 512):
            time.sleep(0.5)
            sock.sendall(body[at:at + 512])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer
    digest = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert digest["length"] == len(body)
    assert digest["sha256"] == hashlib.sha256(body).hexdigest()


def test_bodies_that_trickle_do_not_hold_the_upstream(proxy, upstreams):
    """Four clients trickle a body a byte a second to a prefix with four upstream connections:
    each gets 408 within seconds (the least rate of a streamed body), and the connections serve
    an honest client again."""
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}", "--proxy-connections", "4")
    slow = []
    for _ in range(4):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(b"POST /api/digest HTTP/1.1\r\nHost: h\r\nContent-Length: 1000000\r\n\r\nx")
        slow.append(sock)
    started = time.monotonic()
    answers = [b""] * 4
    while not all(answers) and time.monotonic() - started < 15:
        time.sleep(1)
        for i, sock in enumerate(slow):
            try:
                sock.send(b"x")
            except OSError:
                pass
            sock.setblocking(False)
            try:
                answers[i] += sock.recv(65536)
            except BlockingIOError:
                pass
            sock.setblocking(True)
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers), answers
    assert time.monotonic() - started < 8
    for sock in slow:
        sock.close()
    _, echo = echoed(server.port)
    assert echo["token"] == up.token


# Upstreams


class SlowReader(Scripted):
    """An upstream that reads each request's body 64 KiB at a time, 10 ms apart, then answers with
    how many bytes it read: the proxy must pause its clients meanwhile."""

    def serve(self, conn, number):
        if (read := self.read_head(conn)) is None:
            return
        head, body = read
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        got = len(body)
        while got < length and (chunk := conn.recv(65536)):
            got += len(chunk)
            time.sleep(0.01)
        answer = b"got %d" % got
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer))


def test_clients_that_do_not_read_leave_room_for_uploads(proxy, root):
    """300 clients ask for a large file, never read it, and send a few bytes behind their request;
    then three clients upload 2 MiB each to an upstream that reads slowly. On io_uring the few
    bytes each of the 300 were held in the backend's buffers, every uploader that had to pause
    found none left, and all three were reset."""
    (root / "large.bin").write_bytes(b"L" * (8 << 20))
    with made(SlowReader) as make:
        up = make()
        server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
        idle = []
        try:
            for _ in range(300):
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect(("127.0.0.1", server.port))
                sock.sendall(b"GET /large.bin HTTP/1.1\r\nHost: h\r\n\r\n")
                idle.append(sock)
            time.sleep(1)  # their answers back up
            for sock in idle:
                sock.sendall(b"G" * 100)
            time.sleep(0.5)
            body = bytes(range(256)) * (8 << 10)
            answers = [None] * 3

            def upload(i):
                raw = (b"POST /api/up HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(body)) + body
                try:
                    answers[i] = exchange(server.port, raw, 30)
                except OSError as error:
                    answers[i] = repr(error).encode()

            uploads = [threading.Thread(target=upload, args=(i,)) for i in range(3)]
            for thread in uploads:
                thread.start()
            for thread in uploads:
                thread.join()
        finally:
            for sock in idle:
                sock.close()
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"got %d" % len(body)), \
            answer[:200]


def test_a_status_with_no_class_is_a_bad_gateway(proxy, hostile):
    up = hostile()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    status, _, body = get(server.port, "/api/status999")
    assert status == 502 and b"Whatever" not in body


def test_interim_answers_forever_still_time_out(proxy, hostile):
    """A 102 every 0.2 s is not the answer: --proxy-timeout 1 still gives 504, in about 1 s."""
    up = hostile()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}", "--proxy-timeout", "1")
    started = time.monotonic()
    status, _, _ = get(server.port, "/api/interim-flood")
    assert status == 504 and time.monotonic() - started < 4


@pytest.mark.parametrize("path", ["/api/cl-and-te", "/api/bare-lf"])
def test_framing_that_contradicts_itself_is_a_bad_gateway(proxy, hostile, path):
    up = hostile()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    status, _, body = get(server.port, path)
    assert status == 502 and b"smuggled" not in body


def test_more_answers_than_requests_are_dropped_with_their_connection(proxy, hostile):
    up = hostile()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /api/two-answers HTTP/1.1\r\nHost: h\r\n\r\n")
        data = b""
        while b"one" not in data:
            data += sock.recv(65536)
        sock.sendall(b"GET /api/next HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    assert b"extra" not in data and data.endswith(b"/api/next")
    assert len(up.heads) == 2  # the next request went on a new connection, not after "extra"


def test_split_heads_and_slow_bodies_pass_whole(proxy, hostile):
    up = hostile()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}", "--proxy-timeout", "1")
    status, fields, body = get(server.port, "/api/split-head")
    assert status == 200 and body == b"ok" and fields["x-split"] == ["yes"]
    # A body byte every 0.3 s is progress: the 1 s silence limit is never reached.
    data = until_closed(server.port, b"GET /api/slow-body HTTP/1.1\r\nHost: h\r\n"
                                     b"Connection: close\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"\r\n\r\n12345")


def test_the_early_answer_of_an_upstream_that_refuses_a_body(proxy, upstreams):
    """The upstream answers 413 before reading the body, and closes: the client gets the 413,
    the rest of its body is not forwarded, and the proxy serves on."""
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    body = b"x" * (4 << 20)
    raw = (b"POST /api/early HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(5)
        try:
            sock.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered and closed before the body was all sent
        data = sock.recv(65536)
    assert data.startswith(b"HTTP/1.1 413 "), data
    _, echo = echoed(server.port)
    assert echo["token"] == up.token
    assert json.loads(json.dumps(echo))["target"] == "/api/echo"
