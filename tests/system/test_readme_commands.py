"""The README's commands that run the built programs work as written: each fenced block's lines
run in order, the servers until they answer on their port, the rest to a clean exit, and every
server stops cleanly on SIGTERM. Only what a test may not keep is changed: the port (a free one
for 8080), the directories (a temporary one for DIR and /tmp/dict), and the build directory."""
import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import wait_for_port
from test_sxe_httpd import free_port, get

ROOT = Path(__file__).resolve().parents[2]


def blocks():
    """The README's fenced blocks whose lines run programs of the build, as lists of lines."""
    found, block = [], None
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("```"):
            if block is None:
                block = [] if line == "```" else ["(not shell)"]
                continue
            lines = [text.split("#")[0].strip() for text in block]
            lines = [text for text in lines if text]
            if lines and all(re.match(r"(\w+=\S+ )*build/release/", text) for text in lines):
                found.append(lines)
            block = None
        elif block is not None:
            block.append(line)
    return found


@pytest.mark.serial  # one block holds 1,000 WebSocket clients for 5 s, and a dictionary is built
@pytest.mark.parametrize("block", blocks(), ids=lambda block: block[0].split()[0].split("/")[-1])
def test_a_readme_block_runs_as_written(build_dir, tmp_path, block):
    port = free_port()
    www = tmp_path / "www"
    www.mkdir()
    (www / "index.html").write_text("<h1>home</h1>\n")
    servers = []
    try:
        for line in block:
            line = (line.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
                        .replace("-p 8080", f"-p {port}").replace(" DIR ", f" {www} ")
                        .replace("/tmp/dict", str(tmp_path / "dict")))
            words = shlex.split(line)
            env = dict(os.environ)
            while "=" in words[0]:
                name, _, value = words.pop(0).partition("=")
                env[name] = value
            program = str(build_dir / words[0].removeprefix("build/release/"))
            name = Path(program).name
            if name in ("sxe-http", "sxe-dict-build"):  # runs to its end
                result = subprocess.run([program, *words[1:]], cwd=ROOT, env=env,
                                        capture_output=True, text=True, timeout=600)
                assert result.returncode == 0, (line, result.stdout[-2000:], result.stderr[-2000:])
                continue
            process = subprocess.Popen([program, *words[1:]], cwd=ROOT, env=env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            servers.append(process)
            wait_for_port(port, process, line)
            status, fields, _ = get(port, "/")  # a page, or ws-echo's 426 for a plain GET
            assert status in (200, 426) and fields["server"] == "sxe", (line, status, fields)
    finally:
        for process in servers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in servers:
            assert process.wait(timeout=10) == 0, process.stderr.read().decode()[-2000:]
