"""sxe-http's open loop (-R), weighted paths (-U), timeline, latency log, percentiles, bad statuses
by code, the error line and slow connects, against examples/hello, sxe-httpd, ws-echo and
loopback servers written here: one that stalls like a GC pause, one that answers each path after
the delay it names, one that never answers and one that is late to accept."""
import asyncio
import concurrent.futures
import re
import socket
import threading
import time

import pytest

from test_sxe_http import OK, REQUEST_END, FakeServer, report
from test_sxe_httpd import Httpd

# Every test here times servers or keeps a rate: they run alone (conftest.py, 'serial').
pytestmark = pytest.mark.serial


class _Connection(asyncio.Protocol):
    def __init__(self, server):
        self.server = server
        self.buffered = b""
        self.ready_at = 0.0  # when the last answer queued leaves: answers keep their order

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buffered += data
        loop = self.server.loop
        while REQUEST_END in self.buffered:
            head, self.buffered = self.buffered.split(REQUEST_END, 1)
            delay = self.server.delay_of(head.split(b" ")[1].decode())
            if delay == 0 and self.ready_at <= loop.time():
                self.transport.write(OK)
            else:
                self.ready_at = max(self.ready_at + 1e-6, loop.time() + delay)
                loop.call_at(self.ready_at, self.answer)

    def answer(self):
        if not self.transport.is_closing():
            self.transport.write(OK)


