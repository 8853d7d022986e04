"""Two cores: sxe-httpd with 2 workers (processes, and threads) against nginx with a master and 2
worker processes (accepting from one socket, and with reuseport), h2o with 2 threads, and the
static floor as 2 processes; Hello World from code on 2 workers against nginx and node.js's
cluster. The servers may run on both CPUs and the load shares CPU 1 with them, so the figure
that compares is CPU per request, not requests per second."""
import os
import time

from harness import grid, peers
from harness.servers import Spec
from harness.report import Section

KEY = "cores"
TITLE = "Two cores: workers against nginx's, h2o's threads and node.js's cluster"
PACKAGES = ("nginx-light", "h2o", "nodejs")
BOTH = "0,1"


def cluster_ready(server, workers=2, timeout=10):
    """node's cluster primary listens before its workers run: wait for them, and for their code
    to be loaded."""
    deadline = time.monotonic() + timeout
    while len(server.pids()) < workers + 1:
        if time.monotonic() > deadline:
            raise RuntimeError("node.js cluster: its workers did not start")
        time.sleep(0.05)
    time.sleep(0.5)


def http_specs(ctx):
    return [
        Spec("sxe http-hello 2 workers", lambda p: [ctx.program("examples/http-hello"),
                                                    f"127.0.0.1:{p}", "2"], cpus=BOTH),
        Spec("nginx return 200 2 workers", peers.nginx(ctx, workers=2).command, cpus=BOTH),
        Spec("node.js http cluster 2", lambda p: ["node", os.path.join(ctx.peers, "node-hello.js"),
                                                  str(p), "2"], cpus=BOTH, ready=cluster_ready),
    ]


def scenarios(ctx):
    keep = ctx.args.servers
    files = [s for s in peers.two_cores(ctx) if not keep or any(k in s.name for k in keep)]
    http = [s for s in http_specs(ctx) if not keep or any(k in s.name for k in keep)]
    found = [grid.Scenario("cores-12b", "a 12 B file, 100 connections", files),
             grid.Scenario("cores-4k", "a 4 KB file, 100 connections", files, path="/f4k.bin",
                           body="f4k.bin"),
             grid.Scenario("cores-http", "Hello World from code, 100 connections", http, path="/")]
    return [s for s in found if s.specs]


def estimate(ctx):
    cells = sum(len(s.specs) for s in scenarios(ctx))
    return cells * ctx.args.rounds * (ctx.args.seconds + ctx.args.warmup + 1.5)


def run(ctx, say):
    found = scenarios(ctx)
    cells = grid.run(ctx, say, KEY, found, ctx.args.rounds)
    section = Section(KEY, TITLE, (
        "Each server may run on both CPUs (sxe-httpd `--workers 2`: processes on one "
        "SO_REUSEPORT socket each, or `--threads`; nginx: a master and `worker_processes 2`, "
        "with and without `reuseport`; h2o `num-threads: 2`; node.js's cluster module with 2 "
        "workers); `sxe-http` runs on CPU 1 beside them. The last column is sxe's CPU per "
        "request over the row's, round by round."))
    header = ["scenario", "server", "requests/s", "server CPU µs/request", "p99 ms",
              "peak RSS MB", "CPU: sxe ÷ this"]
    rows = grid.comparison_rows(
        cells, found, lambda s: "sxe http-hello 2 workers" if s.key == "cores-http" else
        "sxe-httpd 2 workers", [("rate", 0), ("cpu_us", 2), ("p99", 2), ("rss_mb", 1)])
    section.add_table("", header, rows)
    for key, size in (("cores-12b", "12 B"), ("cores-4k", "4 KB")):
        for peer, bound in (("nginx 2 workers", 0.7), ("nginx 2 workers reuseport", 0.7),
                            ("h2o 2 threads", 0.8)):
            section.target("workers", f"sxe-httpd 2 workers, {size}, ≤ {bound}x {peer}",
                           cells.ratio((key, "sxe-httpd 2 workers"), (key, peer)), bound,
                           headline=size == "12 B" and "reuseport" not in peer)
    section.cells = cells
    return section
