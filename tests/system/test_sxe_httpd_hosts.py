"""sxe-httpd's virtual hosts (--host NAME... on the command line, hosts: in the file): each host
serves its own root with its own index, listings, fields, proxied prefixes and access log, found by
the request's Host (any case, with a port or a final dot), HTTP/2's :authority or an absolute
target, exact names before wildcards; every other name gets the default host."""
import json
import subprocess

import pytest

from test_proxy import upstreams  # noqa: F401 (a fixture: an upstream that echoes any path)
from test_sxe_httpd import answer_of, exchange, free_port, httpd, root  # noqa: F401 (fixtures)
from test_sxe_httpd_config import binary, served  # noqa: F401 (fixtures)
from test_sxe_httpd_metrics import scrape


def ask(port, path, host, method="GET", version="1.1", extra=""):
    """status, fields (lower-case names) and body of one request naming host (None: no Host)."""
    head = f"{method} {path} HTTP/{version}\r\n"
    head += f"Host: {host}\r\n" if host is not None else ""
    return answer_of(exchange(port, f"{head}Connection: close\r\n{extra}\r\n".encode()))


@pytest.fixture
def sites(tmp_path):
    """Three roots: a.test's, the b.test wildcard's and the deeper wildcard's, each with the same
    paths holding its own name."""
    made = {}
    for name in ("a", "b", "deep"):
        site = tmp_path / f"site-{name}"
        (site / "docs").mkdir(parents=True)
        (site / "index.html").write_text(f"{name} home\n")
        (site / "same.txt").write_text(f"{name}\n")
        made[name] = site
    (made["b"] / "page.html").write_text("b page\n")
    return made


def hosts_args(sites):
    return ["--host", "a.test,www.a.test", "--root", str(sites["a"]),
            "--host", "*.b.test", "--root", str(sites["b"]),
            "--host", "*.deep.b.test", "--root", str(sites["deep"])]


def test_each_host_serves_its_own_root(httpd, sites):  # noqa: F811
    server = httpd("--workers", "1", *hosts_args(sites))
    cases = {"a.test": b"a\n", "www.a.test": b"a\n", "A.TEST": b"a\n", "a.test:8080": b"a\n",
             "a.test.": b"a\n", "x.b.test": b"b\n", "x.y.b.test": b"b\n",
             "x.deep.b.test": b"deep\n", "deep.b.test": b"b\n",  # the longest wildcard wins
             "b.test": b"Hello World\n",  # "*.b.test" is the names under b.test, not b.test
             "other.test": b"Hello World\n", "127.0.0.1": b"Hello World\n",
             "[::1]:80": b"Hello World\n"}
    for host, body in cases.items():
        path = "/same.txt" if body != b"Hello World\n" else "/hello.txt"
        status, _, answer = ask(server.port, path, host)
        assert (status, answer) == (200, body), host
    # The same path, asked of each in turn, from the cache: never another host's copy.
    for _ in range(3):
        for host, body in (("a.test", b"a\n"), ("x.b.test", b"b\n"), ("z.deep.b.test", b"deep\n")):
            assert ask(server.port, "/same.txt", host)[2] == body
    assert ask(server.port, "/same.txt", "other")[0] == 404  # the default root has none
    # HTTP/1.0 without a Host, and an absolute target's authority (over the Host field).
    assert ask(server.port, "/hello.txt", None, version="1.0")[2] == b"Hello World\n"
    assert ask(server.port, "http://a.test/same.txt", "x.b.test")[2] == b"a\n"
    # Index files, directories and their redirects, per host.
    assert ask(server.port, "/", "a.test")[2] == b"a home\n"
    status, fields, _ = ask(server.port, "/docs", "a.test")
    assert (status, fields["location"]) == (301, "/docs/")
    assert ask(server.port, "/docs/", "a.test")[0] == 403  # no index, no listing
    assert ask(server.port, "/page.html", "a.test")[0] == 404  # b's file
    assert ask(server.port, "/page.html", "q.b.test")[2] == b"b page\n"
    assert server.stop() == 0


