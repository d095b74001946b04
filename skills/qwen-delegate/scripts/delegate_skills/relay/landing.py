"""`runs apply` and `runs discard`: what becomes of a finished worktree run.

`apply` brings the run's change (everything in its worktree that differs
from the commit it started from) into the source work tree without a commit.
It is a three-way apply computed in a private index first: when any file
would conflict with what the source has now, nothing is written and the
files are named. The source's own index is never changed, so the applied
change shows as unstaged edits for the orchestrator to review and commit.

`discard` removes the run's worktree and its `delegate/…` branch, refusing
(without `force`) when that branch holds commits the source's HEAD lacks.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from ..errors import UserError
from ..gitmeta import git_outcome, repo_paths
from . import runs
from .worktree import BRANCH_PREFIX, WorktreeError, snapshot_tree

FIELDS = ("path", "branch", "base", "source")


class RunTree:
    """The worktree a finished run recorded in its result.json."""

    def __init__(self, out_dir: str, record: dict) -> None:
        self.out_dir = out_dir
        self.path: str = record["path"]
        self.branch: str = record["branch"]
        self.base: str = record["base"]
        self.source: str = record["source"]


def finished_tree(out_dir: str, verb: str) -> RunTree:
    """The worktree of the finished run in `out_dir`. Raises UserError."""
    run = runs.show(out_dir)
    status = run.status
    if status in ("running", "orphaned"):
        raise UserError(
            f"{out_dir}: the run is still {status}; wait for it (runs wait {out_dir}) "
            f"before you {verb} it"
        )
    record = (run.result or {}).get("worktree")
    if not isinstance(record, dict) or not all(isinstance(record.get(f), str) for f in FIELDS):
        where = (run.result or {}).get("workdir") or run.marker.get("workdir") or "its --cd"
        raise UserError(
            f"{out_dir}: not a --worktree run; its changes are already in {where}, "
            "nothing to apply or discard"
        )
    if not record["branch"].startswith(BRANCH_PREFIX):
        raise UserError(f"{out_dir}: result.json names branch {record['branch']}, not a run's")
    return RunTree(os.path.abspath(out_dir), record)


def _source_root(tree: RunTree) -> str:
    top = repo_paths(tree.source).toplevel if os.path.isdir(tree.source) else None
    if top is None:
        raise UserError(f"{tree.source}: the run's source work tree is gone or no longer in git")
    return top


# ---------------------------------------------------------------- apply


def apply(out_dir: str) -> dict:
    """Bring the run's change into its source work tree, uncommitted. Raises UserError."""
    tree = finished_tree(out_dir, "apply")
    source = _source_root(tree)
    if not os.path.isdir(tree.path):
        raise UserError(
            f"{tree.path}: the run's worktree is gone (discarded?); its branch {tree.branch} "
            "may still hold committed work"
        )
    with tempfile.TemporaryDirectory(prefix="delegate-apply-") as scratch:
        theirs_dir, ours_dir = os.path.join(scratch, "theirs"), os.path.join(scratch, "ours")
        os.mkdir(theirs_dir)
        os.mkdir(ours_dir)
        try:
            theirs = snapshot_tree(tree.path, theirs_dir)
        except WorktreeError as problem:
            raise UserError(str(problem)) from None
        changes = _changes(source, tree.base, theirs)
        if changes:
            _merge_into(source, tree, theirs, changes, ours_dir)
    return {
        "outDir": tree.out_dir,
        "source": source,
        "branch": tree.branch,
        "applied": [path for _, path in changes],
        "added": [path for status, path in changes if status == "A"],
        "modified": [path for status, path in changes if status not in ("A", "D")],
        "deleted": [path for status, path in changes if status == "D"],
    }


