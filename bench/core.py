#!/usr/bin/env python3
"""sxe's core against the bare epoll floor: examples/hello and bench/epoll-floor under wrk.

Each server runs pinned to CPU 0, wrk (one thread) pinned to CPU 1. Servers are interleaved over
rounds, each measurement on a fresh server process, and medians are reported. Server CPU comes
from /proc/PID/schedstat (nanoseconds on CPU) over the wrk run, peak RSS from VmHWM.

Usage: bench/core.py [--build build/release] [--rounds 3] [--seconds 5] [--quick]
"""
import os
import statistics
import sys

from benchlib import arguments, measure_server

SCENARIOS = [
    ("keep-alive, 100 conns", 100, []),
    ("keep-alive, 10,000 conns", 10000, []),
]


def main():
    args = arguments(__doc__)

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
                result = measure_server(command + [str(port)], port, connections, args.seconds,
                                        extra)
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
