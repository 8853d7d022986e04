"""bench/work on a few jobs: its --json document has every row, each with a positive value per
round, and its own check (every job ran once) passed. No speed is asserted: bench/all's "work"
suite compares it with libuv's pool."""
import json
import subprocess

import pytest


@pytest.mark.one_backend  # a benchmark's own report
def test_bench_work_reports_every_row(build_dir):
    done = subprocess.run([str(build_dir / "bench" / "work"), "--json", "5000", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["bench"] == "work"
    assert report["params"] == {"pool": "sxe_work", "threads": 4, "jobs": 5000,
                                "in_flight": 1024}
    rows = {row["name"]: row for row in report["rows"]}
    assert sorted(rows) == sorted(["empty jobs, 1024 in flight", "CPU per job, 1024 in flight",
                                   "a job's round trip, one at a time"])
    for row in rows.values():
        assert len(row["rounds"]) == 2 and all(value > 0 for value in row["rounds"]), row
    assert "work: round 1 of 2" in done.stderr  # progress, on stderr


@pytest.mark.one_backend
def test_bench_work_refuses_nonsense(build_dir):
    done = subprocess.run([str(build_dir / "bench" / "work"), "0"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 1
    assert "usage: work" in done.stderr
