"""The reverse proxy: sxe-httpd --proxy against nginx's proxy_pass, in front of the same upstream
(examples/http-hello), at 100 and 8,000 client connections. nginx keeps as many idle upstream
connections as there are clients (upstream keepalive sized to the load, as its users size it):
it opens one upstream connection per request in flight, so 8,000 clients take 16,000 of its
20,000 descriptors (the machine's limit per process, hence 8,000 and not 10,000). sxe-httpd
runs its default (at most 256 upstream connections per worker, the rest queued), then its
non-default pipelining mode, named as such."""
from harness import grid, peers, procs
from harness.report import Section
from harness.servers import Spec

KEY = "proxy"
TITLE = "The reverse proxy against nginx"
PACKAGES = ("nginx-light",)
COUNTS = (100, 8000)


class Upstream:
    """The proxies' upstream on CPU 1 for the whole suite, beside the load: examples/http-hello,
    or another of the build's programs given its arguments after the address."""

    def __init__(self, ctx, program="examples/http-hello", *args):
        self.port = procs.free_port()
        self.process = procs.start([ctx.program(program), f"127.0.0.1:{self.port}", *args], "1")
        procs.wait_for_port(self.port, self.process.pid)

    def stop(self):
        procs.stop(self.process)


def specs(ctx, upstream, clients):
    def sxe(*extra):
        return lambda p: [ctx.program("tools/sxe-httpd"), "--root", ctx.root, "--listen",
                          f"127.0.0.1:{p}", "--workers", "1", "--connections", "19000",
                          "--proxy", f"/=127.0.0.1:{upstream}", *extra]

    nginx = Spec("nginx", lambda p: ["nginx", "-p", ctx.tmp, "-c", ctx.config(
        "nginx-proxy.conf", p, upstream=upstream, keepalive=clients,
        connections=19500)], packages=("nginx-light",))
    found = [Spec("sxe-httpd", sxe()), nginx,
             Spec("sxe-httpd --proxy-pipeline 16 (not the default)",
                  sxe("--proxy-pipeline", "16"))]
    keep = ctx.args.servers
    return [s for s in found if not keep or any(k in s.name for k in keep)]


def scenarios(ctx, upstream):
    found = [grid.Scenario(f"proxy-{n}", f"{n:,} connections", specs(ctx, upstream, n),
                           connections=n, path="/", body="f12.txt") for n in COUNTS]
    return [s for s in found if s.specs]


def estimate(ctx):
    cells = sum(len(s.specs) for s in scenarios(ctx, 0))
    return cells * ctx.args.rounds * (ctx.args.seconds + ctx.args.warmup + 2)


def run(ctx, say):
    upstream = Upstream(ctx)
    try:
        found = scenarios(ctx, upstream.port)
        cells = grid.run(ctx, say, KEY, found, ctx.args.rounds)
    finally:
        upstream.stop()
    section = Section(KEY, TITLE, (
        "The proxy runs on CPU 0 with one worker; the upstream, `examples/http-hello`, and the "
        "load share CPU 1, the same for every proxy. nginx: `keepalive` as many idle upstream "
        "connections as clients, HTTP/1.1 to the upstream (bench/peers/nginx-proxy.conf). "
        "sxe-httpd: its defaults, then `--proxy-pipeline 16`, which is not. The last column is "
        "sxe-httpd's CPU per request (default mode) over the row's, round by round."))
    rows = grid.comparison_rows(cells, found, lambda s: "sxe-httpd",
                                [("rate", 0), ("cpu_us", 2), ("p99", 2), ("rss_mb", 1)])
    section.add_table("", ["clients", "proxy", "requests/s", "proxy CPU µs/request", "p99 ms",
                           "peak RSS MB", "CPU: sxe-httpd ÷ this"], rows)
    for n in COUNTS:
        section.target("proxy", f"sxe-httpd --proxy (default) ≤ 0.7x nginx, {n:,} connections",
                       cells.ratio((f"proxy-{n}", "sxe-httpd"), (f"proxy-{n}", "nginx")), 0.7,
                       headline=True)
    pipelined = "sxe-httpd --proxy-pipeline 16 (not the default)"
    section.target("proxy", "sxe-httpd --proxy-pipeline 16 (not the default) ≤ 0.7x nginx, 100 "
                   "connections", cells.ratio(("proxy-100", pipelined), ("proxy-100", "nginx")),
                   0.7, headline=True)
    section.cells = cells
    return section
