#!/usr/bin/env python3
"""HTTPS side by side: sxe-httpd against nginx and h2o, each terminating TLS with this machine's
OpenSSL, one worker on CPU 0, the load on CPU 1, interleaved rounds.

    bench/tls.py [--build build/release] [--rounds 5] [--seconds 5] [--connections 100]
                 [--idle 10000] [--cases hello.txt 4k.bin 1m.bin handshakes resumed]

Each server serves the same files from one root with the same ECDSA P-256 certificate (made for
the run). Keep-alive: wrk keeps its connections (one handshake each, then requests) for 12 B,
4 KB and 1 MB. Handshakes: sxe-http --tls --http1.0 opens a connection per request and resumes
no session, so every request is a full handshake (X25519 and ECDSA P-256), 16 at a time; with
--tls-resume each resumes its worker's last session (a ticket), so every request after the first
is a resumed handshake (each server is checked to resume with openssl s_client first). Beside the
servers runs the OpenSSL floor (bench/tls-floor): the same files answered from memory by a loop
that does nothing but OpenSSL's reads and writes on the socket, what the least a server can spend
is, measured the same way; and beside it, for the keep-alive files, that floor reading each file
as it sends it (`tls-floor ... read`: pread, 64 KB a time), what the least a server that keeps no
file in memory can spend is. A round runs every server once per case, in a new order each round; the figure is the server's CPU time
(its whole process tree, from schedstat) per request, with the median and the spread of the
rounds. Before its rounds each server's answer to each file is fetched once over TLS and its status
and size checked; wrk's errors or non-2xx answers, or any error sxe-http counts (it checks every
status and length), fail the run.
"""
import argparse
import json
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import procs  # noqa: E402
from benchlib import parse_wrk  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = {"hello.txt": b"Hello World\n", "4k.bin": bytes(range(256)) * 16,
         "1m.bin": bytes(range(256)) * 4096}
HANDSHAKES = "handshakes"  # the case of a full handshake per request
RESUMED = "resumed"  # the case of a resumed handshake per request
IDLE = "idle"  # the memory case: KB per idle connection, TLS less plain

NGINX = """# nginx terminating TLS as a site that cares about speed runs it: bench/peers/nginx.conf's
# settings, with a TLS listener. Each line that differs from nginx's default says why.
worker_processes 1;            # the one core the benchmark gives the server
daemon off;                    # in the foreground, so the benchmark stops it by its pid
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log error;
events {{ worker_connections 12000; }}  # room for the idle case's connections (default 512)
http {{
    access_log off;            # no access log, as for every server in the main tables
    sendfile on;               # file bytes from the page cache (with TLS nginx reads them)
    open_file_cache max=8000 inactive=60s;  # keep files open and their stat
    keepalive_requests 1000000000;  # a connection lives for the whole run (default 1000)
    ssl_protocols TLSv1.2 TLSv1.3;  # the same protocols as sxe (default adds TLS 1.0 and 1.1)
    ssl_session_cache shared:SSL:10m;  # resumption as users configure it (default none)
    server {{
        listen 127.0.0.1:{port}{ssl};  # " ssl", or "" for the idle case's plain run
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{ root {root}; }}
    }}
}}
"""

H2O = """# h2o terminating TLS: bench/peers/h2o.conf's settings with a TLS listener.
listen:
  host: 127.0.0.1
  port: {port}
{ssl}num-threads: 1                 # the one core the benchmark gives the server
max-connections: 12000         # room for the idle case's connections (default 1024)
http1-request-timeout: 300     # connections live for the whole run (default 10 s)
error-log: {tmp}/h2o-error.log
hosts:
  default:
    paths:
      /:
        file.dir: {root}
"""


H2O_TLS = """  ssl:                         # (left out for the idle case's plain run)
    certificate-file: {cert}
    key-file: {key}
    minimum-version: TLSv1.2   # the same protocols as sxe (default TLSv1)
"""
FLOOR = "tls-floor"  # OpenSSL and the socket, nothing else: what the servers are measured against
# The floor that reads each answer's file as it sends it (pread, 64 KB a time), as a server that
# keeps no file in memory must: the keep-alive cases only (its handshakes are the floor's).
FLOOR_READ = "tls-floor-read"


def certificate(tmp):
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days",
                    "2", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    os.chmod(key, 0o644)  # h2o reads it after switching to nobody when run as root
    return cert, key


