#!/usr/bin/env python3
"""The library's layering, checked: modules are folders of src/, and each keeps its own.

    tests/build/check-layers.py BUILD_DIR [--graph]

A module is a folder of src/ (src/core, src/http/server, ...); its headers are its own. Fails when
- a file includes a header of another module, other than the shared ones (src/sys.h, the seam;
  src/base/base.h, what the base layer lends the rest of the library) and the libraries kept in
  third_party/;
- an object of one module uses an internal name (sxe__*) that another module defines, other
  than the seam's, the names src/base/base.h declares, and those the public headers' macros call;
- files call each other in a circle that spans modules, or more than two files of one module.
The calls are read from the library's objects in BUILD_DIR (nm): which object uses a name another
defines. With --graph, every module's files and the calls between them are printed too.
"""
import collections
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src")
SHARED_HEADERS = {"sys.h", "base/base.h"}
MAX_CIRCLE_IN_MODULE = 2


def module_of(path):
    """The module of a path relative to src/: its folder, or "seam" for src/ itself."""
    folder = os.path.dirname(path)
    return folder if folder else "seam"


def sources():
    for folder, _, names in os.walk(SRC):
        for name in sorted(names):
            if name.endswith((".c", ".h")):
                yield os.path.relpath(os.path.join(folder, name), SRC)


def include_faults():
    faults = []
    for path in sources():
        with open(os.path.join(SRC, path), encoding="utf-8") as source:
            text = source.read()
        for header in re.findall(r'^#include "([^"]+)"', text, re.MULTILINE):
            here = os.path.normpath(os.path.join(os.path.dirname(path), header))
            target = here if os.path.exists(os.path.join(SRC, here)) else header
            if not os.path.exists(os.path.join(SRC, target)):
                continue  # a public header (sxe/...), or a system one
            if target.startswith("../third_party/"):
                continue  # a library kept in the tree (yyjson), no module of ours
            if target in SHARED_HEADERS or module_of(target) == module_of(path):
                continue
            faults.append(f"src/{path} includes src/{target}, private to {module_of(target)}")
    return faults


def lent_names():
    """Internal names any module may use: base.h's, and those in the public headers."""
    names = set()
    paths = [os.path.join(SRC, "base", "base.h")]
    include = os.path.join(ROOT, "include", "sxe")
    paths += [os.path.join(include, name) for name in os.listdir(include)]
    for path in paths:
        if os.path.exists(path):
            with open(path, encoding="utf-8") as header:
                names |= set(re.findall(r"\bsxe__\w+", header.read()))
    return names


def objects(build):
    """Each library object in the build, by its source path relative to src/."""
    top = os.path.join(build, "CMakeFiles", "sxe_objects.dir", "src")
    found = {}
    for folder, _, names in os.walk(top):
        for name in names:
            source = os.path.relpath(os.path.join(folder, name), top)[:-2]
            if name.endswith(".c.o") and os.path.exists(os.path.join(SRC, source)):
                found[source] = os.path.join(folder, name)  # not one left by a moved source
    return found


def symbols(path):
    output = subprocess.run(["nm", "--defined-only", "-g", path], capture_output=True,
                            text=True, check=True).stdout
    defined = {line.split()[-1] for line in output.splitlines() if line.strip()}
    output = subprocess.run(["nm", "-u", path], capture_output=True, text=True,
                            check=True).stdout
    used = {line.split()[-1] for line in output.splitlines() if line.strip()}
    return defined, used


def circles(edges, nodes):
    """Strongly connected components (Tarjan's), largest first."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return sorted(found, key=len, reverse=True)


def call_faults(build, show_graph):
    objs = objects(build)
    if not objs:
        return [f"no library objects under {build}: build it first"], []
    defined_by, uses = {}, {}
    for source, path in objs.items():
        defined, used = symbols(path)
        uses[source] = used
        for name in defined:
            defined_by[name] = source
    lent = lent_names()
    faults, edges = [], collections.defaultdict(set)
    for source, used in sorted(uses.items()):
        for name in sorted(used):
            owner = defined_by.get(name)
            if owner is None or owner == source:
                continue
            edges[source].add(owner)
            if name.startswith("sxe__") and module_of(owner) != module_of(source) and \
                    module_of(owner) != "seam" and name not in lent:
                faults.append(f"src/{source} uses {name}, internal to {module_of(owner)} "
                              f"(src/{owner})")
    notes = []
    for component in circles(edges, objs.keys()):
        modules = {module_of(member) for member in component}
        where = ", ".join(f"src/{member}" for member in component)
        if len(modules) > 1:
            faults.append(f"a circle of calls across modules {sorted(modules)}: {where}")
        elif len(component) > MAX_CIRCLE_IN_MODULE:
            faults.append(f"a circle of {len(component)} files in {modules.pop()}: {where}")
        else:
            notes.append(f"a circle of two files (one file cut in two): {where}")
    if show_graph:
        by_module = collections.defaultdict(list)
        for source in sorted(objs):
            by_module[module_of(source)].append(source)
        for module, members in sorted(by_module.items()):
            print(f"{module}:")
            for member in members:
                calls = sorted(f"src/{o}" for o in edges[member])
                print(f"  src/{member} -> {', '.join(calls) if calls else '(nothing)'}")
    return faults, notes


def main():
    args = [a for a in sys.argv[1:] if a != "--graph"]
    if len(args) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    faults = include_faults()
    call, notes = call_faults(args[0], "--graph" in sys.argv)
    faults += call
    for note in notes:
        print(f"check-layers: {note}")
    for fault in faults:
        print(f"check-layers: {fault}", file=sys.stderr)
    modules = {module_of(path) for path in sources()}
    print(f"check-layers: {len(modules)} modules, {len(objects(args[0]))} objects: "
          f"{'FAILED, ' + str(len(faults)) + ' faults' if faults else 'the walls hold'}")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
