"""`delegate review RUN`: another implementer reviews what a run changed, read-only.

The review is a read-only relay run of the reviewer, in the tree that holds
the change (the run's worktree while it is there, else where it ran), with
a brief made here: the run's own brief, its patch from the change record,
and the request for a verdict in one fenced JSON block. Its result.json
gains `review`: {verdict: approve | request-changes | null, findings:
[{file, line, severity, text}], raw}, and `reviewOf` (the run's id). An
answer without a block that parses gives `verdict: null` and keeps the text.
An implementer does not review its own run unless `allow_self`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from .. import registry
from ..errors import UserError
from . import rundiff
from . import view as runs

VERDICTS = ("approve", "request-changes")
SEVERITIES = ("high", "medium", "low")
_BLOCK = re.compile(r"```json\s*\n(.*?)\n\s*```", re.S)
#: The most of a run's patch a review brief carries.
PATCH_LIMIT = 512 * 1024

ASK = """You are reviewing a change another coding agent made. Do not edit any file.

The task it was given:
-----
{brief}
-----

The change it made (a git patch):
-----
{patch}
-----

Review the change against the task: correctness, missed cases, tests, risk.
End your answer with exactly one fenced block, nothing after it:

```json
{{"verdict": "approve" or "request-changes",
 "findings": [{{"file": "path", "line": 12, "severity": "high" or "medium" or "low",
               "text": "what is wrong and what to do"}}]}}
```
"""


def parse_verdict(text: str) -> dict:
    """{verdict, findings, raw} from a reviewer's answer; verdict None when no block parses."""
    for block in reversed(_BLOCK.findall(text or "")):
        try:
            doc = json.loads(block)
        except ValueError:
            continue
        if not isinstance(doc, dict) or doc.get("verdict") not in VERDICTS:
            continue
        findings = []
        for item in doc.get("findings") or []:
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                continue
            line = item.get("line")
            findings.append({
                "file": item["file"] if isinstance(item.get("file"), str) else None,
                "line": line if isinstance(line, int) and not isinstance(line, bool) else None,
                "severity": item["severity"] if item.get("severity") in SEVERITIES else None,
                "text": item["text"],
            })  # fmt: skip
        return {"verdict": doc["verdict"], "findings": findings, "raw": text}
    return {"verdict": None, "findings": [], "raw": text}


def _reviewer(run: runs.Run, lane: str | None, implementer: str | None, allow_self: bool):
    """(implementer key, lane) of the reviewer. Raises UserError."""
    if (lane is None) == (implementer is None):
        raise UserError("name the reviewer: --lane L or --implementer K, one of them")
    where = run.repository or os.getcwd()
    if lane is not None:
        from ..fleet import Effective

        entry = Effective(where).lanes().get(lane)
        if entry is None:
            raise UserError(f"--lane {lane}: fleet lane not found (see `delegate lane list`)")
        key = entry["implementer"]
    else:
        if registry.get(implementer) is None:
            raise UserError(f"--implementer {implementer}: unknown implementer")
        key = implementer
    author = run.marker.get("implementer") or (run.result or {}).get("tool")
    if key == author and not allow_self:
        raise UserError(
            f"{run.id or run.out_dir} was written by {author}; a run is not reviewed by its own "
            "implementer (the cross-review rule): name another, or pass --allow-self"
        )
    return key, lane


def _brief(run: runs.Run) -> str:
    path = (run.result or {}).get("briefPath") or os.path.join(run.out_dir, "brief.txt")
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            brief = handle.read(PATCH_LIMIT)
    except OSError:
        brief = "(the run's brief could not be read)"
    patch = rundiff.diff(run.out_dir, "patch").decode("utf-8", errors="replace")
    if len(patch) > PATCH_LIMIT:
        patch = patch[:PATCH_LIMIT] + "\n[… the patch goes on; review what is here]"
    return ASK.format(brief=brief.strip(), patch=patch.strip() or "(no change)")


def installed_relay(key: str) -> list[str]:
    """How the installed package runs implementer `key`'s relay."""
    return [sys.executable, "-m", "delegate_skills.relay", key]


def review(
    ref: str,
    out_dir: str,
    lane: str | None = None,
    implementer: str | None = None,
    allow_self: bool = False,
    timeout: str | None = None,
    relay_for=installed_relay,
    host: str | None = None,
) -> tuple[int, dict]:
    """Run the review; (the relay's exit code, its result with `review`). Raises UserError.

    `relay_for(key)` is the command line that runs implementer `key`'s relay
    (a skill folder runs the reviewer's folder beside it). With `host` the
    reviewer runs on that machine, on the run's tree as it is (uncommitted
    change included).
    """
    run = runs.show(ref)
    if run.status in ("running", "orphaned"):
        raise UserError(f"{ref}: the run is still {run.status}; review it once it has ended")
    key, lane = _reviewer(run, lane, implementer, allow_self)
    relay = relay_for(key)
    tree = run.worktree or {}
    cd = tree.get("path") if isinstance(tree.get("path"), str) else None
    if cd is None or not os.path.isdir(cd):
        cd = (run.result or {}).get("workdir") or run.marker.get("workdir")
    if not isinstance(cd, str) or not os.path.isdir(cd):
        raise UserError(f"{ref}: the tree that holds the run's change is gone")
    os.makedirs(out_dir, mode=0o700, exist_ok=True)
    brief_file = os.path.join(out_dir, "review-brief.md")
    with open(brief_file, "w", encoding="utf-8") as handle:
        handle.write(_brief(run))
    argv = [*relay, "--read-only", "--cd", cd, "--brief", brief_file, "--out-dir", out_dir]
    if lane:
        argv += ["--lane", lane]
    if timeout:
        argv += ["--timeout", timeout]
    if host:
        argv += ["--host", host, "--include-uncommitted"]
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=False)
    result = runs.Run(out_dir).result
    if result is None:
        raise UserError(f"the review relay ({key}) ended without a result (exit {done.returncode})")
    result["review"] = parse_verdict(result.get("finalMessage") or "")
    result["reviewOf"] = run.id or run.out_dir
    from ..jsjson import document_bytes
    from ..store import atomic_write

    atomic_write(os.path.join(out_dir, runs.RESULT_FILE), document_bytes(result), durable=False)
    return done.returncode, result