def servers(build, tmp, root, cert, key):
    """name: command(port, tls) for each server installed."""
    def config(name, text):
        def command(port, tls=True):
            path = os.path.join(tmp, f"{name}-{port}.conf")
            ssl_text = (" ssl" if tls else "") if name == "nginx" else \
                (H2O_TLS.format(cert=cert, key=key) if tls else "")
            with open(path, "w") as out:
                out.write(text.format(port=port, tmp=tmp, root=root, cert=cert, key=key,
                                      ssl=ssl_text))
            return ["nginx", "-c", path] if name == "nginx" else ["h2o", "-c", path]
        return command

    made = {"sxe-httpd": lambda port, tls=True: [
        os.path.join(build, "tools", "sxe-httpd"), "--root", root, "--listen", f"127.0.0.1:{port}",
        "--workers", "1", "--connections", "12000",
        *(["--tls-cert", cert, "--tls-key", key] if tls else [])]}
    for name, text in (("nginx", NGINX), ("h2o", H2O)):
        if shutil.which(name):
            made[name] = config(name, text)
        else:
            print(f"tls: {name} is not installed: left out", file=sys.stderr)
    made[FLOOR] = lambda port, tls=True: [os.path.join(build, "bench", "tls-floor"), str(port),
                                          *([cert, key, root] if tls else [])]
    made[FLOOR_READ] = lambda port, tls=True: [os.path.join(build, "bench", "tls-floor"),
                                               str(port), *([cert, key, root, "read"] if tls else [])]
    return made


def check(port, cert):
    context = ssl.create_default_context(cafile=cert)
    for name, body in FILES.items():
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/{name}", context=context,
                                    timeout=5) as answer:
            got = answer.read()
            if answer.status != 200 or got != body:
                raise RuntimeError(f"/{name}: status {answer.status}, {len(got)} bytes")
    with tempfile.NamedTemporaryFile(suffix=".pem") as session:
        # A request, answered and closed (HTTP/1.0), so that the tickets, which TLS 1.3 sends
        # after the handshake, come before s_client ends.
        said = [subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-ign_eof",
                                option, session.name], input="GET /hello.txt HTTP/1.0\r\n\r\n",
                               capture_output=True, text=True, timeout=30).stdout
                for option in ("-sess_out", "-sess_in")]
    if "\nReused, " not in said[1]:
        raise RuntimeError(f"port {port}: a session is not resumed:\n{said[1][-2000:]}")


def handshakes(port, args, name, option):
    """sxe-http --http1.0 with option (--tls or --tls-resume), 16 connections at a time: @return
    the requests (each its own handshake)."""
    load = subprocess.run(["taskset", "-c", "1",
                           os.path.join(os.path.abspath(args.build), "tools", "sxe-http"),
                           "-i", "127.0.0.1", "-p", str(port), "-u", "/hello.txt", "-c", "16",
                           "-d", str(args.seconds), "--http1.0", option, "--body-length", "12",
                           "--json"], capture_output=True, text=True)
    report = json.loads(load.stdout) if load.stdout else {}
    if load.returncode != 0 or not report.get("queries"):
        raise RuntimeError(f"{name} {option}: sxe-http exit {load.returncode}:\n"
                           f"{load.stdout}{load.stderr}")
    return report["queries"]


