"""sxe-httpd --gzip LEVEL and --brotli LEVEL: text files compressed as they are served, to the
clients whose Accept-Encoding takes it; small files' results cached until they change, large ones
coded as they go out, paced by the client; never a range, an image, a small file or a sidecar's
place; curl and Chromium decode what they get."""
import base64
import gzip
import json
import os
import random
import socket
import subprocess
import time
import zlib

import pytest

from test_sxe_httpd import Httpd, exchange, get, root  # noqa: F401 (fixtures)


def words(count, seed):
    """Text that compresses as prose does (about 5:1), the same on every run."""
    pick = random.Random(seed).choice
    vocabulary = [b"alpha", b"beta", b"gamma", b"delta", b"sxe", b"server", b"<p>", b"</p>\n"]
    return b" ".join(pick(vocabulary) for _ in range(count))


PAGE = words(3000, 1)       # ~15 KB: compressed once and cached
BUNDLE = words(400000, 2)   # ~2 MB: compressed as it is sent
# ~4 MB of text that compresses to ~3 MB: more than the kernel's socket buffers take (~0.5 MB on
# loopback), so that a client that does not read holds its stream for as long as it likes
NOISE = base64.b64encode(random.Random(3).randbytes(3 << 20))


@pytest.fixture
def site(root):  # noqa: F811
    (root / "page.html").write_bytes(PAGE)
    (root / "bundle.js").write_bytes(BUNDLE)
    (root / "noise.txt").write_bytes(NOISE)
    (root / "tiny.css").write_bytes(b"p { margin: 0 }\n" * 4)  # under --compress-min
    (root / "photo.png").write_bytes(PAGE)                       # compressible, but not a type to
    (root / "data.json").write_bytes(b'{"k": "' + PAGE[:4000] + b'"}')
    return root


@pytest.fixture
def httpd(build_dir, site):
    servers = []

    def start(*args):
        server = Httpd(build_dir, site, "--workers", "1", *args)
        servers.append(server)
        return server

    yield start
    for server in servers:
        if server.process.poll() is None:
            assert server.stop() == 0


def decoded(fields, body):
    coding = fields.get("content-encoding")
    if coding == "gzip":
        return gzip.decompress(body)
    if coding == "br":
        import brotli  # Debian's python3-brotli
        return brotli.decompress(body)
    assert coding is None, coding
    return body


def dechunk(body):
    out, at = b"", 0
    while True:
        line_end = body.index(b"\r\n", at)
        size = int(body[at:line_end], 16)
        if size == 0:
            return out
        out += body[line_end + 2:line_end + 2 + size]
        at = line_end + 4 + size


def fetch(port, path, headers=(), method="GET"):
    """status, fields, and the body as sent (de-chunked) and decoded."""
    status, fields, body = get(port, path, headers, method)
    if fields.get("transfer-encoding") == "chunked":
        body = dechunk(body)
    return status, fields, body


def small_window(port):
    """A connection whose receive window stays small (set before the handshake: a window once
    offered cannot shrink, and the kernel would take bytes past the buffer), as a slow reader's."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    return sock


CHOICES = [("gzip", "gzip"), ("gzip, deflate, br", "br"), ("gzip, br;q=0.5", "gzip"),
           ("br;q=0, *", "gzip"), ("*", "br"), ("x-gzip", "gzip"), ("identity", None),
           ("*;q=0", None), ("deflate, zstd", None), ("", None)]


ORIGINALS = {"/page.html": PAGE, "/bundle.js": BUNDLE}


@pytest.mark.parametrize("path", ORIGINALS)
@pytest.mark.parametrize("accept,coding", CHOICES)
def test_each_client_gets_the_coding_it_accepts(httpd, accept, coding, path):
    original = ORIGINALS[path]
    server = httpd("--gzip", "5", "--brotli", "4")
    status, fields, body = fetch(server.port, path, [f"Accept-Encoding: {accept}"])
    assert status == 200 and fields.get("content-encoding") == coding, fields
    assert fields["vary"] == "Accept-Encoding" and decoded(fields, body) == original
    if coding is not None:
        assert "accept-ranges" not in fields and len(body) < len(original) // 3
        assert fields["etag"].endswith(f"-{coding}{5 if coding == 'gzip' else 4}\"")
    # small files say their length; large ones are chunked, as they are coded while they go
    assert ("content-length" in fields) == (coding is None or path == "/page.html"), fields


def test_gzip_is_what_zlib_makes_at_that_level(httpd):
    """The bytes are zlib's at the level asked for: a higher level makes a smaller answer."""
    sizes = {}
    for level in ("1", "9"):
        server = httpd("--gzip", level)
        _, fields, body = fetch(server.port, "/bundle.js", ["Accept-Encoding: gzip"])
        assert gzip.decompress(body) == BUNDLE
        sizes[level] = len(body)
        assert server.stop() == 0
    assert sizes["9"] < sizes["1"]
    assert abs(sizes["9"] - len(gzip.compress(BUNDLE, 9))) < len(BUNDLE) // 100


