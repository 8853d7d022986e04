#!/usr/bin/python3
"""Any HTTP server commands side by side, for an A/B of one change.

    bench/ab.py [--rounds N] [--seconds S] [--path P] [--connections C] [--pipeline N]
                [--body-length N] [--build DIR] NAME=COMMAND ...

Each COMMAND (it may start with VAR=value words for its environment) must serve on
127.0.0.1:{port}: the word {port} in it is replaced by a port found free for each run, and the
process started is checked to be the one listening. Per round, the servers take turns in an order
rotated by the round, each started afresh on CPU 0 and loaded by sxe-http on CPU 1 (every
answer's status checked, and its body's length with --body-length) for S seconds after a second
of warm-up. Reported per server: the server's CPU µs per request over the measured window (every
thread of its process tree) and requests/s, medians with the lowest and highest round, and the
CPU ratio to the first server, round by round. A round with any error fails that server's line.
bench/all is the full comparison; this is for a quick, fair check of two builds or two settings.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import procs  # noqa: E402
from harness.figures import Sample, ratios  # noqa: E402
from harness.servers import Running, Spec  # noqa: E402


def spec(name, command):
    words = command.split()
    env = {}
    while words and "=" in words[0] and not words[0].startswith("/"):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    return Spec(name, lambda port: [w.replace("{port}", str(port)) for w in words], env=env)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=3)
    parser.add_argument("--path", default="/")
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--pipeline", type=int, default=1, help="requests in flight a connection")
    parser.add_argument("--body-length", type=int, default=None)
    parser.add_argument("--build", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "build", "release"))
    parser.add_argument("servers", nargs="+", metavar="NAME=COMMAND")
    args = parser.parse_args()
    procs.guard()
    specs = [spec(*server.split("=", 1)) for server in args.servers]
    cpu = {s.name: Sample() for s in specs}
    rate = {s.name: Sample() for s in specs}
    for round_number in range(args.rounds):
        turn = round_number % len(specs)
        for server_spec in specs[turn:] + specs[:turn]:
            with Running(server_spec) as server:
                window = server.load(args.build, connections=args.connections,
                                     seconds=args.seconds, path=args.path,
                                     pipeline=args.pipeline, body_length=args.body_length)
            failed = window.errors > 0
            cpu[server_spec.name].add(None if failed else window.server_us())
            rate[server_spec.name].add(None if failed else window.rate)
            print(f"round {round_number + 1}: {server_spec.name}: " +
                  (f"{window.errors} errors ({window.describe_errors()})" if failed else
                   f"{window.server_us():.2f} µs/request, {window.rate:,.0f}/s"), file=sys.stderr)
    base = specs[0].name
    for server_spec in specs:
        name = server_spec.name
        print(f"{name:16} server {cpu[name].show(2)} µs/request  "
              f"({ratios(cpu[name], cpu[base]).show(2, 'x')})  requests/s {rate[name].show(0)}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
