"""Helpers of bench/loadgen.py, the study of sxe-http against wrk, oha and vegeta (bench/all's
suites use bench/harness): installing, waiting for a port, wrk's output, servers pinned to CPU 0
with the load on CPU 1."""
import argparse
import os
import re
import signal
import socket
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def install(*packages):
    """Installs Debian packages the benchmark needs, the way the project's scripts do."""
    subprocess.run([os.path.join(ROOT, "scripts", "deps"), *packages], check=True,
                   stdout=subprocess.DEVNULL)


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


def free_port():
    """A loopback port nothing listens on now (the kernel's pick for port 0). Another program may
    take it before the server does: wait_for_port(port, pid) finds that out."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listeners(port):
    """The pids of the processes that hold a socket listening on port (IPv4 or IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines)
                for line in lines:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(f"socket:[{fields[9]}]")
        except OSError:
            pass
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                for fd in os.listdir(f"/proc/{entry}/fd"):
                    if os.readlink(f"/proc/{entry}/fd/{fd}") in inodes:
                        pids.add(int(entry))
                        break
            except OSError:
                continue
    return pids


def wait_for_port(port, pid=None, timeout=5.0):
    """Waits until port accepts connections. With pid, also checks that the listener belongs to
    that process or its descendants, and fails loudly when another program holds the port (a
    measurement of someone else's server is worse than none)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.02)
    else:
        raise RuntimeError(f"nothing listens on port {port}")
    if pid is not None:
        holders = listeners(port)
        ours = set(tree(pid))
        if not holders & ours:
            names = []
            for holder in sorted(holders):
                try:
                    with open(f"/proc/{holder}/comm") as comm:
                        names.append(f"{comm.read().strip()} (pid {holder})")
                except OSError:
                    names.append(f"pid {holder}")
            raise RuntimeError(f"port {port} is held by {', '.join(names) or 'another program'}, "
                               f"not by the server started as pid {pid}: not measuring it")


def tree(pid):
    """pid and every process descended from it."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, unvisited = [], [pid]
    while unvisited:
        found.append(unvisited.pop())
        unvisited.extend(children.get(found[-1], []))
    return found


def tree_cpu_ns(pid):
    """CPU time of every thread of pid's process tree, in ns (schedstat)."""
    total = 0
    for member in tree(pid):
        try:
            for task in os.listdir(f"/proc/{member}/task"):
                with open(f"/proc/{member}/task/{task}/schedstat") as stat:
                    total += int(stat.read().split()[0])
        except OSError:
            pass
    return total


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
