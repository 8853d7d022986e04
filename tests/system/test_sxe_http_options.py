"""sxe-http's options at their limits: each number at its least and most is taken (the run then
fails to connect to a closed port, exit 1), and one past either end is refused with the usage
error that names the range (exit 2); the other options' own checks likewise."""
import socket

import pytest


def closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens there once the probe is closed


# (option, least, most), as sxe-http's usage error names them.
NUMBERS = [
    ("-p", "PORT", 1, 65535),
    ("-n", "QUERIES", 1, 1 << 40),
    ("-c", "CONNECTIONS", 1, 10000000),
    ("-d", "SECONDS", 1, 86400),
    ("-P", "DEPTH", 1, 128),
    ("-R", "RATE", 1, 100000000),
    ("--tick", "USEC", 1, 100000),
    ("-w", "WORKERS", 1, 64),
    ("-t", "SECONDS", 1, 3600),
    ("-r", "BATCH", 1, 1000000),
    ("-e", "STATUS", 100, 599),
    ("--ws-size", "BYTES", 0, 16 << 20),
]


def run(sxe_http, *args):
    port = closed_port()
    base = ["-i", "127.0.0.1", "-p", str(port), "-n", "1", "-c", "1", "-t", "1"]
    return sxe_http(*base, *args, timeout=30)


@pytest.mark.parametrize("option,name,least,most", NUMBERS)
def test_each_number_at_its_limits(sxe_http, option, name, least, most):
    for value in (least - 1, most + 1, "x", "1x", ""):
        result = run(sxe_http, option, str(value))
        assert result.returncode == 2, (option, value, result.stderr)
        assert result.stderr == (f"sxe-http: {option} {name} must be a whole number from {least} "
                                 f"to {most}, not '{value}'\n"
                                 "(sxe-http --help explains the options)\n"), result.stderr
    takes = [least] + ([] if option in ("-c", "-w") else [most])  # not 10^7 connections
    for value in takes:
        extra = ["--ws", "/ws"] if option == "--ws-size" else []
        result = run(sxe_http, option, str(value), *extra)
        assert result.returncode == 1 and "must be" not in result.stderr, (option, value,
                                                                             result.stderr)


def test_the_other_options_checks(sxe_http, tmp_path):
    def refused(*args):
        result = run(sxe_http, *args)
        assert result.returncode == 2, result.stderr
        return result.stderr.splitlines()[0]

    assert refused("--ws", "ws") == "sxe-http: --ws 'ws': a path starts with / and has no spaces"
    assert refused("--ws", "/a b").startswith("sxe-http: --ws '/a b'")
    assert refused("-s", "1.2.3") == "sxe-http: -s '1.2.3': not an IPv4 or IPv6 address"
    many = ",".join(["127.0.0.1"] * 65)
    assert refused("-s", many) == f"sxe-http: at most 64 source addresses, not more as in '{many}'"
    assert refused("-f", str(tmp_path / "missing")).startswith(
        "sxe-http: cannot read the request file")
    empty = tmp_path / "paths"
    empty.write_text("")
    assert refused("-U", str(empty)) == f"sxe-http: -U {empty}: no paths in it"
    long = tmp_path / "long"
    long.write_text("/a 2\n/" + "b" * 8190 + "\n")  # a line of 8,191 bytes and its newline
    assert refused("-U", str(long)) == f"sxe-http: -U {long} line 2: longer than 8190 bytes"
    assert refused("-H", "X: " + "y" * 9000).startswith("sxe-http: too many request headers")
    result = run(sxe_http, "-s", ",".join(["127.0.0.1"] * 64))
    assert result.returncode == 1 and "source" not in result.stderr


def recording_server():
    """A listener on 127.0.0.1 that answers every request 200 and keeps what it was sent."""
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    heard = []

    def serve():
        try:
            while True:  # a name's address is probed with a connection first: then the run's
                conn, _ = listener.accept()
                with conn:
                    data = b""
                    while chunk := conn.recv(65536):
                        data += chunk
                        while b"\r\n\r\n" in data:
                            head, data = data.split(b"\r\n\r\n", 1)
                            heard.append(head.decode())
                            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        except OSError:
            return  # the listener closed: the test is over

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread, heard


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_url_instead_of_ip_and_port(sxe_http, host):
    listener, thread, heard = recording_server()
    port = listener.getsockname()[1]
    with listener:
        result = sxe_http(f"http://{host}:{port}/a/b?c=1&d", "-n", "2", "-c", "1", "-t", "5")
    listener.close()
    thread.join(timeout=10)
    assert result.returncode == 0, result.stderr
    assert f"to 127.0.0.1:{port}," in result.stdout  # the address the name gave, and answered
    assert len(heard) == 2
    for head in heard:
        lines = head.split("\r\n")
        assert lines[0] == "GET /a/b?c=1&d HTTP/1.1"
        assert f"Host: {host}:{port}" in lines  # the URL's authority, as a browser sends it


