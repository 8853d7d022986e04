#!/usr/bin/python3
"""sxe side by side with nginx, h2o, node.js and libuv, in one command (run it as bench/compare).

Every server runs one process (one worker, one thread where the server allows) pinned to CPU 0,
with logging off and keep-alive limits raised (configurations in bench/peers/). The load runs on
CPU 1: wrk -t1, and sxe-http (one worker) for the pipelined and sxe-http rows. Servers are interleaved within each round, a
fresh server process per cell, over --rounds rounds; the tables show medians.

Figures per cell: requests/s; server CPU microseconds per request (every thread of every process
in the server's process tree, from /proc/PID/task/TID/schedstat); p99 latency; peak RSS of the
tree (VmHWM); errors (socket errors, non-2xx replies and bad framing, all counted); and the load
generator's own CPU per request. The idle-memory scenario holds 10,000 connections open after
one request each and reports the tree's resident memory.

Usage: bench/compare [--quick] [--rounds N] [--seconds S] [--servers A,B] [--scenarios A,B]
                     [--docs docs/benchmarks.md] [--build-dir DIR]
"""
import argparse
import datetime
import http.client
import os
import json
import random
import platform
import resource
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

from benchlib import ROOT, free_port, install, parse_wrk, peer_config, tree, tree_cpu_ns, \
    wait_for_port

PEERS = os.path.join(ROOT, "bench", "peers")
BODY = b"Hello World\n"

# Each kind of server has the sxe program that its rows are compared with.
REFERENCE = {"canned": "sxe hello", "http": "sxe http-hello", "files": "sxe-httpd",
             "dictionary": "sxe-dict"}


class Peer:
    """A server: its kind, how to start it on a port, what to request, and the Debian packages
    it needs."""

    def __init__(self, kind, command, path="/", packages=()):
        self.kind, self.command, self.path, self.packages = kind, command, path, packages


def peers(build, tmp, root, libuv_hello, dictionary):
    def config(template, port):
        return peer_config(template, port, tmp, root)

    def program(path):
        return os.path.join(build, path)

    def sxe(backend, path):
        """An sxe program on one backend, whatever the environment says."""
        return ["env", f"SXE_BACKEND={backend}", program(path)]

    servers = {
        "epoll floor": Peer("canned", lambda p: [program("bench/epoll-floor"), str(p)]),
        "uring floor": Peer("canned", lambda p: [program("bench/uring-floor"), str(p)]),
        "sxe hello": Peer("canned", lambda p: [*sxe("epoll", "examples/hello"), str(p)]),
        "sxe hello io_uring": Peer("canned",
                                   lambda p: [*sxe("io_uring", "examples/hello"), str(p)]),
        "libuv": Peer("canned", lambda p: [libuv_hello, str(p)], packages=("libuv1-dev",)),
        "node.js net": Peer("canned", lambda p: ["node", os.path.join(PEERS, "node-net.js"),
                                                 str(p)], packages=("nodejs",)),
        "sxe http-hello": Peer("http", lambda p: [*sxe("epoll", "examples/http-hello"),
                                                  f"127.0.0.1:{p}"]),
        "sxe http-hello io_uring": Peer("http", lambda p: [*sxe("io_uring", "examples/http-hello"),
                                                           f"127.0.0.1:{p}"]),
        "nginx return 200": Peer("http", lambda p: ["nginx", "-p", tmp, "-c",
                                                    config("nginx.conf", p)],
                                 packages=("nginx-light",)),
        "nginx+Lua": Peer("http", lambda p: ["nginx", "-p", tmp, "-c", config("nginx-lua.conf", p)],
                          packages=("nginx-light", "libnginx-mod-http-lua")),
        "node.js http": Peer("http", lambda p: ["node", os.path.join(PEERS, "node-hello.js"),
                                                str(p)], packages=("nodejs",)),
        "static floor": Peer("files", lambda p: [program("bench/epoll-floor"), str(p), root],
                             path="/f12.txt"),
        "sxe-httpd": Peer("files", lambda p: [*sxe("epoll", "tools/sxe-httpd"), "--root", root,
                                              "--listen", f"127.0.0.1:{p}", "--connections",
                                              "19000"], path="/f12.txt"),
        "sxe-httpd io_uring": Peer("files", lambda p: [*sxe("io_uring", "tools/sxe-httpd"), "--root",
                                                       root, "--listen", f"127.0.0.1:{p}",
                                                       "--connections", "19000"], path="/f12.txt"),
        "nginx static": Peer("files", lambda p: ["nginx", "-p", tmp, "-c", config("nginx.conf", p)],
                             path="/f12.txt", packages=("nginx-light",)),
        "h2o static": Peer("files", lambda p: ["h2o", "-c", config("h2o.conf", p)],
                           path="/f12.txt", packages=("h2o",)),
        # The dictionary (apps/dictionary): sxe-dict on one loop, against nginx serving the same
        # answers from files made beforehand, one per word (prepare_dictionary).
        "sxe-dict": Peer("dictionary", lambda p: [program("apps/dictionary/sxe-dict"), "-D",
                                                  dictionary, "-l", f"127.0.0.1:{p}", "-w", "0",
                                                  "-c", "19000"], path="/d/zygote"),
        "nginx dictionary files": Peer("dictionary", lambda p: ["nginx", "-p", tmp, "-c",
                                                                config("nginx.conf", p)],
                                       path="/d/zygote", packages=("nginx-light",)),
    }
    if not os.path.exists(program("bench/uring-floor")):  # built where liburing-dev is
        print("compare: no bench/uring-floor in this build (liburing-dev): its rows are left out",
              file=sys.stderr)
        del servers["uring floor"]
    return servers


