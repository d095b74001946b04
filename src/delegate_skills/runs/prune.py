"""`runs prune`: drop the runs, worktrees and branches that hold no unlanded work.

What goes (each with its reason):

- a run that worked in place, once it ended (its change is in the tree already);
- a worktree run that was applied or discarded, or that ended with no change
  (failed or aborted before writing): its worktree and branch, if still there,
  and its run directory;
- an orphan: a worktree under our worktrees root that no run names any more,
  whose tree is clean and whose branch holds no commit the source's other
  branches lack.

What stays: running runs, and every worktree run whose worktree or branch
holds work nobody landed (listed with the commands that land or drop it),
unless `force`. `older_than_s` spares runs younger than that. In a run
directory only the files a relay writes are removed; the directory goes
when that leaves it empty.
"""

from __future__ import annotations

import os
import time

from ..errors import UserError
from ..gitmeta import git_outcome
from ..runstore import record
from . import view as runs

#: Files a relay may write in a run directory, whatever the implementer.
_RELAY_FILES = {
    runs.RUN_FILE, runs.RESULT_FILE, "final.txt", "changes.patch", "relay-stderr.txt",
    ".result-space", "stderr.txt", "brief.txt", "events.jsonl", "setup.log", "check.log",
    "review-brief.md",
}  # fmt: skip


def parse_age(text: str) -> float | None:
    """Seconds for `--older-than`: days (7d) or an h/m/s duration (12h, 90m); None if malformed."""
    from .. import registry

    if text.endswith("d") and text[:-1].isdigit() and len(text) <= 6:
        return int(text[:-1]) * 86400.0
    ms = registry.parse_timeout_ms(text)
    return None if ms is None else ms / 1000


def prune(dry_run: bool = False, older_than_s: float | None = None, force: bool = False) -> dict:
    """Plan (and unless `dry_run`, do) the clean-up. Raises UserError for a bad argument."""
    if older_than_s is not None and older_than_s < 0:
        raise UserError("--older-than must not be negative")
    now = time.time()
    removed, kept = [], []
    named_trees: set[str] = set()
    for summary in runs.list_runs(runs.default_roots()):
        run = runs.Run(summary["outDir"])
        tree = run.worktree
        if tree is not None and isinstance(tree.get("path"), str):
            named_trees.add(os.path.realpath(tree["path"]))
        entry = {"id": summary["id"], "outDir": summary["outDir"], "status": summary["status"]}
        reason, work = _verdict(run, summary)
        if reason is None:
            continue
        if _younger(summary, older_than_s, now):
            kept.append({**entry, "reason": "younger than --older-than"})
        elif work and not force:
            name = summary["id"] or summary["outDir"]
            how = f"land it (runs apply {name}) or drop it (runs discard {name}), or prune --force"
            kept.append({**entry, "reason": f"{reason}: {how}"})
        else:
            entry["reason"] = reason + (" (dropped: --force)" if work else "")
            if not dry_run:
                entry["left"] = _remove_run(run, force=work)
            removed.append(entry)
    orphans = [] if older_than_s else _orphans(named_trees, dry_run)
    return {"dryRun": dry_run, "removed": removed, "kept": kept, "orphans": orphans}


def _verdict(run: runs.Run, summary: dict) -> tuple[str | None, bool]:
    """(why the run may go, or None to leave it out of the report; whether it holds work)."""
    status = summary["status"]
    if status in ("running", "orphaned"):
        return None, False
    tree = run.worktree
    if tree is None:
        return "worked in place; its change is in the tree", False
    landing = summary["landing"]
    if landing in ("applied", "discarded"):
        return f"{landing}", False
    if _holds_work(tree):
        return "unlanded work in its worktree or branch", True
    return "no change to land", False


