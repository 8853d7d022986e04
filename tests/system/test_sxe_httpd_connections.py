"""sxe-httpctl connections: each worker's open connections, the longest in their state first, with
their peer, state, time in it, bytes queued and the request under way, for people and as JSON;
from worker processes (woken by SIGUSR2) and threads (woken by a byte), idle or not."""
import json
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from test_sxe_httpd import httpd, root  # noqa: F401 (fixtures)


def ctl(build_dir, path, *args):
    return subprocess.run([str(build_dir / "tools" / "sxe-httpctl"), "-s", str(path), *args],
                          capture_output=True, text=True, timeout=30)


@pytest.fixture
def silent_upstream():
    """An upstream that takes connections and requests and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    taken = []
    stop = threading.Event()

    def serve():
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                taken.append(listener.accept()[0])
            except socket.timeout:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in taken:
        conn.close()
    listener.close()


def listed(build_dir, path):
    result = ctl(build_dir, path, "connections", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def by_port(data, port):
    return [c for c in data["connections"] if c["peer"] == f"127.0.0.1:{port}"]


def test_each_connection_says_what_it_waits_for(httpd, build_dir, tmp_path,  # noqa: F811
                                                 silent_upstream):
    control = tmp_path / "control"
    server = httpd("--workers", "2", "--control", str(control),
                   "--proxy", f"/slow/=127.0.0.1:{silent_upstream}")
    partial = socket.create_connection(("127.0.0.1", server.port))
    partial.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n")  # no end of head yet
    idle = socket.create_connection(("127.0.0.1", server.port))
    idle.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert idle.recv(4096).startswith(b"HTTP/1.1 200 ")
    held = socket.create_connection(("127.0.0.1", server.port))
    held.sendall(b"GET /slow/x?y=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    body = socket.create_connection(("127.0.0.1", server.port))
    body.sendall(b"POST /slow/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
    time.sleep(0.3)
    began = time.monotonic()
    data = listed(build_dir, control)
    assert time.monotonic() - began < 1
    assert [w["answered"] for w in data["workers"]] == [True, True], data["workers"]
    assert sum(w["open"] for w in data["workers"]) >= 4 + 2  # and the two to the upstream
    (one,) = by_port(data, partial.getsockname()[1])
    assert (one["state"], one["what"], one["upstream"]) == ("reading", "a request head arriving",
                                                            False)
    assert 200 <= one["in_state_ms"] < 5000
    (one,) = by_port(data, idle.getsockname()[1])
    assert (one["state"], one["what"]) == ("idle", "waiting for a request")
    (one,) = by_port(data, held.getsockname()[1])
    assert one["what"] == "answer under way: GET /slow/x?y=1", one
    (one,) = by_port(data, body.getsockname()[1])
    assert one["what"] == "body arriving: POST /slow/upload", one
    upstream = [c for c in data["connections"] if c["upstream"]]
    assert upstream and all(c["what"] == "" for c in upstream), upstream
    # For people: a line each, under a header.
    result = ctl(build_dir, control, "connections")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["worker", "peer", "state"]
    assert any(f"127.0.0.1:{held.getsockname()[1]}" in line and "GET /slow/x?y=1" in line
               for line in lines), lines
    # HTTP/2: its oldest held request; a long target is cut, what it does is not.
    h2 = subprocess.Popen(["curl", "-s", "--http2-prior-knowledge", "-o", "/dev/null",
                           f"http://127.0.0.1:{server.port}/slow/h2/" + "x" * 300])
    try:
        deadline = time.monotonic() + 5
        while True:
            found = [c for c in listed(build_dir, control)["connections"]
                     if c["what"].startswith("HTTP/2, answer under way: GET /slow/h2/xxx")]
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert found, listed(build_dir, control)
    finally:
        h2.kill()
        h2.wait()
    assert any("(upstream)" in line for line in lines), lines
    for sock in (partial, idle, held, body):
        sock.close()
    assert server.stop() == 0


def test_past_64_a_worker_says_how_many_it_left_out(httpd, build_dir, tmp_path):  # noqa: F811
    control = tmp_path / "control"
    server = httpd("--workers", "1", "--control", str(control))
    clients = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(80)]
    time.sleep(0.3)
    data = listed(build_dir, control)
    assert (data["workers"][0]["open"], data["workers"][0]["listed"]) == (80, 64)
    assert len(data["connections"]) == 64
    result = ctl(build_dir, control, "connections")
    assert "worker 0: 80 open, the 64 longest in their state shown" in result.stdout
    for sock in clients:
        sock.close()
    assert server.stop() == 0


def test_worker_threads_list_even_after_a_long_idle(httpd, build_dir, tmp_path):  # noqa: F811
    """A thread's loop is woken by a byte on a pair of its own, which no idle timeout closes."""
    control = tmp_path / "control"
    server = httpd("--workers", "2", "--threads", "--idle-timeout", "1", "--control",
                   str(control))
    time.sleep(2.2)  # past the idle timeout, with nothing to do
    client = socket.create_connection(("127.0.0.1", server.port))
    client.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n")
    time.sleep(0.2)
    data = listed(build_dir, control)
    assert [w["answered"] for w in data["workers"]] == [True, True]
    (one,) = by_port(data, client.getsockname()[1])
    assert one["state"] == "reading"
    client.close()
    began = time.monotonic()
    assert server.stop() == 0
    assert time.monotonic() - began < 3  # the pair keeps no stop waiting


