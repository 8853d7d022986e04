"""sxe-httpd's TLS listener against hostile clients: a ClientHello written a byte at a time, one of
16 KB of unknown extensions over two records, one that declares 128 KB and sends nothing more,
1,000 of those held open at once (the others are served, the memory each costs is bounded), and
a client that asks to renegotiate."""
import hashlib
import os
import socket
import ssl
import struct
import subprocess
import time

import pytest

from test_sxe_httpd import free_port, httpd, root  # noqa: F401 (fixtures)
from test_tls import certificate, client_context, https  # noqa: F401 (fixtures)

TIMEOUT = 10  # seconds, for anything the server should do at once


def handshake_by_hand(sock, tls, outgoing, incoming, split):
    """Runs tls's handshake over sock, each of its flights sent split bytes a write."""
    while True:
        try:
            tls.do_handshake()
            return
        except ssl.SSLWantReadError:
            flight = outgoing.read()
            for at in range(0, len(flight), split):
                sock.sendall(flight[at:at + split])
                if split == 1:
                    time.sleep(0.0005)  # each its own segment (TCP_NODELAY), and its own read
            data = sock.recv(65536)
            assert data, "the server closed during the handshake"
            incoming.write(data)


def test_a_client_hello_a_byte_at_a_time(httpd, certificate):  # noqa: F811
    cert, key, _ = certificate
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "1")
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = client_context(cert).wrap_bio(incoming, outgoing, server_hostname="localhost")
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        handshake_by_hand(sock, tls, outgoing, incoming, 1)
        tls.write(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        request = outgoing.read()
        for at in range(len(request)):  # the request's record too, a byte at a time
            sock.sendall(request[at:at + 1])
        answer = b""
        while data := sock.recv(65536):
            incoming.write(data)
            try:
                while chunk := tls.read(65536):
                    answer += chunk
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                break
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\nHello World\n")
    assert server.stop() == 0


def extension(kind, data):
    return struct.pack(">HH", kind, len(data)) + data


def client_hello(junk_extensions):
    """A TLS 1.2 ClientHello, ECDHE-ECDSA or ECDHE-RSA with AES-GCM, carrying that many unknown
    extensions of 100 bytes each, in as many records of at most 16 KB as it takes."""
    suites = b"\xc0\x2b\xc0\x2f"  # TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, ..._RSA_...
    extensions = (extension(10, b"\x00\x04\x00\x1d\x00\x17") +  # groups: X25519, P-256
                  extension(11, b"\x01\x00") +  # point formats: uncompressed
                  extension(13, b"\x00\x04\x04\x03\x08\x04") +  # ECDSA P-256, RSA-PSS, SHA-256
                  extension(0xff01, b"\x00"))  # renegotiation_info, empty: a first handshake
    for i in range(junk_extensions):  # types no one has assigned, each once
        extensions += extension(0x7a00 + i, os.urandom(100))
    body = (b"\x03\x03" + os.urandom(32) + b"\x00" + struct.pack(">H", len(suites)) + suites +
            b"\x01\x00" + struct.pack(">H", len(extensions)) + extensions)
    message = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"".join(b"\x16\x03\x01" + struct.pack(">H", len(message[at:at + 16384])) +
                    message[at:at + 16384] for at in range(0, len(message), 16384))


def declaring(size):
    """A first record of 16 KB that opens a ClientHello declaring size bytes (after its 4 bytes
    of header), the rest of it never sent."""
    head = b"\x01" + size.to_bytes(3, "big") + b"\x03\x03"
    return b"\x16\x03\x01\x40\x00" + head + os.urandom(16384 - len(head))


def first_message(sock):
    """The type of the first handshake message the server sends, or of its alert (as 'alert N')."""
    head = b""
    while len(head) < 9:
        data = sock.recv(9 - len(head))
        if not data:
            return "closed"
        head += data
    if head[0] == 21:
        return f"alert {head[6]}"
    assert head[0] == 22, head
    return head[5]


def test_a_client_hello_of_16_kb_of_unknown_extensions(httpd, certificate):  # noqa: F811
    cert, key, _ = certificate
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "1")
    hello = client_hello(160)  # 16.6 KB: its message spans two records
    assert len(hello) > 16384 + 5 and hello.count(b"\x16\x03\x01") >= 2
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
        sock.sendall(hello)
        assert first_message(sock) == 2  # ServerHello: unknown extensions are ignored
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
        sock.sendall(declaring(131396 + 1))  # one byte past the most OpenSSL reads of one
        assert first_message(sock) in ("closed", "alert 47"), "not refused at once"
    connection = https(server.port, cert)  # and the others are served on
    connection.request("GET", "/hello.txt")
    assert connection.getresponse().status == 200
    assert server.stop() == 0


def resident_kb(pid):
    """The resident memory of pid and its children, in KB."""
    with open(f"/proc/{pid}/task/{pid}/children") as file:
        pids = [pid] + [int(child) for child in file.read().split()]
    total = 0
    for each in pids:
        with open(f"/proc/{each}/status") as file:
            total += sum(int(line.split()[1]) for line in file if line.startswith("VmRSS:"))
    return total


