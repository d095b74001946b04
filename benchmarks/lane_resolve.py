#!/usr/bin/env python3
"""Lane resolve, ours against the Node bundle's lane.mjs, from two interpreters.

On an approved two-lane project config (written once by `config.py write`), times
`skills/delegate-setup/scripts/lane.py resolve --cwd <repo> --lane review --implementer codex`
and the Node bundle's `lane.mjs` with the same arguments (DELEGATE_BENCH_NODE_BUNDLE), in
alternating rounds with each interpreter's bare start (`python -S -c pass`, `python -c pass`,
`node -e 0`) and the floor of any Python resolve (that interpreter importing json, hashlib and
subprocess and running the one `git rev-parse`, nothing else), from:

- a bare venv's interpreter (nothing installed in it; _common.PYTHON);
- pyenv's CPython 3.12 by its path (`~/.pyenv/versions/3.12*/bin/python3`, else what
  `pyenv which python3` names), whose site-packages may hold `.pth` files that every start
  of it runs; skipped, with a line saying so, when there is none.

Prints per interpreter the median wall and CPU (user + system) of each, ours/Node (goal: at
most 0.6x), and what resolve costs over that interpreter's own `-c pass` start (the part that
is ours) beside Node's over `node -e 0`. Both sides' answers are checked to be the same JSON.
HOME is a temp dir. `--quick` runs a few rounds.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

from _common import (
    PYTHON,
    ROOT,
    command,
    header,
    installed_like_env,
    ms,
    node_script,
    options,
    paired,
    private_homes,
    ratio_rows,
    single_rows,
    start,
)

LANES = """{
  "version": "delegate-fleet.v1",
  "lanes": {
    "feature": {"implementer": "claude", "effort": "high"},
    "review": {"implementer": "codex", "readOnly": true, "model": "gpt-5.1-codex"}
  }
}
"""
SCRIPTS = os.path.join(ROOT, "skills", "delegate-setup", "scripts")
#: `python -c FLOOR <repo>`: what any Python lane resolve does at the least, and nothing else:
#: the standard modules it needs (json to read the lanes, hashlib for the approval's sha256,
#: subprocess for git) and the one `git rev-parse` that finds the project's config and its
#: approval. The cyclic collector is off, as in our scripts.
FLOOR = (
    "import gc\n"
    "gc.disable()\n"
    "import json, hashlib, subprocess, sys\n"
    "subprocess.run(['git', '-C', sys.argv[1], 'rev-parse', '--show-toplevel',"
    " '--absolute-git-dir'], stdout=subprocess.PIPE)\n"
)
GOAL = 0.6


def pyenv_python() -> str | None:
    """pyenv's CPython 3.12 by its own path (never the shim), or None."""
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3")))
    if found:
        return found[-1]
    pyenv = shutil.which("pyenv")
    if pyenv is None:
        return None
    done = subprocess.run([pyenv, "which", "python3"], capture_output=True, text=True)
    return done.stdout.strip() or None if done.returncode == 0 else None


def answer(argv: list[str], env: dict) -> dict:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {argv}\n{done.stderr}")
    return json.loads(done.stdout)


def measure(label: str, python: str, node: list[str] | None, args: list[str], env: dict, runs):
    subprocess.run([python, "-m", "compileall", "-q", SCRIPTS], env=env, check=True)
    ours = [python, os.path.join(SCRIPTS, "lane.py"), *args]
    repo = args[args.index("--cwd") + 1]
    sides = {
        "ours": command(ours, env),
        "python -S -c pass": command([python, "-S", "-c", "pass"], env),
        "python -c pass": command([python, "-c", "pass"], env),
        "floor": command([python, "-c", FLOOR, repo], env),
    }
    if node:
        if answer(ours, env) != answer([*node, *args], env):
            print(f"  the answers differ:\n  ours {answer(ours, env)}\n  node {answer(node, env)}")
        sides["node"] = command([*node, *args], env)
        sides["node -e 0"] = command([node[0], "-e", "0"], env)
    t = paired(sides, runs, warmup=2)
    print()
    print(f"{label}: {python}, medians of {runs}")
    if node:
        print(header())
        print("\n".join(ratio_rows("lane resolve", t["ours"], t["node"], GOAL)))
    for name, timing in t.items():
        print("\n".join(single_rows(name, timing)))
    floor = t["python -c pass"]
    ours_part = f"wall {ms(t['ours'].wall - floor.wall)}   CPU {ms(t['ours'].cpu - floor.cpu)}"
    print(f"{'ours over python -c pass':<34} {ours_part}")
    if node:
        print("the floor (the interpreter, the modules any resolve needs, one git):")
        print("\n".join(ratio_rows("floor", t["floor"], t["node"], GOAL)))
    if node:
        nf, n = t["node -e 0"], t["node"]
        print(f"{'node over node -e 0':<34} wall {ms(n.wall - nf.wall)}   CPU {ms(n.cpu - nf.cpu)}")


def main() -> int:
    parser, runs = options(__doc__, full=20, quick=3)
    parser.parse_args()
    start()
    node = node_script("delegate-setup", "scripts", "lane.mjs")
    if node is None:
        print("DELEGATE_BENCH_NODE_BUNDLE is not set: our side only")
    with tempfile.TemporaryDirectory(prefix="delegate-bench-lane-") as scratch:
        env = private_homes(installed_like_env(), scratch)
        repo = os.path.join(scratch, "repo")
        subprocess.run(["git", "init", "-q", repo], check=True)
        lanes = os.path.join(scratch, "lanes.json")
        with open(lanes, "w") as handle:
            handle.write(LANES)
        # Writing validates with jsonschema, which the bare timing interpreter
        # does not have; the interpreter running this script writes the file.
        subprocess.run(
            [sys.executable, os.path.join(SCRIPTS, "config.py"), "write", "--scope", "project",
             "--cwd", repo, lanes],
            env=env, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        args = ["resolve", "--cwd", repo, "--lane", "review", "--implementer", "codex"]
        measure("bare venv python", PYTHON, node, args, env, runs)
        other = pyenv_python()
        if other is None:
            print("\npyenv python 3.12: not found here, skipped")
        else:
            measure("pyenv python", other, node, args, env, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
