"""sxe-httpd's media types: the system's /etc/mime.types (Debian's media-types) by default, or
--mime-types FILE, whose types win over the table built in; the table serves what the file does
not name; a file that cannot be read is an error at start."""
import os
import subprocess

import pytest

from test_sxe_httpd import get, httpd, root  # noqa: F401 (fixtures)


def types_of(server, names):
    return {name: get(server.port, "/" + name)[1]["content-type"] for name in names}


@pytest.mark.skipif(not os.path.exists("/etc/mime.types"),
                    reason="no /etc/mime.types (Debian's media-types)")
def test_the_system_s_types_by_default(httpd, root):  # noqa: F811
    for name in ("book.epub", "page.HTML", "notes.txt"):
        (root / name).write_bytes(b"x")
    server = httpd("--workers", "1")
    assert types_of(server, ["book.epub", "page.HTML", "notes.txt"]) == {
        "book.epub": "application/epub+zip",  # not in the table built in
        "page.HTML": "text/html; charset=utf-8",
        "notes.txt": "text/plain; charset=utf-8"}
    assert server.stop() == 0


def test_a_file_of_types_wins_over_the_table(httpd, root):  # noqa: F811
    types = root.parent / "my.types"
    types.write_text("# comment\n"
                     "application/x-thing\tthing THING2   # trailing comment\n"
                     "text/x-notes txt\n"
                     "\n"
                     "no-slash ignored\n"
                     f"application/{'x' * 244} long\n"  # 256 bytes: longer than a type may be
                     f"application/{'x' * 243} fits\n")
    for name in ("a.thing", "b.thing2", "c.txt", "d.png", "e.ignored", "f.long", "g.fits"):
        (root / name).write_bytes(b"x")
    server = httpd("--workers", "1", "--mime-types", str(types))
    assert types_of(server, ["a.thing", "b.thing2", "c.txt", "d.png", "e.ignored", "f.long",
                             "g.fits"]) == {
        "a.thing": "application/x-thing",
        "b.thing2": "application/x-thing",
        "c.txt": "text/x-notes; charset=utf-8",  # the file's, a text type
        "d.png": "image/png",  # the table's: the file does not name it
        "e.ignored": "application/octet-stream",
        "f.long": "application/octet-stream",
        "g.fits": f"application/{'x' * 243}"}
    assert server.stop() == 0


def test_a_file_that_cannot_be_read_stops_the_start(build_dir, root):  # noqa: F811
    result = subprocess.run([str(build_dir / "tools" / "sxe-httpd"), "--root", str(root),
                             "--mime-types", str(root.parent / "missing.types")],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 1
    assert result.stderr == (f"sxe-httpd: --mime-types {root.parent / 'missing.types'}: "
                             "No such file or directory\n")
