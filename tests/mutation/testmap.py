"""The tests the mutation runner knows, and which lines each runs: the coverage map."""
import bisect
import glob
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time

import places
from places import (BUILD, MAP_CACHE, MAP_COUNTERS, MAP_FORMAT, PYTHON, SANITIZER_ENV,
                    SYSTEM_ENV, TREE, read_bytes)
from processes import check, exited, finish, run, spawn, sweep, tracked
from sameness import file_scope

def unit_entries():
    """The unit tests as CTest lists them (both backends; not the @trace and @valgrind reruns),
    each {id, kind, command, env, cwd, target, timeout}."""
    if not hasattr(unit_entries, "found"):
        listing = json.loads(check(["ctest", "--test-dir", BUILD, "--show-only=json-v1"]))
        found = []
        for test in listing["tests"]:
            name = test["name"]
            if not name.startswith("unit/") or "@trace" in name or "@valgrind" in name:
                continue
            properties = {p["name"]: p["value"] for p in test.get("properties", [])}
            env = {**os.environ, **SANITIZER_ENV}
            for assignment in properties.get("ENVIRONMENT", []):
                key, _, value = assignment.partition("=")
                env[key] = value
            for change in properties.get("ENVIRONMENT_MODIFICATION", []):
                key, _, operation = change.partition("=")
                if operation.startswith("unset:"):
                    env.pop(key, None)
            # CTest names no command for a program not built yet (a fresh tree): its target is
            # then told by the test's name (unit/x@io_uring is test_x, unit/x@ucontext is
            # test_x_ucontext).
            command = test.get("command")
            base, _, variant = name.split("/", 1)[1].partition("@")
            target = (os.path.basename(command[0]) if command else
                      "test_" + base + ("_" + variant if variant and variant != "io_uring" else ""))
            found.append({"id": name, "kind": "unit", "command": command, "env": env,
                          "cwd": properties.get("WORKING_DIRECTORY", BUILD), "target": target,
                          "timeout": float(properties.get("TIMEOUT", 60))})
        if not found:
            sys.exit("mutation: CTest lists no unit tests")
        unit_entries.found = found
    return unit_entries.found


def system_entries():
    """Each system test file's tests, in two parts as CTest splits them: those not marked serial
    (run several at a time: they mostly wait on sockets) and those marked serial (one at a time:
    they keep a rate or a deadline)."""
    env = {key: value for key, value in os.environ.items() if key != "SXE_LOG_LEVEL"}
    env.update(SYSTEM_ENV)
    env.update(SANITIZER_ENV)
    found = []
    for path in sorted(glob.glob(os.path.join(TREE, "tests", "system", "test_*.py"))):
        base = os.path.basename(path)
        for kind in ("system", "serial"):
            found.append({"id": f"{kind}/{base}", "kind": kind, "file": path, "env": env,
                          "cwd": TREE, "timeout": 900.0})
    return found


def pytest_command(kind, files, jobs, stop=True):
    """pytest over files' tests of kind (system: not serial, 2 * jobs at a time; serial: alone)."""
    command = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"] + (["-x"] if stop else [])
    if kind == "system":
        return command + ["-n", str(2 * jobs), "-m", "not serial", *files]
    return command + ["-m", "serial", *files]


def command_of(entry, jobs):
    if entry["kind"] == "unit":
        return entry["command"]
    return pytest_command(entry["kind"], [entry["file"]], jobs, stop=False)


def digest(names):
    """A digest of the tracked files named, in order, as they are in the repository (the scratch
    tree is the same, but for the mutant in place)."""
    hasher = hashlib.sha256(MAP_FORMAT.encode())
    for name in names:
        hasher.update(name.encode() + b"\0")
        path = os.path.join(places.SOURCE, name)
        hasher.update(read_bytes(path) if os.path.isfile(path) else b"-")
    return hasher.hexdigest()[:24]


