#!/usr/bin/env python3
"""sxe-http against the load generators people trust, each on CPU 1 against one server on CPU 0.

Three parts, each interleaved over rounds, medians:
- closed: sxe-http and wrk -t1, closed loop, against the bare epoll floor at 100 and 10,000
  connections, and sxe-http pipelined 16 deep: requests/s and each tool's CPU per request.
- agree: sxe-http and wrk at 100 connections against the epoll floor, nginx, h2o and sxe-httpd
  (a 12-byte file): do they measure the same requests/s? Beside each figure, the server's and the
  tool's CPU use (percent of one core): the side at 100% is the bottleneck being measured.
- rate: open loop at 70% of the server's capacity (sxe-http's closed-loop rate at 100
  connections): sxe-http -R, oha -q --latency-correction and vegeta -rate, against the epoll
  floor and sxe-httpd: the rate each achieved, p50 and p99, and each tool's CPU per request.

oha (crates.io) and vegeta (the Go module proxy) are built once into build/bench-tools, for the
benchmark only; cargo and go must be on PATH.

- wire: at 10,000/s against sxe-httpd, each tool's p50 and p99 beside the round trips that
  tcpdump saw on loopback in the same run: the difference is what the tool itself adds.

Usage: bench/loadgen.py [--build build/release] [--rounds 3] [--seconds 5] [--quick]
                        [--only closed|agree|rate|wire]
"""
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import ROOT, Server, arguments, install, parse_wrk, peer_config, tree_cpu_ns, \
    wrk_command

OHA = ("oha", "1.16.0")
VEGETA = ("github.com/tsenart/vegeta/v12", "v12.13.0")
TOOLS = os.path.join(ROOT, "build", "bench-tools")
LOW_RATE = 10000
# sxe-http twice: with its default tick (what comes due within 1 ms is sent at once, as oha's
# and wrk2's millisecond timers do) and with a 20 us tick (smoother, more wake-ups).
RATE_TOOLS = ("sxe-http", "sxe-http --tick 20", "oha", "vegeta")


