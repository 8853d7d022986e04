"""examples/hello, echo, udp-echo, http-gateway, http-api and http-work as real servers on
loopback: they serve, and stop cleanly."""
import signal
import socket
import subprocess
import time

import pytest

from conftest import read_reply, unread_by_peer, wait_until

REPLY = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nHello World\n"
REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def server(build_dir):
    started = []

    def start(name, port, *more):
        process = subprocess.Popen([str(build_dir / "examples" / name), str(port), *more],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def connect(port, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=2)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def receive_exactly(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"closed after {len(data)} of {size} bytes"
        data += chunk
    return data


def stop(process):
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=5)


def test_hello_serves_keep_alive_and_pipelined_requests(server):
    port = free_port()
    process = server("hello", port)
    with connect(port) as sock:
        for _ in range(3):
            sock.sendall(REQUEST)
            assert receive_exactly(sock, len(REPLY)) == REPLY
        sock.sendall(REQUEST * 16)
        assert receive_exactly(sock, 16 * len(REPLY)) == REPLY * 16
        sock.sendall(REQUEST[:7])  # a partial request waits for the rest
        wait_until(lambda: unread_by_peer(sock) == 0, what="hello to read the partial request")
        sock.sendall(REQUEST[7:])
        assert receive_exactly(sock, len(REPLY)) == REPLY
    assert stop(process) == 0


def test_hello_stops_on_sigterm_with_clients_connected(server):
    port = free_port()
    process = server("hello", port)
    clients = [connect(port) for _ in range(50)]
    assert stop(process) == 0
    for sock in clients:
        assert sock.recv(1) == b""  # closed by the server on its way out
        sock.close()
    assert b"signal 15: stopping" in process.stderr.read()


def test_hello_reports_a_port_in_use(server):
    port = free_port()
    first = server("hello", port)
    connect(port).close()
    second = server("hello", port)
    assert second.wait(timeout=5) == 1
    assert b"Address already in use" in second.stderr.read()
    assert stop(first) == 0


@pytest.mark.parametrize("name", ["http-api", "http-fiber", "http-gateway", "sse",
                                  "upload", "echo", "ws-echo"])
def test_an_example_on_a_taken_port_says_so(server, name):
    """A port another process listens on: one line naming the address and the reason, exit 1."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        address = f"127.0.0.1:{holder.getsockname()[1]}"
        process = server(name, address)
        assert process.wait(timeout=5) == 1
        said = process.stderr.read().decode()
    assert said == f"{name}: cannot serve on {address}: Address already in use\n"


def test_a_whole_server_in_one_call_says_why_it_cannot_start(server):
    """examples/http-hello is sxe_http_serve() alone: the library says it in an error line."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        address = f"127.0.0.1:{holder.getsockname()[1]}"
        process = server("http-hello", address)
        assert process.wait(timeout=5) == 1
        said = process.stderr.read().decode().splitlines()
    assert len(said) == 1 and said[0].endswith(
        f" ERROR cannot serve on {address}: Address already in use"), said


def test_echo(server):
    port = free_port()
    process = server("echo", f"127.0.0.1:{port}")
    with connect(port) as sock:
        payload = bytes(range(256)) * 400
        sock.sendall(payload)
        assert receive_exactly(sock, len(payload)) == payload
    assert stop(process) == 0


def test_udp_echo(server):
    port = free_port(socket.SOCK_DGRAM)
    process = server("udp-echo", port)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.2)
        for attempt in range(50):  # until the server is up
            sock.sendto(b"ping", ("127.0.0.1", port))
            try:
                assert sock.recvfrom(100)[0] == b"ping"
                break
            except socket.timeout:
                continue
        else:
            pytest.fail("udp-echo never answered")
        for i in range(20):
            sock.sendto(b"datagram %d" % i, ("127.0.0.1", port))
        got = sorted(sock.recvfrom(100)[0] for _ in range(20))
        assert got == sorted(b"datagram %d" % i for i in range(20))
    assert stop(process) == 0


def test_http_gateway_calls_its_upstream_and_says_502_when_it_is_gone(server):
    upstream_port, port = free_port(), free_port()
    upstream = server("http-hello", f"127.0.0.1:{upstream_port}")
    gateway = server("http-gateway", f"127.0.0.1:{port}", f"127.0.0.1:{upstream_port}")
    try:
        connect(upstream_port).close()
        with connect(port) as sock:
            for _ in range(3):  # kept alive on both sides
                sock.sendall(REQUEST)
                reply = read_reply(sock)
                assert reply.startswith(b"HTTP/1.1 200 OK\r\n"), reply
                assert reply.endswith(b"\r\n\r\nHello World\n"), reply
        assert stop(upstream) == 0
        with connect(port) as sock:
            sock.sendall(REQUEST)
            reply = read_reply(sock)
            assert reply.startswith(b"HTTP/1.1 502 Bad Gateway\r\n"), reply
            assert b"the upstream did not answer" in reply
    finally:
        assert stop(gateway) == 0


def test_http_hello_answers_an_http2_upgrade_it_does_not_take_over_http1(server):
    """curl --http2 asks for h2c with Upgrade; a server that does not take it answers as usual
    (RFC 9110 §7.8), where it used to say 501."""
    port = free_port()
    hello = server("http-hello", f"127.0.0.1:{port}")
    connect(port).close()
    result = subprocess.run(["curl", "-sS", "--http2", "-w", "\n%{http_code} %{http_version}",
                             f"http://127.0.0.1:{port}/"], capture_output=True, timeout=10)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"Hello World\n\n200 1.1"
    assert stop(hello) == 0