class Scenario:
    """mode: keep-alive, pipelined, close (a new connection per request) or idle."""

    def __init__(self, key, title, kinds, connections, mode="keep-alive", load="wrk", path=None):
        self.key, self.title, self.kinds, self.connections = key, title, kinds, connections
        self.mode, self.load, self.path = mode, load, path


ALL = ("canned", "http", "files")
SCENARIOS = [
    Scenario("keepalive-100", "keep-alive, 100 conns", ALL, 100),
    Scenario("keepalive-10k", "keep-alive, 10,000 conns", ALL, 10000),
    # sxe-http, not wrk: wrk's Lua pipelining reports no latency (its p99 reads 0).
    Scenario("pipelined-16", "pipelined x16, 100 conns, sxe-http load", ALL, 100, mode="pipelined",
             load="sxe-http"),
    Scenario("static-12b", "static 12 B, 100 conns", ("files",), 100, path="/f12.txt"),
    Scenario("static-4k", "static 4 KB, 100 conns", ("files",), 100, path="/f4k.bin"),
    Scenario("static-1m", "static 1 MB, 100 conns", ("files",), 100, path="/f1m.bin"),
    Scenario("connection-rate", "connection rate, 100 at once", ("http", "files"), 100,
             mode="close"),
    Scenario("sxe-http-100", "keep-alive, 100 conns, sxe-http load", ALL, 100, load="sxe-http"),
    Scenario("idle-10k", "idle memory, 10,000 conns", ALL, 10000, mode="idle"),
    # A request mix of random words (sxe-http -U --random), the same for both servers.
    Scenario("dictionary-100", "dictionary lookups, 100 conns, sxe-http word mix",
             ("dictionary",), 100, load="sxe-http-mix"),
    Scenario("dictionary-10k", "dictionary lookups, 10,000 conns, sxe-http word mix",
             ("dictionary",), 10000, load="sxe-http-mix"),
]

# How many words the dictionary's request mix draws from: nginx gets a file for each.
DICTIONARY_WORDS = 20000


# Processes started and not yet stopped, stopped on any exit (Ctrl-C included).
LIVE = set()


def start(command, cpu, capture=False):
    """Starts command pinned to cpu in a process group of its own; a load generator's output is
    captured, a server's discarded (nobody reads it, so a pipe could fill and stall it)."""
    # Ctrl-C between the fork and the bookkeeping would leave a process nobody stops.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        output = subprocess.PIPE if capture else subprocess.DEVNULL
        process = subprocess.Popen(["taskset", "-c", str(cpu), *command], stdout=output,
                                   stderr=output, start_new_session=True,
                                   preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK,
                                                                             blocked))
        LIVE.add(process)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    return process


