#!/usr/bin/python3
"""Any HTTP server commands side by side, for an A/B of one change.

    bench/ab.py [--rounds N] [--seconds S] [--path P] [--connections C] NAME=COMMAND ...

Each COMMAND (it may start with VAR=value words for its environment) must serve on
127.0.0.1:{port}: the word {port} in it is replaced by a port found free for each run (and the
server is checked to be alive and answering there). Per round, each server in turn is started pinned to CPU 0, loaded by wrk -t1 on
CPU 1, measured for S seconds after half a second of warm-up, and stopped. Reported per server,
medians over the rounds: the server's CPU microseconds per request (every thread of its process
tree, from schedstat), the load generator's, their sum, and requests per second, with the first
server's CPU as the base. bench/compare is the full comparison; this is for a quick, fair check
of two builds or two settings.
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

from benchlib import free_port, parse_wrk, tree_cpu_ns, wait_for_port




def measure(command, args):
    """One cell: (server µs/request, load µs/request, requests/s)."""
    port = free_port()
    words = command.replace("{port}", str(port)).split()
    env = dict(os.environ)
    while words and "=" in words[0] and not words[0].startswith("/"):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    server = subprocess.Popen(["taskset", "-c", "0", *words], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port(port, server.pid)
        if server.poll() is not None:
            sys.exit(f"ab.py: {command} exited before answering on port {port}")
        load = subprocess.Popen(["taskset", "-c", "1", "wrk", "-t1", f"-c{args.connections}",
                                 f"-d{int(args.seconds) + 1}s",
                                 f"http://127.0.0.1:{port}{args.path}"],
                                stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        server_before, load_before = tree_cpu_ns(server.pid), tree_cpu_ns(load.pid)
        started = time.monotonic()
        time.sleep(args.seconds)
        server_after, load_after = tree_cpu_ns(server.pid), tree_cpu_ns(load.pid)
        ended = time.monotonic()
        output = load.communicate()[0]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait()
    rate = parse_wrk(output)[1]
    requests = rate * (ended - started)
    return ((server_after - server_before) / 1e3 / requests,
            (load_after - load_before) / 1e3 / requests, rate)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--path", default="/")
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("servers", nargs="+", metavar="NAME=COMMAND")
    args = parser.parse_args()
    servers = [server.split("=", 1) for server in args.servers]
    results = {name: [] for name, _ in servers}
    for _ in range(args.rounds):
        for name, command in servers:
            results[name].append(measure(command, args))
            time.sleep(0.3)
    base = None
    for name, _ in servers:
        server, load, rate = (statistics.median(cell[i] for cell in results[name]) for i in range(3))
        base = base or server
        rounds = " ".join(f"{cell[0]:.1f}" for cell in results[name])
        print(f"{name:16} server {server:8.2f} µs/request ({server / base:.2f}x)  load {load:8.2f}"
              f"  sum {server + load:8.2f}  requests/s {rate:9.0f}  rounds: {rounds}")


if __name__ == "__main__":
    main()
