"""Reload: the time from SIGHUP to the new configuration serving, for one host and for a hundred
virtual hosts, each with its own root, sxe-httpd beside nginx (a master and one worker, its
server blocks as an operator writes them). Each reload changes a field every answer carries
(X-Generation); a client on CPU 1 asks the last host for its index, a new connection each time,
until the new value comes back. Every answer in between must be a 200 from the old workers or the
new: a refused connection or another status is counted as an error. Then the cost of hosts when
serving: sxe-httpd with none against sxe-httpd with a hundred, the load asking one by name."""
import os
import shutil
import signal
import socket
import time

from harness import grid, peers, procs
from harness.figures import Sample
from harness.report import Section

KEY = "reload"
TITLE = "Reload: from SIGHUP to the new configuration serving"
PACKAGES = ("nginx-light",)
HOSTS = (1, 100)
SERVERS = ("sxe-httpd", "nginx")
RELOADS = 10


def estimate(ctx):
    return ctx.args.rounds * (len(HOSTS) * len(SERVERS) * (RELOADS * 0.3 + 2) +
                              2 * (ctx.args.seconds + ctx.args.warmup + 1.5))


def host_root(ctx, i):
    root = os.path.join(ctx.tmp, "reload-roots", f"h{i}")
    if not os.path.isdir(root):
        os.makedirs(root)
        with open(os.path.join(root, "index.html"), "w") as out:
            out.write(f"host {i}\n")
        shutil.copy(os.path.join(ctx.root, "f12.txt"), root)  # what the serving cells ask
    return root


def serving(ctx):
    """The serving cells: no host, and a hundred (the load names the 58th), the same file."""
    path = os.path.join(ctx.tmp, "serving-hosts.yaml")
    with open(path, "w") as out:
        out.write("hosts:\n" + "".join(f"  h{i}.test, www.h{i}.test:\n    root: "
                                       f"{host_root(ctx, i)}\n" for i in range(100)))
    specs = [peers.sxe_httpd(ctx, name="sxe-httpd, no hosts"),
             peers.sxe_httpd(ctx, extra=("-c", path), name="sxe-httpd, 100 hosts")]
    return grid.Scenario("hosts", "12 B file asked of h57.test, 100 connections", specs,
                         extra=["-H", "Host: h57.test"])


def sxe_config(ctx, port, hosts, generation):
    """sxe-httpd's file: the default host's field goes on every host's answers."""
    lines = [f"root: {ctx.root}", f"listen: 127.0.0.1:{port}", "workers: 1",
             f'header: "/ X-Generation: {generation}"', "hosts:"]
    for i in range(hosts):
        lines += [f"  h{i}.test, www.h{i}.test:", f"    root: {host_root(ctx, i)}"]
    return lines


def nginx_config(ctx, port, hosts, generation):
    """nginx's: add_header in the http block, which servers without one of their own inherit."""
    lines = ["worker_processes 1;", "daemon off;  # in the foreground: stopped by its pid",
             f"pid {ctx.tmp}/nginx-reload-{port}.pid;",
             f"error_log {ctx.tmp}/nginx-reload-error.log error;", "events {}", "http {",
             "    access_log off;", f"    add_header X-Generation {generation};"]
    for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        lines.append(f"    {name}_temp_path {ctx.tmp}/nginx-{name};")
    lines += [f"    server {{ listen 127.0.0.1:{port} default_server; root {ctx.root}; }}"]
    for i in range(hosts):
        lines.append(f"    server {{ listen 127.0.0.1:{port}; server_name h{i}.test www.h{i}.test; "
                     f"root {host_root(ctx, i)}; }}")
    return lines + ["}"]


def write_config(ctx, kind, port, hosts, generation):
    """The configuration of kind for hosts virtual hosts, each with a root of its own, at this
    generation: written whole, then moved into place, so that no reload reads half a file."""
    lines = (sxe_config if kind == "sxe-httpd" else nginx_config)(ctx, port, hosts, generation)
    path = os.path.join(ctx.tmp, f"reload-{kind}-{hosts}.conf")
    with open(path + ".new", "w") as out:
        out.write("\n".join(lines) + "\n")
    os.replace(path + ".new", path)
    return path


