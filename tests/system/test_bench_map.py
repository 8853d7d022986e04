"""bench/map on a small map: every step reports, for each kind of memory, a full line with
numbers, and the writers' phases (the map's writer and the plain writer that is its floor) really
ran. No speed is asserted: bench/map's figures are read in docs/benchmarks.md."""
import json
import re
import subprocess

import pytest


LATENCY = re.compile(r"^latency (.+?):\s+p50\s+(\d+) ns\s+p99\s+(\d+) ns\s+p99\.9\s+(\d+) ns"
                     r"\s+\((\d+) batches of 64\)$")
PHASES = ["idle", "under a plain writer", "under a 1% writer", "idle, after the updates",
          "under a paced plain writer"]


@pytest.mark.one_backend  # a benchmark's own report: no event loop in it
def test_bench_map_reports_every_step(build_dir):
    done = subprocess.run([str(build_dir / "bench" / "map"), "-n", "20000", "-s", "0.2"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()

    for side in ("sxe_map_find", "lmdb mdb_get",
                 "sxe_map_find_many \\(batched, 64 keys a call\\)"):
        for pages in ("no huge pages", "huge pages"):
            assert re.search(rf"^{side}, {pages} +[\d.]+M lookups/s \[[\d.]+M-[\d.]+M\]  "
                             r"rounds:( [\d.]+M){5}", done.stdout, re.M), (side, pages)
    assert re.search(r"^ratio: sxe_map_find / lmdb mdb_get, no huge pages +[\d.]+x", done.stdout,
                     re.M)
    assert re.search(r"^headline, single-key lookups: sxe_map_find, (no )?huge pages against "
                     r"lmdb mdb_get, (no )?huge pages: [\d.]+x", done.stdout, re.M)
    assert re.search(r"^sxe_map private memory .*: \d+ lookups/s", done.stdout, re.M)
    assert re.search(r"^floor: random 64-byte reads, 32 in flight, of anonymous private memory"
                     r".*: \d+ reads/s", done.stdout, re.M)
    assert re.search(r"^sxe_map anonymous shared memory, in place: \d+ lookups/s \(batched: "
                     r"sxe_map_get_many", done.stdout, re.M)

    # Three shared maps (anonymous, anonymous in place, then the file), each read in five phases,
    # in this order.
    phases = [LATENCY.match(line) for line in lines if line.startswith("latency ")]
    assert [match.group(1) if match else None for match in phases] == \
        PHASES * 3
    assert all(int(match.group(5)) > 0 for match in phases)

    writers = [line for line in lines if line.startswith("writer: ")]
    assert len(writers) == 3
    for line in writers:
        commits = int(re.match(r"writer: (\d+) commits of 200 puts", line).group(1))
        assert commits > 0
    plain = [line for line in lines if line.startswith("plain writer (the floor): ")]
    assert len(plain) == 6
    assert sum("back to back" in line for line in plain) == 3
    assert sum("the map writer's pace" in line for line in plain) == 3
    for line in plain:
        updates = int(re.match(r"plain writer \(the floor\): (\d+) updates of 200 random lines",
                               line).group(1))
        assert updates > 0
    assert len([line for line in lines if line.startswith("update applied and published")]) == 3

    # The in-place map's updates with no reader, against the floor of an update in place: in
    # anonymous shared memory, then in private memory.
    # Then the same map's updates back to back, with no floor between them.
    alone = [re.match(r"update alone, in place, (anonymous shared|private) memory.*: median "
                      r"(\d+\.\d+) ms .*floor, .*: median (\d+\.\d+) ms .*; (\d+\.\d+)x the floor; "
                      r"then 15 updates back to back, no floor between: median (\d+\.\d+) ms "
                      r"\(min \d+\.\d+\)$",
                      line) for line in lines if line.startswith("update alone")]
    assert [match.group(1) if match else None for match in alone] == ["anonymous shared", "private"]
    assert all(float(match.group(2)) > 0 and float(match.group(3)) > 0 and
               float(match.group(5)) > 0 for match in alone)
    assert re.search(r"^peak RSS: \d+ MB", done.stdout, re.M)


@pytest.mark.one_backend
def test_bench_map_json_has_every_round(build_dir):
    """--json: one document, every read row with a value per round, and the headline's pair."""
    done = subprocess.run([str(build_dir / "bench" / "map"), "-n", "20000", "-R", "3",
                           "--reads-only", "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["keys"] == 20000 and report["rounds"] == 3
    names = [row["name"] for row in report["rows"]]
    assert report["headline"]["sxe"] in names and report["headline"]["lmdb"] in names
    for row in report["rows"]:
        assert len(row["rounds"]) == 3 and all(value > 0 for value in row["rounds"]), row
