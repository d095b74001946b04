"""`runs apply`: a finished worktree run's recorded change, into its source work tree.

What lands is exactly what the run's change record shows (`runs diff`,
result.json's `changes`): the difference from the commit the run started
from to the `after` tree its relay recorded once every process of the run
had ended. The worktree itself is not read again, so a file written there
later (by --check, by anyone) does not land, and a file the run force-added
under an ignore rule does. Through git's own machinery only:

1. a private copy of the source's index takes the source's current version
   of every path the change touches (`add -u`, tracked files only: the
   source's untracked files are never hashed), giving `ours`;
2. the patch (`base` → `after`) is applied to that copy with `apply --3way`:
   a path both sides changed in overlapping ways stops everything, and the
   paths are named;
3. `read-tree -m -u ours merged` writes the result into the source work
   tree (gitland.switch): git's checkout, which refuses to overwrite what it
   does not track.

New objects go to the private object store, never the source's. The
source's index is never written: the change shows as unstaged edits for the
orchestrator to review and commit. A change to a submodule is refused.
Which worktree, branch and source a run has, and its trees, come from its
record in the store.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from ..errors import UserError
from ..gitmeta import BoundGit, repo_paths
from ..relay.worktree import BRANCH_PREFIX
from ..runstore import liveness, lookup
from ..snapshots.snapshot import Snapshotter, clear_flags, hidden_entries
from . import gitland
from .view import Run, show

GITLINK = "160000"


class RunTree:
    """The worktree of one finished run: path, branch, base commit, source, git dir."""

    def __init__(self, run: Run, tree: dict) -> None:
        self.run = run
        self.record = run.record
        self.name = run.id
        self.out_dir = run.out_dir
        self.path: str = tree["path"]
        self.branch: str = tree["branch"]
        self.base: str = tree["base"]
        self.source: str = tree["source"]
        git_dir = tree.get("gitDir")
        self.git_dir: str | None = git_dir if isinstance(git_dir, str) else None
        gitfile = tree.get("gitfile")
        self.gitfile: str | None = gitfile if isinstance(gitfile, str) else None
        self.removed = tree.get("removed") is True


def finished_tree(ref: str, verb: str) -> RunTree:
    """The worktree of the finished run `ref` names. Raises UserError."""
    run = show(ref)
    record = run.record
    if liveness.status(record) == "orphaned":
        liveness.end_orphans(record, 2.0)
    status = liveness.status(record)
    if status in liveness.IN_FLIGHT:
        raise UserError(
            f"{ref}: the run is still {status}; wait for it (runs wait {run.id}) "
            f"before you {verb} it"
        )
    tree = lookup.worktree(record)
    if tree is None:
        where = record.text("workdir") or "its --cd"
        raise UserError(
            f"{ref}: not a --worktree run; its changes are already in {where}, "
            "nothing to apply or discard"
        )
    if not tree["branch"].startswith(BRANCH_PREFIX):
        raise UserError(f"{ref}: the run's record names branch {tree['branch']}, not a run's")
    return RunTree(run, tree)


def source_paths(tree: RunTree):
    paths = repo_paths(tree.source) if os.path.isdir(tree.source) else None
    if paths is None or paths.toplevel is None:
        raise UserError(f"{tree.source}: the run's source work tree is gone or no longer in git")
    if os.path.realpath(paths.toplevel) != os.path.realpath(tree.source):
        raise UserError(f"{tree.source}: no longer the top of a git work tree")
    return paths


def _recorded_after(tree: RunTree) -> str:
    """The `after` tree of the run's change record. Raises UserError when it has none."""
    entry = tree.record.section("changes") or {}
    after = entry.get("after")
    if not isinstance(after, str) or not after:
        raise UserError(
            f"cannot apply {tree.name}: the run has no complete change record (its work tree "
            f"could not be snapshotted once it ended); merge branch {tree.branch} yourself"
        )
    return after


def apply(ref: str) -> dict:
    """Bring the run's recorded change into its source work tree, uncommitted. Raises UserError."""
    tree = finished_tree(ref, "apply")
    theirs = _recorded_after(tree)
    paths = source_paths(tree)
    with (
        gitland.landing_lock(paths.common_dir),
        tempfile.TemporaryDirectory(prefix="delegate-apply-") as scratch,
    ):
        source = Snapshotter(paths.toplevel, paths.git_dir, paths.common_dir, scratch).git()
        changes = _changes(source, tree.base, theirs)
        if changes:
            ours, target = _land(source, tree, theirs, changes, scratch)
            gitland.record_landing(
                tree.record, "applied", before=ours, after=target, workTree=paths.toplevel,
                gitDir=paths.git_dir, commonDir=paths.common_dir,
            )  # fmt: skip
    return {
        "id": tree.name,
        "outDir": tree.out_dir,
        "source": paths.toplevel,
        "branch": tree.branch,
        "applied": [path for _, path, _ in changes],
        "added": [path for status, path, _ in changes if status == "A"],
        "modified": [path for status, path, _ in changes if status not in ("A", "D")],
        "deleted": [path for status, path, _ in changes if status == "D"],
    }


