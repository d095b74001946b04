"""`runs apply` and `runs discard`: what becomes of a finished worktree run.

`apply` brings the run's change (everything in its worktree that differs
from the commit it started from) into the source work tree, uncommitted,
and only through git's own machinery:

1. the worktree is snapshotted (snapshot.py) into a tree, `theirs`;
2. a private copy of the source's index takes the source's current version
   of every path the run touches (`add -u`, tracked files only: the source's
   untracked files are never hashed), giving `ours`;
3. the run's patch (`base` → `theirs`) is applied to that copy with
   `apply --3way`: a path both sides changed in overlapping ways stops
   everything, and the paths are named;
4. `read-tree -m -u ours merged` writes the result into the source work
   tree. This is git's checkout: it refuses, before writing anything, to
   overwrite an untracked or ignored file or a local edit it did not merge,
   and it turns files into folders and back itself.

New objects go to the private object store, never the source's. The
source's index is never written, so the change shows as unstaged edits for
the orchestrator to review and commit. A run that touches a submodule is
refused (the user's submodule checkout is never touched). If git fails while
writing (a full disk) every path the run touches is put back as it was;
catchable signals are held until the tree is whole again. Apply, discard
and undo on one source queue behind one lock under its git dir.

`discard` removes the run's worktree and its `delegate/…` branch through
`git worktree remove` and `git branch -D`, refusing (without `force`) when
that branch holds commits the source's HEAD lacks. It also clears what a
relay that was killed outright left behind.

Which worktree, branch and source a run has is read from its private
record (record.py) when it has one; the worktree's `.git` file must still
point at the git dir the run was given, or both commands refuse.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile

from ..errors import UserError
from ..gitmeta import BoundGit, git_outcome, repo_paths
from ..relay.worktree import BRANCH_PREFIX, admin_lock, read_gitfile
from ..snapshots.snapshot import SnapshotError, Snapshotter, clear_flags, hidden_entries
from . import view as runs

FIELDS = ("path", "branch", "base", "source")
LOCK_NAME = "landing.lock"
GITLINK = "160000"
_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_TIMEOUT = 600.0


class RunTree:
    """The worktree of one finished run: path, branch, base commit, source, git dir."""

    def __init__(self, run: runs.Run, record: dict) -> None:
        self.run = run
        self.out_dir = run.out_dir
        self.path: str = record["path"]
        self.branch: str = record["branch"]
        self.base: str = record["base"]
        self.source: str = record["source"]
        git_dir = record.get("gitDir")
        self.git_dir: str | None = git_dir if isinstance(git_dir, str) else None
        gitfile = record.get("gitfile")
        self.gitfile: str | None = gitfile if isinstance(gitfile, str) else None
        self.removed = record.get("removed") is True


def _worktree_record(run: runs.Run) -> dict | None:
    """The run's worktree: from its private record, else (a run from before records) result.json."""
    found = run.worktree
    if found is None or not all(isinstance(found.get(f), str) for f in FIELDS):
        return None
    return found


def finished_tree(out_dir: str, verb: str) -> RunTree:
    """The worktree of the finished run in `out_dir` (or with that id). Raises UserError."""
    run = runs.show(out_dir)
    status = run.status
    if status == "orphaned":
        run.end_orphans()
        run = runs.show(out_dir)
        status = run.status
    if status in ("running", "orphaned"):
        raise UserError(
            f"{out_dir}: the run is still {status}; wait for it (runs wait {out_dir}) "
            f"before you {verb} it"
        )
    record = _worktree_record(run)
    if record is None:
        where = (run.result or {}).get("workdir") or run.marker.get("workdir") or "its --cd"
        raise UserError(
            f"{out_dir}: not a --worktree run; its changes are already in {where}, "
            "nothing to apply or discard"
        )
    if not record["branch"].startswith(BRANCH_PREFIX):
        raise UserError(f"{out_dir}: the run's record names branch {record['branch']}, not a run's")
    return RunTree(run, record)


