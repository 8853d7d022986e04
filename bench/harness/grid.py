"""Cells of servers by scenarios, over interleaved rounds: in each round every scenario's servers
take turns in an order rotated by the round, each started afresh for its cell. A cell keeps every
round's figures; a round with any error is kept as a failure, with what went wrong."""
import os
import selectors
import socket
import time

from .figures import Sample, ratios
from .servers import Running


class Scenario:
    """A load: connections, the path asked (or a function of the server's Spec giving it) and
    the file its answers must equal, pipelining depth, or mode "idle" (connections held open
    after one request each, for memory)."""

    def __init__(self, key, title, specs, connections=100, path="/f12.txt", body="f12.txt",
                 pipeline=1, mode="keep-alive", paths=None, rate=None, extra=(), check=True,
                 tls=False):
        self.key, self.title, self.specs, self.connections = key, title, specs, connections
        self.path, self.body, self.pipeline, self.mode = path, body, pipeline, mode
        self.paths = paths
        self.rate = rate  # requests/s on a fixed schedule (a function of the server's name)
        self.extra = list(extra)  # more of sxe-http's options (-f FILE, -e STATUS, --http1.0)
        self.check = check  # whether a GET of path before the load must answer the body
        self.tls = tls  # over TLS: the check, and the load (sxe-http --tls)
        if tls:
            self.extra.append("--tls")

    def path_of(self, spec):
        return self.path(spec) if callable(self.path) else self.path


class Cells:
    """Figures by (scenario key, server name): a Sample per figure, and failures' reasons."""

    def __init__(self):
        self.samples = {}
        self.failures = {}

    def add(self, key, name, figures, failure=None):
        cell = self.samples.setdefault((key, name), {})
        for figure, value in figures.items():
            cell.setdefault(figure, Sample()).add(value)
        if failure:
            self.failures.setdefault((key, name), []).append(failure)

    def get(self, key, name, figure):
        return self.samples.get((key, name), {}).get(figure, Sample())

    def figure(self, key, name, figure):
        """A cell's figure over rounds for a target: None if the cell was not in this run, a
        failure if any round failed."""
        if (key, name) in self.failures:
            return Sample([None])
        return self.samples[(key, name)][figure] if (key, name) in self.samples else None

    def ratio(self, a, b, figure="cpu_us"):
        """Round by round, cell a's figure over cell b's ((scenario key, server name) each); a
        failed cell fails the ratio."""
        if a not in self.samples and a not in self.failures or \
                b not in self.samples and b not in self.failures:
            return None  # not in this run
        if a in self.failures or b in self.failures:
            return Sample([None])
        return ratios(self.get(*a, figure), self.get(*b, figure))

    def show(self, key, name, figure, digits=2, unit=""):
        if (key, name) in self.failures:
            return "FAILED: " + "; ".join(self.failures[(key, name)])[:200]
        return self.get(key, name, figure).show(digits, unit)


def comparison_rows(cells, scenarios, reference, figures):
    """A row per scenario and server: the scenario's title, the server, each of figures ((name,
    digits) pairs) shown, and reference(scenario)'s CPU per request over the row's server's,
    round by round ("–" on the reference's own row)."""
    rows = []
    for scenario in scenarios:
        base = reference(scenario)
        for spec in scenario.specs:
            ratio = cells.ratio((scenario.key, base), (scenario.key, spec.name)) \
                if base and spec.name != base else None
            rows.append([scenario.title, spec.name] +
                        [cells.show(scenario.key, spec.name, f, d) for f, d in figures] +
                        [ratio.show(2, "x") if ratio else "–"])
    return rows


def body_of(ctx, scenario, spec):
    """The file every answer's body must equal, or None (no body check)."""
    path = os.path.join(ctx.root, scenario.body) if scenario.body else None
    if spec.body is not None:
        path = os.path.join(ctx.tmp, f"body-{abs(hash(spec.body))}")
        with open(path, "wb") as out:
            out.write(spec.body)
    return path


