#!/usr/bin/env python3
"""sxe-http against wrk -t1: both on CPU 1, each driving the bare epoll floor on CPU 0.

For each tool: its request rate, and its own CPU per request (user + system time of the tool and
its worker processes, from the kernel's accounting of waited-for children). Interleaved over
rounds; medians.

Usage: bench/loadgen.py [--build build/release] [--rounds 3] [--seconds 5] [--quick]
"""
import json
import os
import resource
import statistics
import subprocess
import sys

from benchlib import Server, arguments, parse_wrk, wrk_command

CONNECTIONS = [100, 10000]


def children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_tool(command, timeout):
    before = children_cpu_s()
    output = subprocess.run(command, capture_output=True, text=True, timeout=timeout).stdout
    return output, children_cpu_s() - before


def measure(tool, build, port, connections, seconds):
    with Server([os.path.join(build, "bench/epoll-floor"), str(port)], port):
        if tool == "wrk":
            output, cpu = run_tool(wrk_command(port, connections, seconds), seconds + 60)
            requests, rate, p99, errors = parse_wrk(output)
        else:
            command = ["taskset", "-c", "1", os.path.join(build, "tools/sxe-http"), "-i",
                       "127.0.0.1", "-p", str(port), "-c", str(connections), "-d", str(seconds),
                       "--json"]
            output, cpu = run_tool(command, seconds + 60)
            data = json.loads(output)
            requests, rate = data["queries"], data["queries_per_s"]
            p99, errors = data["latency_ms"]["p99"], data["errors"]["total"]
    return {"rate": rate, "cpu_us": cpu * 1e6 / max(requests, 1), "p99": p99, "errors": errors}


def main():
    args = arguments(__doc__)

    port = 19080
    results = {}
    for round_number in range(args.rounds):
        for connections in CONNECTIONS:
            for tool in ("wrk", "sxe-http"):
                port += 1
                result = measure(tool, args.build, port, connections, args.seconds)
                results.setdefault((connections, tool), []).append(result)
                print(f"round {round_number + 1} {connections:6} conns {tool:8} "
                      f"{result['rate']:10.0f} req/s {result['cpu_us']:6.2f} us/req "
                      f"p99 {result['p99']:8.2f} ms errors {result['errors']}", file=sys.stderr)

    print(f"\n{args.rounds} rounds of {args.seconds} s; medians. Load generator on CPU 1, "
          f"bench/epoll-floor on CPU 0.\n")
    print("| connections | load generator | requests/s | its CPU us/request | p99 ms | errors "
          "| rate vs wrk | CPU/request vs wrk |")
    print("|---|---|---|---|---|---|---|---|")
    for connections in CONNECTIONS:
        medians = {}
        for tool in ("wrk", "sxe-http"):
            runs = results[(connections, tool)]
            medians[tool] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        for tool in ("wrk", "sxe-http"):
            m = medians[tool]
            print(f"| {connections:,} | {tool} | {m['rate']:.0f} | {m['cpu_us']:.2f} | "
                  f"{m['p99']:.2f} | {sum(r['errors'] for r in results[(connections, tool)])} | "
                  f"{m['rate'] / medians['wrk']['rate']:.2f}x | "
                  f"{m['cpu_us'] / medians['wrk']['cpu_us']:.2f}x |")


if __name__ == "__main__":
    main()
