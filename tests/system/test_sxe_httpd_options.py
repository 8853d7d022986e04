"""sxe-httpd's options that change what a client sees, each seen doing it: --index, --evict-idle,
--defer-accept and --fastopen (on the listening socket itself, read through a duplicate of the
server's descriptor), --idle-timeout and --proxy-connections."""
import ctypes
import os
import select
import socket
import subprocess
import threading
import time

import pytest

from test_proxy import echoed, upstreams  # noqa: F401 (fixtures)
from test_sxe_httpd import exchange, free_port, get, httpd, root  # noqa: F401 (fixtures)

SYS_PIDFD_OPEN, SYS_PIDFD_GETFD = 434, 438  # x86-64 and aarch64 alike
TCP_DEFER_ACCEPT, TCP_FASTOPEN = 9, 23


def listening_socket(pid, port):
    """A duplicate of the socket pid (or a child of it) listens on port with, or None."""
    libc = ctypes.CDLL(None, use_errno=True)
    pids = [pid] + [int(child) for child in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    for owner in pids:
        pidfd = libc.syscall(SYS_PIDFD_OPEN, owner, 0)
        if pidfd < 0:
            continue
        try:
            for name in os.listdir(f"/proc/{owner}/fd"):
                try:
                    if not os.readlink(f"/proc/{owner}/fd/{name}").startswith("socket:"):
                        continue
                except OSError:
                    continue
                fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(name), 0)
                if fd < 0:
                    continue
                sock = socket.socket(fileno=fd)
                try:
                    if (sock.family == socket.AF_INET and sock.getsockname()[1] == port and
                            sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)):
                        return sock
                except OSError:
                    pass
                sock.close()
        finally:
            os.close(pidfd)
    return None


def listener_options(server):
    sock = listening_socket(server.process.pid, server.port)
    if sock is None:
        pytest.skip("cannot duplicate the server's descriptors here (pidfd_getfd, ptrace rules)")
    with sock:
        return (sock.getsockopt(socket.IPPROTO_TCP, TCP_DEFER_ACCEPT),
                sock.getsockopt(socket.IPPROTO_TCP, TCP_FASTOPEN))


def test_index_names_the_file_a_directory_serves(httpd, root):
    (root / "home.html").write_bytes(b"<h1>the home page</h1>\n")
    (root / "docs" / "home.html").write_bytes(b"docs home\n")
    server = httpd("--workers", "1", "--index", "home.html")
    assert get(server.port, "/")[2] == b"<h1>the home page</h1>\n"
    assert get(server.port, "/docs/")[2] == b"docs home\n"
    default = httpd("--workers", "1")
    assert get(default.port, "/")[2] == b"<h1>home</h1>\n"


def test_evict_idle_makes_room_for_new_connections(httpd):
    """A small table: with --evict-idle every one of 64 connections is answered, the oldest idle
    ones closed to make room, so that at most 32 stay (a table of 16 a worker takes about 30; and
    without the option test_sxe_httpd shows the later ones refused)."""
    server = httpd("--connections", "16", "--workers", "1", "--evict-idle")
    held = []
    for _ in range(64):
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.settimeout(5)
        sock.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK"), len(held)
        held.append(sock)
    open_ones, closed, deadline = list(held), 0, time.monotonic() + 10
    while closed < 64 - 32 and time.monotonic() < deadline:
        readable, _, _ = select.select(open_ones, [], [], 0.1)  # an evicted one reads its end
        for sock in readable:
            open_ones.remove(sock)
            try:
                closed += sock.recv(1) == b""
            except OSError:
                closed += 1
    for sock in held:
        sock.close()
    assert closed >= 64 - 32, closed
    assert server.stop() == 0
    log = server.process.stderr.read().decode()
    assert "SIGTERM: stopping 1 worker;" in log and "every worker has stopped" in log, log


