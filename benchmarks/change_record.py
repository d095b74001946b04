#!/usr/bin/env python3
"""What the change record adds to a run: two snapshots of the work tree and the diff.

For a repository of 10 files and one of 20,000 (in 200 folders), each with a
few untracked files, times what a relay does for the record: the snapshot
before the implementer (copying the index, clearing flags, `git add -A`,
`git write-tree`), the snapshot after, and the `changes` field (a diff and
the patch; the run edited one file). Median of 15 runs each, in this
process, so interpreter start-up is not counted. Targets: <= 15 ms on the
small repository, <= 200 ms on the large one.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from delegate_skills.gitmeta import repo_paths
from delegate_skills.snapshots.changes import ChangeRecord


class Dir:
    def __init__(self, path: str) -> None:
        self.path = path

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def replace(self, name: str, data: bytes) -> None:
        with open(self.file(name), "wb") as handle:
            handle.write(data)


def make_repo(root: str, files: int) -> str:
    repo = os.path.join(root, f"repo{files}")
    subprocess.run(["git", "init", "-q", repo], check=True)
    for n in range(files):
        folder = os.path.join(repo, f"d{n % 200}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"f{n}.txt"), "w") as handle:
            handle.write(f"file {n}\n" * 5)
    subprocess.run(["git", "-C", repo, "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "b"],
        check=True,
    )
    for n in range(3):
        with open(os.path.join(repo, f"untracked{n}.txt"), "w") as handle:
            handle.write("scratch\n")
    return repo


def one(repo: str, scratch: str, out: str) -> float:
    paths = repo_paths(repo)
    start = time.perf_counter()
    record = ChangeRecord(paths, scratch, [])
    record.begin()
    target = os.path.join(repo, "d0", "f0.txt")
    with open(target, "a") as handle:  # the implementer's one edit (not timed... it is tiny)
        handle.write("edited\n")
    record.end()
    field, problem = record.field(Dir(out))
    took = time.perf_counter() - start
    if field is None or len(field["files"]) != 1:
        raise SystemExit(f"unexpected record: {field} {problem}")
    subprocess.run(["git", "-C", repo, "checkout", "-q", "--", "d0/f0.txt"], check=True)
    return took


def main() -> int:
    os.environ.setdefault("XDG_STATE_HOME", tempfile.mkdtemp(prefix="delegate-bench-state-"))
    with tempfile.TemporaryDirectory() as root:
        out = os.path.join(root, "out")
        os.mkdir(out)
        for files, target in ((10, 15), (20_000, 200)):
            repo = make_repo(root, files)
            samples = []
            for n in range(16):
                scratch = os.path.join(root, f"scratch-{files}-{n}")
                os.mkdir(scratch)
                samples.append(one(repo, scratch, out))
            median = statistics.median(samples[1:]) * 1000  # the first warms the object store
            print(f"{files:>6} files: change record adds {median:7.1f} ms (median of 15; "
                  f"target <= {target} ms)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
