"""The mutation runner's processes: every command in a process group of its own, the runner the
subreaper of what those leave, and all of it killed however the run ends."""
import atexit
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time

from places import ROOT, TREE

class Stopped(BaseException):
    """A signal asked the run to stop (BaseException: no `except Exception` swallows it)."""

    def __init__(self, number):
        super().__init__(f"stopped by signal {number}")
        self.number = number


GROUPS = set()  # the process groups of the commands running now (each its leader's pid)
_critical = 0  # > 0 while a process is being started and recorded: a signal then waits
_pending = None  # the signal that arrived meanwhile


def on_signal(number, _frame):
    global _pending
    if _critical:
        _pending = number
        return
    raise Stopped(number)


def become_subreaper():
    """Makes what a test leaves running (a server it started in a session of its own, whose parent
    then ended) this process's child rather than init's, so that stop_everything() finds it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def spawn(command, env=None, cwd=TREE, output=subprocess.DEVNULL):
    """Starts command in a process group of its own, recorded in GROUPS before any signal is let
    through, so none can end the run between the fork and the record."""
    global _critical
    _critical += 1
    try:
        errors = subprocess.DEVNULL if output == subprocess.DEVNULL else subprocess.STDOUT
        process = subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                   stdout=output, stderr=errors, start_new_session=True)
        GROUPS.add(process.pid)
    finally:
        _critical -= 1
    if _pending is not None:
        raise Stopped(_pending)
    return process


def exited(process):
    """Whether process has ended, without reaping it: while its leader is a zombie the group's id
    cannot be taken by another process, so killing the group cannot hit a stranger."""
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def finish(process):
    """Kills what is left of process's group (a server a mutant made spin outlives the test that
    gave up on it), then reaps it. @return its exit status."""
    kill_group(process.pid)
    returncode = process.wait()
    GROUPS.discard(process.pid)
    return returncode


def kill_group(group):
    """SIGKILL to every process left in the group, if any is."""
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run(command, env=None, timeout=None, cwd=TREE, capture=True):
    """Runs command to its end (or timeout seconds, then raises subprocess.TimeoutExpired after
    killing its group). @return a CompletedProcess with stdout holding stdout and stderr."""
    with tempfile.TemporaryFile() as out:
        process = spawn(command, env, cwd, out if capture else subprocess.DEVNULL)
        started = time.monotonic()
        while not exited(process):
            if timeout is not None and time.monotonic() - started > timeout:
                finish(process)
                raise subprocess.TimeoutExpired(command, timeout)
            time.sleep(0.02)
        returncode = finish(process)
        out.seek(0)
        text = out.read().decode(errors="replace")
    return subprocess.CompletedProcess(command, returncode, text, "")


def adopted():
    """The pids of this process's children: after finish() has reaped what it started, the ones
    left were adopted (become_subreaper())."""
    me = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me:
                found.append(int(entry))
    return found


def sweep(everything=False):
    """Kills and reaps the processes tests left behind in sessions of their own (adopted by this
    one); with everything, also every group still running. Call it only between commands: a
    test's server adopted while its test still runs is still in use."""
    if everything:
        for group in list(GROUPS):
            kill_group(group)
    for _ in range(100):
        children = [pid for pid in adopted() if everything or pid not in GROUPS]
        if not children:
            return
        for pid in children:
            try:
                group = os.getpgid(pid)
                if group != os.getpgrp():
                    kill_group(group)
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)  # its own children are adopted next, and swept by the next pass
            except ChildProcessError:
                pass
            GROUPS.discard(pid)


def stop_everything():
    sweep(everything=True)


def check(command, cwd=TREE, env=None):
    """Runs command; exits the run with its output if it fails."""
    result = run(command, env=env, cwd=cwd)
    if result.returncode != 0:
        sys.exit(f"mutation: {' '.join(command)} failed:\n{result.stdout[-4000:]}")
    return result.stdout


def tracked():
    """The repository's files, those not yet added included (a new test is judged before its
    commit), those it ignores left out."""
    return check(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                 cwd=ROOT).split()


def guarded(work):
    """Runs work() so that whatever it started is killed however it ends: returning, raising, or
    stopped by SIGTERM, SIGINT or SIGHUP (then the result is 128 + the signal's number).
    tests/mutation/check-cleanup proves it."""
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, on_signal)
    become_subreaper()
    atexit.register(stop_everything)
    try:
        return work()
    except Stopped as stop:
        print(f"mutation: stopped by signal {stop.number}", file=sys.stderr, flush=True)
        return 128 + stop.number
    finally:
        stop_everything()