def test_what_is_never_compressed(httpd):
    server = httpd("--gzip", "6", "--compress-min", "100")
    accept = ["Accept-Encoding: gzip, br"]
    for path in ("/tiny.css", "/photo.png"):
        status, fields, body = fetch(server.port, path, accept)
        assert status == 200 and "content-encoding" not in fields, path
        assert fields["vary"] == "Accept-Encoding"
    # a range is of the original's bytes, whatever the client accepts
    for path, original in (("/page.html", PAGE), ("/bundle.js", BUNDLE)):
        status, fields, body = fetch(server.port, path, accept + ["Range: bytes=10-19"])
        assert (status, body, fields.get("content-encoding")) == (206, original[10:20], None)
    # brotli is not offered unless asked for
    status, fields, body = fetch(server.port, "/page.html", ["Accept-Encoding: br"])
    assert "content-encoding" not in fields and body == PAGE
    # --compress-min: tiny.css (64 bytes) goes coded once the bar is under it
    assert server.stop() == 0
    server = httpd("--gzip", "6", "--compress-min", "10")
    _, fields, body = fetch(server.port, "/tiny.css", accept)
    assert fields["content-encoding"] == "gzip" and gzip.decompress(body) == b"p { margin: 0 }\n" * 4
    _, fields, body = fetch(server.port, "/data.json", accept)
    assert fields["content-encoding"] == "gzip" and gzip.decompress(body).startswith(b'{"k": ')


def test_off_by_default_and_levels_checked(httpd, build_dir, site):
    server = httpd()
    status, fields, body = fetch(server.port, "/page.html", ["Accept-Encoding: gzip, br"])
    assert (status, body) == (200, PAGE) and "vary" not in fields
    for args, says in ((["--gzip", "10"], "--gzip must be a number from 0 to 9, not '10'"),
                       (["--brotli", "10"], "--brotli must be a number from 0 to 9, not '10'"),
                       (["--gzip", "-1"], "--gzip must be a number from 0 to 9")):
        result = subprocess.run([str(build_dir / "tools" / "sxe-httpd"), "--root", str(site),
                                 *args], capture_output=True, timeout=10)
        assert result.returncode == 2 and says in result.stderr.decode(), result.stderr


@pytest.mark.parametrize("path", ["/page.html", "/bundle.js"])
def test_head_and_validators(httpd, path):
    server = httpd("--gzip", "5")
    accept = ["Accept-Encoding: gzip"]
    _, coded, _ = fetch(server.port, path, accept)
    _, plain, _ = fetch(server.port, path)
    assert coded["etag"] != plain["etag"] and coded["last-modified"] == plain["last-modified"]
    status, fields, body = get(server.port, path, accept, method="HEAD")
    assert (status, body, fields["etag"]) == (200, b"", coded["etag"])
    assert fields["content-encoding"] == "gzip"
    # each representation validates with its own tag only
    status, fields, _ = get(server.port, path, accept + [f"If-None-Match: {coded['etag']}"])
    assert status == 304 and fields["etag"] == coded["etag"] and fields["vary"] == "Accept-Encoding"
    status, _, body = fetch(server.port, path, accept + [f"If-None-Match: {plain['etag']}"])
    assert status == 200 and gzip.decompress(body)
    status, _, _ = get(server.port, path, [f"If-None-Match: {plain['etag']}"])
    assert status == 304
    since = [f"If-Modified-Since: {coded['last-modified']}"]
    assert get(server.port, path, accept + since)[0] == 304


def test_a_changed_file_is_compressed_again(httpd, site):
    """The cached copy lives as long as its file: a file changed within the second gets a new
    copy at the next check (once a second)."""
    server = httpd("--gzip", "5")
    accept = ["Accept-Encoding: gzip"]
    assert gzip.decompress(fetch(server.port, "/page.html", accept)[2]) == PAGE
    changed = PAGE.replace(b"alpha", b"omega")
    (site / "page.html").write_bytes(changed)
    deadline = time.monotonic() + 5
    while gzip.decompress(fetch(server.port, "/page.html", accept)[2]) != changed:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    (site / "page.html").unlink()
    deadline = time.monotonic() + 5
    while fetch(server.port, "/page.html", accept)[0] != 404:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_http_1_0_gets_a_close_delimited_body(httpd):
    server = httpd("--gzip", "5")
    data = exchange(server.port, b"GET /bundle.js HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n")
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"Content-Encoding: gzip" in head and b"Transfer-Encoding" not in head
    assert gzip.decompress(body) == BUNDLE