def test_sxe_http_asks_a_host_by_name(httpd, sites, build_dir):  # noqa: F811
    """sxe-http -H 'Host: NAME' sends that Host instead of the target's (not a second one)."""
    server = httpd("--workers", "1", *hosts_args(sites))
    run = subprocess.run([str(build_dir / "tools" / "sxe-http"), "-i", "127.0.0.1", "-p",
                          str(server.port), "-u", "/same.txt", "-n", "20", "-c", "2", "-H",
                          "host: x.b.test", "--json"], capture_output=True, text=True, timeout=30)
    report = json.loads(run.stdout)
    assert (report["queries"], report["errors"]["total"]) == (40, 0), run.stdout  # -n a connection
    assert server.stop() == 0


def test_no_host_reaches_another_hosts_files(httpd, sites):  # noqa: F811
    """A symbolic link from a's root into b's is outside a's root: refused, as any other."""
    (sites["a"] / "to-b").symlink_to(sites["b"] / "page.html")
    server = httpd("--workers", "1", *hosts_args(sites))
    assert ask(server.port, "/to-b", "a.test")[0] == 403
    for path in ("/../site-b/page.html", "/%2e%2e/site-b/page.html"):
        assert ask(server.port, path, "a.test")[0] == 400, path
    assert server.stop() == 0


def test_over_http2_the_authority_names_the_host(httpd, sites):  # noqa: F811
    server = httpd("--workers", "1", *hosts_args(sites))
    for host, body, status in (("a.test", "a\n", 200), ("x.b.test", "b\n", 200),
                               ("other", "404 Not Found\n", 404)):
        out = subprocess.run(
            ["curl", "-s", "--http2-prior-knowledge", "-H", f"Host: {host}", "-o", "-",
             "-w", "%{http_version} %{http_code}", f"http://127.0.0.1:{server.port}/same.txt"],
            capture_output=True, text=True, timeout=10).stdout
        assert out == f"{body}2 {status}", host
    assert server.stop() == 0


def test_index_and_listings_are_inherited_unless_a_host_says(httpd, sites):  # noqa: F811
    (sites["a"] / "docs" / "start.html").write_text("a start\n")
    server = httpd("--workers", "1", "--index", "start.html", "--list",
                   "--host", "a.test", "--root", str(sites["a"]),
                   "--host", "x.b.test", "--root", str(sites["b"]), "--index", "page.html")
    assert ask(server.port, "/docs/", "a.test")[2] == b"a start\n"  # the default host's index
    assert ask(server.port, "/", "x.b.test")[2] == b"b page\n"  # its own
    status, fields, body = ask(server.port, "/docs/", "x.b.test")  # the default's --list
    assert status == 200 and fields["content-type"].startswith("text/html") and b"<" in body
    assert server.stop() == 0


def test_fields_of_the_default_host_go_everywhere_a_hosts_only_on_its_own(httpd, sites):  # noqa
    server = httpd("--workers", "1", "--header", "/ X-All: 1",
                   "--host", "a.test", "--root", str(sites["a"]), "--header", "/ X-A: a",
                   "--header", "/same Cache-Control: max-age=9",
                   "--host", "x.b.test", "--root", str(sites["b"]))
    _, fields, _ = ask(server.port, "/index.html", "a.test")
    assert (fields["x-all"], fields["x-a"]) == ("1", "a") and "cache-control" not in fields
    _, fields, _ = ask(server.port, "/same.txt", "a.test")
    assert (fields["x-all"], fields["x-a"], fields["cache-control"]) == ("1", "a", "max-age=9")
    _, fields, _ = ask(server.port, "/same.txt", "x.b.test")
    assert fields["x-all"] == "1" and "x-a" not in fields
    _, fields, _ = ask(server.port, "/hello.txt", "other")
    assert fields["x-all"] == "1" and "x-a" not in fields
    assert server.stop() == 0