def unlanded_reason(out_dir: str) -> str | None:
    """Why a new run may not use `out_dir` (one line), or None.

    A run there that is still going, or a --worktree run whose change is
    neither landed nor dropped while its worktree or branch still holds it,
    would lose its record (and with it the way to land the work) to the new run.
    """
    run = runs.Run(out_dir)
    if not run.exists:
        return None
    name = run.id or out_dir
    status = run.status
    if status in ("running", "orphaned"):
        return (
            f"--out-dir {out_dir} holds run {name}, which is still {status}; "
            f"wait for it (runs wait {name}) or choose a new --out-dir"
        )
    tree = run.worktree
    if run.landing not in ("pending", "undone") or tree is None:
        return None
    branch, source = tree.get("branch"), tree.get("source")
    held = isinstance(tree.get("path"), str) and os.path.isdir(tree["path"])
    if not held and isinstance(branch, str) and isinstance(source, str):
        held = git_outcome(source, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").ok
    if not held:
        return None
    return (
        f"--out-dir {out_dir} holds run {name}, a --worktree run whose change is not landed; "
        f"land it (runs apply {name}) or drop it (runs discard {name}), or choose a new --out-dir"
    )


def _source_paths(tree: RunTree):
    paths = repo_paths(tree.source) if os.path.isdir(tree.source) else None
    if paths is None or paths.toplevel is None:
        raise UserError(f"{tree.source}: the run's source work tree is gone or no longer in git")
    if os.path.realpath(paths.toplevel) != os.path.realpath(tree.source):
        raise UserError(f"{tree.source}: no longer the top of a git work tree")
    return paths


def _check_gitfile(tree: RunTree, common_dir: str, verb: str) -> str:
    """The worktree's git dir, once its `.git` file is proven to be the one the run was given."""
    now = read_gitfile(tree.path)
    expected = tree.gitfile
    if expected is not None and now != expected:
        raise UserError(
            f"cannot {verb} {tree.out_dir}: the .git file of its worktree {tree.path} was "
            "replaced during the run; inspect that folder and remove it yourself"
        )
    target = None
    if now is not None and now.startswith("gitdir: "):
        target = now[len("gitdir: ") :].strip()
        target = os.path.normpath(os.path.join(tree.path, target))
    admin = os.path.realpath(os.path.join(common_dir, "worktrees"))
    if target is None or not os.path.realpath(target).startswith(admin + os.sep):
        raise UserError(
            f"cannot {verb} {tree.out_dir}: {tree.path}/.git does not point into "
            f"{common_dir}/worktrees; inspect that folder and remove it yourself"
        )
    if tree.git_dir is not None and os.path.realpath(target) != os.path.realpath(tree.git_dir):
        raise UserError(
            f"cannot {verb} {tree.out_dir}: its worktree now names another git dir; "
            "inspect it and remove it yourself"
        )
    return target


def landing_lock(common_dir: str):
    """The queue apply, discard and undo on one repository wait in."""
    from .. import store

    path = os.path.join(common_dir, "delegate-skills", LOCK_NAME)
    return store.queue((), path, by_hand=True)


class _HeldSignals:
    """Catchable signals wait while the work tree is being written, then arrive."""

    def __enter__(self) -> None:
        self._old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)

    def __exit__(self, *exc) -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, self._old)


# ---------------------------------------------------------------- apply


def apply(out_dir: str) -> dict:
    """Bring the run's change into its source work tree, uncommitted. Raises UserError."""
    tree = finished_tree(out_dir, "apply")
    if tree.removed or not os.path.isdir(tree.path):
        raise UserError(
            f"{tree.path}: the run's worktree is gone (discarded?); its branch {tree.branch} "
            "may still hold committed work"
        )
    paths = _source_paths(tree)
    git_dir = _check_gitfile(tree, paths.common_dir, "apply")
    with (
        landing_lock(paths.common_dir),
        tempfile.TemporaryDirectory(prefix="delegate-apply-") as scratch,
    ):
        theirs = _snapshot(tree.path, git_dir, paths.common_dir, scratch)
        source = Snapshotter(paths.toplevel, paths.git_dir, paths.common_dir, scratch).git()
        changes = _changes(source, tree.base, theirs)
        if changes:
            ours, target = _land(source, tree, theirs, changes, scratch)
            _record_landing(
                tree, "applied", before=ours, after=target, workTree=paths.toplevel,
                gitDir=paths.git_dir, commonDir=paths.common_dir,
            )  # fmt: skip
    return {
        "outDir": tree.out_dir,
        "source": paths.toplevel,
        "branch": tree.branch,
        "applied": [path for _, path, _ in changes],
        "added": [path for status, path, _ in changes if status == "A"],
        "modified": [path for status, path, _ in changes if status not in ("A", "D")],
        "deleted": [path for status, path, _ in changes if status == "D"],
    }


def _snapshot(work: str, git_dir: str, common_dir: str, scratch: str) -> str:
    where = os.path.join(scratch, "theirs")
    os.mkdir(where)
    try:
        return Snapshotter(work, git_dir, common_dir, where).take(first=True)
    except SnapshotError as problem:
        raise UserError(f"cannot read the run's worktree: {problem}") from None


