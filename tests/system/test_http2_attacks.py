"""HTTP/2 attacked: frames that break the protocol, limits, requests and bodies that come too
slowly or too large, rapid reset, floods of frames that carry no request (SETTINGS, PING, PRIORITY,
empty DATA, CONTINUATION), an HPACK bomb, windows held shut, the last stream ID, and a connection
past its memory. Each attack gets a bounded answer (a status, GOAWAY with its code, a closed
connection), and another client is served meanwhile."""
import os
import socket
import time

import h2.errors
import h2.exceptions
import pytest

from h2client import (PREFACE, Client, example, frame, frames_until_closed,  # noqa: F401
                      goaway_code, httpd, start_example, stop_example)
from test_sxe_httpd import Httpd, root  # noqa: F401 (root is a fixture)

@pytest.mark.parametrize("frames, code", [
    (frame(0, 0, 0, b"x"), h2.errors.ErrorCodes.PROTOCOL_ERROR),  # DATA on stream 0
    (frame(6, 0, 0, b"1234567"), h2.errors.ErrorCodes.FRAME_SIZE_ERROR),  # a PING of 7 bytes
    (frame(0, 0, 1, b"\x00" * 16385), h2.errors.ErrorCodes.FRAME_SIZE_ERROR),  # over 16,384
    (frame(1, 0x08 | 0x04, 1, b"\x05ab"), h2.errors.ErrorCodes.PROTOCOL_ERROR),  # padding > frame
])
def test_frames_that_break_the_protocol_end_the_connection_with_goaway(httpd, frames, code):
    assert goaway_code(httpd.port, frames) == code


def test_a_body_past_the_limit_is_refused_and_the_connection_goes_on(example):
    client = Client(example("http-api"))
    stream = client.request("/echo", method="POST", body=b"x" * (1024 * 1024 + 1))
    client.until(lambda: client.streams[stream]["ended"] or client.streams[stream]["reset"])
    assert client.streams[stream]["headers"][":status"] == "413"
    assert client.get("/hello")[0] == 200
    client.close()


def test_fields_past_the_limits_are_refused(example):
    client = Client(example("http-api"))
    assert client.get("/" + "a" * 9000)[0] == 414
    many = [(f"x-field-{i}", "v") for i in range(101)]
    assert client.get("/hello", headers=many)[0] == 431
    assert client.get("/hello", headers=many[:90])[0] == 200
    client.close()


def test_an_authority_or_host_that_names_no_one_host_is_refused(example):
    """:authority and host are checked as a Host field is over HTTP/1.1 (userinfo, a list, a port
    past five digits: 400), and a host field must agree with :authority (RFC 9113 §8.3.1)."""
    client = Client(example("http-api"))
    client.conn.config.validate_outbound_headers = False

    def status(*fields):
        stream = client.conn.get_next_available_stream_id()
        client.streams[stream] = {"headers": None, "data": b"", "ended": False, "reset": None}
        client.conn.send_headers(stream, [(":method", "GET"), (":path", "/hello"),
                                          (":scheme", "http"), *fields], end_stream=True)
        client.flush()
        client.until(lambda: client.streams[stream]["ended"] or client.streams[stream]["reset"])
        answer = client.streams[stream]
        return int(answer["headers"][":status"]) if answer["headers"] else "reset"

    for fields in ([(":authority", "a.test:x@b.test")], [(":authority", "a.test:99999999")],
                   [(":authority", "a.test,b.test")], [(":authority", "[a.test")],
                   [(":authority", "a.test"), ("host", "b.test")], [("host", "a@b.test")]):
        assert status(*fields) == 400, fields
    # Two host fields: nghttp2 resets the stream itself (a malformed request), or sxe answers 400.
    assert status(("host", "a.test"), ("host", "a.test")) in (400, "reset")
    assert status((":authority", "a.test:8080"), ("host", "A.TEST:8080")) == 200
    assert status(("host", "a.test")) == 200
    assert status((":authority", "a.test")) == 200
    client.close()


