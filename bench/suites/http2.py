"""HTTP/2 on one core: sxe-httpd against h2o and nginx, loaded by h2load (the same client for all),
over TLS (h2 chosen by ALPN, the same OpenSSL and ECDSA P-256 certificate) and in cleartext with
prior knowledge (h2c), files of 12 B and 4 KB, 10 connections of 100 streams each; and the memory an
idle HTTP/2 connection holds."""
import socket
import ssl
import time

import h2.config
import h2.connection
import h2.events

from harness.grid import Cells
from harness.h2load import h2load
from harness.report import Section
from harness.servers import Running, Spec
from suites.tls import certificate

KEY = "http2"
TITLE = "HTTP/2 against h2o and nginx"
PACKAGES = ("nginx-light", "h2o", "nghttp2-client", "python3-h2")
CONNECTIONS, STREAMS, IDLE = 10, 100, 1000
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def specs(ctx, tls):
    cert, key = certificate(ctx)
    sxe = [ctx.program("tools/sxe-httpd"), "--root", ctx.root, "--workers", "1"]
    sxe_tls = ["--tls-cert", cert, "--tls-key", key] if tls else []
    h2o = ("h2o-tls.conf", {"cert": cert, "key": key}) if tls else \
        ("h2o.conf", {"threads": 1, "log": ""})
    return [
        Spec("sxe-httpd", lambda p: [*sxe, "--listen", f"127.0.0.1:{p}", *sxe_tls]),
        Spec("h2o", lambda p: ["h2o", "-c", ctx.config(h2o[0], p, **h2o[1])], packages=("h2o",)),
        Spec("nginx", lambda p: ["nginx", "-p", ctx.tmp, "-c", ctx.config(
            "nginx-h2.conf", p, tls="ssl" if tls else "", cert=cert, key=key)],
             packages=("nginx-light",)),
    ]


