"""Answering later: a request held (sxe_http_defer) and answered from a timer on the loop's next
turn against one answered by its handler (bench/defer), and a handler run on a fiber of its own
(examples/http-fiber, no sleep) against the plain callback (examples/http-hello)."""
from harness import grid
from harness.report import Section
from harness.servers import Spec

KEY = "later"
TITLE = "Answering later: held requests and fibers"
PACKAGES = ()


def specs(ctx):
    found = [
        Spec("bench/defer direct", lambda p: [ctx.program("bench/defer"), str(p), "direct"]),
        Spec("bench/defer deferred", lambda p: [ctx.program("bench/defer"), str(p), "deferred"]),
        Spec("examples/http-hello (callback)", lambda p: [ctx.program("examples/http-hello"),
                                                          f"127.0.0.1:{p}"]),
        Spec("examples/http-fiber, no sleep", lambda p: [ctx.program("examples/http-fiber"),
                                                         f"127.0.0.1:{p}", "0"]),
    ]
    keep = ctx.args.servers
    return [s for s in found if not keep or any(k in s.name for k in keep)]


def estimate(ctx):
    return len(specs(ctx)) * ctx.args.rounds * (ctx.args.seconds + ctx.args.warmup + 1.5)


def run(ctx, say):
    scenario = grid.Scenario(KEY, "100 connections", specs(ctx), path="/", body="f12.txt")
    cells = grid.run(ctx, say, KEY, [scenario], ctx.args.rounds)
    section = Section(KEY, TITLE, (
        "One server at a time on CPU 0, `sxe-http` with 100 keep-alive connections on CPU 1. "
        "Each pair is a held answer against the direct one: the ratio is the price of "
        "answering later, CPU per request round by round."))
    pairs = {"bench/defer deferred": "bench/defer direct",
             "examples/http-fiber, no sleep": "examples/http-hello (callback)"}
    rows = []
    for spec in scenario.specs:
        base = pairs.get(spec.name)
        ratio = cells.ratio((KEY, spec.name), (KEY, base)) if base else None
        rows.append([spec.name, cells.show(KEY, spec.name, "rate", 0),
                     cells.show(KEY, spec.name, "cpu_us"), cells.show(KEY, spec.name, "p99"),
                     ratio.show(2, "x") + f" {base}" if ratio else "–"])
    section.add_table("", ["server", "requests/s", "server CPU µs/request", "p99 ms",
                           "CPU: this ÷ its direct twin"], rows)
    section.target("later", "a held request answered on the next turn ≤ 1.10x one answered "
                   "directly", cells.ratio((KEY, "bench/defer deferred"),
                                           (KEY, "bench/defer direct")), 1.10)
    section.target("later", "a handler on a fiber (no sleep) ≤ 1.05x the callback",
                   cells.ratio((KEY, "examples/http-fiber, no sleep"),
                               (KEY, "examples/http-hello (callback)")), 1.05)
    section.cells = cells
    return section
