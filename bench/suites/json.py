"""Reading JSON: the CPU a request costs when its 4 KB body is parsed (bench/json parse:
sxe_http_json, then the tree freed) against when it is only looked at (bench/json raw), and
against the floor of parsing, yyjson alone reading the body into its tree (bench/json yyjson,
without sxe's limits and checks): the same body, 100 keep-alive connections, in turn round by
round. The body is an API's kind: an object holding an array of 36 items, each with an id, a name,
a price, tags and a flag."""
import json
import os

from harness import grid
from harness.report import Section
from harness.servers import Spec

KEY = "json"
TITLE = "Reading a 4 KB JSON body"
PACKAGES = ()


def body():
    items = [{"id": 1000 + i, "name": f"item number {i}", "price": 12.5 + i,
              "tags": ["blue", "large", "sale"], "stock": i % 2 == 0} for i in range(36)]
    return json.dumps({"order": 78123, "customer": "c-4711", "items": items}).encode()


def specs(ctx):
    return [Spec(f"bench/json {mode}", lambda p, mode=mode: [ctx.program("bench/json"), str(p),
                                                              mode], body=b"ok\n")
            for mode in ("parse", "yyjson", "raw")]


def estimate(ctx):
    return 3 * ctx.args.rounds * (ctx.args.seconds + ctx.args.warmup + 1.5)


def run(ctx, say):
    payload = body()
    path = os.path.join(ctx.tmp, "json-body.json")
    with open(path, "wb") as out:
        out.write(payload)
    scenario = grid.Scenario(KEY, "POST of 4 KB, 100 connections", specs(ctx), path="/",
                             check=False, extra=["-m", "POST", "-b", payload.decode()])
    cells = grid.run(ctx, say, KEY, [scenario], ctx.args.rounds)
    section = Section(KEY, TITLE, (
        f"One server at a time on CPU 0, `sxe-http -m POST -b BODY` ({len(payload):,} bytes of "
        "JSON) with 100 keep-alive connections on CPU 1, every answer checked (200, \"ok\"). "
        "The ratio is parse ÷ raw, CPU per request round by round; parsing's share of a request's "
        "CPU is 1 − raw ÷ parse. yyjson ÷ raw is the floor: what the parser alone adds, with "
        "nothing of sxe's around it."))
    rows = [[spec.name, cells.show(KEY, spec.name, "rate", 0), cells.show(KEY, spec.name,
                                                                           "cpu_us"),
             cells.show(KEY, spec.name, "p99")] for spec in scenario.specs]
    section.add_table("", ["server", "requests/s", "server CPU µs/request", "p99 ms"], rows)
    parse, floor, raw = ((KEY, f"bench/json {mode}") for mode in ("parse", "yyjson", "raw"))
    floor_ratio = cells.ratio(floor, raw)
    if floor_ratio is not None and not floor_ratio.failed:
        section.add(f"The floor, yyjson alone ÷ raw: {floor_ratio.show(2, 'x')}: the parser alone "
                    f"is {1 - 1 / floor_ratio.median:.0%} of the request's CPU (the target asks "
                    "15%), with no limit or check of sxe's around it.")
    section.target("json", "a request whose 4 KB body is parsed ≤ 1.18x one whose body is not "
                   "(parsing ≤ 15% of the request's CPU)", cells.ratio(parse, raw), 1.18)
    section.target("json", "sxe's limits and checks: a request parsed with sxe_http_json() ≤ 1.10x "
                   "one parsed by yyjson alone", cells.ratio(parse, floor), 1.10)
    section.cells = cells
    return section