def test_types_given_win_a_hosts_own_first(httpd, sites, build_dir):  # noqa: F811
    for site in ("a", "b"):
        (sites[site] / "page.x").write_text("x\n")
        (sites[site] / "data.json").write_text("{}\n")
    server = httpd("--workers", "1", "--type", "x=text/x-default", "--type", "JSON=text/json",
                   "--host", "a.test", "--root", str(sites["a"]),
                   "--type", "x=application/x-a; v=1",
                   "--host", "x.b.test", "--root", str(sites["b"]))
    assert ask(server.port, "/page.x", "a.test")[1]["content-type"] == "application/x-a; v=1"
    assert ask(server.port, "/page.x", "x.b.test")[1]["content-type"] == \
        "text/x-default; charset=utf-8"
    assert ask(server.port, "/data.json", "a.test")[1]["content-type"] == \
        "text/json; charset=utf-8"  # the default host's, for an extension a.test does not name
    assert ask(server.port, "/same.txt", "a.test")[1]["content-type"] == \
        "text/plain; charset=utf-8"  # the table's
    assert server.stop() == 0
    for spec in ("x", "=text/plain", ".x=text/plain", "x=plain", "x=text/a\x01b",
                 "a/b=text/plain", "x" * 40 + "=text/plain"):
        run = subprocess.run([binary(build_dir), "--root", "/tmp", "-t", "--type", spec],
                             capture_output=True, text=True, timeout=10)
        assert run.returncode == 2 and "must be EXT=TYPE" in run.stderr, spec
    many = [arg for i in range(257) for arg in ("--type", f"e{i}=a/b")]
    run = subprocess.run([binary(build_dir), "--root", "/tmp", "-t", *many], capture_output=True,
                         text=True, timeout=10)
    assert run.returncode == 2 and "is given too often (256 at most)" in run.stderr


def test_each_host_proxies_its_own_prefixes(httpd, sites, upstreams):  # noqa: F811
    up_a, up_root = upstreams(), upstreams()
    (sites["b"] / "api").mkdir()
    (sites["b"] / "api" / "x").write_text("b's file\n")
    server = httpd("--workers", "1",
                   "--host", "a.test", "--root", str(sites["a"]),
                   "--proxy", f"/api/=127.0.0.1:{up_a.port}", "--header", "/api/ X-A: a",
                   "--host", "x.b.test", "--root", str(sites["b"]),
                   "--host", "up.test", "--proxy", f"/=127.0.0.1:{up_root.port}")
    status, fields, body = ask(server.port, "/api/x?q=1", "a.test")
    echo = json.loads(body)
    assert (status, echo["token"], echo["target"], fields["x-a"]) == (200, up_a.token,
                                                                      "/api/x?q=1", "a")
    status, _, body = ask(server.port, "/api/x", "x.b.test")  # not proxied there: its file
    assert (status, body) == (200, b"b's file\n")
    assert ask(server.port, "/api/x", "other")[0] == 404  # nor for the default host
    # A host with no root, everything proxied; POST goes through, as any method.
    status, _, body = ask(server.port, "/anything", "up.test", method="POST",
                          extra="Content-Length: 0\r\n")
    assert (status, json.loads(body)["token"]) == (200, up_root.token)
    # Files take GET and HEAD only.
    status, fields, _ = ask(server.port, "/same.txt", "a.test", method="POST",
                            extra="Content-Length: 0\r\n")
    assert (status, fields["allow"]) == (405, "GET, HEAD, OPTIONS")
    status, fields, body = ask(server.port, "/same.txt", "a.test", method="HEAD")
    assert (status, fields["content-length"], body) == (200, "2", b"")
    assert server.stop() == 0


