"""WebSocket attacked with slowness: peers that take every large buffer with a message they never
finish, a byte at a time, so that nobody else can send a large message. examples/ws-echo has 64
large buffers for messages of up to 1 MiB."""
import base64
import os
import socket
import struct
import threading
import time

import pytest


def masked(opcode, payload, length=None, fin=True):
    """A client frame's bytes: its head (for length bytes of payload, len(payload) unless given)
    and the payload given, masked."""
    length = len(payload) if length is None else length
    key = os.urandom(4)
    head = bytes([(0x80 if fin else 0) | opcode])
    if length < 126:
        head += bytes([0x80 | length])
    elif length < 65536:
        head += bytes([0x80 | 126]) + struct.pack("!H", length)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", length)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def opened(port):
    """A socket whose handshake was answered 101."""
    sock = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(f"GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(1)
    assert answer.startswith(b"HTTP/1.1 101 "), answer
    return sock


def next_frame(sock):
    """(opcode, payload) of the server's next frame, or (None, b"") if the connection ended."""
    def exactly(count):
        data = b""
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    try:
        first, second = exactly(2)
        length = second & 0x7f
        if length == 126:
            length = struct.unpack("!H", exactly(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", exactly(8))[0]
        return first & 0x0f, exactly(length)
    except (EOFError, ConnectionResetError):
        return None, b""


@pytest.mark.serial
def test_messages_that_never_finish_give_their_buffers_back(ws_echo):
    """64 peers each send 200 KB of a 1 MB message, then a byte every half second. Within seconds
    each is closed 1008 and its buffer let go, and another peer's 100 KB message is
    echoed (it was refused 1013 while they held every buffer)."""
    slow = [opened(ws_echo) for _ in range(64)]
    for sock in slow:
        sock.sendall(masked(2, b"\x00" * 200_000, length=1 << 20))
    stop = threading.Event()

    def trickle():
        while not stop.wait(0.5):
            for sock in slow:
                try:
                    sock.send(b"\x00")
                except OSError:
                    pass

    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()
    try:
        started = time.monotonic()
        codes = []
        for sock in slow:  # the rate is judged over three seconds and more, checked each second
            sock.settimeout(15)
            opcode, payload = next_frame(sock)
            codes.append(struct.unpack("!H", payload[:2])[0] if opcode == 8 else opcode)
        assert codes == [1008] * 64
        assert time.monotonic() - started < 12
        with opened(ws_echo) as honest:  # the buffers are free again
            honest.settimeout(10)
            message = os.urandom(100_000)
            honest.sendall(masked(2, message))
            assert next_frame(honest) == (2, message)
    finally:
        stop.set()
        trickler.join()
        for sock in slow:
            sock.close()
