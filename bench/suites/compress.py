"""Compression as files are served: gzip at level 5 of a 64 KB HTML page and of a 1 MB script, by
sxe-httpd (--gzip 5), nginx (gzip on, gzip_comp_level 5) and h2o (compress: gzip: 5), each answer
checked for its coded length, and one decoded before the load."""
import gzip
import http.client
import os

from harness import grid, peers
from harness.report import Section
from harness.servers import Spec

KEY = "compress"
TITLE = "Compression as files are served (gzip level 5)"
PACKAGES = ("nginx-light", "h2o")
FILES = {"page.html": 64 * 1024, "bundle.js": 1 << 20}

# nginx's lines for the scenario, each one a user sets to compress (the defaults: off, level 1,
# text/html only, 20 bytes)
NGINX_GZIP = ("gzip on;  # compress answers for clients that accept it\n"
              "    gzip_comp_level 5;  # the level every server here is given\n"
              "    gzip_types text/css application/javascript text/javascript;  # beside text/html\n"
              "    gzip_min_length 256;  # as sxe-httpd's --compress-min\n"
              "    gzip_vary on;  # caches keep the codings apart, as sxe-httpd and h2o say")
H2O_GZIP = "compress:\n  gzip: 5   # compress answers for clients that accept it, at level 5"


def make_files(ctx):
    """Text that compresses as real pages and scripts do: sxe's own sources and docs, cut to
    size."""
    text = b""
    for folder in ("docs", "src/core", "src/http/server"):
        where = os.path.join(os.path.dirname(ctx.peers), "..", folder)
        for name in sorted(os.listdir(where)):
            if not os.path.isfile(os.path.join(where, name)):
                continue
            with open(os.path.join(where, name), "rb") as source:
                text += source.read()
    for name, size in FILES.items():
        path = os.path.join(ctx.root, "compress", name)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            with open(path, "wb") as out:
                out.write((text * (size // len(text) + 1))[:size])
            os.chmod(path, 0o644)


def gzip_checked(path, original):
    """A Spec's ready hook: one GET with Accept-Encoding: gzip must come back gzip-coded and decode
    to the file; the load then checks every answer's length against that one's."""
    def ready(server):
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            connection.request("GET", path, headers={"Accept-Encoding": "gzip"})
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        if response.status != 200 or response.getheader("Content-Encoding") != "gzip" or \
                gzip.decompress(data) != original:
            raise RuntimeError(f"{server.spec.name} did not answer {path} gzip-coded "
                               f"({response.status}, {len(data)} bytes)")
        server.load_extra = ["--body-length", str(len(data))]
    return ready


def specs(ctx, path):
    with open(os.path.join(ctx.root, path.lstrip("/")), "rb") as source:
        ready = gzip_checked(path, source.read())
    found = [
        Spec("sxe-httpd --gzip 5", peers.sxe_httpd(ctx, extra=("--gzip", "5")).command,
             ready=ready),
        Spec("nginx gzip on", peers.nginx(ctx, gzip=NGINX_GZIP).command, ready=ready,
             packages=("nginx-light",)),
        Spec("h2o compress", peers.h2o(ctx, compress=H2O_GZIP).command, ready=ready,
             packages=("h2o",)),
    ]
    keep = ctx.args.servers
    return [s for s in found if not keep or any(k in s.name for k in keep)]


def scenarios(ctx):
    make_files(ctx)
    load = dict(body=None, check=False, extra=["-H", "Accept-Encoding: gzip"])
    return [grid.Scenario("gzip-64k", "64 KB HTML page, 100 connections",
                          specs(ctx, "/compress/page.html"), path="/compress/page.html", **load),
            grid.Scenario("gzip-1m", "1 MB script, 20 connections",
                          specs(ctx, "/compress/bundle.js"), path="/compress/bundle.js",
                          connections=20, **load)]


def estimate(ctx):
    return 10 + 6 * ctx.args.rounds * (ctx.args.seconds + ctx.args.warmup + 1.5)


def run(ctx, say):
    found = scenarios(ctx)
    cells = grid.run(ctx, say, KEY, found, ctx.args.rounds)
    section = Section(KEY, TITLE, (
        "Each server on CPU 0, `sxe-http -H 'Accept-Encoding: gzip'` on CPU 1, every answer's "
        "status and coded length checked (one decoded before the load). The files are sxe's own "
        "sources and docs, cut to size (they compress about 3.5:1). sxe-httpd codes a file of up "
        "to 64 KiB once and keeps the copy in its cache until the file changes; larger files it "
        "codes as they go out, as nginx and h2o do for every answer (neither keeps a coded copy: "
        "nginx's way to avoid the work is `gzip_static` with files compressed ahead of time, "
        "sxe-httpd's `--precompressed`). The ratio is nginx's CPU per request over the row's."))
    rows = grid.comparison_rows(cells, found, lambda s: "nginx gzip on",
                                [("rate", 0), ("cpu_us", 2), ("p99", 2), ("rss_mb", 1)])
    section.add_table("", ["file", "server", "requests/s", "server CPU µs/request", "p99 ms",
                           "peak RSS MB", "nginx CPU ÷ this"], rows)
    section.target("compress", "gzip of a 64 KB HTML page: ≤ 1.0x nginx's CPU per request",
                   cells.ratio(("gzip-64k", "sxe-httpd --gzip 5"), ("gzip-64k", "nginx gzip on")),
                   1.0)
    section.target("compress", "gzip of a 1 MB script, coded per request: ≤ 1.0x nginx's CPU "
                   "per request", cells.ratio(("gzip-1m", "sxe-httpd --gzip 5"),
                                              ("gzip-1m", "nginx gzip on")), 1.0)
    section.cells = cells
    return section