def test_each_host_may_log_to_its_own_file(httpd, sites, tmp_path):  # noqa: F811
    main, a_log = tmp_path / "main.log", tmp_path / "a.log"
    server = httpd("--workers", "2", "--access-log", str(main),
                   "--host", "a.test", "--root", str(sites["a"]), "--access-log", str(a_log),
                   "--host", "x.b.test", "--root", str(sites["b"]),
                   "--host", "c.test", "--root", str(sites["b"]), "--access-log", str(main))
    for host in ("a.test", "a.test", "x.b.test", "other", "c.test"):
        assert ask(server.port, "/same.txt", host)[0] in (200, 404)
    assert ask(server.port, "/same.txt", "a.test", method="DELETE")[0] == 405
    assert server.stop() == 0
    a_lines = a_log.read_text().splitlines()
    main_lines = main.read_text().splitlines()
    assert len(a_lines) == 3 and all('"' in line for line in a_lines)  # its own, 405 too
    assert len(main_lines) == 3  # x.b.test's, the default's and c.test's (the same file)


def test_metrics_are_counted_per_host(httpd, sites):  # noqa: F811
    server = httpd("--workers", "2", "--metrics", "/metrics", *hosts_args(sites))
    for host in ("a.test", "a.test", "www.a.test", "x.b.test", "other"):
        assert ask(server.port, "/same.txt", host)[0] in (200, 404)
    status, families = scrape(server.port)
    assert status == 200
    counted = families["sxe_httpd_requests_total"]
    assert counted[(("host", "a.test"), ("kind", "static"), ("status", "2xx"))] == 3
    assert counted[(("host", "*.b.test"), ("kind", "static"), ("status", "2xx"))] == 1
    assert counted[(("host", ""), ("kind", "static"), ("status", "4xx"))] == 1
    assert server.stop() == 0


def test_a_file_names_hosts(build_dir, served, sites, tmp_path):  # noqa: F811
    port = free_port()
    config = tmp_path / "hosts.yaml"
    config.write_text(f"""root: {sites['b']}
listen: 127.0.0.1:{port}
hosts:
  a.test, www.a.test:
    root: {sites['a']}
    header: ["/ X-A: a"]
  "*.deep.test":
    root: {sites['deep']}
workers: 1
""")
    assert subprocess.run([binary(build_dir), "-t", "-c", str(config)],
                          capture_output=True).returncode == 0
    served(port, "-c", str(config))
    status, fields, body = ask(port, "/same.txt", "www.a.test")
    assert (status, body, fields["x-a"]) == (200, b"a\n", "a")
    assert ask(port, "/same.txt", "q.deep.test")[2] == b"deep\n"
    assert ask(port, "/same.txt", "other")[2] == b"b\n"


def test_a_host_turns_listings_off_in_the_file_or_with_no_list(served, build_dir, sites,  # noqa
                                                                tmp_path):
    port = free_port()
    config = tmp_path / "list.yaml"
    config.write_text(f"root: {sites['a']}\nlisten: 127.0.0.1:{port}\nworkers: 1\nlist: true\n"
                      f"hosts:\n  b.test:\n    root: {sites['b']}\n    list: false\n"
                      f"  c.test:\n    root: {sites['b']}\n")
    served(port, "-c", str(config), "--host", "d.test", "--root", str(sites["b"]), "--no-list")
    assert ask(port, "/docs/", "other")[0] == 200  # the default host lists
    assert ask(port, "/docs/", "c.test")[0] == 200  # ... and so does a host that says nothing
    assert ask(port, "/docs/", "b.test")[0] == 403
    assert ask(port, "/docs/", "d.test")[0] == 403


