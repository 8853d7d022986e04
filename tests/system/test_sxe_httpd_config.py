"""sxe-httpd's configuration file (-c FILE): a YAML mapping whose keys are the long options. A
file serves as its options would, the command line overrides it, -t checks it without serving,
and every kind of mistake is told at its line with exit 1."""
import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from test_sxe_httpd import free_port, get, root  # noqa: F401 (fixtures)
from test_tls import certificate  # noqa: F401 (fixture)


def binary(build_dir):
    return str((build_dir / "tools" / "sxe-httpd").resolve())


@pytest.fixture
def served(build_dir):
    """Starts sxe-httpd with these arguments and waits until port answers; stops it by its pid."""
    started = []

    def start(port, *args):
        process = subprocess.Popen([binary(build_dir), *args], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        started.append(process)
        deadline = time.monotonic() + 5
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return process
            except ConnectionRefusedError:
                assert process.poll() is None, process.stderr.read()
                assert time.monotonic() < deadline
                time.sleep(0.02)

    yield start
    for process in started:
        process.terminate()
        assert process.wait(timeout=10) == 0


def test_a_file_serves_as_its_options_would(served, root, tmp_path):  # noqa: F811
    port = free_port()
    log = tmp_path / "access.json"
    config = tmp_path / "sxe-httpd.yaml"
    config.write_text(f"""# an operator's file: comments, quotes, lists in both styles
root: {root}
listen: "127.0.0.1:{port}"
workers: 1
index: 'index.html'
list: yes
evict-idle: false
access-log: {log}
log-format: json
header:
  - "/ X-Frame-Options: DENY"
  - '/docs/ Cache-Control: max-age=60'
proxy-underscores: off
""")
    process = served(port, "-c", str(config))
    status, fields, body = get(port, "/docs/")
    assert (status, body) == (200, b"docs index\n")
    assert fields["x-frame-options"] == "DENY" and fields["cache-control"] == "max-age=60"
    status, fields, body = get(port, "/empty/")  # list: yes
    assert status == 200 and b"Index of /empty/" in body, body
    assert "cache-control" not in get(port, "/hello.txt")[1]
    process.terminate()
    assert process.wait(timeout=10) == 0
    assert f"serving {root} on 127.0.0.1:{port} with 1 worker process" in process.stderr.read()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(line["target"], line["status"]) for line in lines] == [
        ("/docs/", 200), ("/empty/", 200), ("/hello.txt", 200)]


def test_the_command_line_overrides_the_file(served, root, tmp_path):  # noqa: F811
    """A value given in both is the command line's; a repeated option adds to the file's."""
    port, other = free_port(), free_port()
    config = tmp_path / "sxe-httpd.yaml"
    config.write_text(f"root: /nonexistent\nlisten: 127.0.0.1:{other}\nindex: missing.html\n"
                      "header: '/ X-From: file'\nlist: false\n")
    served(port, "--config", str(config), "--root", str(root), "--listen", f"127.0.0.1:{port}",
           "--index", "index.html", "--header", "/ X-Also: line")
    status, fields, body = get(port, "/")
    assert (status, body) == (200, b"<h1>home</h1>\n")
    assert fields["x-from"] == "file" and fields["x-also"] == "line"
    assert get(port, "/empty/")[0] == 403  # list: false lists nothing
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", other), timeout=1)


def test_an_empty_file_is_no_options(served, root, tmp_path):  # noqa: F811
    for text in ("", "# nothing yet\n", "---\n"):
        port = free_port()  # a new one each time: on io_uring a stopped server's socket lingers
        config = tmp_path / "empty.yaml"
        config.write_text(text)
        process = served(port, "-c", str(config), "--root", str(root), "--listen",
                         f"127.0.0.1:{port}")
        assert get(port, "/hello.txt")[2] == b"Hello World\n"
        process.terminate()
        assert process.wait(timeout=10) == 0


