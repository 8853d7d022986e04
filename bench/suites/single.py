"""One core each: sxe against the floors, libuv, node.js, nginx and h2o. Canned replies, HTTP
frameworks and static files, at 100 and 10,000 keep-alive connections and pipelined 16 deep,
files of 12 B, 4 KB and 1 MB, and each server's memory with 10,000 idle connections."""
from harness import grid, peers
from harness.report import Section

KEY = "single"
TITLE = "One core: sxe against the floors, libuv, node.js, nginx and h2o"
PACKAGES = ("nginx-light", "libnginx-mod-http-lua", "h2o", "nodejs", "libuv1-dev",
            "python3-matplotlib")  # the chart of CPU and memory per server
HELLO = dict(path="/", body="f12.txt")
REFERENCE = {"canned": "sxe hello", "http": "sxe http-hello", "files": "sxe-httpd"}


def scenarios(ctx):
    kinds = {"canned": peers.canned(ctx), "http": peers.http(ctx), "files": peers.files(ctx)}
    keep = ctx.args.servers
    for kind in kinds:
        kinds[kind] = [s for s in kinds[kind] if not keep or any(k in s.name for k in keep)]
    found = []
    for kind, specs in kinds.items():
        hello = HELLO if kind != "files" else {}
        found += [
            grid.Scenario(f"{kind}-100", "keep-alive, 100 connections", specs, **hello),
            grid.Scenario(f"{kind}-10k", "keep-alive, 10,000 connections", specs,
                          connections=10000, **hello),
            grid.Scenario(f"{kind}-pipelined", "pipelined 16 deep, 100 connections", specs,
                          pipeline=16, **hello),
        ]
    found += [
        grid.Scenario("files-4k", "a 4 KB file, 100 connections", kinds["files"],
                      path="/f4k.bin", body="f4k.bin"),
        grid.Scenario("files-1m", "a 1 MB file, 100 connections", kinds["files"],
                      path="/f1m.bin", body="f1m.bin"),
    ]
    # Each server of the idle scenario is asked what it serves: the file servers f12.txt, the
    # others Hello World at "/" (examples/http-hello has no other route).
    idle = [s for specs in kinds.values() for s in specs if "floor" not in s.name]
    files = {s.name for s in kinds["files"]}
    found.append(grid.Scenario("idle-10k", "10,000 idle connections", idle, connections=10000,
                               mode="idle",
                               path=lambda spec: "/f12.txt" if spec.name in files else "/"))
    return [s for s in found if s.specs]


def estimate(ctx):
    cells = sum(len(s.specs) for s in scenarios(ctx))
    return cells * ctx.args.rounds * (ctx.args.seconds + ctx.args.warmup + 1.5)


def kind_of(key):
    return key.split("-")[0]


def targets(section, cells):
    def r(a_key, a, b_key, b, figure="cpu_us"):
        return cells.ratio((a_key, a), (b_key, b), figure)

    for key, what in (("canned-100", "100 connections"), ("canned-10k", "10,000 connections"),
                      ("canned-pipelined", "pipelined")):
        section.target("core", f"`examples/hello` CPU/request ≤ 1.10x the epoll floor, {what}",
                       r(key, "sxe hello", key, "epoll floor"), 1.10,
                       headline=key == "canned-100")
    section.target("core", "`examples/hello` RSS ≤ 8 MB with 10,000 connections",
                   cells.figure("idle-10k", "sxe hello", "idle_mb"), 8, unit=" MB", digits=1,
                   headline=True)
    for key, what in (("canned-100", "100 connections"), ("canned-10k", "10,000 connections")):
        section.target("io_uring", f"`examples/hello` on io_uring ≤ "
                       f"{'1.00' if key == 'canned-100' else '0.90'}x the epoll floor, {what}",
                       r(key, "sxe hello io_uring", key, "epoll floor"),
                       1.00 if key == "canned-100" else 0.90)
    for key, what in (("canned-100", "100 connections"), ("canned-10k", "10,000 connections"),
                      ("canned-pipelined", "pipelined")):
        section.target("io_uring", f"`examples/hello` on io_uring ≤ 1.05x the io_uring floor, "
                       f"{what}", r(key, "sxe hello io_uring", key, "uring floor"), 1.05)
    section.target("HTTP", "the HTTP module (`examples/http-hello`) ≤ 1.10x the canned epoll "
                   "floor, 100 connections", r("http-100", "sxe http-hello", "canned-100",
                                               "epoll floor"), 1.10)
    for key, what in (("http-100", "100 connections"), ("http-10k", "10,000 connections")):
        section.target("HTTP", f"`examples/http-hello` ≤ 0.85x nginx `return 200`, {what}",
                       r(key, "sxe http-hello", key, "nginx return 200"), 0.85,
                       headline=key == "http-100")
    for key, size in (("files-100", "12 B"), ("files-4k", "4 KB"), ("files-1m", "1 MB")):
        section.target("static", f"sxe-httpd {size} ≤ 0.7x nginx (tuned)",
                       r(key, "sxe-httpd", key, "nginx"), 0.7, headline=size != "1 MB")
        section.target("static", f"sxe-httpd {size} ≤ 0.8x h2o",
                       r(key, "sxe-httpd", key, "h2o"), 0.8, headline=size != "1 MB")
    section.target("static", "sxe-httpd pipelined 16 deep ≥ 3x h2o's requests/s",
                   r("files-pipelined", "sxe-httpd", "files-pipelined", "h2o", "rate"), 3,
                   better="higher")