def test_a_content_length_past_the_limit_is_refused_at_the_head(example):
    client = Client(example("http-api"))
    stream = client.conn.get_next_available_stream_id()
    client.streams[stream] = {"headers": None, "data": b"", "ended": False, "reset": None}
    client.conn.send_headers(stream, [(":method", "POST"), (":path", "/echo"), (":scheme", "http"),
                                      (":authority", "x"), ("content-length", "2000000")])
    client.flush()
    client.until(lambda: client.streams[stream]["headers"] is not None)
    assert client.streams[stream]["headers"][":status"] == "413"  # no byte of the body sent
    # The answer is whole, and the client is told not to send the body (RFC 9113 §8.1).
    client.until(lambda: client.streams[stream]["reset"] is not None)
    assert client.streams[stream]["reset"] == h2.errors.ErrorCodes.NO_ERROR
    assert client.get("/hello?name=next")[0] == 200
    client.close()


def test_a_proxied_body_too_long_or_too_slow_is_refused_and_the_connection_goes_on(
        build_dir, root, example):  # noqa: F811
    upstream = example("http-api")
    server = Httpd(build_dir, root, "--proxy", f"/echo=127.0.0.1:{upstream}", "--proxy-max-body",
                   "100000")
    try:
        client = Client(server.port)
        for _ in range(12):  # each refusal gives back the window its bytes took (they once leaked)
            long = client.conn.get_next_available_stream_id()  # no content-length: as it comes
            client.streams[long] = {"headers": None, "data": b"", "ended": False, "reset": None}
            client.conn.send_headers(long, [(":method", "POST"), (":path", "/echo"),
                                            (":scheme", "http"), (":authority", "x")])
            try:
                client.send_body(long, b"y" * 150000)
            except h2.exceptions.StreamClosedError:
                pass  # reset (NO_ERROR) after its 413, under the sending
            client.until(lambda: client.streams[long]["headers"] is not None)
            assert client.streams[long]["headers"][":status"] == "413"
        slow = client.conn.get_next_available_stream_id()
        client.streams[slow] = {"headers": None, "data": b"", "ended": False, "reset": None}
        client.conn.send_headers(slow, [(":method", "POST"), (":path", "/echo"),
                                        (":scheme", "http"), (":authority", "x")])
        started = time.monotonic()
        while client.streams[slow]["headers"] is None and time.monotonic() - started < 8:
            client.conn.send_data(slow, b"s")  # a byte every 0.3 s, far under --body-rate
            client.flush()
            try:
                client.until(lambda: client.streams[slow]["headers"] is not None, timeout=0.3)
            except (AssertionError, TimeoutError):
                pass
        assert client.streams[slow]["headers"][":status"] == "408"
        assert time.monotonic() - started < 6
        status, _, body = client.get("/echo", method="POST", body=b"h" * 90000)
        assert (status, body) == (200, b"h" * 90000)
        client.close()
    finally:
        assert server.stop() == 0


def test_requests_that_do_not_all_come_in_time_get_408(build_dir, root):  # noqa: F811
    server = Httpd(build_dir, root, "--header-timeout", "1")
    try:
        client = Client(server.port)
        whole = client.request("/hello.txt", method="POST", body=b"all of it")
        late = client.conn.get_next_available_stream_id()
        client.streams[late] = {"headers": None, "data": b"", "ended": False, "reset": None}
        client.conn.send_headers(late, [(":method", "POST"), (":path", "/hello.txt"),
                                        (":scheme", "http"), (":authority", "x")])
        client.conn.send_data(late, b"some of it")  # and never the rest
        client.flush()
        deadline = time.monotonic() + 3
        while client.streams[late]["headers"] is None and time.monotonic() < deadline:
            client.conn.ping(b"12345678")  # the client is alive; its request is not whole
            client.flush()
            try:
                client.until(lambda: client.streams[late]["headers"] is not None, timeout=0.3)
            except (AssertionError, TimeoutError):
                pass
        assert client.streams[late]["headers"][":status"] == "408"
        assert client.streams[whole]["headers"][":status"] == "405"  # whole: answered at once
        client.close()
    finally:
        assert server.stop() == 0


