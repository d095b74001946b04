#!/usr/bin/env python3
"""What a dispatch costs, ours against the Node bundle's relay.mjs, wall and CPU.

Every side dispatches `skills/codex-delegate/scripts/relay.py` (ours, run by a bare venv's
interpreter, bytecode compiled as after `pip install`) or the Node bundle's `relay.mjs`
(DELEGATE_BENCH_NODE_BUNDLE) to a fake `codex` (a shell script that prints a version when
asked and exits 0 at once), in a committed repository of ten files, with HOME and the XDG
dirs in a temp dir. The sides run in alternating rounds (A B C … A B C …); each prints the
median wall time and the median CPU (user + system of the relay and everything it waited
for) and ours/Node per measure, against the goals:

- plain dispatch <= 0.7x Node's plain one;
- `--read-only` enforced by bubblewrap <= 1.0x Node's `--read-only` (detection only, with
  DELEGATE_RELAY_ENFORCE=0, is shown too);
- a confined write run (`--confine`) <= 1.0x Node's plain one (Node has no confinement).

Then the processes each dispatch kind starts, one run each, outside the timing:

- git processes, through a `git` wrapper first on PATH that logs its argv and execs the real
  git (for both sides), and every git command line run more than once with the same
  arguments (same directory and GIT_INDEX_FILE). Goals: at most 5 in a plain dispatch and 8 in
  a read-only one, none repeated.
- our relay's own children by program, from an audit hook and with no wrapper on PATH (a
  wrapper is not the git a real dispatch finds; the count can differ).

Last, the interpreters' start floor (`python -S -c pass`, `python -c pass`, `node -e 0`);
the floor of a plain dispatch (a bare interpreter that starts the children our plain
dispatch started, logged above, one after the other and does nothing else) against Node's
plain dispatch; and what moving a process into a new run cgroup costs on this machine.
`--quick` runs a few rounds only; `--list` prints every command line logged.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from _common import (
    PYTHON,
    ROOT,
    audited,
    command,
    git_words,
    header,
    install_git_wrapper,
    installed_like_env,
    ms,
    node_script,
    options,
    paired,
    private_homes,
    ratio_rows,
    read_child_log,
    repeated,
    shown_command,
    single_rows,
    start,
)

FAKE = '#!/bin/sh\ncase "$1" in --version) echo "fake 1.0";; esac\nexit 0\n'
RELAY = os.path.join(ROOT, "skills", "codex-delegate", "scripts", "relay.py")
#: Goals of git processes per dispatch kind.
GIT_GOALS = {"plain": 5, "read-only": 8, "read-only, detection only": 8, "confined": 5}


def setup(scratch: str) -> tuple[dict, list[str], str]:
    """(env, the common relay args, bindir) for a ten-file repository and a fake codex."""
    bindir = os.path.join(scratch, "bin")
    os.makedirs(bindir)
    shim = os.path.join(bindir, "codex")
    with open(shim, "w") as handle:
        handle.write(FAKE)
    os.chmod(shim, 0o755)
    work = os.path.join(scratch, "work")
    subprocess.run(["git", "init", "-q", work], check=True)
    for n in range(10):
        with open(os.path.join(work, f"file{n}.txt"), "w") as handle:
            handle.write(f"line {n}\n" * 20)
    subprocess.run(["git", "-C", work, "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", work, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "b"],
        check=True,
    )
    brief = os.path.join(scratch, "brief.txt")
    with open(brief, "w") as handle:
        handle.write("benchmark brief\n")
    env = private_homes(installed_like_env(), scratch)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env, ["--brief", brief, "--cd", work], bindir


def kinds(scratch: str, env: dict, args: list[str], node: list[str] | None) -> dict:
    """{name: (argv, env)} of every dispatch kind, ours and Node's; each has its own out-dir."""

    def out(name: str) -> list[str]:
        return ["--out-dir", os.path.join(scratch, "out-" + name.replace(" ", "-"))]

    detect = {**env, "DELEGATE_RELAY_ENFORCE": "0"}
    sides = {
        "ours plain": ([PYTHON, RELAY, *args, *out("ours")], env),
        "ours read-only": ([PYTHON, RELAY, *args, *out("ours ro"), "--read-only"], env),
        "ours read-only, detection only": (
            [PYTHON, RELAY, *args, *out("ours detect"), "--read-only"],
            detect,
        ),
        "ours confined": ([PYTHON, RELAY, *args, *out("ours confined"), "--confine"], env),
    }
    if node:
        sides["node plain"] = ([*node, *args, *out("node")], env)
        sides["node read-only"] = ([*node, *args, *out("node ro"), "--read-only"], env)
    return sides


