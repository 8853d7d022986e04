"""examples/ws-chat, the chat room: its page in two headless Chromium windows, and its WebSocket
with a plain client, over HTTP, through sxe-httpd's proxy, and over HTTPS (wss://, the browser
told to trust the test certificate). Every message reaches everyone with its sender's name; joins
and leaves are announced."""
import asyncio
import base64
import contextlib
import hashlib
import http.client
import pathlib
import signal
import socket
import ssl
import subprocess
from types import SimpleNamespace

import pytest

from conftest import wait_for_port

PAGE = pathlib.Path(__file__).parents[2] / "examples" / "ws-chat.html"
WAIT = 10  # seconds, for anything the browser or the server should do
# The browser's list of messages, in order.
MESSAGES = "return Array.from(document.querySelectorAll('#messages li'), li => li.textContent)"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop(process):
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=WAIT)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed ECDSA P-256 certificate for 127.0.0.1, its key, and its public key's SHA-256
    in base64 (what Chromium is told to trust)."""
    where = tmp_path_factory.mktemp("ws-chat-tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    public = subprocess.run(["openssl", "x509", "-pubkey", "-noout", "-in", str(cert)],
                            check=True, capture_output=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=public,
                         check=True, capture_output=True).stdout
    return cert, key, base64.b64encode(hashlib.sha256(der).digest()).decode()


KINDS = ["direct", "proxied", "tls"]


@contextlib.contextmanager
def running_chat(kind, build_dir, tmp_path, certificate):
    """ws-chat on a free port, serving the page from the source tree, reached directly, through
    sxe-httpd's proxy (the page, and the WebSocket through the proxy's tunnel), or over TLS: its
    port, process, scheme, the TLS context a client trusts it with (or None), and the switches a
    browser trusts it with."""
    port = free_port()
    program = build_dir / "examples" / "ws-chat"
    assert program.exists(), f"{program} was not built"
    cert, key, spki = certificate
    secure = kind == "tls"
    processes = [subprocess.Popen([str(program), f"127.0.0.1:{port}", str(PAGE)] +
                                  ([str(cert), str(key)] if secure else []),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)]
    try:
        wait_for_port(port, processes[0], "ws-chat")
        if kind == "proxied":
            upstream, port = port, free_port()
            processes.append(subprocess.Popen(
                [str(build_dir / "tools" / "sxe-httpd"), "--root", str(tmp_path), "--listen",
                 f"127.0.0.1:{port}", "--workers", "1", "--proxy", f"/=127.0.0.1:{upstream}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_for_port(port, processes[1], "sxe-httpd")
        yield SimpleNamespace(
            port=port, process=processes[0], scheme="https" if secure else "http",
            context=ssl.create_default_context(cafile=str(cert)) if secure else None,
            switches=[f"--ignore-certificate-errors-spki-list={spki}"] if secure else [])
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.fixture(params=KINDS)
def chat(request, build_dir, tmp_path, certificate):
    """The chat of each kind (see running_chat)."""
    with running_chat(request.param, build_dir, tmp_path, certificate) as running:
        yield running


def wait_until(browser, condition, what):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, WAIT).until(lambda _: condition(),
                                              f"{what}; the page shows {page_state(browser)}")


def page_state(browser):
    try:
        return (browser.find_element("id", "status").text, browser.execute_script(MESSAGES))
    except Exception as error:  # pylint: disable=broad-except
        return f"nothing readable ({error})"


def load(browser, chat):
    """Loads the page, waits for it to connect, and returns its guest name from its own join."""
    browser.get(f"{chat.scheme}://127.0.0.1:{chat.port}/")
    wait_until(browser, lambda: browser.find_element("id", "status").text == "connected",
               "the page did not connect")
    wait_until(browser, lambda: browser.execute_script(MESSAGES), "the page was not told it joined")
    first = browser.execute_script(MESSAGES)[0]
    assert first.startswith("guest-") and first.endswith(" joined"), first
    return first.removesuffix(" joined")


def shows(browser, message):
    wait_until(browser, lambda: message in browser.execute_script(MESSAGES),
               f"{message!r} did not appear")


@pytest.mark.serial
@pytest.mark.parametrize("kind", KINDS)
def test_two_browsers_chat(kind, browsers, build_dir, tmp_path, certificate):
    """Two browsers talk. Chromium's driver once went away in the middle of this test in CI (its
    port refused every call, and neither it nor Chromium said why), so a run whose driver is gone
    starts once more from the start, on a fresh chat with fresh browsers; any other failure fails
    at once, and a second loss of a driver fails too."""
    from urllib3.exceptions import MaxRetryError, ProtocolError

    for attempt in (1, 2):
        with running_chat(kind, build_dir, tmp_path, certificate) as chat:
            try:
                converse(chat, browsers, build_dir)
                return
            except (MaxRetryError, ProtocolError) as gone:  # the driver's HTTP, not the chat's
                if attempt == 2:
                    raise
                print(f"a browser's driver is gone ({gone!r}); its log ends with:\n"
                      f"{browsers.driver_logs()}\nstarting once more")
                browsers.close_all()


def converse(chat, browsers, build_dir):
    """The conversation of two browsers in the chat, and its end when the server stops."""
    from selenium.webdriver.common.keys import Keys

    a, b = browsers(*chat.switches), browsers(*chat.switches)
    name_a = load(a, chat)
    name_b = load(b, chat)
    assert name_a != name_b
    shows(a, f"{name_b} joined")

    a.find_element("id", "text").send_keys("hello from A", Keys.ENTER)  # Enter sends
    shows(b, f"{name_a}: hello from A")
    shows(a, f"{name_a}: hello from A")
    assert a.find_element("id", "text").get_attribute("value") == ""

    b.find_element("id", "text").send_keys("and from B, h\u00e9h\u00e9 \u2713")
    b.find_element("id", "send").click()  # so does the button
    shows(a, f"{name_b}: and from B, h\u00e9h\u00e9 \u2713")
    shows(b, f"{name_b}: and from B, h\u00e9h\u00e9 \u2713")

    screenshot = build_dir / "ws-chat.png"
    screenshot.unlink(missing_ok=True)
    assert b.save_screenshot(str(screenshot))
    data = screenshot.read_bytes()
    assert len(data) > 1000 and data.startswith(b"\x89PNG\r\n\x1a\n"), len(data)

    a.quit()
    shows(b, f"{name_a} left")
    assert b.execute_script(MESSAGES) == [f"{name_b} joined", f"{name_a}: hello from A",
                                          f"{name_b}: and from B, h\u00e9h\u00e9 \u2713",
                                          f"{name_a} left"]

    assert stop(chat.process) == 0, chat.process.stderr.read()
    wait_until(b, lambda: b.find_element("id", "status").text == "disconnected",
               "the page did not see the server go")


def test_page_and_socket_without_a_browser(chat):
    import websockets

    if chat.context is not None:
        conn = http.client.HTTPSConnection("127.0.0.1", chat.port, timeout=WAIT,
                                           context=chat.context)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", chat.port, timeout=WAIT)
    conn.request("GET", "/")
    response = conn.getresponse()
    body = response.read()
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/html; charset=utf-8"
    assert b'id="messages"' in body and body == PAGE.read_bytes()
    conn.request("GET", "/chat")  # not a handshake
    response = conn.getresponse()
    response.read()
    assert response.status == 426
    conn.close()

    async def talk():
        url = f"{'wss' if chat.context else 'ws'}://127.0.0.1:{chat.port}/chat"
        secure = {"ssl": chat.context} if chat.context else {}

        async def receive(client):
            return await asyncio.wait_for(client.recv(), WAIT)

        async with websockets.connect(url, **secure) as one:
            assert await receive(one) == "guest-1 joined"
            async with websockets.connect(url, **secure) as two:
                assert await receive(two) == "guest-2 joined"
                assert await receive(one) == "guest-2 joined"
                await one.send("hello, two")
                for client in (one, two):
                    assert await receive(client) == "guest-1: hello, two"
                await two.send(b"binary is not chat")  # ignored: only text is broadcast
                largest = "\u00e9" * 30000  # 60000 bytes, the most a message may have
                await two.send(largest)
                for client in (one, two):
                    assert await receive(client) == "guest-2: " + largest
            assert await receive(one) == "guest-2 left"

    asyncio.run(talk())
    assert stop(chat.process) == 0, chat.process.stderr.read()


def test_a_missing_page_is_one_line_and_exit_1(build_dir, tmp_path):
    missing = tmp_path / "nowhere.html"
    result = subprocess.run([str(build_dir / "examples" / "ws-chat"), "127.0.0.1:0", str(missing)],
                            capture_output=True, text=True, timeout=WAIT, check=False)
    assert result.returncode == 1
    assert result.stderr == f"ws-chat: cannot read {missing}, a page of less than 64 KiB\n"


def test_a_certificate_it_cannot_read_is_one_line_and_exit_1(build_dir, tmp_path):
    missing = tmp_path / "nowhere.pem"
    result = subprocess.run([str(build_dir / "examples" / "ws-chat"), "127.0.0.1:0", str(PAGE),
                             str(missing), str(missing)],
                            capture_output=True, text=True, timeout=WAIT, check=False)
    assert result.returncode == 1
    assert result.stderr.endswith(f"ws-chat: no TLS with {missing} and {missing}: "
                                  "No such file or directory\n"), result.stderr
