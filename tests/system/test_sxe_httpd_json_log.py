"""sxe-httpd's access log as JSON (--log-format json): one object a line, every field a client
chose escaped so that each line parses, whatever bytes it sent (quotes, backslashes, tabs, bytes
that are not UTF-8), a request refused before its request line with null for what it never said,
the time each request took, and for a proxied one its upstream and the time that took."""
import json
import re
import socket
import subprocess

from test_proxy import upstreams  # noqa: F401 (fixture)
from test_sxe_httpd import exchange, get, httpd, refused_port, root  # noqa: F401 (fixtures)

FIELDS = ["time", "remote_addr", "method", "target", "protocol", "status", "body_bytes_sent",
          "referer", "user_agent", "request_time", "upstream_addr", "upstream_time"]


def test_each_request_is_a_json_object(httpd, root):  # noqa: F811
    log = root.parent / "json.log"
    server = httpd("--access-log", str(log), "--log-format", "json")
    get(server.port, "/hello.txt", ["User-Agent: tester/1.0", "Referer: http://r/"])
    get(server.port, "/missing?q=1")
    agent = b'a "quoted" \\ back\ttab \xff\xfe end'
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"HEAD /hello.txt HTTP/1.0\r\nUser-Agent: " + agent + b"\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 OK\r\n")
    assert exchange(server.port, b"\x01\x02 nonsense\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert exchange(server.port, b"UNSUBSCRIBE /hello.txt HTTP/1.1\r\nHost: x\r\n"
                    b"Connection: close\r\n\r\n").startswith(b"HTTP/1.1 405 ")
    assert server.stop() == 0

    lines = [json.loads(text) for text in log.read_text().splitlines()]
    assert len(lines) == 5
    assert (lines[4]["method"], lines[4]["status"]) == ("UNSUBSCRIBE", 405)  # the longest, whole
    lines = lines[:4]
    for line in lines:
        assert list(line) == FIELDS
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", line["time"])
        assert line["remote_addr"] == "127.0.0.1"
        assert isinstance(line["request_time"], float) and 0 <= line["request_time"] < 5
        assert line["upstream_addr"] is None and line["upstream_time"] is None  # not proxied
    hello, missing, head, refused = lines
    assert (hello["method"], hello["target"], hello["protocol"]) == ("GET", "/hello.txt",
                                                                     "HTTP/1.1")
    assert (hello["status"], hello["body_bytes_sent"]) == (200, 12)
    assert (hello["referer"], hello["user_agent"]) == ("http://r/", "tester/1.0")
    assert (missing["target"], missing["status"], missing["referer"]) == ("/missing?q=1", 404,
                                                                          None)
    assert missing["user_agent"] is None
    assert (head["method"], head["protocol"], head["status"], head["body_bytes_sent"]) == (
        "HEAD", "HTTP/1.0", 200, 0)
    assert head["user_agent"] == 'a "quoted" \\ back\ttab \ufffd\ufffd end'
    assert (refused["method"], refused["target"], refused["protocol"]) == (None, None, None)
    assert refused["status"] == 400


def test_a_wrong_format_is_refused(build_dir, root):  # noqa: F811
    result = subprocess.run([str(build_dir / "tools" / "sxe-httpd"), "--root", str(root),
                             "--log-format", "xml"], capture_output=True, text=True, timeout=10)
    assert result.returncode == 2
    assert "--log-format must be common, combined or json, not 'xml'" in result.stderr


def test_a_proxied_request_says_its_upstream_and_the_time_it_took(httpd, root, upstreams):  # noqa: F811
    up = upstreams()
    dead = refused_port()  # nothing listens there: the proxy answers 502
    log = root.parent / "json.log"
    server = httpd("--access-log", str(log), "--log-format", "json", "--workers", "1",
                   "--proxy", f"/api/=127.0.0.1:{up.port}", "--proxy", f"/dead/=127.0.0.1:{dead}")
    for target, status in ((b"/api/echo?wait=0.3", 200), (b"/dead/x", 502), (b"/hello.txt", 200)):
        data = exchange(server.port, b"GET " + target + b" HTTP/1.1\r\nHost: h\r\n"
                        b"Connection: close\r\n\r\n")
        assert data.startswith(b"HTTP/1.1 %d " % status), data
    assert server.stop() == 0
    slow, refused, static = [json.loads(text) for text in log.read_text().splitlines()]
    assert list(slow) == FIELDS and slow["upstream_addr"] == f"127.0.0.1:{up.port}"
    # the upstream slept 0.3 s before it answered: its time holds that, and the request's holds it
    assert 0.3 <= slow["upstream_time"] <= slow["request_time"] < 5, slow
    assert refused["status"] == 502 and refused["upstream_addr"] == f"127.0.0.1:{dead}"
    assert 0 <= refused["upstream_time"] <= refused["request_time"] < 5, refused
    assert static["upstream_addr"] is None and static["upstream_time"] is None
