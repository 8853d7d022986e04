"""sxe-httpd's file cache over a file that changes: each change is served, and the descriptor of
the entry it replaces is closed (a worker holds one per large file cached, never more)."""
import os
import time

from test_sxe_httpd import get, httpd, root  # noqa: F401 (fixtures)


def descriptors_of(pid, path):
    """How many of the process's descriptors are open on path."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{name}") == str(path)
        except OSError:
            pass
    return count


def test_a_changed_file_is_served_anew_and_its_old_descriptor_closed(httpd, root):  # noqa: F811
    big = root / "big.bin"  # past what is held in memory: the entry keeps its descriptor
    server = httpd("--workers", "1")
    deadline = time.monotonic() + 5  # on a loaded machine the worker may come after the banner
    while True:
        with open(f"/proc/{server.process.pid}/task/{server.process.pid}/children") as children:
            pids = children.read().split()
        if pids or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    worker = int(pids[0])
    for version in range(4):
        body = bytes([65 + version]) * (200 * 1024 + version)
        big.write_bytes(body)
        os.utime(big, (time.time() + version * 10, time.time() + version * 10))
        time.sleep(1.1)  # the cache looks at a file again at most once a second
        status, _, got = get(server.port, "/big.bin")
        assert status == 200 and got == body, version
        assert descriptors_of(worker, big) == 1, version
    assert server.stop() == 0
