"""sxe-httpd, the real binary, over loopback: files, statuses, conditional requests, ranges, path
escapes, pipelining, slow clients, many connections, logs, start-up errors and a clean stop."""
import email.utils
import json
import os
import re
import select
import signal
import socket
import subprocess
import time

import pytest

from conftest import wait_until


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


DEAD_PORTS = []  # the sockets that keep refused_port()'s ports, for the rest of the run


def refused_port():
    """A port where connects are refused for the rest of the run: bound, never listened on, so
    that no other test's server can take it meanwhile (a port that was merely free once was, and
    a request meant to fail was answered)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    DEAD_PORTS.append(sock)
    return sock.getsockname()[1]


@pytest.fixture
def root(tmp_path):
    www = tmp_path / "www"
    (www / "docs").mkdir(parents=True)
    (www / "empty").mkdir()
    (www / "hello.txt").write_bytes(b"Hello World\n")
    (www / "index.html").write_bytes(b"<h1>home</h1>\n")
    (www / "data.bin").write_bytes(bytes(range(256)) * 40)
    (www / "style.css").write_bytes(b"body {}\n")
    (www / "docs" / "a <b>&c.txt").write_bytes(b"x")
    (www / "docs" / "index.html").write_bytes(b"docs index\n")
    (www / "listing").mkdir()
    (www / "listing" / "<script>.txt").write_bytes(b"y")
    (tmp_path / "secret.txt").write_bytes(b"secret\n")
    (www / "escape").symlink_to(tmp_path / "secret.txt")
    (www / "inside").symlink_to(www / "hello.txt")
    return www


class Httpd:
    def __init__(self, build_dir, root, *args, cwd=None):
        self.log = root.parent / "access.log"
        # A port found free can be taken by a test running beside this one before sxe-httpd binds
        # it: then sxe-httpd says so and exits, and it starts again on another.
        for attempt in range(5):
            self.port = free_port()
            self.process = subprocess.Popen(
                [str((build_dir / "tools" / "sxe-httpd").resolve()), "--root", str(root),
                 "--listen", f"127.0.0.1:{self.port}", *args],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
            if self.wait_listening():
                return
        raise AssertionError("sxe-httpd found every port it was given taken")

    def wait_listening(self):
        """Whether sxe-httpd is answering on its port (False: the port was taken meanwhile)."""
        deadline = time.monotonic() + 5
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                # Answering, and it is ours: a process that lost the port has exited.
                assert self.process.poll() is None, self.process.stderr.read()
                return True
            except ConnectionRefusedError:
                if self.process.poll() is not None:
                    error = self.process.stderr.read()
                    assert b"Address already in use" in error, error
                    return False
                assert time.monotonic() < deadline
                time.sleep(0.02)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=10)


@pytest.fixture
def httpd(build_dir, root):
    servers = []

    def start(*args, cwd=None):
        server = Httpd(build_dir, root, *args, cwd=cwd)
        servers.append(server)
        return server

    yield start
    for server in servers:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()


def exchange(port, raw, timeout=2.0):
    """Sends raw bytes, returns everything the server sends until it closes or goes quiet."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(raw)
        sock.settimeout(timeout)
        data = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
                sock.settimeout(0.3)
        except socket.timeout:
            pass
    return data


def get(port, path, headers=(), method="GET"):
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    head += "".join(f"{h}\r\n" for h in headers) + "\r\n"
    return answer_of(exchange(port, head.encode()))


def answer_of(data):
    """status, fields (lower-case names, the last of each) and body of one answer."""
    status_line, _, rest = data.partition(b"\r\n")
    header_text, _, body = rest.partition(b"\r\n\r\n")
    fields = {}
    for line in header_text.split(b"\r\n"):
        name, _, value = line.partition(b": ")
        fields[name.decode().lower()] = value.decode()
    return int(status_line.split()[1]), fields, body


def test_serves_files_with_their_metadata(httpd, root):
    server = httpd()
    status, headers, body = get(server.port, "/hello.txt")
    assert status == 200
    assert body == b"Hello World\n"
    assert headers["content-length"] == "12"
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert headers["accept-ranges"] == "bytes"
    assert headers["etag"].startswith('"')
    mtime = os.stat(root / "hello.txt").st_mtime
    assert email.utils.parsedate_to_datetime(headers["last-modified"]).timestamp() == int(mtime)
    assert get(server.port, "/style.css")[1]["content-type"] == "text/css; charset=utf-8"
    assert get(server.port, "/data.bin")[1]["content-type"] == "application/octet-stream"
    assert get(server.port, "/data.bin")[2] == bytes(range(256)) * 40
    assert server.stop() == 0


