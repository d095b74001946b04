"""`runs discard`: remove a finished worktree run's worktree and its `delegate/…` branch.

Only through `git worktree remove` and `git branch -D`, and only for a
worktree git knows for the source whose `.git` file still points at the git
dir the run was given. Refused (without `force`) when the branch holds
commits the source's HEAD lacks, and always while another run that has not
landed (a continuation) works in the same worktree. Everything is read from
the run's record in the store.
"""

from __future__ import annotations

import os

from ..errors import UserError
from ..gitmeta import git_outcome
from ..relay.worktree import admin_lock, read_gitfile
from ..runstore import lookup
from . import gitland
from .apply import RunTree, finished_tree, source_paths


def check_gitfile(tree: RunTree, common_dir: str, verb: str) -> str:
    """The worktree's git dir, once its `.git` file is proven to be the one the run was given."""
    now = read_gitfile(tree.path)
    expected = tree.gitfile
    if expected is not None and now != expected:
        raise UserError(
            f"cannot {verb} {tree.name}: the .git file of its worktree {tree.path} was "
            "replaced during the run; inspect that folder and remove it yourself"
        )
    target = None
    if now is not None and now.startswith("gitdir: "):
        target = now[len("gitdir: ") :].strip()
        target = os.path.normpath(os.path.join(tree.path, target))
    admin = os.path.realpath(os.path.join(common_dir, "worktrees"))
    if target is None or not os.path.realpath(target).startswith(admin + os.sep):
        raise UserError(
            f"cannot {verb} {tree.name}: {tree.path}/.git does not point into "
            f"{common_dir}/worktrees; inspect that folder and remove it yourself"
        )
    if tree.git_dir is not None and os.path.realpath(target) != os.path.realpath(tree.git_dir):
        raise UserError(
            f"cannot {verb} {tree.name}: its worktree now names another git dir; "
            "inspect it and remove it yourself"
        )
    return target


def unlanded_sharers(tree: RunTree) -> list[str]:
    """Ids of other runs in the same worktree whose change nobody landed or dropped."""
    return [
        other.id
        for other in lookup.sharing_worktree(tree.record)
        if lookup.landing(other) in ("pending", "undone")
    ]


def discard(ref: str, force: bool = False) -> dict:
    """Remove the run's worktree and branch. Raises UserError."""
    tree = finished_tree(ref, "discard")
    sharers = unlanded_sharers(tree)
    if sharers and not force:
        raise UserError(
            f"cannot discard {tree.name}: its worktree {tree.path} is also where run "
            f"{', '.join(sharers)} works, whose change is not landed; land that first, or "
            "pass --force to drop them all"
        )
    report = remove_tree(tree, force)
    for other in lookup.sharing_worktree(tree.record):
        if other.id in sharers:
            gitland.record_landing(other, "discarded")
    report["alsoDiscarded"] = sharers
    return report


def remove_tree(tree: RunTree, force: bool) -> dict:
    """Remove the worktree and branch of `tree`'s run, and record it as discarded."""
    paths = source_paths(tree)
    source = paths.toplevel
    with gitland.landing_lock(paths.common_dir):
        registered = _registered(source, tree.path)
        if registered:
            check_gitfile(tree, paths.common_dir, "discard")
        exists = git_outcome(
            source, "rev-parse", "--verify", "--quiet", f"refs/heads/{tree.branch}"
        )
        ahead = 0
        if exists.ok:
            counted = git_outcome(source, "rev-list", "--count", tree.branch, "^HEAD")
            ahead = int(counted.out.strip() or 0) if counted.ok else 0
        if ahead and not force:
            raise UserError(
                f"{tree.branch} has {ahead} commit(s) that {source} (HEAD) does not have; "
                f"land them first, or pass --force to drop them"
            )
        with admin_lock(paths.common_dir):
            if registered:
                removed = git_outcome(source, "worktree", "remove", "--force", "--force", tree.path)
                if not removed.ok:
                    raise UserError(f"cannot remove the worktree {tree.path}: {removed.reason()}")
            git_outcome(source, "worktree", "prune")
            if exists.ok:
                deleted = git_outcome(source, "branch", "-D", "--quiet", tree.branch)
                if not deleted.ok:
                    raise UserError(f"cannot delete branch {tree.branch}: {deleted.reason()}")
        gitland.record_landing(tree.record, "discarded")
    return {
        "id": tree.name,
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