@pytest.mark.serial
def test_a_thousand_half_open_handshakes(httpd, build_dir, certificate):  # noqa: F811
    """1,000 clients each declare a ClientHello of 128 KB (the most OpenSSL reads) and send its
    first record of 16 KB, which would have OpenSSL reserve and clear 128 KB for each. The loop
    reads 16 such at once and refuses the rest; every other client is served meanwhile, and the
    memory they cost is bounded (153 KB each before the bound)."""
    cert, key, _ = certificate
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "1")
    connection = https(server.port, cert)
    connection.request("GET", "/hello.txt")
    assert connection.getresponse().read() == b"Hello World\n"
    connection.close()
    before = resident_kb(server.process.pid)
    held = []
    try:
        for _ in range(1000):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)
            sock.sendall(declaring(131396))
            held.append(sock)
        for _ in range(20):  # served meanwhile, each at once
            began = time.monotonic()
            connection = https(server.port, cert)
            connection.request("GET", "/hello.txt")
            assert connection.getresponse().read() == b"Hello World\n"
            connection.close()
            assert time.monotonic() - began < 1
        each = (resident_kb(server.process.pid) - before) / len(held)
        # AddressSanitizer's build about doubles what each allocation holds; without the bound a
        # stalled large hello holds 153 KB, and twice that there.
        most = 160 if b"libasan" in (build_dir / "tools" / "sxe-httpd").read_bytes() else 64
        assert each < most, f"{each:.1f} KB a half-open handshake"
    finally:
        for sock in held:
            sock.close()
    assert server.stop() == 0


def retried_hello():
    """A TLS 1.3 ClientHello that offers X25519 and no key share for it: the server answers with
    a HelloRetryRequest."""
    extensions = (extension(43, b"\x02\x03\x04") +  # supported_versions: TLS 1.3
                  extension(10, b"\x00\x02\x00\x1d") +  # groups: X25519
                  extension(51, b"\x00\x00") +  # key_share: none
                  extension(13, b"\x00\x02\x04\x03"))  # ECDSA P-256 with SHA-256
    body = (b"\x03\x03" + os.urandom(32) + b"\x20" + os.urandom(32) + b"\x00\x02\x13\x01" +
            b"\x01\x00" + struct.pack(">H", len(extensions)) + extensions)
    message = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + struct.pack(">H", len(message)) + message


@pytest.mark.serial
@pytest.mark.parametrize("way", ["after the retry", "with the first", "after an alert"])
def test_a_large_second_hello_is_counted(httpd, certificate, way):  # noqa: F811
    """A client may send a small ClientHello, be asked to retry (HelloRetryRequest), and send a
    large one: after the retry, behind a ChangeCipherSpec; in the same send as the first, before
    the retry is written (OpenSSL reads ahead); or behind a warning alert, which TLS 1.3 passes
    over. However it comes, it is counted as a first would be: with the room for large hellos held
    by 16 stalled ones, it is refused at once, not left holding 150 KB until handshake_timeout."""
    cert, key, _ = certificate
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "1")
    held = []
    try:
        for _ in range(16):
            held.append(socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT))
            held[-1].sendall(declaring(131396))
        with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
            if way == "with the first":
                sock.sendall(retried_hello() + declaring(131396))
            else:
                sock.sendall(retried_hello())
                answer = sock.recv(5 + 4 + 2 + 32)
                retry = hashlib.sha256(b"HelloRetryRequest").digest()  # its random (RFC 8446)
                assert answer[0] == 22 and answer[5] == 2 and answer[11:43] == retry, answer
                between = (b"\x14\x03\x03\x00\x01\x01" if way == "after the retry"
                           else b"\x15\x03\x03\x00\x02\x01\x5a")  # CCS; user_canceled
                sock.sendall(between + declaring(131396))
            sock.settimeout(3)  # refused at once, well before handshake_timeout (10 s)
            while sock.recv(65536):  # the rest of the retry's record, then the end
                pass
    finally:
        for sock in held:
            sock.close()
    assert server.stop() == 0


def test_renegotiation_is_refused(httpd, certificate):  # noqa: F811
    """openssl s_client's 'R' asks a TLS 1.2 server to renegotiate: it is refused (no
    renegotiation takes place), and the connection still serves its request."""
    cert, key, _ = certificate
    server = httpd("--tls-cert", str(cert), "--tls-key", str(key), "--workers", "1")
    said = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}",
                           "-tls1_2", "-CAfile", str(cert), "-servername", "localhost"],
                          input="R\nGET /hello.txt HTTP/1.1\nHost: localhost\n"
                                "Connection: close\n\n",
                          capture_output=True, text=True, timeout=30, check=False)
    out = said.stdout + said.stderr
    assert "RENEGOTIATING" in out, out[-2000:]
    assert "Verify return code: 0 (ok)" in out
    assert out.count("New, TLSv1.2") == 1, out[-2000:]  # one handshake: no second took place
    assert "Hello World" in out or "no renegotiation" in out, out[-2000:]
    assert server.stop() == 0
