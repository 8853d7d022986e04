"""Latency at a fixed rate: sxe-http -R sends on a schedule, whether or not answers have come, and
times each answer from when its request was due (coordinated omission corrected). Each server is
first loaded closed-loop for its capacity, then held at 50% and 90% of its own: a 4 KB file
(sxe-httpd, nginx, h2o) and the proxy (sxe-httpd, nginx), 100 connections."""
from harness import grid, peers
from harness.report import Section
from suites import proxy

KEY = "latency"
TITLE = "Latency at 50% and 90% of each server's capacity"
PACKAGES = ("nginx-light", "h2o")
LEVELS = (50, 90)


def file_specs(ctx):
    found = [peers.sxe_httpd(ctx), peers.nginx(ctx), peers.h2o(ctx)]
    keep = ctx.args.servers
    return [s for s in found if not keep or any(k in s.name for k in keep)]


def proxy_specs(ctx, upstream):
    return [s for s in proxy.specs(ctx, upstream, 100) if "pipeline" not in s.name]


def groups(ctx, upstream):
    return [("file", "a 4 KB file", file_specs(ctx), dict(path="/f4k.bin", body="f4k.bin")),
            ("proxy", "through the proxy", proxy_specs(ctx, upstream),
             dict(path="/", body="f12.txt"))]


def estimate(ctx):
    cells = sum(len(specs) for _, _, specs, _ in groups(ctx, 0))
    return cells * (1 + ctx.args.rounds * len(LEVELS)) * (ctx.args.seconds + ctx.args.warmup + 1.5)


def run(ctx, say):
    upstream = proxy.Upstream(ctx)
    section = Section(KEY, TITLE, (
        "Each server on CPU 0, the load on CPU 1, 100 connections. A closed-loop run gives each "
        "server's capacity (its requests/s with 100 connections, one request in flight on "
        "each); then `sxe-http -R` sends at 50% and at 90% of that, on a fixed schedule, and "
        "times each answer from when its request was due, so a stall shows in full. The "
        "levels and servers take turns over the rounds as everywhere else. A rate that could "
        "not be held is marked 'fell behind' with the rate asked: the server (through the "
        "proxy, also the upstream, which shares CPU 1 with the load) was saturated there, "
        "and its latencies are the time its queue took to drain, not a service time."))
    try:
        for key, title, specs, where in groups(ctx, upstream.port):
            if not specs:
                continue
            capacity = grid.run(ctx, say, f"{KEY} capacity", [
                grid.Scenario(f"{key}-capacity", "capacity", specs, **where)], 1)
            rates = {s.name: capacity.figure(f"{key}-capacity", s.name, "rate") for s in specs}
            levels = [grid.Scenario(f"{key}-{level}", f"{level}% of capacity", specs,
                                    rate=lambda name, level=level: rates[name].median *
                                    level / 100 if rates[name].median else 1, **where)
                      for level in LEVELS]
            cells = grid.run(ctx, say, KEY, levels, ctx.args.rounds)
            rows = []
            for scenario in levels:
                for spec in specs:
                    k, n = scenario.key, spec.name
                    achieved = cells.show(k, n, "rate", 0)
                    asked = scenario.rate(n)
                    sample = cells.figure(k, n, "rate")
                    got = sample.median if sample else None
                    if got and got < 0.97 * asked:
                        achieved += f" fell behind {asked:,.0f}"
                    rows.append([scenario.title, n, f"{rates[n].median or 0:,.0f}",
                                 achieved, cells.show(k, n, "p50"),
                                 cells.show(k, n, "p99"), cells.show(k, n, "p999"),
                                 cells.show(k, n, "cpu_us")])
            section.add_table(f"**{title.capitalize()}.**",
                              ["load", "server", "capacity requests/s", "requests/s",
                               "p50 ms", "p99 ms", "p99.9 ms", "server CPU µs/request"], rows)
    finally:
        upstream.stop()
    return section
