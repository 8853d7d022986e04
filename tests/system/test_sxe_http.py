"""sxe-http against examples/hello and against fake servers that misbehave on purpose."""
import json
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import listening_sockets, wait_for_port, wait_until

REQUEST_END = b"\r\n\r\n"


class FakeServer:
    """A threaded loopback server: respond(request_bytes) gives the bytes to send back, None to
    close the connection, or (bytes, "close") to send and then close. It records the peers and
    the requests it saw."""

    def __init__(self, respond, address="127.0.0.1"):
        self.respond = respond
        self.peers = []
        self.requests = []
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((address, 0))
        self.listener.listen(1024)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                conn, peer = self.listener.accept()
            except OSError:
                return
            self.peers.append(peer[0])
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        buffered = b""
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buffered += data
                while REQUEST_END in buffered:
                    head, buffered = buffered.split(REQUEST_END, 1)
                    self.requests.append(head + REQUEST_END)
                    reply = self.respond(head + REQUEST_END)
                    if reply is None:
                        return
                    if isinstance(reply, tuple):
                        conn.sendall(reply[0])
                        return
                    conn.sendall(reply)

    def close(self):
        # shutdown stops the listening at once: close alone leaves it open while the accept
        # thread still blocks in accept(), and the next connect would be taken.
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()


def report(result):
    assert result.stdout.startswith("{"), result.stdout + result.stderr
    return json.loads(result.stdout)


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def test_exact_counts_against_hello(sxe_http, hello):
    result = sxe_http("-i", "127.0.0.1", "-p", hello, "-n", 7, "-c", 13, "--json")
    assert result.returncode == 0, result.stderr
    data = report(result)
    assert data["connected"] == 13
    assert data["queries"] == 91
    assert data["errors"]["total"] == 0
    assert data["not_sent"] == 0
    assert 0 < data["latency_ms"]["p50"] <= data["latency_ms"]["p99"] <= data["latency_ms"]["max"]


def test_classic_text_report(sxe_http, hello):
    result = sxe_http("-i", "127.0.0.1", "-p", hello, "-n", 50, "-c", 100)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("sxe-http: 100 connections x 50 queries to 127.0.0.1:")
    assert lines[1].startswith("connections: 100 in ")
    assert "0 slower than 1 s; 0 failed" in lines[1]
    assert lines[2].startswith("queries:     5000 in ")
    assert lines[3].startswith("run:")
    assert "p50" in lines[4] and "p99.9" in lines[4] and "max" in lines[4]
    assert lines[5] == ("errors:      connect 0, read 0, write 0, timeout 0, bad status 0, "
                        "bad length 0, bad body 0")


def test_pipelining_and_workers_keep_exact_counts(sxe_http, hello):
    data = report(sxe_http("-i", "127.0.0.1", "-p", hello, "-n", 10, "-c", 30, "-P", 4, "-w", 3,
                           "--json"))
    assert data["workers"] == 3
    assert data["queries"] == 300
    assert data["errors"]["total"] == 0


def test_duration_mode(sxe_http, hello):
    data = report(sxe_http("-i", "127.0.0.1", "-p", hello, "-d", 1, "-c", 10, "--json"))
    assert data["queries"] > 100
    assert data["errors"]["total"] == 0
    assert 0.9 < data["run_s"] < 5