# Every type sxe-httpd names, by the file name's extension (of any case); others are
# application/octet-stream.
TYPES = {
    "html": "text/html; charset=utf-8", "htm": "text/html; charset=utf-8",
    "css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8",
    "mjs": "text/javascript; charset=utf-8", "json": "application/json",
    "txt": "text/plain; charset=utf-8", "md": "text/markdown; charset=utf-8",
    "csv": "text/csv; charset=utf-8", "xml": "application/xml", "svg": "image/svg+xml",
    "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
    "webp": "image/webp", "avif": "image/avif", "ico": "image/x-icon",
    "pdf": "application/pdf", "wasm": "application/wasm", "mp4": "video/mp4",
    "webm": "video/webm", "mp3": "audio/mpeg", "woff": "font/woff", "woff2": "font/woff2",
    "ttf": "font/ttf", "zip": "application/zip", "gz": "application/gzip",
    "tar": "application/x-tar", "bin": "application/octet-stream",
    "exe": "application/octet-stream",
}


def test_every_type_by_its_extension(httpd, root):
    for extension in TYPES:
        (root / f"file.{extension}").write_bytes(b"x")
        (root / f"UPPER.{extension.upper()}").write_bytes(b"x")
    (root / "no-extension").write_bytes(b"x")
    (root / "dir.png").mkdir()
    (root / "dir.png" / "inside").write_bytes(b"x")
    (root.parent / "none.types").write_text("# names nothing: the table built in serves\n")
    server = httpd("--workers", "1", "--mime-types", str(root.parent / "none.types"))
    for extension, content_type in TYPES.items():
        for name in (f"file.{extension}", f"UPPER.{extension.upper()}"):
            status, headers, _ = get(server.port, "/" + name)
            assert (status, headers["content-type"]) == (200, content_type), name
    for name in ("no-extension", "dir.png/inside"):  # a dot in a directory's name is not a type
        assert get(server.port, "/" + name)[1]["content-type"] == "application/octet-stream"
    assert server.stop() == 0


def test_the_start_line_says_how_it_serves(httpd, root):
    """The INFO line at start names the root, the address, the workers and each one's capacity
    (10,000 connections unless --connections says), and says when worker threads share one file
    cache (their default)."""
    each = "of up to 10000 connections each"
    for args, says in ((["--workers", "2"], f"2 worker processes {each}\n"),
                       (["--workers", "1", "--threads", "--connections", "16"],
                        "1 worker thread of up to 16 connections each, sharing one file cache"),
                       (["--workers", "1", "--threads", "--cache", "per-worker"],
                        f"1 worker thread {each}\n")):
        server = httpd(*args)
        assert server.stop() == 0
        log = server.process.stderr.read().decode()
        assert f"serving {root} on 127.0.0.1:{server.port} with {says}" in log, log


def test_index_files_and_directories(httpd):
    server = httpd()
    assert get(server.port, "/")[2] == b"<h1>home</h1>\n"
    assert get(server.port, "/docs/")[2] == b"docs index\n"
    status, headers, _ = get(server.port, "/docs")
    assert status == 301 and headers["location"] == "/docs/"
    assert get(server.port, "/empty/")[0] == 403  # no index, listing off


def test_directory_listing_is_escaped(httpd):
    server = httpd("--list")
    status, headers, body = get(server.port, "/listing/")
    assert status == 200
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert b"&lt;script&gt;.txt" in body
    assert b"<script>" not in body
    assert b'href="%3Cscript%3E.txt"' in body
    assert b"a &lt;b&gt;&amp;c.txt" not in body  # docs has an index: no listing there
    assert get(server.port, "/empty/")[0] == 200


