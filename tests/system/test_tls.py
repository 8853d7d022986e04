"""sxe-httpd over HTTPS (TLS 1.2 and 1.3, OpenSSL under it) against Python's ssl module, which
verifies the certificate: files small and large (sealed from the file as the socket drains), keep-
alive, ranges, HTTPS beside plain HTTP, plain HTTP sent to the HTTPS port, a certificate per server
name (SNI), session tickets on and off, connections a supervisor hands off to its workers, and
start-up errors."""
import hashlib
import json
import os
import http.client
import socket
import ssl
import subprocess
import threading
import time

import pytest

from test_sxe_httpd import Httpd, free_port, httpd, root  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed ECDSA P-256 certificate for localhost, its key, and another key."""
    where = tmp_path_factory.mktemp("tls")
    cert, key, other = where / "cert.pem", where / "key.pem", where / "other.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-out", str(other)], check=True, capture_output=True)
    return cert, key, other


def client_context(cert, maximum=None):
    context = ssl.create_default_context(cafile=str(cert))
    if maximum is not None:
        context.maximum_version = maximum
    context.set_alpn_protocols(["http/1.1"])
    return context


def https(port, cert, maximum=None):
    return http.client.HTTPSConnection("localhost", port, timeout=10,
                                       context=client_context(cert, maximum))


@pytest.mark.parametrize("maximum", [None, ssl.TLSVersion.TLSv1_2])
def test_files_over_https_keep_alive(httpd, root, certificate, maximum):  # noqa: F811
    cert, key, _ = certificate
    big = bytes((i * 7 + i // 251) % 256 for i in range(3 * 1024 * 1024 + 5))
    (root / "big.bin").write_bytes(big)
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "1")
    connection = https(server.port, cert, maximum)
    for _ in range(2):  # one connection, kept alive
        connection.request("GET", "/hello.txt")
        response = connection.getresponse()
        assert response.status == 200 and response.read() == b"Hello World\n"
    connection.request("GET", "/big.bin")
    response = connection.getresponse()
    body = response.read()
    assert response.status == 200 and len(body) == len(big)
    assert hashlib.sha256(body).digest() == hashlib.sha256(big).digest()
    connection.request("GET", "/big.bin", headers={"Range": "bytes=1000000-1000099"})
    response = connection.getresponse()
    assert response.status == 206 and response.read() == big[1000000:1000100]
    tls = connection.sock
    assert tls.version() == ("TLSv1.2" if maximum else "TLSv1.3")
    assert tls.selected_alpn_protocol() == "http/1.1"
    connection.close()
    assert server.stop() == 0


@pytest.mark.parametrize("kind", [[], ["--threads"]])
def test_connections_handed_off_to_workers_speak_tls(httpd, certificate, kind):  # noqa: F811
    """With --spread hand-off the supervisor accepts and passes each socket; the worker that takes
    it runs the handshake: held connections (spread over both workers) each make their own, are
    kept alive, resume, and plain HTTP to the port is told 400 there too."""
    cert, key, _ = certificate
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "2", "--spread",
                   "hand-off", *kind)
    held = [https(server.port, cert) for _ in range(8)]
    for _ in range(2):
        for connection in held:
            connection.request("GET", "/hello.txt")
            response = connection.getresponse()
            assert response.status == 200 and response.read() == b"Hello World\n"
            assert connection.sock.selected_alpn_protocol() == "http/1.1"
    for connection in held:
        connection.close()
    assert resumed(server.port, cert)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as plain:
        plain.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert plain.recv(4096).startswith(b"HTTP/1.1 400 ")
    assert server.stop() == 0


def test_https_beside_plain_http(httpd, certificate):  # noqa: F811
    cert, key, _ = certificate
    secure = free_port()
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--https",
                   f"127.0.0.1:{secure}", "--workers", "1")
    plain = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    plain.request("GET", "/hello.txt")
    assert plain.getresponse().read() == b"Hello World\n"
    connection = https(secure, cert)
    connection.request("GET", "/hello.txt")
    assert connection.getresponse().read() == b"Hello World\n"
    assert server.stop() == 0
    assert f"on 127.0.0.1:{server.port} and https://127.0.0.1:{secure}" in \
        server.process.stderr.read().decode()


def test_a_large_cached_file_both_ways_and_changed(httpd, root, certificate):  # noqa: F811
    """A cached file past the small files' 64 KB on a server with both listeners: sealed from its
    cached descriptor over HTTPS, sent with sendfile over plain HTTP, whole and in ranges both ways,
    each time; rewritten in place, it is served anew once a second has passed."""
    cert, key, _ = certificate
    first = bytes((i * 11 + i // 253) % 256 for i in range(1024 * 1024 + 3))
    (root / "large.bin").write_bytes(first)
    secure = free_port()
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--https",
                   f"127.0.0.1:{secure}", "--workers", "1")
    plain = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection = https(secure, cert)

    def both(expected):
        for each in (connection, plain, connection, plain):  # loaded, then cached
            each.request("GET", "/large.bin")
            response = each.getresponse()
            assert response.status == 200 and response.read() == expected
            each.request("GET", "/large.bin", headers={"Range": "bytes=700000-700099"})
            response = each.getresponse()
            assert response.status == 206 and response.read() == expected[700000:700100]

    both(first)
    second = bytes(reversed(first))
    with open(root / "large.bin", "r+b") as rewrite:  # the same inode, the same size
        rewrite.write(second)
    os.utime(root / "large.bin", ns=(time.time_ns(), time.time_ns() + 5 * 10**9))
    time.sleep(1.1)  # a cached path is checked again at most once a second
    both(second)
    assert server.stop() == 0


def test_plain_requests_redirected_to_https(httpd, build_dir, root, certificate):  # noqa: F811
    """--redirect-https: every plain request (a file's, a proxied one's) is answered 301 to the
    same path and query on the HTTPS listener's port, at the host the client named; HTTPS serves."""
    cert, key, _ = certificate
    secure = free_port()
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--https",
                   f"127.0.0.1:{secure}", "--redirect-https", "--proxy", "/api/=127.0.0.1:1",
                   "--workers", "1")
    plain = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    for host, target, location in (
            ("example.test:8080", "/hello.txt?x=1&y",
             f"https://example.test:{secure}/hello.txt?x=1&y"),
            ("localhost", "/a/./b//c", f"https://localhost:{secure}/a/b/c"),
            ("[::1]:80", "/api/items", f"https://[::1]:{secure}/api/items"),
            ("in_side.test", "/", f"https://in_side.test:{secure}/"),
            ("a.test", "http://b.test/x", f"https://b.test:{secure}/x")):  # the target's
        plain.request("GET", target, headers={"Host": host})
        response = plain.getresponse()
        response.read()
        assert (response.status, response.getheader("Location")) == (301, location), host
    for host in ("evil.test/x", "[::1", "a b", "", "a@b", "a!b:80", "[::1]x"):  # not a name
        plain.request("GET", "/hello.txt", headers={"Host": host})
        response = plain.getresponse()
        assert response.status == 400 and response.getheader("Location") is None, host
        response.read()
    plain.request("GET", "/" + "a" * 4000 + "?" + "b" * 4000, headers={"Host": "h" * 200})
    response = plain.getresponse()  # a Location past 8 KB
    assert response.status == 414 and response.getheader("Location") is None
    assert response.read() == b"the location is too long\n"
    connection = https(secure, cert)
    connection.request("GET", "/hello.txt")
    assert connection.getresponse().read() == b"Hello World\n"
    assert server.stop() == 0
    refused = subprocess.run([str(build_dir / "tools" / "sxe-httpd"), "--root", str(root),
                              "--listen", "127.0.0.1:0", "--redirect-https"],
                             capture_output=True, text=True, timeout=10)
    assert refused.returncode == 2 and "--redirect-https" in refused.stderr, refused.stderr