def reset_at_once(client, count):
    """Opens count streams and resets each in the packet that opens it, while its answer (a small
    file or a large one) is being made."""
    for at in range(0, count, 50):
        for path in ("/hello.txt", "/big.bin") * 25:
            stream = client.conn.get_next_available_stream_id()
            client.conn.send_headers(stream, [(":method", "GET"), (":path", path),
                                              (":scheme", "http"), (":authority", "x")],
                                     end_stream=True)
            client.conn.reset_stream(stream, h2.errors.ErrorCodes.CANCEL)
        client.flush()


def test_streams_reset_as_soon_as_they_are_opened(httpd, root):  # noqa: F811
    """Rapid reset: 500 streams reset as they open, and the connection serves on; thousands, and
    the connection ends (GOAWAY), as nghttp2 limits a client's resets."""
    (root / "big.bin").write_bytes(b"b" * 300000)
    client = Client(httpd.port)
    reset_at_once(client, 500)
    assert client.get("/hello.txt")[::2] == (200, b"Hello World\n")
    assert client.terminated is None
    client.close()
    attacker = Client(httpd.port)
    with pytest.raises((ConnectionError, OSError, h2.exceptions.ProtocolError)):
        reset_at_once(attacker, 5000)
        attacker.until(lambda: attacker.terminated is not None)
        attacker.read_some()  # closed after its GOAWAY
    assert Client(httpd.port).get("/hello.txt")[0] == 200  # the others are served


def test_a_connection_past_its_memory_is_closed(build_dir):
    """Events every millisecond to 100 streams whose windows stay shut: their answers pile up to
    the connection's 16 MiB, a PING's answer cannot be made, and the connection is closed, not
    left unanswered; the subscribers it held are let go."""
    port, process = start_example(build_dir, "sse", 1)
    try:
        client = Client(port, window=0)
        for _ in range(100):
            client.request("/events")
        deadline = time.monotonic() + 20
        with pytest.raises((ConnectionError, OSError)):
            while time.monotonic() < deadline:
                client.conn.ping(b"pingping")  # its answer cannot be made, past the memory
                client.flush()
                client.sock.settimeout(0.5)
                try:
                    client.read_some()
                except socket.timeout:
                    pass
                time.sleep(0.2)
        assert time.monotonic() < deadline, "the connection was never closed"
        fresh = Client(port)
        events = fresh.request("/events")
        fresh.until(lambda: b"tick" in fresh.streams[events]["data"])
        fresh.close()
    finally:
        stop_example(process)


def request_head(path, authority=b"x"):
    """A GET's fields in HPACK, none indexed into the table: :method GET, :scheme http (from the
    static table), :path and :authority as literals."""
    return bytes([0x82, 0x86, 0x04, len(path)]) + path + bytes([0x01, len(authority)]) + authority


# Frames that carry no request, 20,000 of each; nghttp2 stops the SETTINGS and PING floods when
# their answers pile up, sxe the rest past 1,000 in a second, and CONTINUATION past nghttp2's limit.
FLOODS = {
    "SETTINGS": b"".join(frame(4, 0, 0, b"") for _ in range(20000)),
    "PING": b"".join(frame(6, 0, 0, b"12345678") for _ in range(20000)),
    "PRIORITY": b"".join(frame(2, 0, 1 + 2 * i, bytes(4) + b"\x10") for i in range(20000)),
    "empty DATA": frame(1, 0x4, 1, request_head(b"/hello.txt")) +
    b"".join(frame(0, 0, 1, b"") for _ in range(20000)),
    "CONTINUATION": frame(1, 0, 1, request_head(b"/hello.txt")) +
    b"".join(frame(9, 0, 1, b"\x00\x01a\x01b") for _ in range(20000)),
}


