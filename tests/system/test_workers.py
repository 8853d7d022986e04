"""Workers, through the real programs: sxe-httpd --workers in each spread mode, processes and
threads, its counters on the control socket, a worker killed under load and restarted, a few thousand connections
over two workers (the small CI version of bench/many), and http-hello with workers."""
import json
import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import wait_for_port, wait_until
from test_sxe_httpd import Httpd, free_port, get, root  # noqa: F401 (root is a fixture)


def load(build_dir, port, connections, queries, path="/hello.txt"):
    result = subprocess.run([str(build_dir / "tools" / "sxe-http"), "-i", "127.0.0.1", "-p",
                             str(port), "-c", str(connections), "-n", str(queries), "-u", path,
                             "--json"], capture_output=True, text=True, timeout=120)
    data = json.loads(result.stdout)
    assert data["errors"]["total"] == 0, result.stdout
    assert data["queries"] == connections * queries
    return data


def children(pid, count=None):
    """pid's child processes; with count, waits (5 s at most) until there are that many: the
    listening sockets answer before the supervisor has forked every worker."""
    deadline = time.monotonic() + 5
    while True:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            found = [int(child) for child in f.read().split()]
        if count is None or len(found) == count or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def control(root):
    """The control socket's option, for a server whose counters report() reads."""
    return ["--control", str(root.parent / "control")]


def report(server, build_dir, root):
    """Reads the workers' counters from the control socket (sxe-httpctl status --json), stops the
    server, and returns the counters by worker and the server's log."""
    status = subprocess.run([str(build_dir / "tools" / "sxe-httpctl"), "-s",
                             str(root.parent / "control"), "status", "--json"],
                            capture_output=True, text=True, timeout=20)
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["pid"] == server.process.pid  # the server started here answers
    assert server.stop() == 0
    log = server.process.stderr.read().decode()
    return {w["index"]: w for w in data["per_worker"]}, log


@pytest.mark.serial  # the hand-off's balance between workers is checked within 20%
@pytest.mark.parametrize("spread", ["reuseport", "cpu", "hand-off"])
@pytest.mark.parametrize("kind", ["processes", "threads"])
def test_sxe_httpd_workers_serve_count_and_report(build_dir, root, spread, kind):  # noqa: F811
    extra = ["--threads"] if kind == "threads" else []
    server = Httpd(build_dir, root, "--workers", "2", "--spread", spread, *extra, *control(root))
    try:
        if kind == "processes":
            assert len(children(server.process.pid, 2)) == 2
        load(build_dir, server.port, 200, 5)
        status, _, body = get(server.port, "/hello.txt")
        assert status == 200 and body == b"Hello World\n"
        workers, log = report(server, build_dir, root)
    finally:
        if server.process.poll() is None:
            server.process.kill()
    assert sorted(workers) == [0, 1], log
    assert sum(w["requests"] for w in workers.values()) == 1001
    # the load's 200, the GET, and the readiness probe unless it left before its accept
    assert sum(w["connections"] for w in workers.values()) in (201, 202)
    # The least loaded: within 20% of even. A worker that closes its connections sooner (the
    # other shares its core with the load) is less loaded more often: 114 to 88 was seen in CI.
    if spread == "hand-off":
        assert all(80 <= w["connections"] <= 122 for w in workers.values()), workers
    elif spread == "reuseport":  # the kernel's hash: both used
        assert all(w["connections"] > 0 for w in workers.values()), workers


def test_killed_worker_is_restarted_and_the_others_serve_on(build_dir, root):  # noqa: F811
    server = Httpd(build_dir, root, "--workers", "2", *control(root))
    try:
        held = socket.create_connection(("127.0.0.1", server.port))
        held.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"Hello World" in held.recv(4096)
        before = children(server.process.pid, 2)
        victim = before[0]
        os.kill(victim, signal.SIGKILL)
        load(build_dir, server.port, 100, 3)  # nothing lost: its socket waits in the group
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            now = children(server.process.pid)
            if len(now) == 2 and victim not in now:
                break
            time.sleep(0.05)
        assert len(now) == 2 and victim not in now
        held.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = held.recv(4096)  # the held connection lives on, unless it was the victim's
        assert reply == b"" or b"Hello World" in reply
        held.close()
        workers, log = report(server, build_dir, root)
    finally:
        if server.process.poll() is None:
            server.process.kill()
    assert "died (signal 9); restarting it" in log
    assert sum(w["restarts"] for w in workers.values()) == 1


