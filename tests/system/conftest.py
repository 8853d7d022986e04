"""Shared fixtures for the system tests: they drive the real built programs."""
import os
import pathlib
import socket
import subprocess
import time

import pytest


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