def test_head_and_methods(httpd):
    server = httpd()
    status, headers, body = get(server.port, "/hello.txt", method="HEAD")
    assert status == 200 and headers["content-length"] == "12" and body == b""
    for method in ("POST", "TRACE", "DELETE"):
        status, headers, _ = get(server.port, "/hello.txt", method=method)
        assert status == 405 and headers["allow"] == "GET, HEAD, OPTIONS", method
    for target in ("/hello.txt", "*"):
        status, headers, body = get(server.port, target, method="OPTIONS")
        assert status == 200 and headers["allow"] == "GET, HEAD, OPTIONS", target
        assert headers["content-length"] == "0" and body == b""


def test_an_http2_upgrade_is_ignored_and_answered_over_http1(httpd):
    server = httpd()
    result = subprocess.run(["curl", "-sS", "--http2", "-w", "\n%{http_code} %{http_version}",
                             f"http://127.0.0.1:{server.port}/hello.txt"],
                            capture_output=True, timeout=10)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"Hello World\n\n200 1.1"


def test_absolute_form_targets_are_served_by_their_path(httpd):
    server = httpd()
    data = exchange(server.port, b"GET http://example.com/hello.txt HTTP/1.1\r\nHost: other\r\n"
                                 b"Connection: close\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 200 OK\r\n") and data.endswith(b"Hello World\n"), data


@pytest.mark.parametrize("path,expected", [
    # Above the root, or malformed: the server refuses it before any route (400).
    ("/../secret.txt", 400), ("/docs/../../secret.txt", 400), ("/%2e%2e/secret.txt", 400),
    ("/%2E%2e/secret.txt", 400), ("/docs/%2e%2e/%2e%2e/secret.txt", 400), ("/%", 400),
    ("/%zz", 400),
    # A link that leads out, an encoded NUL or separator: sxe-httpd refuses it (403).
    ("/escape", 403), ("/%00", 403), ("/..%2fsecret.txt", 403), ("/a%5c..%5csecret.txt", 403),
    ("/a\\..\\secret.txt", 403),
])
def test_no_path_escapes(httpd, path, expected):
    server = httpd()
    data = exchange(server.port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                    .encode())
    status = int(data.split()[1])
    assert status == expected, data
    assert b"secret" not in data.split(b"\r\n\r\n", 1)[1]


@pytest.mark.parametrize("path,status,body", [
    # Dot segments are resolved (RFC 3986 §5.2.4) however written, before the file is looked up.
    ("/docs/..", 200, b"<h1>home</h1>\n"), ("/docs/.", 200, b"docs index\n"),
    ("/.", 200, b"<h1>home</h1>\n"), ("/docs/./index.html", 200, b"docs index\n"),
    ("/docs/%2E", 200, b"docs index\n"), ("/docs/../hello.txt", 200, b"Hello World\n"),
    ("/docs/%2e%2E/docs/./../hello.txt", 200, b"Hello World\n"),
    ("/a/b/../../hello.txt", 200, b"Hello World\n"), ("/docs/../docs", 301, None),
    # Only a path that would climb above the root is refused (by the server, before routing:
    # 400), and encoded separators and NUL (by sxe-httpd: 403).
    ("/..", 400, None), ("/docs/../..", 400, None), ("/a/../../hello.txt", 400, None),
    ("/docs%2f..%2f..%2fsecret.txt", 403, None), ("/%5c..%5csecret.txt", 403, None),
    ("/docs/index.html%2f.", 403, None), ("/hello.txt%00", 403, None),
    # Dots that do not make a whole "." or ".." segment are names like any other.
    ("/...", 404, None), ("/docs/..x", 404, None), ("/.x", 404, None),
    ("/docs/index.html", 200, b"docs index\n"),
])
def test_dot_segments_are_resolved_and_only_escapes_refused(httpd, root, path, status, body):
    server = httpd()
    data = exchange(server.port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                    .encode())
    assert int(data.split()[1]) == status, data
    if body is not None:
        assert data.split(b"\r\n\r\n", 1)[1] == body
    if status == 403:  # said with the path as routed: its escapes' digits upper case
        assert server.stop() == 0
        assert f"refused the path {path}: ".lower().encode() in server.process.stderr.read().lower()


def test_symlink_inside_the_root_is_served(httpd):
    assert get(httpd().port, "/inside")[2] == b"Hello World\n"