def run(ctx, say):
    found = scenarios(ctx)
    load = [s for s in found if s.mode != "idle"]
    idle = [s for s in found if s.mode == "idle"]
    cells = grid.run(ctx, say, KEY, load + idle, ctx.args.rounds)
    section = Section(KEY, TITLE, (
        "Each server is one process with one thread on CPU 0 (nginx: its master and one worker), "
        "the load on CPU 1: `sxe-http` with 100 or 10,000 keep-alive connections, one request "
        "in flight on each or 16 pipelined, every answer checked. Canned servers answer a "
        "fixed Hello World to any request; HTTP frameworks answer it from code; file servers "
        "serve files from a directory. The last column compares the sxe program of each kind "
        "(examples/hello, examples/http-hello, sxe-httpd) with the row's server, CPU per "
        "request round by round: below 1.00x, sxe uses less."))
    header = ["scenario", "server", "requests/s", "server CPU µs/request", "p99 ms",
              "peak RSS MB", "load CPU µs/request", "CPU: sxe ÷ this"]
    figures = [("rate", 0), ("cpu_us", 2), ("p99", 2), ("rss_mb", 1), ("load_us", 2)]
    for kind in ("canned", "http", "files"):
        table_rows = grid.comparison_rows(cells, [s for s in load if kind_of(s.key) == kind],
                                          lambda s: REFERENCE.get(kind_of(s.key)), figures)
        if table_rows:
            section.add_table(f"**{kind.capitalize() if kind != 'http' else 'HTTP'}.**", header,
                              table_rows)
    for scenario in idle:
        section.add_table(
            "**Memory with 10,000 idle connections**, each after one request: the resident "
            "memory of the server's process tree before and with them.",
            ["server", "RSS at start MB", "RSS with the connections MB", "KB per connection"],
            [[s.name, cells.show(scenario.key, s.name, "base_mb", 1),
              cells.show(scenario.key, s.name, "idle_mb", 1),
              cells.show(scenario.key, s.name, "per_conn_kb", 2)] for s in scenario.specs])
    targets(section, cells)
    section.cells = cells
    section.chart = lambda path: chart(cells, load, idle, path)
    return section


def chart(cells, load, idle, path):
    """Server CPU per request at 100 connections, and memory with 10,000 idle connections."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [s for s in load if s.key in ("canned-100", "http-100", "files-100", "files-4k")]
    bars = [(f"{spec.name} ({s.key})",
             cells.get(s.key, spec.name, "cpu_us").median or 0)
            for s in shown for spec in s.specs]
    memory = [(spec.name, cells.get(i.key, spec.name, "idle_mb").median or 0)
              for i in idle for spec in i.specs]
    figure, axes = plt.subplots(1, 2, figsize=(13, 0.28 * max(len(bars), len(memory)) + 2))
    axes[0].barh([b[0] for b in bars], [b[1] for b in bars], color="tab:blue")
    axes[0].invert_yaxis()
    axes[0].set_xlabel("server CPU µs per request, 100 connections (less is better)")
    axes[0].tick_params(axis="y", labelsize=7)
    axes[1].barh([m[0] for m in memory], [m[1] for m in memory], color="tab:purple")
    axes[1].invert_yaxis()
    axes[1].set_xlabel("resident MB with 10,000 idle connections (less is better)")
    axes[1].tick_params(axis="y", labelsize=7)
    figure.suptitle("sxe and its peers, one core each (bench/all; medians)")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
