"""The report bench/all writes: docs/benchmarks.md as the record of one run. A section per
suite (the exact command that remakes it, a sentence on how to read it, its tables), and at the
top every target with its verdict from this run: met only when the whole spread is on the
target's right side, "within noise" when the spread straddles it, else missed."""
import datetime
import os
import platform
import subprocess

from .figures import Sample, table, verdict


class Target:
    """A target judged in this run: area and wording, the figure (a Sample over rounds: a ratio
    of side-by-side cells, or a figure itself), the bound, and which side of it is good."""

    def __init__(self, area, text, sample, bound, better="lower", unit="x", digits=2,
                 headline=False):
        self.area, self.text, self.sample, self.bound = area, text, sample, bound
        self.better, self.unit, self.digits = better, unit, digits
        self.headline = headline  # quoted in the README

    @property
    def verdict(self):
        return verdict(self.sample, self.bound, self.better)

    def row(self):
        return [self.area, self.text, self.sample.show(self.digits, self.unit), self.verdict]


class Section:
    """One suite's part of the report."""

    def __init__(self, key, title, reading):
        self.key, self.title, self.reading = key, title, reading
        self.parts = []
        self.targets = []
        self.chart = None  # draw(path): a PNG of the section's figures, beside the report

    def add(self, text):
        self.parts.append(text)

    def add_table(self, caption, header, rows):
        self.parts.append((caption + "\n\n" if caption else "") + table(header, rows))

    def target(self, area, text, sample, *args, **kwargs):
        """A target, unless its cells were not in this run (sample None)."""
        if sample is not None:
            self.targets.append(Target(area, text, sample, *args, **kwargs))


def machine():
    model = "?"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as meminfo:
        memory = int(meminfo.readline().split()[1]) / 1024 / 1024
    return (f"{os.cpu_count()} × {model}, {memory:.0f} GiB, Linux {platform.release()}, "
            f"{platform.freedesktop_os_release().get('PRETTY_NAME', '?')}")


def first_line(command):
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=10)
        text = (result.stdout + result.stderr).strip().splitlines()
        return text[0] if text else "?"
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"


def versions(root, build):
    commit = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    return {
        "sxe": f"{commit}, release build",
        "nginx": first_line(["nginx", "-v"]).replace("nginx version: ", ""),
        "h2o": first_line(["h2o", "--version"]),
        "node.js": first_line(["node", "--version"]),
        "libuv": first_line(["pkg-config", "--modversion", "libuv"]),
        "LMDB": first_line(["dpkg-query", "-W", "-f=${Version}", "liblmdb-dev"]),
        "compiler": first_line(["cc", "--version"]),
    }, commit


def write(path, command, sections, args, measured, minutes):
    """The report; measured is versions()'s answer from before the run (what was built)."""
    info, commit = measured
    targets = [t for s in sections for t in s.targets]
    lines = [
        "# Benchmarks",
        "",
        f"The record of one run of `bench/all` at commit `{commit}` on "
        f"{datetime.date.today().isoformat()}, {minutes:.0f} minutes, made by this command from "
        "the repository's root:",
        "", "```", command, "```", "",
        f"Machine: {machine()}. Versions: " +
        "; ".join(f"{k} {v}" for k, v in info.items()) + ".",
        "",
        "**How to read it.** Every figure is the median over the rounds, with the lowest and the "
        "highest round in brackets. Within a round the servers take turns in a rotating order, "
        "each started afresh for its cell, so what drifts between rounds hits all of them. A "
        "server runs pinned to CPU 0 (both CPUs where a table says two cores), the load "
        "(`sxe-http`) on CPU 1; every answer's status and body length is checked and a sample's "
        "bytes, and a cell with any error is shown FAILED, never cheaper. CPU per request is the "
        "server's CPU time (every thread of its process tree, from schedstat) over the load's "
        "measured window, divided by the answers in that window; a warm-up before it is not "
        "counted. A ratio is taken round by round between cells of the same round. History lives "
        "in git: this file is rewritten by every run.",
        "",
        "## Targets",
        "",
        "A target is met only when every round is on its right side; \"within noise\" when the "
        "rounds straddle it.",
        "",
        table(["area", "target", "this run", "verdict"], [t.row() for t in targets]),
        "",
    ]
    for section in sections:
        lines += [f"## {section.title}", "", f"`bench/all --only {section.key}`. " +
                  section.reading, ""]
        if section.chart is not None:
            name = ("benchmarks" if section.key == "single" else f"benchmarks-{section.key}") + \
                ".png"
            try:
                section.chart(os.path.join(os.path.dirname(os.path.abspath(path)), name))
                lines += [f"![{section.title}]({name})", ""]
            except ImportError:
                lines += ["(No chart: matplotlib is not installed.)", ""]
        for part in section.parts:
            lines += [part, ""]
    with open(path, "w") as out:
        out.write("\n".join(lines).rstrip() + "\n")
    return commit


README_BEGIN = "<!-- bench/all figures: begin -->"
README_END = "<!-- bench/all figures: end -->"


def write_readme(path, targets, commit):
    """The README's figures: the headline targets' rows, as the report has them, between its
    markers (tests/system/test_readme_figures.py checks that they match the report)."""
    rows = [t.row()[1:] for t in targets if t.headline]
    block = "\n".join([
        README_BEGIN,
        f"From the last full run of `bench/all` (commit `{commit}`, "
        "[docs/benchmarks.md](docs/benchmarks.md)): medians over the rounds, the lowest and highest "
        "round in brackets, sxe's default configuration unless a row says otherwise.",
        "",
        table(["target", "this run", "verdict"], rows),
        README_END])
    with open(path) as source:
        text = source.read()
    if README_BEGIN not in text or README_END not in text:
        raise RuntimeError(f"{path} has no {README_BEGIN} ... {README_END} block")
    text = text[:text.index(README_BEGIN)] + block + text[text.index(README_END) + len(README_END):]
    with open(path, "w") as out:
        out.write(text)
