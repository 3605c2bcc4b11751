#!/usr/bin/env python3
"""Checks that includes follow the project's layers; exits 1 naming each
include that does not.

  scripts/check-layers.py [--root DIR]

Three rules:
  * compiler/ -> passes/ -> dialects/ -> runtime/, never back up; the
    runtime includes no LLVM or MLIR header.
  * Inside runtime/ and passes/, a folder includes only itself and the
    folders its row of that folder's README.md table names ("may
    include"), each of them a row above it: the README is the rule, so it
    cannot go stale. Files directly in passes/ (the pass declarations and
    pipelines) may include any of its folders.
  * No two files call each other, directly or through others: X calls Y
    when a source of X (X.cpp, X.cu) includes Y's header; the calls form no
    circle.
"""

import argparse
import os
import re
import subprocess
import sys

SOURCE = (".h", ".cpp", ".cu", ".cuh", ".inc")
STACK = ["runtime", "dialects", "passes", "compiler"]  # Lowest first.
INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^">]+)[">]', re.M)


def sources(root):
    """The tracked sources (every file under the stack outside git)."""
    run = subprocess.run(["git", "-C", root, "ls-files"] + STACK,
                         capture_output=True, text=True)
    if run.returncode == 0 and run.stdout.strip():
        paths = run.stdout.split()
    else:
        paths = [os.path.relpath(os.path.join(d, f), root)
                 for top in STACK
                 for d, _, names in os.walk(os.path.join(root, top))
                 for f in names]
    return sorted(p for p in paths if p.endswith(SOURCE))


def includes(root, path):
    with open(os.path.join(root, path), errors="replace") as f:
        text = f.read()
    for m in INCLUDE.finditer(text):
        yield text.count("\n", 0, m.start()) + 1, m.group(1)


LAYERED = ("runtime", "passes")


def layers(root, top, errors):
    """TOP/README.md's rows: [(folder, set of folders it may include)]."""
    readme = os.path.join(root, top, "README.md")
    rows = []
    with open(readme) as f:
        for line in f:
            m = re.match(r"\|\s*`([a-z_/]+)/`\s*\|[^|]*\|([^|]*)\|", line)
            if m:
                allowed = set(re.findall(r"`([a-z_/]+)`", m.group(2)))
                rows.append((m.group(1), allowed))
    if not rows:
        errors.append("%s/README.md: no layer table found" % top)
    seen = set()
    for folder, allowed in rows:
        for a in sorted(allowed - seen):
            errors.append("%s/README.md: '%s' may include '%s', which is "
                          "not a row above it" % (top, folder, a))
        seen.add(folder)
    return rows


def folder_of(path, rows):
    """The deepest row folder holding `path` (inside its top), or None."""
    best = None
    for folder, _ in rows:
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(best):
                best = folder
    return best


def cycles(graph):
    """Strongly connected components with more than one unit (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))))
    root = ap.parse_args().root
    errors = []
    tables = {top: layers(root, top, errors) for top in LAYERED}
    files = sources(root)
    units = {os.path.splitext(p)[0] for p in files}
    graph = {}
    for path in files:
        top = path.split("/")[0]
        unit = os.path.splitext(path)[0]
        rows = tables.get(top)
        inner = path[len(top) + 1:]
        umbrella = top == "passes" and "/" not in inner
        here = folder_of(inner, rows) if rows and not umbrella else None
        if rows and not umbrella and here is None:
            errors.append("%s: its folder has no row in %s/README.md"
                          % (path, top))
        for line, inc in includes(root, path):
            where = "%s:%d: includes %s" % (path, line, inc)
            first = inc.split("/")[0]
            if top == "runtime" and first in ("mlir", "llvm"):
                errors.append(where + ": the runtime includes no LLVM or "
                              "MLIR header")
            if first in STACK and STACK.index(first) > STACK.index(top):
                errors.append(where + ": %s/ is above %s/" % (first, top))
            if rows and first == top and here:
                there = folder_of(inc[len(top) + 1:], rows)
                allowed = dict(rows).get(here, set())
                if there and there != here and there not in allowed:
                    errors.append(where + ": %s/README.md does not let %s/ "
                                  "include %s/" % (top, here, there))
            # A source file's include is a call into the header's unit
            # (headers including headers are type dependencies).
            target = os.path.splitext(inc)[0]
            if path.endswith((".cpp", ".cu")) and target in units and \
                    target != unit:
                graph.setdefault(unit, set()).add(target)
    for comp in cycles(graph):
        errors.append("these call each other (a source of each includes "
                      "the next one's header): " + ", ".join(comp))
    for e in errors:
        print("check-layers: " + e)
    if errors:
        return 1
    print("check-layers: %d files follow the layers" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
