#!/usr/bin/python3
"""Every benchmark at the checked-out commit, and docs/benchmarks.md as the report of that run
(run it as bench/all, which installs what is missing and builds first).

Usage: bench/all [--quick] [--rounds N] [--seconds S] [--warmup S] [--only SUITE,...]
                 [--servers TEXT,...] [--docs FILE|''] [--build-dir DIR]

Suites, in order: """
import argparse
import importlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from harness import peers, procs, report  # noqa: E402

SUITES = ["single", "cores", "proxy", "tls", "http2", "latency", "websocket", "later", "map", "scenarios", "compress", "reload", "dictionary", "many", "stall", "micro", "work", "json", "redis"]


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=3, help="each cell's measured window")
    parser.add_argument("--warmup", type=int, default=1, help="load before each window")
    parser.add_argument("--quick", action="store_true",
                        help="one round of one second per cell, after a one-second warm-up")
    parser.add_argument("--only", default="", help="comma-separated suites: " + ", ".join(SUITES))
    parser.add_argument("--servers", default="",
                        help="comma-separated texts: only servers whose name has one")
    parser.add_argument("--docs", default=os.path.join(ROOT, "docs", "benchmarks.md"),
                        help="the report to write ('' for none); with --only, the default is none")
    parser.add_argument("--readme", default=os.path.join(ROOT, "README.md"),
                        help="the README whose figures block to rewrite ('' for none); only "
                        "with the report")
    parser.add_argument("--command", default="bench/all", help="the command to record")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.warmup = 1, 1, 1
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in args.only if s not in SUITES]
    if unknown:
        sys.exit(f"bench/all: unknown suite(s) {unknown}; known: {SUITES}")
    if (args.only or args.servers or args.quick) and "--docs" not in sys.argv:
        args.docs = ""  # a partial or quick run is not the record
    if (args.only or args.servers or args.quick) and "--readme" not in sys.argv:
        args.readme = ""
    return args


def prepare(args):
    """The scratch directory, the files every file server serves, and libuv's programs."""
    tmp = tempfile.mkdtemp(prefix="sxe-bench-")
    os.chmod(tmp, 0o755)  # h2o, started as root, serves as the user nobody
    root = os.path.join(tmp, "www")
    os.mkdir(root)
    for name, size in (("f12.txt", 12), ("f4k.bin", 4096), ("f1m.bin", 1 << 20)):
        with open(os.path.join(root, name), "wb") as out:
            out.write(peers.HELLO if size == 12 else os.urandom(size))
    os.chmod(root, 0o755)
    if shutil.which("pkg-config") and subprocess.run(["pkg-config", "--exists", "libuv"]).returncode \
            == 0:
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libuv"], capture_output=True,
                               text=True, check=True).stdout.split()
        for peer in ("libuv-hello", "libuv-work"):
            subprocess.run(["cc", "-O2", "-o", os.path.join(tmp, peer),
                            os.path.join(HERE, "peers", peer + ".c"), *flags], check=True)
        if os.path.exists("/usr/include/hiredis/adapters/libuv.h"):  # libhiredis-dev
            subprocess.run(["cc", "-O2", "-o", os.path.join(tmp, "hiredis-uv"),
                            os.path.join(HERE, "peers", "hiredis-uv.c"), *flags, "-lhiredis"],
                           check=True)
    return peers.Context(args.build_dir, tmp, root, args)


def main():
    args = arguments()
    procs.guard()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    suites = [importlib.import_module(f"suites.{key}") for key in (args.only or SUITES)]
    packages = {"wrk", "util-linux"}
    for suite in suites:
        packages.update(suite.PACKAGES)
    procs.install(*sorted(packages))
    for service in ("nginx", "h2o"):  # Debian starts them on install; they are not measured
        subprocess.run(["systemctl", "stop", service], capture_output=True, check=False)
    ctx = prepare(args)
    # The commit as built, before the run: edits made while it runs are not in what it measures.
    measured = report.versions(ROOT, args.build_dir)
    started = time.monotonic()
    planned = sum(suite.estimate(ctx) for suite in suites)
    print(f"bench/all: {len(suites)} suite(s), {args.rounds} round(s) of {args.seconds} s per "
          f"cell after {args.warmup} s of warm-up: about {planned / 60:.0f} minutes",
          file=sys.stderr, flush=True)

    def say(text):
        elapsed = time.monotonic() - started
        print(f"[{elapsed / 60:4.1f} of ~{planned / 60:.0f} min] {text}", file=sys.stderr,
              flush=True)

    sections = []
    try:
        for suite in suites:
            say(f"{suite.KEY}: {suite.TITLE}")
            sections.append(suite.run(ctx, say))
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    minutes = (time.monotonic() - started) / 60
    targets = [t for s in sections for t in s.targets]
    for target in targets:
        print(f"{target.verdict:13} {target.area}: {target.text}: "
              f"{target.sample.show(target.digits, target.unit)}")
    if args.docs:
        commit = report.write(args.docs, args.command, sections, args, measured, minutes)
        print(f"bench/all: wrote {args.docs}", file=sys.stderr)
        if args.readme:
            report.write_readme(args.readme, targets, commit)
            print(f"bench/all: wrote its figures into {args.readme}", file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        print("\nbench/all: interrupted; every server and load generator stopped",
              file=sys.stderr)
        sys.exit(130)
