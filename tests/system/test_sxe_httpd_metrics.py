"""sxe-httpd --metrics PATH: Prometheus's text format, parsed by prometheus_client's own parser.
Every request is counted once, by what served it and its status class, on whichever worker it
came (processes or threads), with its bytes, a histogram of its time and, proxied, its upstream;
only the clients --metrics-allow names (loopback by default) may read them."""
import json
import socket
import subprocess
import time

import pytest

from test_proxy import upstreams  # noqa: F401 (fixture)
from test_sxe_httpd import exchange, httpd, refused_port, root  # noqa: F401 (fixtures)


def scrape(port, source="127.0.0.1"):
    """status, and the families parsed by prometheus_client (Debian's python3-prometheus-client)
    by name, each a {labels (a sorted tuple of pairs): value} dict."""
    from prometheus_client.parser import text_string_to_metric_families

    with socket.create_connection(("127.0.0.1", port), source_address=(source, 0)) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    if status != 200:
        return status, None
    assert b"Content-Type: text/plain; version=0.0.4; charset=utf-8" in head
    families = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            families.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = \
                sample.value
    return status, families


def ask(port, target):
    data = exchange(port, b"GET " + target.encode() + b" HTTP/1.1\r\nHost: h\r\n"
                    b"Connection: close\r\n\r\n")
    return int(data.split()[1])


def requests(families, kind, status):
    return families["sxe_httpd_requests_total"][(("kind", kind), ("status", status))]


@pytest.mark.parametrize("kind", [[], ["--threads"]], ids=["processes", "threads"])
def test_every_request_is_counted_once_by_what_served_it(httpd, upstreams, kind):  # noqa: F811
    up = upstreams()
    dead = refused_port()
    server = httpd("--workers", "2", *kind, "--metrics", "/metrics",
                   "--proxy", f"/api/=127.0.0.1:{up.port}", "--proxy", f"/dead/=127.0.0.1:{dead}")
    sent = {"/hello.txt": 200, "/missing": 404, "/api/echo": 200, "/api/echo?wait=0.3": 200,
            "/dead/x": 502}
    for _ in range(3):
        for target, status in sent.items():
            assert ask(server.port, target) == status, target
    status, families = scrape(server.port)
    assert status == 200
    assert requests(families, "static", "2xx") == 3 and requests(families, "static", "4xx") == 3
    assert requests(families, "proxy", "2xx") == 6 and requests(families, "proxy", "5xx") == 3
    assert sum(families["sxe_httpd_requests_total"].values()) == 15
    assert families["sxe_httpd_response_bytes_total"][(("kind", "static"),)] >= 3 * 12
    # the histogram: the three slow answers (0.3 s) are past the 0.25 s bucket, below 0.5 s's
    buckets = families["sxe_httpd_request_duration_seconds_bucket"]
    assert buckets[(("kind", "proxy"), ("le", "0.25"))] == 6
    assert buckets[(("kind", "proxy"), ("le", "0.5"))] == 9
    assert buckets[(("kind", "proxy"), ("le", "+Inf"))] == 9
    assert families["sxe_httpd_request_duration_seconds_count"][(("kind", "static"),)] == 6
    assert 0.9 <= families["sxe_httpd_request_duration_seconds_sum"][(("kind", "proxy"),)] < 5
    answers = families["sxe_httpd_upstream_responses_total"]
    assert answers[(("status", "2xx"), ("upstream", f"127.0.0.1:{up.port}"))] == 6
    assert answers[(("status", "5xx"), ("upstream", f"127.0.0.1:{dead}"))] == 3
    upstream_time = families["sxe_httpd_upstream_response_seconds_sum"]
    assert 0.9 <= upstream_time[(("upstream", f"127.0.0.1:{up.port}"),)] < 5
    assert families["sxe_httpd_upstream_response_seconds_count"][
        (("upstream", f"127.0.0.1:{up.port}"),)] == 6
    assert set(families["sxe_httpd_connections"]) == {(("worker", "0"),), (("worker", "1"),)}
    accepted = families["sxe_httpd_connections_accepted_total"].values()
    assert sum(accepted) >= 16  # the 15 requests' and the scrape's
    # the scrape itself is counted, once it is answered
    assert requests(scrape(server.port)[1], "static", "2xx") == 4