class LoopServer:
    """A single-threaded server, as most are: one asyncio event loop (in a thread) serves every
    connection, answering each request after delay_of(path) seconds. With stall, the loop blocks
    for that long once a second, as a server does in a garbage collector's pause."""

    def __init__(self, delay_of=lambda path: 0, stall=0.0):
        self.delay_of = delay_of
        self.stall = stall
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self.run, args=(started,), daemon=True)
        self.thread.start()
        assert started.wait(5), "the server did not start"

    def run(self, started):
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            self.loop.create_server(lambda: _Connection(self), "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        if self.stall:
            self.loop.call_later(1 - self.stall, self.pause)
        started.set()
        self.loop.run_forever()
        server.close()

    def pause(self):
        # The sleep is the test: a stalled server, nothing in its loop runs, not a read or a write.
        time.sleep(self.stall)
        self.loop.call_later(1 - self.stall, self.pause)

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def run_together(sxe_http, *runs):
    """Runs sxe-http once per argument list, all at the same time; returns the results in order."""
    with concurrent.futures.ThreadPoolExecutor(len(runs)) as pool:
        return list(pool.map(lambda args: sxe_http(*args), runs))


def near(value, expected, fraction):
    return abs(value - expected) <= expected * fraction


@pytest.mark.one_backend  # seconds of sxe-http's own schedule: once
def test_open_loop_sees_the_stalls_the_closed_loop_hides(sxe_http):
    """A server that stops for 100 ms once a second and otherwise answers at once. At 1000 a
    second, 100 requests a second come due during the stall and wait up to 100 ms: 10%, so the
    p99 is near 90 ms. In a closed loop only the requests in flight when the stall begins, one per
    connection, see it (the max shows it); the sender waits with them, sends nothing meanwhile,
    and its p99 is that of the thousands of quick answers around the stalls."""
    server = LoopServer(stall=0.1)
    target = ["-i", "127.0.0.1", "-p", server.port, "-c", 4, "-d", 3, "--json"]
    open_run = sxe_http(*target, "-R", 1000, "-P", 64)  # room for 100 outstanding: no cap
    closed_run = sxe_http(*target)
    # -P 1: a request due during the stall cannot be sent until its connection's one outstanding
    # is answered: its time from the send is short, its time from when it was due is not.
    capped_run = sxe_http("-i", "127.0.0.1", "-p", server.port, "-c", 4, "-d", 2, "--json",
                          "-R", 1000, "-P", 1)
    server.close()
    assert open_run.returncode == 0, open_run.stdout + open_run.stderr
    open_loop, closed_loop, capped = report(open_run), report(closed_run), report(capped_run)
    assert open_loop["queries"] == open_loop["sent"] == 3000
    open_p99 = open_loop["latency_ms"]["p99"]
    closed_p99 = closed_loop["latency_ms"]["p99"]
    assert closed_loop["latency_ms"]["max"] >= 50, closed_loop  # the stalls came in this run too
    assert open_p99 >= 50 and closed_p99 < open_p99 / 4, \
        f"-R p99 {open_p99} ms, closed loop p99 {closed_p99} ms"
    assert capped_run.returncode == 1
    assert capped["errors"]["cap"] > 0 and capped["queries"] == capped["sent"] == 2000
    assert capped["latency_ms"]["p99"] >= 50, capped
    assert capped["uncorrected_latency_ms"]["p99"] < 20, capped
    assert "uncorrected_latency_ms" not in closed_loop


@pytest.mark.one_backend  # seconds of sxe-http's own schedule: once
def test_rate_is_kept(sxe_http, hello):
    # 160 connections with the default 16 outstanding each: a stall of the server of up to 128 ms
    # (an ASan build beside the rest of the suite) is waited out, not counted as over the cap; 40
    # connections allowed 32 ms, and CI once saw 91 requests over it.
    data = report(sxe_http("-i", "127.0.0.1", "-p", hello, "-R", 20000, "-d", 4, "-c", 160,
                           "--json"))
    assert data["sent"] == data["queries"] == 80000  # due at 0, 50 us, ..., 3.99995 s
    assert near(data["queries_per_s"], 20000, 0.01), data
    assert data["errors"]["total"] == 0, data["errors"]
    assert data["rate"] == 20000 and data["pipeline"] == 16
    # Two workers each keep half the rate; their seconds add up in the timeline. A 20 us tick
    # (each wake-up sends what is due within 20 us, not 1 ms) keeps the rate as well. 40
    # connections with 64 outstanding each: a stall of the server (an ASan build beside the rest
    # of the suite) of up to 128 ms is waited out, not counted as requests over the cap.
    data = report(sxe_http("-i", "127.0.0.1", "-p", hello, "-R", 20000, "-d", 3, "-c", 40,
                           "-P", 64, "-w", 2, "-s", "127.0.0.1,127.0.0.2", "--timeline", "--tick",
                           20, "--json"))
    assert data["workers"] == 2
    assert data["sent"] == data["queries"] == 60000
    assert near(data["queries_per_s"], 20000, 0.02), data
    assert data["errors"]["total"] == 0, data["errors"]
    assert [near(second["queries_per_s"], 20000, 0.05) for second in data["timeline"][:3]] == \
        [True] * 3, data["timeline"]


def test_percentiles_and_latency_log_of_a_known_distribution(sxe_http, tmp_path):
    """Paths that name their delay, weighted so each percentile falls well inside one delay's
    share (1 ms: 70%, 5 ms: 25%, 20 ms: 4.5%, 80 ms: 0.5%), not at a share's edge where one
    late answer would move it to the next delay."""
    # HdrHistogram's reader, from build/python (conftest.py): imported here, so that without it
    # this test fails and the others still run.
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader

    server = LoopServer(delay_of=lambda path: int(path.split("/")[2]) / 1000)
    paths = tmp_path / "paths"
    paths.write_text("/d/1 140\n/d/5 50\n/d/20 9\n/d/80 1\n")
    log = tmp_path / "latency.hlog"
    result = sxe_http("-i", "127.0.0.1", "-p", server.port, "-U", paths, "-c", 20, "-n", 200,
                      "--json", "--latency-log", log)
    server.close()
    assert result.returncode == 0, result.stdout + result.stderr
    data = report(result)
    latency = data["latency_ms"]
    assert data["queries"] == 4000
    # At least the delay (a percentile is the top of its bucket, never below the value); at most
    # 1% (the bucket's width) and 3 ms (Python's timers and a busy two-core machine) above it.
    for percentile, delay in (("p50", 1), ("p90", 5), ("p99", 20), ("p99.9", 80)):
        assert delay <= latency[percentile] <= delay * 1.01 + 3, (percentile, latency)
    assert latency["max"] >= 80

    reader = HistogramLogReader(str(log), HdrHistogram(1, 3600000000000, 2))
    total = HdrHistogram(1, 3600000000000, 2)
    intervals = 0
    while (interval := reader.get_next_interval_histogram()) is not None:
        total.add(interval)
        intervals += 1
    assert intervals >= 1
    assert total.get_total_count() == data["queries"]
    for percentile in (50, 90, 99, 99.9):
        logged = total.get_value_at_percentile(percentile) / 1e6
        assert near(logged, latency[f"p{percentile:g}"], 0.01), (percentile, logged, latency)
    rows = [line.split(",") for line in log.read_text().splitlines() if line[:1].isdigit()]
    assert len(rows) == intervals
    assert max(float(row[2]) for row in rows) == latency["max"]  # Interval_Max, in ms


def paths_of(server):
    return [request.split(b" ")[1].decode() for request in server.requests]


def test_paths_in_turn_and_at_random(sxe_http, tmp_path):
    server = FakeServer(lambda request: OK)
    paths = tmp_path / "paths"
    paths.write_text("# weighted paths\n/a 3 # three times a round\n\n   # indented\n \t \n/b\t1\n")
    result = sxe_http("-i", "127.0.0.1", "-p", server.port, "-U", paths, "-n", 8, "-c", 1)
    assert result.returncode == 0, result.stdout + result.stderr
    assert paths_of(server) == ["/a", "/a", "/a", "/b"] * 2
    del server.requests[:]
    result = sxe_http("-i", "127.0.0.1", "-p", server.port, "-U", paths, "--random", "-n", 2000)
    assert result.returncode == 0, result.stdout + result.stderr
    drawn = paths_of(server)
    assert len(drawn) == 2000
    assert 0.7 < drawn.count("/a") / 2000 < 0.8  # 0.75, and the standard deviation about 0.01
    assert drawn != ["/a", "/a", "/a", "/b"] * 500
    server.close()


@pytest.mark.one_backend  # seconds of sxe-http's own schedule: once
def test_timeline(sxe_http, hello):
    """A second of the timeline is sent when it has passed, and the last when the run ends: the
    run's three seconds, and a fourth, a sliver, only if an answer came after the third."""
    # 4 connections with 128 outstanding each wait out a stall of 256 ms (a coverage build on
    # io_uring beside another system suite in CI) instead of counting 'cap' errors.
    target = ["-i", "127.0.0.1", "-p", hello, "-R", 2000, "-c", 4, "-P", 128, "--timeline"]
    result, text = run_together(sxe_http, [*target, "-d", 3, "--json"], [*target, "-d", 2])
    timeline = report(result)["timeline"]
    assert 3 <= len(timeline) <= 4, timeline
    assert [entry["second"] for entry in timeline] == list(range(len(timeline)))
    for entry in timeline[:3]:
        assert near(entry["queries_per_s"], 2000, 0.05), timeline
        assert entry["errors"] == 0 and entry["p99_ms"] > 0 and 0.99 <= entry["s"] <= 1.0
    assert all(0 < entry["s"] < 1 for entry in timeline[3:]), timeline  # the sliver says so
    assert text.returncode == 0
    seconds = re.findall(r"^second (\d+): +(\d+) per second, 0 errors, p99 [\d.]+ ms(?: \(the last [\d.]+ s\))?$",
                         text.stdout, re.MULTILINE)
    assert [number for number, _ in seconds[:2]] == ["0", "1"], text.stdout
    assert all(near(int(rate), 2000, 0.05) for _, rate in seconds[:2]), text.stdout
    assert re.search(r"^errors: .* bad length 0, cap 0, bad body 0$", text.stdout, re.MULTILINE)


def test_cap_on_outstanding_requests(sxe_http):
    """Nothing is ever answered: each connection sends its first request; the other 99 due on it
    find the cap (-P 1) reached. The first ones time out after 2 s. The timeline counts them."""
    server = FakeServer(lambda request: b"")
    result = sxe_http("-i", "127.0.0.1", "-p", server.port, "-R", 200, "-P", 1, "-c", 2, "-d", 1,
                      "-t", 2, "--timeline", "--json")
    assert result.returncode == 1
    data = report(result)
    assert data["errors"]["cap"] == 198
    assert data["errors"]["timeout"] == 2
    assert (data["sent"], data["queries"]) == (2, 0)
    # The timeline's seconds count the errors each saw: all of them, in all.
    assert sum(second["errors"] for second in data["timeline"]) == 200, data["timeline"]
    server.close()


def test_bad_statuses_by_code(sxe_http, tmp_path):
    statuses = {b"/x": b"404 Not Found", b"/y": b"500 Oops"}
    server = FakeServer(lambda request: b"HTTP/1.1 " + statuses[request.split(b" ")[1]] +
                        b"\r\nContent-Length: 0\r\n\r\n")
    paths = tmp_path / "paths"
    paths.write_text("/x\n/y 2\n")
    target = ["-i", "127.0.0.1", "-p", server.port, "-U", paths, "-n", 3, "-c", 2]
    result = sxe_http(*target, "--json")
    assert result.returncode == 1
    data = report(result)
    assert data["bad_statuses"] == {"404": 2, "500": 4}
    assert data["errors"]["bad_status"] == 6 and data["queries"] == 6
    result = sxe_http(*target)
    assert result.returncode == 1
    assert "\nstatuses:    404 x 2 500 x 4 (expected 200)\n" in result.stdout
    result = sxe_http(*target, "-e", 404)
    assert result.returncode == 1
    assert "\nstatuses:    500 x 4 (expected 404)\n" in result.stdout
    server.close()


def test_error_line_in_json(sxe_http, hello):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, not listening: connects are refused
        result = sxe_http("-i", "127.0.0.1", "-p", port, "-c", 3, "--json")
    assert result.returncode == 1
    assert report(result)["error"] == \
        f"every connection to 127.0.0.1:{port} failed; the first: Connection refused"
    assert report(sxe_http("-i", "127.0.0.1", "-p", hello, "--json"))["error"] is None
    # 192.0.2.1 (TEST-NET-1) is no address of this host: connects bound to it fail, the rest do not.
    result = sxe_http("-i", "127.0.0.1", "-p", hello, "-c", 4, "-s", "127.0.0.1,192.0.2.1",
                      "--json")
    assert result.returncode == 1
    data = report(result)
    assert (data["connected"], data["errors"]["connect"]) == (2, 2)
    assert (data["queries"], data["not_sent"]) == (2, 2)  # the failed ones' queries
    assert data["error"] == f"some connections to 127.0.0.1:{hello} failed; the first: " \
        "Cannot assign requested address"


class LateServer(FakeServer):
    """A FakeServer with a backlog of 1 that starts accepting 1.5 s after it is made. Linux queues
    backlog + 1 = 2 connections and drops the SYNs of the rest. Their clients send them again
    after 1 s (dropped again: nothing is accepted yet), and again 1 s later where the kernel has
    linear SYN timeouts (net.ipv4.tcp_syn_linear_timeouts) or 2 s later where it backs off: those
    connects take 2 or 3 s, well over the 1 s that makes a connect slow. A server that accepted
    before the first retransmission would make connects of just about 1 s, on either side of it."""

    def __init__(self):
        super().__init__(lambda request: OK)
        self.listener.listen(1)  # nothing connects before this: the test has not started sxe-http

    def accept(self):
        time.sleep(1.5)  # the sleep is the test: past the kernel's fixed 1 s SYN retransmission
        super().accept()


def test_slow_connects_listed(sxe_http):
    servers = [LateServer() for _ in range(3)]
    verbose, quiet, as_json = run_together(
        sxe_http, *[["-i", "127.0.0.1", "-p", server.port, "-c", 6, "-n", 1, *extra]
                    for server, extra in zip(servers, (["-v"], [], ["-v", "--json"]))])
    for result in (verbose, quiet, as_json):
        assert result.returncode == 0, result.stdout + result.stderr
    slow = int(re.search(r"; (\d+) slower than 1 s; 0 failed", verbose.stdout)[1])
    assert 1 <= slow <= 6, verbose.stdout
    listed = re.findall(r"^slow connect: connection (\d+) took ([\d.]+) s$", verbose.stdout,
                        re.MULTILINE)
    assert len(listed) == slow and len({number for number, _ in listed}) == slow, verbose.stdout
    assert all(int(number) < 6 and float(took) > 1 for number, took in listed), verbose.stdout
    assert f"warning:     {slow} connects took over 1 s" in verbose.stdout
    assert "slower than 1 s" in quiet.stdout and "slow connect:" not in quiet.stdout
    data = report(as_json)
    assert data["slow_connects"] >= 1 and data["queries"] == 6
    assert len(data["slow_connects_listed"]) == data["slow_connects"]
    assert all(item["s"] > 1 and 0 <= item["connection"] < 6
               for item in data["slow_connects_listed"])
    for server in servers:
        server.close()


def test_pipelined_megabyte_responses(sxe_http, build_dir, tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    (www / "big.bin").write_bytes(bytes(range(256)) * 3906 + b"x" * 64)  # 1,000,000 bytes
    httpd = Httpd(build_dir, www)
    try:
        data = report(sxe_http("-i", "127.0.0.1", "-p", httpd.port, "-P", 8, "-c", 4, "-n", 40,
                               "-u", "/big.bin", "--json"))
    finally:
        assert httpd.stop() == 0
    assert (data["queries"], data["errors"]["total"], data["not_sent"]) == (160, 0, 0)
    # Chunked, the chunks uneven so that sizes, data and ends fall across reads.
    chunks = [b"a", b"b" * 65535, b"c" * 65537, b"d" * 868927]
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n\r\n"
    server = FakeServer(lambda request: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                        body)
    data = report(sxe_http("-i", "127.0.0.1", "-p", server.port, "-P", 8, "-c", 2, "-n", 16,
                           "--json"))
    assert (data["queries"], data["errors"]["total"], data["not_sent"]) == (32, 0, 0)
    server.close()


def test_websocket_at_a_rate(sxe_http, ws_echo):
    # -P 128: a stall of up to 256 ms (a loaded CI machine) is waited out, not counted as 'cap'.
    result = sxe_http("-i", "127.0.0.1", "-p", ws_echo, "--ws", "/", "-R", 2000, "-d", 2, "-c", 4,
                      "-P", 128, "--json")
    assert result.returncode == 0, result.stderr
    data = report(result)
    assert near(data["queries"], 4000, 0.02) and data["sent"] == data["queries"]
    assert data["errors"]["total"] == 0
    assert near(data["queries_per_s"], 2000, 0.02)


@pytest.mark.parametrize("args, paths, message", [
    (["-R", "0"], None, "-R RATE must be a whole number from 1 to 100000000, not '0'"),
    (["-R", "x"], None, "-R RATE must be a whole number from 1 to 100000000, not 'x'"),
    (["--random"], None, "--random draws from the paths of -U FILE: give -U"),
    (["--tick", "0"], None, "--tick USEC must be a whole number from 1 to 100000, not '0'"),
    (["-U", "PATHS"], None, "-U '{paths}': No such file or directory"),
    (["-U", "PATHS"], "/a\nb 2\n", "-U {paths} line 2: want 'PATH [WEIGHT]' with PATH starting"),
    (["-U", "PATHS"], "/a 1 2\n", "-U {paths} line 1: want 'PATH [WEIGHT]'"),
    (["-U", "PATHS"], "# c\n/a heavy\n", "-U line 2's WEIGHT must be a whole number from 1 to "
     "1000000, not 'heavy'"),
    (["-U", "PATHS"], "/a 0\n", "-U line 1's WEIGHT must be a whole number from 1"),
    (["-U", "PATHS"], "# only a comment\n\n", "-U {paths}: no paths in it"),
    (["-U", "PATHS", "-u", "/a"], "/a\n", "-U FILE gives the paths: not with -u"),
    (["-U", "PATHS", "--ws", "/"], "/a\n", "-U FILE gives the paths: not with --ws"),
    (["--latency-log", "NOWHERE"], None, "--latency-log {nowhere}: No such file or directory"),
])
def test_usage_errors(sxe_http, tmp_path, args, paths, message):
    names = {"PATHS": tmp_path / "paths", "NOWHERE": tmp_path / "no-such-directory" / "log"}
    if paths is not None:
        names["PATHS"].write_text(paths)
    result = sxe_http("-i", "127.0.0.1", "-p", "80", *[names.get(arg, arg) for arg in args])
    assert result.returncode == 2
    assert message.format(paths=names["PATHS"], nowhere=names["NOWHERE"]) in result.stderr
    assert result.stdout == ""
