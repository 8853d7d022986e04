"""sxe-httpd --proxy and the fields a Connection field names (RFC 9110 §7.6.1), both ways: only
Connection's own list names fields to drop, every Connection field counts, its names are matched
whole, without case, with spaces and tabs around them trimmed; other fields' values are just
values, even when they look like field names."""
import socket
import threading

from test_proxy import echoed, field, proxy, request, upstreams  # noqa: F401
from test_sxe_httpd import free_port, httpd, refused_port, root  # noqa: F401 (fixtures)


def test_only_connection_names_request_fields_to_drop(proxy, upstreams):
    up = upstreams()
    server = proxy("--proxy", f"/api/=127.0.0.1:{up.port}")
    _, echo = echoed(server.port, extra="X-List: X-Kept, X-Also\r\nX-Kept: 1\r\nX-Also: 2\r\n"
                     "Connection: X-A\r\nX-A: gone\r\n"
                     "Connection: \t x-b\t ,, \t X-Sec \t,X-Tail\t\r\n"
                     "X-B: gone\r\nX-Sec: gone\r\nX-Tail: gone\r\nX-C: stays\r\n"
                     "X-Secret: stays\r\nX-Se: stays\r\nX-Tai: stays\r\n")
    assert field(echo, "X-List") == ["X-Kept, X-Also"]
    assert field(echo, "X-Kept") == ["1"] and field(echo, "X-Also") == ["2"]
    # Named by the first Connection field, by the second (in another case, among spaces and tabs,
    # after an empty element, last): each gone.
    for name in ("X-A", "X-B", "X-Sec", "X-Tail"):
        assert field(echo, name) == [], name
    # Names as long as a named one, or only starting one, or that one only starts: each stays.
    for name in ("X-C", "X-Secret", "X-Se", "X-Tai"):
        assert field(echo, name) == ["stays"], name


class Answerer:
    """An upstream that answers every request with the same head and body, keep-alive."""

    def __init__(self, head):
        self.head = head
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        data = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                _, _, data = data.partition(b"\r\n\r\n")
                conn.sendall(self.head + b"Content-Length: 2\r\n\r\nok")


def test_only_connection_names_response_fields_to_drop(proxy):
    upstream = Answerer(b"HTTP/1.1 200 OK\r\nX-List: X-Kept\r\nX-Kept: 1\r\n"
                        b"Connection: keep-alive, X-A\r\nX-A: gone\r\nConnection:\tX-B \r\n"
                        b"X-B: gone\r\nX-Ab: stays\r\nX-C: stays\r\n")
    try:
        server = proxy("--proxy", f"/api/=127.0.0.1:{upstream.port}")
        status, fields, body = request(
            server.port, b"GET /api/x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        assert status == 200 and body == b"ok"
        assert fields["x-list"] == ["X-Kept"] and fields["x-kept"] == ["1"]
        assert "x-a" not in fields and "x-b" not in fields
        assert fields["x-ab"] == ["stays"] and fields["x-c"] == ["stays"]
    finally:
        upstream.sock.close()


def test_only_get_and_head_are_tried_on_another_upstream(proxy, upstreams):
    """A request that fails on its upstream before any of its body went is tried once on another
    when it is idempotent and bodiless by method: GET and HEAD; a POST is answered 502."""
    for method, status, tried in (("HEAD", 200, 1), ("GET", 200, 1), ("POST", 502, 0),
                                  ("PUT", 502, 0)):
        up = upstreams("live")
        dead = refused_port()
        server = proxy("--proxy", f"/api/=127.0.0.1:{dead},127.0.0.1:{up.port}")
        raw = f"{method} /api/x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".encode()
        assert request(server.port, raw)[0] == status, method
        server.process.terminate()
        log = server.process.communicate(timeout=10)[1].decode()
        assert log.count("trying another") == tried, (method, log)