def stop(process, grace=5.0):
    """SIGTERM to the process group, SIGKILL after grace seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            print(f"compare: {' '.join(process.args[3:5])} did not stop within {wait:.0f} s of "
                  f"{signal.Signals(sig).name}", file=sys.stderr)
    LIVE.discard(process)


def tree_memory_kb(pid, field):
    total = 0
    for member in tree(pid):
        try:
            with open(f"/proc/{member}/status") as status:
                for line in status:
                    if line.startswith(field + ":"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def stolen_ticks():
    """Clock ticks the hypervisor took from CPU 0 and from CPU 1 (steal time, /proc/stat)."""
    ticks = {}
    with open("/proc/stat") as stat:
        for line in stat:
            fields = line.split()
            if fields[0] in ("cpu0", "cpu1"):
                ticks[fields[0]] = int(fields[8])
    return ticks


def run_load(command, seconds):
    """Runs a load generator to completion (bounded), returning its output and CPU seconds."""
    process = start(command, 1, capture=True)
    try:
        output, _ = process.communicate(timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        stop(process)
        raise RuntimeError(f"{command[0]} did not finish")
    LIVE.discard(process)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return output.decode(errors="replace"), usage.ru_utime + usage.ru_stime


def drive(scenario, port, path, seconds, build, mix=None):
    """The load for one cell: (requests, rate, p99 ms, errors, load generator CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    before = before.ru_utime + before.ru_stime
    if scenario.load in ("sxe-http", "sxe-http-mix"):
        target = ["-U", mix, "--random"] if scenario.load == "sxe-http-mix" else ["-u", path]
        output, cpu = run_load([os.path.join(build, "tools/sxe-http"), "-i", "127.0.0.1", "-p",
                                str(port), "-c", str(scenario.connections), "-d", str(seconds),
                                *target, "-P", "16" if scenario.mode == "pipelined" else "1",
                                "--json"], seconds)
        report = json.loads(output[output.index("{"):output.rindex("}") + 1])
        result = (report["queries"], report["queries_per_s"], report["latency_ms"]["p99"],
                  report["errors"]["total"] + report["not_sent"])
    else:
        extra = ["-H", "Connection: close"] if scenario.mode == "close" else []
        output, cpu = run_load(["wrk", "-t1", f"-c{scenario.connections}", f"-d{seconds}s",
                                "--latency", "--timeout", "5s", *extra,
                                f"http://127.0.0.1:{port}{path}"], seconds)
        result = parse_wrk(output)
    return (*result, cpu - before)


def hold_idle(port, path, count):
    """Opens count connections, sends one request on each and reads its reply; returns the open
    sockets and the number that failed."""
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    selector = selectors.DefaultSelector()
    sockets, replies, errors, opened = [], {}, 0, 0
    while opened < count or selector.get_map():
        while opened < count and len(selector.get_map()) < 500:  # bounded outstanding connects
            conn = socket.socket()
            conn.setblocking(False)
            conn.connect_ex(("127.0.0.1", port))
            selector.register(conn, selectors.EVENT_WRITE)
            sockets.append(conn)
            opened += 1
        events = selector.select(timeout=10)
        if not events:
            errors += len(selector.get_map())
            for key in list(selector.get_map().values()):
                selector.unregister(key.fileobj)
            break
        for key, mask in events:
            conn = key.fileobj
            try:
                if mask & selectors.EVENT_WRITE:
                    conn.send(request)
                    selector.modify(conn, selectors.EVENT_READ)
                    replies[conn] = b""
                    continue
                data = conn.recv(65536)
                replies[conn] += data
                if not data or replies[conn].endswith(BODY):
                    if not data or not replies[conn].startswith(b"HTTP/1.1 200"):
                        errors += 1
                    selector.unregister(conn)
            except OSError:
                errors += 1
                selector.unregister(conn)
    return sockets, errors


def measure(peer, scenario, port, args, build, mix=None):
    path = scenario.path or peer.path
    server = start(peer.command(port), 0)
    try:
        wait_for_port(port, server.pid, timeout=10)
        if scenario.mode == "idle":
            base = tree_memory_kb(server.pid, "VmRSS")
            sockets, errors = hold_idle(port, path, scenario.connections)
            time.sleep(0.5)
            held = tree_memory_kb(server.pid, "VmRSS")
            for conn in sockets:
                conn.close()
            return {"base_mb": base / 1024, "idle_mb": held / 1024,
                    "per_conn_kb": (held - base) / scenario.connections, "errors": errors}
        cpu_before, steal_before, started = tree_cpu_ns(server.pid), stolen_ticks(), time.monotonic()
        requests, rate, p99, errors, load_cpu = drive(scenario, port, path, args.seconds, build,
                                                      mix)
        used = tree_cpu_ns(server.pid) - cpu_before
        ticks = os.sysconf("SC_CLK_TCK") * (time.monotonic() - started)
        stolen = max(after - steal_before[cpu] for cpu, after in stolen_ticks().items())
        return {"rate": rate, "cpu_us": used / 1000 / max(requests, 1), "p99": p99,
                "rss_mb": tree_memory_kb(server.pid, "VmHWM") / 1024, "errors": errors,
                "load_us": load_cpu * 1e6 / max(requests, 1), "stolen": 100 * stolen / ticks}
    finally:
        stop(server)


def prepare_dictionary(build, dictionary, root, tmp):
    """Builds the dictionary's data (Debian's dict-gcide), draws DICTIONARY_WORDS random words,
    writes each one's answer from sxe-dict into root/d/WORD for nginx, and returns the request
    mix: a file of /d/WORD paths, percent-encoded, for sxe-http -U."""
    install("dict-gcide")
    os.makedirs(dictionary, exist_ok=True)
    subprocess.run([os.path.join(build, "apps/dictionary/sxe-dict-build"), dictionary],
                   check=True, stdout=subprocess.DEVNULL)
    words = []
    with open(os.path.join(dictionary, "words"), "rb") as data:
        blob = data.read()
    count = int.from_bytes(blob[8:12], "little")
    for i in range(count):
        offset = int.from_bytes(blob[12 + 4 * i:16 + 4 * i], "little")
        word = blob[offset:blob.index(b"\0", offset)].decode()
        if "/" not in word and not word.startswith("."):  # not a file name nginx can serve
            words.append(word)
    words = random.Random(1913).sample(words, min(DICTIONARY_WORDS, len(words)))
    os.makedirs(os.path.join(root, "d"), exist_ok=True)
    port = free_port()
    server = start([os.path.join(build, "apps/dictionary/sxe-dict"), "-D", dictionary, "-l",
                    f"127.0.0.1:{port}", "-w", "0"], 0)
    mix = os.path.join(tmp, "dictionary-mix.txt")
    try:
        wait_for_port(port, server.pid, timeout=10)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        with open(mix, "w") as paths:
            for word in words:
                path = "/d/" + urllib.parse.quote(word, safe="")
                connection.request("GET", path)
                response = connection.getresponse()
                body = response.read()
                if response.status != 200:
                    raise RuntimeError(f"sxe-dict answered {response.status} for {path}")
                with open(os.path.join(root, "d", word), "wb") as answer:
                    answer.write(body)
                paths.write(path + "\n")
        connection.close()
    finally:
        stop(server)
    return mix


def median_of(runs):
    medians = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    medians["errors"] = sum(run["errors"] for run in runs)
    return medians


def ratio(ours, theirs):
    return f"{ours / theirs:.2f}x" if theirs > 0 else "n/a"


def tables(cells, servers, scenarios):
    """The report as Markdown: a table of every cell, idle memory, and sxe's ratios."""
    lines = ["| scenario | server | requests/s | server CPU µs/request | p99 ms | peak RSS MB "
             "| errors | load CPU µs/request | CPU stolen % | compared with "
             "| CPU/request: sxe ÷ this | requests/s: sxe ÷ this |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    summary = {}
    for scenario in scenarios:
        if scenario.mode == "idle":
            continue
        for name in servers_in(scenario, servers):
            m = cells.get((scenario.key, name))
            ref_name = REFERENCE[servers[name].kind]
            if m is None:
                lines.append(f"| {scenario.title} | {name} | FAILED |" + " |" * 9)
                continue
            ref = cells.get((scenario.key, ref_name))
            cpu_ratio = ratio(ref["cpu_us"], m["cpu_us"]) if ref else "n/a"
            rate_ratio = ratio(ref["rate"], m["rate"]) if ref else "n/a"
            if ref and name != ref_name:
                summary.setdefault(scenario.title, {})[name] = cpu_ratio
            lines.append(f"| {scenario.title} | {name} | {m['rate']:.0f} | {m['cpu_us']:.2f} | "
                         f"{m['p99']:.2f} | {m['rss_mb']:.1f} | {m['errors']} | "
                         f"{m['load_us']:.2f} | {m['stolen']:.1f} | {ref_name} | {cpu_ratio} "
                         f"| {rate_ratio} |")
    idle = [s for s in scenarios if s.mode == "idle"]
    if idle:
        lines += ["", f"Idle memory: resident memory of the server's process tree with "
                  f"{idle[0].connections:,} connections open, each after one request.", "",
                  "| server | RSS at start MB | RSS with the connections MB | KB per connection "
                  "| errors | compared with | RSS: sxe ÷ this |", "|---|---|---|---|---|---|---|"]
        for name in servers_in(idle[0], servers):
            m = cells.get((idle[0].key, name))
            ref_name = REFERENCE[servers[name].kind]
            if m is None:
                lines.append(f"| {name} | FAILED |" + " |" * 5)
                continue
            ref = cells.get((idle[0].key, ref_name))
            rss_ratio = ratio(ref["idle_mb"], m["idle_mb"]) if ref else "n/a"
            if ref and name != ref_name:
                summary.setdefault(idle[0].title, {})[name] = rss_ratio
            lines.append(f"| {name} | {m['base_mb']:.1f} | {m['idle_mb']:.1f} | "
                         f"{m['per_conn_kb']:.2f} | {m['errors']} | {ref_name} | {rss_ratio} |")
    peers_seen = [name for name in servers if name not in REFERENCE.values()]
    if summary and peers_seen:
        lines += ["", "sxe's ratios against each peer: CPU per request (idle memory: resident "
                  "memory), sxe's figure divided by the peer's, each peer compared with the sxe "
                  "program of its kind. Below 1.00x, sxe uses less.", "",
                  "| scenario | " + " | ".join(peers_seen) + " |",
                  "|---|" + "---|" * len(peers_seen)]
        for title, row in summary.items():
            lines.append(f"| {title} | " + " | ".join(row.get(p, "–") for p in peers_seen) + " |")
    return "\n".join(lines)


def servers_in(scenario, servers):
    return [name for name, peer in servers.items() if peer.kind in scenario.kinds]


def versions(build):
    def first_line(command):
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=10)
            text = (result.stdout + result.stderr).strip().splitlines()
            return text[0] if text else "?"
        except (OSError, subprocess.TimeoutExpired):
            return "not installed"

    sxe = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                         capture_output=True, text=True).stdout.strip()
    return {
        "sxe": f"git {sxe}, release build ({build})",
        "nginx": first_line(["nginx", "-v"]),
        "nginx Lua module": first_line(["dpkg-query", "-W", "-f=${Version}",
                                        "libnginx-mod-http-lua"]),
        "h2o": first_line(["h2o", "--version"]),
        "node.js": first_line(["node", "--version"]),
        "libuv": first_line(["pkg-config", "--modversion", "libuv"]),
        "wrk": first_line(["wrk", "-v"]),
        "compiler": first_line(["cc", "--version"]),
    }


