"""The Redis client: sxe's (bench/redis) against hiredis's async client on libuv
(bench/peers/hiredis-uv.c) and redis-benchmark, each alone on CPU 1 against one redis-server on
CPU 0: SET and GET of 3 bytes in turn, 16 in flight and one at a time; commands a second, and the
client's CPU per command (what the client costs: the server is the same for all). Then the chat
across two processes (examples/ws-chat --redis) against the same room in one process: a line's
delivery latency to 400 and 1,000 guests at 100 lines a second (bench/chat-latency)."""
import csv
import io
import json
import os
import resource
import socket
import subprocess
import time

from harness import procs
from harness.figures import Sample, ratios
from harness.report import Section

KEY = "redis"
TITLE = "Redis: sxe's client against hiredis's and redis-benchmark"
PACKAGES = ("redis-server", "libhiredis-dev", "libuv1-dev")
ROWS = ("GET/SET, 16 in flight", "CPU per command, 16 in flight", "GET/SET, one at a time",
        "CPU per command, one at a time")
PAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "examples", "ws-chat.html")
GUESTS, LINES_PER_SECOND, CHAT_SECONDS = (400, 1000), 100, 5
ROOMS = ("two processes", "one process")


def estimate(ctx):
    return ctx.args.rounds * (8 if ctx.args.quick else 55)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_pid(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"INFO server\r\n")
            text = sock.recv(65536).decode(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("process_id:"):
            return int(line.split(":")[1])
    return None


def start_server():
    port = free_port()
    server = procs.start(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--loglevel", "warning"], "0")
    deadline = time.monotonic() + 10
    while server_pid(port) != server.pid:  # taskset execs redis-server: the same process
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("redis-server did not start")
        time.sleep(0.05)
    return server, port





def client_run(command):
    process = procs.start(command, "1", capture="stdout")
    output, _ = process.communicate(timeout=600)
    procs.LIVE.discard(process)
    if process.returncode != 0:
        return None, None
    report = json.loads(output)
    return report["params"]["client"], {row["name"]: row["rounds"][0] for row in report["rows"]}


def redis_benchmark(port, count, pipeline):
    """redis-benchmark's SET and GET, count each, one connection: its rate (the mean of the two)
    and its CPU per command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-c", "1",
                             "-n", str(count), "-P", str(pipeline), "-d", "3", "-t", "set,get",
                             "--csv"], capture_output=True, text=True, timeout=600, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        return None, None
    rates = [float(row[1]) for row in csv.reader(io.StringIO(result.stdout))
             if row and row[0] in ("SET", "GET")]
    if len(rates) != 2:
        return None, None
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e6
    return sum(rates) / 2, cpu / (2 * count)


def chat_at(ctx, host, redis_port=None):
    """A ws-chat on host (with --redis when redis_port), on CPU 0: its process and address."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    store = ["--redis", f"127.0.0.1:{redis_port}"] if redis_port else []
    process = procs.start([ctx.program("examples/ws-chat"), *store, f"{host}:{port}", PAGE], "0")
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return process, f"{host}:{port}"
        except ConnectionRefusedError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ws-chat on {host} did not start")
            time.sleep(0.05)


def chat_latency(ctx, redis_port, seconds, guests):
    """One run of bench/chat-latency for each room: {room: (p50, p99) to the other's guests}."""
    figures = {}
    for room in ROOMS:
        chats = ([chat_at(ctx, "127.0.0.1", redis_port), chat_at(ctx, "127.0.0.2", redis_port)]
                 if room == "two processes" else [chat_at(ctx, "127.0.0.3")] * 2)
        try:
            process = procs.start([ctx.program("bench/chat-latency"), "--json", chats[0][1],
                                   chats[1][1], str(guests), str(LINES_PER_SECOND), str(seconds)],
                                  "1", capture="stdout")
            output, _ = process.communicate(timeout=120)
            procs.LIVE.discard(process)
            rows = {row["name"]: row["rounds"][0] for row in json.loads(output)["rows"]} \
                if process.returncode == 0 else {}
            figures[room] = (rows.get("p50, to the other's guests"),
                             rows.get("p99, to the other's guests"))
        finally:
            for chat, _ in {id(c[0]): c for c in chats}.values():
                procs.stop(chat)
    return figures


def run(ctx, say):
    section = Section(KEY, TITLE, (
        "One redis-server (Debian's, no persistence) on CPU 0; each round runs `bench/redis "
        "--json`, hiredis's `hiredis-uv --json` and `redis-benchmark -c 1 -d 3 -t set,get` (with "
        "-P 16, then -P 1) on CPU 1 one after the other, the first two in alternating order. A "
        "client keeps 16 commands in flight (each reply sends the next), then one; every reply "
        "is checked. CPU per command is the client process's user and system time over its "
        "commands; commands a second per client core is its inverse."))
    count = 100000 if ctx.args.quick else 1000000
    programs = {"sxe": [ctx.program("bench/redis"), "--json"],
                "hiredis": [os.path.join(ctx.tmp, "hiredis-uv"), "--json"]}
    if not os.path.exists(programs["hiredis"][0]):
        section.add("**hiredis-uv** was not built (no libhiredis-dev or libuv): nothing to compare.")
        return section
    server, port = start_server()
    samples = {(client, row): Sample() for client in (*programs, "redis-benchmark")
               for row in ROWS}
    names = {"redis-benchmark": "redis-benchmark"}
    chat = {(room, guests, p): Sample() for room in ROOMS for guests in GUESTS
            for p in ("p50", "p99")}
    try:
        for r in range(ctx.args.rounds):
            order = list(programs) if r % 2 == 0 else list(reversed(programs))
            for client in order:
                say(f"{KEY}: round {r + 1} of {ctx.args.rounds}: {client}")
                name, values = client_run(programs[client] + [str(port), str(count)])
                names[client] = name or names.get(client, client)
                for row in ROWS:
                    samples[(client, row)].add(None if values is None else values.get(row))
            say(f"{KEY}: round {r + 1} of {ctx.args.rounds}: the chat, two processes and one")
            for guests in GUESTS:
                for room, (p50, p99) in chat_latency(ctx, port, 3 if ctx.args.quick
                                                     else CHAT_SECONDS, guests).items():
                    chat[(room, guests, "p50")].add(p50)
                    chat[(room, guests, "p99")].add(p99)
            say(f"{KEY}: round {r + 1} of {ctx.args.rounds}: redis-benchmark")
            for pipeline, rows in ((16, ROWS[:2]), (1, ROWS[2:])):
                rate, cpu = redis_benchmark(port, count // 2 if pipeline > 1 else count // 20,
                                            pipeline)
                samples[("redis-benchmark", rows[0])].add(rate)
                samples[("redis-benchmark", rows[1])].add(cpu)
    finally:
        procs.stop(server)
    clients = [*programs, "redis-benchmark"]
    rows = [[row] + [samples[(client, row)].show(0 if row.startswith("GET") else 2)
                     for client in clients] for row in ROWS]
    section.add_table("commands a second; µs of the client's CPU per command:",
                      ["figure"] + [names[client] for client in clients], rows)
    for flight in ("16 in flight", "one at a time"):
        cpu = f"CPU per command, {flight}"
        per_core = ratios(samples[("hiredis", cpu)], samples[("sxe", cpu)])
        section.target("redis", f"commands a second per client core, {flight}, ≥ 1.0x hiredis's",
                       per_core, 1.0, better="higher")
        section.target("redis", f"CPU per command, {flight}, ≤ 1.0x hiredis's",
                       ratios(samples[("sxe", cpu)], samples[("hiredis", cpu)]), 1.0)
    section.add_table(f"A chat line's delivery latency to the other process's guests (half of "
                      f"them on each), {LINES_PER_SECOND} lines a second, µs; examples/ws-chat on "
                      "CPU 0 (both processes, and redis-server), the guests on CPU 1:",
                      ["room", "guests", "p50", "p99"],
                      [[room, f"{guests:,}", chat[(room, guests, "p50")].show(0),
                        chat[(room, guests, "p99")].show(0)] for guests in GUESTS for room in ROOMS])
    for guests in GUESTS:
        section.target("redis", f"a chat line's p99 across two processes, {guests:,} guests, "
                       "≤ 5 ms", Sample(None if v is None else v / 1000
                                        for v in chat[("two processes", guests, "p99")].values),
                       5.0, unit=" ms")
        section.target("redis", f"the same in one process, {guests:,} guests, ≤ 5 ms",
                       Sample(None if v is None else v / 1000
                              for v in chat[("one process", guests, "p99")].values),
                       5.0, unit=" ms")
    return section