def test_plain_http_to_the_https_port_is_told_400(httpd, certificate):  # noqa: F811
    cert, key, _ = certificate
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "1")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nUser-Agent: curl/7.88\r\n\r\n")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")  # as nginx: why, in plain HTTP, then the end
    assert head.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert body == b"400 Bad Request: plain HTTP sent to a TLS port\n"
    assert b"Content-Length: %d" % len(body) in head
    connection = https(server.port, cert)  # and the others are served on
    connection.request("GET", "/hello.txt")
    assert connection.getresponse().status == 200
    assert server.stop() == 0


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # offering TLS 1.0 is the point
def test_an_old_protocol_is_refused(httpd, certificate):  # noqa: F811
    cert, key, _ = certificate
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "1")
    context = client_context(cert)
    context.minimum_version = ssl.TLSVersion.TLSv1
    context.maximum_version = ssl.TLSVersion.TLSv1_1
    context.set_ciphers("ALL:@SECLEVEL=0")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        with pytest.raises(ssl.SSLError):
            context.wrap_socket(sock, server_hostname="localhost")
    assert server.stop() == 0


def test_start_up_errors(build_dir, root, certificate):  # noqa: F811
    cert, key, other = certificate
    binary = str((build_dir / "tools" / "sxe-httpd").resolve())
    base = [binary, "--root", str(root), "--listen", f"127.0.0.1:{free_port()}"]

    def start(*args):
        done = subprocess.run([*base, *args], capture_output=True, timeout=10)
        return done.returncode, done.stderr.decode()

    status, said = start("--tls-cert", str(cert))
    assert status == 2 and "both --tls-cert FILE and --tls-key FILE" in said
    status, said = start("--tls-cert", str(cert), "--tls-key", str(other))
    assert status == 1 and "not the key of certificate" in said, said
    status, said = start("--tls-cert", "/nonexistent.pem", "--tls-key", str(key))
    assert status == 1 and "TLS certificate /nonexistent.pem: No such file" in said, said
    for wrong in ("other.test", "other.test=", "other.test=a", "=a,b", "n=a,", "n=,b", "n=a,,c",
                  "n=a,b,", "n=a,b,c,d"):
        status, said = start("--tls-cert", str(cert), "--tls-key", str(key), "--tls", wrong)
        assert status == 2 and "give NAME=CERT,KEY" in said, (wrong, said)
    for alone in (["--tls", f"n.test={cert},{key}"], ["--tls-client-ca", str(cert)],
                  ["--tls-ocsp", str(cert)]):
        status, said = start(*alone)
        assert status == 2 and "both --tls-cert FILE and --tls-key FILE" in said
    status, said = start("--tls-cert", str(cert), "--tls-key", str(key), "--tls-client-optional")
    assert status == 2 and "--tls-client-optional goes with --tls-client-ca FILE" in said
    status, said = start("--tls-cert", str(cert), "--tls-key", str(key),
                         "--tls", f"n.test={cert},{key},/nonexistent.der")
    assert status == 1 and "OCSP response /nonexistent.der: No such file" in said, said
    status, said = start("--tls-cert", str(cert), "--tls-key", str(key),
                         "--tls", f"bad name={cert},{key}")
    assert status == 1 and "--tls bad name=" in said and "not a host name" in said, said
    status, said = start("--tls-cert", str(cert), "--tls-key", str(key),
                         "--tls", f"n.test={cert},{other}")
    assert status == 1 and "not the key of certificate" in said, said