def check_results(scratch: str) -> list[str]:
    """What our read-only and confined results say about their enforcement (one line each)."""
    lines = []
    for name, keys in (
        ("ours-ro", ("readOnlyEnforced", "readOnlyUnenforced", "readOnlyViolation", "confined")),
        ("ours-detect", ("readOnlyEnforced", "readOnlyUnenforced", "readOnlyViolation")),
        ("ours-confined", ("confined", "confinedUnavailable")),
    ):
        try:
            with open(os.path.join(scratch, "out-" + name, "result.json")) as handle:
                result = json.load(handle)
        except (OSError, ValueError) as problem:
            lines.append(f"  {name}: no result ({problem})")
            continue
        said = ", ".join(f"{key}={json.dumps(result[key])}" for key in keys if key in result)
        lines.append(f"  {name}: status={result.get('status')}, {said}")
    return lines


def count_git(scratch: str, sides: dict, listing: bool) -> dict[str, int]:
    """Print (and return) the git processes each dispatch starts, through a wrapper on PATH."""
    wrapdir = os.path.join(scratch, "gitwrap")
    os.makedirs(wrapdir)
    install_git_wrapper(wrapdir)
    print()
    print("git processes per dispatch (a `git` wrapper first on PATH logs each; one run each;")
    print("$T is the temp dir; a line shown with Nx ran N times with the same arguments):")
    counts = {}
    for name, (argv, env) in sides.items():
        log = os.path.join(scratch, "git-" + name.replace(" ", "-").replace(",", "") + ".log")
        wrapped = {**env, "PATH": wrapdir + os.pathsep + env["PATH"], "DELEGATE_BENCH_GIT_LOG": log}
        subprocess.run(argv, env=wrapped, capture_output=True, check=False)
        entries = read_child_log(log)
        counts[name] = len(entries)
        goal = GIT_GOALS.get(name.split(" ", 1)[1]) if name.startswith("ours") else None
        again = repeated(entries)
        extra = f"  (goal <= {goal}: {'met' if len(entries) <= goal else 'MISSED'})" if goal else ""
        print(f"  {name:<32} {len(entries):3d} git, {len(again)} repeated{extra}")
        for times, entry in again:
            print(f"      {times}x {shown_command(entry, scratch, full=False)}")
        if listing:
            for entry in entries:
                print(f"      - {shown_command(entry, scratch)}")
    return counts


