"""`runs diff` and `runs undo`: a run's own change, read from its change record.

Every run keeps two trees in its private record (changes.py): its work tree
before the implementer started and after every process of the run had
ended. `diff` prints the difference of those trees (new files included,
binary-safe), however the work tree has moved on since. `undo` takes that
change back where it happened: in the run's work tree, or, for a worktree
run that was applied, in the source it was applied to. It does so only
while every path the run touched still holds what the run left; otherwise it
refuses and names the paths changed since. It never touches another path.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from ..errors import UserError
from ..gitmeta import BoundGit
from ..snapshots.snapshot import private_objects
from . import view as runs


class RunChange:
    """The change record of one run: trees, and where they were taken."""

    def __init__(self, run: runs.Run, entry: dict, what: str) -> None:
        self.run = run
        self.before: str = entry["before"]
        self.after: str = entry["after"]
        self.work_tree: str = entry["workTree"]
        self.git_dir: str = entry["gitDir"]
        self.common_dir: str = entry["commonDir"]
        #: "run" (the run's own change) or "apply" (what `runs apply` wrote into the source).
        self.what = what

    def git(self, env: dict | None = None) -> BoundGit:
        objects = private_objects(self.common_dir)
        return BoundGit(
            self.work_tree,
            self.git_dir,
            env={
                "GIT_OBJECT_DIRECTORY": objects,
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.path.join(self.common_dir, "objects"),
                **(env or {}),
            },
        )


_KEYS = ("before", "after", "workTree", "gitDir", "commonDir")


def _entry(found) -> dict | None:
    if isinstance(found, dict) and all(isinstance(found.get(k), str) for k in _KEYS):
        return found
    return None


def run_change(run: runs.Run) -> RunChange:
    """The run's own change. Raises UserError when it has none."""
    entry = _entry(run.private.get("changes")) if run.private is not None else None
    if entry is None:
        status = run.status
        if status in ("running", "orphaned"):
            raise UserError(
                f"{run.out_dir}: the run is still {status}; its change is known once it ends "
                f"(runs wait {run.out_dir})"
            )
        raise UserError(
            f"{run.out_dir}: the run has no change record (not in a git work tree, or from "
            "before change records); its result.json's touchedFiles is all there is"
        )
    return RunChange(run, entry, "run")


# ---------------------------------------------------------------- diff


def diff_args(mode: str, color: bool) -> list[str]:
    args = ["diff-tree", "-r", "-M", "--no-ext-diff", "--no-textconv"]
    if mode == "stat":
        args += ["--stat"]
    elif mode == "name-only":
        args += ["--name-only"]
    else:
        args += ["-p", "--binary", "--full-index"]
    args.append("--color=always" if color else "--no-color")
    return args


def diff(out_dir: str, mode: str = "patch", color: bool = False) -> bytes:
    """The run's change as git prints it: a patch, `--stat` or `--name-only`. Raises UserError."""
    change = run_change(runs.show(out_dir))
    done = change.git().run(*diff_args(mode, color), change.before, change.after, timeout=600)
    if not done.ok:
        raise UserError(f"cannot read the change record of {out_dir}: {done.reason()}")
    return done.out


# ---------------------------------------------------------------- undo


def undo(out_dir: str) -> dict:
    """Take back exactly what the run changed, where it is now. Raises UserError."""
    from .landing import landing_lock

    run = runs.show(out_dir)
    change = _undo_target(run)
    if not os.path.isdir(change.work_tree):
        raise UserError(f"{change.work_tree}: the run's work tree is gone; nothing to undo")
    with (
        landing_lock(change.common_dir),
        tempfile.TemporaryDirectory(prefix="delegate-undo-") as scratch,
    ):
        touched = _touched(change)
        if not touched:
            return _report(run, change, [])
        _revert(change, touched, scratch)
        _record(run, change)
    return _report(run, change, touched)


def _undo_target(run: runs.Run) -> RunChange:
    """What to take back: an applied worktree run's landing, else the run's own change."""
    landing = run.private.get("landing") if run.private is not None else None
    if isinstance(landing, dict):
        state = landing.get("state")
        if state in ("undone", "discarded"):
            raise UserError(f"{run.out_dir}: the run was already {state}; nothing to undo")
        if state == "applied":
            entry = _entry(landing)
            if entry is None:
                raise UserError(f"{run.out_dir}: its landing record is incomplete; undo by hand")
            return RunChange(run, entry, "apply")
    return run_change(run)


def _touched(change: RunChange) -> list[str]:
    listed = change.git().run(
        "diff-tree", "-r", "-z", "--name-only", "--no-renames", change.before, change.after
    )
    if not listed.ok:
        raise UserError(f"cannot read the change record: {listed.reason()}")
    return [os.fsdecode(p) for p in listed.out.split(b"\0") if p]


