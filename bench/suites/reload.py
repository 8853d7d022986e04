"""Reload: the time from SIGHUP to sxe-httpd's new workers serving, for a configuration of one host
and of a hundred virtual hosts, each with its own root. Each reload changes a field the default
host adds to every answer (X-Generation); a client on CPU 1 asks the last host for its index, a new
connection each time, until the new value comes back. Every answer in between must be a 200 from
the old workers or the new: a refused connection or another status is counted as an error."""
import os
import signal
import socket
import time

from harness import procs
from harness.figures import Sample
from harness.report import Section

KEY = "reload"
TITLE = "Reload: from SIGHUP to the new configuration serving"
PACKAGES = ()
HOSTS = (1, 100)
RELOADS = 10


def estimate(ctx):
    return ctx.args.rounds * len(HOSTS) * (RELOADS * 0.3 + 2)


def write_config(ctx, port, hosts, generation):
    """The file for hosts virtual hosts, each with a root of its own, at this generation."""
    lines = [f"root: {ctx.root}", f"listen: 127.0.0.1:{port}", "workers: 1",
             f'header: "/ X-Generation: {generation}"', "hosts:"]
    for i in range(hosts):
        root = os.path.join(ctx.tmp, "reload-roots", f"h{i}")
        if not os.path.isdir(root):
            os.makedirs(root)
            with open(os.path.join(root, "index.html"), "w") as out:
                out.write(f"host {i}\n")
        lines += [f"  h{i}.test, www.h{i}.test:", f"    root: {root}"]
    path = os.path.join(ctx.tmp, f"reload-{hosts}.yaml")
    with open(path + ".new", "w") as out:
        out.write("\n".join(lines) + "\n")
    os.replace(path + ".new", path)  # a reload's check never reads half a file
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


def one_round(ctx, hosts):
    """The milliseconds of each reload, and the errors seen while waiting for them."""
    port = procs.free_port()
    path = write_config(ctx, port, hosts, 0)
    server = procs.start([ctx.program("tools/sxe-httpd"), "-c", path], "0")
    times, errors = [], 0
    try:
        procs.wait_for_port(port, server.pid)
        last = f"h{hosts - 1}.test"
        if ask(port, last) != 0:
            raise RuntimeError("the first answer is not of generation 0")
        for generation in range(1, RELOADS + 1):
            write_config(ctx, port, hosts, generation)
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
                raise RuntimeError("sxe-httpd exited")
    finally:
        procs.stop(server)
    return times, errors


def run(ctx, say):
    os.sched_setaffinity(0, {1})  # the client: CPU 1, as every load
    cells = {hosts: {"median": Sample(), "max": Sample(), "errors": Sample()} for hosts in HOSTS}
    failures = []
    try:
        for round_number in range(ctx.args.rounds):
            for hosts in HOSTS:
                figures = cells[hosts]
                try:
                    times, errors = one_round(ctx, hosts)
                    values = {"median": sorted(times)[len(times) // 2], "max": max(times),
                              "errors": errors}
                except (RuntimeError, OSError) as error:
                    failures.append(f"{hosts} hosts: {error}")
                    values = {}
                for key in ("median", "max", "errors"):
                    figures[key].add(values.get(key))
                say(f"{KEY} round {round_number + 1}/{ctx.args.rounds}: {hosts} host(s), "
                    f"{RELOADS} reloads: " + (", ".join(f"{k} {v:,.1f}" for k, v in values.items())
                                              or failures[-1]))
    finally:
        os.sched_setaffinity(0, set(range(os.cpu_count())))
    section = Section(KEY, TITLE, (
        f"sxe-httpd with one worker process on CPU 0, reloaded {RELOADS} times a round with "
        "SIGHUP (the file checked by `sxe-httpd -t` first, then the program run again on the "
        "same sockets); the time until the last host answers with the new generation, asked "
        "on new connections from CPU 1 (ms; a round's median and its slowest reload)." +
        (" FAILED: " + "; ".join(failures) if failures else "")))
    rows = [[str(hosts), cells[hosts]["median"].show(1), cells[hosts]["max"].show(1),
             cells[hosts]["errors"].show(0)] for hosts in HOSTS]
    section.add_table("", ["virtual hosts", "SIGHUP to serving, ms", "slowest reload, ms",
                           "errors while reloading"], rows)
    section.target("operators", "reload: SIGHUP to the new workers serving ≤ 100 ms for 100 "
                   "hosts", cells[100]["median"], 100, unit=" ms", digits=1)
    return section