def test_http_api_answers_json_echoes_bodies_and_adds_its_header(server):
    import http.client
    import json

    port = free_port()
    api = server("http-api", f"127.0.0.1:{port}")
    connect(port).close()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)

    def call(method, target, body=None):
        conn.request(method, target, body=body)
        response = conn.getresponse()
        return response.status, response.getheader("X-Api"), response.getheader("Content-Type"), \
            response.read()

    status, x_api, kind, body = call("GET", "/hello")
    assert (status, x_api, kind) == (200, "1", "application/json")
    assert json.loads(body) == {"hello": "world"}
    # Percent-decoded, '+' a space, quoted and escaped: any name gives valid JSON.
    name = 'J\u00f6rg "the\\quick" </b>\n'
    target = "/hello?x=1&name=" + "".join(f"%{b:02X}" for b in name.encode()) + "&name=second"
    assert json.loads(call("GET", target)[3]) == {"hello": name}
    assert json.loads(call("GET", "/hello?name=a+b")[3]) == {"hello": "a b"}
    assert json.loads(call("GET", "/hello?name=%FF%C0%AF")[3]) == {"hello": "\ufffd" * 3}
    # A POST read as JSON: checked members, and a body that is not JSON told where.
    status, x_api, kind, body = call("POST", "/hello", b'{"name": "Ann \\u00e9", "times": 2}')
    assert (status, x_api, kind) == (200, "1", "application/json")
    assert json.loads(body) == {"hello": ["Ann \u00e9", "Ann \u00e9"]}
    for wrong in (b'{"name": "", "times": 1}', b'{"name": "x", "times": 4}',
                  b'{"name": "x"}', b'{"name": 7, "times": 1}', b'["x", 1]',
                  b'{"name": "a\\u0000b", "times": 1}'):
        status, x_api, _, body = call("POST", "/hello", wrong)
        assert (status, x_api) == (422, "1"), wrong
        assert "want a name" in json.loads(body)["error"]
    status, _, kind, body = call("POST", "/hello", b'{"name": "x",\n "times": }')
    assert (status, kind) == (400, "application/json")
    assert json.loads(body) == {"error": "unexpected character, expected a JSON value",
                                "line": 2, "column": 11, "position": 24}  # (at the brace)
    status, _, _, body = call("POST", "/hello", b"[" * 100 + b"]" * 100)
    assert status == 400
    assert json.loads(body)["error"] == "nested deeper than 64 arrays and objects"
    status, _, _, body = call("POST", "/hello", b'{"name": "x", "name": "y", "times": 1}')
    assert status == 400 and json.loads(body) == {"error": "duplicate object key", "line": 1,
                                                  "column": 15, "position": 14}
    status, _, _, body = call("POST", "/hello", b'{"name": "x", "times": 18446744073709551615}')
    assert status == 400 and json.loads(body)["error"] == "an integer too big for int64_t"
    status, _, _, body = call("POST", "/hello", b"")
    assert status == 400
    payload = bytes(range(256)) * 64
    status, x_api, kind, body = call("POST", "/echo", payload)
    assert (status, x_api, kind, body) == (200, "1", "application/octet-stream", payload)
    status, _, _, _ = call("GET", "/echo")
    assert status == 405
    # The default body limit, 1 MiB, by length and chunked: whole, in one of the large buffers.
    mebibyte = bytes(range(251)) * (1048576 // 251) + bytes(1048576 % 251)
    assert call("POST", "/echo", mebibyte)[3] == mebibyte
    conn.request("POST", "/echo", body=iter([mebibyte[:700000], mebibyte[700000:]]),
                 encode_chunked=True)
    response = conn.getresponse()
    assert (response.status, response.read()) == (200, mebibyte)
    status, _, _, _ = call("POST", "/echo", mebibyte + b"!")
    assert status == 413
    conn.close()
    assert stop(api) == 0


def test_http_work_resolves_names_on_its_pool(server):
    import http.client

    port = free_port()
    work = server("http-work", f"127.0.0.1:{port}")
    connect(port).close()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def call(target):
        conn.request("GET", target)
        response = conn.getresponse()
        return response.status, response.read()

    assert call("/resolve?name=127.0.0.9") == (200, b"127.0.0.9\n")
    status, body = call("/resolve?name=localhost")
    assert status == 200 and b"127.0.0.1\n" in body
    assert call("/resolve?name=") == (400, b"ask /resolve?name=HOST\n")
    assert call("/resolve") == (400, b"ask /resolve?name=HOST\n")
    assert call("/resolve?name=no-such-host.invalid")[0] == 404
    assert call("/") == (200, b"Hello World\n")
    conn.close()
    assert stop(work) == 0


@pytest.mark.parametrize("program", ["sxe-httpd", "sxe-http"])
def test_programs_say_their_version(build_dir, program):
    """--version: the program's and the library's, as include/sxe/version.h says."""
    import pathlib
    import re

    header = (pathlib.Path(__file__).parents[2] / "include" / "sxe" / "version.h").read_text()
    parts = [re.search(rf"#define SXE_VERSION_{part} +(\d+)", header).group(1)
             for part in ("MAJOR", "MINOR", "PATCH")]
    version = ".".join(parts)
    result = subprocess.run([str(build_dir / "tools" / program), "--version"], capture_output=True,
                            text=True, timeout=10)
    assert result.returncode == 0
    assert result.stdout == f"{program} {version} (libsxe {version})\n"