def test_a_warm_up_is_not_counted_but_its_errors_are(build_dir):
    """--warmup 1 at 1000 requests a second, then a window of -d 1: about 1000 answers counted,
    not 2000; the first 50 answers, 404s during the warm-up, still count as errors; stderr says
    when the window starts and ends, a second apart, as a tool sampling the server reads it."""
    answered = []

    def respond(request):
        answered.append(request)
        if len(answered) <= 50:
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        return OK

    server = FakeServer(respond)
    try:
        process = subprocess.Popen([str(build_dir / "tools" / "sxe-http"), "-i", "127.0.0.1",
                                    "-p", str(server.port), "-c", "2", "-R", "1000", "-d", "1",
                                    "--warmup", "1", "--json"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        marks = []
        for line in process.stderr:
            if line.startswith("sxe-http: measur"):
                marks.append((line.strip(), time.monotonic()))
        data = report(subprocess.CompletedProcess([], process.wait(timeout=30),
                                                  process.stdout.read(), ""))
    finally:
        server.close()
    assert [mark for mark, _ in marks] == ["sxe-http: measuring", "sxe-http: measured"]
    assert 0.8 < marks[1][1] - marks[0][1] < 1.5
    assert data["warmup_s"] == 1 and data["duration_s"] == 1
    assert 900 <= data["queries"] <= 1100, data["queries"]
    assert len(answered) >= 1900
    assert data["errors"]["bad_status"] == 50 and data["bad_statuses"] == {"404": 50}


def test_http10_opens_a_connection_for_each_request(sxe_http):
    """--http1.0: every request says HTTP/1.0 and goes on a new connection (the server's answer
    ends the old one); all are counted, none is an error, and the server saw one a connection."""
    server = FakeServer(lambda request: (OK, "close"))
    try:
        data = report(sxe_http("-i", "127.0.0.1", "-p", server.port, "-c", 4, "-n", 25,
                               "--http1.0", "--json"))
    finally:
        server.close()
    assert data["queries"] == 100 and data["errors"]["total"] == 0 and data["not_sent"] == 0
    assert data["connected"] == 4 and data["reopened"] == 96
    assert len(server.peers) == 100 and len(server.requests) == 100
    assert all(request.startswith(b"GET / HTTP/1.0\r\n") for request in server.requests)


def test_http10_counts_a_refused_reconnect(sxe_http):
    """The server answers once, then stops listening: the next connect fails, is counted, and
    the rest of that connection's requests are never sent."""
    holder = {}

    def respond(request):
        holder["server"].close()
        return (OK, "close")

    holder["server"] = server = FakeServer(respond)
    data = report(sxe_http("-i", "127.0.0.1", "-p", server.port, "-n", 5, "--http1.0",
                           "--json"))
    assert data["queries"] == 1
    assert data["errors"]["connect"] == 1 and data["not_sent"] == 4


def test_refused_connects_count_every_connection_s_queries(sxe_http):
    """Nobody listens: each of the three connects fails, and all their queries are never sent."""
    with socket.socket() as probe:  # a port that was free, and is closed again: refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = sxe_http("-i", "127.0.0.1", "-p", port, "-n", 4, "-c", 3, "--json")
    assert result.returncode == 1
    data = report(result)
    assert data["queries"] == 0
    assert data["errors"]["connect"] == 3 and data["not_sent"] == 12


def test_a_connection_that_is_done_closes_at_once(sxe_http):
    """-n 1 on two connections, the first answered at once and the second a second later: the
    first is closed as soon as it is answered, not when the run ends."""
    closed = {}
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve(conn, index):
        with conn:
            data = b""
            while REQUEST_END not in data:
                data += conn.recv(4096)
            if index == 1:
                time.sleep(1.0)
            conn.sendall(OK)
            try:
                while conn.recv(4096):
                    pass
            except OSError:
                pass  # a reset: sxe-http closes with SO_LINGER 0
            closed[index] = time.monotonic()

    def accept():
        for index in range(2):
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn, index), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    start = time.monotonic()
    try:
        data = report(sxe_http("-i", "127.0.0.1", "-p", listener.getsockname()[1], "-c", 2,
                               "-n", 1, "--json"))
    finally:
        listener.close()
    assert data["queries"] == 2 and data["errors"]["total"] == 0
    wait_until(lambda: len(closed) == 2, 5)
    assert closed[0] - start < 0.5, closed[0] - start  # not at the run's end, a second on
    assert closed[1] - start >= 1.0


def test_a_large_request_goes_whole_on_every_connection(sxe_http, build_dir, tmp_path):
    """A 1 MB upload (-f) on 20 connections at once, sent by reference: examples/upload stores
    each whole (201), and the file is the body's bytes."""
    body = bytes(range(256)) * 4096
    request = tmp_path / "put.req"
    request.write_bytes(b"PUT /up.bin HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                        % len(body) + body)
    store = tmp_path / "store"
    store.mkdir()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([str(build_dir / "examples" / "upload"), f"127.0.0.1:{port}",
                                str(store)], stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process, "examples/upload")
        data = report(sxe_http("-i", "127.0.0.1", "-p", port, "-c", 20, "-n", 3, "-f", request,
                               "-e", 201, "--json"))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=5)
    assert data["queries"] == 60 and data["errors"]["total"] == 0
    assert (store / "up.bin").read_bytes() == body


def test_verbose_hex_dumps_the_request(sxe_http, hello):
    result = sxe_http("-i", "127.0.0.1", "-p", hello, "-v")
    assert result.returncode == 0
    assert "0000  47 45 54 20 2f 20 48 54  54 50 2f 31 2e 31 0d 0a  |GET / HTTP/1.1..|" in \
        result.stderr


def test_request_from_options_and_file(sxe_http, tmp_path):
    server = FakeServer(lambda request: OK)
    result = sxe_http("-i", "127.0.0.1", "-p", server.port, "-m", "POST", "-u", "/submit",
                      "-H", "X-Test: yes", "-b", "abc", "-n", 2)
    assert result.returncode == 0, result.stdout + result.stderr
    assert server.requests[0].startswith(b"POST /submit HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"X-Test: yes\r\nContent-Length: 3\r\n" in server.requests[0]
    request = tmp_path / "request"
    request.write_bytes(b"GET /from-file HTTP/1.1\r\nHost: h\r\n\r\n")
    assert sxe_http("-i", "127.0.0.1", "-p", server.port, "-f", request).returncode == 0
    assert server.requests[-1] == request.read_bytes()
    server.close()


def test_chunked_and_empty_responses_are_framed(sxe_http):
    replies = iter([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\n",
                    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"] * 10)
    server = FakeServer(lambda request: next(replies))
    data = report(sxe_http("-i", "127.0.0.1", "-p", server.port, "-n", 30, "--json"))
    assert data["queries"] == 30
    assert data["errors"]["total"] == 0
    server.close()


def test_bad_status_is_counted(sxe_http):
    server = FakeServer(lambda request: b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n")
    result = sxe_http("-i", "127.0.0.1", "-p", server.port, "-n", 5, "-c", 2, "--json")
    assert result.returncode == 1
    data = report(result)
    assert data["errors"]["bad_status"] == 10
    assert data["queries"] == 10
    server.close()


def fnv1a(data):
    """The 64-bit FNV-1a of data, the hash sxe-http compares bodies by."""
    value = 14695981039346656037
    for byte in data:
        value = ((value ^ byte) * 1099511628211) % 2**64
    return value


def test_bodies_of_the_wrong_length_or_bytes_are_counted(sxe_http, tmp_path):
    """--body-length: every body's length, chunked framing left out; --body FILE: its length
    for every body, its bytes for every 64th (a server that answers with the wrong bytes of the
    right length is caught there). HEAD's answers have none."""
    replies = iter([b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhe\r\n"
                    b"3\r\nllo\r\n0\r\n\r\n"] * 1000)
    server = FakeServer(lambda request: next(replies))
    expected, above, below = tmp_path / "hello", tmp_path / "jello", tmp_path / "cello"
    expected.write_bytes(b"hello")
    above.write_bytes(b"jello")  # bytes whose FNV-1a is above the answer's
    below.write_bytes(b"cello")  # and below it: only the same bytes pass
    assert fnv1a(b"cello") < fnv1a(b"hello") < fnv1a(b"jello")
    for args, bad in ((["--body-length", 5], 0), (["--body-length", 4], 100),
                      (["--body", expected], 0), (["--body", above], 2), (["--body", below], 2)):
        result = sxe_http("-i", "127.0.0.1", "-p", server.port, "-n", 100, *args, "--json")
        assert result.returncode == (1 if bad else 0), result.stdout
        data = report(result)
        assert data["queries"] == 100 and data["errors"]["bad_body"] == bad, data["errors"]
    server.close()
    server = FakeServer(lambda request: b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
    result = sxe_http("-i", "127.0.0.1", "-p", server.port, "-n", 10, "-m", "HEAD",
                      "--body-length", 5, "--json")
    assert report(result)["errors"]["total"] == 0
    server.close()


def test_short_body_is_a_bad_length(sxe_http):
    server = FakeServer(lambda request: (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
                                         "close"))
    result = sxe_http("-i", "127.0.0.1", "-p", server.port, "-n", 3, "--json")
    assert result.returncode == 1
    data = report(result)
    assert data["errors"]["bad_length"] == 1
    assert data["queries"] == 0
    assert data["not_sent"] == 2
    data = report(sxe_http("-i", "127.0.0.1", "-p", server.port, "-n", 3, "-c", 2, "--json"))
    assert data["errors"]["bad_length"] == 2
    assert data["not_sent"] == 4  # each connection's, summed
    server.close()


@pytest.mark.parametrize("reply", [
    b"HTTP/1.1 200 OK\r\n\r\nno length at all",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx",
    b"SMTP ready\r\n\r\n",
])
def test_broken_framing_is_a_bad_length(sxe_http, reply):
    server = FakeServer(lambda request: reply)
    data = report(sxe_http("-i", "127.0.0.1", "-p", server.port, "-n", 2, "--json"))
    assert data["errors"]["bad_length"] == 1
    assert data["not_sent"] == 1
    server.close()


def test_server_closing_early_is_reported(sxe_http):
    server = FakeServer(lambda request: OK if len(server.requests) % 3 else None)
    result = sxe_http("-i", "127.0.0.1", "-p", server.port, "-n", 10, "-c", 1, "--json")
    assert result.returncode == 1
    data = report(result)
    assert data["queries"] == 2
    assert data["errors"]["read"] == 1
    assert data["not_sent"] == 7
    server.close()


def test_silent_server_times_out(sxe_http):
    server = FakeServer(lambda request: b"")
    data = report(sxe_http("-i", "127.0.0.1", "-p", server.port, "-n", 1, "-c", 3, "-t", 1,
                           "--json"))
    assert data["errors"]["timeout"] == 3
    server.close()


def test_refused_connections_are_clear(sxe_http):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, not listening: connects are refused
        result = sxe_http("-i", "127.0.0.1", "-p", port, "-c", 4)
    assert result.returncode == 1
    assert "connections: 0 in" in result.stdout
    assert "connect 4," in result.stdout
    assert "every connection to 127.0.0.1:%d failed; the first: Connection refused" % port in \
        result.stdout


@pytest.mark.parametrize("args, message", [
    (["-i", "999.1.1.1", "-p", "80"], "-i '999.1.1.1': not an IPv4 or IPv6 address"),
    (["-i", "127.0.0.1"], "-i IP and -p PORT, or a URL, are required"),
    (["-i", "127.0.0.1", "-p", "0"], "-p PORT must be a whole number from 1 to 65535, not '0'"),
    (["-i", "127.0.0.1", "-p", "80", "-c", "lots"], "-c CONNECTIONS must be a whole number"),
    (["-i", "127.0.0.1", "-p", "80", "-s", "nowhere"], "-s 'nowhere': not an IPv4 or IPv6"),
    (["-i", "127.0.0.1", "-p", "80", "extra"], "a URL or -i and -p, not both: 'extra'"),
    (["http://127.0.0.1/", "extra"], "unexpected argument 'extra' (one URL at most)"),
    (["-i", "127.0.0.1", "-p", "80", "--ws", "chat"], "--ws 'chat': a path starts with /"),
    (["-i", "127.0.0.1", "-p", "80", "--ws", "/", "--ws-size", "-1"], "--ws-size BYTES must be"),
    (["-i", "127.0.0.1", "-p", "80", "--body-length", "x"], "--body-length BYTES must be"),
    (["-i", "127.0.0.1", "-p", "80", "--body", "/nowhere"], "cannot read the body file '/no"),
    (["-i", "127.0.0.1", "-p", "80", "--warmup", "1"], "--warmup comes before a measured window"),
    (["-i", "127.0.0.1", "-p", "80", "--http1.0", "-P", "2"], "--http1.0 sends one request a"),
])
def test_usage_errors(sxe_http, args, message):
    result = sxe_http(*args)
    assert result.returncode == 2
    assert message in result.stderr


def test_websocket_mode_counts_every_echo(sxe_http, ws_echo):
    """--ws: each connection is a WebSocket (its handshake the connect), each query a message
    echoed; pipelined and across workers the counts stay exact."""
    for extra in ([], ["-P", 8, "-w", 2], ["--ws-size", 70000]):
        result = sxe_http("-i", "127.0.0.1", "-p", ws_echo, "-c", 20, "-n", 50, "--ws", "/",
                          *extra, "--json")
        assert result.returncode == 0, result.stderr
        data = report(result)
        assert (data["connected"], data["queries"], data["errors"]["total"]) == (20, 1000, 0)
        assert 0 < data["latency_ms"]["p50"] <= data["latency_ms"]["max"]


def test_websocket_mode_says_when_the_handshake_is_refused(sxe_http, ws_echo, hello):
    """A path the server does not take, or a server that is not a WebSocket, fails the connects
    with the reason."""
    for port, path in ((ws_echo, "/elsewhere"), (hello, "/")):
        result = sxe_http("-i", "127.0.0.1", "-p", port, "-c", 3, "-n", 2, "--ws", path)
        assert result.returncode == 1
        assert "connect 3," in result.stdout
        assert "the first: Protocol error" in result.stdout + result.stderr


def test_help(sxe_http):
    result = sxe_http("--help")
    assert result.returncode == 0
    assert "usage: sxe-http {-i IP -p PORT | URL}" in result.stdout


def test_file_limit_too_low_says_what_the_limit_is(sxe_http):
    result = sxe_http("-i", "127.0.0.1", "-p", "80", "-c", 500, "-w", 1, limit_files=100)
    assert result.returncode == 2
    assert "the limit is 100 per process (ulimit -n); use -w 8 or more" in result.stderr


def test_the_soft_file_limit_is_raised_to_the_hard_one(sxe_http, hello):
    """ulimit -n says 100, the hard limit 1,000: one worker raises its own limit and holds 500."""
    data = report(sxe_http("-i", "127.0.0.1", "-p", hello, "-c", 500, "-w", 1, "-n", 2,
                           "--json", limit_files=(100, 1000)))
    assert data["errors"]["total"] == 0 and data["queries"] == 1000 and data["workers"] == 1


def test_several_source_addresses(sxe_http):
    server = FakeServer(lambda request: OK, address="0.0.0.0")
    data = report(sxe_http("-i", "127.0.0.1", "-p", server.port, "-c", 6, "-n", 2,
                           "-s", "127.0.0.2,127.0.0.3,127.0.0.4", "--json"))
    assert data["errors"]["total"] == 0
    assert sorted(set(server.peers)) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert sorted(server.peers).count("127.0.0.3") == 2
    server.close()


@pytest.mark.serial
def test_one_hundred_thousand_connections(sxe_http, build_dir):
    """Past the 20,000-files-per-process limit and the ~28,000 ports of one source address:
    sxe-http splits the run over worker processes and 127.0.0.x sources by itself. The server
    side is six examples/hello processes sharing the port (SO_REUSEPORT)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    servers = subprocess.Popen([str(build_dir / "examples" / "hello"), str(port), "6"],
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: listening_sockets(port) == 6, what="the six servers to listen")
        result = sxe_http("-i", "127.0.0.1", "-p", port, "-n", 1, "-c", 100000, "--json",
                          timeout=300)
        data = report(result)
        assert data["workers"] >= 6
        assert data["connected"] == 100000, result.stderr
        assert data["queries"] == 100000
        assert data["errors"]["total"] == 0
        assert result.returncode == 0
    finally:
        os.killpg(servers.pid, signal.SIGTERM)
        servers.wait(timeout=10)
