"""sxe-http's own words: its usage text whole (tests/system/sxe-http-usage.txt, which a change to
the options must change too), and the progress line it prints each second of a long run."""
import pathlib
import re

import pytest

HERE = pathlib.Path(__file__).resolve().parent


def test_the_usage_text_whole(sxe_http):
    result = sxe_http("--help")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == (HERE / "sxe-http-usage.txt").read_text()
    result = sxe_http("-h")
    assert result.returncode == 0 and result.stdout == (HERE / "sxe-http-usage.txt").read_text()


@pytest.mark.serial
def test_a_progress_line_each_second(sxe_http, hello):
    result = sxe_http("-i", "127.0.0.1", "-p", hello, "-c", "2", "-d", "3")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("progress: ")]
    assert 2 <= len(lines) <= 3, result.stderr
    seconds = []
    for line in lines:
        match = re.fullmatch(r"progress: (\d+) s, (\d+) queries, (\d+) connections open", line)
        assert match, line
        seconds.append(int(match.group(1)))
        assert int(match.group(3)) == 2
    assert seconds == sorted(seconds) and len(set(seconds)) == len(seconds)
    assert 1 <= seconds[0] <= 2
