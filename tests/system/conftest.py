"""Shared fixtures for the system tests: they drive the real built programs."""
import os
import pathlib
import resource
import signal
import socket
import subprocess
import sys
import time

import pytest

# HdrHistogram's Python reader (hdrh), which scripts/test installs under build/python: it is not
# packaged by Debian. Imported normally by the tests that need it: missing, they fail.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "build" / "python"))


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


def wait_for_port(port, process, what="the server"):
    """Waits (5 s at most) until port accepts connections, failing if process has exited."""
    deadline = time.monotonic() + 5
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except ConnectionRefusedError:
            assert process.poll() is None, f"{what} exited: {process.returncode}"
            assert time.monotonic() < deadline, f"{what} did not start"
            time.sleep(0.02)


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
    """Runs tools/sxe-http with the given arguments, optionally under a lower open-file limit."""
    def run(*args, limit_files=None, timeout=60):
        preexec = None
        if limit_files is not None:
            def preexec():
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit_files, limit_files))
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
