"""sxe-httpd's own answers attacked: redirects that would send a browser to another host, paths
too deep to be a file name, and an access log that a client tries to forge or to slip past. Every
line of the log is parsed back, field by field."""
import os
import re
import signal
import socket

import pytest

from conftest import wait_until
from test_proxy import upstreams  # noqa: F401 (fixture)
from test_sxe_httpd import exchange, free_port, httpd, refused_port, root  # noqa: F401


def answer(port, target, extra=b""):
    data = exchange(port, b"GET " + target.encode() + b" HTTP/1.1\r\nHost: site.test\r\n"
                    b"Connection: close\r\n" + extra + b"\r\n")
    head = data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in head[1:])
    return int(head[0].split(" ")[1]), fields


@pytest.mark.parametrize("target,location", [
    ("//evil.example/%2e%2e/docs", "/docs/"),  # was "//evil.example/%2e%2e/docs/": another host
    ("//docs", "/docs/"),
    ("///evil.example/../docs", "/docs/"),
    ("/docs?next=//evil.example", "/docs/?next=//evil.example"),
    ("/%64ocs", "/docs/"),
    ("/a%20b", "/a%20b/"),
    ("/caf%C3%A9", "/caf%C3%A9/"),
])
def test_a_directory_redirect_never_leaves_the_host(httpd, root, target, location):
    (root / "a b").mkdir()
    (root / "café").mkdir()
    server = httpd()
    status, fields = answer(server.port, target)
    assert status == 301 and fields["Location"] == location


def test_a_path_too_deep_for_a_file_name_is_414(httpd):
    server = httpd()
    assert answer(server.port, "/a" * 3000)[0] == 414
    assert answer(server.port, "/a" * 10)[0] == 404  # an ordinary miss is still a miss


# The access log: nginx's combined format, each field a client chose escaped.
QUOTED = r'"((?:[^"\\]|\\x[0-9A-F]{2})*)"'
LINE = re.compile(r'^(\S+) - - \[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d \+0000)\] ' + QUOTED +
                  r' (\d{3}) (\d+)(?: ' + QUOTED + ' ' + QUOTED + ')?$')  # combined: two more


def read_log(path):
    """Every line of the log, parsed: (peer, request, status, bytes, referer, agent). A line that
    does not parse fails the test."""
    parsed = []
    for line in path.read_text(encoding="ascii").splitlines():
        match = LINE.match(line)
        assert match, f"a line that does not parse: {line!r}"
        peer, _, request, status, size, referer, agent = match.groups()
        parsed.append((peer, request, int(status), int(size), referer, agent))
    return parsed


def test_every_request_is_logged_once_and_nothing_forges_a_field(httpd, root, upstreams):
    up = upstreams()
    dead = refused_port()  # nothing listens there: the proxy answers 502
    log = root.parent / "access.log"
    server = httpd("--access-log", str(log), "--log-format", "combined", "--workers", "1",
                   "--proxy", f"/api/=127.0.0.1:{up.port}", "--proxy", f"/dead/=127.0.0.1:{dead}")
    forged = b'curl" 200 6 "-" "forged-ua'
    sent = [
        (b"GET /hello.txt HTTP/1.1\r\nHost: h\r\nUser-Agent: " + forged + b"\r\n", 200),
        (b"GET /api/echo HTTP/1.1\r\nHost: h\r\nReferer: http://r\\x/\r\n", 200),
        (b"GET /dead/x HTTP/1.1\r\nHost: h\r\n", 502),
        (b"POST /hello.txt HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n", 405),
        (b"GET /nothing HTTP/1.1\r\nHost: h\r\nUser-Agent: caf\xc3\xa9\t\x80x\r\n", 404),
        (b"GET /../x HTTP/1.1\r\nHost: h\r\n", 400),
        (b"GET /a\"b HTTP/1.1\r\nHost: h\r\n", 404),
        (b"GET / HTTP/1.1\r\n", 400),  # no Host
    ]
    for head, status in sent:
        data = exchange(server.port, head + b"Connection: close\r\n\r\n")
        assert data.startswith(b"HTTP/1.1 %d " % status), data
    exchange(server.port, b"\x16\x03\x01 not http\r\n\r\n")  # a TLS hello: refused with 400
    assert server.stop() == 0
    lines = read_log(log)
    assert [line[2] for line in lines] == [status for _, status in sent] + [400]
    assert lines[0][1] == "GET /hello.txt HTTP/1.1" and lines[0][3] == 12
    assert lines[0][5] == r"curl\x22 200 6 \x22-\x22 \x22forged-ua"  # one field, escaped
    assert lines[1][1] == "GET /api/echo HTTP/1.1" and lines[1][4] == r"http://r\x5Cx/"
    assert lines[2][1] == "GET /dead/x HTTP/1.1"
    assert lines[4][5] == r"caf\xC3\xA9\x09\x80x"
    assert lines[6][1] == r"GET /a\x22b HTTP/1.1"
    assert lines[8][1] == "-"  # no request line to show
    assert all(line[0] == "127.0.0.1" for line in lines), lines


