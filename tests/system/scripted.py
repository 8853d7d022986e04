"""Scripted peers for the system tests: a loopback listener on a free port that serves each
connection on a thread of its own, as its subclass scripts it, and a fixture body that stops every
one a test made."""
import contextlib
import socket
import threading


class Scripted:
    """A listener on host (127.0.0.1) and port (a free one): self.port. serve(conn, number)
    scripts each connection, numbered from 1; the connection is closed when it returns."""

    def __init__(self, host="127.0.0.1", port=0):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.lock = threading.Lock()
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                number = self.connections
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn, number):
        with conn:
            try:
                self.serve(conn, number)
            except OSError:
                pass
            finally:
                self.served(number)

    def serve(self, conn, number):
        raise NotImplementedError

    @staticmethod
    def read_head(conn, data=b""):
        """Reads from conn until data holds a whole head: (head, the bytes after it), or None if
        the connection ends first."""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        return head, rest

    def served(self, number):
        """Called when a connection's script has ended."""

    def stop(self):
        self.running = False
        self.sock.close()


@contextlib.contextmanager
def made(kind):
    """A fixture's body: yields make(*args), which starts a kind(*args), and stops them all
    after the test."""
    started = []

    def make(*args):
        started.append(kind(*args))
        return started[-1]

    try:
        yield make
    finally:
        for peer in started:
            peer.stop()