def answer(port, path, tls):
    """One request over HTTP/2 on a connection of its own: (status, body). Over TLS, ALPN must
    choose h2."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    if tls:
        context = ssl._create_unverified_context()
        context.set_alpn_protocols(["h2"])
        sock = context.wrap_socket(sock, server_hostname="localhost")
        if sock.selected_alpn_protocol() != "h2":
            raise RuntimeError(f"ALPN chose {sock.selected_alpn_protocol()}, not h2")
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.send_headers(1, [(":method", "GET"), (":path", path), (":scheme", "https" if tls else
                                                                  "http"),
                          (":authority", "localhost")], end_stream=True)
    sock.sendall(conn.data_to_send())
    status, body, ended = None, b"", False
    with sock:
        while not ended:
            data = sock.recv(65536)
            if not data:
                raise RuntimeError("the connection closed before the answer ended")
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived):
                    status = int(dict(event.headers)[b":status"])
                elif isinstance(event, h2.events.DataReceived):
                    body += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, 1)
                elif isinstance(event, h2.events.StreamEnded):
                    ended = True
            sock.sendall(conn.data_to_send())
    return status, body


def measure(ctx, spec, case):
    tls, path, name = case["tls"], case["path"], case["file"]
    expected = open(f"{ctx.root}/{name}", "rb").read()
    with Running(spec) as server:
        status, body = answer(server.port, path, tls)
        if (status, body) != (200, expected):
            return {}, f"answered {status} with {len(body)} bytes, not 200 with {len(expected)}"
        url = f"{'https' if tls else 'http'}://127.0.0.1:{server.port}{path}"
        window = h2load(url, server.pids, connections=CONNECTIONS, streams=STREAMS,
                        seconds=ctx.args.seconds, warmup=ctx.args.warmup)
        wrong = window.errors(len(expected))
        figures = {"rate": window.rate, "cpu_us": window.server_us(),
                   "mean_ms": window.mean_ms or 0.0,
                   "rss_mb": server.memory_kb("VmHWM") / 1024}
    return ({}, wrong) if wrong else (figures, None)


def hello(ctx, spec, case):
    """The HTTP module's Hello World (examples/http-hello), over h2c with h2load (16 streams on
    each of 10 connections), or over HTTP/1.1 pipelined 16 deep with sxe-http: what HTTP/2's
    framing costs the same handler."""
    with Running(spec) as server:
        if case["loader"] == "h2load":
            status, body = answer(server.port, "/", False)
            if (status, body) != (200, b"Hello World\n"):
                return {}, f"answered {status} with {len(body)} bytes"
            window = h2load(f"http://127.0.0.1:{server.port}/", server.pids,
                            connections=CONNECTIONS, streams=16, seconds=ctx.args.seconds,
                            warmup=ctx.args.warmup)
            wrong = window.errors(12)
        else:
            server.check("/", b"Hello World\n")
            window = server.load(ctx.build, connections=CONNECTIONS, seconds=ctx.args.seconds,
                                 warmup=ctx.args.warmup, path="/", pipeline=16)
            wrong = window.describe_errors() if window.errors else ""
        figures = {"rate": window.rate, "cpu_us": window.server_us()}
    return ({}, wrong) if wrong else (figures, None)


def idle(ctx, spec, case):
    """IDLE connections, each past its preface and SETTINGS: the server's RSS before and with
    them, per connection."""
    del case
    with Running(spec) as server:
        base = server.memory_kb("VmRSS")
        sockets = []
        try:
            for _ in range(IDLE):
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                sock.sendall(PREFACE)
                sockets.append(sock)
            for sock in sockets:
                if not sock.recv(65536):  # its SETTINGS: the connection is the server's now
                    return {}, "a connection closed before the server's SETTINGS"
            time.sleep(0.5)
            held = server.memory_kb("VmRSS")
        finally:
            for sock in sockets:
                sock.close()
    return {"per_conn_kb": (held - base) / IDLE}, None


CASES = [
    {"key": "h2-12", "title": "a 12 B file over h2 (TLS)", "tls": True, "path": "/f12.txt",
     "file": "f12.txt"},
    {"key": "h2-4k", "title": "a 4 KB file over h2 (TLS)", "tls": True, "path": "/f4k.bin",
     "file": "f4k.bin"},
    {"key": "h2c-12", "title": "a 12 B file over h2c", "tls": False, "path": "/f12.txt",
     "file": "f12.txt"},
    {"key": "h2c-4k", "title": "a 4 KB file over h2c", "tls": False, "path": "/f4k.bin",
     "file": "f4k.bin"},
    {"key": "h2c-idle", "title": f"{IDLE:,} idle h2c connections", "tls": False, "idle": True},
    {"key": "hello-h2c", "title": "http-hello over h2c, 16 streams a connection", "tls": False,
     "hello": True, "loader": "h2load"},
    {"key": "hello-h1", "title": "http-hello over HTTP/1.1, pipelined 16 deep", "tls": False,
     "hello": True, "loader": "sxe-http"},
]



def chosen(ctx, case):
    keep = ctx.args.servers
    if case.get("hello"):
        found = [Spec("http-hello", lambda p: [ctx.program("examples/http-hello"),
                                               f"127.0.0.1:{p}"])]
    else:
        found = specs(ctx, case["tls"])
    return [s for s in found if not keep or any(k in s.name for k in keep)]


def estimate(ctx):
    cells = sum(len(chosen(ctx, case)) for case in CASES)
    return cells * ctx.args.rounds * (ctx.args.seconds + ctx.args.warmup + 2)


def ratio_shown(cells, key, name):
    ratio = cells.ratio((key, "sxe-httpd"), (key, name)) if name != "sxe-httpd" else None
    return ratio.show(2, "x") if ratio else "–"


def run(ctx, say):
    cells = Cells()
    total = ctx.args.rounds * sum(len(chosen(ctx, case)) for case in CASES)
    done = 0
    for round_number in range(ctx.args.rounds):
        for case in CASES:
            servers = chosen(ctx, case)
            turn = round_number % max(len(servers), 1)
            for spec in servers[turn:] + servers[:turn]:  # interleaved: each goes first in turn
                done += 1
                try:
                    how = idle if case.get("idle") else hello if case.get("hello") else measure
                    figures, failure = how(ctx, spec, case)
                except (RuntimeError, OSError) as error:
                    figures, failure = {}, str(error)
                cells.add(case["key"], spec.name, figures, failure)
                shown = failure or ", ".join(f"{k} {v:,.2f}" for k, v in figures.items())
                say(f"{KEY} round {round_number + 1}/{ctx.args.rounds}, cell {done}/{total}: "
                    f"{case['key']} {spec.name}: {shown}")
    section = Section(KEY, TITLE, (
        f"Each server on CPU 0 with one worker, h2load on CPU 1 ({CONNECTIONS} connections of "
        f"{STREAMS} concurrent streams, one thread; no failure, every status 2xx, and one answer's "
        "bytes checked before the load), files from the page cache. Over TLS: TLS 1.3, X25519 and "
        "an ECDSA P-256 certificate, h2 chosen by ALPN; h2c: prior knowledge. nginx: "
        "bench/peers/nginx-h2.conf (http2 on its listener, sendfile, open_file_cache); h2o: "
        "bench/peers/h2o-tls.conf and h2o.conf (HTTP/2 is its default). Idle: connections past "
        "their preface and SETTINGS, the server's RSS with them less without, per connection. "
        "The last column is sxe-httpd's CPU per request over the row's, round by round."))
    rows = []
    for case in CASES:
        if case.get("idle") or case.get("hello"):
            continue
        for spec in chosen(ctx, case):
            rows.append([case["title"], spec.name, cells.show(case["key"], spec.name, "rate", 0),
                         cells.show(case["key"], spec.name, "cpu_us", 2),
                         cells.show(case["key"], spec.name, "mean_ms", 2),
                         cells.show(case["key"], spec.name, "rss_mb", 1),
                         ratio_shown(cells, case["key"], spec.name)])
    section.add_table("", ["case", "server", "requests/s", "server CPU µs/request",
                           "mean latency ms", "peak RSS MB", "CPU: sxe-httpd ÷ this"], rows)
    idle_case = next(case for case in CASES if case.get("idle"))
    idle_rows = [[spec.name, cells.show("h2c-idle", spec.name, "per_conn_kb", 1)]
                 for spec in chosen(ctx, idle_case)]
    section.add_table(f"Memory per idle HTTP/2 connection ({IDLE:,} held)",
                      ["server", "KB per connection"], idle_rows)
    hello_rows = [[case["title"], cells.show(case["key"], "http-hello", "rate", 0),
                   cells.show(case["key"], "http-hello", "cpu_us", 2)]
                  for case in CASES if case.get("hello")]
    section.add_table("The HTTP module (examples/http-hello), its framing's own cost",
                      ["case", "requests/s", "server CPU µs/request"], hello_rows)
    section.target("http2", "http-hello over h2c, CPU/request ≤ 1.3x its HTTP/1.1 pipelined",
                   cells.ratio(("hello-h2c", "http-hello"), ("hello-h1", "http-hello")), 1.3)
    for key, what in (("h2-12", "12 B"), ("h2-4k", "4 KB")):
        for peer, limit in (("h2o", 0.8), ("nginx", 0.7)):
            section.target("http2", f"h2 {what}, CPU/request ≤ {limit}x {peer}'s",
                           cells.ratio((key, "sxe-httpd"), (key, peer)), limit)
    for peer in ("h2o", "nginx"):
        section.target("http2", f"memory per idle h2 connection ≤ 0.5x {peer}'s",
                       cells.ratio(("h2c-idle", "sxe-httpd"), ("h2c-idle", peer),
                                   "per_conn_kb"), 0.5)
    section.cells = cells
    return section