def test_t_checks_without_serving(build_dir, root, tmp_path, certificate):  # noqa: F811
    """-t reads the file, its root and its certificates, and does not listen: here the port is
    held by a socket of the test, and the check still passes."""
    cert, key, _ = certificate
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        config = tmp_path / "good.yaml"
        config.write_text(f"root: {root}\nlisten: 127.0.0.1:{port}\ntls-cert: {cert}\n"
                          f"tls-key: {key}\nproxy: [/api=127.0.0.1:9, /b=127.0.0.1:10]\n")
        result = subprocess.run([binary(build_dir), "-t", "-c", str(config)], capture_output=True,
                                text=True, timeout=10)
        assert (result.returncode, result.stdout) == (0, "")
        assert result.stderr == f"sxe-httpd: the configuration in {config} is good\n"
    result = subprocess.run([binary(build_dir), "--test", "--root", str(root)],
                            capture_output=True, text=True, timeout=10)
    assert (result.returncode, result.stderr) == (0, "sxe-httpd: the configuration is good\n")
    result = subprocess.run([binary(build_dir), "-t", "--root", str(root), "--listen", "nowhere"],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 1
    assert result.stderr == ("sxe-httpd: --listen nowhere: expected IP:PORT, [IPv6]:PORT, "
                             "localhost:PORT or :PORT\n")
    config.write_text(f"root: {root}\ntls-cert: {key}\ntls-key: {key}\n")  # a key, not a cert
    result = subprocess.run([binary(build_dir), "-t", "-c", str(config)], capture_output=True,
                            text=True, timeout=10)
    assert result.returncode == 1
    assert f"sxe-httpd: --tls-cert {key} --tls-key {key}: " in result.stderr


MISTAKES = [
    ("root: R\nwrokers: 2\n", r"2: unknown key 'wrokers' \(the keys are the long options: see --help\)"),
    ("root: R\nconfig: other.yaml\n", "2: 'config' is an option of the command line only"),
    ("root: R\ntest: true\n", "2: 'test' is an option of the command line only"),
    ("root: R\nheaders:\n\n  - '/ X-A: b'\n", r"2: unknown key 'headers' \(.+"),  # the key's line
    ("root: R\nno-such-key: []\n", "2: 'no-such-key' lists nothing: give it values, or leave it out"),
    ("root: R\nproxy: []\nproxy: [/a=127.0.0.1:1]\n", "2: 'proxy' lists nothing: .+"),
    ("root: R\nindex: \"a\\0b\"\n", "2: 'index' holds a NUL byte in its value"),
    ("root: R\n" + "# a comment\n" * 39 + "index: a\xffb\n", "41: invalid leading UTF-8 octet"),
    ("root: R\nindex: \"index.html\n" + "list: true\n" * 3,
     "6: found unexpected end of stream while scanning a quoted scalar that began on line 2"),
    ("root: R\n" + "".join(f"k{n}: x\n" for n in range(5000)),
     "4097: more than 4096 values: not a configuration of sxe-httpd"),
    ("root: R\ncache: shared\n", "2: cache shared needs --threads .+"),
    ("root: R\n\ntls-key: k.pem\n", "3: HTTPS needs both --tls-cert FILE and --tls-key FILE .+"),
    ("root: R/hello.txt\n", "1: root .+/hello.txt: not a directory"),
    ("root: R\nmime-types: R/none.types\n", "2: mime-types .+/none.types: No such file or directory"),
    ("root: R\naccess-log: R/no/such/dir/log\n", "2: access-log .+/log: No such file or directory"),
    ("root: R\nworkers: many\n", r"2: workers must be a number from 1 to \d+, not 'many'"),
    ("root: R\nlisten: [a, b]\n", "2: 'listen' takes one value, not a list"),
    ("root: R\nproxy:\n  /a: 127.0.0.1:9\n",
     r"3: 'proxy' takes a value or a list of values, not a mapping \(quote a value that holds ': '\)"),
    ("root: R\nproxy:\n  - [/a=127.0.0.1:9]\n", "3: 'proxy' lists values, not lists or mappings"),
    ("root: R\nheader:\n  - /a X-A: b\n",  # YAML reads a mapping: quoting makes it a value
     r"3: 'header' lists values, not lists or mappings \(quote a value that holds ': '\)"),
    ("root: R\nlist: true\nroot: R\n", r"3: 'root' is given twice \(first on line 1\)"),
    ("root:\n\n  R\nroot: R\n", r"4: 'root' is given twice \(first on line 1\)"),
    ("root: R\nlist: maybe\n", "2: 'list' is true or false, not 'maybe'"),
    ("root: R\nindex:\n", "2: 'index' has no value"),
    ("root: R\nheader: [~]\n", "2: 'header' has no value"),
    ("root: R\nindex: [a\n", r"3: .+"),  # libyaml's own words
    ("- root\n- R\n", "1: the file must be a mapping of keys to values"),
    ("? [root]\n: R\n", "1: a key must be a name, such as root or listen"),
    ("root: &r R\nindex: *r\n", r"2: aliases \(\*name\) are not read here: write the value"),
    ("root: R\n---\nlist: true\n", r"2: one document only \(a second starts here\)"),
    ("root: R\nproxy: api=127.0.0.1:9\n",
     "2: proxy api=127.0.0.1:9: expected PREFIX=HOST:PORT.+"),
    ("root: R\nspread: sideways\n", "2: spread must be reuseport, cpu or hand-off, not 'sideways'"),
]


@pytest.mark.parametrize("text,said", MISTAKES)
def test_every_kind_of_mistake_is_told_at_its_line(build_dir, root, tmp_path, text, said):  # noqa: F811
    config = tmp_path / "wrong.yaml"
    config.write_bytes(text.replace(": R", f": {root}").encode("latin-1"))
    for test in ([], ["-t"]):
        result = subprocess.run([binary(build_dir), *test, "-c", str(config)],
                                capture_output=True, text=True, timeout=10)
        assert result.returncode == 1, result.stderr
        assert re.fullmatch(f"sxe-httpd: {re.escape(str(config))}:{said}\n", result.stderr), \
            result.stderr


def test_files_that_cannot_be_read(build_dir, root, tmp_path):  # noqa: F811
    missing = tmp_path / "missing.yaml"
    result = subprocess.run([binary(build_dir), "-c", str(missing)], capture_output=True,
                            text=True, timeout=10)
    assert (result.returncode, result.stderr) == (
        1, f"sxe-httpd: --config {missing}: No such file or directory\n")
    config = tmp_path / "root.yaml"
    config.write_text(f"# the root\nroot: {tmp_path / 'gone'}\n")
    result = subprocess.run([binary(build_dir), "-c", str(config)], capture_output=True,
                            text=True, timeout=10)
    assert (result.returncode, result.stderr) == (
        1, f"sxe-httpd: {config}:2: root {tmp_path / 'gone'}: No such file or directory\n")
    result = subprocess.run([binary(build_dir), "-c", str(config), "--root", str(tmp_path / "no")],
                            capture_output=True, text=True, timeout=10)  # the command line's
    assert (result.returncode, result.stderr) == (
        1, f"sxe-httpd: --root {tmp_path / 'no'}: No such file or directory\n")
    result = subprocess.run([binary(build_dir), "-c", str(tmp_path)], capture_output=True,
                            text=True, timeout=10)
    assert (result.returncode, result.stderr) == (
        1, f"sxe-httpd: --config {tmp_path}: Is a directory\n")
    result = subprocess.run([binary(build_dir), "-c", str(config), "-t", "extra"],
                            capture_output=True, text=True, timeout=10)
    assert (result.returncode, result.stderr) == (
        2, "sxe-httpd: unexpected argument 'extra' (see --help)\n")


def test_the_contrib_files(build_dir, root, tmp_path):  # noqa: F811
    """contrib/sxe-httpd.yaml is a good file (its paths moved here by the command line), and the
    systemd unit, as configured by the build, passes `systemd-analyze verify` with its programs
    pointed at this build (present on Debian 12; skipped where systemd is not installed)."""
    source = Path(__file__).resolve().parents[2] / "contrib"
    result = subprocess.run([binary(build_dir), "-t", "-c", str(source / "sxe-httpd.yaml"),
                             "--root", str(root), "--access-log", str(tmp_path / "log")],
                            capture_output=True, text=True, timeout=10)
    assert (result.returncode, result.stderr) == (
        0, f"sxe-httpd: the configuration in {source / 'sxe-httpd.yaml'} is good\n")
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    unit = (build_dir / "contrib" / "sxe-httpd.service").read_text()
    execs = re.findall(r"^Exec\w+=(\S+)", unit, re.MULTILINE)
    assert execs[:2] == [execs[0]] * 2 and execs[0].endswith("/bin/sxe-httpd"), execs
    (tmp_path / "sxe-httpd.service").write_text(unit.replace(execs[0], binary(build_dir)))
    result = subprocess.run([analyze, "verify", "--man=no", str(tmp_path / "sxe-httpd.service")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "sxe-httpd.service" not in result.stderr, result.stderr


DOCKER_INSTRUCTIONS = {"FROM", "RUN", "COPY", "WORKDIR", "USER", "EXPOSE", "STOPSIGNAL",
                       "ENTRYPOINT", "CMD", "ENV", "ARG", "LABEL"}


@pytest.mark.one_backend
def test_the_dockerfile(build_dir, tmp_path):
    """The Dockerfile reads right (known instructions, continued lines, stages named and used, JSON
    forms that parse), what it copies out of the build stage is what `cmake --install` makes, and
    the packages it installs exist in Debian 12; with a Docker daemon (none in CI: there the test
    ends after the reading), it builds and the image's sxe-httpd answers --version."""
    repo = Path(__file__).resolve().parents[2]
    lines = []
    for raw in (repo / "Dockerfile").read_text().splitlines():
        if raw.startswith("#") or not raw.strip():
            assert not (lines and lines[-1].endswith("\\")), "a comment inside a continued line"
            continue
        if lines and lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1] + " " + raw.strip()
        else:
            lines.append(raw)
    stages, copied, packages = [], [], []
    for line in lines:
        word, _, rest = line.partition(" ")
        assert word in DOCKER_INSTRUCTIONS, line
        if word == "FROM":
            assert rest.startswith("debian:12"), line
            stages.append(rest.split(" AS ")[1] if " AS " in rest else None)
        if word in ("ENTRYPOINT", "CMD"):
            assert isinstance(json.loads(rest), list), line
        if word == "COPY" and rest.startswith("--from="):
            source, *paths = rest.split()
            assert source == "--from=build" and "build" in stages[:-1], line
            copied += paths[:-1]
        if word == "RUN" and "apt-get install" in rest:
            packages += re.findall(r"(?<=\s)([a-z0-9][a-z0-9.+-]+)(?=\s|$)",
                                   rest.split("--no-install-recommends", 1)[1].split("&&")[0])
    assert lines[0].startswith("FROM") and stages[0] == "build" and stages[-1] is None
    assert copied and packages
    # what the build stage copies out: this build installed the way it installs
    out = tmp_path / "out"
    subprocess.run(["cmake", "--install", str(build_dir), "--prefix", "/usr"], check=True,
                   env={**os.environ, "DESTDIR": str(out)}, capture_output=True, timeout=120)
    for path in copied:
        assert (Path(str(out) + path.removeprefix("/out"))).exists(), path
    if shutil.which("apt-cache"):
        for package in packages:
            shown = subprocess.run(["apt-cache", "show", "--no-all-versions", package],
                                   capture_output=True, text=True, timeout=60)
            assert shown.returncode == 0 and f"Package: {package}" in shown.stdout, package
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True,
                                        timeout=30).returncode != 0:
        return  # no Docker daemon (none in CI, nor on the machine it was written on): read only
    subprocess.run([docker, "build", "-t", "sxe-httpd-test", str(repo)], check=True, timeout=1800)
    version = subprocess.run([docker, "run", "--rm", "--entrypoint", "sxe-httpd", "sxe-httpd-test",
                              "--version"], capture_output=True, text=True, timeout=120)
    assert version.stdout.startswith("sxe-httpd "), version
