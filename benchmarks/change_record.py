#!/usr/bin/env python3
"""What the change record costs against one `git status --porcelain -uall`, as the tree grows.

For committed repositories of 10, 20,000 and 100,000 small files (100 per folder, written by
this script and committed with one `git add -A` and one commit, with gc.auto=0 so that no
`git gc` runs in the background; in a temp dir, once), each with three untracked files, times
in alternating rounds:

- the record as a dispatch makes it: `ChangeRecord.begin()` before the implementer and
  `ChangeRecord.end()` after it (the two snapshots), in a fresh scratch dir per round as a run
  gets; the run edits one file in between (not timed);
- one `git status --porcelain -uall` of the same repository: the floor, since the relay must
  look at the tree once before and once after.

Prints per size the median wall and CPU of both (CPU: this process's own plus that of the
git processes it waited for; git status: the child's) and record / status, against the goal
of at most 2x; and, apart, the `changes` field (the diff and changes.patch) the result is
written from; and the median wall of each git command the record runs, against one `git
status`, so what each step costs shows. Runs in this process, so the interpreter's start is
not counted. The first round is untimed (it warms the object store). `--sizes 10,20000`
picks sizes; `--quick` runs a few rounds.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

from _common import (
    ROOT,
    Timing,
    header,
    measure_here,
    ms,
    options,
    paired,
    ratio_rows,
    run_once,
    start,
)

sys.path.insert(0, os.path.join(ROOT, "src"))

from delegate_skills.gitmeta import BoundGit, repo_paths
from delegate_skills.snapshots.changes import ChangeRecord

SIZES = (10, 20_000, 100_000)
PER_FOLDER = 100
GOAL = 2.0
EDITED = os.path.join("d0", "f0.txt")


class Dir:
    """The run directory `ChangeRecord.field` writes changes.patch into."""

    def __init__(self, path: str) -> None:
        self.path = path

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def replace(self, name: str, data: bytes) -> None:
        with open(self.file(name), "wb") as handle:
            handle.write(data)


def make_repo(root: str, files: int) -> tuple[str, float]:
    """A committed repository of `files` small files and three untracked ones; (path, seconds)."""
    began = time.perf_counter()
    repo = os.path.join(root, f"repo{files}")
    subprocess.run(["git", "init", "-q", repo], check=True)
    for n in range(files):
        folder = os.path.join(repo, f"d{n // PER_FOLDER}")
        if n % PER_FOLDER == 0:
            os.mkdir(folder)
        with open(os.path.join(folder, f"f{n}.txt"), "w") as handle:
            handle.write(f"file {n}\n")
    subprocess.run(["git", "-C", repo, "add", "-A"], check=True)
    quiet = ["-c", "user.name=b", "-c", "user.email=b@b", "-c", "gc.auto=0"]  # no gc behind us
    subprocess.run(["git", "-C", repo, *quiet, "commit", "-qm", "b"], check=True)
    for n in range(3):
        with open(os.path.join(repo, f"untracked{n}.txt"), "w") as handle:
            handle.write("scratch\n")
    return repo, time.perf_counter() - began


class Steps:
    """The wall time of each git command the record runs, by its words, per round."""

    def __init__(self) -> None:
        self.rounds: list[list[tuple[str, float]]] = []
        real = BoundGit.start

        def start(git, *args, **kw):
            began = time.perf_counter()
            pending = real(git, *args, **kw)
            result = pending.result

            def timed():
                done = result()
                if self.rounds:
                    self.rounds[-1].append((words(args), time.perf_counter() - began))
                return done

            pending.result = timed
            return pending

        BoundGit.start = start

    def begin_round(self) -> None:
        self.rounds.append([])

    def rows(self, status_wall: float) -> list[str]:
        """Each step's median wall in the order the record ran them, over `git status`."""
        by_step: dict[str, list[float]] = {}
        order: list[str] = []
        for round_ in self.rounds:
            seen: dict[str, int] = {}
            for name, wall in round_:
                seen[name] = seen.get(name, 0) + 1
                key = f"{name} #{seen[name]}" if seen[name] > 1 else name
                by_step.setdefault(key, []).append(wall)
                if key not in order:
                    order.append(key)
        rows = []
        for key in order:
            wall = statistics.median(by_step[key])
            shown = f"{wall / status_wall:.2f}x status" if status_wall else ""
            rows.append(f"    {key:<40} {ms(wall)}  {shown}")
        return rows


def words(args: tuple[str, ...]) -> str:
    """A git command's subcommand and its first two options (no -c settings)."""
    plain = [a for a in args if not a.startswith("-c") and "=" not in a]
    return " ".join(plain[:3])


class Recorder:
    """One side of the rounds: a record per call, in a fresh scratch dir; keeps the field's cost."""

    def __init__(self, repo: str, root: str) -> None:
        self.repo, self.root = repo, root
        self.paths = repo_paths(repo)
        self.field = Timing()
        self.rounds = 0
        self.steps = Steps()
        with open(os.path.join(repo, EDITED), "rb") as handle:
            self.original = handle.read()

    def __call__(self) -> tuple[float, float]:
        self.rounds += 1
        self.steps.begin_round()
        scratch = os.path.join(self.root, f"scratch-{os.path.basename(self.repo)}-{self.rounds}")
        out = scratch + "-out"
        os.mkdir(scratch)
        os.mkdir(out)
        record = ChangeRecord(self.paths, scratch, [])
        first = measure_here(record.begin)
        with open(os.path.join(self.repo, EDITED), "ab") as handle:  # the implementer's edit
            handle.write(b"edited\n")
        second = measure_here(record.end)
        found: list = []
        wall, cpu = measure_here(lambda: found.append(record.field(Dir(out))))
        self.field.walls.append(wall)
        self.field.cpus.append(cpu)
        field, problem = found[0]
        if field is None or [entry["path"] for entry in field["files"]] != ["d0/f0.txt"]:
            raise SystemExit(f"unexpected record: {field} {problem}")
        with open(os.path.join(self.repo, EDITED), "wb") as handle:
            handle.write(self.original)
        return first[0] + second[0], first[1] + second[1]


def main() -> int:
    parser, runs = options(__doc__, full=15, quick=3)
    parser.add_argument(
        "--sizes",
        default=",".join(str(size) for size in SIZES),
        help="comma-separated numbers of files (default: %(default)s)",
    )
    sizes = [int(size) for size in parser.parse_args().sizes.split(",")]
    start(sys.executable)
    with tempfile.TemporaryDirectory(
        prefix="delegate-bench-record-", ignore_cleanup_errors=True
    ) as root:
        os.environ["XDG_STATE_HOME"] = os.path.join(root, "state")
        print(f"rounds: {runs} timed after 1 untimed; record = begin() + end(), in this process")
        print(header("record", "status"))
        for files in sizes:
            repo, took = make_repo(root, files)
            record = Recorder(repo, root)
            status = ["git", "-C", repo, "status", "--porcelain", "-uall"]
            began = time.perf_counter()
            t = paired(
                {"record": record, "status": lambda argv=status: run_once(argv)},
                runs,
            )
            rounds = time.perf_counter() - began
            print(f"{files:,} files (made and committed in {took:.1f} s, rounds {rounds:.1f} s):")
            print("\n".join(ratio_rows(f"  {files:>7,}", t["record"], t["status"], GOAL)))
            field = record.field
            print(f"  {'changes field (apart)':<32} wall {ms(field.wall)}   CPU {ms(field.cpu)}")
            print("  each git command of the record, then of the changes field (median wall):")
            record.steps.rounds = record.steps.rounds[1:]
            print("\n".join(record.steps.rows(t["status"].wall)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