def test_symlink_into_a_sibling_whose_name_starts_with_the_roots_is_refused(httpd, root):
    """The root is .../www; .../www2 is not under it, though its path starts with the root's. A
    plain prefix compare would serve it."""
    sibling = root.parent / (root.name + "2")
    sibling.mkdir()
    (sibling / "secret.txt").write_bytes(b"sibling secret\n")
    (root / "sibling").symlink_to(sibling / "secret.txt")
    (root / "sibling-dir").symlink_to(sibling)
    server = httpd()
    for path in ("/sibling", "/sibling-dir/secret.txt", "/sibling-dir/"):
        data = exchange(server.port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                        .encode())
        assert int(data.split()[1]) == 403, data
        assert b"secret" not in data


def test_a_segment_ending_in_a_dot_is_a_name_not_dot_dot(httpd):
    """"a." is a directory name like any other, so /docs/a./hello.txt names nothing; were it taken
    for "..", it would name /hello.txt."""
    server = httpd()
    assert get(server.port, "/docs/a./hello.txt")[0] == 404
    assert get(server.port, "/docs/../hello.txt")[0] == 200


def test_missing_file_is_404(httpd):
    assert get(httpd().port, "/nothing-here.txt")[0] == 404


def test_conditional_requests(httpd):
    server = httpd()
    _, headers, _ = get(server.port, "/hello.txt")
    etag, modified = headers["etag"], headers["last-modified"]
    assert get(server.port, "/hello.txt", [f"If-None-Match: {etag}"])[0] == 304
    assert get(server.port, "/hello.txt", [f'If-None-Match: "other", W/{etag}'])[0] == 304
    assert get(server.port, "/hello.txt", ["If-None-Match: *"])[0] == 304
    assert get(server.port, "/hello.txt", ['If-None-Match: "other"'])[0] == 200
    assert get(server.port, "/hello.txt", [f"If-None-Match: X/{etag}"])[0] == 200  # only W/ is weak
    assert get(server.port, "/hello.txt", [f"If-Modified-Since: {modified}"])[0] == 304
    assert get(server.port, "/hello.txt",
               ["If-Modified-Since: Mon, 01 Jan 1990 00:00:00 GMT"])[0] == 200
    # If-None-Match wins over If-Modified-Since.
    assert get(server.port, "/hello.txt",
               ['If-None-Match: "other"', f"If-Modified-Since: {modified}"])[0] == 200
    status, headers, body = get(server.port, "/hello.txt", [f"If-None-Match: {etag}"])
    assert body == b"" and headers["etag"] == etag
    # On one kept-alive connection each 304 is a whole response: the requests behind it are
    # answered, in order.
    cached = f"GET /hello.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: {etag}\r\n\r\n"
    data = exchange(server.port, (cached * 2 + "GET /hello.txt HTTP/1.1\r\nHost: x\r\n"
                                  "Connection: close\r\n\r\n").encode())
    assert [part[:3] for part in data.split(b"HTTP/1.1 ")[1:]] == [b"304", b"304", b"200"], data
    assert data.endswith(b"Hello World\n")


def test_if_range_gives_a_piece_only_of_the_same_file(httpd):
    server = httpd()
    _, headers, _ = get(server.port, "/hello.txt")
    etag, modified = headers["etag"], headers["last-modified"]
    for validator in (etag, modified):
        status, _, body = get(server.port, "/hello.txt", ["Range: bytes=0-4", f"If-Range: {validator}"])
        assert (status, body) == (206, b"Hello"), validator
    # A changed file, or a weak validator: the whole file, not a piece of one the client lacks.
    for validator in ('"other"', f"W/{etag}", "Mon, 01 Jan 1990 00:00:00 GMT", etag[:-2] + '"'):
        status, headers, body = get(server.port, "/hello.txt",
                                    ["Range: bytes=0-4", f"If-Range: {validator}"])
        assert (status, body) == (200, b"Hello World\n"), validator
        assert "content-range" not in headers
    # If-Range without Range changes nothing.
    assert get(server.port, "/hello.txt", ['If-Range: "other"'])[0] == 200