def machine():
    model = "?"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as meminfo:
        memory = int(meminfo.readline().split()[1]) / 1024 / 1024
    return (f"{os.cpu_count()} × {model}, {memory:.0f} GiB, Linux {platform.release()}, "
            f"{platform.freedesktop_os_release().get('PRETTY_NAME', '?')}")


def chart(cells, servers, scenarios, path):
    """CPU per request and memory per server, as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [s for s in scenarios if s.mode != "idle" and set(s.kinds) == set(ALL)]
    idle = [s for s in scenarios if s.mode == "idle"]
    names = list(servers)
    figure, axes = plt.subplots(1, 2, figsize=(13, 0.45 * len(names) + 2.2))
    height = 0.8 / max(len(shown), 1)
    for i, scenario in enumerate(shown):
        values = [cells[(scenario.key, n)]["cpu_us"] if (scenario.key, n) in cells else 0
                  for n in names]
        axes[0].barh([y + i * height for y in range(len(names))], values, height,
                     label=scenario.title)
    axes[0].set_yticks([y + height * (len(shown) - 1) / 2 for y in range(len(names))], names)
    axes[0].invert_yaxis()
    axes[0].set_xlabel("server CPU µs per request (less is better)")
    axes[0].legend(fontsize=8)
    if idle:
        values = [cells[(idle[0].key, n)]["idle_mb"] if (idle[0].key, n) in cells else 0
                  for n in names]
        axes[1].barh(range(len(names)), values, color="tab:purple")
        axes[1].set_yticks(range(len(names)), names)
        axes[1].invert_yaxis()
        axes[1].set_xlabel(f"resident MB with {idle[0].connections:,} idle connections "
                           "(less is better)")
    figure.suptitle("sxe and its peers, one core each (bench/compare; medians)")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def write_docs(path, command, report, info, chart_name, args):
    begin, end = "<!-- bench/compare: begin -->", "<!-- bench/compare: end -->"
    today = datetime.date.today().isoformat()
    section = "\n".join([
        begin,
        "## sxe against nginx, h2o, node.js and libuv (`bench/compare`)",
        "",
        f"Generated by `bench/compare` on {today}. Exact command, from the repository root:",
        "", "```", command, "```", "",
        f"Machine: {info['machine']}. Each server is one process pinned to CPU 0; the load "
        "(wrk -t1; sxe-http with one worker where the scenario says so) is pinned to CPU 1. "
        f"{args.rounds} round(s) of {args.seconds} s per cell, the servers interleaved within "
        "each round and started afresh for every cell; medians (errors: the sum over rounds). "
        "Server CPU counts every thread of every process of the server. Ratios compare each "
        "server with the sxe program of its kind: canned replies with `examples/hello`, HTTP "
        "frameworks with `examples/http-hello`, file servers with `sxe-httpd`. This machine is a "
        "shared VM: \"CPU stolen\" is the share of the cell's time the hypervisor gave one of the "
        "two CPUs to someone else (the larger of the two, /proc/stat); where it is high, requests/s "
        "and p99 suffer, while CPU per request, which counts only the time the server ran, holds.",
        "",
        "Versions: " + "; ".join(f"{k}: {v}" for k, v in info["versions"].items()) + ".",
        "",
        f"![CPU per request and memory per server]({chart_name})" if chart_name else "",
        "",
        report,
        end,
    ])
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        lines = text.split("\n")
        # After the title and the paragraph under it.
        at = next((i for i, line in enumerate(lines) if i > 0 and line.startswith("## ")),
                  len(lines))
        text = "\n".join(lines[:at] + [section, ""] + lines[at:])
    with open(path, "w") as out:
        out.write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 round of 1 second per cell")
    parser.add_argument("--servers", default="", help="comma-separated server names")
    parser.add_argument("--scenarios", default="", help="comma-separated scenario keys")
    parser.add_argument("--docs", default=os.path.join(ROOT, "docs", "benchmarks.md"),
                        help="the Markdown file to write the results into ('' for none)")
    parser.add_argument("--command", default="bench/compare", help="the command to record")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds = 1, 1

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tmp = tempfile.mkdtemp(prefix="sxe-compare-")
    os.chmod(tmp, 0o755)  # h2o, started as root, serves as the user nobody
    root = os.path.join(tmp, "www")
    os.mkdir(root)
    for name, size in (("f12.txt", 12), ("f4k.bin", 4096), ("f1m.bin", 1 << 20)):
        with open(os.path.join(root, name), "wb") as out:
            out.write(BODY if size == 12 else os.urandom(size))
    os.chmod(root, 0o755)

    libuv_hello = os.path.join(tmp, "libuv-hello")
    dictionary = os.path.join(tmp, "dictionary")
    servers = peers(args.build_dir, tmp, root, libuv_hello, dictionary)
    if args.servers:
        wanted = [name.strip() for name in args.servers.split(",")]
        unknown = [name for name in wanted if name not in servers]
        if unknown:
            sys.exit(f"compare: unknown server(s) {unknown}; known: {list(servers)}")
        servers = {name: servers[name] for name in servers if name in wanted}
    scenarios = SCENARIOS
    if args.scenarios:
        wanted = [key.strip() for key in args.scenarios.split(",")]
        unknown = [key for key in wanted if key not in [s.key for s in SCENARIOS]]
        if unknown:
            sys.exit(f"compare: unknown scenario(s) {unknown}; known: "
                     f"{[s.key for s in SCENARIOS]}")
        scenarios = [s for s in SCENARIOS if s.key in wanted]
    scenarios = [s for s in scenarios if servers_in(s, servers)]

    packages = {"wrk", "util-linux"}  # taskset comes with util-linux
    for peer in servers.values():
        packages.update(peer.packages)
    if args.docs:
        packages.add("python3-matplotlib")
    install(*sorted(packages))
    for service in ("nginx", "h2o"):  # Debian starts them on install; they are not measured
        if shutil.which("systemctl") and any(p.startswith(service) for p in packages):
            subprocess.run(["systemctl", "stop", service], capture_output=True, check=False)
    if "libuv" in servers:
        subprocess.run(["cc", "-O2", "-o", libuv_hello, os.path.join(PEERS, "libuv-hello.c"),
                        *subprocess.run(["pkg-config", "--cflags", "--libs", "libuv"],
                                        capture_output=True, text=True, check=True)
                        .stdout.split()], check=True)

    mix = None
    if any(s.load == "sxe-http-mix" for s in scenarios):
        mix = prepare_dictionary(args.build_dir, dictionary, root, tmp)

    results = {}
    failures = []
    started = time.monotonic()
    for round_number in range(args.rounds):
        for scenario in scenarios:
            for name in servers_in(scenario, servers):
                try:
                    result = measure(servers[name], scenario, free_port(), args, args.build_dir,
                                     mix)
                except RuntimeError as error:  # a foreign server on the port, or ours died
                    failures.append(f"{scenario.key} {name}: {error}")
                    print(f"[{time.monotonic() - started:5.0f} s] round {round_number + 1} "
                          f"{scenario.key:16} {name:17} FAILED: {error}", file=sys.stderr,
                          flush=True)
                    continue
                results.setdefault((scenario.key, name), []).append(result)
                figures = " ".join(f"{k} {v:.2f}" for k, v in result.items())
                print(f"[{time.monotonic() - started:5.0f} s] round {round_number + 1} "
                      f"{scenario.key:16} {name:17} {figures}", file=sys.stderr, flush=True)

    cells = {key: median_of(runs) for key, runs in results.items()}
    report = tables(cells, servers, scenarios)
    print(report)
    if failures:
        print("\ncompare: these measurements failed, and no docs were written:\n  " +
              "\n  ".join(failures), file=sys.stderr)
        sys.exit(1)
    if args.docs:
        os.makedirs(os.path.dirname(os.path.abspath(args.docs)), exist_ok=True)
        chart_name = os.path.splitext(os.path.basename(args.docs))[0] + ".png"
        chart(cells, servers, scenarios, os.path.join(os.path.dirname(args.docs), chart_name))
        info = {"machine": machine(), "versions": versions(args.build_dir)}
        write_docs(args.docs, args.command, report, info, chart_name, args)
        print(f"\nwrote {args.docs} and {chart_name} beside it", file=sys.stderr)


if __name__ == "__main__":
    def interrupted(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    try:
        main()
    except KeyboardInterrupt:
        print("\ncompare: interrupted; every server and load generator stopped", file=sys.stderr)
        sys.exit(130)
    finally:
        for process in list(LIVE):
            stop(process, grace=1.0)
