#!/usr/bin/env python3
"""`runs apply` of a worktree run on a 20,000-file repository.

A committed repository of 20,000 small files in 200 folders, plus one
untracked 50 MB file in the source (which apply must never hash into an
object store); a fake codex that edits 10 files and adds 2 in its worktree.
Prints the relay's wall time, then the median of 5 applies (each on a source
reset to the commit), and how much the source's `.git/objects` grew.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import _common
from _common import PYTHON, ROOT, installed_like_env

FILES = 20_000
FAKE = """#!/bin/sh
case "$1" in --version) echo "fake 1.0"; exit 0;; esac
cat >/dev/null
for n in 0 1 2 3 4 5 6 7 8 9; do echo "edited by the run" >> "d$n/f$n.txt"; done
echo new > new-a.txt; mkdir -p fresh && echo new > fresh/b.txt
exit 0
"""


def git(cwd: str, *args: str) -> None:
    subprocess.run(["git", "-C", cwd, *args], check=True, stdout=subprocess.DEVNULL)


def main() -> int:
    _common.start()
    with tempfile.TemporaryDirectory() as scratch:
        bindir = os.path.join(scratch, "bin")
        os.makedirs(bindir)
        with open(os.path.join(bindir, "codex"), "w") as handle:
            handle.write(FAKE)
        os.chmod(os.path.join(bindir, "codex"), 0o755)
        repo = os.path.join(scratch, "repo")
        git(scratch, "init", "-q", repo)
        for n in range(FILES):
            folder = os.path.join(repo, f"d{n % 200}")
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"f{n}.txt"), "w") as handle:
                handle.write(f"file {n}\n")
        git(repo, "add", "-A")
        # gc.auto=0: no `git gc` packing in the background while apply is timed.
        quiet = ["-c", "user.name=b", "-c", "user.email=b@b", "-c", "gc.auto=0"]
        git(repo, *quiet, "commit", "-qm", "big")
        with open(os.path.join(repo, "dataset.bin"), "wb") as handle:
            handle.write(os.urandom(50 << 20))
        env = installed_like_env()
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        env["XDG_STATE_HOME"] = os.path.join(scratch, "state")
        brief = os.path.join(scratch, "brief.txt")
        with open(brief, "w") as handle:
            handle.write("edit ten files\n")
        out = os.path.join(scratch, "out")
        relay = os.path.join(ROOT, "skills", "codex-delegate", "scripts", "relay.py")
        start = time.perf_counter()
        subprocess.run(
            [PYTHON, relay, "--brief", brief, "--cd", repo, "--out-dir", out, "--worktree"],
            env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        relay_s = time.perf_counter() - start

        def objects() -> int:
            total = 0
            for here, _dirs, files in os.walk(os.path.join(repo, ".git", "objects")):
                total += sum(os.path.getsize(os.path.join(here, f)) for f in files)
            return total

        before = objects()
        samples = []
        for _ in range(5):
            git(repo, "checkout", "-q", "--", ".")
            for extra in ("new-a.txt", "fresh/b.txt"):
                path = os.path.join(repo, extra)
                if os.path.exists(path):
                    os.unlink(path)
            start = time.perf_counter()
            done = subprocess.run(
                # The skill folder's runs.py: what an agent runs, on the bare interpreter.
                [PYTHON, os.path.join(ROOT, "skills", "codex-delegate", "scripts", "runs.py"),
                 "apply", out],
                env=env,
                capture_output=True, text=True,
            )  # fmt: skip
            samples.append(time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(done.stderr)
        applied = json.loads(done.stdout)["applied"]
        grew = objects() - before
    print(f"repository: {FILES} files, one untracked 50 MB file in the source")
    print(f"worktree run of the fake (snapshot, result):   {relay_s * 1000:8.1f} ms")
    print(
        f"runs apply, median of 5 ({len(applied)} files applied): "
        f"{statistics.median(samples) * 1000:8.1f} ms"
    )
    print(f"source .git/objects grew by {grew} bytes over the 5 applies")
    return 0


if __name__ == "__main__":
    sys.exit(main())