def test_ranges(httpd):
    server = httpd()
    status, headers, body = get(server.port, "/hello.txt", ["Range: bytes=0-4"])
    assert status == 206 and body == b"Hello"
    assert headers["content-range"] == "bytes 0-4/12"
    assert get(server.port, "/hello.txt", ["Range: bytes=6-"])[2] == b"World\n"
    assert get(server.port, "/hello.txt", ["Range: bytes=-3"])[2] == b"ld\n"
    assert get(server.port, "/hello.txt", ["Range: bytes=6-100"])[2] == b"World\n"
    assert get(server.port, "/hello.txt", ["Range: bytes=0-1,4-5"])[0] == 200  # several: whole
    assert get(server.port, "/hello.txt", ["Range: bytes="])[0:3:2] == (200, b"Hello World\n")
    for zeros in (55, 56, 200):  # a value of 63 bytes is read; one of 64 or more is passed over
        padded = "bytes=" + "0" * zeros + "1-4"
        status, _, body = get(server.port, "/hello.txt", [f"Range: {padded}"])
        assert (status, body) == ((206, b"ello") if len(padded) < 64 else (200, b"Hello World\n"))
    for bad in ("bytes=12-", "bytes=5-2", "bytes=-0", "bytes=x-1"):
        status, headers, _ = get(server.port, "/hello.txt", [f"Range: {bad}"])
        assert status == 416, bad
        assert headers["content-range"] == "bytes */12"
    big = get(server.port, "/data.bin", ["Range: bytes=1000-1999"])[2]
    assert big == (bytes(range(256)) * 40)[1000:2000]


@pytest.mark.parametrize("request_bytes, status", [
    (b"GET / HTTP/1.1\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n", 413),
    (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    (b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 17000 + b"\r\n\r\n", 431),
    (b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"H%d: v\r\n" % i for i in range(101))
     + b"\r\n", 431),
    (b"BREW / HTTP/1.1\r\nHost: x\r\n\r\n", 501),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    (b"GET / HTTP/3.0\r\nHost: x\r\n\r\n", 505),
])
def test_malformed_requests_get_their_status_and_others_are_served(httpd, request_bytes, status):
    server = httpd()
    data = exchange(server.port, request_bytes)
    assert data.startswith(b"HTTP/1.1 %d " % status), data[:100]
    assert b"Connection: close" in data
    assert get(server.port, "/hello.txt")[2] == b"Hello World\n"


def test_pipelined_requests_come_back_in_order(httpd):
    server = httpd()
    requests = b"".join(b"GET /%s HTTP/1.1\r\nHost: x\r\n\r\n" % name
                        for name in (b"hello.txt", b"style.css", b"missing", b"hello.txt"))
    data = exchange(server.port, requests)
    bodies = [part for part in data.split(b"HTTP/1.1 ")[1:]]
    assert [part[:3] for part in bodies] == [b"200", b"200", b"404", b"200"]
    assert data.index(b"Hello World\n") < data.index(b"body {}") < data.rindex(b"Hello World\n")


def responses(data):
    """Splits a byte stream of responses by their Content-Length: [(head, body), ...]."""
    parts = []
    while data:
        head, found, rest = data.partition(b"\r\n\r\n")
        assert found and head.startswith(b"HTTP/1.1 "), data[:80]
        length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:")][0]
        parts.append((head, rest[:length]))
        data = rest[length:]
    return parts


def test_pipelined_large_files_come_back_whole_and_in_order(httpd, root):
    """Eight 1 MB files asked for at once back up the output: the requests after the first wait
    their turn, and every response arrives whole. (They once lost their heads past 64 KB queued.)"""
    big = os.urandom(1 << 20)
    (root / "big.bin").write_bytes(big)
    server = httpd()
    requests = b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n" * 8
    requests += b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    parts = responses(exchange(server.port, requests, timeout=10))
    assert len(parts) == 9
    assert all(head.startswith(b"HTTP/1.1 200 ") and body == big for head, body in parts[:8])
    assert parts[8][1] == b"Hello World\n"