def _changes(git: BoundGit, base: str, theirs: str) -> list[tuple[str, str, bool]]:
    """(status letter, path, is a submodule) for every path that differs from `base` to `theirs`."""
    listed = git.run("diff-tree", "-r", "-z", "--raw", "--no-renames", base, theirs)
    if not listed.ok:
        raise UserError(f"cannot compare the run's worktree with its start: {listed.reason()}")
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
    ours = _write_tree(git, env)
    merge_env = {**env, "GIT_INDEX_FILE": os.path.join(scratch, "merge.index")}
    shutil.copyfile(env["GIT_INDEX_FILE"], merge_env["GIT_INDEX_FILE"])
    patch = git.run(
        "diff-tree", "-r", "-p", "--binary", "--full-index", "--no-renames", "--no-ext-diff",
        "--no-textconv", tree.base, theirs, timeout=_TIMEOUT,
    )  # fmt: skip
    if not patch.ok:
        raise UserError(f"cannot read the run's change: {patch.reason()}")
    merged = git.run(
        "apply", "--cached", "--3way", "--binary", env=merge_env, input=patch.out, timeout=_TIMEOUT
    )
    if not merged.ok:
        _refuse(git, tree, merge_env, merged.reason())
    target = _write_tree(git, merge_env)
    guard_untracked(git, env, tracked, ours, target, f"cannot apply {tree.out_dir}")
    restore_env = {**env, "GIT_INDEX_FILE": os.path.join(scratch, "restore.index")}
    shutil.copyfile(env["GIT_INDEX_FILE"], restore_env["GIT_INDEX_FILE"])
    switch(git, env, restore_env, ours, target, touched, f"cannot apply {tree.out_dir}")
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
    tracked = tracked_paths(git, env)
    hidden = set(hidden_entries(git, env) or [])
    wanted = [p for p in (os.fsencode(t) for t in touched) if p in hidden]
    if wanted:
        clear_flags(git, wanted, env)
    present = [path for path in touched if path in tracked]
    if present:
        added = git.run(
            "add", "-u", "--pathspec-from-file=-", "--pathspec-file-nul", env=env,
            input=b"".join(os.fsencode(p) + b"\0" for p in present), timeout=_TIMEOUT,
        )  # fmt: skip
        if not added.ok:
            raise UserError(f"cannot read the source's files the run touches: {added.reason()}")
    return tracked


def tracked_paths(git: BoundGit, env: dict) -> set[str]:
    listed = git.run("ls-files", "-z", env=env, timeout=_TIMEOUT)
    if not listed.ok:
        raise UserError(f"git cannot list the source's files: {listed.reason()}")
    return {os.fsdecode(p) for p in listed.out.split(b"\0") if p}


def guard_untracked(
    git: BoundGit, env: dict, tracked: set[str], ours: str, target: str, what: str
) -> None:
    """Refuse when a path the target adds holds a file git does not track. Raises UserError.

    git's checkout refuses to overwrite an untracked file, but takes an ignored
    one (a `.env`, a build folder) as expendable and replaces or deletes it.
    No run's change may do that: every new path, and every folder on the way
    to it, must be free of files the source does not track.
    """
    listed = git.run(
        "diff-tree", "-r", "-z", "--name-status", "--no-renames", ours, target, env=env
    )
    if not listed.ok:
        raise UserError(f"{what}: git cannot compare the trees: {listed.reason()}")
    fields = listed.out.split(b"\0")
    added = [os.fsdecode(fields[i + 1]) for i in range(0, len(fields) - 1, 2) if fields[i] == b"A"]
    root = git.work_tree
    clashes: list[str] = []
    for path in added:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            prefix = "/".join(parts[:depth])
            full = os.path.join(root, prefix)
            if os.path.lexists(full) and (os.path.islink(full) or not os.path.isdir(full)):
                if prefix not in tracked:
                    clashes.append(prefix)
                break
        else:
            clashes += _untracked_at(root, path, tracked)
    if clashes:
        shown = ", ".join(sorted(dict.fromkeys(clashes))[:10])
        raise UserError(
            f"{what}: {root} has files git ignores or does not track where the run writes: "
            f"{shown}; move them aside and apply again (nothing was changed)"
        )


def _untracked_at(root: str, path: str, tracked: set[str]) -> list[str]:
    """Files at `path` (or under it, for a folder) that the source does not track."""
    full = os.path.join(root, path)
    if not os.path.lexists(full):
        return []
    if os.path.islink(full) or not os.path.isdir(full):
        return [] if path in tracked else [path]
    found = []
    for here, _dirs, files in os.walk(full):
        for name in files:
            rel = os.path.relpath(os.path.join(here, name), root).replace(os.sep, "/")
            if rel not in tracked:
                found.append(rel)
    return found


