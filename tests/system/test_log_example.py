"""examples/log: the line format and per-module levels from the environment, end to end."""
import re

LINE = re.compile(
    r"^(?P<date>\d{8}) (?P<time>\d{6}\.\d{3}) T +(?P<tid>\d+) (?P<id>------|\d{6}) "
    r"(?P<level>FATAL|ERROR|WARN |INFO |DEBUG|TRACE|DUMP ) (?P<message>.*)$")


def parse(stderr: str):
    lines = stderr.splitlines()
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), f"unparsable lines in:\n{stderr}"
    return parsed


def test_default_level_is_info(run):
    result = run("examples/log")
    assert result.returncode == 0
    lines = parse(result.stderr)
    levels = [m["level"].strip() for m in lines]
    assert levels == ["INFO", "WARN", "INFO", "INFO", "INFO", "ERROR"]
    assert lines[0]["message"] == "starting: 2 + 3 = 5"
    assert lines[0]["id"] == "------"
    assert lines[1]["id"] == "000042"
    assert lines[2]["message"].startswith("0000  47 45 54 20 2f 20 48 54  54 50 2f 31 2e 31 0d 0a")
    assert lines[5]["message"] == "No buffer space available"
    assert len({m["tid"] for m in lines}) == 1


def test_global_level_from_environment(run):
    result = run("examples/log", {"SXE_LOG_LEVEL": "2"})
    assert [m["level"].strip() for m in parse(result.stderr)] == ["ERROR"]


def test_module_level_beats_global_level(run):
    result = run("examples/log", {"SXE_LOG_LEVEL": "0", "SXE_LOG_LEVEL_MAIN": "warn"})
    assert [m["level"].strip() for m in parse(result.stderr)] == ["WARN", "ERROR"]


def test_tracing_shows_only_where_compiled_in(run, build_dir):
    result = run("examples/log", {"SXE_LOG_LEVEL": "7"})
    lines = parse(result.stderr)
    traced = [m["message"] for m in lines if m["level"].strip() == "TRACE"]
    debug_build = "SXE_DEBUG:BOOL=ON" in (build_dir / "CMakeCache.txt").read_text()
    if debug_build:
        assert traced == ["> add(a=2, b=3)", "  adding", "< add = 5"]
    else:
        assert traced == []


def test_bad_level_value_is_reported(run):
    result = run("examples/log", {"SXE_LOG_LEVEL": "verbose"})
    assert "ignoring SXE_LOG_LEVEL=verbose: expected 0-7 or a level name" in result.stderr
    assert result.returncode == 0
