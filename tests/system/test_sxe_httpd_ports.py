"""sxe-httpd on a port another server listens on: it says the address is in use and exits 1, for
every way it spreads connections, whether the other is sxe-httpd (whose workers listen with
SO_REUSEPORT, which would let a second server of the same user join them and take half of their
connections) or nginx, with and without `reuseport`. The server already there keeps every
connection."""
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from test_sxe_httpd import Httpd, free_port, get, root  # noqa: F401 (fixtures)


def second(build_dir, root, port, *args):  # noqa: F811
    return subprocess.run([str(build_dir / "tools" / "sxe-httpd"), "--root", str(root), "--listen",
                           f"127.0.0.1:{port}", "--workers", "2", *args],
                          capture_output=True, text=True, timeout=10)


@pytest.mark.parametrize("spread", ["reuseport", "cpu", "hand-off"])
def test_a_second_sxe_httpd_on_the_port_exits(build_dir, root, spread):  # noqa: F811
    first = Httpd(build_dir, root, "--workers", "2", "--spread", spread)
    try:
        for other in ("reuseport", "cpu", "hand-off"):
            result = second(build_dir, root, first.port, "--spread", other)
            assert result.returncode == 1, result.stderr
            assert result.stderr == (f"sxe-httpd: cannot listen on 127.0.0.1:{first.port}: "
                                     "Address already in use\n")
        for _ in range(20):  # every connection still goes to the first
            status, _, body = get(first.port, "/hello.txt")
            assert status == 200 and body == b"Hello World\n"
    finally:
        assert first.stop() == 0


@pytest.fixture
def nginx(tmp_path):
    """Starts nginx (Debian's nginx-light, master and one worker) on 127.0.0.1:PORT, with
    `reuseport` if asked; stops it by its process id."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    started = []

    def start(reuseport):
        port = free_port()
        prefix = tmp_path / f"nginx-{port}"
        prefix.mkdir()
        (prefix / "nginx.conf").write_text(f"""
daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{}}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    server {{
        listen 127.0.0.1:{port}{" reuseport" if reuseport else ""};
        location / {{
            return 200 "nginx\\n";
        }}
    }}
}}
""")
        process = subprocess.Popen([binary, "-p", str(prefix), "-e", str(prefix / "error.log"),
                                    "-c", str(prefix / "nginx.conf")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        started.append(process)
        deadline = time.monotonic() + 5
        while True:  # until it answers, and it is nginx that does
            try:
                status, fields, body = get(port, "/")
                if status == 200 and body == b"nginx\n" and fields["server"].startswith("nginx"):
                    return port
            except ConnectionRefusedError:
                pass
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.05)

    yield start
    for process in started:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.skipif(shutil.which("nginx") is None and not os.path.exists("/usr/sbin/nginx"),
                    reason="nginx is not installed (Debian's nginx-light)")
@pytest.mark.parametrize("reuseport", [False, True], ids=["listen", "listen-reuseport"])
def test_sxe_httpd_beside_nginx_exits(build_dir, root, nginx, reuseport):  # noqa: F811
    port = nginx(reuseport)
    for spread in ("reuseport", "hand-off"):
        result = second(build_dir, root, port, "--spread", spread)
        assert result.returncode == 1, result.stderr
        assert "Address already in use" in result.stderr
    for _ in range(20):
        status, fields, body = get(port, "/")
        assert status == 200 and body == b"nginx\n" and fields["server"].startswith("nginx")
