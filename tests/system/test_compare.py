"""bench/compare in quick mode on two servers: every scenario they take part in gives a full row,
no cell is empty or an error, and the Markdown and the chart are written. No speed is asserted."""
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import wait_until


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SERVERS = ["epoll floor", "sxe hello"]
# The scenarios that canned-reply servers take part in, by title.
SCENARIOS = ["keep-alive, 100 conns", "keep-alive, 10,000 conns",
             "pipelined x16, 100 conns, sxe-http load", "keep-alive, 100 conns, sxe-http load"]
NUMBER = re.compile(r"^\d+(\.\d+)?x?$")


def marked():
    """The environment for one bench/compare run, with a mark its every process inherits: the
    same programs may run in other tests meanwhile (the other backend's suite, say)."""
    mark = os.urandom(8).hex()
    return mark, {**os.environ, "SXE_TEST_MARK": mark}


def running(pattern, mark):
    """Processes whose command line (arguments joined by spaces) matches the regex pattern and
    whose environment holds mark."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/environ", "rb") as environ:
                env = environ.read().split(b"\0")
        except (OSError, ValueError):
            continue
        if (entry.isdigit() and int(entry) != os.getpid() and re.search(pattern, command) and
                f"SXE_TEST_MARK={mark}".encode() in env):
            found.append(f"{entry}: {command}")
    return found


def rows(text, columns):
    """The rows of the Markdown tables in text that have this many columns, header excluded."""
    found = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == columns and not line.startswith("|---"):
            found.append(cells)
    return found[1:]


@pytest.mark.one_backend  # the script's table, on epoll: the backends are the other tests'
@pytest.mark.serial  # a measurement: beside other tests, a cell can come out empty
def test_quick_compare_on_two_servers(build_dir, tmp_path):
    docs = tmp_path / "benchmarks.md"
    mark, env = marked()
    result = subprocess.run(
        [os.path.join(ROOT, "bench", "compare"), "--quick", "--build-dir", str(build_dir),
         "--servers", ",".join(SERVERS), "--docs", str(docs)],
        capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]

    main = [row for row in rows(result.stdout, 12) if row[0] in SCENARIOS]
    assert [(row[0], row[1]) for row in main] == [(s, n) for s in SCENARIOS for n in SERVERS]
    for row in main:
        assert all(cell for cell in row), row
        for cell in row[2:9] + row[10:]:
            assert NUMBER.match(cell), row
        assert row[6] == "0", f"errors in {row}"
        assert float(row[2]) > 0 and float(row[3]) > 0 and float(row[5]) > 0, row
        assert row[9] == "sxe hello"

    idle = rows(result.stdout, 7)
    idle = [row for row in idle if row[0] in SERVERS]
    assert [row[0] for row in idle] == SERVERS
    for row in idle:
        assert all(NUMBER.match(cell) for cell in row[1:5] + row[6:]), row
        assert row[4] == "0", f"errors in {row}"
        assert float(row[2]) > 0

    # The ratio summary: one row per scenario, a figure for the peer.
    summary = [row for row in rows(result.stdout, 2) if row[0] in SCENARIOS or "idle" in row[0]]
    assert len(summary) == len(SCENARIOS) + 1
    assert all(NUMBER.match(row[1]) for row in summary), summary

    text = docs.read_text()
    assert "<!-- bench/compare: begin -->" in text and "<!-- bench/compare: end -->" in text
    assert "bench/compare --quick --build-dir" in text
    assert "Versions: sxe: git" in text
    with open(tmp_path / "benchmarks.png", "rb") as chart:
        assert chart.read(8) == b"\x89PNG\r\n\x1a\n"

    # Nothing it started is left running.
    pattern = f"{build_dir}/(bench/epoll-floor|examples/hello|tools/sxe-http) |^wrk -t1 "
    assert not running(pattern, mark), f"still running: {running(pattern, mark)}"


def test_interrupted_compare_stops_what_it_started(build_dir):
    mark, env = marked()
    compare = subprocess.Popen(
        [os.path.join(ROOT, "bench", "compare"), "--build-dir", str(build_dir), "--rounds", "3",
         "--seconds", "5", "--servers", "epoll floor", "--scenarios", "keepalive-100",
         "--docs", ""], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    floor = f"{build_dir}/bench/epoll-floor "
    deadline = time.monotonic() + 60
    while not running(re.escape(floor), mark):
        assert time.monotonic() < deadline and compare.poll() is None, "the server never started"
        time.sleep(0.05)
    # Interrupted mid-measurement: once wrk runs.
    wait_until(lambda: running("^wrk -t1 ", mark) or compare.poll() is not None, 30,
               "wrk to start")
    assert compare.poll() is None, compare.communicate()[1]
    compare.send_signal(signal.SIGTERM)
    _, err = compare.communicate(timeout=30)
    assert compare.returncode == 130, err
    assert "interrupted; every server and load generator stopped" in err
    for pattern in (re.escape(floor), "^wrk -t1 "):
        assert not running(pattern, mark), running(pattern, mark)


def request(sock, path, close=False):
    extra = "Connection: close\r\n" if close else ""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())


def response(sock):
    """One response: (head, body), the body as long as its Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed inside a head: {data!r}"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
    while len(body) < length:
        chunk = sock.recv(1 << 20)
        assert chunk, f"closed after {len(body)} of {length} bytes"
        body += chunk
    assert len(body) == length, "more bytes than the response holds"
    return head, body