def test_names_and_labels_that_are_no_hosts(httpd, sites, build_dir):  # noqa: F811
    """A leading or trailing '-' in a label, an empty label or brackets with nothing in them are
    refused; a request's name with an empty label is no host's, a wildcard's neither."""
    for name in ("-a.test", "a-.test", "a.-b.test", "a..test", "[]", "*.-w.test", ".a.test"):
        run = subprocess.run([binary(build_dir), "--root", "/tmp", "-t", "--host", name, "--root",
                              "/tmp"], capture_output=True, text=True, timeout=10)
        assert run.returncode == 2 and "not a host name" in run.stderr, name
    server = httpd("--workers", "1", "--host", "*.b.test", "--root", str(sites["b"]),
                   "--host", "a-b.test,0.test", "--root", str(sites["a"]))
    assert ask(server.port, "/same.txt", "x.b.test")[2] == b"b\n"  # beside names that sort first
    assert ask(server.port, "/same.txt", "a-b.test")[2] == b"a\n"
    for name in ("..b.test", "x..b.test", ".b.test"):
        assert ask(server.port, "/hello.txt", name)[2] == b"Hello World\n", name
    assert server.stop() == 0


def test_a_get_with_a_body_is_answered_and_the_next_one_too(httpd, sites):  # noqa: F811
    server = httpd("--workers", "1", *hosts_args(sites))
    raw = (b"GET /same.txt HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\nhello"
           b"GET /same.txt HTTP/1.1\r\nHost: x.b.test\r\nConnection: close\r\n\r\n")
    answers = exchange(server.port, raw)
    assert answers.count(b"HTTP/1.1 200 OK") == 2 and answers.endswith(b"b\n"), answers
    status, _, _ = ask(server.port, "/same.txt", "a.test",
                       extra="Content-Length: 50000\r\n")  # past what a file's GET may carry
    assert status == 413
    status, fields, body = ask(server.port, "/same.txt", "a.test", method="OPTIONS")
    assert (status, fields["allow"], body) == (200, "GET, HEAD, OPTIONS", b"")
    assert server.stop() == 0


def test_large_metrics_go_out_whole(build_dir, served, sites, tmp_path):  # noqa: F811
    """256 hosts make a page of near a megabyte: sent in pieces as the connection drains."""
    port = free_port()
    config = tmp_path / "many.yaml"
    config.write_text(f"root: {sites['a']}\nlisten: 127.0.0.1:{port}\nworkers: 2\n"
                      "metrics: /metrics\nhosts:\n" +
                      "".join(f"  h{i}.test:\n    root: {sites['b']}\n" for i in range(256)))
    served(port, "-c", str(config))
    assert ask(port, "/same.txt", "h255.test")[2] == b"b\n"
    status, families = scrape(port)
    assert status == 200
    counted = families["sxe_httpd_requests_total"]
    assert counted[(("host", "h255.test"), ("kind", "static"), ("status", "2xx"))] == 1
    assert len(counted) == 257 * 2 * 5
    head = subprocess.run(["curl", "-sI", f"http://127.0.0.1:{port}/metrics"],
                          capture_output=True, text=True, timeout=10).stdout
    assert "200 OK" in head and int(re_length(head)) > 128 * 1024


def re_length(head):
    return [line.split(":")[1] for line in head.splitlines()
            if line.lower().startswith("content-length:")][0]


def test_a_label_is_the_first_name_even_after_a_comma(httpd, sites):  # noqa: F811
    server = httpd("--workers", "1", "--metrics", "/metrics",
                   "--host", ", a.test", "--root", str(sites["a"]))
    assert ask(server.port, "/same.txt", "a.test")[0] == 200
    _, families = scrape(server.port)
    labels = {dict(key)["host"] for key in families["sxe_httpd_requests_total"]}
    assert labels == {"", "a.test"}
    assert server.stop() == 0


