#!/usr/bin/env python3
"""Discover, ours against the Node bundle's discover.mjs: wall, CPU and what each reports.

By default both sides probe the same fake CLIs: one shell script for each of the 17 binaries
the Node bundle knows (first on a PATH of only them and /usr/bin:/bin, HOME and the XDG dirs
in a temp dir), each of whose probes sleeps `--sleep` seconds (default 0.1) before answering
with a version, a signed-in line and two model names. The sides run in alternating rounds:

- ours: `skills/delegate-setup/scripts/discover.py` (a bare venv's interpreter) and
  `python -m delegate_skills discover --json --fresh` (the interpreter running this script,
  which has click);
- Node: `skills/delegate-setup/scripts/discover.mjs` of DELEGATE_BENCH_NODE_BUNDLE.

Prints the median wall and CPU (user + system of the process and every probe it waited for)
and ours/Node, against the goals (wall <= 0.35x, CPU <= 1.5x); the CPU the fakes alone spend
(every probe run one after another), and whether both sides reported the same for every CLI.
`--quick` runs one round.

`--installed` compares instead on the CLIs really installed (the PATH given): each side runs
DELEGATE_BENCH_RUNS times (default 3), alternating, and prints per CLI what each side
reported: version, authenticated, models.status (with the number of models), the same on
every run or each run's value ("both" when the two sides show the same), and in how many runs
they agreed on that CLI (version, path, authenticated and the whole models field). A run
matches when every CLI both sides know agrees and both find the same of those missing; the
CLIs only this package knows are shown and not counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

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
    run_once,
    single_rows,
    start,
)

sys.path.insert(0, os.path.join(ROOT, "src"))
from delegate_skills import registry

RUNS = int(os.environ.get("DELEGATE_BENCH_RUNS", "3"))
DISCOVER = os.path.join(ROOT, "skills", "delegate-setup", "scripts", "discover.py")
FAKE = """#!/bin/sh
sleep {sleep}
case "$*" in
  *version*|changelog) echo "{key} 1.0.0";;
  *) echo "logged in as someone"; echo "model-a"; echo "model-b";;
