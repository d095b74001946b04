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
import subprocess

from .. import registry
from ..errors import UserError
from . import diff as rundiff
from . import view as runs

VERDICTS = ("approve", "request-changes")
SEVERITIES = ("high", "medium", "low")
_OPEN, _FENCE = "```json", "```"
#: The most of a run's patch a review brief carries.
PATCH_LIMIT = 512 * 1024
#: The most of a reviewer's answer read for its verdict.
ANSWER_LIMIT = 4 * 1024 * 1024
BRIEF_NAME = "review-brief.md"
FINAL_COPY = "final.txt"

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


def _closings(text: str) -> list[tuple[int, int]]:
    """Every fence that can end a block: (the first newline of the whitespace right before
    it, the fence), in order. A fence with no newline in the whitespace before it ends none."""
    found = []
    at = text.find(_FENCE)
    while at >= 0:
        start = at
        while start > 0 and text[start - 1].isspace():
            start -= 1
        newline = text.find("\n", start, at)
        if newline >= 0:
            found.append((newline, at))
        at = text.find(_FENCE, at + 1)
    return found


def fenced_blocks(text: str) -> list[str]:
    """The bodies of the ```json blocks of `text`: from the opening fence, whitespace and a
    newline, to the first newline that only whitespace separates from a closing fence, the
    next block starting after that fence (what `re.findall(r"```json\\s*\\n(.*?)\\n\\s*```",
    text, re.S)` finds, but for bodies of only whitespace, which hold no verdict). One pass
    over the text: each fence is looked at once."""
    closings = _closings(text)
    blocks: list[str] = []
    n, at = 0, 0
    while (opening := text.find(_OPEN, at)) >= 0:
        space = end = opening + len(_OPEN)
        while end < len(text) and text[end].isspace():
            end += 1
        last = text.rfind("\n", space, end)
        if last < 0:
            at = opening + 1
            continue
        while n < len(closings) and closings[n][1] <= end:
            n += 1
        if n == len(closings):  # no block closes after here: none opens either
            break
        newline, fence = closings[n]
        blocks.append(text[last + 1 : newline])
        at = fence + len(_FENCE)
    return blocks


def parse_verdict(text: str) -> dict:
    """{verdict, findings, raw} from a reviewer's answer; verdict None when no block parses."""
    for block in reversed(fenced_blocks(text or "")):
        try:
            doc = json.loads(block)
        except (ValueError, RecursionError):
            continue
        if not isinstance(doc, dict) or doc.get("verdict") not in VERDICTS:
            continue
        findings = []
        listed = doc.get("findings")
        for item in listed if isinstance(listed, list) else []:
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
    author = run.record.text("implementer")
    if key == author and not allow_self:
        raise UserError(
            f"{run.id} was written by {author}; a run is not reviewed by its own "
            "implementer (the cross-review rule): name another, or pass --allow-self"
        )
    return key, lane


def _brief(run: runs.Run) -> str:
    from ..runstore.record import BRIEF_COPY

    brief = run.record.read_kept(BRIEF_COPY, PATCH_LIMIT)
    if brief is None:
        brief = "(the run's brief could not be read)"
    patch = rundiff.diff(run.id, "patch").decode("utf-8", errors="replace")
    if len(patch) > PATCH_LIMIT:
        patch = patch[:PATCH_LIMIT] + "\n[… the patch goes on; review what is here]"
    return ASK.format(brief=brief.strip(), patch=patch.strip() or "(no change)")


def installed_relay(key: str) -> list[str]:
    """How the installed package runs implementer `key`'s relay."""
    from ..relay.main import relay_command

    return [*relay_command(), key]


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
    change included). The verdict is read from the reviewer's answer as its
    relay recorded it in the store, and recorded there with the review run.
    """
    from ..runstore import liveness
    from ..runstore.outdirs import by_out_dir

    run = runs.show(ref)
    status = liveness.status(run.record)
    if status in liveness.IN_FLIGHT:
        raise UserError(f"{ref}: the run is still {status}; review it once it has ended")
    key, lane = _reviewer(run, lane, implementer, allow_self)
    relay = relay_for(key)
    tree = run.worktree or {}
    cd = tree.get("path") if isinstance(tree.get("path"), str) else None
    if cd is None or not os.path.isdir(cd):
        cd = run.record.text("workdir")
    if not isinstance(cd, str) or not os.path.isdir(cd):
        raise UserError(f"{ref}: the tree that holds the run's change is gone")
    brief = _brief(run)
    made = not os.path.isdir(out_dir)
    os.makedirs(out_dir, mode=0o700, exist_ok=True)
    brief_file = os.path.join(out_dir, BRIEF_NAME)
    from ..store import atomic_write

    atomic_write(brief_file, brief.encode("utf-8"), durable=False, new_mode=0o600)
    argv = [*relay, "--read-only", "--cd", cd, "--brief", brief_file, "--out-dir", out_dir]
    if lane:
        argv += ["--lane", lane]
    if timeout:
        argv += ["--timeout", timeout]
    if host:
        argv += ["--host", host, "--include-uncommitted"]
    from ..relay.artifacts import LAUNCHER_FILES_ENV, LAUNCHER_MADE_DIR_ENV

    env = {**os.environ, LAUNCHER_FILES_ENV: BRIEF_NAME}
    if made:
        env[LAUNCHER_MADE_DIR_ENV] = "1"
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          env=env, check=False)  # fmt: skip
    record = by_out_dir(out_dir)
    result = runs.Run(record, out_dir).result if record is not None else None
    if record is None or result is None:
        if made and record is None:
            _drop_empty(out_dir, brief_file)
        raise UserError(f"the review relay ({key}) ended without a result (exit {done.returncode})")
    answer = record.read_kept(FINAL_COPY, ANSWER_LIMIT) or ""
    verdict = parse_verdict(answer)
    try:
        record.update(reviewOf=run.id, review={"verdict": verdict["verdict"],
                                               "findings": len(verdict["findings"])})  # fmt: skip
    except OSError as problem:
        raise UserError(f"cannot record the review in the run store: {problem}") from None
    result["review"] = verdict
    result["reviewOf"] = run.id
    from ..jsjson import document_bytes

    atomic_write(os.path.join(out_dir, runs.RESULT_FILE), document_bytes(result), durable=False)
    return done.returncode, result


def _drop_empty(out_dir: str, brief_file: str) -> None:
    """A review that never started leaves no folder of ours behind."""
    try:
        os.unlink(brief_file)
        os.rmdir(out_dir)
    except OSError:
        pass


def latest_reviews() -> dict[str, str | None]:
    """{run id: the verdict of its latest review}, from the store's records only."""
    from ..runstore.record import all_records

    found: dict[str, tuple[str, str | None]] = {}
    for record in all_records():
        of, review = record.text("reviewOf"), record.section("review")
        if of is None or review is None:
            continue
        when = record.text("startedAt") or ""
        if of not in found or when > found[of][0]:
            verdict = review.get("verdict")
            found[of] = (when, verdict if verdict in VERDICTS else None)
    return {of: verdict for of, (_when, verdict) in found.items()}