def idle_bytes(command, args, tls):
    """Starts the server, holds args.idle connections on it: @return the growth of its resident
    memory per connection, in bytes."""
    port = procs.free_port()
    server = procs.start(command(port, tls), "0")
    try:
        procs.wait_for_port(port, server.pid)
        pids = procs.tree(server.pid)
        before = procs.tree_kb(pids, "VmRSS")
        hold = subprocess.Popen(["taskset", "-c", "1", sys.executable,
                                 os.path.join(ROOT, "bench", "tls_hold.py"), "--port", str(port),
                                 "--connections", str(args.idle), *(["--tls"] if tls else [])],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        held = json.loads(hold.stdout.readline() or "{}").get("held")
        time.sleep(1)  # the last answers' buffers given back
        after = procs.tree_kb(procs.tree(server.pid), "VmRSS")
        hold.stdin.close()
        lost = json.loads(hold.stdout.readline() or "{}").get("lost")
        hold.wait(timeout=60)
        if held != args.idle or lost != 0:
            raise RuntimeError(f"idle {'TLS' if tls else 'plain'}: held {held}, lost {lost}")
        return (after - before) * 1024 / args.idle
    finally:
        procs.stop(server)


def one_round(command, args, cert, name):
    port = procs.free_port()
    server = procs.start(command(port), "0")
    try:
        procs.wait_for_port(port, server.pid)
        check(port, cert)
        pids = procs.tree(server.pid)
        results = {}
        for file in (case for case in FILES if case in args.cases):
            before = procs.tree_cpu_ns(pids)
            wrk = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", f"-c{args.connections}",
                                  f"-d{args.seconds}s", "--latency", "--timeout", "5s",
                                  f"https://127.0.0.1:{port}/{file}"],
                                 capture_output=True, text=True, check=False)
            if wrk.returncode != 0:
                raise RuntimeError(f"{name} /{file}: wrk failed:\n{wrk.stdout}{wrk.stderr}")
            cpu = procs.tree_cpu_ns(pids) - before
            requests, rate, p99, errors = parse_wrk(wrk.stdout)
            if errors or requests == 0:
                raise RuntimeError(f"{name} /{file}: {errors} errors in {requests}:\n{wrk.stdout}")
            results[file] = (cpu / requests / 1000.0, rate)
        for case, option in ((HANDSHAKES, "--tls"), (RESUMED, "--tls-resume")):
            if case not in args.cases:
                continue
            before = procs.tree_cpu_ns(pids)
            queries = handshakes(port, args, name, option)
            cpu = procs.tree_cpu_ns(pids) - before
            results[case] = (cpu / queries / 1000.0, queries / (args.seconds or 1))
        return results
    finally:
        procs.stop(server)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--idle", type=int, default=10000,
                        help="idle connections held for the memory case (0: no memory case)")
    parser.add_argument("--cases", nargs="+", choices=list(FILES) + [HANDSHAKES, RESUMED],
                        default=list(FILES) + [HANDSHAKES, RESUMED],
                        help="the keep-alive files and handshake cases to measure (all)")
    args = parser.parse_args()
    procs.guard()
    with tempfile.TemporaryDirectory(prefix="sxe-tls-bench-") as tmp:
        os.chmod(tmp, 0o755)
        root = os.path.join(tmp, "www")
        os.mkdir(root)
        for name, body in FILES.items():
            with open(os.path.join(root, name), "wb") as out:
                out.write(body)
        cert, key = certificate(tmp)
        made = servers(os.path.abspath(args.build), tmp, root, cert, key)
        cases = args.cases
        figures = {(name, case): [] for name in made for case in cases + [IDLE]}
        for round_number in range(args.rounds):
            order = list(made)[round_number % len(made):] + list(made)[:round_number % len(made)]
            for name in order:
                if name == FLOOR_READ and not any(case in FILES for case in cases):
                    continue
                results = one_round(made[name], reading_files(args) if name == FLOOR_READ else args,
                                    cert, name)
                for file, (us, rate) in results.items():
                    figures[(name, file)].append(us)
                    print(f"round {round_number + 1}/{args.rounds}: {name} /{file}: "
                          f"{us:.2f} µs/request, {rate:,.0f}/s", flush=True)
                if args.idle and name != FLOOR_READ:
                    print(f"round {round_number + 1}/{args.rounds}: {name}: holding {args.idle:,} "
                          "idle connections, TLS then plain", flush=True)
                    secure, plain = (idle_bytes(made[name], args, tls) for tls in (True, False))
                    figures[(name, IDLE)].append((secure - plain) / 1024)
                    print(f"round {round_number + 1}/{args.rounds}: {name}: idle TLS "
                          f"{secure / 1024:.1f} KB, plain {plain / 1024:.2f} KB per connection",
                          flush=True)
        report(figures, cases, made, args)


def reading_files(args):
    """args with the keep-alive file cases only, and no idle memory case."""
    return argparse.Namespace(**{**vars(args), "cases": [c for c in args.cases if c in FILES],
                                 "idle": 0})


def report(figures, cases, made, args):
    print(f"\nHTTPS: keep-alive ({args.connections} connections), full and resumed handshakes "
          f"(16 at a time), server CPU per request (median, min-max of {args.rounds} rounds):")
    for case in cases:
        ours = figures[("sxe-httpd", case)]
        base = statistics.median(ours)
        for name in made:
            values = figures[(name, case)]
            if not values:  # the reading floor's handshakes
                continue
            median = statistics.median(values)
            label = case if case in (HANDSHAKES, RESUMED) else "/" + case
            # Each round's own ratio: the servers of one round ran minutes apart at most.
            ratios = [mine / theirs for mine, theirs in zip(ours, values)]
            print(f"  {label:11} {name:14} {median:7.2f} µs ({min(values):.2f}-"
                  f"{max(values):.2f})  sxe-httpd/{name} {base / median:.2f}x "
                  f"(rounds {min(ratios):.2f}-{max(ratios):.2f})")
    if args.idle:
        print(f"\nIdle memory: {args.idle:,} keep-alive connections, each after one request, "
              "server RSS growth per connection over TLS less over plain HTTP (median, min-max):")
        base = statistics.median(figures[("sxe-httpd", IDLE)])
        for name in made:
            values = figures[(name, IDLE)]
            if not values:
                continue
            median = statistics.median(values)
            print(f"  {name:10} {median:6.1f} KB ({min(values):.1f}-{max(values):.1f})  "
                  f"sxe-httpd/{name} {base / median:.2f}x")


if __name__ == "__main__":
    main()
