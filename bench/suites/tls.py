"""HTTPS on one core: sxe-httpd against nginx and h2o terminating TLS with the same OpenSSL and an
ECDSA P-256 certificate, keep-alive files of 12 B and 4 KB, and the proxy over TLS in front of an
upstream reached over plain HTTP and over HTTPS. Handshakes and memory per idle TLS connection
are bench/tls.py's (a connection per request, and 10,000 held)."""
import os
import shutil
import subprocess

from harness import grid, procs
from harness.report import Section
from harness.servers import Spec

KEY = "tls"
TITLE = "HTTPS against nginx and h2o"
PACKAGES = ("nginx-light", "h2o")
CLIENTS = 100


def certificate(ctx):
    """The run's certificate for localhost and 127.0.0.1, and its key (made once)."""
    cert, key = os.path.join(ctx.tmp, "tls-cert.pem"), os.path.join(ctx.tmp, "tls-key.pem")
    if not os.path.exists(cert):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "2", "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       check=True, capture_output=True)
        os.chmod(key, 0o644)  # h2o reads it after switching to nobody when run as root
        os.makedirs(os.path.join(ctx.root, "up"), exist_ok=True)  # what the upstreams serve
        shutil.copy(os.path.join(ctx.root, "f12.txt"), os.path.join(ctx.root, "up", "f12.txt"))
    return cert, key


class Upstream:
    """sxe-httpd on CPU 1 (beside the load) for the whole suite, serving the root over plain
    HTTP or over TLS: the proxies' upstream, the same for every proxy."""

    def __init__(self, ctx, tls):
        cert, key = certificate(ctx)
        self.port = procs.free_port()
        self.process = procs.start([ctx.program("tools/sxe-httpd"), "--root", ctx.root,
                                    "--listen", f"127.0.0.1:{self.port}", "--workers", "1",
                                    *(["--tls-cert", cert, "--tls-key", key] if tls else [])],
                                   "1")
        procs.wait_for_port(self.port, self.process.pid)

    def stop(self):
        procs.stop(self.process)


def sxe(ctx, *extra):
    cert, key = certificate(ctx)
    return lambda p: [ctx.program("tools/sxe-httpd"), "--root", ctx.root, "--listen",
                      f"127.0.0.1:{p}", "--workers", "1", "--tls-cert", cert, "--tls-key", key,
                      *extra]


def nginx(ctx, upstream=0, scheme="http"):
    cert, key = certificate(ctx)
    return Spec("nginx", lambda p: ["nginx", "-p", ctx.tmp, "-c", ctx.config(
        "nginx-tls.conf", p, cert=cert, key=key, upstream=upstream or 9, scheme=scheme,
        keepalive=CLIENTS)], packages=("nginx-light",))


def scenarios(ctx, plain_up, tls_up):
    cert, key = certificate(ctx)
    h2o = Spec("h2o", lambda p: ["h2o", "-c", ctx.config("h2o-tls.conf", p, cert=cert, key=key)],
               packages=("h2o",))
    # The OpenSSL floor: the same files answered from memory by OpenSSL's reads and writes on the
    # socket and nothing else, what the least a server can spend is (bench/tls-floor.c).
    floor = Spec("tls floor", lambda p: [ctx.program("bench/tls-floor"), str(p), cert, key,
                                         ctx.root])
    files = [Spec("sxe-httpd", sxe(ctx)), nginx(ctx), h2o, floor]
    to_plain = [Spec("sxe-httpd", sxe(ctx, "--proxy", f"/up/=127.0.0.1:{plain_up}")),
                nginx(ctx, plain_up)]
    to_tls = [Spec("sxe-httpd", sxe(ctx, "--proxy", f"/up/=https://127.0.0.1:{tls_up}",
                                    "--proxy-ca", cert)),
              nginx(ctx, tls_up, "https")]
    keep = ctx.args.servers
    found = [
        grid.Scenario("tls-12", "a 12 B file over HTTPS, 100 connections", files, tls=True),
        grid.Scenario("tls-4k", "a 4 KB file over HTTPS, 100 connections", files,
                      path="/f4k.bin", body="f4k.bin", tls=True),
        grid.Scenario("tls-proxy", "HTTPS through the proxy to a plain upstream", to_plain,
                      path="/up/f12.txt", tls=True),
        grid.Scenario("tls-proxy-tls", "HTTPS through the proxy to an HTTPS upstream", to_tls,
                      path="/up/f12.txt", tls=True),
    ]
    for scenario in found:
        scenario.specs = [s for s in scenario.specs if not keep or any(k in s.name for k in keep)]
    return [s for s in found if s.specs]


def estimate(ctx):
    cells = sum(len(s.specs) for s in scenarios(ctx, 0, 0))
    return cells * ctx.args.rounds * (ctx.args.seconds + ctx.args.warmup + 2)


def run(ctx, say):
    upstreams = [Upstream(ctx, tls=False), Upstream(ctx, tls=True)]
    try:
        found = scenarios(ctx, upstreams[0].port, upstreams[1].port)
        cells = grid.run(ctx, say, KEY, found, ctx.args.rounds)
    finally:
        for upstream in upstreams:
            upstream.stop()
    section = Section(KEY, TITLE, (
        "Each server on CPU 0 with one worker, the load (`sxe-http --tls`, every answer's status "
        "and length checked) on CPU 1, TLS 1.3 with X25519 and an ECDSA P-256 certificate, "
        "keep-alive. The TLS floor (bench/tls-floor.c) answers the same files from memory with "
        "OpenSSL's reads and writes on the socket and nothing else. nginx: bench/peers/nginx-tls.conf (sendfile, open_file_cache, a shared "
        "session cache; for the proxy, upstream keepalive sized to the clients and the upstream's "
        "certificate checked, as sxe-httpd checks it); h2o: bench/peers/h2o-tls.conf. The "
        "proxies' upstream is sxe-httpd on CPU 1 beside the load, over plain HTTP or HTTPS. The "
        "last column is sxe-httpd's CPU per request over the row's, round by round."))
    rows = grid.comparison_rows(cells, found, lambda s: "sxe-httpd",
                                [("rate", 0), ("cpu_us", 2), ("p99", 2), ("rss_mb", 1)])
    section.add_table("", ["case", "server", "requests/s", "server CPU µs/request", "p99 ms",
                           "peak RSS MB", "CPU: sxe-httpd ÷ this"], rows)
    for key, what in (("tls-12", "12 B"), ("tls-4k", "4 KB")):
        for peer, limit in (("nginx", 0.85), ("h2o", 0.9)):
            section.target("tls", f"HTTPS {what}, CPU/request ≤ {limit}x {peer}'s",
                           cells.ratio((key, "sxe-httpd"), (key, peer)), limit)
    for key, what in (("tls-proxy", "a plain"), ("tls-proxy-tls", "an HTTPS")):
        section.target("tls", f"HTTPS through the proxy to {what} upstream, CPU/request ≤ 0.8x "
                       "nginx's", cells.ratio((key, "sxe-httpd"), (key, "nginx")), 0.8)
    section.cells = cells
    return section