def build_tools():
    """oha and vegeta, pinned, built once into build/bench-tools/bin."""
    bin_dir = os.path.join(TOOLS, "bin")
    oha, vegeta = os.path.join(bin_dir, "oha"), os.path.join(bin_dir, "vegeta")
    if not os.path.exists(oha):
        if not shutil.which("cargo"):
            sys.exit("loadgen: oha is built with cargo (rustup.rs); cargo is not on PATH")
        print(f"loadgen: building oha {OHA[1]} (a few minutes, once)", file=sys.stderr)
        subprocess.run(["cargo", "install", OHA[0], "--version", OHA[1], "--locked", "--root",
                        TOOLS], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not os.path.exists(vegeta):
        if not shutil.which("go"):
            sys.exit("loadgen: vegeta is built with go (go.dev); go is not on PATH")
        print(f"loadgen: building vegeta {VEGETA[1]}", file=sys.stderr)
        subprocess.run(["go", "install", f"{VEGETA[0]}@{VEGETA[1]}"], check=True,
                       env={**os.environ, "GOBIN": bin_dir}, stdout=subprocess.DEVNULL)
    return oha, vegeta


def children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def servers(build, tmp, root):
    """The servers measured, by name: a command for a port, and the path to request."""
    def config(template, port):
        return peer_config(template, port, tmp, root)

    return {
        "epoll floor": (lambda p: [os.path.join(build, "bench/epoll-floor"), str(p), root],
                        "/f12.txt"),
        "nginx": (lambda p: ["nginx", "-p", tmp, "-c", config("nginx.conf", p)], "/f12.txt"),
        "h2o": (lambda p: ["h2o", "-c", config("h2o.conf", p)], "/f12.txt"),
        "sxe-httpd": (lambda p: ["env", "SXE_BACKEND=epoll", os.path.join(build, "tools/sxe-httpd"),
                                 "--root", root, "--listen", f"127.0.0.1:{p}", "--connections",
                                 "19000"], "/f12.txt"),
    }


def run_tool(command, timeout):
    """Runs a load generator on CPU 1: its output and its own CPU seconds."""
    before = children_cpu_s()
    output = subprocess.run(["taskset", "-c", "1", *command], capture_output=True, text=True,
                            timeout=timeout).stdout
    return output, children_cpu_s() - before


def sxe_http(build, server, connections, seconds, *extra):
    """sxe-http's JSON report, and its CPU seconds."""
    command = [os.path.join(build, "tools/sxe-http"), "-i", "127.0.0.1", "-p", str(server.port),
               "-u", server.path, "-c", str(connections), "-d", str(seconds), "--json", *extra]
    output, cpu = run_tool(command, seconds + 60)
    return json.loads(output[output.index("{"):]), cpu


def closed_loop(tool, build, server, connections, seconds, pipeline=1):
    """One closed-loop run: requests/s, the tool's CPU per request, p99, errors, and the CPU
    percent of one core that the server and the tool used."""
    server_before, started = tree_cpu_ns(server.pid), time.monotonic()
    if tool == "wrk":
        output, cpu = run_tool(wrk_command(server.port, connections, seconds,
                                           path=server.path)[3:], seconds + 60)
        requests, rate, p99, errors = parse_wrk(output)
    else:
        report, cpu = sxe_http(build, server, connections, seconds, "-P", str(pipeline))
        requests, rate = report["queries"], report["queries_per_s"]
        p99, errors = report["latency_ms"]["p99"], report["errors"]["total"]
    wall = time.monotonic() - started
    return {"rate": rate, "cpu_us": cpu * 1e6 / max(requests, 1), "p99": p99, "errors": errors,
            "server_pct": 100 * (tree_cpu_ns(server.pid) - server_before) / 1e9 / wall,
            "tool_pct": 100 * cpu / wall}


def open_loop(tool, tools, build, server, rate, seconds, tmp):
    """One run at a fixed rate: achieved rate, p50 and p99 in ms, the tool's CPU per request."""
    connections = 100
    if tool.startswith("sxe-http"):
        report, cpu = sxe_http(build, server, connections, seconds, "-R", str(rate),
                               *tool.split()[1:])
        requests, achieved = report["queries"], report["queries_per_s"]
        p50, p99 = report["latency_ms"]["p50"], report["latency_ms"]["p99"]
        errors = report["errors"]["total"]
    elif tool == "oha":
        output, cpu = run_tool([tools[0], "-z", f"{seconds}s", "-c", str(connections), "-q",
                                str(rate), "--latency-correction", "--no-tui", "--output-format",
                                "json", server.url()], seconds + 60)
        report = json.loads(output)
        statuses = report.get("statusCodeDistribution", {})
        requests = sum(statuses.values())
        achieved = requests / seconds
        p50 = report["latencyPercentiles"]["p50"] * 1000
        p99 = report["latencyPercentiles"]["p99"] * 1000
        errors = requests - statuses.get("200", 0) + sum(report.get("errorDistribution",
                                                                    {}).values())
    else:
        results = os.path.join(tmp, "vegeta.bin")
        before = children_cpu_s()
        with open(results, "wb") as out:
            subprocess.run(["taskset", "-c", "1", tools[1], "attack", f"-rate={rate}/s",
                            f"-duration={seconds}s", f"-max-connections={connections}",
                            "-keepalive=true"], input=f"GET {server.url()}\n".encode(),
                           stdout=out, timeout=seconds + 60, check=True)
        cpu = children_cpu_s() - before
        report = json.loads(subprocess.run([tools[1], "report", "-type=json", results],
                                           capture_output=True, text=True, check=True).stdout)
        requests, achieved = report["requests"], report["throughput"]
        p50, p99 = report["latencies"]["50th"] / 1e6, report["latencies"]["99th"] / 1e6
        errors = requests - report["status_codes"].get("200", 0)
    return {"rate": achieved, "p50": p50, "p99": p99, "cpu_us": cpu * 1e6 / max(requests, 1),
            "errors": errors}


def wire_latency(pcap, port):
    """The round trips on the wire, in ms: each request's segment to the segment that ends its
    response, per connection in order, from a tcpdump capture on loopback (Ethernet framing)."""
    import struct
    with open(pcap, "rb") as capture:
        data = capture.read()
    link = struct.unpack_from("<I", data, 20)[0]
    offset = {1: 14, 0: 4, 113: 16, 276: 20}[link]
    sent, trips, at = {}, [], 24
    while at + 16 <= len(data):
        seconds, micros, length, _ = struct.unpack_from("<IIII", data, at)
        packet = data[at + 16:at + 16 + length]
        at += 16 + length
        ip = packet[offset:]
        if len(ip) < 20 or ip[0] >> 4 != 4:
            continue
        tcp = ip[(ip[0] & 15) * 4:]
        source, destination = struct.unpack_from("!HH", tcp)
        payload = tcp[(tcp[12] >> 4) * 4:]
        when = seconds + micros / 1e6
        if destination == port:
            sent.setdefault(source, []).extend([when] * payload.count(b"GET "))
        elif source == port:
            for _ in range(payload.count(b"HTTP/1.1 ")):
                if sent.get(destination):
                    trips.append((when - sent[destination].pop(0)) * 1000)
    trips.sort()
    return (trips[len(trips) // 2], trips[int(len(trips) * 0.99)]) if trips else (0.0, 0.0)


def part_wire(args, table):
    """At 10,000/s, each tool's p50 and p99 beside the round trips seen on the wire in the same
    run: what each tool adds to the server's time is its own overhead."""
    install("tcpdump")
    tools = build_tools()
    every = servers(args.build, args.tmp, args.root)
    results = {}
    for round_number in range(args.rounds):
        for tool in RATE_TOOLS:
            server = Server(*every["sxe-httpd"])
            pcap = os.path.join(args.tmp, "wire.pcap")
            dump = subprocess.Popen(["taskset", "-c", "1", "tcpdump", "-i", "lo", "-s", "256",
                                     "-B", "65536", "-w", pcap, f"tcp port {server.port}"],
                                    stderr=subprocess.PIPE, text=True)
            try:
                dump.stderr.readline()  # "listening on lo": capturing
                result = open_loop(tool, tools, args.build, server, LOW_RATE, args.seconds,
                                   args.tmp)
            finally:
                dump.send_signal(2)
                dropped = dump.communicate(timeout=30)[1]
                server.stop()
            if not re.search(r"^0 packets dropped by kernel", dropped, re.MULTILINE):
                print(f"loadgen: tcpdump dropped packets: {dropped}", file=sys.stderr)
            result["wire_p50"], result["wire_p99"] = wire_latency(pcap, server.port)
            results.setdefault(tool, []).append(result)
            progress(round_number, f"wire {tool} at {LOW_RATE}/s", result)
    table.append(f"\n### Latency against the wire: sxe-httpd at {LOW_RATE}/s, captured with "
                 "tcpdump in the same run\n")
    table.append("| load generator | p50 ms | wire p50 ms | p50 - wire | p99 ms | wire p99 ms "
                 "| p99 - wire |")
    table.append("|---|---|---|---|---|---|---|")
    for tool in RATE_TOOLS:
        m = medians(results[tool])
        table.append(f"| {tool} | {m['p50']:.3f} | {m['wire_p50']:.3f} | "
                     f"{m['p50'] - m['wire_p50']:+.3f} | {m['p99']:.3f} | {m['wire_p99']:.3f} | "
                     f"{m['p99'] - m['wire_p99']:+.3f} |")


def medians(runs):
    out = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    out["errors"] = sum(run["errors"] for run in runs)
    return out


def part_closed(args, table):
    floor = servers(args.build, args.tmp, args.root)["epoll floor"]
    results = {}
    for round_number in range(args.rounds):
        for connections, tool, pipeline in ((100, "wrk", 1), (100, "sxe-http", 1),
                                            (10000, "wrk", 1), (10000, "sxe-http", 1),
                                            (100, "sxe-http", 16)):
            server = Server(*floor)
            try:
                result = closed_loop(tool, args.build, server, connections, args.seconds,
                                     pipeline)
            finally:
                server.stop()
            results.setdefault((connections, tool, pipeline), []).append(result)
            progress(round_number, f"{connections} conns {tool} x{pipeline}", result)
    table.append("\n### Closed loop against the epoll floor\n")
    table.append("| connections | load generator | requests/s | its CPU µs/request | p99 ms | errors "
                 "| requests/s vs wrk | CPU/request vs wrk |")
    table.append("|---|---|---|---|---|---|---|---|")
    for key in sorted(results):
        m = medians(results[key])
        wrk = medians(results[(key[0], "wrk", 1)]) if key[2] == 1 else None
        name = key[1] + (f" -P {key[2]}" if key[2] > 1 else "")
        rate_ratio = f"{m['rate'] / wrk['rate']:.2f}x" if wrk else "–"
        cpu_ratio = f"{m['cpu_us'] / wrk['cpu_us']:.2f}x" if wrk else "–"
        table.append(f"| {key[0]:,} | {name} | {m['rate']:.0f} | {m['cpu_us']:.2f} | "
                     f"{m['p99']:.2f} | {m['errors']} | {rate_ratio} | {cpu_ratio} |")


def part_agree(args, table):
    every = servers(args.build, args.tmp, args.root)
    results = {}
    for round_number in range(args.rounds):
        for name, server_spec in every.items():
            for tool in ("wrk", "sxe-http"):
                server = Server(*server_spec)
                try:
                    result = closed_loop(tool, args.build, server, 100, args.seconds)
                finally:
                    server.stop()
                results.setdefault((name, tool), []).append(result)
                progress(round_number, f"{name} {tool}", result)
    table.append("\n### sxe-http and wrk against the same servers (100 connections, 12 B file)\n")
    table.append("| server | wrk requests/s | sxe-http requests/s | sxe-http ÷ wrk "
                 "| server CPU % under wrk | wrk CPU % | server CPU % under sxe-http "
                 "| sxe-http CPU % |")
    table.append("|---|---|---|---|---|---|---|---|")
    for name in every:
        w, s = medians(results[(name, "wrk")]), medians(results[(name, "sxe-http")])
        table.append(f"| {name} | {w['rate']:.0f} | {s['rate']:.0f} | {s['rate'] / w['rate']:.2f}x "
                     f"| {w['server_pct']:.0f} | {w['tool_pct']:.0f} | {s['server_pct']:.0f} "
                     f"| {s['tool_pct']:.0f} |")


def part_rate(args, table):
    tools = build_tools()
    every = servers(args.build, args.tmp, args.root)
    results, rates = {}, {}
    for name in ("epoll floor", "sxe-httpd"):
        server = Server(*every[name])
        try:
            capacity = closed_loop("sxe-http", args.build, server, 100, args.seconds)["rate"]
        finally:
            server.stop()
        # 70% of capacity, and a rate that every tool can hold from one core (vegeta cannot
        # reach the first).
        rates[name] = (int(capacity * 0.7 / 1000) * 1000, LOW_RATE)
        print(f"capacity of {name}: {capacity:.0f}/s; the rates: {rates[name]}", file=sys.stderr)
    for round_number in range(args.rounds):
        for name in rates:
            for rate in rates[name]:
                for tool in RATE_TOOLS:
                    server = Server(*every[name])
                    try:
                        result = open_loop(tool, tools, args.build, server, rate, args.seconds,
                                           args.tmp)
                    finally:
                        server.stop()
                    results.setdefault((name, rate, tool), []).append(result)
                    progress(round_number, f"{name} {tool} at {rate}/s", result)
    table.append("\n### Open loop: 70% of the server's capacity, and 10,000 requests/s "
                 "(100 connections)\n")
    table.append("| server | rate asked | load generator | rate achieved | p50 ms | p99 ms "
                 "| errors | its CPU µs/request | sxe-http's CPU/request ÷ this |")
    table.append("|---|---|---|---|---|---|---|---|---|")
    for name in rates:
        for rate in rates[name]:
            ours = medians(results[(name, rate, RATE_TOOLS[0])])
            for tool in RATE_TOOLS:
                m = medians(results[(name, rate, tool)])
                table.append(f"| {name} | {rate} | {tool} | {m['rate']:.0f} | {m['p50']:.3f} | "
                             f"{m['p99']:.3f} | {m['errors']} | {m['cpu_us']:.2f} | "
                             f"{ours['cpu_us'] / m['cpu_us']:.2f}x |")


def progress(round_number, what, result):
    figures = " ".join(f"{key} {value:.2f}" for key, value in result.items())
    print(f"round {round_number + 1} {what}: {figures}", file=sys.stderr, flush=True)


def main():
    args = arguments(__doc__)
    install("nginx-light", "h2o")
    for service in ("nginx", "h2o"):  # Debian starts them on install; they are not measured
        if shutil.which("systemctl"):
            subprocess.run(["systemctl", "stop", service], capture_output=True, check=False)
    args.tmp = tempfile.mkdtemp(prefix="sxe-loadgen-")
    args.root = os.path.join(args.tmp, "www")
    os.makedirs(args.root)
    with open(os.path.join(args.root, "f12.txt"), "w") as out:
        out.write("Hello World\n")
    os.chmod(args.tmp, 0o755)  # h2o reads the files as nobody
    table = [f"{args.rounds} rounds of {args.seconds} s; medians. Load generator on CPU 1, server "
             f"on CPU 0."]
    parts = {"closed": part_closed, "agree": part_agree, "rate": part_rate, "wire": part_wire}
    for name, part in parts.items():
        if args.only in ("", name):
            part(args, table)
    print("\n".join(table))
    shutil.rmtree(args.tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
