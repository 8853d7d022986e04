"""sxe_map against LMDB (bench/map): single-key lookups (sxe_map_find against mdb_get) as the
headline, batched lookups a second row, both sides with and without huge pages, the rows
interleaved over rounds inside bench/map; then the writer's phases, once."""
import json

from harness import procs
from harness.figures import Sample
from harness.report import Section

KEY = "map"
TITLE = "sxe_map against LMDB"
PACKAGES = ("liblmdb-dev",)


def command(ctx):
    extra = ["--quick"] if ctx.args.quick else []
    return [ctx.program("bench/map"), "--json", *extra]


def estimate(ctx):
    return 90 if ctx.args.quick else 300


def unit_digits(unit):
    return {"lookups/s": 0, "reads/s": 0, "x": 2}.get(unit, 3)


def run(ctx, say):
    say(f"{KEY}: {' '.join(command(ctx))} (its own progress follows)")
    process = procs.start(command(ctx), "0,1", capture="stdout")
    output, _ = process.communicate(timeout=3600)
    procs.LIVE.discard(process)
    section = Section(KEY, TITLE, "")
    if process.returncode != 0:
        section.reading = f"bench/map failed (exit {process.returncode}): no figures."
        section.target("map", "sxe_map_find ≥ 30x LMDB's mdb_get, one key at a time",
                       Sample([None]), 30, better="higher")
        return section
    report = json.loads(output)
    headline = report["headline"]
    section.reading = (
        f"`{' '.join(['bench/map', '--json'] + (['--quick'] if ctx.args.quick else []))}`: "
        f"{report['keys']:,} keys of 8 bytes with values of 24, the same random key sequence for "
        "every row, a read snapshot (an sxe_map reader, an LMDB read transaction) per "
        f"{report['snapshot_reads']:,} reads, the reader on CPU 0; every row once per round, "
        f"{report['rounds']} rounds, odd rounds in order and even ones in reverse. Huge pages: "
        "both sides are asked for them in the rows that say so (the map's file and LMDB's map "
        "advised MADV_HUGEPAGE) and not in the others; what each got is counted from "
        f"/proc/self/smaps. The headline pair: {headline['why']}.")
    rows = []
    for row in report["rows"]:
        sample = Sample(row["rounds"])
        digits = unit_digits(row["unit"])
        pages = report["huge_pages"]["by_row"].get(row["name"])
        got = f"{pages['huge_mb'][-1]:,.0f} of {pages['resident_mb'][-1]:,.0f} MB" if pages else ""
        rows.append([row["name"], sample.show(digits), row["unit"], got])
    section.add_table("**Reads**, median (lowest–highest round):",
                      ["row", "figure", "unit", "huge pages (last round)"], rows)
    once = [[row["name"], f"{row['rounds'][0]:,.{unit_digits(row['unit'])}f}", row["unit"]]
            for row in report.get("once", [])]
    if once:
        section.add_table("**The writer's phases**, once, after the rounds:",
                          ["figure", "value", "unit"], once)
    ratio = next(row for row in report["rows"] if row["name"] == headline["ratio"])
    section.target("map", "sxe_map point reads ≥ 30x LMDB's, one key at a time (`sxe_map_find` "
                   "against `mdb_get`)", Sample(ratio["rounds"]), 30, better="higher",
                   headline=True)
    return section
