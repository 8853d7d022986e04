"""apps/dictionary: sxe-dict-build turns Debian's GCIDE into a data directory, sxe-dict serves it
with workers, sxe-dict-update changes it while it serves. Lookups, misses with suggestions, bad
input, the page in headless Chromium, updates that no request ever sees half-applied, and HTTPS."""
import http.client
import json
import pathlib
import signal
import socket
import ssl
import subprocess
import threading
import urllib.parse

import pytest

from conftest import wait_for_port

GCIDE = pathlib.Path("/usr/share/dictd/gcide.index")


@pytest.fixture(scope="module")
def data(build_dir, tmp_path_factory):
    """The dictionary's data, built once for the module from dict-gcide."""
    if not GCIDE.exists():
        pytest.fail("dict-gcide is missing: apt-get install dict-gcide (scripts/test does)")
    directory = tmp_path_factory.mktemp("dictionary") / "data"  # made by sxe-dict-build
    done = subprocess.run([str(build_dir / "apps" / "dictionary" / "sxe-dict-build"),
                           str(directory)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "words from" in done.stdout
    return directory


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def server(build_dir, data):
    """sxe-dict on a free port with 2 workers: yields the port."""
    port = free_port()
    process = subprocess.Popen([str(build_dir / "apps" / "dictionary" / "sxe-dict"), "-D",
                                str(data), "-l", f"127.0.0.1:{port}", "-w", "2", "-c", "200"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port, process, "sxe-dict")
        yield port
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0


def get(port, path, connection=None):
    """GET path: (status, headers, body parsed as JSON if it is JSON)."""
    conn = connection or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read()
    if connection is None:
        conn.close()
    if response.getheader("Content-Type", "").startswith("application/json"):
        body = json.loads(body)
    return response.status, response.headers, body


def update(build_dir, data, lines):
    done = subprocess.run([str(build_dir / "apps" / "dictionary" / "sxe-dict-update"),
                           str(data)], input="".join(lines), capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_lookup(server):
    status, headers, entry = get(server, "/d/zygote")
    assert status == 200
    assert entry["word"] == "zygote"
    assert "The cell resulting from the union of an ovum" in entry["definition"]
    # Any letter case, and every entry of the word: GCIDE has two for "Apple".
    status, _, entry = get(server, "/d/APPLE")
    assert status == 200 and entry["word"] == "Apple"
    assert entry["definition"].count("\\Ap\"ple\\") >= 2
    # Percent-encoded, and a word with a space and non-ASCII letters.
    assert get(server, "/d/%7Aygote")[2]["word"] == "zygote"
    status, _, entry = get(server, "/d/" + urllib.parse.quote("1-naphthoic acid"))
    assert status == 200 and entry["word"] == "1-naphthoic acid"


def test_served_over_https(build_dir, data, tmp_path):
    """-k CERT -K KEY: the same answers over TLS, every worker sharing the certificate; a key
    that is not the certificate's is a one-line error at start."""
    cert, key, other = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "other.pem"
    for pem, out in ((key, cert), (other, None)):
        command = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                   "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(pem), "-days", "2",
                   "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                   "-out", str(out or tmp_path / "unused.pem")]
        subprocess.run(command, check=True, capture_output=True)
    binary = str(build_dir / "apps" / "dictionary" / "sxe-dict")
    port = free_port()
    process = subprocess.Popen([binary, "-D", str(data), "-l", f"127.0.0.1:{port}", "-w", "2",
                                "-c", "200", "-k", str(cert), "-K", str(key)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port, process, "sxe-dict")
        context = ssl.create_default_context(cafile=str(cert))
        for _ in range(4):  # new connections: each worker, likely
            connection = http.client.HTTPSConnection("localhost", port, timeout=10,
                                                     context=context)
            status, _, entry = get(port, "/d/zygote", connection)
            assert status == 200 and entry["word"] == "zygote"
            assert get(port, "/s/zyg", connection)[0] == 200  # kept alive
            connection.close()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    assert "serving on https://127.0.0.1:" in process.stdout.read()
    done = subprocess.run([binary, "-D", str(data), "-l", "127.0.0.1:0", "-k", str(cert),
                           "-K", str(other)], capture_output=True, text=True, timeout=10)
    assert done.returncode == 1 and "not the key of certificate" in done.stderr, done.stderr


def test_a_miss_is_404_with_suggestions(server):
    status, _, answer = get(server, "/d/zygotx")
    assert status == 404
    assert answer["error"] == "not found" and answer["word"] == "zygotx"
    words = [s["word"].lower() for s in answer["suggestions"]]
    assert "zygote" in words and all(w.startswith("zygot") for w in words), words
    status, _, answer = get(server, "/d/qqqqqqq")
    assert status == 404 and all(s["word"].lower().startswith("q") for s in answer["suggestions"])


def test_prefix_suggestions(server):
    status, _, answer = get(server, "/s/zyg")
    assert status == 200 and answer["prefix"] == "zyg"
    assert len(answer["suggestions"]) == 10  # at most 10, and GCIDE has more
    assert all(s["word"].lower().startswith("zyg") for s in answer["suggestions"])
    answer = get(server, "/s/zygot")[2]
    zygote = [s for s in answer["suggestions"] if s["word"] == "zygote"]
    assert zygote and zygote[0]["short"].startswith("zygote \\zy\"gote\\")
    assert get(server, "/s/xqxqxq")[2]["suggestions"] == []


@pytest.mark.parametrize("path, status, error", [
    ("/d/" + "a" * 101, 414, "longer than 100 bytes"),
    ("/d/%ff%fe", 400, "not UTF-8"),
    ("/d/abc%00", 400, "not UTF-8"),
    ("/d/", 400, "no word"),
])
def test_bad_input_gets_a_clear_error(server, path, status, error):
    got, _, answer = get(server, path)
    assert got == status and error in answer["error"], answer


def test_a_malformed_escape_is_refused_before_the_dictionary(server):
    """The HTTP server refuses a path it cannot put in normal form before any route sees it."""
    assert get(server, "/d/%zz")[:3:2] == (400, b"400 Bad Request\n")


def test_the_page_and_keep_alive(server):
    conn = http.client.HTTPConnection("127.0.0.1", server, timeout=10)
    status, headers, page = get(server, "/", conn)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    source = pathlib.Path(__file__).parents[2] / "apps" / "dictionary" / "www" / "index.html"
    assert page == source.read_bytes()  # built into the program: it needs no file to run
    for word in ("cat", "dog", "emu"):  # one connection, several requests
        assert get(server, f"/d/{word}", conn)[0] == 200
    assert get(server, "/nothing-here", conn)[0] == 404
    conn.close()


def test_updates_are_seen_whole(server, build_dir, data):
    """A writer publishes batches that give every word of a prefix the same new definition,
    while clients read all of them in one request: no answer ever mixes two batches."""
    words = [s["word"] for s in get(server, "/s/zymo")[2]["suggestions"]]
    assert len(words) >= 3
    stop = threading.Event()
    seen, mixed, errors = set(), [], []

    def reader():
        conn = http.client.HTTPConnection("127.0.0.1", server, timeout=10)
        while not stop.is_set():
            status, _, answer = get(server, "/s/zymo", conn)
            if status != 200:
                errors.append(status)
                continue
            shorts = {s.get("short") for s in answer["suggestions"] if s["word"] in words}
            seen.update(shorts)
            if len(shorts) != 1:
                mixed.append(shorts)
        conn.close()

    update(build_dir, data, [f"{word}\tbatch 0\\nthe first version\n" for word in words])
    readers = [threading.Thread(target=reader) for _ in range(3)]
    for thread in readers:
        thread.start()
    for batch in range(1, 40):
        update(build_dir, data, [f"{word}\tbatch {batch}\\nversion {batch}\n" for word in words])
    stop.set()
    for thread in readers:
        thread.join()
    assert not errors and not mixed, (errors, mixed[:3])
    assert len(seen) >= 2, seen  # the readers did see batches change under them
    status, _, entry = get(server, f"/d/{words[0]}")
    assert entry["definition"] == "batch 39\nversion 39"
    # A new word is found at once; a deleted one is gone.
    update(build_dir, data, ["sxeword\tA word added while serving\n", f"{words[1]}\t\n"])
    assert get(server, "/d/sxeword")[2]["definition"] == "A word added while serving"
    assert get(server, f"/d/{words[1]}")[0] == 404


@pytest.mark.serial
def test_the_page_in_a_browser(server, browsers):
    """Typing a word in the page's box shows its definition."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser = browsers()
    browser.get(f"http://127.0.0.1:{server}/")
    box = browser.find_element("id", "word")
    box.send_keys("zygot")
    WebDriverWait(browser, 10).until(
        lambda _: "zygote" in browser.find_element("id", "suggestions").text,
        "the page did not suggest zygote")
    box.send_keys("e")
    WebDriverWait(browser, 10).until(
        lambda _: "union of an ovum" in browser.find_element("id", "definition").text,
        "the page did not show zygote's definition")
    assert browser.find_element("id", "headword").text == "zygote"


@pytest.mark.parametrize("program", ["sxe-dict", "sxe-dict-build", "sxe-dict-update"])
def test_each_program_explains_itself(build_dir, program, tmp_path):
    """--help: the usage on stdout, exit 0; a wrong option or a missing argument: one line
    saying what, a pointer to --help, exit 2; a number out of range likewise."""
    binary = str(build_dir / "apps" / "dictionary" / program)

    def run(*args):
        return subprocess.run([binary, *args], capture_output=True, text=True, timeout=10,
                              cwd=tmp_path)

    done = run("--help")
    assert done.returncode == 0 and done.stdout.startswith(f"usage: {program} ")
    assert "-h, --help" in done.stdout and done.stderr == ""
    hint = f"({program} --help explains its options)"
    for args, said in ((["--bogus"], "unrecognized option '--bogus'"),
                       ([], {"sxe-dict": "-D DATA is required",
                             "sxe-dict-build": "name the DIRECTORY to build in",
                             "sxe-dict-update": "name the DATA directory"}[program])):
        done = run(*args)
        lines = done.stderr.splitlines()
        assert done.returncode == 2 and len(lines) == 2, done.stderr
        assert said in lines[0] and lines[1] == hint
    if program == "sxe-dict":
        for option, value in (("-w", "257"), ("-c", "15"), ("-t", "0"), ("-w", "two")):
            done = run("-D", ".", option, value)
            assert done.returncode == 2
            assert f"{option} must be a whole number from " in done.stderr, done.stderr
            assert f"not '{value}'" in done.stderr
