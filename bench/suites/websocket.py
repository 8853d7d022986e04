"""WebSocket: sxe's module (bench/ws-server) against Node.js with the `ws` package, beside a bare
epoll echo floor (bench/ws-floor): 10,000 sockets' memory, echo (sxe-http --ws) and broadcast
(bench/ws-fanout: one message to all, each after all received the one before)."""
import json
import os
import shutil
import subprocess
import time

from harness import grid, procs
from harness.report import Section
from harness.servers import Running, Spec

KEY = "websocket"
TITLE = "WebSocket against Node `ws`"
PACKAGES = ("nodejs",)
WS_VERSION = "8.18.0"
SOCKETS = 10000
BROADCASTS = 20


def node_modules(ctx):
    """A node_modules with ws, installed with npm (pinned) into the build tree if missing."""
    where = os.path.join(os.path.dirname(os.path.abspath(ctx.build)), "bench-node")
    if not os.path.exists(os.path.join(where, "node_modules", "ws", "package.json")):
        if shutil.which("npm") is None:  # some nodejs builds carry their own npm
            procs.install("npm")
        os.makedirs(where, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", f"ws@{WS_VERSION}"],
                       cwd=where, check=True, stdout=subprocess.DEVNULL)
    return os.path.join(where, "node_modules")


def specs(ctx):
    found = [
        Spec("epoll floor", lambda p: [ctx.program("bench/ws-floor"), str(p)]),
        Spec("sxe", lambda p: ["env", "SXE_BACKEND=epoll", ctx.program("bench/ws-server"),
                               f"127.0.0.1:{p}"]),
        Spec("sxe io_uring", lambda p: ["env", "SXE_BACKEND=io_uring",
                                        ctx.program("bench/ws-server"), f"127.0.0.1:{p}"]),
        Spec("node ws", lambda p: ["node", os.path.join(ctx.peers, "node-ws.js"), str(p)],
             env={"NODE_PATH": node_modules(ctx)}),
    ]
    keep = ctx.args.servers
    return [s for s in found if not keep or any(k in s.name for k in keep)]


def estimate(ctx):
    return len(specs(ctx)) * ctx.args.rounds * (ctx.args.seconds + ctx.args.warmup + 12)


def measure(ctx, spec):
    fanout = ctx.program("bench/ws-fanout")
    with Running(spec) as server:
        address = f"127.0.0.1:{server.port}"
        time.sleep(0.3)
        rss_before, cpu = server.memory_kb(), server.cpu_ns()
        holder = procs.start([fanout, address, "/", str(SOCKETS), "0", "3"], "1",
                             capture="stdout")
        time.sleep(2.5)  # the sockets are open (and idle) well before the 3 s hold ends
        rss_open = server.memory_kb()
        holder.communicate(timeout=60)
        procs.LIVE.discard(holder)
        per_handshake = (server.cpu_ns() - cpu) / SOCKETS
        if holder.returncode != 0:
            return {}, "the idle sockets did not all open"
        window = server.load(ctx.build, connections=SOCKETS, seconds=ctx.args.seconds,
                             warmup=ctx.args.warmup, path=None, extra=["--ws", "/"])
        cpu = server.cpu_ns()
        fan = procs.start([fanout, address, "/chat", str(SOCKETS), str(BROADCASTS)], "1",
                          capture="stdout")
        output, _ = fan.communicate(timeout=120)
        procs.LIVE.discard(fan)
        broadcast_ns = server.cpu_ns() - cpu - per_handshake * SOCKETS
        peak = server.memory_kb("VmHWM")
    if window.errors or fan.returncode != 0:
        return {}, f"{window.errors} echo errors ({window.describe_errors()}), broadcast " \
                   f"exit {fan.returncode}"
    fanned = json.loads(output)
    return {"idle_b": (rss_open - rss_before) * 1024 / SOCKETS,
            "handshake_us": per_handshake / 1000, "echo_rate": window.rate,
            "echo_cpu": window.server_us(), "echo_p99": window.latency("p99"),
            "broadcast_cpu": broadcast_ns / 1000 / max(fanned["delivered"], 1),
            "broadcast_rate": fanned["delivered"] / max(fanned["seconds"], 1e-9),
            "rss_mb": peak / 1024}, None


def run(ctx, say):
    found = specs(ctx)
    cells = grid.Cells()
    for round_number in range(ctx.args.rounds):
        turn = round_number % len(found)
        for spec in found[turn:] + found[:turn]:
            try:
                figures, failure = measure(ctx, spec)
            except (RuntimeError, OSError, ValueError) as error:
                figures, failure = {}, str(error)
            cells.add(KEY, spec.name, figures, failure)
            say(f"{KEY} round {round_number + 1}/{ctx.args.rounds}: {spec.name}: " +
                (failure or ", ".join(f"{k} {v:,.2f}" for k, v in figures.items())))
    section = Section(KEY, TITLE, (
        f"Each server on CPU 0, the load on CPU 1. Idle: bench/ws-fanout holds {SOCKETS:,} "
        "sockets open; the server's resident memory with them, less before, over the sockets, "
        "is its user-space memory per open socket (the kernel's socket buffers are not in it); "
        "the CPU it took, over the sockets, is a handshake's. Echo: `sxe-http --ws` on "
        f"{SOCKETS:,} sockets, 20-byte binary messages, one in flight on each, every echo "
        f"checked. Broadcast: one socket sends {BROADCASTS} messages of 20 bytes to /chat, each "
        f"after all {SOCKETS:,} received the one before; CPU per delivered message, less the "
        f"handshakes'. Node runs `ws` {WS_VERSION} with compression off (its default for "
        "servers)."))
    rows = []
    for spec in found:
        n = spec.name
        ratio = cells.ratio((KEY, n), (KEY, "node ws"), "echo_cpu") if n != "node ws" else None
        rows.append([n, cells.show(KEY, n, "echo_rate", 0), cells.show(KEY, n, "echo_cpu"),
                     ratio.show(2, "x") if ratio else "–", cells.show(KEY, n, "echo_p99", 1),
                     cells.show(KEY, n, "broadcast_cpu", 3),
                     cells.show(KEY, n, "broadcast_rate", 0), cells.show(KEY, n, "idle_b", 0),
                     cells.show(KEY, n, "handshake_us", 1), cells.show(KEY, n, "rss_mb", 1)])
    section.add_table("", ["server", "echo messages/s", "echo CPU µs/message",
                           "echo CPU: this ÷ node", "echo p99 ms",
                           "broadcast CPU µs/delivered", "delivered/s", "idle bytes/socket",
                           "handshake CPU µs", "peak RSS MB"], rows)
    for name in ("sxe", "sxe io_uring"):
        section.target("WebSocket", f"echo CPU/message ≤ 0.5x Node `ws` ({name})",
                       cells.ratio((KEY, name), (KEY, "node ws"), "echo_cpu"), 0.5,
                       headline=True)
    section.target("WebSocket", "idle memory ≤ 200 bytes of user space per open socket (sxe)",
                   cells.figure(KEY, "sxe", "idle_b"), 200, unit=" B", digits=0, headline=True)
    section.cells = cells
    return section
