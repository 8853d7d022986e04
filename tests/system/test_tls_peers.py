"""sxe-httpd's TLS beyond one certificate: clients made to show certificates (required or
optional; the verified subject passed to proxied upstreams as X-Client-Subject, a client's own
dropped, however spelt), an OCSP response stapled (made with `openssl ocsp` from a test CA, read back with
`openssl s_client -status`), and the certificates reloaded on SIGHUP, in worker processes and
threads, while a connection made before goes on; files that fail leave the old ones serving."""
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time

import pytest

from scripted import made
from test_proxy import Upstream
from test_sxe_httpd import httpd, root  # noqa: F401 (fixtures)

TIMEOUT = 10


def openssl(*args, cwd=None):
    subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=cwd)


def issued(where, ca, name, serial, extensions=""):
    """A P-256 key and a certificate for CN=name issued by ca (a (certificate, key) pair)."""
    key, request, cert = (where / f"{name}.{kind}" for kind in ("key", "csr", "pem"))
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", str(key), "-out", str(request), "-subj", f"/CN={name}/O=Test")
    (where / "ext").write_text(extensions or "basicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", str(request), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
            "-set_serial", str(serial), "-days", "2", "-out", str(cert),
            "-extfile", str(where / "ext"))
    return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A test CA; server certificates it issued for localhost (two, told apart by O=); a client
    certificate it issued (alice), and one no CA here issued (mallory)."""
    where = tmp_path_factory.mktemp("pki")
    ca = where / "ca.pem", where / "ca.key"
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", str(ca[1]), "-out", str(ca[0]), "-days", "2", "-subj", "/CN=Test CA",
            "-addext", "basicConstraints=critical,CA:TRUE")
    server = issued(where, ca, "localhost", 0x1234, "subjectAltName=DNS:localhost\n")
    (where / "second").mkdir()
    second = issued(where / "second", ca, "localhost", 0x5678, "subjectAltName=DNS:localhost\n")
    alice = issued(where, ca, "alice", 0x42)
    mallory = where / "mallory.pem", where / "mallory.key"
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", str(mallory[1]), "-out", str(mallory[0]), "-days", "2",
            "-subj", "/CN=mallory")
    return {"where": where, "ca": ca, "server": server, "second": second, "alice": alice,
            "mallory": mallory}


def context(pki, client=None):
    made = ssl.create_default_context(cafile=str(pki["ca"][0]))
    if client is not None:
        made.load_cert_chain(str(pki[client][0]), str(pki[client][1]))
    return made


def get(port, tls_context, path, headers=""):
    """status and body of one request on a new connection (raises ssl.SSLError, or
    ConnectionError, when the server ends the handshake)."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        with tls_context.wrap_socket(sock, server_hostname="localhost") as tls:
            tls.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}"
                        "Connection: close\r\n\r\n".encode())
            data = b""
            while chunk := tls.recv(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def refused(port, tls_context):
    """Whether the server ends the handshake instead of answering."""
    try:
        status, _ = get(port, tls_context, "/hello.txt")
        return False
    except (ssl.SSLError, ConnectionError):
        return True


def subject_seen(port, tls_context, forged=""):
    """The X-Client-Subject fields the upstream saw."""
    status, body = get(port, tls_context, "/api/echo", forged)
    assert status == 200, body
    return [value for name, value in json.loads(body)["fields"]
            if name.lower().replace("_", "-") == "x-client-subject"]


@pytest.fixture
def upstream():
    with made(Upstream) as make:
        yield make()


def test_client_certificates_required(httpd, pki, upstream):  # noqa: F811
    server = httpd("--workers", "1", "--tls-cert", str(pki["server"][0]), "--tls-key",
                   str(pki["server"][1]), "--tls-client-ca", str(pki["ca"][0]),
                   "--proxy", f"/api/=http://127.0.0.1:{upstream.port}")
    assert get(server.port, context(pki, "alice"), "/hello.txt") == (200, b"Hello World\n")
    assert subject_seen(server.port, context(pki, "alice"), "X-Client-Subject: CN=root\r\n") == \
        ["O=Test,CN=alice"]
    assert refused(server.port, context(pki))
    assert refused(server.port, context(pki, "mallory"))
    assert get(server.port, context(pki, "alice"), "/hello.txt")[0] == 200
    assert server.stop() == 0


def test_client_certificates_optional(httpd, pki, upstream):  # noqa: F811
    server = httpd("--workers", "1", "--tls-cert", str(pki["server"][0]), "--tls-key",
                   str(pki["server"][1]), "--tls-client-ca", str(pki["ca"][0]),
                   "--tls-client-optional", "--proxy", f"/api/=http://127.0.0.1:{upstream.port}",
                   "--proxy-underscores")
    assert subject_seen(server.port, context(pki), "X-Client-Subject: CN=root\r\n") == []
    # Passed with --proxy-underscores, X_Client_Subject would be HTTP_X_CLIENT_SUBJECT to PHP.
    assert subject_seen(server.port, context(pki), "X_Client_Subject: CN=root\r\n") == []
    assert subject_seen(server.port, context(pki, "alice")) == ["O=Test,CN=alice"]
    assert refused(server.port, context(pki, "mallory"))
    assert server.stop() == 0


@pytest.fixture(scope="module")
def ocsp(pki):
    """A DER OCSP response saying pki's server certificate is good, made as an operator would
    with `openssl ocsp` (a request for it, answered from an index by the CA)."""
    where = pki["where"]
    (where / "index.txt").write_text("V\t301231235959Z\t\t1234\tunknown\t/CN=localhost/O=Test\n")
    openssl("ocsp", "-issuer", str(pki["ca"][0]), "-cert", str(pki["server"][0]),
            "-reqout", "request.der", "-no_nonce", cwd=where)
    openssl("ocsp", "-index", "index.txt", "-rsigner", str(pki["ca"][0]), "-rkey",
            str(pki["ca"][1]), "-CA", str(pki["ca"][0]), "-reqin", "request.der",
            "-respout", "response.der", "-ndays", "1", cwd=where)
    return where / "response.der"


def test_ocsp_stapled(httpd, build_dir, root, pki, ocsp):  # noqa: F811
    server = httpd("--workers", "1", "--tls-cert", str(pki["server"][0]), "--tls-key",
                   str(pki["server"][1]), "--tls-ocsp", str(ocsp))
    said = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}",
                           "-servername", "localhost", "-status", "-CAfile", str(pki["ca"][0])],
                          input=b"", capture_output=True, timeout=TIMEOUT).stdout.decode()
    assert "OCSP Response Status: successful" in said and "Cert Status: good" in said, said
    assert "Verify return code: 0 (ok)" in said
    assert server.stop() == 0
    # A response for another certificate: a clear error at start, exit 1.
    binary = str((build_dir / "tools" / "sxe-httpd").resolve())
    done = subprocess.run([binary, "--root", str(root), "--listen", "127.0.0.1:0",
                           "--tls-cert", str(pki["second"][0]), "--tls-key",
                           str(pki["second"][1]), "--tls-ocsp", str(ocsp)],
                          capture_output=True, timeout=TIMEOUT)
    said = done.stderr.decode()
    assert done.returncode == 1 and "not a response for this certificate" in said, said


