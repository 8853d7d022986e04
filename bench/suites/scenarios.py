"""What users ask about, beyond one small file: a working set larger than sxe-httpd's file cache
(20,000 files of 16 KB, asked for at random), HTTP/1.0 without keep-alive (a connection per
request), access logs on (buffered, for every server that can buffer them), and uploads of 1 MB
through the proxy and to a handler."""
import os

from harness import grid, peers
from harness.report import Section
from harness.servers import Spec
from suites import proxy

KEY = "scenarios"
TITLE = "Scenarios: many files, HTTP/1.0, access logs, uploads"
PACKAGES = ("nginx-light", "h2o", "nodejs")
FILES = 20000
FILE_SIZE = 16384
UPLOAD = 1 << 20


def make_files(ctx):
    """root/many/f0.bin ... and the request mix: each path once, drawn at random by sxe-http."""
    where = os.path.join(ctx.root, "many")
    mix = os.path.join(ctx.tmp, "many.txt")
    if not os.path.isdir(where):
        os.mkdir(where)
        os.chmod(where, 0o755)
        block = os.urandom(FILE_SIZE)
        for i in range(FILES):
            with open(os.path.join(where, f"f{i}.bin"), "wb") as out:
                out.write(block[i % 64:] + block[:i % 64])  # each file's bytes its own
        with open(mix, "w") as paths:
            paths.writelines(f"/many/f{i}.bin\n" for i in range(FILES))
    return mix


def upload_request(ctx):
    path = os.path.join(ctx.tmp, "upload.req")
    if not os.path.exists(path):
        with open(path, "wb") as out:
            out.write(b"PUT /upload.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n"
                      % UPLOAD + os.urandom(UPLOAD))
    return path


def file_servers(ctx, log=False):
    if not log:
        return [peers.sxe_httpd(ctx), peers.nginx(ctx), peers.h2o(ctx)]
    logs = os.path.join(ctx.tmp, "logs")
    os.makedirs(logs, exist_ok=True)
    os.chmod(logs, 0o777)  # nginx's workers and h2o write as nobody
    return [peers.sxe_httpd(ctx, extra=("--access-log", os.path.join(logs, "sxe.log"),
                                        "--log-format", "combined", "--access-log-buffer",
                                        "65536"),
                            name="sxe-httpd, log buffered 64 KB"),
            peers.sxe_httpd(ctx, name="sxe-httpd, no log"),  # what the log costs it
            Spec("nginx, log buffered 64 KB", peers.nginx(
                ctx, log=os.path.join(logs, "nginx.log")).command),
            Spec("h2o, log (it has no buffer)", peers.h2o(
                ctx, log=os.path.join(logs, "h2o.log")).command)]


def upload_sinks(ctx):
    store = os.path.join(ctx.tmp, "uploads")
    os.makedirs(store, exist_ok=True)
    return [Spec("sxe examples/upload", lambda p: [ctx.program("examples/upload"),
                                                  f"127.0.0.1:{p}", store]),
            Spec("node.js http, piped to a file", lambda p: [
                "node", os.path.join(ctx.peers, "node-upload.js"), str(p), store])]


def scenarios(ctx, upstream=0):
    keep = ctx.args.servers

    def chosen(specs):
        return [s for s in specs if not keep or any(k in s.name for k in keep)]

    upload = dict(path=None, body=None, check=False,
                  extra=["-f", upload_request(ctx), "-e", "201"])
    found = [
        grid.Scenario("many-files", f"{FILES:,} files of 16 KB at random, 100 connections",
                      chosen(file_servers(ctx)), body=None, paths=make_files(ctx),
                      extra=["--body-length", str(FILE_SIZE)]),
        grid.Scenario("http10", "HTTP/1.0, a connection per request, 12 B, 100 at once",
                      chosen(file_servers(ctx)), extra=["--http1.0"]),
        grid.Scenario("logs", "access log on, 12 B, 100 connections",
                      chosen(file_servers(ctx, log=True))),
        grid.Scenario("upload-proxy", "1 MB uploads through the proxy, 20 connections",
                      chosen([s for s in proxy.specs(ctx, upstream, 20) if "pipeline" not in
                              s.name]), connections=20, **upload),
        grid.Scenario("upload-handler", "1 MB uploads to a handler, 20 connections",
                      chosen(upload_sinks(ctx)), connections=20, **upload),
    ]
    return [s for s in found if s.specs]


def estimate(ctx):
    cells = sum(len(s.specs) for s in scenarios(ctx))
    return 10 + cells * ctx.args.rounds * (ctx.args.seconds + ctx.args.warmup + 1.5)


def run(ctx, say):
    store = os.path.join(ctx.tmp, "proxied-uploads")
    os.makedirs(store, exist_ok=True)
    upstream = proxy.Upstream(ctx, "examples/upload", store)
    try:
        found = scenarios(ctx, upstream.port)
        cells = grid.run(ctx, say, KEY, found, ctx.args.rounds)
    finally:
        upstream.stop()
    section = Section(KEY, TITLE, (
        "Each server on CPU 0 (uploads' upstream and sinks: `examples/upload` storing each body "
        "as a file, and the load, on CPU 1). Many files: sxe-httpd's cache holds 1,024 files "
        "and 32 MB, nginx's `open_file_cache` 8,000 descriptors, h2o its own small cache; "
        f"{FILES:,} files of 16 KB (320 MB) asked for at random. HTTP/1.0: `sxe-http --http1.0`, "
        "each request on a new connection, timed from its connect. Logs: each server's access "
        "log on, in the combined format (h2o's default, which is the same), buffered where the "
        "server can buffer it, and sxe-httpd with its log off for what the log costs. Uploads: a "
        "PUT of 1 MB per request, answered 201 once stored; through the proxy (sxe-httpd "
        "streams bodies; nginx with `proxy_request_buffering off`, as sxe-httpd does) and to a "
        "handler (sxe's `examples/upload` on a fiber, node.js streaming to a file)."))
    rows = []
    for scenario in found:
        for spec in scenario.specs:
            k, n = scenario.key, spec.name
            rows.append([scenario.title, n, cells.show(k, n, "rate", 0), cells.show(k, n, "cpu_us"),
                         cells.show(k, n, "p99"), cells.show(k, n, "rss_mb", 1)])
    logged = ("logs", "sxe-httpd, log buffered 64 KB")
    section.target("scenarios", "access log on (buffered): sxe-httpd ≤ 1.10x its CPU per request "
                   "with the log off", cells.ratio(logged, ("logs", "sxe-httpd, no log")), 1.10)
    section.target("scenarios", "access log on (buffered): sxe-httpd ≤ 0.7x nginx's with its "
                   "buffered log", cells.ratio(logged, ("logs", "nginx, log buffered 64 KB")), 0.7)
    section.add_table("", ["scenario", "server", "requests/s", "server CPU µs/request", "p99 ms",
                           "peak RSS MB"], rows)
    section.cells = cells
    return section