def entry_keys(entries):
    """Per entry, a digest of the files its coverage depends on: a cached entry is reused while
    they stay the same, so a new unit test costs a run of its own program only. A unit test
    depends on the library, the build, the shared test helpers and its own source; a system test
    on all of that but the unit tests' sources, the programs, and its own file."""
    files = [name for name in tracked() if not name.startswith(("docs/", "tests/mutation/",
                                                                "tests/fuzz/"))
             and not name.endswith(".md")]
    own = re.compile(r"tests/(unit/test_\w+\.c|system/test_\w+\.py)$")
    programs = ("tools/", "examples/", "apps/", "bench/", "tests/system/", "scripts/")
    unit_base = digest([n for n in files if not own.match(n) and not n.startswith(programs)])
    system_base = digest([n for n in files if not own.match(n)])
    keys = {}
    for entry in entries:
        if entry["kind"] == "unit":
            source = f"tests/unit/{entry['target']}.c"
            if not os.path.exists(os.path.join(places.SOURCE, source)):
                # test_fiber_ucontext's source is test_fiber.c
                source = f"tests/unit/{entry['target'].rsplit('_', 1)[0]}.c"
            backend = entry["env"].get("SXE_BACKEND", "")
            keys[entry["id"]] = digest([source]) + unit_base + backend + entry["target"]
        else:
            name = os.path.relpath(entry["file"], TREE)
            keys[entry["id"]] = digest([name]) + system_base + entry["kind"]
    return {key: hashlib.sha256(value.encode()).hexdigest()[:32] for key, value in keys.items()}


def counters_env(env, directory):
    return {**env, "GCOV_PREFIX": directory, "GCOV_PREFIX_STRIP": "0"}


def read_counters(directory):
    """What gcov says the counters under directory (written with GCOV_PREFIX) ran: per source
    file of src/ and tools/, {"run": executed lines, "lines": executable lines,
    "functions": [[first line, last line, executed]]}."""
    counters = [os.path.join(top, name) for top, _, names in os.walk(directory)
                for name in names if name.endswith(".gcda")]
    for path in counters:  # gcov wants each object's notes beside its counters
        notes = path[len(directory):-len(".gcda")] + ".gcno"
        if os.path.exists(notes) and not os.path.exists(path[:-5] + ".gcno"):
            os.symlink(notes, path[:-5] + ".gcno")
    found = {}
    with tempfile.TemporaryDirectory() as scratch:
        for start in range(0, len(counters), 64):
            result = run(["gcov", "--json-format", "--stdout", *counters[start:start + 64]],
                         cwd=scratch)
            for line in result.stdout.splitlines():
                if not line.startswith("{"):
                    continue
                report = json.loads(line)
                for source in report["files"]:
                    path = os.path.normpath(os.path.join(report["current_working_directory"],
                                                         source["file"]))
                    name = os.path.relpath(path, TREE)
                    if not name.startswith(("src/", "tools/")) or not name.endswith(".c"):
                        continue
                    into = found.setdefault(name, {"run": set(), "lines": set(),
                                                   "functions": {}})
                    for entry in source["lines"]:
                        into["lines"].add(entry["line_number"])
                        if entry["count"] > 0:
                            into["run"].add(entry["line_number"])
                    for function in source["functions"]:
                        span = (function["start_line"], function["end_line"])
                        into["functions"][span] = (into["functions"].get(span, False) or
                                                   function["execution_count"] > 0)
    return {name: {"run": sorted(data["run"]), "lines": sorted(data["lines"]),
                   "functions": sorted([*span, ran] for span, ran in data["functions"].items())}
            for name, data in found.items()}