def test_the_default_hosts_mistake_is_told_at_its_own_line(build_dir, sites, tmp_path):
    config = tmp_path / "blame.yaml"
    config.write_text(f"root: /missing-default\nhosts:\n  a.test:\n    root: {sites['a']}\n")
    run = subprocess.run([binary(build_dir), "-t", "-c", str(config)], capture_output=True,
                         text=True, timeout=10)
    assert run.returncode == 1 and run.stderr.startswith(f"sxe-httpd: {config}:1: "), run.stderr
    nul = tmp_path / "nul.yaml"
    for text in ('"root\\0x": /tmp\n', 'root: /tmp\nhosts:\n  "a.test\\0x":\n    root: /tmp\n'):
        nul.write_text(text)
        run = subprocess.run([binary(build_dir), "-t", "-c", str(nul)], capture_output=True,
                             text=True, timeout=10)
        assert run.returncode == 1, (text, run.stderr)


def test_a_hundred_hosts_each_with_its_own_log(httpd, sites, tmp_path):  # noqa: F811
    args = []
    for i in range(100):
        args += ["--host", f"h{i}.test", "--root", str(sites["a"]), "--access-log",
                 str(tmp_path / f"h{i}.log")]
    server = httpd("--workers", "1", *args)
    for i in (0, 64, 99):
        assert ask(server.port, "/same.txt", f"h{i}.test")[0] == 200
    assert server.stop() == 0
    for i in (0, 64, 99):
        assert len((tmp_path / f"h{i}.log").read_text().splitlines()) == 1, i
    assert (tmp_path / "h1.log").read_text() == ""


@pytest.mark.parametrize("text,line,says", [
    ("hosts: x\n", 2, "'hosts' maps host names"),
    ("hosts:\n  a.test: {}\n", 3, "has no keys"),
    ("hosts:\n  a.test: /srv\n", 3, "takes a mapping of keys"),
    ("hosts:\n  a.test:\n    workers: 2\n", 4, "'workers' is the whole server's"),
    ("hosts:\n  a.test:\n    rot: /tmp\n", 4, "unknown key 'rot'"),
    ("hosts:\n  a.test:\n    root: /missing-root\n", 3, "root /missing-root: No such file"),
    ("hosts:\n  a.test:\n    index: x.html\n", 3, "the host 'a.test' has no root"),
    ("hosts:\n  a.test:\n    root: /tmp\n  A.TEST:\n    root: /tmp\n", 5,
     "a name another host has already"),
    ("hosts:\n  'a b!':\n    root: /tmp\n", 3, "not a host name"),
    ("hosts:\n  a.test:\n    root: /tmp\n    root: /tmp\n", 5, "'root' is given twice"),
    ("hosts:\n  a.test:\n    hosts: {}\n", 4, "'hosts' is of the top mapping"),
    ("hosts:\n  a.test:\n    root: /tmp\nhosts:\n  b.test:\n    root: /tmp\n", 5,
     "'hosts' is given twice"),
])
def test_a_wrong_host_is_told_at_its_line(build_dir, tmp_path, text, line, says):
    config = tmp_path / "bad.yaml"
    config.write_text("root: /tmp\n" + text)
    run = subprocess.run([binary(build_dir), "-t", "-c", str(config)], capture_output=True,
                         text=True, timeout=10)
    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith(f"sxe-httpd: {config}:{line}: ") and says in run.stderr, \
        run.stderr


@pytest.mark.parametrize("args,says", [
    (["--host", "a.test"], "the host 'a.test' has no root"),
    (["--host", "a.test", "--root", "/tmp", "--workers", "2"],
     "--workers is the whole server's: give it before the first --host"),
    (["--host", "a..test", "--root", "/tmp"], "not a host name"),
    (["--host", "a.test", "--root", "/tmp", "--host", "a.test", "--root", "/tmp"],
     "a name another host has already"),
    (["--host", "a.test", "--root", "/missing-root"], "root /missing-root: No such file"),
])
def test_a_wrong_host_on_the_command_line(build_dir, args, says):
    run = subprocess.run([binary(build_dir), "--root", "/tmp", "-t", *args],
                         capture_output=True, text=True, timeout=10)
    assert run.returncode in (1, 2) and says in run.stderr, run.stderr
