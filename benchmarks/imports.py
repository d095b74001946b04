#!/usr/bin/env python3
"""What a plain dispatch imports before it starts its first child (`python -X importtime`).

Runs `skills/codex-delegate/scripts/relay.py` (a bare venv's interpreter, bytecode compiled as
after `pip install`) on a ten-file repository with a fake `codex` that exits at once, under
`-X importtime` and an audit hook that writes a marker to stderr when the relay starts its
first child process (the hook imports nothing). The importtime lines before the marker are
the imports a dispatch pays for before any work outside it begins. Also runs
`python -X importtime -c pass` (the bare interpreter's own imports).

Prints, from the run with the median total (of `--runs`, default 7; `--quick` 2):
the first child's command line; the import time before it, over the bare interpreter's
(goal: at most 15 ms) — as the difference of the two totals and as the sum over the modules
the bare interpreter does not import; the whole run's import time; the 10 modules with the
most self time before the first child, each with the chain of imports that brought it in;
and whether each of a list of modules (subprocess, json, re, threading, …) is imported before
the first child, later, or not at all. Import times are the interpreter's own measurements
(microseconds, summed).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

from _common import PYTHON, ROOT, audited, options, read_child_log, start
from relay_overhead import setup

RELAY = os.path.join(ROOT, "skills", "codex-delegate", "scripts", "relay.py")
MARK = "delegate-bench: first child"
GOAL_MS = 15.0
WATCH = (
    "subprocess", "json", "re", "threading", "selectors", "signal", "shutil", "tempfile",
    "enum", "ctypes", "bz2", "lzma", "zlib", "hashlib", "random", "datetime", "uuid", "socket",
    "concurrent.futures", "dataclasses", "typing", "inspect", "logging", "argparse", "locale",
    "fnmatch", "glob", "email", "urllib", "zipfile", "contextlib", "functools", "collections",
)  # fmt: skip


class Imports:
    """The importtime lines of one run: (name, depth, self µs, cumulative µs), and their parents."""

    def __init__(self, lines: list[str]) -> None:
        self.rows: list[tuple[str, int, int, int]] = []
        for line in lines:
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            own, cumulative, name = line[len("import time:") :].split("|", 2)
            stripped = name.lstrip(" ")
            depth = (len(name) - len(stripped) - 1) // 2
            self.rows.append((stripped.strip(), depth, int(own), int(cumulative)))
        # importtime prints a module after everything it imported: a module's importer is
        # the next row one level up.
        self.parent: dict[int, int | None] = {}
        above: dict[int, int] = {}
        for index in range(len(self.rows) - 1, -1, -1):
            depth = self.rows[index][1]
            self.parent[index] = above.get(depth - 1) if depth > 0 else None
            above[depth] = index

    @property
    def names(self) -> set[str]:
        return {row[0] for row in self.rows}

    def total_us(self) -> int:
        return sum(row[2] for row in self.rows)

    def chain(self, index: int) -> str:
        names = []
        at: int | None = index
        while at is not None:
            names.append(self.rows[at][0])
            at = self.parent[at]
        return " <- ".join(names)


def one_run(env: dict, args: list[str], log: str) -> tuple[Imports, Imports, list]:
    """(imports before the first child, imports after it, the children) of one dispatch."""
    if os.path.exists(log):
        os.unlink(log)
    argv = audited(PYTHON, RELAY, args, log, mark=True)
    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"the dispatch failed ({done.returncode}):\n{done.stderr}")
    lines = done.stderr.splitlines()
    cut = lines.index(MARK) if MARK in lines else len(lines)
    return Imports(lines[:cut]), Imports(lines[cut + 1 :]), read_child_log(log)


def bare(env: dict) -> Imports:
    done = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", "pass"], env=env, capture_output=True, text=True
    )
    return Imports(done.stderr.splitlines())


def main() -> int:
    parser, runs = options(__doc__, full=7, quick=2)
    parser.parse_args()
    start()
    with tempfile.TemporaryDirectory(prefix="delegate-bench-imports-") as scratch:
        env, args, _ = setup(scratch)
        args += ["--out-dir", os.path.join(scratch, "out")]
        log = os.path.join(scratch, "children.log")
        one_run(env, args, log)  # warms the page cache and checks the run works
        floors = sorted(bare(env).total_us() for _ in range(runs))
        runs_seen = [one_run(env, args, log) for _ in range(runs)]
        empty = bare(env)
    floor = statistics.median(floors)
    runs_seen.sort(key=lambda seen: seen[0].total_us())
    before, after, children = runs_seen[len(runs_seen) // 2]
    new = [i for i, row in enumerate(before.rows) if row[0] not in empty.names]
    new_us = sum(before.rows[i][2] for i in new)
    over_ms = (before.total_us() - floor) / 1000
    print(f"runs: {runs}; figures from the run with the median total before the first child")
    first = " ".join(children[0][2]) if children else "(no child seen)"
    print(f"first child: {first.replace(scratch, '$T')}")
    print(f"bare interpreter (-c pass): {floor / 1000:6.1f} ms of imports, "
          f"{len(empty.rows)} modules")  # fmt: skip
    print(f"before the first child:     {before.total_us() / 1000:6.1f} ms, "
          f"{len(before.rows)} modules")  # fmt: skip
    verdict = "met" if over_ms <= GOAL_MS else "MISSED"
    print(f"  over the bare interpreter: {over_ms:6.1f} ms (goal <= {GOAL_MS:.0f} ms {verdict}); "
          f"the {len(new)} modules it does not import: {new_us / 1000:.1f} ms")  # fmt: skip
    whole = before.total_us() + after.total_us()
    count = len(before.rows) + len(after.rows)
    print(f"the whole dispatch:         {whole / 1000:6.1f} ms, "
          f"{count} modules ({len(after.rows)} after the first child)")  # fmt: skip
    print()
    print(f"top 10 by self time before the first child (median over the {runs} runs of self and")
    print("cumulative ms; then the chain of importers, as in the median run):")
    own_us: dict[str, list[int]] = {}
    cumulative_us: dict[str, list[int]] = {}
    for seen, _, _ in runs_seen:
        for name, _, own, cumulative in seen.rows:
            own_us.setdefault(name, []).append(own)
            cumulative_us.setdefault(name, []).append(cumulative)
    ranked = sorted(new, key=lambda i: -statistics.median(own_us[before.rows[i][0]]))
    for i in ranked[:10]:
        name = before.rows[i][0]
        own, cumulative = statistics.median(own_us[name]), statistics.median(cumulative_us[name])
        print(f"  {own / 1000:6.2f} {cumulative / 1000:6.2f}  {before.chain(i)}")
    print()
    print("imported by the dispatch (b: before the first child, a: after it, -: not at all;")
    print("bare: the bare interpreter imports it too):")
    seen_after = after.names
    for name in WATCH:
        if name in empty.names:
            mark = "bare"
        elif name in before.names:
            index = next(i for i, row in enumerate(before.rows) if row[0] == name)
            mark = f"b     {before.chain(index)}"
        elif name in seen_after:
            index = next(i for i, row in enumerate(after.rows) if row[0] == name)
            mark = f"a     {after.chain(index)}"
        else:
            mark = "-"
        print(f"  {name:<20} {mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
