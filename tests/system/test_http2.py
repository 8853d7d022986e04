"""HTTP/2 with prior knowledge (h2c), through the real programs: sxe-httpd's files, the examples'
handlers (plain, JSON with a body, a fiber route, held server-sent event streams), many streams on
one connection, a stream reset and a connection closed under held requests, streamed bodies and
their windows, h2 over TLS, h2spec, and h2load and curl as clients. What a hostile client does is
in test_http2_attacks.py."""
import hashlib
import json
import pathlib
import re
import signal
import socket
import ssl
import subprocess
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import pytest

from conftest import wait_for_port
from h2client import PREFACE, Client, example, httpd, start_example, stop_example  # noqa: F401
from test_proxy import upstreams  # noqa: F401 (a fixture)
from test_sxe_httpd import Httpd, free_port, root  # noqa: F401 (root is a fixture)
from test_tls import certificate  # noqa: F401 (a fixture)

def test_sxe_httpd_serves_files_over_h2c_as_over_http1(httpd, root):  # noqa: F811
    big = bytes(range(256)) * 4096 + b"end"  # 1 MiB and a little: many frames, windows refilled
    (root / "big.bin").write_bytes(big)
    client = Client(httpd.port)
    status, headers, body = client.get("/hello.txt")
    assert (status, body) == (200, b"Hello World\n")
    assert headers["content-length"] == "12" and headers["content-type"].startswith("text/plain")
    assert headers["server"] == "sxe" and headers["date"].endswith(" GMT")
    assert "connection" not in headers  # HTTP/2 has no connection-specific fields
    etag = headers["etag"]
    assert client.get("/hello.txt", method="HEAD")[1:] == (headers, b"")
    assert client.get("/hello.txt", headers=[("if-none-match", etag)])[0] == 304
    status, headers, body = client.get("/data.bin", headers=[("range", "bytes=10-19")])
    assert (status, body, headers["content-range"]) == (206, bytes(range(10, 20)),
                                                        "bytes 10-19/10240")
    status, _, body = client.get("/big.bin")
    assert status == 200 and hashlib.sha256(body).digest() == hashlib.sha256(big).digest()
    assert client.get("/missing")[0] == 404
    assert client.get("/../secret.txt")[0] in (400, 404)
    assert client.terminated is None
    client.close()


def test_a_hundred_streams_at_once_on_one_connection(httpd):
    client = Client(httpd.port)
    for _ in range(2):  # the second round on streams the first freed
        streams = [client.request("/hello.txt") for _ in range(100)]
        client.until(lambda: all(client.streams[s]["ended"] for s in streams))
        assert all(client.streams[s]["data"] == b"Hello World\n" for s in streams)
    client.close()


def test_handlers_read_the_request_and_its_body(example):
    client = Client(example("http-api"))
    status, headers, body = client.get("/hello?name=h2")
    assert (status, body) == (200, b'{"hello": "h2"}\n') and headers["x-api"] == "1"
    payload = bytes(range(256)) * 1000  # 256,000 bytes: past the first window
    status, _, body = client.get("/echo", method="POST", body=payload)
    assert status == 200 and body == payload
    assert client.get("/echo", method="POST", body=b"")[2] == b""
    status, headers, _ = client.get("/hello", method="DELETE")
    assert status == 405 and "GET" in headers["allow"]
    status, headers, _ = client.get("*", method="OPTIONS")
    assert status == 200 and "POST" in headers["allow"]
    client.close()


def test_a_fiber_route_answers_each_stream(example):
    client = Client(example("http-fiber"))
    streams = [client.request("/") for _ in range(20)]
    client.until(lambda: all(client.streams[s]["ended"] for s in streams))
    assert all(client.streams[s]["data"] == b"Hello World\n" for s in streams)
    client.close()


def test_held_streams_one_reset_the_others_go_on(build_dir):
    port, process = start_example(build_dir, "sse", 50)  # a tick every 50 ms
    try:
        client = Client(port)
        first, second = client.request("/events"), client.request("/events")
        client.until(lambda: b"tick" in client.streams[first]["data"] and
                     b"tick" in client.streams[second]["data"], timeout=5)
        assert client.streams[first]["headers"]["content-type"] == "text/event-stream"
        client.conn.reset_stream(first, h2.errors.ErrorCodes.CANCEL)
        client.flush()
        before = len(client.streams[second]["data"])
        client.until(lambda: len(client.streams[second]["data"]) > before, timeout=5)
        assert client.get("/nothing")[0] == 404  # the connection still serves
        # A connection closed under held streams: each is cancelled, and others are served.
        third = client.request("/events")
        client.until(lambda: b"tick" in client.streams[third]["data"], timeout=5)
        client.close()
        again = Client(port)
        stream = again.request("/events")
        again.until(lambda: b"tick" in again.streams[stream]["data"], timeout=5)
        again.close()
    finally:
        stop_example(process)