def test_sxe_http_pipelined_against_large_files(httpd, root, build_dir):
    (root / "big.bin").write_bytes(os.urandom(1 << 20))
    server = httpd()
    result = subprocess.run([str(build_dir / "tools" / "sxe-http"), "-i", "127.0.0.1", "-p",
                             str(server.port), "-c", "4", "-n", "24", "-P", "8", "-u", "/big.bin",
                             "--json"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["queries"] == 96
    assert data["errors"]["total"] == 0


@pytest.mark.serial
def test_slow_client_gets_408_and_does_not_hurt_others(build_dir, root):
    server = Httpd(build_dir, root, "--header-timeout", "3")
    try:
        slow = socket.create_connection(("127.0.0.1", server.port))
        slow.sendall(b"GET /hello.txt HTTP/1.1\r\n")
        started = time.monotonic()
        # Others are served meanwhile, promptly.
        for _ in range(20):
            assert get(server.port, "/hello.txt")[2] == b"Hello World\n"
        assert time.monotonic() - started < 1.5
        # Trickle bytes: they do not extend the 3 s the head has. Had the last piece (at 1 s
        # after the others at most) started the 3 s again, the 408 would come at 4 s or later.
        slow.settimeout(10)
        for piece in (b"Ho", b"st", b": x"):
            slow.sendall(piece)
            time.sleep(0.5)  # the sleep is the test: a client that trickles its head
        data = slow.recv(4096)
        elapsed = time.monotonic() - started
        assert data.startswith(b"HTTP/1.1 408 Request Timeout"), data
        assert 2.8 < elapsed < 3.8, elapsed
        slow.close()
    finally:
        assert server.stop() == 0


@pytest.mark.serial
def test_ten_thousand_keep_alive_connections(httpd, build_dir):
    server = httpd()
    result = subprocess.run([str(build_dir / "tools" / "sxe-http"), "-i", "127.0.0.1", "-p",
                             str(server.port), "-c", "10000", "-n", "3", "-u", "/hello.txt",
                             "--json"], capture_output=True, text=True, timeout=120)
    data = json.loads(result.stdout)
    assert data["connected"] == 10000
    assert data["queries"] == 30000
    assert data["errors"]["total"] == 0, result.stdout
    assert server.stop() == 0


@pytest.mark.parametrize("fmt", ["common", "combined"])
def test_access_log(httpd, root, fmt):
    log = root.parent / f"{fmt}.log"
    server = httpd("--access-log", str(log), "--log-format", fmt)
    get(server.port, "/hello.txt", ["User-Agent: tester/1.0", "Referer: http://r/"])
    get(server.port, "/missing")
    assert server.stop() == 0
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("127.0.0.1 - - [")
    assert '"GET /hello.txt HTTP/1.1" 200 12' in lines[0]
    assert '"GET /missing HTTP/1.1" 404' in lines[1]
    if fmt == "combined":
        assert lines[0].endswith('"http://r/" "tester/1.0"')
    else:
        assert lines[0].endswith(" 200 12")


@pytest.mark.parametrize("kind", [[], ["--threads"]], ids=["processes", "threads"])
def test_a_buffered_access_log_writes_whole_lines_and_loses_none(httpd, root, sxe_http, kind):
    """--access-log-buffer: two workers' lines gather in their buffers and reach the file within
    about a second, each line whole; lines still buffered when the server stops are written."""
    log = root.parent / "buffered.log"
    server = httpd("--access-log", str(log), "--access-log-buffer", "65536", "--workers", "2",
                   *kind)
    line = re.compile(r'^127\.0\.0\.1 - - \[[^]]+\] "GET /hello\.txt HTTP/1\.1" 200 12$')

    def lines():
        return log.read_text().splitlines() if log.exists() else []

    result = sxe_http("-i", "127.0.0.1", "-p", server.port, "-c", 10, "-n", 30, "-u",
                      "/hello.txt", "--json")
    assert json.loads(result.stdout)["queries"] == 300
    wait_until(lambda: len(lines()) == 300, 5, "300 lines in the log")
    result = sxe_http("-i", "127.0.0.1", "-p", server.port, "-c", 5, "-n", 10, "-u",
                      "/hello.txt", "--json")
    assert json.loads(result.stdout)["queries"] == 50
    assert server.stop() == 0  # at once: the last lines are in the buffers
    written = lines()
    assert len(written) == 350
    assert all(line.match(text) for text in written), [t for t in written if not line.match(t)]


@pytest.mark.parametrize("buffer", ["0", "4096"])
def test_a_full_disk_loses_log_lines_not_requests(httpd, root, buffer):
    """/dev/full refuses every write (ENOSPC): each request is answered, and the lines lost are
    said once a minute while serving and counted in all when the worker stops."""
    server = httpd("--access-log", "/dev/full", "--access-log-buffer", buffer, "--workers", "1")
    for _ in range(5):
        assert get(server.port, "/hello.txt")[2] == b"Hello World\n"
    assert server.stop() == 0
    said = server.process.stderr.read().decode()
    assert len(re.findall(r"WARN +access log /dev/full: No space left on device: lines lost so "
                          r"far: \d+ \(said once a minute\)", said)) == 1, said
    assert re.search(r"WARN +access log /dev/full: lines lost: 5$", said, re.MULTILINE), said


def test_access_log_named_before_the_dash_is_a_file(httpd, root):
    """Only "-" itself means standard output: a file whose name sorts before it ("+x") is a file."""
    server = httpd("--access-log", "+access.log", cwd=root.parent)
    get(server.port, "/hello.txt")
    assert server.stop() == 0
    assert '"GET /hello.txt HTTP/1.1" 200 12' in (root.parent / "+access.log").read_text()
    assert server.process.stdout.read() == b""


def test_access_log_is_off_by_default(httpd, root):
    server = httpd()
    get(server.port, "/hello.txt")
    assert server.stop() == 0
    assert server.process.stdout.read() == b""


def test_graceful_stop_lets_a_response_finish(httpd, root):
    """The stop comes while a response is under way: more of it than the sockets' buffers hold
    is still to send (the client's receive buffer is small), and all of it arrives."""
    big = os.urandom(16 << 20)
    (root / "big.bin").write_bytes(big)
    server = httpd()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    assert select.select([sock], [], [], 5)[0], "the response did not begin"
    server.process.send_signal(signal.SIGTERM)
    sock.settimeout(10)
    reply = bytearray()
    while chunk := sock.recv(1 << 20):
        reply += chunk
    sock.close()
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n"), bytes(reply[:200])
    assert reply.endswith(b"\r\n\r\n" + big), len(reply)
    assert server.process.wait(timeout=10) == 0


def test_start_up_errors(build_dir, root, tmp_path):
    httpd_binary = str(build_dir / "tools" / "sxe-httpd")

    def run(*args):
        return subprocess.run([httpd_binary, *args], capture_output=True, text=True, timeout=10)

    result = run("--root", str(tmp_path / "missing"))
    assert result.returncode == 1 and "No such file or directory" in result.stderr
    result = run("--root", str(root / "hello.txt"))
    assert result.returncode == 1 and "not a directory" in result.stderr
    result = run("--listen", "127.0.0.1:8080")
    assert result.returncode == 2 and "--root DIR is required" in result.stderr
    result = run("--root", str(root), "--bogus")  # a line saying which, and where to look
    assert result.returncode == 2
    assert result.stderr.splitlines()[1:] == ["(sxe-httpd --help lists the options)"]
    assert "unrecognized option '--bogus'" in result.stderr.splitlines()[0]
    # One clear line each, in the program's words, not the library's as well.
    for address in ("nowhere", "127.0.0.1:99999", "127.0.0.1"):
        result = run("--root", str(root), "--listen", address)
        assert result.returncode == 1
        assert result.stderr == (f"sxe-httpd: cannot listen on {address}: expected IP:PORT, "
                                 "[IPv6]:PORT, localhost:PORT or :PORT\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("--root", str(root), "--listen", f"127.0.0.1:{port}")
        assert result.returncode == 1
        assert result.stderr == f"sxe-httpd: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    result = run("--help")
    assert result.returncode == 0 and "usage: sxe-httpd --root DIR" in result.stdout


# Each numeric option's range: (option, lowest, highest).
RANGES = [("--access-log-buffer", 0, 64 << 20), ("--connections", 16, 1000000),
          ("--workers", 1, 256), ("--header-timeout", 1, 86400), ("--idle-timeout", 1, 86400),
          ("--body-rate", 1, 1 << 30), ("--proxy-timeout", 1, 3600),
          ("--proxy-connections", 1, 65536), ("--proxy-max-body", 0, 2**64 - 1),
          ("--proxy-pipeline", 1, 64)]


@pytest.mark.parametrize("option,low,high", RANGES)
def test_numeric_options_take_their_range_only(build_dir, tmp_path, option, low, high):
    """Each bound is taken and one past it is refused (exit 2, saying the range). A root that is
    missing makes a value taken end the run at once (exit 1), after the options are read."""
    def run(value):
        return subprocess.run([str(build_dir / "tools" / "sxe-httpd"), "--root",
                               str(tmp_path / "missing"), option, value],
                              capture_output=True, text=True, timeout=10)

    for value in (low, high):
        result = run(str(value))
        assert result.returncode == 1 and "No such file or directory" in result.stderr, value
    for value in ([str(low - 1)] if low > 0 else []) + [str(high + 1), "", "12x", "+"]:
        result = run(value)
        assert result.returncode == 2, (value, result.stderr)
        assert f"{option} must be a number from {low} to {high}, not '{value}'" in result.stderr


def test_a_full_table_is_explained_in_the_programs_words(httpd):
    server = httpd("--connections", "16", "--workers", "1")
    held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(48)]
    answered = refused = 0
    for sock in held:  # each is answered (kept alive), or closed unanswered by a full table
        sock.settimeout(5)
        try:
            sock.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = sock.recv(65536)
        except OSError:
            reply = b""
        answered += reply.startswith(b"HTTP/1.1 200 OK")
        refused += reply == b""
    for sock in held:
        sock.close()
    assert answered + refused == 48 and refused > 0 and answered > 0, (answered, refused)
    assert server.stop() == 0
    log = server.process.stderr.read().decode()
    assert "refusing connections; raise --connections or use --evict-idle" in log, log
    assert "options.connections" not in log


@pytest.mark.serial
def test_cached_files_follow_changes_within_a_second(httpd, root):
    server = httpd("--workers", "1")  # one cache: each request asks the one that has the file
    assert get(server.port, "/hello.txt")[2] == b"Hello World\n"
    (root / "hello.txt").write_bytes(b"Changed file\n")
    os.utime(root / "hello.txt", (time.time() + 5, time.time() + 5))

    def changed():
        reply = get(server.port, "/hello.txt")
        return reply if reply[2] != b"Hello World\n" else None

    # The cache checks a file at most once a second: the change is served within 1.1 s.
    status, headers, body = wait_until(changed, 1.1, "the changed file", interval=0.05)
    assert body == b"Changed file\n" and headers["content-length"] == "13"
    (root / "hello.txt").unlink()
    wait_until(lambda: get(server.port, "/hello.txt")[0] == 404, 1.1, "the 404", interval=0.05)
    big = root / "big.bin"
    big.write_bytes(os.urandom(200000))  # past what is kept in memory: sent with sendfile
    assert get(server.port, "/big.bin")[2] == big.read_bytes()
    assert get(server.port, "/big.bin", ["Range: bytes=100000-100009"])[2] == \
        big.read_bytes()[100000:100010]


@pytest.mark.parametrize("name,size,count", [("small.bin", 4096, 4000),
                                             ("large.bin", 24 << 20, 2)])
def test_a_file_replaced_mid_response_is_sent_whole(httpd, root, name, size, count):
    """Responses still sending a cached file (from the cache's memory, or its fd) when the file is
    replaced finish with the old bytes, while new requests get the new file: the cache entry lives
    until its last response is done."""
    old, new = os.urandom(size), os.urandom(size // 2)
    (root / name).write_bytes(old)
    server = httpd("--workers", "1")  # one cache: each request asks the one that has the file
    # More than the sockets' buffers hold, so that some waits in the server's queue meanwhile.
    with socket.create_connection(("127.0.0.1", server.port)) as slow:
        slow.sendall(f"GET /{name} HTTP/1.1\r\nHost: x\r\n\r\n".encode() * count)
        # The first response is under way (read nothing of it: the rest queues in the server).
        assert select.select([slow], [], [], 5)[0], "the first response did not begin"
        replacement = root / (name + ".new")
        replacement.write_bytes(new)
        os.utime(replacement, (time.time() + 5, time.time() + 5))
        os.rename(replacement, root / name)
        # The cache checks a file at most once a second: the new file is served within 1.1 s.
        wait_until(lambda: get(server.port, f"/{name}")[2] == new, 1.1, "the new file",
                   interval=0.05)
        slow.settimeout(10)
        rest, bodies = b"", []
        for _ in range(count):
            sock_data = rest
            while b"\r\n\r\n" not in sock_data:
                sock_data += slow.recv(65536)
            head, body = sock_data.split(b"\r\n\r\n", 1)
            length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
            while len(body) < length:
                chunk = slow.recv(1 << 20)
                assert chunk, "closed mid-response"
                body += chunk
            bodies.append(body[:length])
            rest = body[length:]
        assert bodies[0] == old
        assert all(body in (old, new) for body in bodies)
    assert server.process.poll() is None