def _revert(change: RunChange, touched: list[str], scratch: str) -> None:
    from ..snapshots.snapshot import clear_flags, hidden_entries
    from .landing import guard_untracked, switch, tracked_paths

    git = change.git()
    env = {"GIT_INDEX_FILE": os.path.join(scratch, "now.index"), "GIT_LITERAL_PATHSPECS": "1"}
    real = os.path.join(change.git_dir, "index")
    try:
        shutil.copy2(real, env["GIT_INDEX_FILE"])
    except FileNotFoundError:
        git.run("read-tree", "--empty", env=env)
    tracked = tracked_paths(git, env)
    hidden = set(hidden_entries(git, env) or [])
    wanted = [p for p in (os.fsencode(t) for t in touched) if p in hidden]
    if wanted:
        clear_flags(git, wanted, env)
    root = change.work_tree
    present = [p for p in touched if p in tracked or os.path.lexists(os.path.join(root, p))]
    if present:
        listed = b"".join(os.fsencode(p) + b"\0" for p in present)
        added = git.run("add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul", env=env,
                        input=listed, timeout=600)  # fmt: skip
        if not added.ok:
            raise UserError(f"cannot read the files the run touched: {added.reason()}")
    now = _write_tree(git, env)
    since = _changed_since(git, env, now, change.after, set(touched))
    if since:
        raise UserError(
            f"cannot undo {change.run.out_dir}: {', '.join(since[:10])} changed since the run "
            f"({len(since)} path(s)); nothing was changed. Take the run back by hand "
            "(runs diff shows its patch)"
        )
    target = _with_paths_of(git, env, scratch, change.before, touched)
    restore = {**env, "GIT_INDEX_FILE": os.path.join(scratch, "restore.index")}
    shutil.copyfile(env["GIT_INDEX_FILE"], restore["GIT_INDEX_FILE"])
    guard_untracked(
        git, env, tracked | set(present), now, target, f"cannot undo {change.run.out_dir}"
    )
    switch(git, env, restore, now, target, touched, f"cannot undo {change.run.out_dir}")


def _write_tree(git: BoundGit, env: dict) -> str:
    wrote = git.run("write-tree", env=env)
    if not wrote.ok:
        raise UserError(f"git write-tree failed: {wrote.reason()}")
    return wrote.out.decode("ascii", "replace").strip()


def _changed_since(git: BoundGit, env: dict, now: str, after: str, touched: set[str]) -> list[str]:
    listed = git.run("diff-tree", "-r", "-z", "--name-only", "--no-renames", now, after, env=env)
    if not listed.ok:
        raise UserError(f"cannot compare the work tree with the run's: {listed.reason()}")
    return sorted(p for p in (os.fsdecode(x) for x in listed.out.split(b"\0") if x) if p in touched)


def _with_paths_of(git: BoundGit, env: dict, scratch: str, source: str, paths: list[str]) -> str:
    """The tree of the index in `env`, with `paths` set as tree `source` has them."""
    listed = git.run("ls-tree", "-r", "-z", "--full-tree", source, env=env)
    if not listed.ok:
        raise UserError(f"cannot read the run's starting tree: {listed.reason()}")
    wanted = set(paths)
    entries = {}
    for raw in listed.out.split(b"\0"):
        meta, tab, path = raw.partition(b"\t")
        if tab and os.fsdecode(path) in wanted:
            mode, _kind, oid = meta.split(b" ")
            entries[os.fsdecode(path)] = (mode, oid)
    zero = b"0" * 40
    lines = b""
    for path in paths:
        mode, oid = entries.get(path, (b"0", zero))
        lines += mode + b" " + oid + b"\t" + os.fsencode(path) + b"\0"
    target_env = {**env, "GIT_INDEX_FILE": os.path.join(scratch, "target.index")}
    shutil.copyfile(env["GIT_INDEX_FILE"], target_env["GIT_INDEX_FILE"])
    done = git.run("update-index", "-z", "--index-info", env=target_env, input=lines)
    if not done.ok:
        raise UserError(f"cannot prepare the undo: {done.reason()}")
    return _write_tree(git, target_env)


def _record(run: runs.Run, change: RunChange) -> None:
    from ..relay.rundir import iso_now

    if run.private is None:
        return
    try:
        run.private.update(landing={"state": "undone", "at": iso_now(), "undid": change.what})
    except (OSError, UserError):
        pass


def _report(run: runs.Run, change: RunChange, touched: list[str]) -> dict:
    return {"outDir": run.out_dir, "workTree": change.work_tree, "undid": change.what,
            "restored": touched}  # fmt: skip