def _changes(git: BoundGit, base: str, theirs: str) -> list[tuple[str, str, bool]]:
    """(status letter, path, is a submodule) for every path that differs from `base` to `theirs`."""
    listed = git.run("diff-tree", "-r", "-z", "--raw", "--no-renames", base, theirs)
    if not listed.ok:
        raise UserError(f"cannot compare the run's change with its start: {listed.reason()}")
    fields = listed.out.split(b"\0")
    found = []
    for i in range(0, len(fields) - 1, 2):
        meta = fields[i].decode("ascii", "replace").lstrip(":").split()
        if len(meta) < 5:
            continue
        found.append((meta[4][:1], os.fsdecode(fields[i + 1]), GITLINK in meta[:2]))
    submodules = [path for _, path, gitlink in found if gitlink]
    if submodules:
        raise UserError(
            f"cannot apply: the run changes the submodule {', '.join(submodules)}; submodules "
            "are never landed for you (your checkout of it is left alone); merge branch "
            "yourself"
        )
    return found


def _land(
    git: BoundGit, tree: RunTree, theirs: str, changes: list, scratch: str
) -> tuple[str, str]:
    """Merge in a private index, then let git's checkout write the work tree."""
    touched = [path for _, path, _ in changes]
    env = {"GIT_INDEX_FILE": os.path.join(scratch, "ours.index"), "GIT_LITERAL_PATHSPECS": "1"}
    tracked = _seed(git, env, touched)
    ours = gitland.write_tree(git, env)
    merge_env = {**env, "GIT_INDEX_FILE": os.path.join(scratch, "merge.index")}
    shutil.copyfile(env["GIT_INDEX_FILE"], merge_env["GIT_INDEX_FILE"])
    patch = git.run(
        "diff-tree", "-r", "-p", "--binary", "--full-index", "--no-renames", "--no-ext-diff",
        "--no-textconv", tree.base, theirs, timeout=gitland.TIMEOUT,
    )  # fmt: skip
    if not patch.ok:
        raise UserError(f"cannot read the run's change: {patch.reason()}")
    merged = git.run(
        "apply", "--cached", "--3way", "--binary", env=merge_env, input=patch.out,
        timeout=gitland.TIMEOUT,
    )  # fmt: skip
    if not merged.ok:
        _refuse(git, tree, merge_env, merged.reason())
    target = gitland.write_tree(git, merge_env)
    what = f"cannot apply {tree.name}"
    gitland.guard_untracked(git, env, tracked, ours, target, what)
    restore_env = {**env, "GIT_INDEX_FILE": os.path.join(scratch, "restore.index")}
    shutil.copyfile(env["GIT_INDEX_FILE"], restore_env["GIT_INDEX_FILE"])
    gitland.switch(git, env, restore_env, ours, target, touched, what)
    return ours, target


def _seed(git: BoundGit, env: dict, touched: list[str]) -> set[str]:
    """The private index: the source's, with the source's current bytes of `touched` paths.

    Returns every path the source tracks.
    """
    real = os.path.join(git.git_dir, "index")
    try:
        shutil.copy2(real, env["GIT_INDEX_FILE"])
    except FileNotFoundError:
        git.run("read-tree", "--empty", env=env)
    except OSError as problem:
        raise UserError(f"cannot copy {real}: {problem.strerror or problem}") from None
    tracked = gitland.tracked_paths(git, env)
    hidden = set(hidden_entries(git, env) or [])
    wanted = [p for p in (os.fsencode(t) for t in touched) if p in hidden]
    if wanted:
        clear_flags(git, wanted, env)
    present = [path for path in touched if path in tracked]
    if present:
        added = git.run(
            "add", "-u", "--pathspec-from-file=-", "--pathspec-file-nul", env=env,
            input=b"".join(os.fsencode(p) + b"\0" for p in present), timeout=gitland.TIMEOUT,
        )  # fmt: skip
        if not added.ok:
            raise UserError(f"cannot read the source's files the run touches: {added.reason()}")
    return tracked


def _refuse(git: BoundGit, tree: RunTree, env: dict, reason: str) -> None:
    unmerged = git.run("ls-files", "-u", "-z", env=env)
    names = sorted(
        {
            os.fsdecode(entry.split(b"\t", 1)[1])
            for entry in unmerged.out.split(b"\0")
            if b"\t" in entry
        }
    )
    if names:
        raise UserError(
            f"cannot apply {tree.name}: {tree.source} has changes that conflict with the "
            f"run's in {', '.join(names)}; nothing was changed. Commit or stash them and apply "
            f"again, or merge branch {tree.branch} yourself"
        )
    raise UserError(f"cannot apply {tree.name} to {tree.source}: {reason}; nothing was changed")
