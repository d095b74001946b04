#!/usr/bin/env python3
"""What a relay adds to a dispatch.

Median wall time over 20 runs of `python3 skills/codex-delegate/scripts/relay.py`
dispatching to a fake `codex` that exits at once (a two-line shell script that
prints a version when asked), and of running that fake directly. The relay's
own cost is the difference: its interpreter start, the version preflight,
supervision, the change record's two snapshots, `git status` and the
result. The target is under 60 ms. A read-only dispatch is timed too, with
bubblewrap enforcing it (when bwrap is here) and with detection alone: its
tripwire fingerprints the repository before and after. The repository holds
ten committed files. With
DELEGATE_BENCH_NODE_BUNDLE pointing at a checkout of the Node bundle, its
`relay.mjs` is timed the same way, in alternating pairs with ours.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from _common import PYTHON, ROOT, installed_like_env, median_wall, ms, node_script, paired_medians

FAKE = '#!/bin/sh\ncase "$1" in --version) echo "fake 1.0";; esac\nexit 0\n'


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
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
        env = installed_like_env()
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        relay = os.path.join(ROOT, "skills", "codex-delegate", "scripts", "relay.py")
        out = os.path.join(scratch, "out")
        args = ["--brief", brief, "--cd", work, "--out-dir", out]
        floor = median_wall([shim, "exec", "-"], env=env)
        node = node_script("codex-delegate", "scripts", "relay.mjs")
        if node:
            total, node_total = paired_medians([PYTHON, relay, *args], [*node, *args], env=env)
        else:
            total, node_total = median_wall([PYTHON, relay, *args], env=env), None
        read_only = median_wall([PYTHON, relay, *args, "--read-only"], env=env)
        detect_env = {**env, "DELEGATE_RELAY_ENFORCE": "0"}
        detected = median_wall([PYTHON, relay, *args, "--read-only"], env=detect_env)
        enforced = shutil.which("bwrap", path=env["PATH"]) is not None
    print(f"python: {PYTHON} ({sys.version.split()[0]})")
    print(f"fake codex alone            median of 20: {ms(floor)}")
    print(f"relay dispatch to the fake  median of 20: {ms(total)}")
    print(f"relay adds                                {ms(total - floor)} (target < 60 ms)")
    how = "bwrap-enforced" if enforced else "no bwrap here"
    print(f"read-only dispatch ({how:<14}) median of 20: {ms(read_only)}")
    print(f"  adds over a write dispatch              {ms(read_only - total)}")
    print(f"read-only dispatch (detection only) median of 20: {ms(detected)}")
    print(f"  adds over a write dispatch              {ms(detected - total)}")
    if enforced:
        print(f"  enforcement itself costs                {ms(read_only - detected)}")
    if node_total is not None:
        print(f"relay.mjs dispatch          median of 20: {ms(node_total)}")
        print(f"relay.mjs adds                            {ms(node_total - floor)}")
        print(f"ratio   {(total - floor) / (node_total - floor):.2f}x Node's overhead")
    return 0


if __name__ == "__main__":
    sys.exit(main())
