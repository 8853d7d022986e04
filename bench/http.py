#!/usr/bin/env python3
"""sxe's HTTP module and sxe-httpd against nginx, h2o and node.js, under wrk.

Scenarios:
  hello through the full HTTP module (examples/http-hello) against nginx `return 200` and
    node.js http, keep-alive at 100 and 10,000 connections;
  the same pipelined 16 deep, against nginx `return 200` and h2o serving a 12-byte file;
  static files of 12 bytes, 4 KB and 1 MB: sxe-httpd against nginx and h2o serving the same files.
Every server runs one process (one worker, one thread) pinned to CPU 0, with logging off and
keep-alive limits raised (configurations in bench/peers/); wrk -t1 runs on CPU 1. Servers are
interleaved over rounds, a fresh process per measurement, and medians are reported.

Usage: bench/http.py [--build build/release] [--rounds 3] [--seconds 5] [--quick]
"""
import os
import statistics
import subprocess
import sys
import tempfile

from benchlib import ROOT, arguments, install, measure_server

PEERS = os.path.join(ROOT, "bench", "peers")


def write_config(template, tmp, port, root):
    with open(os.path.join(PEERS, template)) as source:
        text = source.read().replace("{port}", str(port)).replace("{root}", root)
    path = os.path.join(tmp, f"{port}-{template}")
    with open(path, "w") as out:
        out.write(text.replace("{tmp}", tmp))
    return path


def commands(build, tmp, root):
    """name -> function(port) giving the server's command line."""
    return {
        "sxe http-hello": lambda port: [os.path.join(build, "examples/http-hello"),
                                        f"127.0.0.1:{port}"],
        "sxe-httpd": lambda port: [os.path.join(build, "tools/sxe-httpd"), "--root", root,
                                   "--listen", f"127.0.0.1:{port}"],
        "nginx": lambda port: ["nginx", "-p", tmp, "-c",
                               write_config("nginx.conf", tmp, port, root)],
        "h2o": lambda port: ["h2o", "-c", write_config("h2o.conf", tmp, port, root)],
        "node.js http": lambda port: ["node", os.path.join(PEERS, "node-hello.js"), str(port)],
    }


# (scenario, connections, pipelined, [(server, path), ...]); the first server is sxe's.
SCENARIOS = [
    ("hello, keep-alive, 100 conns", 100, False,
     [("sxe http-hello", "/"), ("nginx", "/"), ("node.js http", "/")]),
    ("hello, keep-alive, 10,000 conns", 10000, False,
     [("sxe http-hello", "/"), ("nginx", "/"), ("node.js http", "/")]),
    ("hello, pipelined x16, 100 conns", 100, True,
     [("sxe http-hello", "/"), ("nginx", "/"), ("h2o", "/f12.txt")]),
    ("static 12 B, 100 conns", 100, False,
     [("sxe-httpd", "/f12.txt"), ("nginx", "/f12.txt"), ("h2o", "/f12.txt")]),
    ("static 4 KB, 100 conns", 100, False,
     [("sxe-httpd", "/f4k.bin"), ("nginx", "/f4k.bin"), ("h2o", "/f4k.bin")]),
    ("static 1 MB, 100 conns", 100, False,
     [("sxe-httpd", "/f1m.bin"), ("nginx", "/f1m.bin"), ("h2o", "/f1m.bin")]),
]


def main():
    args = arguments(__doc__)
    install("nginx-light", "h2o", "nodejs")
    subprocess.run(["systemctl", "stop", "nginx", "h2o"], stderr=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, check=False)
    tmp = tempfile.mkdtemp(prefix="sxe-bench-")
    os.chmod(tmp, 0o755)  # h2o, started as root, serves as the user nobody
    root = os.path.join(tmp, "www")
    os.mkdir(root)
    for name, size in (("f12.txt", 12), ("f4k.bin", 4096), ("f1m.bin", 1 << 20)):
        with open(os.path.join(root, name), "wb") as out:
            out.write(b"Hello World\n" if size == 12 else os.urandom(size))
    servers = commands(args.build, tmp, root)

    scenarios = [entry for entry in SCENARIOS if args.only in entry[0]]
    port = 20080
    results = {}
    for round_number in range(args.rounds):
        for scenario, connections, pipelined, entries in scenarios:
            for name, path in entries:
                port += 1
                extra = ["-s", os.path.join(PEERS, "pipeline.lua")] if pipelined else []
                result = measure_server(servers[name](port), port, connections, args.seconds,
                                        extra, path)
                results.setdefault((scenario, name), []).append(result)
                print(f"round {round_number + 1} {scenario:32} {name:15} "
                      f"{result['rate']:10.0f} req/s {result['cpu_us']:7.2f} us/req "
                      f"p99 {result['p99']:8.2f} ms rss {result['rss_mb']:6.1f} MB "
                      f"errors {result['errors']}", file=sys.stderr)

    print(f"\n{args.rounds} rounds of {args.seconds} s; medians. Servers on CPU 0, one process "
          f"each; wrk -t1 on CPU 1.\n")
    print("| scenario | server | requests/s | server CPU us/request | p99 ms | peak RSS MB "
          "| errors | sxe's CPU/request as a share of this one's | sxe's rate as a multiple |")
    print("|---|---|---|---|---|---|---|---|---|")
    for scenario, _, _, entries in scenarios:
        medians = {}
        for name, _ in entries:
            runs = results[(scenario, name)]
            medians[name] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        ours = medians[entries[0][0]]
        for name, _ in entries:
            m = medians[name]
            errors = sum(r["errors"] for r in results[(scenario, name)])
            print(f"| {scenario} | {name} | {m['rate']:.0f} | {m['cpu_us']:.2f} | {m['p99']:.2f} "
                  f"| {m['rss_mb']:.1f} | {errors} | {ours['cpu_us'] / m['cpu_us']:.2f}x "
                  f"| {ours['rate'] / m['rate']:.2f}x |")


if __name__ == "__main__":
    main()
