"""The HTTP/2 load: nghttp2's h2load on CPU 1, the same client for every server (sxe-http speaks
HTTP/1.1 only), its answers checked (no failure or error, every status 2xx, and at least the body's
bytes for each), and the server sampled over h2load's main window: h2load says on its output when
its warm-up ends and when its measured duration does, and the server's CPU time and h2load's are
read at those two moments."""
import re
import threading
import time

from . import procs


class H2Window:
    """What one h2load run measured, in the terms grid's cells use."""

    def __init__(self, text, server_ns, seconds):
        self.text, self.server_ns, self.seconds = text, server_ns, seconds
        done = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                         r"(\d+) failed, (\d+) errored, (\d+) timeout", text)
        codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
        rate = re.search(r"finished in [\d.]+s, ([\d.]+) req/s", text)
        data = re.search(r"traffic: .* \((\d+)\) data", text)
        mean = re.search(r"time for request:\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)", text)
        if not (done and codes and rate and data):
            raise RuntimeError("h2load gave no report: " + text[-400:])
        self.answers = int(done.group(4))
        self.rate = float(rate.group(1))
        self.failed = int(done.group(5)) + int(done.group(6)) + int(done.group(7))
        self.not_2xx = sum(int(codes.group(i)) for i in (2, 3, 4))
        self.data = int(data.group(1))
        scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}
        self.mean_ms = float(mean.group(1)) * scale[mean.group(2)] if mean else None

    def errors(self, body_length):
        """What was wrong with the answers, or an empty string. h2load counts the body bytes of
        the warm-up too, so their sum is a floor for each answer's, not an exact check (the
        harness checks one answer's bytes exactly before the load)."""
        wrong = []
        if self.failed:
            wrong.append(f"{self.failed} failed or errored")
        if self.not_2xx:
            wrong.append(f"{self.not_2xx} not 2xx")
        if self.answers and self.data < self.answers * body_length:
            wrong.append(f"{self.data} body bytes for {self.answers} answers of {body_length}")
        return ", ".join(wrong)

    def server_us(self):
        return self.server_ns / 1000 / max(self.answers, 1)


def h2load(url, server_pids, *, connections, streams, seconds, warmup=1):
    """Runs h2load on CPU 1 against url (https:// for h2 over TLS, chosen by ALPN; http:// for
    h2c with prior knowledge) and samples server_pids() over its main window."""
    command = ["h2load", "-c", str(connections), "-m", str(streams), "-t", "1", "-D",
               str(seconds), "--warm-up-time", str(warmup), url]
    process = procs.start(command, "1", capture="stdout")
    marks, lines = {}, []

    def sample(mark):
        marks[mark] = (time.monotonic(), procs.tree_cpu_ns(server_pids()))

    def watch():
        for line in process.stdout:
            text = line.decode(errors="replace")
            lines.append(text)
            if text.startswith("Warm-up phase is over"):
                sample("measuring")
            elif text.startswith("Main benchmark duration is over"):
                sample("measured")

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        process.wait(timeout=warmup + seconds + 120)
    finally:
        procs.stop(process)
    watcher.join(timeout=5)
    text = "".join(lines)
    if "measuring" not in marks or "measured" not in marks:
        raise RuntimeError("h2load did not say when its window began and ended: " + text[-400:])
    (t0, s0), (t1, s1) = marks["measuring"], marks["measured"]
    return H2Window(text, s1 - s0, t1 - t0)
