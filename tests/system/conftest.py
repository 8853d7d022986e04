"""Shared fixtures for the system tests: they drive the real built programs."""
import fcntl
import os
import pathlib
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import termios
import time

import pytest

# HdrHistogram's Python reader (hdrh), which scripts/test installs under build/python: it is not
# packaged by Debian. Imported normally by the tests that need it: missing, they fail.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "build" / "python"))


def _in_ci():
    """Whether this runs under CI: the environment variable CI set, and not to 0 or false."""
    value = os.environ.get("CI", "")
    return value not in ("", "0") and value.lower() != "false"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "serial: keeps a rate or a deadline, or holds thousands of "
        "connections or a browser; CTest runs these alone (system/serial), and the rest of the "
        "suite beside the other backend's and the unit tests")
    config.addinivalue_line(
        "markers", "one_backend: tests a script's or a tool's own logic (a benchmark's table, a "
        "rate kept over seconds), which the backend under it does not change; CTest runs it on "
        "epoll only")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI a skipped test fails: a skip there would be a test that never ran, with nobody
    told. A test that needs something of the machine checks for it and fails, saying what."""
    report = (yield).get_result()
    if report.skipped and not hasattr(report, "wasxfail") and _in_ci():
        where = report.longrepr
        reason = where[2] if isinstance(where, tuple) else where
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, which must run every test ({reason})"


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    """The build tree under test, from SXE_BUILD_DIR (CTest sets it)."""
    path = os.environ.get("SXE_BUILD_DIR")
    if not path:
        pytest.fail("SXE_BUILD_DIR is not set: run the system tests through ctest")
    return pathlib.Path(path)


@pytest.fixture
def run(build_dir):
    """Runs a built program with a time limit and returns the CompletedProcess."""

    def _run(relative: str, env: dict | None = None, timeout: float = 30.0):
        program = build_dir / relative
        assert program.exists(), f"{program} was not built"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("SXE_LOG_LEVEL")}
        full_env.update(env or {})
        return subprocess.run([str(program)], env=full_env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    return _run


def wait_until(predicate, timeout=5.0, what="the condition", interval=0.01):
    """Polls predicate() until it returns something true, and returns that. The last call
    starts once timeout seconds have passed (a slow one may end well after); if it is false
    too, the test fails, naming what it waited for. What a test waits for, it polls for: a
    fixed sleep is too short on a loaded machine and wastes time on an idle one."""
    deadline = time.monotonic() + timeout
    while True:
        last = time.monotonic() >= deadline
        result = predicate()
        if result:
            return result
        assert not last, f"waited {timeout} s for {what}"
        time.sleep(interval)


def wait_for_port(port, process, what="the server"):
    """Waits (5 s at most) until port accepts connections, failing if process has exited."""
    def accepts():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except ConnectionRefusedError:
            assert process.poll() is None, f"{what} exited: {process.returncode}"
            return False

    wait_until(accepts, 5, f"{what} to start", interval=0.02)


def _proc_net_tcp():
    """The IPv4 TCP sockets of this network namespace: (local, remote, state, rx_queue) each,
    the addresses as /proc/net/tcp writes them."""
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            yield fields[1], fields[2], fields[3], int(fields[4].split(":")[1], 16)


def _as_in_proc(address):
    host, port = address[:2]
    return "%08X:%04X" % (struct.unpack("=I", socket.inet_aton(host))[0], port)


def unread_by_peer(sock):
    """How many of the bytes sock has sent over loopback the program at the other end has not
    read yet: those its kernel has not acknowledged (SIOCOUTQ) and those waiting in its socket
    (rx_queue in /proc/net/tcp). A test waits for 0 to know the server has read what it sent."""
    unacknowledged = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
    local, remote = _as_in_proc(sock.getpeername()), _as_in_proc(sock.getsockname())
    for entry in _proc_net_tcp():
        if entry[:2] == (local, remote):
            return unacknowledged + entry[3]
    raise AssertionError(f"no socket of the server's side for {sock.getsockname()}")


def listening_sockets(port):
    """How many sockets listen on 127.0.0.1:port or on every address (several with SO_REUSEPORT)."""
    ends = {_as_in_proc(("127.0.0.1", port)), _as_in_proc(("0.0.0.0", port))}
    return sum(1 for local, _, state, _ in _proc_net_tcp() if state == "0A" and local in ends)


def read_reply(sock):
    """One HTTP response with a Content-Length from sock, however its bytes are split."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, f"closed after {len(body)} of {length} body bytes"
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.fixture
def sxe_http(build_dir):
    """Runs tools/sxe-http with the given arguments, optionally under a lower open-file limit
    (limit_files: both limits, or a (soft, hard) pair)."""
    def run(*args, limit_files=None, timeout=60):
        preexec = None
        if limit_files is not None:
            pair = limit_files if isinstance(limit_files, tuple) else (limit_files, limit_files)

            def preexec():
                resource.setrlimit(resource.RLIMIT_NOFILE, pair)
        return subprocess.run([str(build_dir / "tools" / "sxe-http"), *map(str, args)],
                              capture_output=True, text=True, timeout=timeout, preexec_fn=preexec)
    return run


def _example_server(build_dir, name, address):
    """Starts examples/NAME on a free loopback port (address(port) its argument); yields the port
    and stops it with SIGTERM, which it must exit 0 on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([str(build_dir / "examples" / name), address(port)],
                               stderr=subprocess.DEVNULL)
    wait_for_port(port, process, name)
    yield port
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=5) == 0


@pytest.fixture
def hello(build_dir):
    """examples/hello on a free loopback port."""
    yield from _example_server(build_dir, "hello", str)


@pytest.fixture
def ws_echo(build_dir):
    """examples/ws-echo on a free loopback port."""
    yield from _example_server(build_dir, "ws-echo", lambda port: f"127.0.0.1:{port}")


@pytest.fixture
def browsers(tmp_path):
    """Opens headless Chromium sessions, each with a fresh profile, and quits them after."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is missing: install python3-selenium (Debian) for /usr/bin/python3")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("Chromium is missing: install chromium and chromium-driver (Debian)")
    opened = []

    def open_browser(*more):
        """A new browser, with more of Chromium's switches."""
        number = len(logs)  # never reused: close_all() empties opened, not logs
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=800,600",
                         f"--user-data-dir={tmp_path / f'profile-{number}'}", *more):
            options.add_argument(argument)
        log = tmp_path / f"chromedriver-{number}.log"
        browser = webdriver.Chrome(service=Service(driver, log_path=str(log)), options=options)
        browser.set_page_load_timeout(10)
        opened.append(browser)
        logs.append(log)
        return browser

    def driver_logs():
        """The last lines each driver logged, for a test to show when one went away."""
        return "\n".join(f"{log.name}: ...{log.read_text(errors='replace')[-2000:]}"
                         for log in logs if log.exists())

    def close_all():
        """Quits every browser opened so far, then kills what is left on one of their profiles: a
        driver that died leaves its Chromium running, which quit() cannot reach."""
        while opened:
            try:
                opened.pop().quit()
            except Exception:  # pylint: disable=broad-except
                pass  # quit already, by the test, or its driver is gone
        profile = f"--user-data-dir={tmp_path / 'profile-'}"
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as file:
                    arguments = file.read().decode(errors="replace").split("\0")
                if entry.isdigit() and any(a.startswith(profile) for a in arguments):
                    os.kill(int(entry), signal.SIGKILL)
            except (OSError, ValueError):
                pass  # not a process, or gone meanwhile

    logs = []
    open_browser.driver_logs = driver_logs
    open_browser.close_all = close_all
    yield open_browser
    close_all()
