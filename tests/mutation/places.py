"""Where the mutation runner keeps things, and what its tests run under."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORK = os.path.join(ROOT, "build", "mutation")
TREE = os.path.join(WORK, "tree")
# Where sources are read from: the repository until the scratch tree is made, then the tree, so
# that edits made in the repository while a run goes on change neither its mutants nor its map.
SOURCE = ROOT
BUILD = os.path.join(TREE, "build", "mutation")
TOOL = os.path.join(ROOT, "build", "python")
PACKAGES = ["universalmutator==1.14.1", "tabulate==0.9.0"]
EQUIVALENT = os.path.join(ROOT, "tests", "mutation", "equivalent.txt")
# While this file exists the run waits between mutants (a long run shares the machine).
PAUSE = os.path.join(WORK, "pause")
# Where the tests judging a mutant write their coverage counters (wiped for each mutant: counters
# of another build of the same object would not merge), and where the map's runs write theirs.
SCRATCH_COUNTERS = os.path.join(WORK, "counters")
MAP_COUNTERS = os.path.join(WORK, "map-counters")
MAP_CACHE = os.path.join(WORK, "map")
MAP_FORMAT = "4"  # bumped when what a cached map entry holds changes, or how the tree is built
# The Python that runs the system tests: Debian's, which sees the packages scripts/test installs
# with apt (websockets, wsproto, selenium), as scripts/deps chooses it.
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
# What a system test runs under, as CTest runs it (the epoll backend, no log level from outside).
SYSTEM_ENV = {"SXE_BUILD_DIR": BUILD, "SXE_BACKEND": "epoll"}
# AddressSanitizer gives each thread an alternate signal stack of its own by default: then the
# code that runs only where a thread has none yet (the fibers' own) would run in no test here.
SANITIZER_ENV = {"ASAN_OPTIONS": "use_sigaltstack=0"}


def read_bytes(path):
    with open(path, "rb") as file:
        return file.read()