def test_a_wrong_word_and_no_workers_listening(httpd, build_dir, tmp_path):  # noqa: F811
    control = tmp_path / "control"
    server = httpd("--workers", "1", "--control", str(control))
    result = ctl(build_dir, control, "connections", "now")
    assert result.returncode == 1 and "is not a command" in result.stderr
    result = subprocess.run([str(build_dir / "tools" / "sxe-httpctl"), "-s", str(control), "-j",
                             "reload"], capture_output=True, text=True, timeout=10)
    assert result.returncode == 2 and "--json is for status and connections" in result.stderr
    deadline = time.monotonic() + 5  # the start-up check's connection may still be closing
    while (data := listed(build_dir, control))["connections"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert data["connections"] == [] and data["workers"][0]["open"] == 0
    assert server.stop() == 0


def test_a_stopped_worker_and_those_of_before_a_reload_are_said(httpd, build_dir, tmp_path,  # noqa
                                                                 silent_upstream):
    control = tmp_path / "control"
    server = httpd("--workers", "2", "--control", str(control), "--proxy-timeout", "20",
                   "--proxy", f"/slow/=127.0.0.1:{silent_upstream}")
    status = json.loads(ctl(build_dir, control, "status", "--json").stdout)
    stopped = status["per_worker"][0]["pid"]
    os.kill(stopped, signal.SIGSTOP)
    try:
        began = time.monotonic()
        result = ctl(build_dir, control, "connections")
        assert 0.2 < time.monotonic() - began < 2
        assert "worker 0: no answer within 250 ms (busy in a callback, or stopped)" in \
            result.stdout, result.stdout
    finally:
        os.kill(stopped, signal.SIGCONT)
    assert server.stop() == 0


def test_a_proxied_request_outlives_the_idle_timeout(httpd, build_dir, silent_upstream):  # noqa
    """The upstream's connection owes an answer: the loop's idle timeout does not cut it, the
    proxy's own timeout does."""
    server = httpd("--workers", "1", "--idle-timeout", "1", "--proxy-timeout", "3",
                   "--proxy", f"/slow/=127.0.0.1:{silent_upstream}")
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port)) as client:
        client.sendall(b"GET /slow/x HTTP/1.1\r\nHost: x\r\n\r\n")
        client.settimeout(10)
        answer = client.recv(4096)
    assert answer.startswith(b"HTTP/1.1 504 "), answer
    assert 2.8 < time.monotonic() - began < 6
    assert server.stop() == 0
