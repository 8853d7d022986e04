"""examples/upload, a fiber handler that stores request bodies of any size as files, as a real
server: bodies of tens of megabytes (thousands of times the connection's buffer) arrive intact, by
Content-Length and chunked, several at once; 100 Continue comes only when the body is wanted; a
disk that says no (/dev/full) gets 507 and keeps nothing; a client that leaves mid-body leaves no
file behind, and the server goes on."""
import hashlib
import os
import socket
import subprocess
import threading
import time

import pytest

from conftest import read_reply, wait_for_port


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def upload(build_dir, tmp_path):
    port = free_port()
    store = tmp_path / "store"
    store.mkdir()
    process = subprocess.Popen([str(build_dir / "examples" / "upload"), f"127.0.0.1:{port}",
                                str(store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_port(port, process, "upload")
    yield port, store
    process.terminate()
    assert process.wait(timeout=10) == 0


def read_response(sock):
    head, _, body = read_reply(sock).partition(b"\r\n\r\n")
    return head, body


def put(port, name, body, chunked=False):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        if chunked:
            sock.sendall(f"PUT /{name} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                         "\r\n".encode())
            for at in range(0, len(body), 100_000):
                piece = body[at:at + 100_000]
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            sock.sendall(b"0\r\n\r\n")
        else:
            sock.sendall(f"PUT /{name} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
                         "\r\n".encode())
            sock.sendall(body)
        return read_response(sock)


def test_large_bodies_arrive_intact_several_at_once(upload):
    port, store = upload
    bodies = {f"file{i}": os.urandom(20_000_000 + i) for i in range(3)}
    results = {}

    def send(name):
        results[name] = put(port, name, bodies[name], chunked=name == "file1")

    threads = [threading.Thread(target=send, args=(name,)) for name in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for name, body in bodies.items():
        head, text = results[name]
        assert head.startswith(b"HTTP/1.1 201 "), head
        assert text == f"stored {name}: {len(body)} bytes\n".encode()
        stored = (store / name).read_bytes()
        assert hashlib.sha256(stored).digest() == hashlib.sha256(body).digest()


def test_100_continue_only_when_the_body_is_wanted(upload):
    port, store = upload
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"PUT /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5"
                     b"\r\n\r\n")
        assert sock.recv(4096) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"hello")
        head, text = read_response(sock)
        assert head.startswith(b"HTTP/1.1 201 ")
    assert (store / "x").read_bytes() == b"hello"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"PUT /../x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                     b"Content-Length: 5\r\n\r\n")
        head, _ = read_response(sock)  # refused at the head: no 100, and the body is not wanted
        assert head.startswith(b"HTTP/1.1 400 "), head
        assert b"Connection: close" in head


def test_a_disk_that_says_no_gets_507_and_keeps_nothing(upload):
    port, store = upload
    (store / "full").symlink_to("/dev/full")
    head, text = put(port, "full", os.urandom(1_000_000))
    assert head.startswith(b"HTTP/1.1 507 "), head
    assert text == b"the disk said no\n"
    assert not (store / "full").exists()


def test_a_client_that_leaves_mid_body_leaves_no_file(upload):
    port, store = upload
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"PUT /partial HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n")
        sock.sendall(os.urandom(3_000_000))
    head, _ = put(port, "after", b"still here")  # the server goes on
    assert head.startswith(b"HTTP/1.1 201 ")
    deadline = time.monotonic() + 5  # the server reads what was sent before it sees the end
    while (store / "partial").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not (store / "partial").exists()
