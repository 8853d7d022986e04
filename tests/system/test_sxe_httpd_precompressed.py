"""sxe-httpd --precompressed: FILE.br, FILE.zst and FILE.gz, compressed ahead of time, go to the
clients whose Accept-Encoding takes them (by weight, br before zstd before gzip among equals),
with the original's type, Content-Encoding and Vary; never for a range, never a sidecar older
than its original or a link; curl and Chromium decode what they get."""
import gzip
import json
import os
import shutil
import subprocess
import time

import pytest

from test_sxe_httpd import Httpd, exchange, get, root  # noqa: F401 (fixtures)

SCRIPT = b"document.title = 'ran: ' + " + b"'sxe-httpd sends what the browser takes; ' + " * 200 + b"'';\n"


def compressed(data):
    """The three sidecars' bytes: real brotli, zstd and gzip."""
    import brotli  # Debian's python3-brotli

    zstd = subprocess.run([shutil.which("zstd") or "zstd", "-q", "-c", "-19"], input=data,
                          capture_output=True, check=True).stdout
    return {"br": brotli.compress(data), "zstd": zstd, "gzip": gzip.compress(data, mtime=0)}


@pytest.fixture
def site(root):  # noqa: F811
    """app.js with its three sidecars (each a different size), and a page that runs it."""
    (root / "app.js").write_bytes(SCRIPT)
    sidecars = compressed(SCRIPT)
    for coding, suffix in (("br", ".br"), ("zstd", ".zst"), ("gzip", ".gz")):
        (root / f"app.js{suffix}").write_bytes(sidecars[coding])
    (root / "page.html").write_bytes(b"<!DOCTYPE html><html><head><script src='/app.js'></script>"
                                     b"</head><body>page</body></html>\n")
    assert len({len(SCRIPT), *map(len, sidecars.values())}) == 4
    return root, sidecars


@pytest.fixture
def httpd(build_dir, site):
    servers = []

    def start(*args):
        server = Httpd(build_dir, site[0], "--workers", "1", *args)
        servers.append(server)
        return server

    yield start
    for server in servers:
        if server.process.poll() is None:
            assert server.stop() == 0


CHOICES = [
    ("gzip", "gzip"),
    ("gzip, deflate, br", "br"),
    ("gzip, deflate, br, zstd", "br"),        # equal weights: the server's order
    ("zstd, gzip", "zstd"),
    ("gzip, br;q=0.5", "gzip"),               # the higher weight wins
    ("br;q=0.2, zstd;q=0.3, gzip;q=0.1", "zstd"),
    ("br;q=0, *", "zstd"),                    # br refused; * stands for the others
    ("*", "br"),
    ("x-gzip", "gzip"),
    ("BR", "br"),
    ("br ; q=1.000", "br"),
    ("br;q=1.5", None),                       # not a weight: refused
    ("br;q=abc, gzip;q=0.001", "gzip"),
    ("identity", None),
    ("*;q=0", None),
    ("deflate", None),
    ("", None),
]


@pytest.mark.parametrize("accept,coding", CHOICES)
def test_each_client_gets_the_coding_it_accepts(httpd, site, accept, coding):
    _, sidecars = site
    server = httpd("--precompressed")
    status, fields, body = get(server.port, "/app.js", [f"Accept-Encoding: {accept}"])
    assert status == 200 and fields["vary"] == "Accept-Encoding"
    assert fields["content-type"] == get(server.port, "/app.js")[1]["content-type"]
    if coding is None:
        assert body == SCRIPT and "content-encoding" not in fields
    else:
        assert body == sidecars[coding] and fields["content-encoding"] == coding
        assert int(fields["content-length"]) == len(sidecars[coding])