def test_a_preface_trickled_byte_by_byte_begins_the_session(httpd):
    with socket.create_connection(("127.0.0.1", httpd.port), timeout=5) as sock:
        for byte in PREFACE:
            sock.sendall(bytes([byte]))
            time.sleep(0.001)
        sock.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # an empty SETTINGS
        reply = sock.recv(9)
        assert reply[3] == 0x04  # the server's SETTINGS: it speaks HTTP/2


def test_a_wrong_preface_is_an_http1_request_refused(httpd):
    with socket.create_connection(("127.0.0.1", httpd.port), timeout=5) as sock:
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 5")


def test_curl_and_h2load_as_clients(httpd):
    url = f"http://127.0.0.1:{httpd.port}/hello.txt"
    curl = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-w", "%{http_version}", url],
                          capture_output=True, timeout=10)
    assert curl.stdout == b"Hello World\n2"
    load = subprocess.run(["h2load", "-n", "20000", "-c", "4", "-m", "32", url],
                          capture_output=True, text=True, timeout=60)
    assert "20000 succeeded, 0 failed, 0 errored" in load.stdout, load.stdout
    assert "status codes: 20000 2xx" in load.stdout


def test_an_upgrade_to_h2c_is_answered_over_http1(httpd):
    with socket.create_connection(("127.0.0.1", httpd.port), timeout=5) as sock:
        sock.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n"
                     b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                     b"HTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n")
        reply = sock.recv(4096)
        assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"Hello World\n")


@pytest.mark.parametrize("fmt", ["combined", "json"])
def test_the_access_log_says_http2(build_dir, root, fmt):  # noqa: F811
    log = root.parent / "h2.log"
    server = Httpd(build_dir, root, "--access-log", str(log), "--log-format", fmt)
    client = Client(server.port)
    assert client.get("/hello.txt", headers=[("user-agent", "h2-tester")])[0] == 200
    assert client.get("/missing")[0] == 404
    client.close()
    assert server.stop() == 0
    lines = log.read_text().splitlines()
    assert len(lines) == 2, lines
    if fmt == "json":
        first = json.loads(lines[0])
        assert (first["protocol"], first["status"], first["target"]) == ("HTTP/2.0", 200,
                                                                         "/hello.txt")
        assert first["user_agent"] == "h2-tester"
    else:
        assert '"GET /hello.txt HTTP/2.0" 200 12' in lines[0] and lines[0].endswith('"h2-tester"')
        assert '"GET /missing HTTP/2.0" 404' in lines[1]


def h2_context(cert, maximum=None):
    context = ssl.create_default_context(cafile=str(cert))
    context.set_alpn_protocols(["h2", "http/1.1"])
    if maximum is not None:
        context.maximum_version = maximum
    return context


