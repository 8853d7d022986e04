"""sxe-httpd's reload (SIGHUP, worker processes): the program checks its files (-t), runs again in
the same process with the same listening sockets, and the old workers drain. Under load, across
reloads that change the workers' count and one whose file has a mistake, no request fails and the
old workers go. SIGQUIT drains, then stops."""
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from test_sxe_httpd import root  # noqa: F401 (fixture)


def children(pid):
    """The processes whose parent is pid."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone meanwhile
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return sorted(found)


class Server:
    """sxe-httpd -c FILE, its log in a file; its port read from its start line."""

    def __init__(self, build_dir, config, log):
        self.log = log
        self.process = subprocess.Popen(
            [str((build_dir / "tools" / "sxe-httpd").resolve()), "-c", str(config)],
            stdout=subprocess.DEVNULL, stderr=log.open("w"))
        self.port = int(self.wait_for(r"serving .* on 127\.0\.0\.1:(\d+)", 1).group(1))

    def text(self):
        return self.log.read_text()

    def wait_for(self, pattern, count, seconds=10):
        """Waits until pattern is in the log count times; returns the last match."""
        deadline = time.monotonic() + seconds
        while True:
            found = list(re.finditer(pattern, self.text()))
            if len(found) >= count:
                return found[count - 1]
            assert self.process.poll() is None, self.text()
            assert time.monotonic() < deadline, f"no {count} x {pattern!r} in:\n{self.text()}"
            time.sleep(0.02)

    def get(self, path):
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as client:
            client.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := client.recv(65536):
                data += chunk
        return data

    def stop(self, how=signal.SIGTERM):
        if self.process.poll() is None:
            self.process.send_signal(how)
        return self.process.wait(timeout=15)


@pytest.fixture
def server(build_dir, tmp_path):
    started = []

    def start(config):
        started.append(Server(build_dir, config, tmp_path / "log"))
        return started[-1]

    yield start
    for one in started:
        one.stop()


def write_config(path, root, workers, extra=""):
    path.write_text(f"root: {root}\nlisten: 127.0.0.1:0\nworkers: {workers}\n{extra}")


def test_reloads_under_load_fail_no_request(server, sxe_http, build_dir, root, tmp_path):  # noqa: F811
    config = tmp_path / "sxe-httpd.yaml"
    write_config(config, root, 2)
    httpd = server(config)
    pid = httpd.process.pid
    load = subprocess.Popen([str(build_dir / "tools" / "sxe-http"), "-i", "127.0.0.1", "-p",
                             str(httpd.port), "-u", "/hello.txt", "-c", "10", "-R", "4000", "-d",
                             "10", "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    # the workers' count changes, and the 7th file has a mistake
    plan = [2, 2, 3, 3, 1, 2, "bad", 2, 4, 2, 1, 1, 3, 2, 2, 2, 1, 2, 2, 2]
    good = 0
    time.sleep(0.5)
    for step, workers in enumerate(plan):
        if workers == "bad":
            config.write_text(config.read_text() + "no-such-key: 1\n")
        else:
            write_config(config, root, workers)
            good += 1
        httpd.process.send_signal(signal.SIGHUP)
        if workers == "bad":
            httpd.wait_for("the new configuration does not start", 1)
        else:
            httpd.wait_for(r"serving .* with \d+ worker", good + 1)
        time.sleep(0.35)
    out, _ = load.communicate(timeout=30)
    report = json.loads(out)
    # nothing failed; "cap" counts requests that came due late, behind 16 unanswered (a slow
    # machine, a sanitizer build), which were sent and answered all the same
    failed = {kind: n for kind, n in report["errors"].items() if kind not in ("cap", "total")}
    assert not any(failed.values()), (failed, report["queries"], report["sent"])
    assert report["queries"] == report["sent"] > 30000, report
    assert report["reopened"] > 0, report  # the old workers' answers said Connection: close
    text = httpd.text()
    assert text.count("SIGHUP: reloading") == good, text
    assert "no-such-key" in text and "serving on as before" in text
    assert httpd.process.pid == pid and httpd.process.poll() is None
    # the old workers drain and go: only the last image's 2 remain
    deadline = time.monotonic() + 8
    while len(children(pid)) != 2:
        assert time.monotonic() < deadline, (children(pid), text)
        time.sleep(0.05)
    assert httpd.get("/hello.txt").endswith(b"\r\n\r\nHello World\n")
    assert httpd.stop() == 0


def test_a_reload_follows_a_new_root_and_keeps_the_port(server, root, tmp_path):  # noqa: F811
    config = tmp_path / "sxe-httpd.yaml"
    write_config(config, root, 1)
    httpd = server(config)
    other = tmp_path / "other"
    other.mkdir()
    (other / "hello.txt").write_text("from the other root\n")
    assert b"from the other root" not in httpd.get("/hello.txt")
    write_config(config, other, 1)
    httpd.process.send_signal(signal.SIGHUP)
    httpd.wait_for(r"serving .* on 127\.0\.0\.1:%d " % httpd.port, 2)
    assert b"from the other root" in httpd.get("/hello.txt")
    # a new port in the file: the old listener closes, the new one serves
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config.write_text(f"root: {other}\nlisten: 127.0.0.1:{port}\nworkers: 1\n")
    old = httpd.port
    old_workers = children(httpd.process.pid)
    httpd.process.send_signal(signal.SIGHUP)
    httpd.port = int(httpd.wait_for(r"serving .* on 127\.0\.0\.1:(\d+)", 3).group(1))
    assert httpd.port == port
    assert b"from the other root" in httpd.get("/hello.txt")
    # the old port stays open in the draining worker (it does not know its socket was dropped)
    # until that worker, with nothing left to serve, goes
    deadline = time.monotonic() + 5
    while set(old_workers) & set(children(httpd.process.pid)):
        assert time.monotonic() < deadline, httpd.text()
        time.sleep(0.02)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", old), timeout=2).close()


def test_a_response_under_way_finishes_across_a_reload(server, root, tmp_path):  # noqa: F811
    """A client that takes its file slowly keeps its old worker until it has it all."""
    (root / "big.bin").write_bytes(os.urandom(8 << 20))  # more than the sockets' buffers hold
    config = tmp_path / "sxe-httpd.yaml"
    write_config(config, root, 1)
    httpd = server(config)
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before the connect, or
    client.settimeout(10)  # the kernel stalls the transfer
    client.connect(("127.0.0.1", httpd.port))
    client.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    first = client.recv(4096)
    assert first.startswith(b"HTTP/1.1 200"), first
    old_workers = children(httpd.process.pid)
    httpd.process.send_signal(signal.SIGHUP)
    httpd.wait_for(r"serving .* with 1 worker", 2)
    time.sleep(0.3)
    data = first
    while chunk := client.recv(1 << 16):
        data += chunk
    client.close()
    # whole, and then the connection, idle, closed by the drain (the loop above read to its end)
    assert data.partition(b"\r\n\r\n")[2] == (root / "big.bin").read_bytes()
    deadline = time.monotonic() + 5
    while set(old_workers) & set(children(httpd.process.pid)):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_sigquit_drains_then_stops(server, root, tmp_path):  # noqa: F811
    config = tmp_path / "sxe-httpd.yaml"
    write_config(config, root, 2)
    httpd = server(config)
    idle = socket.create_connection(("127.0.0.1", httpd.port), timeout=5)
    began = time.monotonic()
    assert httpd.stop(signal.SIGQUIT) == 0
    # the idle connection is closed after the drain's second, not held to its 5 s deadline
    assert time.monotonic() - began < 4
    assert idle.recv(10) == b""
    assert "SIGQUIT: draining 2 workers" in httpd.text()


def test_a_reload_that_changes_the_spread_keeps_the_sockets_one(server, root, tmp_path):  # noqa: F811
    """The old workers hold their sockets while they drain: sockets of another kind could not bind
    beside them, so the set keeps the spread its sockets were made for, and serves on."""
    config = tmp_path / "sxe-httpd.yaml"
    write_config(config, root, 2, "spread: reuseport\n")
    httpd = server(config)
    for spread, count in (("hand-off", 2), ("cpu", 3)):
        write_config(config, root, 2, f"spread: {spread}\n")
        httpd.process.send_signal(signal.SIGHUP)
        httpd.wait_for(r"serving .* with \d+ worker", count)
        assert httpd.get("/hello.txt").endswith(b"\r\n\r\nHello World\n")
    assert "the spread stays reuseport until the program starts afresh" in httpd.text()


def test_a_stop_during_a_drain_waits_for_the_old_workers(server, root, tmp_path):  # noqa: F811
    """SIGTERM while the workers from before a reload drain: the supervisor ends them too, so no
    process is left holding the port."""
    (root / "big.bin").write_bytes(os.urandom(16 << 20))
    config = tmp_path / "sxe-httpd.yaml"
    write_config(config, root, 1)
    httpd = server(config)
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.connect(("127.0.0.1", httpd.port))
    client.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    assert client.recv(4096).startswith(b"HTTP/1.1 200")  # then not read: the answer waits
    old = children(httpd.process.pid)
    httpd.process.send_signal(signal.SIGHUP)
    httpd.wait_for(r"serving .* with 1 worker", 2)
    assert httpd.stop() == 0
    for pid in old:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    client.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", httpd.port), timeout=2).close()


def test_a_reload_to_a_port_someone_holds_is_refused(server, root, tmp_path):  # noqa: F811
    """The check binds a new address the server does not hold: one another program listens on
    would stop the new image, so the reload is refused and the server serves on."""
    config = tmp_path / "sxe-httpd.yaml"
    write_config(config, root, 1)
    httpd = server(config)
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        config.write_text(f"root: {root}\nlisten: 127.0.0.1:{other.getsockname()[1]}\n"
                          "workers: 1\n")
        httpd.process.send_signal(signal.SIGHUP)
        httpd.wait_for("the new configuration does not start", 1)
    assert "Address already in use" in httpd.text()
    assert "SIGHUP: reloading" not in httpd.text()
    assert httpd.get("/hello.txt").endswith(b"\r\n\r\nHello World\n")
