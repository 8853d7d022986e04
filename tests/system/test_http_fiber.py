"""examples/http-fiber, a fiber handler that sleeps before it answers, as a real server: 10,000
requests at once, each sleeping 100 ms, all answered well within 10 s (one after another they
would take 1,000 s), with no error; and a handler's wait does not hold up other clients."""
import json
import socket
import subprocess
import time

import pytest

from conftest import unread_by_peer, wait_for_port, wait_until


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(build_dir, port, sleep_ms):
    process = subprocess.Popen([str(build_dir / "examples" / "http-fiber"), f"127.0.0.1:{port}",
                                str(sleep_ms)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_port(port, process, "http-fiber")
    return process


@pytest.mark.serial
def test_ten_thousand_sleeping_handlers_at_once(build_dir):
    port = free_port()
    process = start(build_dir, port, 100)
    try:
        started = time.monotonic()
        result = subprocess.run([str(build_dir / "tools" / "sxe-http"), "-i", "127.0.0.1", "-p",
                                 str(port), "-c", "10000", "-n", "1", "--json"],
                                capture_output=True, text=True, timeout=60)
        elapsed = time.monotonic() - started
        data = json.loads(result.stdout)
        assert data["errors"]["total"] == 0, result.stdout
        assert data["queries"] == 10000
        assert elapsed < 5, f"10,000 requests of 100 ms took {elapsed:.1f} s"
        # Each waited its 100 ms: none was answered early.
        assert data["latency_ms"]["p50"] >= 100
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


@pytest.mark.serial
def test_a_waiting_handler_does_not_hold_up_others(build_dir):
    port = free_port()
    process = start(build_dir, port, 500)
    try:
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        wait_until(lambda: unread_by_peer(slow) == 0, what="the slow request to be read")
        fast_started = time.monotonic()
        others = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        for sock in others:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        for sock in others:
            assert b"Hello World" in sock.recv(4096)
            sock.close()
        # The three waited their own 500 ms, side by side, not behind the first.
        assert time.monotonic() - fast_started < 1.4
        assert b"Hello World" in slow.recv(4096)
        slow.close()
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


def test_server_sent_events_stream_until_the_client_leaves(build_dir):
    """examples/sse: held requests streaming an event every 50 ms to two subscribers; one leaves
    (the program is told, and forgets it) while the other reads on; later subscribers are served."""
    port = free_port()
    process = subprocess.Popen([str(build_dir / "examples" / "sse"), f"127.0.0.1:{port}", "50"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_port(port, process, "sse")

    def subscribe():
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        return sock

    def events(sock, count):
        data = b""
        while data.count(b"data: tick") < count:
            chunk = sock.recv(4096)
            assert chunk, data
            data += chunk
        return data

    try:
        first, second = subscribe(), subscribe()
        head = events(first, 3)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"Content-Type: text/event-stream\r\n" in head
        assert b"Transfer-Encoding: chunked\r\n" in head
        first.close()  # leaves mid-stream
        assert events(second, 10).count(b"data: tick") >= 10  # 500 ms on: past nothing stuck
        third = subscribe()
        assert b"data: tick" in events(third, 2)
        second.close()
        third.close()
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
