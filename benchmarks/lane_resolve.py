#!/usr/bin/env python3
"""Lane resolve start-up cost against a bare interpreter start.

Runs, 20 times each, `python3 skills/delegate-setup/scripts/lane.py resolve …`
on an approved two-lane project and `python3 -c pass` (the floor), and prints
both medians and their ratio. With DELEGATE_BENCH_NODE_BUNDLE pointing at a
checkout of the Node bundle, its `lane.mjs resolve` on the same project is
timed too. Target: at most half of Node's time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from _common import PYTHON, ROOT, installed_like_env, median_wall, ms, node_script

LANES = """{
  "version": "delegate-fleet.v1",
  "lanes": {
    "feature": {"implementer": "claude", "effort": "high"},
    "review": {"implementer": "codex", "readOnly": true, "model": "gpt-5.1-codex"}
  }
}
"""


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        home = os.path.join(scratch, "home")
        repo = os.path.join(scratch, "repo")
        os.makedirs(home)
        env = {**installed_like_env(), "HOME": home}
        env.pop("XDG_CONFIG_HOME", None)
        subprocess.run(["git", "init", "-q", repo], check=True)
        lanes = os.path.join(scratch, "lanes.json")
        with open(lanes, "w") as handle:
            handle.write(LANES)
        config = os.path.join(ROOT, "skills", "delegate-setup", "scripts", "config.py")
        # Writing validates with jsonschema, which the bare timing interpreter
        # does not have; the interpreter running this script writes the file.
        subprocess.run(
            [sys.executable, config, "write", "--scope", "project", "--cwd", repo, lanes],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        lane = os.path.join(ROOT, "skills", "delegate-setup", "scripts", "lane.py")
        args = ["resolve", "--cwd", repo, "--lane", "review", "--implementer", "codex"]
        floor = median_wall([PYTHON, "-c", "pass"], env=env)
        resolved = median_wall([PYTHON, lane, *args], env=env)
        node = node_script("delegate-setup", "scripts", "lane.mjs")
        node_time = median_wall([*node, *args], env=env) if node else None
    print(f"python: {PYTHON} ({sys.version.split()[0]})")
    print(f"floor   python3 -c pass          median of 20: {ms(floor)}")
    print(f"resolve lane.py resolve (project) median of 20: {ms(resolved)}")
    print(f"ratio   {resolved / floor:.2f}x the floor")
    if node_time is not None:
        print(f"node    lane.mjs resolve (project) median of 20: {ms(node_time)}")
        print(f"ratio   {resolved / node_time:.2f}x Node's time (target <= 0.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