def _holds_work(tree: dict) -> bool:
    """Whether the run's worktree has changes, or its branch commits beyond its base."""
    path, branch, base = tree.get("path"), tree.get("branch"), tree.get("base")
    source = tree.get("source")
    if isinstance(path, str) and os.path.isdir(path):
        status = git_outcome(path, "status", "--porcelain")
        if not status.ok or status.out.strip():
            return True  # changed, or git cannot say: keep it
    if isinstance(branch, str) and isinstance(source, str) and isinstance(base, str):
        ref = f"refs/heads/{branch}"
        if git_outcome(source, "rev-parse", "--verify", "--quiet", ref).ok:
            ahead = git_outcome(source, "rev-list", "--count", ref, f"^{base}")
            return not ahead.ok or ahead.out.strip() != b"0"
    return False


def _younger(summary: dict, older_than_s: float | None, now: float) -> bool:
    if older_than_s is None:
        return False
    started = runs._parse_iso(summary["startedAt"])
    return started is None or now - started.timestamp() < older_than_s


def _remove_run(run: runs.Run, force: bool) -> list[str]:
    """Remove the run's worktree and branch, its relay files and private record.

    Returns the names of files in the run directory that no relay wrote (left there).
    """
    if run.worktree is not None:
        from .landing import discard

        try:
            discard(run.out_dir, force=force)
        except UserError:
            pass  # its worktree and branch are gone already
    return _remove_files(run)


def _remove_files(run: runs.Run) -> list[str]:
    names = set(_RELAY_FILES)
    for value in (run.result or {}).values():
        if isinstance(value, str) and os.path.dirname(value) == run.out_dir:
            names.add(os.path.basename(value))
    left = []
    try:
        entries = os.listdir(run.out_dir)
    except OSError:
        entries = []
    for name in entries:
        path = os.path.join(run.out_dir, name)
        if name in names and os.path.isfile(path) and not os.path.islink(path):
            try:
                os.unlink(path)
            except OSError:
                left.append(name)
        else:
            left.append(name)
    if not left:
        try:
            os.rmdir(run.out_dir)
        except OSError:
            pass
    if run.private is not None:
        record.remove(run.private.id)
    return sorted(left)


def _orphans(named: set[str], dry_run: bool) -> list[dict]:
    """Worktrees under our root that no run names: removed when they hold nothing."""
    from ..relay.worktree import admin_lock, worktrees_root

    root = worktrees_root()
    try:
        found = sorted(os.path.join(root, name) for name in os.listdir(root))
    except OSError:
        return []
    report = []
    for path in found:
        if os.path.realpath(path) in named or not os.path.isdir(path):
            continue
        common = git_outcome(path, "rev-parse", "--path-format=absolute", "--git-common-dir")
        branch = git_outcome(path, "symbolic-ref", "--quiet", "--short", "HEAD")
        if not common.ok:
            report.append({"path": path, "prunable": False, "removed": False,
                           "reason": "not a git worktree"})  # fmt: skip
            continue
        common_dir = os.fsdecode(common.out.strip())
        name = os.fsdecode(branch.out.strip()) if branch.ok else None
        if _orphan_holds_work(path):
            report.append({"path": path, "branch": name, "prunable": False, "removed": False,
                           "reason": "holds changes or commits no other branch has"})  # fmt: skip
            continue
        if not dry_run:
            git = ["--git-dir=" + common_dir]
            with admin_lock(common_dir):
                git_outcome(common_dir, *git, "worktree", "remove", "--force", "--force", path)
                if name and name.startswith("delegate/"):
                    git_outcome(common_dir, *git, "branch", "-D", "--quiet", name)
        report.append({"path": path, "branch": name, "prunable": True, "removed": not dry_run,
                       "reason": "no run names it and it holds nothing"})  # fmt: skip
    return report


def _orphan_holds_work(path: str) -> bool:
    """Whether an orphan worktree has changes, or a HEAD no branch but a run's contains."""
    status = git_outcome(path, "status", "--porcelain")
    if not status.ok or status.out.strip():
        return True
    others = git_outcome(
        path, "for-each-ref", "--contains", "HEAD", "--format=%(refname)", "refs/heads/"
    )
    if not others.ok:
        return True
    refs = os.fsdecode(others.out).split()
    return not [ref for ref in refs if not ref.startswith("refs/heads/delegate/")]
