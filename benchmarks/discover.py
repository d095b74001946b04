#!/usr/bin/env python3
"""Discovery wall time against the slowest single CLI probed back to back.

Seventeen fake CLIs, one per implementer, each of whose probes (version,
login, models) sleeps 0.5 s before answering. Prints the median of 5 runs of
`delegate discover --usage --fresh` (and, apart, of a run the cache answers),
the floor (the slowest one CLI's probes run one
after another) and every CLI probed one after another, as the Node bundle
does. Discover runs at most two probes per CPU at once, so that a busy small
machine does not push slow CLIs past their 10 s cap: the target is at most
0.6x one-after-another (it was within 1.3x of the floor when every probe
started at once, which gave wrong answers under load).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

import _common
from _common import installed_like_env

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
from delegate_skills import registry

SLEEP = "0.5"
FAKE = """#!/bin/sh
sleep {sleep}
case "$*" in
  *version*|changelog) echo "{key} 1.0.0";;
  *) echo "logged in as someone"; echo "model-a"; echo "model-b";;
esac
"""


def probes_of(impl: registry.Implementer) -> list[list[str]]:
    calls = [list(impl.version_args)]
    if impl.auth_probe:
        calls.append(list(impl.auth_probe.args))
    model = impl.model_probe
    if model and model.args and (not impl.auth_probe or model.args != impl.auth_probe.args):
        calls.append(list(model.args))
    return calls


def main() -> int:
    _common.start(sys.executable)
    with tempfile.TemporaryDirectory() as scratch:
        bindir = os.path.join(scratch, "bin")
        os.makedirs(bindir)
        for impl in registry.IMPLEMENTERS:
            path = os.path.join(bindir, impl.binary)
            with open(path, "w") as handle:
                handle.write(FAKE.format(sleep=SLEEP, key=impl.key))
            os.chmod(path, 0o755)
        env = installed_like_env()
        env.update(PATH=bindir + os.pathsep + "/usr/bin:/bin", HOME=scratch)
        floors = {}
        for impl in registry.IMPLEMENTERS:
            start = time.perf_counter()
            for args in probes_of(impl):
                subprocess.run(
                    [os.path.join(bindir, impl.binary), *args],
                    env=env,
                    capture_output=True,
                    check=False,
                )
            floors[impl.key] = time.perf_counter() - start
        slowest = max(floors, key=floors.get)
        # `delegate discover` runs click, which the bare timing interpreter lacks:
        # the interpreter running this script (where the package is installed) runs it.
        # --fresh: every run probes every CLI (the cache would answer the later ones).
        command = [sys.executable, "-m", "delegate_skills", "discover", "--usage", "--json"]
        runs = [timed([*command, "--fresh"], env) for _ in range(5)]
        wall = statistics.median(runs)
        warm = statistics.median(timed(command, env) for _ in range(5))
    print(f"python: {sys.executable} ({sys.version.split()[0]}); every probe sleeps {SLEEP}s")
    print(f"floor   slowest CLI ({slowest}) probed back to back: {floors[slowest]:6.2f} s")
    print(f"discover --usage --fresh, 17 CLIs, median of 5:  {wall:6.2f} s")
    print(f"discover --usage from the cache, median of 5:    {warm:6.2f} s")
    ratio = wall / floors[slowest]
    serial = sum(floors.values())
    print(
        f"ratio   {ratio:.2f}x the floor; {wall / serial:.2f}x one CLI after another "
        f"(~{serial:.1f} s; target <= 0.6x)"
    )
    return 0


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return took


if __name__ == "__main__":
    sys.exit(main())