@pytest.mark.parametrize("flood", sorted(FLOODS))
def test_floods_of_frames_with_no_request_end_with_enhance_your_calm(httpd, flood):
    victim = Client(httpd.port)
    started = time.monotonic()
    assert goaway_code(httpd.port, FLOODS[flood]) == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
    assert time.monotonic() - started < 2
    assert victim.get("/hello.txt")[::2] == (200, b"Hello World\n")  # served meanwhile
    victim.close()


def test_an_hpack_bomb_is_refused_431_and_the_connection_goes_on(httpd):
    """A 4,000-byte value put in the dynamic table, then referred to 10,000 times in one block of
    10 KB: 40 MB of fields, refused past the header list's 16 KiB without being kept."""
    bomb = bytes([0x40, 1]) + b"b" + bytes([0x7f, 0xa1, 0x1e]) + b"v" * 4000  # index 62
    block = request_head(b"/hello.txt") + bomb + bytes([0x80 | 62]) * 10000
    after = request_head(b"/hello.txt")
    found = frames_until_closed(httpd.port, frame(1, 0x4 | 0x1, 1, block) +
                                frame(1, 0x4 | 0x1, 3, after) + frame(7, 0, 0, bytes(8)))
    heads = {stream: payload for kind, _, stream, payload in found if kind == 1}
    assert b"431" in heads[1]  # :status 431, a literal (the static table has no 431)
    assert heads[3][:1] == bytes([0x80 | 8])  # :status 200, from the static table
    assert not any(kind == 7 and payload[4:8] != bytes(4) for kind, _, _, payload in found)


def test_the_last_stream_id_is_served_and_a_lower_one_after_it_ends_the_connection(httpd):
    last = 2**31 - 1
    with socket.create_connection(("127.0.0.1", httpd.port), timeout=5) as sock:
        sock.sendall(PREFACE + frame(4, 0, 0, b"") +
                     frame(1, 0x4 | 0x1, last, request_head(b"/hello.txt")))
        seen = b""
        while b"Hello World" not in seen:
            seen += sock.recv(65536)
        sock.sendall(frame(1, 0x4 | 0x1, 7, request_head(b"/hello.txt")))  # below the last
        while chunk := sock.recv(65536):
            seen += chunk
    goaway = seen.index(bytes([7, 0, 0, 0, 0, 0]))  # its type, flags and stream 0
    assert seen[goaway + 10:goaway + 14] == h2.errors.ErrorCodes.PROTOCOL_ERROR.to_bytes(4, "big")


def resident_kb(pid):
    with open(f"/proc/{pid}/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS:")).split()[1])


def test_windows_held_shut_cost_no_memory_for_files(build_dir, root):  # noqa: F811
    """Ten connections whose windows stay shut ask for a 1 MB file a hundred times each: the
    answers wait as file ranges, not copies, and others are served meanwhile."""
    (root / "big.bin").write_bytes(b"w" * 1000000)
    server = Httpd(build_dir, root, "--workers", "1")
    try:
        # the listening socket answers before the supervisor has forked the worker
        deadline = time.monotonic() + 5
        while not (found := open(f"/proc/{server.process.pid}/task/{server.process.pid}"
                                 "/children").read().split()):
            assert time.monotonic() < deadline, "no worker"
            time.sleep(0.02)
        worker = int(found[0])
        assert Client(server.port).get("/big.bin")[0] == 200  # the file is in the cache
        before = resident_kb(worker)
        shut = [Client(server.port, window=0) for _ in range(10)]
        for client in shut:
            streams = [client.request("/big.bin") for _ in range(100)]
            client.until(lambda: all(client.streams[s]["headers"] for s in streams))
        grown = resident_kb(worker) - before
        assert grown < 8 * 1024, grown  # KB: the streams' and sessions' own, not 1 GB of answers
        assert Client(server.port).get("/hello.txt")[0] == 200
        for client in shut:
            client.close()
    finally:
        assert server.stop() == 0