class CoverageMap:
    """Which tests run which line. Built by running every test once with its own counters (that
    run is also the check that the tests pass with no mutant in place), an entry cached for as
    long as the files it depends on stay the same."""

    def __init__(self, entries, jobs):
        os.makedirs(MAP_CACHE, exist_ok=True)
        keys = entry_keys(entries)
        self.entries = []
        self.seconds = {}
        self.run = {}  # (file, line) -> set of entry ids
        self.functions = {}  # file -> sorted [(first, last, set of entry ids)]
        self.lines = {}  # file -> set of lines gcov counts
        unmeasured = []
        results = {}
        for entry in entries:
            cached = os.path.join(MAP_CACHE, keys[entry["id"]] + ".json")
            if os.path.exists(cached):
                with open(cached) as file:
                    results[entry["id"]] = json.load(file)
            else:
                unmeasured.append(entry)
        if unmeasured:
            print(f"coverage map: running {len(unmeasured)} of {len(entries)} tests with counters "
                  f"({len(entries) - len(unmeasured)} known)", flush=True)
            started = time.monotonic()
            for entry, result in measure(unmeasured, jobs):
                results[entry["id"]] = result
                with open(os.path.join(MAP_CACHE, keys[entry["id"]] + ".json"), "w") as file:
                    json.dump(result, file)
            print(f"coverage map: done in {time.monotonic() - started:.0f} s", flush=True)
        spans = {}
        for entry in entries:
            result = results[entry["id"]]
            if result.get("empty"):  # a file with no tests of this kind
                continue
            self.entries.append(entry)
            self.seconds[entry["id"]] = result["seconds"]
            for name, data in result["files"].items():
                self.lines.setdefault(name, set()).update(data["lines"])
                for line in data["run"]:
                    self.run.setdefault((name, line), set()).add(entry["id"])
                for first, last, ran in data["functions"]:
                    ids = spans.setdefault(name, {}).setdefault((first, last), set())
                    if ran:
                        ids.add(entry["id"])
        self.file_tests = {}  # file -> the tests that run any line of it
        self.program_tests = {}  # a program of tools/ -> the tests that run any line of it
        for (name, _), ids in self.run.items():
            self.file_tests.setdefault(name, set()).update(ids)
            if name.startswith("tools/"):
                self.program_tests.setdefault(name.split("/")[1], set()).update(ids)
        for name, by_span in spans.items():
            self.functions[name] = sorted((first, last, ids)
                                          for (first, last), ids in by_span.items())

    def function_tests(self, name, line):
        """The tests that run the function line lies in, or None if it lies in none."""
        spans = self.functions.get(name, [])
        at = bisect.bisect_right([first for first, _, _ in spans], line) - 1
        if at >= 0 and spans[at][0] <= line <= spans[at][1]:
            return spans[at][2]
        return None

    def tests_for(self, mutant):
        """The tests that can see the mutant, ordered: the file's own unit tests, the other unit
        tests, quick ones first, then the system tests, quick ones first. @return (tests, why),
        why saying how they were chosen.

        Unit tests are chosen by the line: those that run it (a statement inserted after a line
        runs where that line does). For a line gcov counts no code on (a declaration, a line
        continued) or a case label (a value that took another branch may take this one now),
        those that run its function; for a line outside any function, those that run the file
        if only the file sees it (a static table, a macro, a type), else every test. A line no
        unit test is seen to run falls back to those that run its function, then its file: a
        test's child that dies by a signal (a fiber's stack overflow) writes no counters.
        System tests are chosen by the file (for a program's file, by the program): a server a
        test kills with SIGKILL writes no counters either, so a system test's count of a line
        is not to be trusted, only that it runs the program."""
        name = mutant.name
        line = mutant.line - 1 if mutant.inserted else mutant.line
        function = self.function_tests(name, line)
        if (line in self.lines.get(name, set()) and
                not mutant.original.strip().startswith(("case ", "default:"))):
            ids, why = self.run.get((name, line), set()), "the line"
        elif function is not None:
            ids, why = function, "its function"
        elif file_scope(name, line):
            ids, why = self.file_tests.get(name, set()), "its file (a name only it sees)"
        else:
            ids, why = {entry["id"] for entry in self.entries}, "every test (outside any function)"
        units = {i for i in ids if i.startswith("unit/")}
        if not units and why == "the line" and function:
            units, why = {i for i in function if i.startswith("unit/")}, "its function"
        if not units and why in ("the line", "its function"):
            units = {i for i in self.file_tests.get(name, set()) if i.startswith("unit/")}
            why = "its file" if units else why
        program = name.split("/")[1] if name.startswith("tools/") else None
        systems = {i for i in (ids if why.startswith("every") else
                               self.program_tests.get(program, set()) if program else
                               self.file_tests.get(name, set())) if not i.startswith("unit/")}
        stem = os.path.splitext(os.path.basename(name))[0]

        def order(entry):
            kind = {"unit": 0, "system": 1, "serial": 2}[entry["kind"]]
            own = entry["kind"] == "unit" and entry["target"].startswith(f"test_{stem}")
            return (kind, not own, self.seconds[entry["id"]])

        chosen = units | systems
        why = f"unit tests by {why}, system tests by the {'program' if program else 'file'}"
        return sorted((entry for entry in self.entries if entry["id"] in chosen), key=order), why