def _write_tree(git: BoundGit, env: dict) -> str:
    wrote = git.run("write-tree", env=env)
    if not wrote.ok:
        raise UserError(f"git write-tree failed: {wrote.reason()}")
    return wrote.out.decode("ascii", "replace").strip()


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
            f"cannot apply {tree.out_dir}: {tree.source} has changes that conflict with the "
            f"run's in {', '.join(names)}; nothing was changed. Commit or stash them and apply "
            f"again, or merge branch {tree.branch} yourself"
        )
    raise UserError(f"cannot apply {tree.out_dir} to {tree.source}: {reason}; nothing was changed")


def switch(
    git: BoundGit,
    env: dict,
    restore_env: dict,
    ours: str,
    target: str,
    touched: list[str],
    what: str,
) -> None:
    """Move the work tree's `touched` paths from tree `ours` to tree `target` with git's checkout.

    `env` names a private index that matches `ours` (and the work tree, for
    those paths); `restore_env` a copy of it. A dry run first: git checks that
    nothing it would overwrite is untracked, ignored or edited, and nothing is
    written when it refuses. If the real run fails while writing, every
    touched path is put back from `ours`. Raises UserError.
    """
    checked = git.run("read-tree", "-m", "-u", "-n", ours, target, env=env, timeout=_TIMEOUT)
    if not checked.ok:
        raise UserError(f"{what}: {_one_line(checked)}; nothing was changed")
    with _HeldSignals():
        done = git.run("read-tree", "-m", "-u", ours, target, env=env, timeout=_TIMEOUT)
        if not done.ok:
            _restore(git, restore_env, ours, touched)
    if not done.ok:
        raise UserError(
            f"{what}: git could not write the work tree ({_one_line(done)}); every file the "
            "run touches was put back as it was"
        )


def _one_line(done) -> str:
    lines = [line.strip() for line in done.err.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line and not line.startswith("Please ")]
    named = [line for line in lines if not line.startswith(("error:", "fatal:", "Aborting"))]
    head = next((line for line in lines if line.startswith("error:")), None)
    if head and named:
        return f"{head.removeprefix('error: ').rstrip(':')}: {', '.join(named[:10])}"
    return lines[0].removeprefix("error: ") if lines else done.reason()


def _restore(git: BoundGit, restore_env: dict, ours: str, touched: list[str]) -> None:
    """Put every touched path back as tree `ours` has it; remove what only the target had."""
    present = git.run("ls-tree", "-r", "-z", "--name-only", "--full-tree", ours,
                      env=restore_env)  # fmt: skip
    in_ours = {os.fsdecode(p) for p in present.out.split(b"\0") if p}
    root = git.work_tree
    for path in sorted(touched, key=lambda p: p.count("/"), reverse=True):
        if path in in_ours:
            continue
        full = os.path.join(root, path)
        if os.path.islink(full) or os.path.isfile(full):
            os.unlink(full)
        _prune_empty_parents(root, os.path.dirname(full))
    back = [p for p in touched if p in in_ours]
    if back:
        for path in back:
            full = os.path.join(root, path)
            if os.path.isdir(full) and not os.path.islink(full):
                _prune_empty_parents(root, full)
        git.run("checkout-index", "-f", "-z", "--stdin", env=restore_env,
                input=b"".join(os.fsencode(p) + b"\0" for p in back))  # fmt: skip


def _prune_empty_parents(root: str, folder: str) -> None:
    """Remove `folder` and its parents up to `root` while they are empty (as git does)."""
    root = os.path.realpath(root)
    while True:
        real = os.path.realpath(folder)
        if real == root or not real.startswith(root + os.sep):
            return
        try:
            os.rmdir(folder)
        except OSError:
            return
        folder = os.path.dirname(folder)


def _record_landing(tree: RunTree, state: str, **fields) -> None:
    from ..relay.rundir import iso_now

    private = tree.run.private
    if private is None:
        return
    try:
        private.update(landing={"state": state, "at": iso_now(), **fields})
    except (OSError, UserError):
        pass


# ---------------------------------------------------------------- discard


def discard(out_dir: str, force: bool = False) -> dict:
    """Remove the run's worktree and branch. Raises UserError."""
    tree = finished_tree(out_dir, "discard")
    paths = _source_paths(tree)
    source = paths.toplevel
    with landing_lock(paths.common_dir):
        registered = _registered(source, tree.path)
        if registered:
            _check_gitfile(tree, paths.common_dir, "discard")
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
        _record_landing(tree, "discarded")
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
