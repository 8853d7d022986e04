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