@pytest.fixture(scope="module")
def other_certificate(tmp_path_factory):
    """A second self-signed certificate, for other.test and *.wild.test, and its key."""
    where = tmp_path_factory.mktemp("tls-other")
    cert, key = where / "other-cert.pem", where / "other-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=other.test", "-addext",
                    "subjectAltName=DNS:other.test,DNS:*.wild.test"],
                   check=True, capture_output=True)
    return cert, key


def shown_to(port, name, trusted):
    """The common name of the certificate the server shows a client that asks for name (SNI),
    verified against trusted for that name."""
    context = ssl.create_default_context(cafile=str(trusted))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        with context.wrap_socket(sock, server_hostname=name) as tls:
            tls.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: %s\r\n\r\n" % name.encode())
            assert tls.recv(4096).startswith(b"HTTP/1.1 200 OK\r\n")
            subject = dict(pair[0] for pair in tls.getpeercert()["subject"])
            return subject["commonName"]


def test_a_certificate_per_server_name(httpd, certificate, other_certificate):  # noqa: F811
    cert, key, _ = certificate
    other_cert, other_key = other_certificate
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "2",
                   "--tls", f"other.test={other_cert},{other_key}",
                   "--tls", f"*.wild.test={other_cert},{other_key}")
    for _ in range(2):  # each worker, likely
        assert shown_to(server.port, "localhost", cert) == "localhost"
        assert shown_to(server.port, "other.test", other_cert) == "other.test"
        assert shown_to(server.port, "Other.Test", other_cert) == "other.test"
        assert shown_to(server.port, "a.wild.test", other_cert) == "other.test"
    with pytest.raises(ssl.SSLCertVerificationError):  # the default's, for a name not given
        shown_to(server.port, "b.a.wild.test", other_cert)
    assert server.stop() == 0