def test_head_ranges_and_validators(httpd, site):
    _, sidecars = site
    server = httpd("--precompressed")
    br = ["Accept-Encoding: br"]
    status, fields, body = get(server.port, "/app.js", br, method="HEAD")
    assert (status, body, fields["content-encoding"]) == (200, b"", "br")
    assert int(fields["content-length"]) == len(sidecars["br"])
    etag = fields["etag"]
    assert etag != get(server.port, "/app.js")[1]["etag"]  # each representation its own
    status, fields, body = get(server.port, "/app.js", br + [f"If-None-Match: {etag}"])
    assert (status, body, fields["vary"]) == (304, b"", "Accept-Encoding")
    status, fields, body = get(server.port, "/app.js", br + ["Range: bytes=0-9"])
    assert (status, body) == (206, SCRIPT[:10]) and "content-encoding" not in fields
    status, fields, body = get(server.port, "/app.js.br")  # the sidecar by its own name
    assert (status, body) == (200, sidecars["br"]) and "content-encoding" not in fields


def test_stale_linked_new_and_removed_sidecars(httpd, site):
    root, sidecars = site
    server = httpd("--precompressed")
    past = time.time() - 3600
    os.utime(root / "app.js.br", (past, past))  # older than app.js: not used
    (root / "app.js.zst").unlink()
    os.symlink(root / "app.js.gz", root / "app.js.zst")  # a link: not used
    accept = ["Accept-Encoding: br, zstd"]
    assert get(server.port, "/app.js", accept)[2] == SCRIPT
    os.utime(root / "app.js.br")  # fresh again: found at the next check, within a second or two
    eventually(lambda: get(server.port, "/app.js", accept)[2] == sidecars["br"])
    (root / "app.js.br").unlink()  # gone: the original, at the next check too
    eventually(lambda: get(server.port, "/app.js", accept)[2] == SCRIPT)
    assert get(server.port, "/app.js", ["Accept-Encoding: gzip"])[2] == sidecars["gzip"]


def eventually(condition):
    """Files are checked again at most once a second: what changed is seen within two."""
    deadline = time.monotonic() + 2.5
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_change_within_the_second_counts(httpd, site):
    """Times are compared to the nanosecond: a sidecar 0.8 s older than its original in the same
    second is stale, and one rewritten in place (the same size, the same second) is seen anew."""
    root, sidecars = site
    server = httpd("--precompressed")
    gz = ["Accept-Encoding: gzip"]
    os.utime(root / "app.js.gz", ns=(0, 1_700_000_000_100_000_000))
    os.utime(root / "app.js", ns=(0, 1_700_000_000_900_000_000))
    assert get(server.port, "/app.js", gz)[2] == SCRIPT
    os.utime(root / "app.js.gz", ns=(0, 1_700_000_001_000_000_000))
    eventually(lambda: get(server.port, "/app.js", gz)[2] == sidecars["gzip"])
    first = get(server.port, "/app.js", gz)[1]["etag"]
    rewritten = bytes(reversed(sidecars["gzip"]))  # the same size, other bytes
    (root / "app.js.gz").write_bytes(rewritten)
    os.utime(root / "app.js.gz", ns=(0, 1_700_000_001_500_000_000))
    eventually(lambda: get(server.port, "/app.js", gz)[2] == rewritten)
    assert get(server.port, "/app.js", gz)[1]["etag"] != first


