"""A quarter of a million connections on this 2-core box (bench/many): sxe-httpd on 14 workers holds
247,500 idle keep-alive connections while 2,500 more are kept busy at 10,000 requests/s, each
request timed from when it was due."""
import json
import os

from harness import procs
from harness.figures import Sample
from harness.report import Section

KEY = "many"
TITLE = "250,000 connections on one 2-core box"
PACKAGES = ()
SECONDS = 10


def command(ctx):
    connections = "20000" if ctx.args.quick else "250000"
    workers = "2" if ctx.args.quick else "14"
    return [os.path.join(os.path.dirname(ctx.peers), "many"), "--build", ctx.build,
            "--connections", connections, "--workers", workers, "--seconds", str(SECONDS)]


def estimate(ctx):
    return ctx.args.rounds * (SECONDS + (5 if ctx.args.quick else 25))


def one_run(ctx):
    process = procs.start(command(ctx), "0,1", capture="stdout")
    output, _ = process.communicate(timeout=900)
    procs.LIVE.discard(process)
    text = output.decode(errors="replace")
    start, end = text.find("\n{"), text.find("\n}")
    if process.returncode != 0 or start < 0 or end < 0:
        return None, f"bench/many exit {process.returncode}: {text[-300:]}"
    result = json.loads(text[start + 1:end + 2])
    lost = "every held one: yes" not in text
    return result, "held connections were lost" if lost else None


def run(ctx, say):
    figures = {k: Sample() for k in ("ramp", "rate", "p50", "p99", "p999", "errors", "user_b",
                                     "slab_kb", "rss_mb")}
    failures = []
    for round_number in range(ctx.args.rounds):
        say(f"{KEY} round {round_number + 1}/{ctx.args.rounds}: {' '.join(command(ctx)[1:])}")
        result, failure = one_run(ctx)
        if failure:
            failures.append(failure)
        if result is None or "achieved_rate" not in result["active"]:
            failures.append(f"the active connections did not report: {result}"[:300])
            continue
        active = result["active"]
        for key, value in (("ramp", result["ramp_connections_per_s"]),
                           ("rate", active["achieved_rate"]), ("p50", active["p50_us"] / 1000),
                           ("p99", active["p99_us"] / 1000), ("p999", active["p999_us"] / 1000),
                           ("errors", active["errors"] + active.get("overflow", 0)),
                           ("user_b", result["server_user_bytes_per_connection"]),
                           ("slab_kb", result["slab_bytes_per_socket"] / 1024),
                           ("rss_mb", result["server_rss_mb"])):
            figures[key].add(value)
        say(f"{KEY} round {round_number + 1}: " + json.dumps(result))
    section = Section(KEY, TITLE, (
        f"`{' '.join(['bench/many'] + command(ctx)[3:])}`: sxe-httpd (reuseport workers) holds "
        "the idle connections of `bench/many hold` processes over 40 source addresses, while "
        "`bench/many pace` keeps 1% of them busy at a fixed rate, timing each request from when "
        "it was due. User memory is the growth of the workers' resident memory over the ramp, "
        "per connection; the kernel's slab grows per socket (a loopback connection is two)." +
        (" FAILED: " + "; ".join(failures) if failures else "")))
    rows = [["connections a second, ramping", figures["ramp"].show(0)],
            ["requests/s achieved (asked 10,000)", figures["rate"].show(0)],
            ["p50 ms", figures["p50"].show(3)], ["p99 ms", figures["p99"].show(3)],
            ["p99.9 ms", figures["p999"].show(3)], ["errors", figures["errors"].show(0)],
            ["server user memory, bytes per connection", figures["user_b"].show(0)],
            ["kernel slab, KB per socket", figures["slab_kb"].show(1)],
            ["server RSS, MB", figures["rss_mb"].show(1)]]
    section.add_table("", ["figure", "median (lowest–highest)"], rows)
    if not failures:
        held = "20,000" if ctx.args.quick else "250,000"
        section.target("many", f"p99 under 5 ms at 10,000 requests/s beside {held} connections",
                       figures["p99"], 5, unit=" ms", digits=2, headline=True)
        section.target("many", "server user memory ≤ 256 bytes per connection",
                       figures["user_b"], 256, unit=" B", digits=0, headline=True)
    else:
        section.target("many", "250,000 connections held, none lost, no error", Sample([None]), 0)
    return section