#: `python -c REPLAY <log>` starts the children of a LAUNCHER log one after the other, as the
#: relay did (same argv, cwd and GIT_INDEX_FILE, a brief on stdin, output thrown away), and
#: does nothing else: what a Python relay that starts these children costs at the least.
REPLAY = r"""
import os, subprocess, sys
with open(sys.argv[1], encoding="utf-8") as handle:
    entries = handle.read().split("\x1d\n")[:-1]
for entry in entries:
    cwd, index, *argv = entry.split("\x1e")
    env = dict(os.environ)
    if index:
        env["GIT_INDEX_FILE"] = index
    subprocess.run(argv, cwd=cwd or None, env=env, input=b"brief\n",
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


def floor_of(scratch: str, name: str, env: dict) -> tuple[list[str], int] | None:
    """(argv replaying the children our `name` dispatch started, how many), from its log."""
    log = os.path.join(scratch, "children-" + name.replace(" ", "-").replace(",", "") + ".log")
    entries = read_child_log(log)
    if not entries:
        return None
    return [PYTHON, "-c", REPLAY, log], len(entries)


def cgroup_move_ms() -> list[str]:
    """What putting a run's processes in a fresh cgroup costs here, the two ways there are.

    Each run's processes live in a cgroup of their own where cgroup v2 can be written (so a
    daemon that leaves the process group is still ended); every move into a cgroup waits for
    an RCU grace period: time spent waiting, not CPU. A child that joins before it execs
    pays that on the dispatch's path; the relay instead moves itself in while it snapshots
    the work tree (its children are then born inside) and back out while the implementer
    runs, and waits only for what of a move outlasts that work.
    """
    sys.path.insert(0, os.path.join(ROOT, "src"))
    from delegate_skills.isolation import linux

    home = linux.own_cgroup_path()
    path = linux.cgroup_create(f"bench{os.getpid()}")
    if path is None or home is None:
        return ["no cgroup can be made here: a run has none, and pays nothing for it"]
    joins, moves = [], []
    try:
        for _ in range(3):
            began = time.perf_counter()
            subprocess.run(["true"], preexec_fn=linux.cgroup_join_hook(path), check=False)
            joins.append(time.perf_counter() - began)
            time.sleep(0.2)  # apart, as in a run: a move right after another is cheaper
            for target in (path, home):
                began = time.perf_counter()
                linux.move_self(target)
                moves.append(time.perf_counter() - began)
                time.sleep(0.2)
    finally:
        linux.move_self(home)
        linux.cgroup_remove(path)
    return [
        "a new run cgroup, three times: "
        f"a child joining before it execs {', '.join(ms(w).strip() for w in joins)}; "
        f"the relay moving itself in and out {', '.join(ms(w).strip() for w in moves)}",
        "(the relay's moves run beside its snapshot and the implementer, not on its path)",
    ]


def count_children(scratch: str, sides: dict, wrapped: dict[str, int], listing: bool) -> None:
    """Print what our relay itself starts, seen by an audit hook (the git on PATH is the real one).

    A git command repeated with the same arguments is told apart: once before and once after
    the implementer ran (the two snapshots, the tripwire's two fingerprints), or not.
    """
    print()
    print("our relay's own child processes, by program (audit hook; no wrapper on PATH):")
    for name, (argv, env) in sides.items():
        if not name.startswith("ours"):
            continue
        log = os.path.join(scratch, "children-" + name.replace(" ", "-").replace(",", "") + ".log")
        subprocess.run(audited(argv[0], argv[1], argv[2:], log), env=env, capture_output=True)
        entries = read_child_log(log)
        programs: dict[str, int] = {}
        for _, _, child in entries:
            program = os.path.basename(child[0]) if child else "?"
            programs[program] = programs.get(program, 0) + 1
        launch = next(
            (n for n, (_, _, child) in enumerate(entries) if "exec" in child and "--json" in child),
            None,
        )
        summary = ", ".join(f"{program} {n}" for program, n in sorted(programs.items()))
        print(f"  {name:<32} {len(entries):3d} children: {summary}")
        gits = programs.get("git", 0)
        if gits != wrapped.get(name, gits):
            print(f"      git {gits} here, {wrapped[name]} through the wrapper: the relay treats "
                  "a git that is not the system's differently")  # fmt: skip
        for times, entry in repeated(entries):
            at = [n for n, logged in enumerate(entries) if logged == entry]
            when = (
                "before and after the implementer"
                if launch is not None and times == 2 and at[0] < launch < at[1]
                else "on the same side of the implementer's launch"
            )
            print(f"      {times}x {git_words(entry[2])}  ({when})")
        if listing:
            for entry in entries:
                print(f"      - {shown_command(entry, scratch)}")


def main() -> int:
    parser, runs = options(__doc__, full=20, quick=3)
    parser.add_argument("--list", action="store_true", help="print every logged command line")
    parsed = parser.parse_args()
    start()
    node = node_script("codex-delegate", "scripts", "relay.mjs")
    if node is None:
        print("DELEGATE_BENCH_NODE_BUNDLE is not set: our side only")
    bwrap = shutil.which("bwrap")
    print(f"bubblewrap: {bwrap or 'not found (read-only runs are detection only)'}")
    with tempfile.TemporaryDirectory(prefix="delegate-bench-relay-") as scratch:
        env, args, bindir = setup(scratch)
        sides = kinds(scratch, env, args, node)
        timed = {name: command(argv, side_env) for name, (argv, side_env) in sides.items()}
        timed["fake codex alone"] = command([os.path.join(bindir, "codex"), "exec", "-"], env)
        print(f"rounds: {runs} timed after 1 untimed, sides in turn: {', '.join(timed)}")
        t = paired(timed, runs)
        print("what our results said (last run):")
        print("\n".join(check_results(scratch)))
        print()
        print(f"dispatch, medians of {runs}")
        if node:
            print(header())
            rows = ratio_rows("plain", t["ours plain"], t["node plain"], 0.7)
            rows += ratio_rows("read-only (bwrap)", t["ours read-only"], t["node read-only"], 1.0)
            rows += ratio_rows(
                "read-only (detection)", t["ours read-only, detection only"], t["node read-only"],
                1.0,
            )  # fmt: skip
            rows += ratio_rows("confined vs node plain", t["ours confined"], t["node plain"], 1.0)
            print("\n".join(rows))
        for name in sides:
            print("\n".join(single_rows(name, t[name])))
        print("\n".join(single_rows("fake codex alone", t["fake codex alone"])))
        plain, fake = t["ours plain"], t["fake codex alone"]
        print(f"ours plain over the fake alone: wall {ms(plain.wall - fake.wall)}")
        if node:
            over = t["node plain"].wall - fake.wall
            print(f"node plain over the fake alone: wall {ms(over)}")
        wrapped = count_git(scratch, sides, parsed.list)
        count_children(scratch, sides, wrapped, parsed.list)
        floors = {
            "python -S -c pass": command([PYTHON, "-S", "-c", "pass"], env),
            "python -c pass": command([PYTHON, "-c", "pass"], env),
        }
        if node:
            floors["node -e 0"] = command([node[0], "-e", "0"], env)
        f = paired(floors, runs * 2, warmup=2)
        print()
        print(f"interpreter start floor, medians of {runs * 2} (for context)")
        for name, timing in f.items():
            print("\n".join(single_rows(name, timing)))
        replayed = floor_of(scratch, "ours plain", env)
        if replayed is not None:
            argv, count = replayed
            sides_floor = {"replay": command(argv, env)}
            if node:
                sides_floor["node plain"] = timed["node plain"]
            r = paired(sides_floor, runs)
            print()
            print(f"the floor of a plain dispatch, medians of {runs}: the bare interpreter")
            print(f"starting our plain dispatch's {count} children in turn, and nothing else")
            if node:
                print(header("floor", "node"))
                print("\n".join(ratio_rows("floor", r["replay"], r["node plain"], 0.7)))
            print("\n".join(single_rows("floor", r["replay"])))
        print("\n".join(cgroup_move_ms()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
