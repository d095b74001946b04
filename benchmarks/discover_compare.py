#!/usr/bin/env python3
"""`delegate discover --json` against the Node bundle's discover.mjs, on the CLIs really installed.

Needs DELEGATE_BENCH_NODE_BUNDLE (a checkout of the Node bundle; its
skills/delegate-setup/scripts/discover.mjs is run as it is) and a PATH on
which the implementer CLIs to compare are installed. Runs each side
DELEGATE_BENCH_RUNS times (default 3), alternating, in the environment it is
given, and prints per CLI what each side reported: version, authenticated,
models.status (with the number of models), the same on every run or each
run's value ("both" when the two sides show the same), and in how many runs
they agreed on that CLI (version, path, authenticated and the whole models
field). A run matches when every
CLI both sides know agrees and both find the same of those missing; the CLIs
only this package knows are shown and not counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from _common import node_script

RUNS = int(os.environ.get("DELEGATE_BENCH_RUNS", "3"))


def run_side(argv: list[str]) -> tuple[dict, float]:
    start = time.perf_counter()
    done = subprocess.run(
        argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
    )
    took = time.perf_counter() - start
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


def main() -> int:
    node = node_script("delegate-setup", "scripts", "discover.mjs")
    if node is None:
        raise SystemExit("set DELEGATE_BENCH_NODE_BUNDLE to a checkout of the Node bundle")
    # --fresh: every timed run probes from nothing, as the Node side does.
    python = [sys.executable, "-m", "delegate_skills", "discover", "--json", "--fresh"]
    py_runs: list[dict] = []
    node_runs: list[dict] = []
    for number in range(RUNS):
        py_report, py_took = run_side(python)
        node_report, node_took = run_side(node)
        py_runs.append(py_report)
        node_runs.append(node_report)
        ratio = py_took / node_took
        print(f"run {number + 1}: python {py_took:5.1f} s, node {node_took:5.1f} s ({ratio:.2f}x)")
    _, warm = run_side(python[:-1])
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