@pytest.mark.parametrize("workers", ["1", "2"])
def test_port_0_is_told_as_the_port_chosen(build_dir, root, workers):  # noqa: F811
    """Listening on port 0, the start-up line names the port the kernel chose (the one that
    answers), and its workers in the right number."""
    process = subprocess.Popen([str(build_dir / "tools" / "sxe-httpd"), "--root", str(root),
                                "--listen", "127.0.0.1:0", "--workers", workers],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()
        said = line.split(" on 127.0.0.1:")[1].split()
        assert said[0] != "0" and said[1:4] == ["with", workers, "worker"], line
        assert said[4] == ("process" if workers == "1" else "processes"), line
        with socket.create_connection(("127.0.0.1", int(said[0])), timeout=5) as sock:
            sock.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert sock.recv(65536).endswith(b"\r\n\r\nHello World\n")
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


def test_defer_accept_and_fastopen_are_set_on_the_listener(httpd):
    plain = httpd("--workers", "1")
    assert listener_options(plain) == (0, 0)
    both = httpd("--workers", "1", "--defer-accept", "--fastopen")
    defer, fastopen = listener_options(both)
    assert defer > 0 and fastopen > 0
    assert get(both.port, "/hello.txt")[2] == b"Hello World\n"
    assert listener_options(httpd("--workers", "1", "--defer-accept"))[1] == 0
    assert listener_options(httpd("--workers", "1", "--fastopen"))[0] == 0


def idle_for(port, seconds):
    """Whether a kept-alive connection, idle after one answer, is still open after seconds."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(5)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK")
        time.sleep(seconds)
        sock.settimeout(0.05)
        try:
            return sock.recv(1) != b""
        except socket.timeout:
            return True
        except OSError:
            return False


@pytest.mark.serial
def test_idle_timeout_closes_idle_connections(httpd):
    server = httpd("--workers", "1", "--idle-timeout", "1")
    assert idle_for(server.port, 0.3)
    assert not idle_for(server.port, 2.2)
    default = httpd("--workers", "1")
    assert idle_for(default.port, 2.2)  # the default is a minute


def test_proxy_connections_caps_the_connections_to_an_upstream(httpd, upstreams):
    up = upstreams()
    server = httpd("--workers", "1", "--proxy", f"/api/=127.0.0.1:{up.port}",
                   "--proxy-connections", "1", "--proxy-pipeline", "1")
    answers = []

    def fetch(i):
        answers.append(get(server.port, f"/api/digest?i={i}&wait=0.2")[0])

    threads = [threading.Thread(target=fetch, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [200] * 4
    assert up.connections == 1


def test_a_directory_listing_page_whole(httpd, root):
    """--list: the page, byte for byte: hidden entries left out, names sorted by their bytes,
    escaped for HTML in the text and percent-encoded (all but unreserved bytes) in the links."""
    listed = root / "lst"
    listed.mkdir()
    for name in ("0num", "A-b.c_d~e", "a&b", "it's", 'q"uote', "sp ace", "x<y>z", "\u00e9",
                 ".hidden"):
        (listed / name).write_bytes(b"x")
    server = httpd("--workers", "1", "--list")
    status, _, body = get(server.port, "/lst/")
    entries = [("0num", "0num"), ("A-b.c_d~e", "A-b.c_d~e"), ("a%26b", "a&amp;b"),
               ("it%27s", "it&#39;s"), ("q%22uote", "q&quot;uote"), ("sp%20ace", "sp ace"),
               ("x%3Cy%3Ez", "x&lt;y&gt;z"), ("%C3%A9", "\u00e9")]
    want = ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Index of /lst/</title>'
            "</head>\n<body><h1>Index of /lst/</h1>\n<ul>\n" +
            "".join(f'<li><a href="{link}">{text}</a></li>\n' for link, text in entries) +
            "</ul></body></html>\n")
    assert status == 200
    assert body.decode() == want


def test_the_limits_of_proxy_options(httpd, upstreams, build_dir, root):
    """--proxy takes at most 16 upstreams a prefix and 16 prefixes; an address of up to 259 bytes
    (a name of 253, and a port); a prefix under 256. At each limit it serves; one past it, it says which and exits 2."""
    up = upstreams()
    address = f"127.0.0.1:{up.port}"
    server = httpd("--workers", "1", "--proxy", "/api/=" + ",".join([address] * 16),
                   *[arg for i in range(15) for arg in ("--proxy", f"/p{i}/={address}")])
    _, echo = echoed(server.port, "/api/x")
    assert echo["target"] == "/api/x"
    long_prefix = "/" + "p" * 254
    assert len(str(up.port)) == 5  # an ephemeral port: a name of 253 bytes, the most, with it
    longest = ".".join(["n" * 63] * 3 + ["n" * 61])
    padded = f"{longest}:{up.port}"  # 259 bytes, a name, taken
    assert len(padded) == 259
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as gone:  # a name server not there
        gone.bind(("127.0.0.1", 0))
        resolver = f"127.0.0.1:{gone.getsockname()[1]}"
    server = httpd("--workers", "1", "--proxy", f"{long_prefix}={padded}", "--resolver", resolver)
    assert get(server.port, long_prefix + "/x")[0] in (502, 504)  # routed there; no such name

    def refused(*args):
        result = subprocess.run([str(build_dir / "tools" / "sxe-httpd"), "--root", str(root),
                                 "--listen", "127.0.0.1:1", *args], capture_output=True,
                                text=True, timeout=10)
        assert result.returncode == 2, result.stderr
        return result.stderr

    assert "(at most 16)" in refused("--proxy", "/api/=" + ",".join([address] * 17))
    assert "(at most 16)" in refused("--proxy", "/api/=" + ",".join(["https://" + address] * 17))
    assert "too many --proxy options" in refused(
        *[arg for i in range(17) for arg in ("--proxy", f"/p{i}/={address}")])
    assert "at most 259 bytes" in refused("--proxy", "/api/=" + "n" + padded)
    assert "the prefix starting with /" in refused("--proxy", f"{long_prefix}p={address}")
    assert "(at most 16)" in refused("--proxy", f"/api/={address},,{address}")
    assert "no upstream given" in refused("--proxy", "/api/=")


def test_a_listing_past_its_page_is_cut_short(httpd, root):
    """A directory whose listing outgrows the page (64 KiB) is listed as far as the page goes, and
    the page is whole HTML up to there; nothing is written past it."""
    listed = root / "many"
    listed.mkdir()
    for i in range(400):
        (listed / (f"{i:03d}-" + "n" * 200)).write_bytes(b"")
    server = httpd("--workers", "1", "--list")
    status, fields, body = get(server.port, "/many/")
    assert status == 200
    assert len(body) == 65535 and int(fields["content-length"]) == 65535
    assert body.startswith(b"<!DOCTYPE html>\n") and b"</ul></body></html>" not in body
    entries = body.split(b"<ul>\n", 1)[1].split(b"</li>\n")[:-1]  # the whole ones
    assert len(entries) == 151
    for i, entry in enumerate(entries):
        name = f"{i:03d}-" + "n" * 200
        assert entry == f'<li><a href="{name}">{name}</a>'.encode()
