"""A stalled worker, by spread: bench/stall (C) runs 2 worker processes, worker 0 blocking 50 ms
every 500 ms; `bench/many fresh` opens a new connection for each request, open loop at 10,000 a
second, and times each from its intended start, by the worker that answered. With SO_REUSEPORT
the kernel keeps hashing half of the new connections to the stalled worker, where they wait; with
hand-off the supervisor passes them to the other. The same without the stall is each spread's
base."""
import json

from harness import procs
from harness.figures import Sample, ratios
from harness.report import Section

KEY = "stall"
TITLE = "A stalled worker, by spread"
PACKAGES = ()
RATE = 10000
SPREADS = ("reuseport", "hand-off")


def estimate(ctx):
    return ctx.args.rounds * len(SPREADS) * 2 * (ctx.args.seconds + 2)


def one_run(ctx, spread, stall_ms):
    """bench/many fresh's report against bench/stall, or raises RuntimeError."""
    port = procs.free_port()
    server = procs.start([ctx.program("bench/stall"), str(port), spread, str(stall_ms)], "0")
    try:
        procs.wait_for_port(port, server.pid)
        sources = ",".join(f"127.0.0.{i}" for i in range(2, 10))
        load = procs.start([ctx.program("bench/many"), "fresh", "-i", "127.0.0.1", "-p",
                            str(port), "-c", "4096", "-R", str(RATE), "-t",
                            str(ctx.args.seconds), "-s", sources], "1", capture="stdout")
        output, _ = load.communicate(timeout=ctx.args.seconds + 60)
        procs.LIVE.discard(load)
        if server.poll() is not None:
            raise RuntimeError(f"bench/stall on port {port} exited")
    finally:
        procs.stop(server)
    result = json.loads(output)
    if len(result["workers"]) != 2:
        raise RuntimeError(f"expected answers from 2 workers: {output[:200]!r}")
    return result


def run(ctx, say):
    cells = {}
    failures = []
    for round_number in range(ctx.args.rounds):
        for spread in SPREADS:
            for stall in (0, 50):
                figures = cells.setdefault((spread, stall), {})
                try:
                    r = one_run(ctx, spread, stall)
                    values = {"p50": r["all"]["p50_us"] / 1000, "p99": r["all"]["p99_us"] / 1000,
                              "p999": r["all"]["p999_us"] / 1000, "over": r["over_10ms"],
                              "w0": r["workers"][0]["responses"],
                              "w0p99": r["workers"][0]["p99_us"] / 1000,
                              "w1": r["workers"][1]["responses"],
                              "w1p99": r["workers"][1]["p99_us"] / 1000,
                              "errors": r["errors"] + r["overflow"]}
                except (RuntimeError, OSError, ValueError) as error:
                    failures.append(f"{spread} {stall} ms: {error}")
                    values = {}
                for key in ("p50", "p99", "p999", "over", "w0", "w0p99", "w1", "w1p99", "errors"):
                    figures.setdefault(key, Sample()).add(values.get(key))
                say(f"{KEY} round {round_number + 1}/{ctx.args.rounds}: {spread}, stall "
                    f"{stall} ms: " + (", ".join(f"{k} {v:,.2f}" for k, v in values.items())
                                       or failures[-1]))
    section = Section(KEY, TITLE, (
        f"Worker 0 of bench/stall blocks 50 ms every 500 ms; `bench/many fresh` opens a new "
        f"connection per request, {RATE:,} a second for {ctx.args.seconds} s, over 8 source "
        "addresses, and times each request from its intended start (ms)." +
        (" FAILED: " + "; ".join(failures) if failures else "")))
    rows = []
    for (spread, stall), f in cells.items():
        base = cells[(spread, 0)]["w1p99"]
        rows.append([spread, "50 ms every 500 ms" if stall else "no", f["p50"].show(2),
                     f["p99"].show(2), f["p999"].show(2), f["over"].show(0), f["w0"].show(0),
                     f["w0p99"].show(2), f["w1"].show(0), f["w1p99"].show(2),
                     ratios(f["w1p99"], base).show(2, "x"), f["errors"].show(0)])
    section.add_table("", ["spread", "worker 0 stalls", "p50", "p99", "p99.9", "over 10 ms",
                           "worker 0 answers", "worker 0 p99", "worker 1 answers",
                           "worker 1 p99", "worker 1 p99 ÷ unstalled", "errors"], rows)
    if ("hand-off", 50) in cells:
        section.target("workers", "hand-off: the unstalled worker's p99 beside a stalled one < 2x "
                       "its p99 without the stall",
                       ratios(cells[("hand-off", 50)]["w1p99"], cells[("hand-off", 0)]["w1p99"]),
                       2)
    return section