def resumed(port, cert):
    """Whether a second connection resumes the first one's session."""
    return resumed_across(port, port, cert)


def resumed_across(port, other_port, cert):
    """Whether a session made with port resumes with other_port."""
    context = client_context(cert)
    session = None
    for each in (port, other_port):
        with socket.create_connection(("127.0.0.1", each), timeout=5) as sock:
            with context.wrap_socket(sock, server_hostname="localhost", session=session) as tls:
                tls.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
                assert tls.recv(4096).startswith(b"HTTP/1.1 200 OK\r\n")
                was_resumed, session = tls.session_reused, tls.session
    return was_resumed


def test_session_tickets_on_and_off(httpd, certificate, tmp_path):  # noqa: F811
    cert, key, _ = certificate
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "1")
    assert resumed(server.port, cert)
    assert server.stop() == 0
    # Two servers given one key file resume each other's sessions; one given another does not.
    keys, other = tmp_path / "keys", tmp_path / "other-keys"
    keys.write_bytes(os.urandom(80))
    other.write_bytes(os.urandom(80))
    first, second, third = (httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "2",
                                  "--tls-ticket-key", str(path)) for path in (keys, keys, other))
    assert resumed_across(first.port, second.port, cert)
    assert not resumed_across(first.port, third.port, cert)
    for each in (first, second, third):
        assert each.stop() == 0
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "1",
                   "--tls-no-tickets")
    assert not resumed(server.port, cert)
    assert server.stop() == 0