def test_a_client_that_leaves_before_its_answer_is_logged_499(httpd, root, upstreams):
    up = upstreams()
    log = root.parent / "access.log"
    server = httpd("--access-log", str(log), "--workers", "1", "--proxy",
                   f"/api/=127.0.0.1:{up.port}")
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /api/hang HTTP/1.1\r\nHost: h\r\n\r\n")  # the upstream never answers
        wait_until(lambda: up.connections > 0, what="the request to reach the upstream")
    wait_until(lambda: log.exists() and log.read_text().count("\n") == 1, what="the log line")
    assert server.stop() == 0
    (line,) = read_log(log)
    assert line[1] == "GET /api/hang HTTP/1.1" and line[2] == 499 and line[3] == 0


def serving(pid):
    """The processes that serve: the worker processes, or the process itself with threads."""
    children = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as listed:
            children += [int(child) for child in listed.read().split()]
    return children or [pid]


def logs_open(pid):
    """The paths of the files the process has open whose names end in .log or .log.1."""
    paths = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            path = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if ".log" in path:
            paths.append(path)
    return paths


def said(server, text, heard=None):
    """Waits (5 s at most) until the server's log (its standard error, read without blocking)
    has said text; returns what it said so far, added to heard."""
    stream = server.process.stderr
    os.set_blocking(stream.fileno(), False)
    heard = [heard or b""]

    def more():
        heard[0] += stream.read() or b""
        return text in heard[0]

    wait_until(more, what=f"the server to say {text!r}")
    return heard[0]


def test_a_reopen_that_fails_keeps_the_old_file(httpd, tmp_path):
    """SIGHUP when the log's path cannot be opened: an error is logged, and lines go on to the
    file that was open; the next SIGHUP that can open it moves them there."""
    where = tmp_path / "logs"
    where.mkdir()
    server = httpd("--access-log", str(where / "access.log"), "--workers", "1")
    assert answer(server.port, "/hello.txt")[0] == 200
    where.rename(tmp_path / "logs.old")
    (tmp_path / "logs").write_text("a file where the directory was")
    server.process.send_signal(signal.SIGHUP)
    heard = said(server, b"cannot reopen the access log: Not a directory")
    old = tmp_path / "logs.old" / "access.log"
    assert answer(server.port, "/hello.txt")[0] == 200
    wait_until(lambda: old.read_text().count("\n") == 2, what="the line in the old file")
    (tmp_path / "logs").unlink()
    (tmp_path / "logs").mkdir()
    server.process.send_signal(signal.SIGHUP)
    said(server, b"reopened the access log", heard)
    assert answer(server.port, "/hello.txt")[0] == 200
    wait_until(lambda: (where / "access.log").read_text().count("\n") == 1, what="the new line")
    assert server.stop() == 0


def test_lines_buffered_at_a_reopen_go_to_the_old_file(httpd, root):
    """With --access-log-buffer, the lines gathered when SIGHUP comes are written to the file they
    were logged to, before the log is opened anew: a rotated file ends with its own lines."""
    log = root.parent / "access.log"
    server = httpd("--access-log", str(log), "--access-log-buffer", "65536")
    assert answer(server.port, "/hello.txt")[0] == 200  # gathered; written within a second
    log.rename(root.parent / "access.log.1")
    server.process.send_signal(signal.SIGHUP)
    said(server, b"reopened the access log")
    wait_until(lambda: (root.parent / "access.log.1").read_text().count("\n") == 1,
               what="the line in the rotated file")
    assert answer(server.port, "/hello.txt")[0] == 200
    wait_until(lambda: log.exists() and log.read_text().count("\n") == 1,
               what="the next line in the new file")
    assert (root.parent / "access.log.1").read_text().count("\n") == 1
    assert server.stop() == 0


@pytest.mark.parametrize("kind", [(), ("--threads",), ("--workers", "1")])
def test_sighup_reopens_the_log_and_stops_nothing(httpd, root, kind):
    """kill -HUP (what logrotate's postrotate sends) once took the site down; it now reopens the
    access log in every worker, which goes on serving."""
    log = root.parent / "access.log"
    server = httpd("--access-log", str(log), *kind)
    assert answer(server.port, "/hello.txt")[0] == 200
    wait_until(lambda: log.exists() and log.read_text().count("\n") == 1, what="the first line")
    log.rename(root.parent / "access.log.1")  # logrotate moves it away
    server.process.send_signal(signal.SIGHUP)
    rotated = root.parent / "access.log"
    wait_until(lambda: all(str(rotated) in logs_open(pid) for pid in serving(server.process.pid)),
               what="every process serving to open the new access.log")
    for _ in range(4):
        assert answer(server.port, "/hello.txt")[0] == 200
    wait_until(lambda: rotated.read_text().count("\n") == 4, what="the lines after the rotation")
    assert (root.parent / "access.log.1").read_text().count("\n") == 1
    assert server.process.poll() is None
    assert server.stop() == 0
    assert b"reopened the access log" in server.process.stderr.read()