esac
"""


def run_side(argv: list[str], env: dict | None = None) -> tuple[dict, float]:
    began = time.perf_counter()
    done = subprocess.run(
        argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env, check=False
    )
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {argv}\n{done.stderr}")
    return json.loads(done.stdout), took


def by_key(report: dict) -> dict[str, dict]:
    return {entry["key"]: entry for entry in report["discovered"]}


def shown(entry: dict | None) -> str:
    if entry is None:
        return "(not found)"
    auth = json.dumps(entry["authenticated"])
    models = entry["models"]
    count = f"({len(models['values'])})" if models["status"] in ("reported", "aliases") else ""
    return f"{entry['version'] or 'null'} | {auth} | {models['status']}{count}"


#: Answers that differ by design: Node asks `copilot version`, which can take
#: over a minute and is cut at the 10 s cap (null); this package asks
#: `copilot --version`, which answers at once with the same version.
DELIBERATE = {"copilot": "version"}


def same(a: dict | None, b: dict | None) -> bool:
    if a is None or b is None:
        return False
    fields = [f for f in ("version", "path", "authenticated", "models")
              if not (DELIBERATE.get(a["key"]) == f and b[f] is None)]  # fmt: skip
    return all(a[f] == b[f] for f in fields)


def across(values: list[str]) -> str:
    return values[0] if len(set(values)) == 1 else " / ".join(values)


def probes_of(impl: registry.Implementer) -> list[list[str]]:
    """The probes our registry runs for `impl` (one run answers auth and models when shared)."""
    calls = [list(impl.version_args)]
    if impl.auth_probe:
        calls.append(list(impl.auth_probe.args))
    model = impl.model_probe
    if model and model.args and (not impl.auth_probe or model.args != impl.auth_probe.args):
        calls.append(list(model.args))
    return calls


def on_fakes(node: list[str], runs: int, sleep: float) -> int:
    """Time both sides on fake CLIs for the binaries the Node bundle knows; 1 when they disagree."""
    with tempfile.TemporaryDirectory(prefix="delegate-bench-discover-") as scratch:
        bindir = os.path.join(scratch, "bin")
        os.makedirs(bindir)
        env = private_homes(installed_like_env(), scratch)
        env["PATH"] = "/usr/bin:/bin"
        known, _ = run_side(node, env)  # nothing installed yet: every CLI it knows is missing
        binaries = {entry["key"]: entry["binary"] for entry in known["missing"]}
        for key, binary in binaries.items():
            path = os.path.join(bindir, binary)
            with open(path, "w") as handle:
                handle.write(FAKE.format(sleep=sleep, key=key))
            os.chmod(path, 0o755)
        env["PATH"] = bindir + os.pathsep + env["PATH"]
        ours = [PYTHON, DISCOVER]
        cli = [sys.executable, "-m", "delegate_skills", "discover", "--json", "--fresh"]
        print(f"fake CLIs: {len(binaries)} (the Node bundle's), every probe sleeps {sleep} s")
        agree = compare_once(ours, node, env, set(binaries))
        fakes = [[os.path.join(bindir, impl.binary), *args]
                 for impl in registry.IMPLEMENTERS if impl.key in binaries
                 for args in probes_of(impl)]  # fmt: skip
        sides = {"ours discover.py": command(ours, env)}
        probe = [sys.executable, "-c", "import click, delegate_skills"]
        has_cli = subprocess.run(probe, env=env, capture_output=True)
        if has_cli.returncode == 0:
            sides["ours delegate discover --fresh"] = command(cli, env)
        else:
            print(f"`delegate discover` left out: {sys.executable} lacks click or delegate_skills")
        sides["node discover.mjs"] = command(node, env)
        t = paired(sides, runs, warmup=0)
        alone = [run_once(argv, env) for argv in fakes]
    print(f"discover, medians of {runs} (rounds in turn: {', '.join(sides)})")
    print(header())
    for name in sides:
        if name.startswith("ours"):
            label = name.removeprefix("ours ")
            print("\n".join(ratio_rows(label, t[name], t["node discover.mjs"], 0.35, 1.5)))
    for name, timing in t.items():
        print("\n".join(single_rows(name, timing)))
    wall, cpu = sum(w for w, _ in alone), sum(c for _, c in alone)
    print(f"{'fakes alone (' + str(len(fakes)) + ' probes in a row)':<34} wall {ms(wall)}   "
          f"CPU {ms(cpu)}")  # fmt: skip
    return 0 if agree else 1


def compare_once(ours: list[str], node: list[str], env: dict, keys: set[str]) -> bool:
    """Run each side once; print whether they report the same for every CLI of `keys`."""
    mine, _ = run_side(ours, env)
    theirs, _ = run_side(node, env)
    a, b = by_key(mine), by_key(theirs)
    differ = sorted(key for key in keys if not same(a.get(key), b.get(key)))
    print(f"answers: ours found {len(a)}, node {len(b)}; "
          f"{len(keys) - len(differ)}/{len(keys)} CLIs reported the same")  # fmt: skip
    for key in differ:
        print(f"  {key}: ours {shown(a.get(key))}; node {shown(b.get(key))}")
    return not differ


def main() -> int:
    parser, runs = options(__doc__, full=5, quick=1)
    parser.add_argument("--sleep", type=float, default=0.1, help="seconds every fake probe sleeps")
    parser.add_argument("--installed", action="store_true", help="compare on the installed CLIs")
    parsed = parser.parse_args()
    start()
    node = node_script("delegate-setup", "scripts", "discover.mjs")
    if node is None:
        raise SystemExit("set DELEGATE_BENCH_NODE_BUNDLE to a checkout of the Node bundle")
    if not parsed.installed:
        return on_fakes(node, runs, parsed.sleep)
    return installed(node)


def installed(node: list[str]) -> int:
    """Both sides on the CLIs installed here (the PATH given), answers side by side."""
    # --fresh: every timed run probes from nothing, as the Node side does.
    python = [sys.executable, "-m", "delegate_skills", "discover", "--json", "--fresh"]
    env = installed_like_env()
    py_runs: list[dict] = []
    node_runs: list[dict] = []
    for number in range(RUNS):
        py_report, py_took = run_side(python, env)
        node_report, node_took = run_side(node, env)
        py_runs.append(py_report)
        node_runs.append(node_report)
        ratio = py_took / node_took
        print(f"run {number + 1}: python {py_took:5.1f} s, node {node_took:5.1f} s ({ratio:.2f}x)")
    _, warm = run_side(python[:-1], env)
    print(f"warm (answers from the cache): python {warm:5.2f} s")
    keys = [entry["key"] for entry in node_runs[0]["discovered"]]
    for report in py_runs + node_runs:
        keys += [key for key in by_key(report) if key not in keys]
    width = max([len(key) for key in keys] + [3])
    print(f"{'cli':<{width}}  version | authenticated | models.status(count)")
    # Only the CLIs both sides know are compared; the others are shown, not counted.
    known = {e["key"] for e in node_runs[0]["discovered"]} | {
        m["key"] for m in node_runs[0]["missing"]
    }
    matched = [
        [m["key"] for m in p["missing"] if m["key"] in known] == [m["key"] for m in n["missing"]]
        for p, n in zip(py_runs, node_runs, strict=True)
    ]
    for key in keys:
        if key not in known:
            only = across([shown(by_key(p).get(key)) for p in py_runs])
            print(f"{key:<{width}}  python {only}  (the Node bundle does not know it)")
            continue
        pairs = [
            (by_key(p).get(key), by_key(n).get(key))
            for p, n in zip(py_runs, node_runs, strict=True)
        ]
        agree = [same(p, n) for p, n in pairs]
        matched = [m and a for m, a in zip(matched, agree, strict=True)]
        py_shown = across([shown(p) for p, _ in pairs])
        node_shown = across([shown(n) for _, n in pairs])
        tally = f"match {sum(agree)}/{len(agree)}"
        if key in DELIBERATE:
            tally += f" (its {DELIBERATE[key]} differs by design)"
        if py_shown == node_shown:
            print(f"{key:<{width}}  both   {py_shown}  {tally}")
        else:
            print(f"{key:<{width}}  python {py_shown}  {tally}")
            print(f"{'':<{width}}  node   {node_shown}")
    missing = ", ".join(m["key"] for m in node_runs[0]["missing"])
    print(f"missing (node, run 1): {missing or 'none'}")
    print(f"{sum(matched)}/{len(matched)} runs matched")
    return 0 if all(matched) else 1


if __name__ == "__main__":
    sys.exit(main())