def test_each_representation_has_its_own_validator(httpd, site):
    """A sidecar with its original's size and time (touch -r) still has an ETag of its own; an
    encoded answer offers no ranges (a Range gets the original), and its 304 names no coding."""
    root, _ = site
    (root / "same.bin").write_bytes(b"x" * 64)
    (root / "same.bin.gz").write_bytes(b"y" * 64)
    stamp = (root / "same.bin").stat()
    os.utime(root / "same.bin.gz", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    server = httpd("--precompressed")
    status, fields, _ = get(server.port, "/same.bin", ["Accept-Encoding: gzip"])
    assert (status, fields["content-encoding"]) == (200, "gzip") and "accept-ranges" not in fields
    coded = fields["etag"]
    status, fields, _ = get(server.port, "/same.bin")
    assert status == 200 and fields["etag"] != coded and fields["accept-ranges"] == "bytes"
    assert get(server.port, "/same.bin", [f"If-None-Match: {coded}"])[0] == 200
    status, fields, _ = get(server.port, "/same.bin", ["Accept-Encoding: gzip",
                                                       f"If-None-Match: {coded}"])
    assert (status, fields["vary"]) == (304, "Accept-Encoding") and "content-encoding" not in fields


def test_every_accept_encoding_line_counts(httpd, site):
    _, sidecars = site
    server = httpd("--precompressed")
    lines = ["Accept-Encoding: identity", "Accept-Encoding: gzip"]
    assert get(server.port, "/app.js", lines)[2] == sidecars["gzip"]
    lines = ["Accept-Encoding: gzip", "Accept-Encoding: gzip;q=0, br;q=0.1"]
    assert get(server.port, "/app.js", lines)[2] == sidecars["br"]


def test_a_fifo_in_a_sidecars_place_holds_nothing(httpd, site):
    """Within the second its sidecars are trusted, app.js.gz becomes a FIFO: it is not opened to
    wait for a writer; the original goes out, and the server answers on."""
    root, _ = site
    server = httpd("--precompressed")
    assert get(server.port, "/app.js")[0] == 200  # the check that found app.js.gz
    (root / "app.js.gz").unlink()
    os.mkfifo(root / "app.js.gz")
    started = time.monotonic()
    status, fields, body = get(server.port, "/app.js", ["Accept-Encoding: gzip"])
    assert (status, body) == (200, SCRIPT) and time.monotonic() - started < 1
    os.unlink(root / "app.js")
    os.mkfifo(root / "app.js")  # and the original, once it is checked again
    eventually(lambda: get(server.port, "/app.js")[0] == 403)
    assert get(server.port, "/hello.txt")[2] == b"Hello World\n"


def test_off_by_default(httpd, site):
    server = httpd()
    status, fields, body = get(server.port, "/app.js", ["Accept-Encoding: br, gzip, zstd"])
    assert (status, body) == (200, SCRIPT) and "vary" not in fields


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip"])
def test_curl_decodes_each_coding(httpd, site, coding):
    server = httpd("--precompressed")
    result = subprocess.run(["curl", "-sS", "--compressed", "-H", f"Accept-Encoding: {coding}",
                             "-D", "-", "-o", "-", f"http://127.0.0.1:{server.port}/app.js"],
                            capture_output=True, timeout=10)
    assert result.returncode == 0, result.stderr
    head, _, body = result.stdout.partition(b"\r\n\r\n")
    assert f"content-encoding: {coding}".encode() in head.lower() and body == SCRIPT


@pytest.mark.serial  # a browser takes both cores for a while
def test_chromium_runs_a_precompressed_script(httpd, site, browsers, tmp_path):
    """The page's script comes in whichever coding Chromium asks for over plain HTTP, as the
    access log's byte count shows, and runs."""
    root, sidecars = site
    log = tmp_path / "access.json"
    server = httpd("--precompressed", "--access-log", str(log), "--log-format", "json")
    browser = browsers()
    browser.get(f"http://127.0.0.1:{server.port}/page.html")
    deadline = time.monotonic() + 10
    while not browser.title.startswith("ran: "):  # (a title's spaces at the end are trimmed)
        assert time.monotonic() < deadline, browser.title
        time.sleep(0.05)
    assert browser.title == ("ran: " + "sxe-httpd sends what the browser takes; " * 200).strip()
    browser.quit()
    assert server.stop() == 0
    sent = [entry["body_bytes_sent"] for entry in map(json.loads, log.read_text().splitlines())
            if entry["target"] == "/app.js" and entry["status"] == 200]
    assert sent and sent[0] in {len(data) for data in sidecars.values()}, (sent, sidecars)