def measure(entries, jobs):
    """Runs each entry with its own counters, units jobs at a time. Yields (entry, result); exits
    the run if one fails (every mutant would look killed)."""
    shutil.rmtree(MAP_COUNTERS, ignore_errors=True)
    units = [entry for entry in entries if entry["kind"] == "unit"]
    systems = [entry for entry in entries if entry["kind"] != "unit"]
    finished = []
    failures = []
    started = time.monotonic()
    said = [started, 0]  # when progress was last told, and how many tests had ended

    def done(entry, returncode, seconds, output):
        said[1] += 1
        if time.monotonic() - said[0] >= 5:  # a line every 5 s at most, as long as tests end
            said[0] = time.monotonic()
            print(f"coverage map: {said[1]} of {len(entries)} tests ended ({entry['id']} last), "
                  f"{said[0] - started:.0f} s", flush=True)
        if entry["kind"] != "unit" and returncode == 5:  # pytest: no test of this kind there
            finished.append((entry, {"empty": True}))
            return
        if returncode != 0:
            failures.append((entry, output))
            return
        finished.append((entry, {"seconds": round(seconds, 3),
                                 "files": read_counters(directory_of(entry))}))

    def directory_of(entry):
        return os.path.join(MAP_COUNTERS, entry["id"].replace("/", "_"))

    batches = [(units, jobs)] + [([entry], 1) for entry in systems]
    for batch, parallel in batches:
        jobs_of = [(entry, command_of(entry, jobs),
                    counters_env(entry["env"], directory_of(entry)), entry["cwd"],
                    3 * entry["timeout"]) for entry in batch]
        run_all(jobs_of, parallel, stop=False, on_end=done)
        # A test that keeps a deadline can miss it beside another (this build is slow): each
        # that failed runs again alone, twice at most, before the run gives up.
        for attempt in range(2):
            again, failures[:] = list(failures), []
            for entry, _ in again:
                shutil.rmtree(directory_of(entry), ignore_errors=True)
                run_all([(entry, command_of(entry, jobs),
                          counters_env(entry["env"], directory_of(entry)), entry["cwd"],
                          3 * entry["timeout"])], 1, stop=False, on_end=done)
        if failures:
            print(failures[0][1][-6000:], file=sys.stderr)
            sys.exit(f"mutation: fails with no mutant in place: {failures[0][0]['id']}")
        yield from finished
        finished.clear()
    shutil.rmtree(MAP_COUNTERS, ignore_errors=True)


def run_all(jobs_of, parallel, stop, on_end=None):
    """Runs each (entry, command, env, cwd, timeout), parallel at a time, in order. With stop, it
    ends at the first that fails or times out and kills the others. @return (outcome, entry) of
    that one ('killed' or 'timeout'), or None. on_end(entry, returncode, seconds, output) is told
    of each that ends (returncode None: timed out)."""
    pending = list(jobs_of)
    running = []
    try:
        while pending or running:
            while pending and len(running) < parallel:
                entry, command, env, cwd, timeout = pending.pop(0)
                out = tempfile.TemporaryFile()
                running.append((entry, spawn(command, env, cwd, out), time.monotonic(), timeout,
                                out))
            time.sleep(0.02)
            for item in list(running):
                entry, process, started, timeout, out = item
                over = False
                if not exited(process):
                    over = time.monotonic() - started > timeout
                    if not over:
                        continue
                running.remove(item)
                returncode = finish(process)
                out.seek(0)
                output = out.read().decode(errors="replace")
                out.close()
                if on_end:
                    on_end(entry, None if over else returncode, time.monotonic() - started,
                           output)
                if stop and (over or returncode != 0):
                    return ("timeout" if over else "killed", entry, output)
        return None
    finally:
        for entry, process, _, _, out in running:
            finish(process)
            out.close()
        sweep()