@pytest.mark.parametrize("maximum", [None, ssl.TLSVersion.TLSv1_2])
def test_h2_over_tls_chosen_by_alpn(build_dir, root, certificate, maximum):  # noqa: F811
    cert, key, _ = certificate
    big = bytes(range(256)) * 2048
    (root / "big.bin").write_bytes(big)
    server = Httpd(build_dir, root, "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        client = Client(server.port, h2_context(cert, maximum))
        assert client.get("/hello.txt")[::2] == (200, b"Hello World\n")
        status, _, body = client.get("/big.bin")
        assert status == 200 and body == big
        streams = [client.request("/hello.txt") for _ in range(50)]
        client.until(lambda: all(client.streams[s]["ended"] for s in streams))
        client.close()
        # A client that offers HTTP/1.1 only still gets it.
        plain = ssl.create_default_context(cafile=str(cert))
        plain.set_alpn_protocols(["http/1.1"])
        with plain.wrap_socket(socket.create_connection(("127.0.0.1", server.port)),
                               server_hostname="localhost") as sock:
            assert sock.selected_alpn_protocol() == "http/1.1"
            sock.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        # The TLS files read again on SIGHUP: h2 is still offered.
        server.process.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        again = Client(server.port, h2_context(cert))
        assert again.get("/hello.txt")[0] == 200
        again.close()
        url = f"https://127.0.0.1:{server.port}/hello.txt"
        load = subprocess.run(["h2load", "-n", "5000", "-c", "4", "-m", "16", url],
                              capture_output=True, text=True, timeout=60)
        assert "Application protocol: h2" in load.stdout
        assert "5000 succeeded, 0 failed, 0 errored" in load.stdout, load.stdout
    finally:
        assert server.stop() == 0


def h2spec_failures(port, *tls):
    """Runs h2spec (scripts/test builds it into build/tools) against port; the cases that failed."""
    h2spec = pathlib.Path(__file__).resolve().parents[2] / "build" / "tools" / "h2spec"
    assert h2spec.exists(), "h2spec is missing: scripts/test builds it"
    run = subprocess.run([str(h2spec), "-h", "127.0.0.1", "-p", str(port), *tls, "--path",
                          "/hello.txt", "-o", "1", "-j", "/dev/stdout"], capture_output=True,
                         text=True, timeout=300)
    summary = re.search(r"(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed", run.stdout)
    assert summary and int(summary.group(1)) >= 145, run.stdout[-2000:]
    failed = r'<testcase package="([^"]+)" classname="([^"]+)"[^>]*>\s*<(?:failure|error)'
    return set(re.findall(failed, run.stdout)), summary.group(0)


def test_h2spec_every_case_over_tls_and_all_but_one_in_cleartext(build_dir, root,  # noqa: F811
                                                                  certificate):  # noqa: F811
    cert, key, _ = certificate
    server = Httpd(build_dir, root, "--workers", "1")
    try:
        failures, summary = h2spec_failures(server.port)
        # On a port that serves HTTP/1.1 too, "INVALID CONNECTION PREFACE" is an HTTP/1.1 request,
        # answered 501 over HTTP/1.1 before the close; h2spec wants the close alone.
        assert failures == {("http2/3.5", "Sends invalid connection preface")}, summary
    finally:
        assert server.stop() == 0
    server = Httpd(build_dir, root, "--workers", "1", "--tls-cert", str(cert), "--tls-key",
                   str(key))
    try:
        failures, summary = h2spec_failures(server.port, "-t", "-k")
        assert failures == set(), summary
    finally:
        assert server.stop() == 0


def test_a_stopping_server_says_goaway_and_its_connections_close(build_dir):
    port = free_port()
    process = subprocess.Popen([str(build_dir / "examples" / "sse"), f"127.0.0.1:{port}", "50"],
                               stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process, "sse")
        client = Client(port)
        events = client.request("/events")
        client.until(lambda: b"tick" in client.streams[events]["data"], timeout=5)
        process.send_signal(signal.SIGTERM)
        client.until(lambda: client.terminated is not None, timeout=5)
        assert client.terminated == h2.errors.ErrorCodes.NO_ERROR
        assert client.conn.state_machine.state.name == "CLOSED"
        assert process.wait(timeout=10) == 0  # once its output drained
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_settings_come_from_the_options(build_dir, root):  # noqa: F811
    server = Httpd(build_dir, root, "--http2-streams", "7", "--http2-window", "100000")
    try:
        client = Client(server.port)
        assert client.get("/hello.txt")[0] == 200
        settings = client.conn.remote_settings
        assert settings.max_concurrent_streams == 7
        assert settings.initial_window_size == 100000
        assert settings.max_header_list_size == 16384
        streams = [client.request("/hello.txt") for _ in range(7)]
        client.until(lambda: all(client.streams[s]["ended"] for s in streams))
        client.close()
    finally:
        assert server.stop() == 0


def test_no_http2_leaves_every_connection_http1(build_dir, root, certificate):  # noqa: F811
    cert, key, _ = certificate
    server = Httpd(build_dir, root, "--no-http2", "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        with h2_context(cert).wrap_socket(socket.create_connection(("127.0.0.1", server.port)),
                                          server_hostname="localhost") as sock:
            assert sock.selected_alpn_protocol() == "http/1.1"
    finally:
        assert server.stop() == 0
    server = Httpd(build_dir, root, "--no-http2")
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(PREFACE)
            assert sock.recv(4096).startswith(b"HTTP/1.1 505")
    finally:
        assert server.stop() == 0


def test_h2_clients_through_the_proxy_to_an_http1_upstream(build_dir, root, example):  # noqa: F811
    upstream = example("http-api")
    server = Httpd(build_dir, root, "--proxy", f"/hello=127.0.0.1:{upstream}", "--proxy",
                   f"/echo=127.0.0.1:{upstream}")
    try:
        client = Client(server.port)
        status, headers, body = client.get("/hello?name=proxied")
        assert (status, body, headers["x-api"]) == (200, b'{"hello": "proxied"}\n', "1")
        payload = bytes(range(256)) * 400  # 102,400 bytes, streamed to the upstream
        status, _, body = client.get("/echo", method="POST", body=payload)
        assert status == 200 and body == payload
        streams = [client.request(f"/hello?name={i}") for i in range(50)]
        client.until(lambda: all(client.streams[s]["ended"] for s in streams))
        assert all(client.streams[s]["data"] == f'{{"hello": "{i}"}}\n'.encode()
                   for i, s in enumerate(streams))
        assert client.terminated is None
        client.close()
    finally:
        assert server.stop() == 0


def test_an_upstream_failing_half_way_resets_its_stream_and_no_other(build_dir, root,  # noqa: F811
                                                                      upstreams):  # noqa: F811
    """An upstream that promises 100 bytes, sends 10 and closes: that stream is reset, so the
    client does not take 10 bytes for the answer, and the connection's other streams go on (it
    once closed the connection, and all of them with it)."""
    (root / "big.bin").write_bytes(b"b" * 3000000)
    up = upstreams()
    server = Httpd(build_dir, root, "--proxy", f"/api/=127.0.0.1:{up.port}")
    try:
        client = Client(server.port)
        long = client.request("/big.bin")  # under way while the other fails
        cut = client.request("/api/cut")
        client.until(lambda: client.streams[cut]["reset"] is not None)
        assert client.streams[cut]["reset"] == h2.errors.ErrorCodes.INTERNAL_ERROR
        assert not client.streams[cut]["ended"]
        client.until(lambda: client.streams[long]["ended"])
        assert len(client.streams[long]["data"]) == 3000000
        assert client.get("/hello.txt")[0] == 200 and client.terminated is None
        client.close()
    finally:
        assert server.stop() == 0


def test_a_streamed_route_reads_the_body_from_its_stream_as_it_comes(build_dir, tmp_path):
    port = free_port()
    process = subprocess.Popen([str(build_dir / "examples" / "upload"), f"127.0.0.1:{port}",
                                str(tmp_path)], stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process, "upload")
        client = Client(port)
        payload = bytes(range(256)) * 4096  # 1 MiB, read by the handler's fiber in pieces
        assert client.get("/file.bin", method="PUT", body=payload)[0] == 201
        assert (tmp_path / "file.bin").read_bytes() == payload
        # Past what a connection may hold (16 MiB): it streams through a window of 256 KiB.
        big = hashlib.sha256(b"big").digest() * (24 * 1024 * 1024 // 32)
        status, _, body = client.get("/big.bin", method="PUT", body=big)
        assert (status, body) == (201, b"stored big.bin: 25165824 bytes\n")
        assert (tmp_path / "big.bin").read_bytes() == big
        # Reset half-way: the handler hears it (the file goes), and the connection goes on.
        stream = client.conn.get_next_available_stream_id()
        client.conn.send_headers(stream, [(":method", "PUT"), (":path", "/gone.bin"),
                                          (":scheme", "http"), (":authority", "x")])
        client.conn.send_data(stream, b"x" * 16000)
        client.conn.reset_stream(stream, h2.errors.ErrorCodes.CANCEL)
        client.flush()
        assert client.get("/small.bin", method="PUT", body=b"small")[0] == 201
        assert not (tmp_path / "gone.bin").exists()
        client.close()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0


def read_request(peer):
    """An HTTP/1.1 request with a Content-Length, read whole: its body's length."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += peer.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    got = len(body)
    while got < length:
        got += len(peer.recv(1 << 20))
    return got


def test_a_proxied_body_holds_its_client_back_while_the_upstream_does_not_read(
        build_dir, root):  # noqa: F811
    """Flow control end to end: an upstream that reads nothing stops the client, by its stream's
    window, after what the sockets between hold; once it reads, all of the body goes through."""
    upstream = socket.socket()
    upstream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    upstream.bind(("127.0.0.1", 0))
    upstream.listen(1)
    server = Httpd(build_dir, root, "--proxy", f"/up=127.0.0.1:{upstream.getsockname()[1]}")
    try:
        client = Client(server.port)
        size = 64 * 1024 * 1024
        stream = client.conn.get_next_available_stream_id()
        client.streams[stream] = {"headers": None, "data": b"", "ended": False, "reset": None}
        client.conn.send_headers(stream, [(":method", "POST"), (":path", "/up/sink"),
                                          (":scheme", "http"), (":authority", "x"),
                                          ("content-length", str(size))])
        sent, chunk = 0, b"z" * 16384
        client.sock.settimeout(0.5)
        while True:  # send while the window lets us; stop when no update comes for 0.5 s
            room = min(client.conn.local_flow_control_window(stream), len(chunk), size - sent)
            if room > 0:
                client.conn.send_data(stream, chunk[:room])
                client.flush()
                sent += room
                continue
            try:
                client.read_some()
            except socket.timeout:
                break
        assert 0 < sent < 16 * 1024 * 1024, sent  # held back well before the 64 MiB
        peer, _ = upstream.accept()
        got = []
        reader = threading.Thread(target=lambda: got.append(read_request(peer)))
        reader.start()  # the upstream reads now, and the client sends the rest
        client.sock.settimeout(5)
        client.send_body(stream, b"z" * (size - sent))
        reader.join(timeout=10)
        assert got == [size]
        peer.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
        client.sock.setblocking(True)
        client.until(lambda: client.streams[stream]["ended"])
        assert (client.streams[stream]["headers"][":status"], client.streams[stream]["data"]) == \
            ("200", b"ok\n")
        peer.close()
        client.close()
    finally:
        upstream.close()
        assert server.stop() == 0


def test_a_held_answer_waiting_for_its_window_leaves_its_slot_to_others(build_dir):
    """A held request answered while its stream's window is shut finishes, and its slot goes to
    the next request, on another connection; its stream's close, when the window opens, must not
    touch that request (it once cancelled it, and aborted the server)."""
    port, process = start_example(build_dir, "http-fiber", 200)
    try:
        shut = Client(port, window=0)
        first = shut.request("/")
        other = Client(port)
        assert other.get("/missing")[0] == 404  # its connection is the server's
        shut.until(lambda: shut.streams[first]["headers"] is not None)  # answered, no DATA yet
        second = other.request("/")  # takes the slot the first left, and waits 200 ms
        time.sleep(0.05)
        shut.conn.increment_flow_control_window(1000, first)
        shut.conn.increment_flow_control_window(1000)
        shut.flush()
        shut.until(lambda: shut.streams[first]["ended"])
        other.until(lambda: other.streams[second]["ended"])
        assert other.streams[second]["data"] == b"Hello World\n"
        shut.close()  # and a close of a connection whose slot was reused
        assert [Client(port).get("/")[0] for _ in range(3)] == [200] * 3
        other.close()
    finally:
        stop_example(process)


def test_a_proxied_answer_read_slowly_holds_its_upstream_back_not_the_connection(
        build_dir, root):  # noqa: F811
    """A 24 MB answer from the upstream to a stream whose window the client keeps shut: the proxy
    stops reading the upstream once the stream's pieces back up (64 KiB), instead of queueing it
    until the connection's 16 MiB and closing the connection; the connection's other streams go
    on, and once the client reads, the whole answer comes."""
    big = hashlib.sha256(b"slow").digest() * (24 * 1000 * 1000 // 32)
    (root / "big.bin").write_bytes(big)
    (root / "up").mkdir()
    (root / "up" / "big.bin").write_bytes(big)
    upstream = Httpd(build_dir, root)
    server = Httpd(build_dir, root, "--proxy", f"/up/=127.0.0.1:{upstream.port}")
    try:
        client = Client(server.port)
        client.conn.increment_flow_control_window(2**30)  # the connection's: streams' stay small
        client.hold_window = True
        slow = client.request("/up/big.bin")
        client.until(lambda: len(client.streams[slow]["data"]) >= 65535)
        time.sleep(1)  # the upstream could send it all meanwhile
        client.hold_window = False
        assert client.get("/hello.txt")[0] == 200  # the connection serves on
        assert client.terminated is None and client.streams[slow]["reset"] is None
        client.hold_window = True  # its window opened for the rest at once: fewer frames to read
        client.conn.increment_flow_control_window(2**30, slow)
        client.flush()
        client.until(lambda: client.streams[slow]["ended"], timeout=30)
        assert client.streams[slow]["data"] == big
        client.close()
    finally:
        assert server.stop() == 0
        assert upstream.stop() == 0


def test_large_windows_take_whole_files_in_one_go(httpd, root):  # noqa: F811
    """A client whose windows take more than the connection's output holds: the output backs
    up, drains at once, and the sending goes on (it once waited for the client's next frame)."""
    big = bytes(range(256)) * 12000  # 3 MB
    (root / "big.bin").write_bytes(big)
    client = Client(httpd.port, window=2**31 - 1)
    status, _, body = client.get("/big.bin")
    assert status == 200 and body == big
    client.close()
