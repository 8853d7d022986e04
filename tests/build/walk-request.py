#!/usr/bin/env python3
"""How often one keep-alive HTTP GET moves between the library's source files, from read to send.

    tests/build/walk-request.py [--source DIR] [BUILD_DIR]

What it measures: the second GET on one keep-alive connection to examples/http-hello (a
connection's steady state, without the accept), from the recv that reads it to the send or sendmsg
that answers it. Each function of src/ entered on the way counts as a call in the file that
defines it; a move is two calls in a row in different files. The output is the walk, one line per
run of calls in one file, then the same count over .c files alone, then the summary
`walk: F files, M moves between them, C calls`.

How: the library at DIR (default: the checkout holding this script) is built in BUILD_DIR
(default: DIR/build/walk) with -O1 -gdwarf-4 -fno-inline -finstrument-functions, static functions
included; the example, system headers and the recorder are not instrumented. The recorder,
tests/build/walk-request-hook.c, is linked into http-hello and wraps recv, send and sendmsg (ld
--wrap), so the socket calls mark the trace of function entries. The server runs on a free port of
127.0.0.1 with the epoll backend, answers two GETs on one connection, and stops on SIGTERM, writing
its trace at exit; addr2line names the functions and files. DIR may be any checkout, an older
commit's worktree too: a file is known by its path under src/, whatever the folders.
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HOOK_SOURCE = os.path.join(HERE, "walk-request-hook.c")
# Every function of src/ enters the trace: -fno-inline keeps calls calls, and GCC instruments a
# function even where it inlines it. The example and inline functions of system headers are left
# out, so the trace holds the library's own functions only. DWARF 4, as binutils 2.40's addr2line
# names the wrong file for some copies of a header's static inline function with DWARF 5.
TRACE_FLAGS = ("-O1 -gdwarf-4 -fno-inline -DNDEBUG -finstrument-functions "
               "-finstrument-functions-exclude-file-list=/examples/,/usr/")
WRAPPED_CALLS = ("recv", "send", "sendmsg")
REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
TIMEOUT = 10.0
WIDTH = 100


def fail(message):
    sys.exit("walk-request: " + message)


def run(command):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        fail("%s failed:\n%s" % (" ".join(command), result.stdout))


def build(source, build_dir):
    """Builds the recorder, then the library and http-hello instrumented; returns the program."""
    os.makedirs(build_dir, exist_ok=True)
    hook_object = os.path.join(build_dir, "walk-request-hook.o")
    run(["gcc", "-O1", "-g", "-c", HOOK_SOURCE, "-o", hook_object])
    # The recorder goes in through the linker flags, which every executable link (CMake's own
    # compiler checks too) takes, as the instrumented code needs its hooks wherever it is linked.
    link_flags = " ".join([hook_object] + ["-Wl,--wrap=" + name for name in WRAPPED_CALLS])
    run(["cmake", "-S", source, "-B", build_dir, "-G", "Ninja", "-DCMAKE_C_COMPILER=gcc",
         "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_C_FLAGS_RELEASE=" + TRACE_FLAGS,
         "-DCMAKE_EXE_LINKER_FLAGS=" + link_flags, "-DSXE_BUILD_TESTS=OFF",
         "-DSXE_BUILD_BENCH=OFF"])
    program = os.path.join(build_dir, "examples", "http-hello")
    if os.path.exists(program):
        os.remove(program)  # Ninja does not see the recorder change: link afresh every time.
    run(["cmake", "--build", build_dir, "--target", "example_http-hello"])
    return program


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening_inode(port):
    """The inode of the socket listening on 127.0.0.1:port, from /proc/net/tcp, or None."""
    local = "0100007F:%04X" % port
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[1] == local and fields[3] == "0A":
                return fields[9]
    return None


def socket_inodes(pid):
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            match = re.fullmatch(r"socket:\[(\d+)\]", os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            continue  # closed since it was listed
        if match:
            inodes.add(match.group(1))
    return inodes


def wait_listening(server, port):
    """Waits until the port is listened on by the server's own socket, not another program's."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            fail("http-hello exited with %d before listening" % server.returncode)
        inode = listening_inode(port)
        if inode is not None and inode in socket_inodes(server.pid):
            return
        time.sleep(0.05)
    fail("http-hello does not listen on port %d" % port)


def get(client):
    """Sends one GET and reads its whole answer (head and Content-Length bytes of body)."""
    client.sendall(REQUEST)
    answer = b""
    while True:
        head, end_of_head, body = answer.partition(b"\r\n\r\n")
        length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head + b"\r\n")
        if end_of_head and length and len(body) >= int(length.group(1)):
            break
        chunk = client.recv(4096)
        if not chunk:
            fail("the server closed the connection before answering")
        answer += chunk
    if not answer.startswith(b"HTTP/1.1 200"):
        fail("unexpected answer: %r" % answer[:80])


