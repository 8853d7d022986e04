"""Helpers of bench/loadgen.py, the study of sxe-http against wrk, oha and vegeta (bench/all's
suites use bench/harness): installing, waiting for a port, wrk's output, servers pinned to CPU 0
with the load on CPU 1."""
import argparse
import os
import re
import signal
import subprocess

from harness import procs
from harness.procs import free_port, wait_for_port  # noqa: F401 (bench/loadgen.py's)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


install = procs.install


def peer_config(template, port, tmp, root):
    """A peer's configuration from bench/peers/template, with {port}, {root} and {tmp} filled in,
    written into tmp; returns its path."""
    with open(os.path.join(ROOT, "bench", "peers", template)) as source:
        text = source.read()
    path = os.path.join(tmp, f"{port}-{template}")
    values = {"port": port, "root": root, "tmp": tmp, "workers": 1, "threads": 1, "reuseport": "",
              "log": "access_log off;" if template.startswith("nginx") else ""}
    for key, value in values.items():
        text = text.replace("{" + key + "}", str(value))
    with open(path, "w") as out:
        out.write(text)
    return path


def tree_cpu_ns(pid):
    """CPU time of every thread of pid's process tree, in ns (schedstat)."""
    return procs.tree_cpu_ns(procs.tree(pid))


def parse_duration_ms(text):
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def parse_wrk(output):
    """(requests, requests per second, p99 ms, errors) from wrk --latency output."""
    requests = int(re.search(r"(\d+) requests in", output).group(1))
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    p99 = re.search(r"99%\s+([\d.]+(?:us|ms|s))", output)
    errors = sum(int(m.group(2)) for m in re.finditer(r"(connect|read|write|timeout) (\d+)", output))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors += int(non2xx.group(1)) if non2xx else 0
    return requests, rate, parse_duration_ms(p99.group(1)) if p99 else float("nan"), errors


def wrk_command(port, connections, seconds, extra=(), path="/"):
    return ["taskset", "-c", "1", "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency",
            "--timeout", "5s", *extra, f"http://127.0.0.1:{port}{path}"]


class Server:
    """A server pinned to CPU 0 on a free port, in a process group of its own, checked to be the
    one listening there; stop() (or leaving a with block) sends SIGTERM, then SIGKILL.
    command(port) gives its command line; path is what to request of it."""

    def __init__(self, command, path="/"):
        self.port = free_port()
        self.path = path
        self.process = subprocess.Popen(["taskset", "-c", "0", *command(self.port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        self.pid = self.process.pid
        try:
            wait_for_port(self.port, self.pid, timeout=10)
        except RuntimeError:
            self.stop()
            raise

    def url(self):
        return f"http://127.0.0.1:{self.port}{self.path}"

    def stop(self):
        os.killpg(self.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def arguments(doc):
    """The options every benchmark takes; installs what benchmarks need."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--build", default="build/release")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="1 round of 2 seconds")
    parser.add_argument("--only", default="", help="run only scenarios whose name has this text")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds = 1, 2
    install("wrk", "util-linux")  # taskset comes with util-linux
    return args