def test_proxy_to_https_upstreams(httpd, root, certificate, other_certificate):  # noqa: F811
    cert, key, _ = certificate
    big = bytes((i * 13 + i // 509) % 256 for i in range(2 * 1024 * 1024 + 3))
    (root / "big-up.bin").write_bytes(big)
    upstream = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "1")
    front = httpd("--workers", "1", "--proxy", f"/=https://127.0.0.1:{upstream.port}",
                  "--proxy-ca", str(cert))
    connection = http.client.HTTPConnection("127.0.0.1", front.port, timeout=10)
    for _ in range(3):  # one connection each way, kept alive
        connection.request("GET", "/hello.txt")
        response = connection.getresponse()
        assert response.status == 200 and response.read() == b"Hello World\n"
    connection.request("GET", "/big-up.bin")
    response = connection.getresponse()
    body = response.read()
    assert response.status == 200 and hashlib.sha256(body).digest() == hashlib.sha256(big).digest()
    # Two hops, the first written http:// (the default, said outright).
    chain = httpd("--workers", "1", "--proxy", f"/=http://127.0.0.1:{front.port}")
    connection = http.client.HTTPConnection("127.0.0.1", chain.port, timeout=10)
    connection.request("GET", "/hello.txt")
    response = connection.getresponse()
    assert response.status == 200 and response.read() == b"Hello World\n"
    # TLS both ways: HTTPS in front, HTTPS behind.
    secure = httpd("--workers", "1", "--tls-cert", str(cert), "--tls-key", str(key),
                   "--proxy", f"/=https://127.0.0.1:{upstream.port}", "--proxy-ca", str(cert))
    connection = https(secure.port, cert)
    connection.request("GET", "/big-up.bin")
    response = connection.getresponse()
    assert response.status == 200 and response.read() == big
    # A front that does not trust the upstream's certificate: 502, and the log says why.
    other_cert, _ = other_certificate
    wary = httpd("--workers", "1", "--proxy", f"/=https://127.0.0.1:{upstream.port}",
                 "--proxy-ca", str(other_cert))
    connection = http.client.HTTPConnection("127.0.0.1", wary.port, timeout=10)
    connection.request("GET", "/hello.txt")
    assert connection.getresponse().status == 502
    for server in (chain, front, secure, wary, upstream):
        assert server.stop() == 0
    assert "certificate verify failed" in wary.process.stderr.read().decode()


def test_sxe_http_over_tls(build_dir, httpd, certificate):  # noqa: F811
    """The load generator over TLS: kept-alive connections, and a full handshake per request."""
    cert, key, _ = certificate
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "1")
    binary = str((build_dir / "tools" / "sxe-http").resolve())
    for mode in ([], ["--http1.0"]):
        done = subprocess.run([binary, "-i", "127.0.0.1", "-p", str(server.port), "-u",
                               "/hello.txt", "-c", "4", "-n", "25", "--body-length", "12",
                               "--tls", "--json", *mode], capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["queries"] == 100, report
        assert "no server certificate is checked" in done.stderr.decode()
    assert server.stop() == 0


class ResumptionCounter:
    """An HTTPS server of Python's ssl module (OpenSSL's server, tickets on) that answers every
    request with "ok" on a connection of its own, and counts the handshakes that resumed."""

    def __init__(self, cert, key):
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(str(cert), str(key))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.handshakes = self.resumed = 0
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return  # closed: the test is over
            try:
                with self.context.wrap_socket(sock, server_side=True) as tls:
                    request = b""
                    while b"\r\n\r\n" not in request and (data := tls.recv(4096)):
                        request += data
                    self.handshakes += 1
                    self.resumed += tls.session_reused
                    tls.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
            except (ssl.SSLError, OSError):
                pass  # the client reset the connection once answered


@pytest.mark.parametrize("resume", [False, True])
def test_sxe_http_resumes_sessions_when_asked(build_dir, certificate, resume):  # noqa: F811
    """--tls-resume: each new connection resumes the session its worker was given last (after
    the first, which has none); --tls alone makes a full handshake every time."""
    cert, key, _ = certificate
    server = ResumptionCounter(cert, key)
    try:
        done = subprocess.run([str(build_dir / "tools" / "sxe-http"), "-i", "127.0.0.1", "-p",
                               str(server.port), "-u", "/", "-c", "1", "-w", "1", "-n", "20",
                               "--http1.0", "--json", "--tls-resume" if resume else "--tls"],
                              capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["queries"] == 20
    finally:
        server.listener.close()
    assert server.handshakes == 20
    assert server.resumed == (19 if resume else 0), server.resumed


def test_a_client_that_ends_after_its_handshake_is_let_go(httpd, certificate):  # noqa: F811
    """A TLS health check or a scanner: a handshake, then the client's FIN. The server closes at
    once (on io_uring its end of stream once waited, unheard, behind the tickets it was sending,
    until the idle timeout)."""
    cert, key, _ = certificate
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "1")
    context = client_context(cert)
    for _ in range(10):
        began = time.monotonic()
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            tls = context.wrap_socket(sock, server_hostname="localhost")
            tls.shutdown(socket.SHUT_WR)  # the socket's FIN, no close_notify
            try:
                while tls.recv(4096):
                    pass
            except (ssl.SSLError, ConnectionResetError):
                pass
        assert time.monotonic() - began < 3
    assert server.stop() == 0


def test_a_cut_body_from_an_https_upstream_is_not_passed_on_whole(httpd, certificate):  # noqa: F811
    """An upstream whose body runs to the close, cut by a FIN without close_notify (as someone on
    the path could cut it): the front must not end its answer as if the body were whole."""
    cert, key, _ = certificate
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))

    def upstream():
        raw, _ = listener.accept()
        with context.wrap_socket(raw, server_side=True) as tls:
            tls.recv(65536)
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + b"x" * 1000)
            tls.shutdown(socket.SHUT_RDWR)  # the FIN, without close_notify

    thread = threading.Thread(target=upstream, daemon=True)
    thread.start()
    front = httpd("--workers", "1", "--proxy", f"/=https://127.0.0.1:{port}", "--proxy-ca",
                  str(cert))
    connection = http.client.HTTPConnection("127.0.0.1", front.port, timeout=10)
    connection.request("GET", "/cut")
    response = connection.getresponse()
    with pytest.raises(http.client.IncompleteRead):
        response.read()
    thread.join(timeout=5)
    listener.close()
    assert front.stop() == 0