@pytest.mark.serial
def test_thousands_of_connections_over_two_workers(build_dir, root):  # noqa: F811
    """The CI version of bench/many: more connections than one worker's table holds."""
    server = Httpd(build_dir, root, "--workers", "2", "--connections", "2000", "--spread",
                   "hand-off", *control(root))
    try:
        data = load(build_dir, server.port, 3000, 2)
        assert data["connected"] == 3000
        workers, _ = report(server, build_dir, root)
    finally:
        if server.process.poll() is None:
            server.process.kill()
    assert all(w["table_full"] == 0 for w in workers.values()), workers
    # Neither table of 2,000 filled, so each worker took at least the 1,000 the other could not.
    # The split is even on an idle machine (1,501 to 1,500), but a worker the scheduler holds back
    # for a moment is the more loaded, and least-loaded hands the next ones to the other by design:
    # CI saw 1,725 to 1,276. How evenly an idle set is spread is the hand-off cases' business.
    assert all(1000 <= w["connections"] <= 2000 for w in workers.values()), workers


def test_worker_options_are_checked(build_dir, root):  # noqa: F811
    binary = str(build_dir / "tools" / "sxe-httpd")
    for args, message in [(["--workers", "0"], "--workers must be a number from 1 to 256"),
                          (["--workers", "x"], "--workers must be a number"),
                          (["--spread", "random"], "--spread must be reuseport, cpu or hand-off")]:
        result = subprocess.run([binary, "--root", str(root), *args], capture_output=True,
                                text=True, timeout=10)
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_http_hello_with_workers(build_dir):
    port = free_port()
    process = subprocess.Popen([str(build_dir / "examples" / "http-hello"), f"127.0.0.1:{port}",
                                "2"], stderr=subprocess.PIPE)
    try:
        wait_for_port(port, process, "http-hello")
        assert len(children(process.pid, 2)) == 2
        status, _, body = get(port, "/")
        assert status == 200 and body == b"Hello World\n"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("cache", ["per-worker", "shared"])
def test_file_cache_under_worker_threads(build_dir, root, cache):  # noqa: F811
    """Worker threads serving 1,200 files (more than the cache's 1,024 slots, so entries are evicted
    while other threads send them), small ones from memory and a large one by sendfile, while some
    files change: every body is whole and is one of the file's versions, never a mix."""
    versions = {}
    for i in range(1200):
        versions[f"/f{i}.txt"] = [f"file {i} ".encode() * (1 + i % 50)]
        (root / f"f{i}.txt").write_bytes(versions[f"/f{i}.txt"][0])
    versions["/big.bin"] = [os.urandom(300000)]
    (root / "big.bin").write_bytes(versions["/big.bin"][0])
    extra = ["--cache", cache] if cache == "per-worker" else []  # shared: the default
    server = Httpd(build_dir, root, "--workers", "2", "--threads", *extra, *control(root))
    failures = []

    def client(seed):
        import http.client
        import random
        chooser = random.Random(seed)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        for _ in range(300):
            path = "/big.bin" if chooser.random() < 0.02 else f"/f{chooser.randrange(1200)}.txt"
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read()
            if response.status != 200 or body not in versions[path]:
                failures.append((path, response.status, len(body)))

    try:
        import threading
        threads = [threading.Thread(target=client, args=(seed,)) for seed in range(6)]
        for thread in threads:
            thread.start()
        for round_number in range(5):  # files change under the clients' feet
            for i in range(0, 1200, 97):
                body = f"changed {round_number} {i} ".encode() * (1 + i % 7)
                versions[f"/f{i}.txt"].append(body)
                (root / f"f{i}.txt.new").write_bytes(body)
                os.rename(root / f"f{i}.txt.new", root / f"f{i}.txt")
            time.sleep(0.3)  # the sleep is the test: the changes are spread over the clients' run
        for thread in threads:
            thread.join()
        workers, log = report(server, build_dir, root)
    finally:
        if server.process.poll() is None:
            server.process.kill()
    assert failures == []
    assert sum(w["requests"] for w in workers.values()) >= 1800
    assert ("sharing one file cache" in log) == (cache == "shared")


def test_shared_cache_needs_threads(build_dir, root):  # noqa: F811
    result = subprocess.run([str(build_dir / "tools" / "sxe-httpd"), "--root", str(root),
                             "--cache", "shared"], capture_output=True, text=True, timeout=10)
    assert result.returncode == 2 and "--cache shared needs --threads" in result.stderr
    result = subprocess.run([str(build_dir / "tools" / "sxe-httpd"), "--root", str(root),
                             "--cache", "global"], capture_output=True, text=True, timeout=10)
    assert result.returncode == 2 and "must be per-worker or shared" in result.stderr