def test_a_url_without_a_path_asks_for_the_root_and_u_may_give_one(sxe_http):
    for extra, path in (([], "/"), (["-u", "/x"], "/x")):
        listener, thread, heard = recording_server()
        port = listener.getsockname()[1]
        with listener:
            result = sxe_http(f"HTTP://127.0.0.1:{port}", *extra, "-n", "1", "-t", "5")
        thread.join(timeout=10)
        assert result.returncode == 0, result.stderr
        assert heard[0].split("\r\n")[:2] == [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]


BRACKETS = ("its brackets hold no IPv6 address (without a zone), or more follows them than "
            ":PORT")


def test_urls_refused(sxe_http, tmp_path):
    def refused(*args):
        result = sxe_http(*args, timeout=30)
        assert result.returncode == 2, result.stderr
        return result.stderr.split("\n")[0]  # (splitlines would break at a form feed)

    for url, why in (("ftp://x/", "it starts with neither http:// nor https://"),
                     ("http://", "it names no host"), ("http://:80/", "it names no host"),
                     ("http://a:0/", "its port is not a number from 1 to 65535"),
                     ("http://a:65536/", "its port is not a number from 1 to 65535"),
                     ("http://a:8x/", "its port is not a number from 1 to 65535"),
                     ("http://[::1/", "its IPv6 address has no closing ]"),
                     ("http://[::1]x/", BRACKETS), ("http://[127.0.0.1:1]:2/", BRACKETS),
                     ("http://[:1]/", BRACKETS), ("http://[localhost]/", BRACKETS),
                     ("http://[fe80::1%lo]/", BRACKETS),
                     ("http://a:01/", "its port is not a number from 1 to 65535"),
                     ("http://a:+1/", "its port is not a number from 1 to 65535"),
                     ("http://u@h/", "it has a user or a fragment (#): not taken"),
                     ("http://h/a#b", "it has a user or a fragment (#): not taken"),
                     ("http://h/a b", "it has a space or a control character"),
                     ("http://h/a\x0cHTTP/1.0", "it has a space or a control character"),
                     ("http://h/\x7f", "it has a space or a control character"),
                     ("http://h\x0b/", "it has a space or a control character"),
                     ("http://" + "h" * 256 + "/", "its host is too long")):
        assert refused(url) == f"sxe-http: URL '{url}': {why}", url
    assert refused("http://no-such-host.invalid:1/").startswith(
        "sxe-http: URL 'http://no-such-host.invalid:1/': cannot find no-such-host.invalid: ")
    assert refused("-i", "127.0.0.1", "http://x/") == \
        "sxe-http: a URL or -i and -p, not both: 'http://x/'"
    assert refused("-u", "/a", "http://127.0.0.1:1/b") == \
        "sxe-http: -u '/a' and the URL's path '/b': give one"
    assert refused("http://a/", "http://b/") == \
        "sxe-http: unexpected argument 'http://b/' (one URL at most)"
    assert refused("-n", "1") == "sxe-http: -i IP and -p PORT, or a URL, are required"
    request = tmp_path / "request"
    request.write_text("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert refused("-f", str(request), "http://127.0.0.1:1/p") == \
        "sxe-http: -f gives the request: not with a URL's path"
    assert refused("--ws", "/w", "http://127.0.0.1:1/p") == \
        "sxe-http: --ws gives the request: not with a URL's path"
    paths = tmp_path / "paths"
    paths.write_text("/a\n")
    assert refused("-U", str(paths), "http://127.0.0.1:1/p") == \
        "sxe-http: -U FILE gives the paths: not with a URL's path"
    assert refused("-u", "/a b", "http://127.0.0.1:1/") == \
        "sxe-http: -u '/a b': a space or a control character in the path"