def measure(ctx, spec, scenario):
    """One cell's round: (figures, failure or None)."""
    body_file = body_of(ctx, scenario, spec)
    with Running(spec) as server:
        expected = open(body_file, "rb").read() if body_file else None
        path = scenario.path_of(spec)
        if scenario.check:
            server.check(path, expected, tls=scenario.tls)
        if scenario.mode == "idle":
            return hold_idle(server, scenario, path, expected)
        window = server.load(ctx.build, connections=scenario.connections,
                             seconds=ctx.args.seconds, warmup=ctx.args.warmup,
                             path=path, pipeline=scenario.pipeline, body_file=body_file,
                             targets=scenario.paths,
                             rate=scenario.rate(spec.name) if scenario.rate else None,
                             extra=scenario.extra + server.load_extra)
        figures = {"rate": window.rate, "cpu_us": window.server_us(),
                   "p50": window.latency("p50"), "p99": window.latency("p99"),
                   "p999": window.latency("p99.9"),
                   "rss_mb": server.memory_kb("VmHWM") / 1024, "load_us": window.load_us()}
    if window.errors:
        return {k: None for k in figures}, f"{window.errors} errors ({window.describe_errors()})"
    return figures, None


def hold_idle(server, scenario, path, expected):
    """Opens the scenario's connections, one request and its answer on each, and holds them: the
    server's resident memory before and with them."""
    base = server.memory_kb("VmRSS")
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    selector = selectors.DefaultSelector()
    sockets, replies, errors, opened = [], {}, 0, 0
    try:
        while opened < scenario.connections or selector.get_map():
            while opened < scenario.connections and len(selector.get_map()) < 500:
                conn = socket.socket()
                conn.setblocking(False)
                conn.connect_ex(("127.0.0.1", server.port))
                selector.register(conn, selectors.EVENT_WRITE)
                sockets.append(conn)
                opened += 1
            events = selector.select(timeout=10)
            if not events:
                errors += len(selector.get_map())
                break
            for key, mask in events:
                conn = key.fileobj
                try:
                    if mask & selectors.EVENT_WRITE:
                        conn.send(request)
                        selector.modify(conn, selectors.EVENT_READ)
                        replies[conn] = b""
                        continue
                    data = conn.recv(65536)
                    replies[conn] += data
                    if not data or replies[conn].endswith(b"\r\n\r\n" + expected):
                        if not data or not replies[conn].startswith(b"HTTP/1.1 200"):
                            errors += 1
                        selector.unregister(conn)
                except OSError:
                    errors += 1
                    selector.unregister(conn)
        time.sleep(0.5)
        held = server.memory_kb("VmRSS")
    finally:
        for conn in sockets:
            conn.close()
    figures = {"base_mb": base / 1024, "idle_mb": held / 1024,
               "per_conn_kb": (held - base) / scenario.connections}
    if errors:
        return {k: None for k in figures}, f"{errors} of {scenario.connections} connections failed"
    return figures, None


def run(ctx, say, label, scenarios, rounds):
    """Every scenario's cells over rounds; say() gets a line per cell."""
    cells = Cells()
    total = rounds * sum(len(s.specs) for s in scenarios)
    done = 0
    for round_number in range(rounds):
        for scenario in scenarios:
            turn = round_number % len(scenario.specs)
            for spec in scenario.specs[turn:] + scenario.specs[:turn]:
                done += 1
                try:
                    figures, failure = measure(ctx, spec, scenario)
                except (RuntimeError, OSError) as error:
                    figures, failure = {}, str(error)
                cells.add(scenario.key, spec.name, figures, failure)
                shown = failure or ", ".join(f"{k} {v:,.2f}" for k, v in figures.items())
                say(f"{label} round {round_number + 1}/{rounds}, cell {done}/{total}: "
                    f"{scenario.key} {spec.name}: {shown}")
    return cells
