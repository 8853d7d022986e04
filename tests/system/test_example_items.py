"""examples/http-items: a store of items in SQLite, two processes on one database file (on two
loopback addresses, standing for two servers), many writers at once on both: every item
acknowledged is kept once, under its own id, and both lists agree; bad bodies get clear errors;
a file that is not a database stops the program at once with SQLite's reason."""
import http.client
import json
import signal
import socket
import sqlite3
import subprocess
import threading

import pytest

from conftest import wait_until

WRITERS = 8
ITEMS_EACH = 40


def free_port(host):
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def accepts(host, port, process):
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except ConnectionRefusedError:
        assert process.poll() is None, f"http-items on {host} exited: {process.returncode}"
        return False


@pytest.fixture
def items(build_dir, tmp_path):
    """Starts examples/http-items on host with the database tmp_path/items.db (or file)."""
    started = []

    def start(host, file=None):
        port = free_port(host)
        process = subprocess.Popen(
            [str(build_dir / "examples" / "http-items"), f"{host}:{port}",
             str(file or tmp_path / "items.db")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        started.append(process)
        wait_until(lambda: accepts(host, port, process), 5, f"http-items on {host}")
        return process, port

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == 0


def ask(host, port, method, body=None):
    connection = http.client.HTTPConnection(host, port, timeout=30)
    connection.request(method, "/items", body=body,
                       headers={"Content-Type": "application/json"} if body else {})
    response = connection.getresponse()
    answer = response.status, json.loads(response.read())
    connection.close()
    return answer


def test_two_processes_and_many_writers_keep_every_item_once(items, tmp_path):
    first, first_port = items("127.0.0.1")
    second, second_port = items("127.0.0.2")
    ids, failures = {}, []

    def writer(number):
        try:
            for i in range(ITEMS_EACH):
                host, port = ("127.0.0.1", first_port) if i % 2 else ("127.0.0.2", second_port)
                name = f"writer {number} item {i} é"
                status, answer = ask(host, port, "POST", json.dumps({"name": name}))
                assert status == 201, answer
                ids[name] = answer["id"]
        except Exception as error:  # noqa: BLE001 (the main thread reports it)
            failures.append(repr(error))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures[:3]
    total = WRITERS * ITEMS_EACH
    assert len(ids) == total
    assert sorted(ids.values()) == list(range(1, total + 1))  # each its own id, none lost

    status, from_first = ask("127.0.0.1", first_port, "GET")
    assert status == 200
    status, from_second = ask("127.0.0.2", second_port, "GET")
    assert status == 200
    assert from_first == from_second
    assert len(from_first) == 100
    assert [item["id"] for item in from_first] == list(range(total, total - 100, -1))
    assert all(ids[item["name"]] == item["id"] for item in from_first)

    for process in (first, second):
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    with sqlite3.connect(tmp_path / "items.db") as database:  # on the disk, after both stopped
        assert database.execute("SELECT count(*), count(DISTINCT name) FROM items").fetchone() == (
            total, total)


def test_bad_bodies_get_clear_errors(items):
    _, port = items("127.0.0.1")
    assert ask("127.0.0.1", port, "POST", '{"name": ""}') == (
        422, {"error": "want a name of 1 to 64 bytes"})
    assert ask("127.0.0.1", port, "POST", json.dumps({"name": "x" * 65}))[0] == 422
    assert ask("127.0.0.1", port, "POST", '{"name": "a\\u0000b"}')[0] == 422  # a NUL inside
    status, answer = ask("127.0.0.1", port, "POST", '{"name": "tea",')
    assert status == 400
    assert answer["line"] == 1 and answer["position"] == 15
    assert ask("127.0.0.1", port, "GET") == (200, [])  # nothing was added


def test_a_file_that_is_not_a_database(build_dir, tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database " * 400)
    result = subprocess.run(
        [str(build_dir / "examples" / "http-items"), f"127.0.0.1:{free_port('127.0.0.1')}",
         str(garbage)], capture_output=True, text=True, timeout=10)
    assert result.returncode == 1
    assert "garbage.db: file is not a database" in result.stderr
    assert "cannot serve" in result.stderr
    assert garbage.read_bytes() == b"not a database " * 400  # untouched
