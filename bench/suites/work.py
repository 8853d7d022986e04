"""Work off the loop: sxe's work pool (bench/work) against libuv's uv_queue_work
(bench/peers/libuv-work.c), both with 4 threads and the loop on CPUs 0 and 1, in turn, a run of
each per round: empty jobs with 1,024 in flight (jobs a second, the process's CPU per job) and one
job at a time (the median round trip of 10,000)."""
import json
import os

from harness import procs
from harness.figures import Sample, ratios
from harness.report import Section

KEY = "work"
TITLE = "Work off the loop: sxe's pool against libuv's"
PACKAGES = ("libuv1-dev",)
ROWS = ("empty jobs, 1024 in flight", "CPU per job, 1024 in flight",
        "a job's round trip, one at a time")


def estimate(ctx):
    return ctx.args.rounds * (2 if ctx.args.quick else 6)


def one_run(command):
    process = procs.start(command, "0,1", capture="stdout")
    output, _ = process.communicate(timeout=300)
    procs.LIVE.discard(process)
    if process.returncode != 0:
        return None, None
    report = json.loads(output)
    return report["params"]["pool"], {row["name"]: row["rounds"][0] for row in report["rows"]}


def run(ctx, say):
    section = Section(KEY, TITLE, (
        "Each round runs `bench/work --json` and libuv's `libuv-work --json` one after the other "
        "(which goes first alternates), pinned to CPUs 0 and 1; each figure is the median of the "
        "rounds with the lowest and the highest, the ratios taken round by round."))
    programs = {"sxe": [ctx.program("bench/work"), "--json"],
                "libuv": [os.path.join(ctx.tmp, "libuv-work"), "--json"]}
    if ctx.args.quick:
        for command in programs.values():
            command.append("--quick")
    if not os.path.exists(programs["libuv"][0]):
        section.add("**libuv-work** was not built (no libuv): nothing to compare.")
        return section
    samples = {(pool, row): Sample() for pool in programs for row in ROWS}
    names = {}
    for r in range(ctx.args.rounds):
        order = list(programs) if r % 2 == 0 else list(reversed(programs))
        for pool in order:
            say(f"{KEY}: round {r + 1} of {ctx.args.rounds}: {pool}")
            name, values = one_run(programs[pool])
            names[pool] = name or names.get(pool, pool)
            for row in ROWS:
                samples[(pool, row)].add(None if values is None else values.get(row))
    rows = [[row] + [samples[(pool, row)].show(0 if row.startswith("empty") else 2)
                     for pool in programs] for row in ROWS]
    section.add_table("4 threads each; jobs a second, µs of CPU per job, µs per round trip:",
                      ["figure"] + [names[pool] for pool in programs], rows)
    section.target("work", "jobs a second, 1,024 in flight ≥ 1.0x libuv's",
                   ratios(samples[("sxe", ROWS[0])], samples[("libuv", ROWS[0])]), 1.0,
                   better="higher")
    section.target("work", "CPU per job, 1,024 in flight ≤ 1.0x libuv's",
                   ratios(samples[("sxe", ROWS[1])], samples[("libuv", ROWS[1])]), 1.0)
    section.target("work", "a job's round trip, one at a time ≤ 1.05x libuv's",
                   ratios(samples[("sxe", ROWS[2])], samples[("libuv", ROWS[2])]), 1.05)
    return section
