"""The C micro-benchmarks, each from its --json: fibers (bench/fiber), pools against malloc and a
linked list (bench/pool), sxe_hash against binary search (bench/hash), HTTP request parsing
(bench/http-parse), tracing in a release build (bench/trace-cost) and host names, cached and
asked, against getaddrinfo() (bench/resolve). Each runs its own rounds;
every figure shows their median and spread."""
import json

from harness import procs
from harness.figures import Sample
from harness.report import Section

KEY = "micro"
TITLE = "Fibers, pools, hashing, parsing, tracing and names"
PACKAGES = ()
# program, CPUs (pool runs a configuration on 2 processes; hash pins itself), full-run seconds
PROGRAMS = [("fiber", "0", 15), ("pool", "0,1", 12), ("hash", "0,1", 60), ("http-parse", "0", 6),
            ("trace-cost", "0", 4), ("resolve", "0", 8)]


def estimate(ctx):
    return sum(5 if ctx.args.quick else seconds for _, _, seconds in PROGRAMS)


def digits(unit):
    return 0 if unit.endswith("/s") else 3 if unit in ("ms", "x") else 1


def run(ctx, say):
    section = Section(KEY, TITLE, (
        "Each program runs its own rounds (`bench/NAME --json`" +
        (" --quick" if ctx.args.quick else "") + "), pinned to CPU 0 but for bench/pool, "
        "whose shared pool also runs on 2 processes at once; every figure is the median of the "
        "rounds with the lowest and the highest."))
    reports = {}
    for name, cpus, _ in PROGRAMS:
        command = [ctx.program(f"bench/{name}"), "--json"] + (["--quick"] if ctx.args.quick
                                                               else [])
        say(f"{KEY}: {' '.join(['bench/' + name] + command[1:])}")
        process = procs.start(command, cpus, capture="stdout")
        output, _ = process.communicate(timeout=900)
        procs.LIVE.discard(process)
        if process.returncode != 0:
            section.add(f"**bench/{name}** FAILED (exit {process.returncode}).")
            continue
        report = json.loads(output)
        reports[name] = {row["name"]: Sample(row["rounds"]) for row in report["rows"]}
        params = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
                           for k, v in report["params"].items())
        rows = [[row["name"], Sample(row["rounds"]).show(digits(row["unit"])), row["unit"]]
                for row in report["rows"]]
        rows += [[row["name"] + " (once)", f"{row['rounds'][0]:,.1f}", row["unit"]]
                 for row in report.get("once", [])]
        section.add_table(f"**bench/{name}** ({params}):", ["figure", "median (lowest–highest)",
                                                             "unit"], rows)
    targets(section, reports)
    return section


def find(reports, program, text):
    """The row of program whose name holds text, or a failed figure."""
    rows = reports.get(program, {})
    return next((sample for name, sample in rows.items() if text in name), Sample([None]))


def targets(section, reports):
    section.target("fibers", "10,000 fibers created and run one after another ≤ 1.5 ms",
                   find(reports, "fiber", "one after another"), 1.5, unit=" ms", digits=3,
                   headline=True)
    section.target("fibers", "10,000 fibers created and run, all alive at once ≤ 1.5 ms",
                   find(reports, "fiber", "all alive at once"), 1.5, unit=" ms", digits=3,
                   headline=True)
    section.target("fibers", "a fiber switch ≤ 20 ns", find(reports, "fiber", "a fiber switch"),
                   20, unit=" ns", digits=1, headline=True)
    section.target("hash", "sxe_hash_find_many ≥ 8x binary search's lookups",
                   find(reports, "hash", "find_many against bsearch"), 8, better="higher",
                   digits=1)
    section.target("parser", "≥ 5 million requests parsed a second on one core",
                   find(reports, "http-parse", "parsed whole"), 5e6, better="higher", unit="/s",
                   digits=0)
    section.target("pool", "pool state changes ≥ 3x malloc and a linked list, random",
                   find(reports, "pool", "random state changes of 10,000 elements: pool / "
                        "baseline"), 3, better="higher")
    section.target("logging", "tracing compiled out of a release build: with ÷ without ≤ 1.05x",
                   find(reports, "trace-cost", "with tracing macros / without"), 1.05)