def test_counts_stay_exact_under_load_on_every_worker(httpd, build_dir):
    """Two workers share the load by the kernel's hash: each counts in its own slot, and the sum
    is every request, neither lost nor counted twice."""
    server = httpd("--workers", "2", "--metrics", "/metrics")
    result = subprocess.run([str(build_dir / "tools" / "sxe-http"), "-i", "127.0.0.1", "-p",
                             str(server.port), "-u", "/hello.txt", "-c", "20", "-n", "500",
                             "--json"], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["queries"] == 10000
    families = scrape(server.port)[1]
    assert requests(families, "static", "2xx") == 10000
    assert families["sxe_httpd_response_bytes_total"][(("kind", "static"),)] == 120000
    accepted = families["sxe_httpd_connections_accepted_total"]
    assert all(taken > 0 for taken in accepted.values()), accepted  # both workers served


def test_only_allowed_clients_may_read(httpd):
    server = httpd("--metrics", "/metrics")
    assert scrape(server.port)[0] == 200
    assert scrape(server.port, source="127.0.0.9")[0] == 200  # loopback: all of 127/8
    assert server.stop() == 0
    server = httpd("--metrics", "/metrics", "--metrics-allow", "10.0.0.0/8",
                   "--metrics-allow", "127.0.0.2", "--metrics-allow", "::1")
    assert scrape(server.port)[0] == 403
    assert scrape(server.port, source="127.0.0.2")[0] == 200
    assert scrape(server.port, source="127.0.0.3")[0] == 403
    assert server.stop() == 0
    server = httpd("--metrics", "/metrics", "--metrics-allow", "127.0.0.0/31")
    assert [scrape(server.port, source=f"127.0.0.{i}")[0] for i in (1, 2)] == [200, 403]


def test_the_path_is_the_metrics_alone(httpd, root):  # noqa: F811
    """Other paths are served as ever; a file at the metrics' path is hidden by them; without
    --metrics the path is a file's again."""
    (root / "metrics").write_bytes(b"a file\n")
    server = httpd("--metrics", "/metrics")
    assert ask(server.port, "/hello.txt") == 200
    assert scrape(server.port)[0] == 200
    data = exchange(server.port, b"POST /metrics HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n"
                    b"Connection: close\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 405 ")
    assert server.stop() == 0
    server = httpd()
    data = exchange(server.port, b"GET /metrics HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert data.endswith(b"a file\n")


@pytest.mark.parametrize("args,says", [
    (["--metrics", "metrics"], "--metrics takes a path of its own in normal form (/metrics), "
                               "not 'metrics'"),
    (["--metrics", "/m?x"], "not '/m?x'"),
    (["--metrics", "/"], "not '/'"),                   # the site's root
    (["--metrics", "//metrics"], "not '//metrics'"),   # no request's path is this spelling
    (["--metrics", "/x/../metrics"], "not '/x/../metrics'"),
    (["--metrics", "/%6detrics"], "not '/%6detrics'"),
    (["--proxy", '/q=127.0.0.1:9"x'], "--proxy"),     # a name the log and labels show as it is
    (["--metrics-allow", "/8"], "--metrics-allow /8: expected an IPv4 or IPv6 address"),
    ([arg for i in range(33) for arg in ("--metrics-allow", f"10.0.0.{i}")],
     "--metrics-allow 10.0.0.32: too many --metrics-allow options"),
    (["--metrics-allow", "300.1.1.1"], "--metrics-allow 300.1.1.1: expected an IPv4 or IPv6"),
    (["--metrics-allow", "10.0.0.0/33"], "--metrics-allow 10.0.0.0/33: a prefix length is"),
    (["--metrics-allow", "::1/129"], "--metrics-allow ::1/129: a prefix length is"),
    (["--metrics-allow", "10.0.0.0/"], "--metrics-allow 10.0.0.0/: a prefix length is"),
])
def test_bad_options_are_refused(build_dir, root, args, says):  # noqa: F811
    result = subprocess.run([str(build_dir / "tools" / "sxe-httpd"), "--root", str(root), *args],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 2 and says in result.stderr, result.stderr


def test_the_config_file_keys(httpd, tmp_path):
    config = tmp_path / "httpd.yaml"
    config.write_text("metrics: /stats\nmetrics-allow: [127.0.0.2]\n")
    server = httpd("--config", str(config))
    data = exchange(server.port, b"GET /stats HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 403 ")  # from 127.0.0.1: not allowed


def test_a_client_that_leaves_is_not_the_upstreams_answer(httpd, upstreams):  # noqa: F811
    """A client that leaves before the upstream answers: its request is counted (4xx: 499), but
    no answer is counted against the upstream, which gave none."""
    up = upstreams()
    server = httpd("--metrics", "/metrics", "--proxy", f"/api/=127.0.0.1:{up.port}")
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /api/hang HTTP/1.1\r\nHost: h\r\n\r\n")
        deadline = time.monotonic() + 5
        while up.connections == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    deadline = time.monotonic() + 5
    while requests(scrape(server.port)[1], "proxy", "4xx") != 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    families = scrape(server.port)[1]
    answers = families["sxe_httpd_upstream_responses_total"]
    assert sum(answers.values()) == 0, answers


def test_an_ipv6_client_is_matched_as_ipv6(build_dir, root):  # noqa: F811
    """Over an IPv6 listener: ::1 is loopback (allowed by default), and --metrics-allow takes
    IPv6 networks."""
    for allow, status in (([], 200), (["--metrics-allow", "::1/128"], 200),
                          (["--metrics-allow", "fe80::/10"], 403)):
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
            port = probe.getsockname()[1]
        server = subprocess.Popen([str(build_dir / "tools" / "sxe-httpd"), "--root", str(root),
                                   "--listen", f"[::1]:{port}", "--workers", "1", "--metrics",
                                   "/metrics", *allow], stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 5
            while True:
                try:
                    sock = socket.create_connection(("::1", port), timeout=2)
                    break
                except ConnectionRefusedError:
                    assert server.poll() is None and time.monotonic() < deadline
                    time.sleep(0.02)
            with sock:
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                assert sock.recv(4096).startswith(b"HTTP/1.1 %d " % status), allow
        finally:
            server.terminate()
            assert server.wait(timeout=10) == 0