def _changes(source: str, base: str, theirs: str) -> list[tuple[str, str]]:
    """(status letter, path) for every file that differs from `base` to `theirs`."""
    listed = git_outcome(source, "diff", "--name-status", "-z", "--no-renames", base, theirs)
    if not listed.ok:
        raise UserError(f"cannot compare the run's worktree with its start: {listed.reason()}")
    fields = [os.fsdecode(field) for field in listed.out.split(b"\0") if field]
    return [(fields[i][:1], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]


def _merge_into(
    source: str, tree: RunTree, theirs: str, changes: list[tuple[str, str]], scratch: str
) -> None:
    """Merge the change into a private copy of the source's index, then write its files."""
    patch = git_outcome(
        source, "diff", "--binary", "--full-index", "--no-renames", tree.base, theirs,
        timeout=600,
    )  # fmt: skip
    if not patch.ok:
        raise UserError(f"cannot read the run's change: {patch.reason()}")
    try:
        snapshot_tree(source, scratch)  # the source as it is now, in a private index
    except WorktreeError as problem:
        raise UserError(str(problem)) from None
    env = {**os.environ, "GIT_INDEX_FILE": os.path.join(scratch, "index")}
    _refuse_ignored(source, changes, env)
    merged = git_outcome(
        source, "apply", "--cached", "--3way", "--binary", env=env, input=patch.out, timeout=600
    )
    if not merged.ok:
        _refuse(tree, source, env, merged.reason())
    _write_files(source, changes, env)


def _refuse_ignored(source: str, changes: list[tuple[str, str]], env: dict) -> None:
    """Never replace a file git ignores in the source: it is no run's to overwrite."""
    tracked = git_outcome(source, "ls-files", "-z", env=env, timeout=600)
    known = {os.fsdecode(p) for p in tracked.out.split(b"\0") if p} if tracked.ok else set()
    clashes = [
        path
        for _, path in changes
        if path not in known and os.path.lexists(os.path.join(source, path))
    ]
    if clashes:
        raise UserError(
            f"cannot apply: {source} has files git ignores where the run writes: "
            f"{', '.join(clashes)}; move them aside and apply again (nothing was changed)"
        )


def _refuse(tree: RunTree, source: str, env: dict, reason: str) -> None:
    unmerged = git_outcome(source, "ls-files", "-u", "-z", env=env)
    names = sorted(
        {
            os.fsdecode(entry.split(b"\t", 1)[1])
            for entry in unmerged.out.split(b"\0")
            if b"\t" in entry
        }
    )
    if names:
        raise UserError(
            f"cannot apply {tree.out_dir}: {source} has changes that conflict with the run's "
            f"in {', '.join(names)}; nothing was changed. Commit or stash them and apply "
            f"again, or merge branch {tree.branch} yourself"
        )
    raise UserError(f"cannot apply {tree.out_dir} to {source}: {reason}; nothing was changed")


def _write_files(source: str, changes: list[tuple[str, str]], env: dict) -> None:
    """Write the merged files from the private index into the source work tree."""
    present = [path for status, path in changes if status != "D"]
    if present:
        listed = b"".join(os.fsencode(path) + b"\0" for path in present)
        wrote = git_outcome(
            source, "checkout-index", "-f", "-z", "--stdin", env=env, input=listed, timeout=600
        )
        if not wrote.ok:
            raise UserError(f"cannot write the merged files into {source}: {wrote.reason()}")
    for status, path in changes:
        if status == "D":
            _remove_file(os.path.join(source, path))


def _remove_file(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    except IsADirectoryError:
        shutil.rmtree(path)
        return
    parent = os.path.dirname(path)
    try:
        os.removedirs(parent)  # the folders the deletion emptied, as git leaves none
    except OSError:
        pass


# ---------------------------------------------------------------- discard


def discard(out_dir: str, force: bool = False) -> dict:
    """Remove the run's worktree and branch. Raises UserError."""
    tree = finished_tree(out_dir, "discard")
    source = _source_root(tree)
    exists = git_outcome(source, "rev-parse", "--verify", "--quiet", f"refs/heads/{tree.branch}")
    ahead = 0
    if exists.ok:
        counted = git_outcome(source, "rev-list", "--count", tree.branch, "^HEAD")
        ahead = int(counted.out.strip() or 0) if counted.ok else 0
    if ahead and not force:
        raise UserError(
            f"{tree.branch} has {ahead} commit(s) that {source} (HEAD) does not have; "
            f"land them first, or pass --force to drop them"
        )
    registered = _registered(source, tree.path)
    if registered:
        removed = git_outcome(source, "worktree", "remove", "--force", "--force", tree.path)
        if not removed.ok:
            raise UserError(f"cannot remove the worktree {tree.path}: {removed.reason()}")
    git_outcome(source, "worktree", "prune")
    if exists.ok:
        deleted = git_outcome(source, "branch", "-D", "--quiet", tree.branch)
        if not deleted.ok:
            raise UserError(f"cannot delete branch {tree.branch}: {deleted.reason()}")
    return {
        "outDir": tree.out_dir,
        "source": source,
        "removedWorktree": tree.path if registered else None,
        "deletedBranch": tree.branch if exists.ok else None,
        "droppedCommits": ahead,
    }


def _registered(source: str, path: str) -> bool:
    """Whether `path` is a worktree git knows for `source` (nothing else is ever removed)."""
    listed = git_outcome(source, "worktree", "list", "--porcelain", "-z")
    if not listed.ok:
        return False
    wanted = os.path.realpath(path)
    for field in listed.out.split(b"\0"):
        named = field[len(b"worktree ") :] if field.startswith(b"worktree ") else None
        if named is not None and os.path.realpath(os.fsdecode(named)) == wanted:
            return True
    return False
