"""sxe-httpd --header 'PREFIX Name: value': fields added to the answers for paths under a prefix, as
nginx's add_header adds them: to 2xx and 3xx answers (files whole and in ranges, 304s, listings,
redirects, proxied answers), in the order given, and never to errors."""
import subprocess

from test_proxy import upstreams  # noqa: F401 (a fixture: an upstream that echoes any path)
from test_sxe_httpd import Httpd, get, httpd, root  # noqa: F401 (fixtures)

FRAME = "X-Frame-Options: DENY"
CACHE = "Cache-Control: max-age=60"


def test_fields_by_prefix(httpd, root):  # noqa: F811
    server = httpd("--header", f"/ {FRAME}", "--header", f"/docs/ {CACHE}", "--list")
    status, fields, body = get(server.port, "/hello.txt")
    assert (status, fields["x-frame-options"], body) == (200, "DENY", b"Hello World\n")
    assert "cache-control" not in fields
    status, fields, _ = get(server.port, "/docs/")  # its index file
    assert (status, fields["x-frame-options"], fields["cache-control"]) == (200, "DENY",
                                                                         "max-age=60")
    etag = fields["etag"]
    status, fields, body = get(server.port, "/docs/", [f"If-None-Match: {etag}"])
    assert (status, body, fields["cache-control"]) == (304, b"", "max-age=60")
    status, fields, body = get(server.port, "/docs/index.html", ["Range: bytes=0-3"])
    assert (status, body, fields["cache-control"]) == (206, b"docs", "max-age=60")
    status, fields, _ = get(server.port, "/listing/")
    assert (status, fields["x-frame-options"]) == (200, "DENY")
    status, fields, _ = get(server.port, "/docs")  # to the directory: the path asked for
    assert (status, fields["location"], fields["x-frame-options"]) == (301, "/docs/", "DENY")
    assert "cache-control" not in fields
    for path in ("/missing", "/docs/missing"):  # errors get none
        status, fields, _ = get(server.port, path)
        assert status == 404 and "x-frame-options" not in fields and "cache-control" not in fields
    # Each field once, in the order given, after the file's own.
    raw = subprocess.run(["curl", "-sI", f"http://127.0.0.1:{server.port}/docs/"],
                         capture_output=True, timeout=10).stdout
    lines = raw.decode().split("\r\n")
    assert lines.count(FRAME) == 1 and lines.count(CACHE) == 1
    assert lines.index("Accept-Ranges: bytes") < lines.index(FRAME) < lines.index(CACHE)
    assert server.stop() == 0


def test_a_value_is_sent_trimmed(httpd, root):  # noqa: F811
    """Spaces and tabs around a value are not part of it (RFC 9110 §5.5): one space is sent."""
    server = httpd("--header", "/ X-Spaced: \t  two words \t ")
    raw = subprocess.run(["curl", "-sI", f"http://127.0.0.1:{server.port}/hello.txt"],
                         capture_output=True, timeout=10).stdout
    assert "X-Spaced: two words" in raw.decode().split("\r\n"), raw
    assert server.stop() == 0


def test_proxied_answers_get_them_too(httpd, root):  # noqa: F811
    (root / "api").mkdir()
    (root / "api" / "hello.txt").write_bytes(b"Hello World\n")
    upstream = httpd()  # the same root: the target goes as it came
    front = httpd("--header", f"/api/ {FRAME}", "--proxy", f"/api/=127.0.0.1:{upstream.port}")
    status, fields, body = get(front.port, "/api/hello.txt")
    assert (status, body, fields["x-frame-options"]) == (200, b"Hello World\n", "DENY")
    status, fields, _ = get(front.port, "/api/missing")
    assert status == 404 and "x-frame-options" not in fields
    assert front.stop() == 0 and upstream.stop() == 0


def test_a_proxied_path_is_matched_decoded(httpd, upstreams):  # noqa: F811
    """An upstream may decode what the proxy forwards as it came: "%2F" into "/", then resolve the
    dot segments that makes. The prefix is matched against that, and against decoded letters."""
    up = upstreams()
    front = httpd("--workers", "1", "--proxy", f"/api/=127.0.0.1:{up.port}",
                  "--header", f"/api/admin {FRAME}", "--header", "/api/caf\u00e9 X-Cafe: 1")
    for target in ("/api/admin", "/api/x%2F..%2Fadmin", "/api/%61dmin", "/api/x/%2e%2e/admin"):
        status, fields, _ = get(front.port, target)
        assert (status, fields.get("x-frame-options")) == (200, "DENY"), target
    status, fields, _ = get(front.port, "/api/caf%C3%A9")
    assert (status, fields.get("x-cafe")) == (200, "1")
    status, fields, _ = get(front.port, "/api/other")
    assert status == 200 and "x-frame-options" not in fields and "x-cafe" not in fields
    assert front.stop() == 0


def test_a_wrong_field_is_refused(build_dir, root):  # noqa: F811
    def run(*args):
        return subprocess.run([str(build_dir / "tools" / "sxe-httpd"), "--root", str(root),
                               *args], capture_output=True, text=True, timeout=10)

    for given, why in (("docs/ A: b", "must be a PREFIX starting with /"),
                       ("/", "must be a PREFIX starting with /"),
                       ("/ NoColon", "must be a PREFIX starting with /"),
                       ("/ : empty name", "must be a PREFIX starting with /"),
                       ("/ Bad Name: x", "has a field name that is not a token"),
                       ("/ Name: a\x01b", "has a control character in its value"),
                       ("/ Name: " + "x" * 1100, "is too long")):
        result = run("--header", given)
        assert result.returncode == 2, given
        assert result.stderr.startswith(f"sxe-httpd: --header '{given}' {why}"), result.stderr
    many = [arg for i in range(1025) for arg in ("--header", "/ X: v")]
    result = run(*many)
    assert result.returncode == 2 and "is given too often (1,024 at most)" in result.stderr
    # A host's fields and the default host's go out together: 8 KB of them at most.
    big = "/ X-Big: " + "v" * 1000
    result = run(*[arg for _ in range(9) for arg in ("--header", big)])
    assert result.returncode == 2 and "longer than 8 KB together" in result.stderr
    result = run(*[arg for _ in range(4) for arg in ("--header", big)], "--host", "a.test",
                 "--root", str(root), *[arg for _ in range(5) for arg in ("--header", big)])
    assert result.returncode == 2 and "longer than 8 KB together" in result.stderr
    result = run("--host", "a.test", "--root", str(root),
                 *[arg for _ in range(4) for arg in ("--header", big)], "--host", "b.test",
                 "--root", str(root), *[arg for _ in range(4) for arg in ("--header", big)], "-t")
    assert result.returncode == 0, result.stderr  # each host's own 4 KB, 8 KB in all
    config = root.parent / "hosts.yaml"  # the file's host first, the default host's after
    config.write_text(f"hosts:\n  a.test:\n    root: {root}\n    header:\n" +
                      "".join(f"      - '{big}'\n" for _ in range(5)))
    result = run("--config", str(config), *[arg for _ in range(4) for arg in ("--header", big)])
    assert result.returncode == 2 and "longer than 8 KB together" in result.stderr
