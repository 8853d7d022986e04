#!/usr/bin/env python3
"""sxe's core against the bare epoll floor: examples/hello and bench/epoll-floor under wrk.

Each server runs pinned to CPU 0, wrk (one thread) pinned to CPU 1. Servers are interleaved over
rounds, each measurement on a fresh server process, and medians are reported. Server CPU comes
from /proc/PID/schedstat (nanoseconds on CPU) over the wrk run, peak RSS from VmHWM.

Usage: bench/core.py [--build build/release] [--rounds 3] [--seconds 5] [--quick]
"""
import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

SCENARIOS = [
    ("keep-alive, 100 conns", 100, []),
    ("keep-alive, 10,000 conns", 10000, []),
]


def wait_for_port(port, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on port {port}")


def cpu_ns(pid):
    with open(f"/proc/{pid}/schedstat") as stat:
        return int(stat.read().split()[0])


def peak_rss_kb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def parse_duration_ms(text):
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def run_wrk(port, connections, seconds, extra):
    command = ["taskset", "-c", "1", "wrk", "-t1", f"-c{connections}", f"-d{seconds}s",
               "--latency", "--timeout", "5s"] + extra + [f"http://127.0.0.1:{port}/"]
    output = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60).stdout
    requests = int(re.search(r"(\d+) requests in", output).group(1))
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    p99 = re.search(r"99%\s+([\d.]+(?:us|ms|s))", output)
    errors = 0
    for match in re.finditer(r"(connect|read|write|timeout) (\d+)", output):
        errors += int(match.group(2))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors += int(non2xx.group(1)) if non2xx else 0
    return requests, rate, parse_duration_ms(p99.group(1)) if p99 else float("nan"), errors


def measure(command, port, connections, seconds, extra):
    server = subprocess.Popen(["taskset", "-c", "0"] + command, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        before = cpu_ns(server.pid)
        requests, rate, p99, errors = run_wrk(port, connections, seconds, extra)
        used = cpu_ns(server.pid) - before
        rss = peak_rss_kb(server.pid)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return {"rate": rate, "cpu_us": used / 1000.0 / max(requests, 1), "p99": p99,
            "rss_mb": rss / 1024.0, "errors": errors}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build/release")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="1 round of 2 seconds")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds = 1, 2

    servers = {
        "epoll floor": [os.path.join(args.build, "bench/epoll-floor")],
        "sxe hello": [os.path.join(args.build, "examples/hello")],
    }
    port = 18080
    results = {}
    for round_number in range(args.rounds):
        for scenario, connections, extra in SCENARIOS:
            for name, command in servers.items():
                port += 1
                result = measure(command + [str(port)], port, connections, args.seconds, extra)
                results.setdefault((scenario, name), []).append(result)
                print(f"round {round_number + 1} {scenario:26} {name:12} "
                      f"{result['rate']:10.0f} req/s {result['cpu_us']:6.2f} us/req "
                      f"p99 {result['p99']:7.2f} ms rss {result['rss_mb']:6.1f} MB "
                      f"errors {result['errors']}", file=sys.stderr)

    print(f"\n{args.rounds} rounds of {args.seconds} s; medians. Server on CPU 0, wrk -t1 on CPU 1.\n")
    print("| scenario | server | requests/s | server CPU us/request | p99 ms | peak RSS MB | errors "
          "| CPU/request vs floor |")
    print("|---|---|---|---|---|---|---|---|")
    for scenario, _, _ in SCENARIOS:
        floor_cpu = statistics.median(r["cpu_us"] for r in results[(scenario, "epoll floor")])
        for name in servers:
            runs = results[(scenario, name)]
            median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            print(f"| {scenario} | {name} | {median['rate']:.0f} | {median['cpu_us']:.2f} | "
                  f"{median['p99']:.2f} | {median['rss_mb']:.1f} | {sum(r['errors'] for r in runs)} "
                  f"| {median['cpu_us'] / floor_cpu:.2f}x |")


if __name__ == "__main__":
    main()
