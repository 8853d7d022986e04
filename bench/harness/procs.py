"""Processes for the benchmarks: started pinned to CPUs in a process group of their own, and
stopped by their pid on any exit (Ctrl-C and SIGTERM included); what /proc says of a process
tree (CPU time, memory, listening sockets); free loopback ports."""
import atexit
import os
import signal
import socket
import subprocess
import sys
import time

# Processes started and not yet stopped.
LIVE = set()


def start(command, cpus, capture=False, env=None, cwd=None):
    """Starts command pinned to cpus ("0", "1" or "0,1") in a process group of its own. Its
    output is piped when capture is "stdout" (stderr discarded) or True (both), else discarded:
    nobody reads it, and a full pipe would stall a server."""
    # A signal between the fork and the bookkeeping would leave a process nobody stops.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        out = subprocess.PIPE if capture else subprocess.DEVNULL
        err = subprocess.PIPE if capture is True else subprocess.DEVNULL
        process = subprocess.Popen(["taskset", "-c", str(cpus), *command], stdout=out, stderr=err,
                                   env=env, cwd=cwd, start_new_session=True,
                                   preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK,
                                                                             blocked))
        LIVE.add(process)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    return process


def stop(process, grace=5.0):
    """SIGTERM to the process group, SIGKILL after grace seconds; reaps it."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            print(f"bench: {' '.join(map(str, process.args[3:5]))} did not stop within "
                  f"{wait:.0f} s of {signal.Signals(sig).name}", file=sys.stderr)
    LIVE.discard(process)


def stop_all():
    for process in list(LIVE):
        stop(process, grace=1.0)


def on_signal(signum, frame):
    raise KeyboardInterrupt


def guard():
    """Stops every process started here on any exit: normal, an exception, SIGINT or SIGTERM."""
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    atexit.register(stop_all)


def free_port():
    """A loopback port nothing listens on now (the kernel's pick for port 0). Another program may
    take it before the server does: wait_for_port(port, pid) finds that out."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def children():
    """Each process's children, from /proc."""
    kids = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
    return kids


def tree(pid):
    """pid and every process descended from it."""
    kids = children()
    found, unvisited = [], [pid]
    while unvisited:
        found.append(unvisited.pop())
        unvisited.extend(kids.get(found[-1], []))
    return found


def tree_cpu_ns(pids):
    """CPU time of every thread of the given processes, in ns (schedstat: what they ran)."""
    total = 0
    for member in pids:
        try:
            for task in os.listdir(f"/proc/{member}/task"):
                with open(f"/proc/{member}/task/{task}/schedstat") as stat:
                    total += int(stat.read().split()[0])
        except OSError:
            pass
    return total


def tree_kb(pids, field):
    """The sum of a /proc/PID/status field (VmRSS, VmHWM) over the given processes, in KB."""
    total = 0
    for member in pids:
        try:
            with open(f"/proc/{member}/status") as status:
                for line in status:
                    if line.startswith(field + ":"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def listeners(port):
    """The pids of the processes that hold a socket listening on port (IPv4 or IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines)
                for line in lines:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(f"socket:[{fields[9]}]")
        except OSError:
            pass
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                for fd in os.listdir(f"/proc/{entry}/fd"):
                    if os.readlink(f"/proc/{entry}/fd/{fd}") in inodes:
                        pids.add(int(entry))
                        break
            except OSError:
                continue
    return pids


def wait_for_port(port, pid, timeout=10.0):
    """Waits until port accepts connections, and checks that the listener is pid or one of its
    descendants: a measurement of someone else's server is worse than none."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on port {port} after {timeout:.0f} s")
            time.sleep(0.02)
    holders = listeners(port)
    if not holders & set(tree(pid)):
        names = []
        for holder in sorted(holders):
            try:
                with open(f"/proc/{holder}/comm") as comm:
                    names.append(f"{comm.read().strip()} (pid {holder})")
            except OSError:
                names.append(f"pid {holder}")
        raise RuntimeError(f"port {port} is held by {', '.join(names) or 'another program'}, "
                           f"not by the server started as pid {pid}: not measuring it")


def install(*packages):
    """Installs the Debian packages a benchmark needs, as the project's scripts do."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([os.path.join(root, "scripts", "deps"), *packages], check=True,
                   stdout=subprocess.DEVNULL)
