"""The dictionary (apps/dictionary): sxe-dict on one loop against nginx serving the same answers
from files made beforehand, one per word, at 100 and 10,000 connections, a mix of 20,000 random
words asked for at random by weight (sxe-http -U --random), the same for both."""
import http.client
import os
import random
import subprocess
import urllib.parse

from harness import grid, peers, procs
from harness.report import Section
from harness.servers import Spec

KEY = "dictionary"
TITLE = "The dictionary against nginx serving files"
PACKAGES = ("nginx-light", "dict-gcide")
WORDS = 20000


def prepare(ctx):
    """Builds the dictionary's data from dict-gcide, draws WORDS random words, writes each one's
    answer from sxe-dict into root/d/WORD for nginx, and returns the request mix (percent-encoded
    /d/WORD paths, for sxe-http -U) and the data directory."""
    data = os.path.join(ctx.tmp, "dictionary")
    mix = os.path.join(ctx.tmp, "dictionary-mix.txt")
    if os.path.exists(mix):
        return mix, data
    os.makedirs(data, exist_ok=True)
    subprocess.run([ctx.program("apps/dictionary/sxe-dict-build"), data], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(data, "words"), "rb") as source:
        blob = source.read()
    words = []
    for i in range(int.from_bytes(blob[8:12], "little")):
        offset = int.from_bytes(blob[12 + 4 * i:16 + 4 * i], "little")
        word = blob[offset:blob.index(b"\0", offset)].decode()
        if "/" not in word and not word.startswith("."):  # not a file name nginx can serve
            words.append(word)
    words = random.Random(1913).sample(words, min(WORDS, len(words)))
    os.makedirs(os.path.join(ctx.root, "d"), exist_ok=True)
    port = procs.free_port()
    server = procs.start([ctx.program("apps/dictionary/sxe-dict"), "-D", data, "-l",
                          f"127.0.0.1:{port}", "-w", "0"], "0")
    try:
        procs.wait_for_port(port, server.pid)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        with open(mix, "w") as paths:
            for word in words:
                path = "/d/" + urllib.parse.quote(word, safe="")
                connection.request("GET", path)
                response = connection.getresponse()
                body = response.read()
                if response.status != 200:
                    raise RuntimeError(f"sxe-dict answered {response.status} for {path}")
                with open(os.path.join(ctx.root, "d", word), "wb") as answer:
                    answer.write(body)
                paths.write(path + "\n")
        connection.close()
    finally:
        procs.stop(server)
    return mix, data


def specs(ctx, data):
    found = [Spec("sxe-dict", lambda p: [ctx.program("apps/dictionary/sxe-dict"), "-D", data, "-l",
                                         f"127.0.0.1:{p}", "-w", "0", "-c", "19000"]),
             Spec("nginx serving the answers as files", peers.nginx(ctx).command)]
    keep = ctx.args.servers
    return [s for s in found if not keep or any(k in s.name for k in keep)]


def estimate(ctx):
    return 20 + 2 * 2 * ctx.args.rounds * (ctx.args.seconds + ctx.args.warmup + 2)


def run(ctx, say):
    say(f"{KEY}: building the data and the request mix")
    mix, data = prepare(ctx)
    with open(mix) as paths:
        first = paths.readline().strip()  # a word both servers have
    found = [grid.Scenario(f"dictionary-{n}", f"{n:,} connections", specs(ctx, data),
                           connections=n, path=first, body=None, paths=mix)
             for n in (100, 10000)]
    cells = grid.run(ctx, say, KEY, found, ctx.args.rounds)
    section = Section(KEY, TITLE, (
        "Each server on CPU 0, the load on CPU 1: the same mix of 20,000 words, asked for at "
        "random; every answer's status and framing checked (the answers' lengths vary by word). "
        "The last column is sxe-dict's CPU per request over nginx's, round by round."))
    rows = grid.comparison_rows(cells, found, lambda s: "sxe-dict",
                                [("rate", 0), ("cpu_us", 2), ("p99", 2), ("rss_mb", 1)])
    section.add_table("", ["connections", "server", "requests/s", "server CPU µs/request",
                           "p99 ms", "peak RSS MB", "CPU: sxe-dict ÷ this"], rows)
    section.cells = cells
    return section