def test_static_floor_serves_its_files(build_dir, tmp_path):
    """The static-file floor of bench/compare answers with the files' bytes, small ones from
    memory and large ones by sendfile, on one keep-alive connection; 404 for anything else; and
    closes after a Connection: close request."""
    files = {"small.txt": b"Hello World\n", "empty": b"", "large.bin": os.urandom(3 << 20)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    floor = subprocess.Popen([str(build_dir / "bench" / "epoll-floor"), str(port), str(tmp_path)])
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "the floor never listened"
                time.sleep(0.02)
        with sock:
            for name in ("small.txt", "large.bin", "empty", "small.txt"):
                request(sock, f"/{name}")
                head, body = response(sock)
                assert head.startswith(b"HTTP/1.1 200 OK\r\n") and body == files[name], name
            request(sock, "/missing")
            assert response(sock)[0].startswith(b"HTTP/1.1 404 ")
            request(sock, "/large.bin", close=True)
            head, body = response(sock)
            assert b"Connection: close" in head and body == files["large.bin"]
            assert sock.recv(1) == b"", "still open after Connection: close"
    finally:
        floor.kill()
        floor.wait()


def test_a_foreign_server_on_the_port_fails_loudly():
    """The benchmarks check that the process they started is the one listening: a port held by
    another program (here, this test) is an error naming the holder, never a measurement."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import benchlib

    with socket.socket() as foreign:
        foreign.bind(("127.0.0.1", 0))
        foreign.listen()
        port = foreign.getsockname()[1]
        assert os.getpid() in benchlib.listeners(port)
        innocent = subprocess.Popen(["sleep", "30"])
        try:
            with pytest.raises(RuntimeError) as error:
                benchlib.wait_for_port(port, innocent.pid, timeout=2)
            assert f"port {port} is held by" in str(error.value)
            assert f"(pid {os.getpid()})" in str(error.value)
        finally:
            innocent.kill()
            innocent.wait()

    # The same check passes for a server that does listen there, started by us.
    port = benchlib.free_port()
    assert benchlib.listeners(port) == set()
    server = subprocess.Popen([sys.executable, "-c",
                               "import socket, time; s = socket.socket(); "
                               f"s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(30)"])
    try:
        benchlib.wait_for_port(port, server.pid, timeout=5)
    finally:
        server.kill()
        server.wait()


@pytest.mark.one_backend  # the script's table, on epoll: the backends are the other tests'
@pytest.mark.serial  # a measurement: beside other tests, a cell can come out empty
def test_quick_compare_of_the_dictionary(build_dir):
    """The dictionary kind: its data is built from dict-gcide, the request mix is made, and
    sxe-dict answers every word of it (nginx, its peer, is left out: CI need not install it)."""
    result = subprocess.run(
        [os.path.join(ROOT, "bench", "compare"), "--quick", "--build-dir", str(build_dir),
         "--servers", "sxe-dict", "--scenarios", "dictionary-100", "--docs", ""],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    row = [r for r in rows(result.stdout, 12) if r[0].startswith("dictionary lookups")]
    assert [(r[0], r[1]) for r in row] == [
        ("dictionary lookups, 100 conns, sxe-http word mix", "sxe-dict")]
    assert row[0][6] == "0", f"errors in {row}"
    assert float(row[0][2]) > 0 and float(row[0][3]) > 0, row