def ask(port, host):
    """The X-Generation of one answer, or raises RuntimeError for anything but a 200."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    head = data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    if not head[0].startswith("HTTP/1.1 200 "):
        raise RuntimeError(f"answered {head[0]!r}")
    for line in head[1:]:
        name, _, value = line.partition(": ")
        if name.lower() == "x-generation":
            return int(value)
    raise RuntimeError("no X-Generation")


def one_round(ctx, kind, hosts):
    """The milliseconds of each reload, and the errors seen while waiting for them."""
    port = procs.free_port()
    path = write_config(ctx, kind, port, hosts, 0)
    command = [ctx.program("tools/sxe-httpd"), "-c", path] if kind == "sxe-httpd" else \
        ["nginx", "-p", ctx.tmp, "-c", path]
    server = procs.start(command, "0")
    times, errors = [], 0
    try:
        procs.wait_for_port(port, server.pid)
        last = f"h{hosts - 1}.test"
        if ask(port, last) != 0:
            raise RuntimeError("the first answer is not of generation 0")
        for generation in range(1, RELOADS + 1):
            write_config(ctx, kind, port, hosts, generation)
            time.sleep(0.2)  # the old workers' drain of the reload before is over
            began = time.monotonic()
            os.kill(server.pid, signal.SIGHUP)
            while True:
                try:
                    if ask(port, last) == generation:
                        break
                except (OSError, RuntimeError):
                    errors += 1
                if time.monotonic() - began > 5:
                    raise RuntimeError(f"generation {generation} not served after 5 s")
            times.append((time.monotonic() - began) * 1000)
            if server.poll() is not None:
                raise RuntimeError(f"{kind} exited")
    finally:
        procs.stop(server)
    return times, errors


def run(ctx, say):
    os.sched_setaffinity(0, {1})  # the client: CPU 1, as every load
    cells = {(kind, hosts): {"median": Sample(), "max": Sample(), "errors": Sample()}
             for kind in SERVERS for hosts in HOSTS}
    failures = []
    try:
        for round_number in range(ctx.args.rounds):
            for (kind, hosts), figures in cells.items():
                try:
                    times, errors = one_round(ctx, kind, hosts)
                    values = {"median": sorted(times)[len(times) // 2], "max": max(times),
                              "errors": errors}
                except (RuntimeError, OSError) as error:
                    failures.append(f"{kind}, {hosts} hosts: {error}")
                    values = {}
                for key in ("median", "max", "errors"):
                    figures[key].add(values.get(key))
                say(f"{KEY} round {round_number + 1}/{ctx.args.rounds}: {kind}, {hosts} host(s), "
                    f"{RELOADS} reloads: " + (", ".join(f"{k} {v:,.1f}" for k, v in values.items())
                                              or failures[-1]))
    finally:
        os.sched_setaffinity(0, set(range(os.cpu_count())))
    scenario = serving(ctx)
    served = grid.run(ctx, say, KEY, [scenario], ctx.args.rounds)
    section = Section(KEY, TITLE, (
        f"Each server with one worker process on CPU 0, reloaded {RELOADS} times a round with "
        "SIGHUP (sxe-httpd checks the file with `sxe-httpd -t`, then runs again on the same "
        "sockets; nginx's master reads the file and starts new workers); the time until the "
        "last host answers with the new generation, asked on new connections from CPU 1 (ms; a "
        "round's median and its slowest reload)." +
        (" FAILED: " + "; ".join(failures) if failures else "")))
    rows = [[kind, str(hosts), cells[(kind, hosts)]["median"].show(1),
             cells[(kind, hosts)]["max"].show(1), cells[(kind, hosts)]["errors"].show(0)]
            for kind in SERVERS for hosts in HOSTS]
    section.add_table("", ["server", "virtual hosts", "SIGHUP to serving, ms",
                           "slowest reload, ms", "errors while reloading"], rows)
    section.target("operators", "reload: SIGHUP to the new workers serving ≤ 100 ms for 100 "
                   "hosts", cells[("sxe-httpd", 100)]["median"], 100, unit=" ms", digits=1)
    rows = grid.comparison_rows(served, [scenario], lambda s: "sxe-httpd, no hosts",
                                [("rate", 0), ("cpu_us", 2), ("p99", 2), ("rss_mb", 1)])
    section.add_table("Serving with hosts: `sxe-http -H 'Host: h57.test'` on CPU 1, the server "
                      "on CPU 0, every answer's status and length checked.",
                      ["load", "server", "requests/s", "server CPU µs/request", "p99 ms",
                       "peak RSS MB", "no hosts' CPU ÷ this"], rows)
    section.target("operators", "100 virtual hosts: ≤ 1.05x the CPU per request of none",
                   served.ratio(("hosts", "sxe-httpd, 100 hosts"),
                                ("hosts", "sxe-httpd, no hosts")), 1.05)
    section.cells = served
    return section
