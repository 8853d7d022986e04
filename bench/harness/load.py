"""The load: sxe-http on CPU 1, every answer checked (status, body length, a sample's bytes), and
the server sampled over the window sxe-http counts in. sxe-http --warmup loads the server first
(not counted, but for its errors), then says on stderr when its window starts and ends; the
server's CPU time and the load's are read at those two moments, so the CPU per request divides
the same window's time by the same window's answers."""
import json
import os
import threading
import time

from . import procs


class Window:
    """What one load run measured: the report of sxe-http (JSON) and the CPU time the server and
    the load took within its window."""

    def __init__(self, report, server_ns, seconds):
        self.report = report
        self.server_ns, self.seconds = server_ns, seconds
        self.load_ns = report["cpu_s"] * 1e9  # sxe-http's workers', over the same window

    @property
    def answers(self):
        return self.report["queries"]

    @property
    def rate(self):
        return self.report["queries_per_s"]

    @property
    def errors(self):
        """Every failure, warm-up included: errors of each kind, and requests never sent. Not
        a request of a fixed rate that came due while its connection had 16 outstanding (a
        "cap"): it waits, timed from when it was due, so its latency still counts in full."""
        return self.report["errors"]["total"] - self.report["errors"].get("cap", 0) + \
            self.report["not_sent"] + (self.report["connections"] - self.report["connected"])

    def latency(self, percentile):
        return self.report["latency_ms"][percentile]

    def server_us(self):
        """The server's CPU µs per answer, over the window."""
        return self.server_ns / 1000 / max(self.answers, 1)

    def load_us(self):
        return self.load_ns / 1000 / max(self.answers, 1)

    def describe_errors(self):
        kinds = {k: v for k, v in self.report["errors"].items() if v and k != "total"}
        text = ", ".join(f"{v} {k}" for k, v in kinds.items())
        if self.report.get("bad_statuses"):
            text += " (statuses " + ", ".join(f"{s} x {n}" for s, n in
                                              self.report["bad_statuses"].items()) + ")"
        if self.report["not_sent"]:
            text += f", {self.report['not_sent']} never sent"
        if self.report.get("error"):
            text += f"; {self.report['error']}"
        return text.strip(", ")


def sxe_http(build, port, server_pids, *, connections, seconds, warmup=1, path="/", pipeline=1,
             rate=None, body_length=None, body_file=None, targets=None, extra=(), timeout=10):
    """Runs sxe-http against 127.0.0.1:port and samples server_pids() (a callable: a server's
    process tree can change) at the window's ends. Returns a Window."""
    command = [os.path.join(build, "tools", "sxe-http"), "-i", "127.0.0.1", "-p", str(port),
               "-c", str(connections), "-d", str(seconds), "--warmup", str(warmup),
               "-t", str(timeout), "--json"]
    if pipeline > 1 or not rate:  # with -R, its default: at most 16 outstanding a connection
        command += ["-P", str(pipeline)]
    command += ["-U", targets, "--random"] if targets else ["-u", path] if path else []
    if rate:
        command += ["-R", str(int(rate))]
    if body_length is not None:
        command += ["--body-length", str(body_length)]
    if body_file is not None:
        command += ["--body", body_file]
    command += list(extra)
    process = procs.start(command, "1", capture=True)
    marks = {}

    def sample(mark):
        marks[mark] = (time.monotonic(), procs.tree_cpu_ns(server_pids()))

    def watch():
        for line in process.stderr:
            text = line.decode(errors="replace").strip()
            marks.setdefault("all", []).append(text)
            if text in ("sxe-http: measuring", "sxe-http: measured"):
                sample(text.split()[-1])

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        output = process.stdout.read()
        process.wait(timeout=warmup + seconds + timeout + 120)
    finally:
        procs.stop(process)
    watcher.join(timeout=5)
    text = output.decode(errors="replace")
    if "{" not in text:
        raise RuntimeError("sxe-http gave no report: " + " / ".join(marks.get("all", [])))
    report = json.loads(text[text.index("{"):text.rindex("}") + 1])
    if "measuring" not in marks or "measured" not in marks:
        if report["errors"]["total"] + report["not_sent"] == 0:
            raise RuntimeError("sxe-http did not say when its window began and ended: " +
                               " / ".join(marks.get("all", [])))
        return Window(report, 0, 0)  # it failed before its window: its errors say why
    (t0, s0), (t1, s1) = marks["measuring"], marks["measured"]
    return Window(report, s1 - s0, t1 - t0)