def test_keep_alive_and_pipelined_answers_stay_in_order(httpd):
    server = httpd("--gzip", "5")
    request = b"GET %s HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n"
    raw = (request % b"/bundle.js") + (request % b"/page.html") + (request % b"/bundle.js")
    raw += b"GET /page.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    data = exchange(server.port, raw, timeout=10)
    bodies = []
    while data:
        head, _, data = data.partition(b"\r\n\r\n")
        if b"Transfer-Encoding: chunked" in head:
            end = data.index(b"\r\n0\r\n\r\n") + 7
            bodies.append(gzip.decompress(dechunk(data[:end])))
        else:
            length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
            body = data[:length]
            bodies.append(gzip.decompress(body) if b"Content-Encoding: gzip" in head else body)
            end = length
        data = data[end:]
    assert bodies == [BUNDLE, PAGE, BUNDLE, PAGE]


def test_a_slow_reader_holds_one_stream_back_and_no_one_else(httpd):
    """A client that reads nothing gets no more coded than its connection holds; the loop serves
    others meanwhile; when it reads, the rest comes; a client that leaves mid-way frees its
    coder (the server goes on and stops cleanly)."""
    server = httpd("--gzip", "5")
    slow = small_window(server.port)
    slow.sendall(b"GET /bundle.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
    time.sleep(0.3)
    started = time.monotonic()
    for _ in range(20):
        assert fetch(server.port, "/page.html")[2] == PAGE
    assert time.monotonic() - started < 2
    data = b""
    slow.settimeout(10)
    while not data.endswith(b"\r\n0\r\n\r\n"):
        chunk = slow.recv(65536)
        assert chunk
        data += chunk
    slow.close()
    assert gzip.decompress(dechunk(data.partition(b"\r\n\r\n")[2])) == BUNDLE
    for _ in range(5):  # clients that leave at once, and mid-way
        gone = socket.create_connection(("127.0.0.1", server.port))
        gone.sendall(b"GET /bundle.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br\r\n\r\n")
        gone.recv(1000)
        gone.close()
    assert fetch(server.port, "/page.html")[2] == PAGE


def test_a_slow_reader_gets_a_large_brotli_answer_whole(httpd):
    """brotli gathers megabytes at its default settings, then gives them at once: more than a
    connection may queue. Flushed each piece and sent as the connection drains, the whole answer
    reaches a client that reads slowly."""
    server = httpd("--brotli", "5")
    sock = small_window(server.port)
    sock.sendall(b"GET /noise.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br\r\n\r\n")
    data = b""
    sock.settimeout(10)
    while not data.endswith(b"\r\n0\r\n\r\n"):
        chunk = sock.recv(32768)
        assert chunk, len(data)  # the server must not cut it off
        data += chunk
        time.sleep(0.01)  # the sleep is the test: a client slower than the coder (~3 MB/s)
    sock.close()
    import brotli  # Debian's python3-brotli
    assert brotli.decompress(dechunk(data.partition(b"\r\n\r\n")[2])) == NOISE


def test_a_client_that_takes_nothing_is_cut_off(httpd):
    """A held answer has no write timeout of the module's: the streams' sweep cuts off a client
    that takes nothing for --write-timeout, and its coder is freed."""
    server = httpd("--gzip", "1", "--write-timeout", "2")
    sock = small_window(server.port)
    sock.sendall(b"GET /noise.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
    time.sleep(4)  # the sleep is the test: a client that reads nothing for twice the timeout
    data = b""
    sock.settimeout(10)
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    sock.close()
    assert data.startswith(b"HTTP/1.1 200 OK") and not data.endswith(b"\r\n0\r\n\r\n")
    assert fetch(server.port, "/page.html", ["Accept-Encoding: gzip"])[0] == 200
    assert server.stop() == 0
    assert "took nothing for" in server.process.stderr.read().decode()


def test_past_the_streams_limit_files_go_out_as_they_are(httpd):
    """At most 64 large files are coded at once per worker: the 65th is sent as it is, with its
    length, rather than waiting or failing."""
    server = httpd("--gzip", "1")
    holders = []
    for _ in range(64):
        holder = small_window(server.port)
        holder.sendall(b"GET /noise.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
        holder.recv(100)  # the answer has started: its stream is held
        holders.append(holder)
    status, fields, body = fetch(server.port, "/noise.txt", ["Accept-Encoding: gzip"])
    assert status == 200 and "content-encoding" not in fields and body == NOISE
    for holder in holders:
        holder.close()
    deadline = time.monotonic() + 5
    while "content-encoding" not in fetch(server.port, "/noise.txt", ["Accept-Encoding: gzip"])[1]:
        assert time.monotonic() < deadline  # their streams ended as their clients left
        time.sleep(0.05)


def test_a_file_cut_short_while_coded_cuts_the_answer_off(httpd, site):
    """A file truncated while its coded answer goes out: the chunked body is never ended, and the
    connection closes, so no client takes a piece for the whole."""
    big = site / "noise.txt"
    server = httpd("--gzip", "1")
    sock = small_window(server.port)
    sock.sendall(b"GET /noise.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
    first = sock.recv(4096)
    assert b"200 OK" in first
    os.truncate(big, 100000)
    data = first
    sock.settimeout(10)
    while chunk := sock.recv(65536):
        data += chunk
    assert not data.endswith(b"\r\n0\r\n\r\n") and len(data) < len(NOISE)
    sock.close()
    big.write_bytes(NOISE)
    assert server.process.poll() is None


def test_a_sidecar_wins_over_compressing(httpd, site):
    sidecar = gzip.compress(PAGE, 9, mtime=0)
    (site / "page.html.gz").write_bytes(sidecar)
    server = httpd("--gzip", "1", "--precompressed")
    _, fields, body = fetch(server.port, "/page.html", ["Accept-Encoding: gzip"])
    assert body == sidecar and fields["etag"].endswith('-gzip"')


def test_over_http2(httpd):
    server = httpd("--gzip", "5", "--brotli", "5")
    for path, original in (("/page.html", PAGE), ("/bundle.js", BUNDLE)):
        result = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-H",
                                 "Accept-Encoding: gzip", "-D", "-", "-o", "-",
                                 f"http://127.0.0.1:{server.port}{path}"],
                                capture_output=True, timeout=20)
        assert result.returncode == 0, result.stderr
        head, _, body = result.stdout.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/2 200") and b"content-encoding: gzip" in head.lower()
        assert gzip.decompress(body) == original


@pytest.mark.parametrize("coding", ["br", "gzip"])
def test_curl_decodes_each_coding(httpd, coding):
    server = httpd("--gzip", "5", "--brotli", "5")
    for path, original in (("/page.html", PAGE), ("/bundle.js", BUNDLE)):
        result = subprocess.run(["curl", "-sS", "--compressed", "-H", f"Accept-Encoding: {coding}",
                                 "-D", "-", "-o", "-", f"http://127.0.0.1:{server.port}{path}"],
                                capture_output=True, timeout=20)
        assert result.returncode == 0, result.stderr
        head, _, body = result.stdout.partition(b"\r\n\r\n")
        assert f"content-encoding: {coding}".encode() in head.lower() and body == original


def test_the_config_file_keys(httpd, site, tmp_path):
    config = tmp_path / "httpd.yaml"
    config.write_text("gzip: 3\nbrotli: 2\ncompress-min: 20\n")
    server = httpd("--config", str(config))
    _, fields, body = fetch(server.port, "/tiny.css", ["Accept-Encoding: br"])
    assert fields["content-encoding"] == "br" and fields["etag"].endswith('-br2"')
    _, fields, body = fetch(server.port, "/page.html", ["Accept-Encoding: gzip"])
    assert fields["etag"].endswith('-gzip3"') and zlib.decompress(body, 31) == PAGE


@pytest.mark.serial  # a browser takes both cores for a while
def test_chromium_runs_a_compressed_script(httpd, site, browsers, tmp_path):
    """Chromium (which asks for gzip and deflate over plain HTTP, brotli too over HTTPS) gets the
    small page and the large script coded, and runs the script."""
    (site / "app.js").write_bytes(b"document.title = 'ran ' + (" + b"1 + " * 100000 + b"0);\n")
    (site / "run.html").write_bytes(b"<!DOCTYPE html><html><head><script src='/app.js'></script>"
                                    b"</head><body>" + PAGE + b"</body></html>\n")
    log = tmp_path / "access.json"
    server = httpd("--gzip", "5", "--brotli", "5", "--access-log", str(log), "--log-format",
                   "json")
    browser = browsers()
    browser.get(f"http://127.0.0.1:{server.port}/run.html")
    deadline = time.monotonic() + 10
    while browser.title != "ran 100000":
        assert time.monotonic() < deadline, browser.title
        time.sleep(0.05)
    browser.quit()
    assert server.stop() == 0
    sent = {entry["target"]: entry["body_bytes_sent"]
            for entry in map(json.loads, log.read_text().splitlines()) if entry["status"] == 200}
    assert sent["/app.js"] < os.path.getsize(site / "app.js") // 20, sent
    assert sent["/run.html"] < os.path.getsize(site / "run.html") // 3, sent