def trace_two_requests(program, build_dir):
    """Runs http-hello for two GETs on one connection; returns its trace's events."""
    trace_path = os.path.join(build_dir, "walk-request.trace")
    if os.path.exists(trace_path):
        os.remove(trace_path)
    port = free_port()
    environment = dict(os.environ, SXE_WALK_TRACE=trace_path, SXE_BACKEND="epoll")
    with open(os.path.join(build_dir, "walk-request.log"), "w") as log:
        server = subprocess.Popen([program, "127.0.0.1:%d" % port], env=environment,
                                  stdout=log, stderr=log)
    try:
        wait_listening(server, port)
        # The server formats its Date line again when the second of its clock changes, and its
        # clock is CLOCK_MONOTONIC, as is Python's: both GETs go early in one second, so the
        # second answer's walk is the same from run to run.
        if time.monotonic() % 1.0 > 0.5:
            time.sleep(1.01 - time.monotonic() % 1.0)
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as client:
            get(client)
            get(client)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=TIMEOUT)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    if server.returncode != 0 or not os.path.exists(trace_path):
        fail("http-hello stopped with %d and no trace" % server.returncode)
    with open(trace_path) as trace:
        return [line.split() for line in trace]


def second_request_span(events):
    """The offsets of the functions entered between the second read of a request and its send."""
    reads = [i for i, (kind, value) in enumerate(events) if kind == "recv" and int(value) > 0]
    if len(reads) < 2:
        fail("the trace holds %d reads of a request, not two" % len(reads))
    start = reads[1]
    sends = [i for i in range(start + 1, len(events))
             if events[i][0] in ("send", "sendmsg") and int(events[i][1]) > 0]
    if not sends:
        fail("the trace ends before the second answer's send (full buffer?)")
    return [int(value, 16) for kind, value in events[start + 1:sends[0]] if kind == "f"]


def resolve(program, source, offsets):
    """Maps each offset to (function, file relative to source); file is None outside src/."""
    unique = sorted(set(offsets))
    result = subprocess.run(["addr2line", "-f", "-e", program], input="\n".join(map(hex, unique)),
                            stdout=subprocess.PIPE, text=True, check=True)
    lines = result.stdout.splitlines()
    names = {}
    root = os.path.realpath(source)
    for i, offset in enumerate(unique):
        function, location = lines[2 * i], lines[2 * i + 1]
        path = os.path.realpath(location.rsplit(":", 1)[0])
        relative = os.path.relpath(path, root)
        names[offset] = (function, relative if relative.startswith("src/") else None)
    return names


def runs_of(calls):
    """The calls grouped into runs of consecutive calls in one file: [(path, [function, ...])]."""
    runs = []
    for function, path in calls:
        if runs and runs[-1][0] == path:
            runs[-1][1].append(function)
        else:
            runs.append((path, [function]))
    return runs


def summary(runs, calls):
    files = len({path for path, _ in runs})
    return "%d files, %d moves between them, %d calls" % (files, len(runs) - 1, calls)


def report(source, calls, left_out):
    """Prints the walk one run of a file a line, then the summaries."""
    runs = runs_of(calls)
    width = max(len(path) for path, _ in runs)
    print("The second GET on a keep-alive connection, from its recv to its send (%s):" % source)
    for path, functions in runs:
        line = "%4d  %-*s  %s" % (len(functions), width, path, " ".join(functions))
        print(line if len(line) <= WIDTH else line[:WIDTH - 3] + "...")
    if left_out:
        print("(%d entries outside src/ left out)" % left_out)
    # A header's static inline function is usually inlined where it is called in a release
    # build: this line counts the moves between .c files only, as if it always were.
    in_c_files = [call for call in calls if call[1].endswith(".c")]
    print("between .c files, functions of headers left out: " +
          summary(runs_of(in_c_files), len(in_c_files)))
    print("walk: " + summary(runs, len(calls)))


def main():
    default_source = os.path.dirname(os.path.dirname(HERE))
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir", nargs="?", metavar="BUILD_DIR",
                        help="where to build (default: SOURCE/build/walk)")
    parser.add_argument("--source", default=default_source, metavar="DIR",
                        help="the checkout to measure (default: %(default)s)")
    args = parser.parse_args()
    source = os.path.abspath(args.source)
    build_dir = os.path.abspath(args.build_dir or os.path.join(source, "build", "walk"))
    if not os.path.exists(os.path.join(source, "examples", "http-hello.c")):
        fail("%s has no examples/http-hello.c" % source)

    program = build(source, build_dir)
    offsets = second_request_span(trace_two_requests(program, build_dir))
    names = resolve(program, source, offsets)
    calls = [names[offset] for offset in offsets if names[offset][1] is not None]
    if not calls:
        fail("no function of src/ between the read and the send")
    report(source, calls, len(offsets) - len(calls))


if __name__ == "__main__":
    main()
