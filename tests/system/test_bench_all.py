"""bench/all and its harness: a quick run of one suite gives every row, with figures and no
failure, and writes the report; an interrupted run stops everything it started; the static floor
serves its files; a foreign server on a port is refused; the verdicts read the spread; and the
README's figures are the report's. No speed is asserted."""
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
sys.path.insert(0, os.path.join(ROOT, "bench"))

from harness import procs  # noqa: E402
from harness.figures import Sample, ratios, verdict  # noqa: E402
from harness.report import README_BEGIN, README_END  # noqa: E402

SERVERS = ["epoll floor", "sxe hello"]
FIGURE = re.compile(r"^[\d,]+(\.\d+)?( \([\d,]+(\.\d+)?–[\d,]+(\.\d+)?\))?$")


def marked():
    """The environment for one bench/all run, with a mark its every process inherits: the same
    programs may run in other tests meanwhile (the other backend's suite, say)."""
    mark = os.urandom(8).hex()
    return mark, {**os.environ, "SXE_TEST_MARK": mark}


def running(pattern, mark):
    """Processes whose command line matches the regex pattern and whose environment holds mark."""
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
    """The rows of the Markdown tables in text with this many columns, headers excluded."""
    found, header = [], True
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|"):
            header = True
            continue
        if line.startswith("|---"):
            header = False
        elif len(cells) == columns and not header:
            found.append(cells)
    return found


@pytest.mark.one_backend  # the harness's own logic: the backends are the other tests'
@pytest.mark.serial  # a measurement: beside other tests, a cell can come out empty
def test_quick_run_of_one_suite(build_dir, tmp_path):
    docs = tmp_path / "benchmarks.md"
    mark, env = marked()
    result = subprocess.run(
        [os.path.join(ROOT, "bench", "all"), "--quick", "--build-dir", str(build_dir), "--only",
         "single", "--servers", ",".join(SERVERS), "--docs", str(docs)],
        capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "[" in result.stderr and "cell 1/" in result.stderr  # progress, a line per cell
    text = docs.read_text()
    assert text.startswith("# Benchmarks\n")
    assert "bench/all --quick --build-dir" in text and "Versions: sxe " in text
    table = [row for row in rows(text, 8) if row[0].startswith("keep-alive") or
             row[0].startswith("pipelined")]
    names = {row[1] for row in table}
    assert {"epoll floor", "sxe hello"} <= names, names
    for row in table:
        for cell in row[2:7]:
            assert FIGURE.match(cell), row  # a figure, not FAILED
    idle = [row for row in rows(text, 4) if row[0].startswith("sxe hello")]
    assert idle and all(FIGURE.match(cell) for cell in idle[0][1:]), idle
    targets = rows(text[text.index("## Targets"):text.index("## One core")], 4)
    assert any("examples/hello" in row[1] for row in targets), targets
    assert all(row[3] in ("met", "within noise", "missed") for row in targets), targets
    pattern = f"{build_dir}/(bench/epoll-floor|examples/hello|tools/sxe-http) "
    assert not running(pattern, mark), f"still running: {running(pattern, mark)}"


def test_an_interrupted_run_stops_what_it_started(build_dir):
    mark, env = marked()
    bench = subprocess.Popen(
        [os.path.join(ROOT, "bench", "all"), "--build-dir", str(build_dir), "--rounds", "3",
         "--seconds", "5", "--only", "single", "--servers", "epoll floor"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    load = f"{build_dir}/tools/sxe-http "
    wait_until(lambda: running(re.escape(load), mark) or bench.poll() is not None, 60,
               "the load to start")
    assert bench.poll() is None, bench.communicate()[1]
    assert running(re.escape(f"{build_dir}/bench/epoll-floor "), mark)
    bench.send_signal(signal.SIGTERM)
    _, err = bench.communicate(timeout=30)
    assert bench.returncode == 130, err
    assert "interrupted; every server and load generator stopped" in err
    for program in ("bench/epoll-floor", "tools/sxe-http"):
        pattern = re.escape(f"{build_dir}/{program} ")
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
    """The static-file floor answers with the files' bytes, small ones from memory and large ones
    by sendfile, on one keep-alive connection; 404 for anything else; and closes after a
    Connection: close request."""
    files = {"small.txt": b"Hello World\n", "empty": b"", "large.bin": os.urandom(3 << 20)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    port = procs.free_port()
    floor = subprocess.Popen([str(build_dir / "bench" / "epoll-floor"), str(port), str(tmp_path)])
    try:
        procs.wait_for_port(port, floor.pid)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
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
    """The harness checks that the process it started is the one listening: a port held by
    another program (here, this test) is an error naming the holder, never a measurement."""
    with socket.socket() as foreign:
        foreign.bind(("127.0.0.1", 0))
        foreign.listen()
        port = foreign.getsockname()[1]
        assert os.getpid() in procs.listeners(port)
        innocent = subprocess.Popen(["sleep", "30"])
        try:
            with pytest.raises(RuntimeError) as error:
                procs.wait_for_port(port, innocent.pid, timeout=2)
            assert f"port {port} is held by" in str(error.value)
            assert f"(pid {os.getpid()})" in str(error.value)
        finally:
            innocent.kill()
            innocent.wait()


def test_verdicts_read_the_spread():
    """Met only when every round is on the target's side; a spread across it is within noise."""
    assert verdict(Sample([0.60, 0.65, 0.69]), 0.7) == "met"
    assert verdict(Sample([0.60, 0.65, 0.72]), 0.7) == "within noise"
    assert verdict(Sample([0.71, 0.75, 0.80]), 0.7) == "missed"
    assert verdict(Sample([3.2, 3.5, 4.0]), 3, better="higher") == "met"
    assert verdict(Sample([2.9, 3.5, 4.0]), 3, better="higher") == "within noise"
    assert verdict(Sample([0.5, None, 0.6]), 0.7) == "failed"
    assert Sample([2.0, 1.0, 3.0]).show(1) == "2.0 (1.0–3.0)"
    assert ratios(Sample([2.0, 4.0]), Sample([4.0, 4.0])).values == [0.5, 1.0]


def test_the_readmes_figures_are_the_reports():
    """Every figure the README quotes sits in its bench/all block, each row as docs/benchmarks.md
    has it (target, figure and verdict); elsewhere the README quotes no ratio and no time."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    report = open(os.path.join(ROOT, "docs", "benchmarks.md")).read()
    block = readme[readme.index(README_BEGIN):readme.index(README_END)]
    quoted = rows(block, 3)
    assert quoted, "the README's figures block is empty: run bench/all"
    targets = rows(report[report.index("## Targets"):], 4)
    for row in quoted:
        assert [row[0], row[1], row[2]] in [t[1:] for t in targets], row
    outside = readme.replace(block, "")
    assert not re.findall(r"\b\d+\.\d+x\b", outside), re.findall(r"\b\d+\.\d+x\b", outside)
    assert not re.findall(r"\b\d[\d.,]* ?(?:µs|ns)\b", outside)