def serial_shown(port, pki):
    """The serial number of the certificate a new connection is shown."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        with context(pki).wrap_socket(sock, server_hostname="localhost") as tls:
            return int(tls.getpeercert()["serialNumber"], 16)


def wait_for(condition):
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.parametrize("workers", [["--workers", "2"], ["--workers", "2", "--threads"]])
def test_certificates_reloaded_on_sighup(httpd, pki, tmp_path, workers):  # noqa: F811
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    shutil.copy(pki["server"][0], cert)
    shutil.copy(pki["server"][1], key)
    server = httpd(*workers, "--tls-cert", str(cert), "--tls-key", str(key))
    assert serial_shown(server.port, pki) == 0x1234
    before = context(pki).wrap_socket(socket.create_connection(("127.0.0.1", server.port),
                                                               timeout=TIMEOUT),
                                      server_hostname="localhost")
    shutil.copy(pki["second"][0], cert)
    shutil.copy(pki["second"][1], key)
    os.kill(server.process.pid, signal.SIGHUP)
    # Every worker reloads: several new connections in a row are all shown the new one.
    wait_for(lambda: all(serial_shown(server.port, pki) == 0x5678 for _ in range(6)))
    before.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    reply = b""
    while chunk := before.recv(65536):
        reply += chunk
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and reply.endswith(b"Hello World\n")
    before.close()
    if "--threads" not in workers:  # a worker restarted begins with what its supervisor reloaded
        children = subprocess.run(["pgrep", "-P", str(server.process.pid)], capture_output=True,
                                  text=True).stdout.split()
        os.kill(int(children[0]), signal.SIGKILL)
        wait_for(lambda: children[0] not in subprocess.run(
            ["pgrep", "-P", str(server.process.pid)], capture_output=True, text=True).stdout.split()
            and len(subprocess.run(["pgrep", "-P", str(server.process.pid)], capture_output=True,
                                   text=True).stdout.split()) == 2)
        assert all(serial_shown(server.port, pki) == 0x5678 for _ in range(8))
    # A key that is not the certificate's: said, and the certificate before serves on.
    shutil.copy(pki["server"][1], key)
    os.kill(server.process.pid, signal.SIGHUP)
    time.sleep(0.5)
    assert all(serial_shown(server.port, pki) == 0x5678 for _ in range(6))
    assert server.process.poll() is None
    assert server.stop() == 0
    said = server.process.stderr.read().decode()
    assert "reloaded the TLS files" in said and "not the key of certificate" in said, said
    assert "the TLS files were not reloaded; the old ones serve on" in said, said
