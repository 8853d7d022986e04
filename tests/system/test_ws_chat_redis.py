"""examples/ws-chat --redis: two chat processes (on two loopback addresses, standing for two
machines) and a real redis-server started by the test make one room. Every guest of either sees
every line, in the same order everywhere; a browser on each process sees the other's messages in
order; when Redis restarts the room comes back by itself; a process that cannot reach Redis at
start says so and exits 1."""
import asyncio
import pathlib
import signal
import socket
import subprocess
import time

import pytest

from conftest import wait_until

PAGE = pathlib.Path(__file__).parents[2] / "examples" / "ws-chat.html"
MESSAGES = "return Array.from(document.querySelectorAll('#messages li'), li => li.textContent)"
WAIT = 10


def free_port(host="127.0.0.1"):
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def redis_pid(port):
    """The process_id the Redis server on port says it has, or None if none answers."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"INFO server\r\n")
            text = b""
            while b"\r\n\r\n" not in text:
                chunk = sock.recv(8192)
                if not chunk:
                    break
                text += chunk
    except OSError:
        return None
    for line in text.decode(errors="replace").splitlines():
        if line.startswith("process_id:"):
            return int(line.split(":")[1])
    return None


class Redis:
    """A redis-server of the test's own, on a free port, checked to be the one answering."""

    def __init__(self):
        self.port = free_port()
        self.process = None

    def start(self):
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: redis_pid(self.port) == self.process.pid
                   or self.process.poll() is not None, WAIT, "redis-server to answer")
        assert self.process.poll() is None, "redis-server exited (its port was taken?)"

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def redis():
    server = Redis()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def chats(build_dir, redis):
    """Starts ws-chat --redis on host; stops them all at the end (each must exit 0)."""
    started = []

    def start(host):
        port = free_port(host)
        process = subprocess.Popen(
            [str(build_dir / "examples" / "ws-chat"), "--redis", f"127.0.0.1:{redis.port}",
             f"{host}:{port}", str(PAGE)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        started.append(process)

        def accepts():
            try:
                socket.create_connection((host, port), timeout=1).close()
                return True
            except ConnectionRefusedError:
                assert process.poll() is None, process.stderr.read().decode()
                return False

        wait_until(accepts, WAIT, f"ws-chat on {host}")
        return f"{host}:{port}"

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=WAIT) == 0, process.stderr.read().decode()


async def receive_all(client, quiet=0.3):
    """Every line the client has been sent until nothing comes for quiet seconds."""
    lines = []
    while True:
        try:
            lines.append(await asyncio.wait_for(client.recv(), quiet))
        except asyncio.TimeoutError:
            return lines


def test_guests_of_two_processes_see_every_line_in_one_order(chats):
    import websockets

    here, there = chats("127.0.0.1"), chats("127.0.0.2")

    async def talk():
        clients, names = [], []
        for at in (here, there) * 3:  # one at a time: a guest's own join is the first new name
            client = await websockets.connect(f"ws://{at}/chat")
            while True:
                line = await asyncio.wait_for(client.recv(), WAIT)
                name = line.removesuffix(" joined")
                if line.endswith(" joined") and name not in names:
                    break
            clients.append(client)
            names.append(name)
        assert len(set(names)) == 6, names  # each its own name, across the processes
        for client in clients:
            await receive_all(client, 0.3)  # the others' joins
        for round_ in range(20):
            for number, client in enumerate(clients):
                await client.send(f"line {round_} from {number}")
        heard = [await receive_all(client, 1.0) for client in clients]
        said = [[line for line in lines if ": line " in line] for lines in heard]
        assert len(said[0]) == 120, said[0][:5]
        assert all(lines == said[0] for lines in said)  # one order, everywhere
        for number, name in enumerate(names):  # and each guest's lines in the order it sent them
            own = [line for line in said[0] if line.startswith(f"{name}: ")]
            assert own == [f"{name}: line {r} from {number}" for r in range(20)]
        for client in clients:
            await client.close()

    asyncio.run(talk())


def test_the_room_comes_back_when_redis_restarts(chats, redis):
    import websockets

    here, there = chats("127.0.0.1"), chats("127.0.0.2")

    async def talk():
        one = await websockets.connect(f"ws://{here}/chat")
        two = await websockets.connect(f"ws://{there}/chat")
        await receive_all(one)
        await receive_all(two)
        await one.send("before")
        assert any(line.endswith(": before") for line in await receive_all(two))
        redis.stop()
        await one.send("while down")  # waits in the client's queue, up to its timeout
        await asyncio.sleep(0.2)
        redis.start()  # the same port: both processes come back by themselves
        deadline = time.monotonic() + WAIT
        heard = []
        while not any(line.endswith(": after") for line in heard):
            assert time.monotonic() < deadline, heard
            await one.send("after")
            heard += await receive_all(two, 0.5)
        await one.close()
        await two.close()

    asyncio.run(talk())


@pytest.mark.serial
def test_a_browser_on_each_process(chats, browsers):
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    here, there = chats("127.0.0.1"), chats("127.0.0.2")
    a, b = browsers(), browsers()
    names = []
    for browser, at in ((a, here), (b, there)):
        browser.get(f"http://{at}/")
        WebDriverWait(browser, WAIT).until(
            lambda _, page=browser: page.execute_script(MESSAGES), "the page did not join")
        names.append(browser.execute_script(MESSAGES)[0].removesuffix(" joined"))
    for number in range(3):
        a.find_element("id", "text").send_keys(f"from A {number}", Keys.ENTER)
        b.find_element("id", "text").send_keys(f"from B {number}", Keys.ENTER)
    expected = {f"{names[0]}: from A {n}" for n in range(3)} | {f"{names[1]}: from B {n}"
                                                                for n in range(3)}

    def lines(browser):
        return [line for line in browser.execute_script(MESSAGES) if ": from " in line]

    for browser in (a, b):
        WebDriverWait(browser, WAIT).until(lambda _, page=browser: set(lines(page)) == expected,
                                           f"the page shows {lines(browser)}")
    assert lines(a) == lines(b)  # the same order in both
    for name, who in zip(names, "AB"):
        assert [line for line in lines(a) if line.startswith(name)] == [
            f"{name}: from {who} {n}" for n in range(3)]


def test_redis_unreachable_at_start(build_dir):
    result = subprocess.run(
        [str(build_dir / "examples" / "ws-chat"), "--redis", f"127.0.0.1:{free_port()}",
         f"127.0.0.1:{free_port()}", str(PAGE)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "ws-chat: cannot join the room on Redis at 127.0.0.1:" in result.stderr
    assert "Connection refused" in result.stderr
