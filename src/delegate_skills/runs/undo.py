"""`runs undo`: take back exactly what a run changed, where it is now.

In the run's work tree, or, for a worktree run that was applied, in the
source it was applied to: then exactly what that apply landed (its
landing record's trees; a part landed with --only/--exclude is only that
part), and the paths it merged into are put back as they were. Only while
every path the run touched still holds what the run left; otherwise it
refuses and names the paths changed since. It never touches another path.
The index entries the run changed in its work tree (a run that `git add`s
its edits) are put back as they were before the run, from the copy its
record keeps. A repository the run created inside the tree is never
deleted: it is named, and left.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from ..errors import UserError
from ..runstore import record as records
from . import gitland
from .diff import RunChange, entry_of, run_change
from .view import Run, show

GITLINK = b"160000"
NESTED_REASON = "a repository the run created; undo never deletes a repository: remove it yourself"


def undo(ref: str) -> dict:
    """Take back exactly what the run changed, where it is now. Raises UserError."""
    run = show(ref)
    change = _target(run)
    if not os.path.isdir(change.work_tree):
        raise UserError(f"{change.work_tree}: the run's work tree is gone; nothing to undo")
    with (
        gitland.landing_lock(change.common_dir),
        tempfile.TemporaryDirectory(prefix="delegate-undo-") as scratch,
    ):
        touched, nested = _touched(change)
        if not touched:
            return _report(run, change, [], nested)
        _revert(change, touched, scratch)
        if change.what == "run":
            _restore_index(run, change, touched)
        gitland.record_landing(run.record, "undone", undid=change.what)
    return _report(run, change, touched, nested)


def _target(run: Run) -> RunChange:
    """What to take back: an applied worktree run's landing, else the run's own change."""
    landing = run.record.section("landing") or {}
    state = landing.get("state")
    if state in ("undone", "discarded"):
        raise UserError(f"{run.id}: the run was already {state}; nothing to undo")
    if state == "applied":
        entry = entry_of(landing)
        if entry is None:
            raise UserError(f"{run.id}: its landing record is incomplete; undo by hand")
        return RunChange(run, entry, "apply")
    return run_change(run)


def _touched(change: RunChange) -> tuple[list[str], list[str]]:
    """(paths to put back, repositories the run created that stay where they are)."""
    listed = change.git().run(
        "diff-tree", "-r", "-z", "--raw", "--no-renames", change.before, change.after
    )
    if not listed.ok:
        raise UserError(f"cannot read the change record: {listed.reason()}")
    fields = listed.out.split(b"\0")
    touched, nested = [], []
    for i in range(0, len(fields) - 1, 2):
        meta = fields[i].lstrip(b":").split()
        path = os.fsdecode(fields[i + 1])
        created = len(meta) >= 5 and meta[1] == GITLINK and meta[0] != GITLINK
        if created and os.path.isdir(os.path.join(change.work_tree, path)):
            nested.append(path)
            continue
        touched.append(path)
    return touched, nested


def _revert(change: RunChange, touched: list[str], scratch: str) -> None:
    from ..snapshots.snapshot import clear_flags, hidden_entries

    git = change.git()
    env = {"GIT_INDEX_FILE": os.path.join(scratch, "now.index"), "GIT_LITERAL_PATHSPECS": "1"}
    real = os.path.join(change.git_dir, "index")
    try:
        shutil.copy2(real, env["GIT_INDEX_FILE"])
    except FileNotFoundError:
        git.run("read-tree", "--empty", env=env)
    tracked = gitland.tracked_paths(git, env)
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
    now = gitland.write_tree(git, env)
    since = _changed_since(git, env, now, change.after, set(touched))
    if since:
        raise UserError(
            f"cannot undo {change.name}: {', '.join(since[:10])} changed since the run "
            f"({len(since)} path(s)); nothing was changed. Take the run back by hand "
            "(runs diff shows its patch)"
        )
    target = _with_paths_of(git, env, scratch, change.before, touched)
    restore = {**env, "GIT_INDEX_FILE": os.path.join(scratch, "restore.index")}
    shutil.copyfile(env["GIT_INDEX_FILE"], restore["GIT_INDEX_FILE"])
    what = f"cannot undo {change.name}"
    gitland.guard_untracked(git, env, tracked | set(present), now, target, what)
    gitland.switch(git, env, restore, now, target, touched, what)


def _restore_index(run: Run, change: RunChange, touched: list[str]) -> None:
    """Put the index entries of `touched` paths back as they were before the run."""
    before = os.path.join(run.record.dir, records.INDEX_BEFORE)
    if not os.path.isfile(before):
        return
    git = change.git()
    wanted = {os.fsencode(p) for p in touched}
    old = _stage_entries(git, {"GIT_INDEX_FILE": before}, wanted)
    now = _stage_entries(git, {}, wanted)
    zero = b"0" * 40
    lines = b""
    for path in touched:
        key = os.fsencode(path)
        if old.get(key) == now.get(key):
            continue
        if key in now:  # drop what is there now (every stage), then put the old entry back
            lines += b"0 " + zero + b"\t" + key + b"\0"
        if key in old:
            mode, oid = old[key]
            lines += mode + b" " + oid + b"\t" + key + b"\0"
    if not lines:
        return
    done = git.run("update-index", "-z", "--index-info", input=lines)
    if not done.ok:
        raise UserError(
            f"undid {change.name} in the work tree, but git could not put its index entries "
            f"back: {done.reason()}; `git restore --staged` the paths it named"
        )


def _stage_entries(git, env: dict, wanted: set[bytes]) -> dict[bytes, tuple[bytes, bytes]]:
    """{path: (mode, object id)} of the stage-0 index entries of the `wanted` paths."""
    listed = git.run("ls-files", "-s", "-z", env=env, plain=True, timeout=gitland.TIMEOUT)
    found = {}
    if not listed.ok:
        return found
    for raw in listed.out.split(b"\0"):
        meta, tab, path = raw.partition(b"\t")
        parts = meta.split(b" ")
        if tab and path in wanted and len(parts) == 3 and parts[2] == b"0":
            found[path] = (parts[0], parts[1])
    return found


def _changed_since(git, env: dict, now: str, after: str, touched: set[str]) -> list[str]:
    listed = git.run("diff-tree", "-r", "-z", "--name-only", "--no-renames", now, after, env=env)
    if not listed.ok:
        raise UserError(f"cannot compare the work tree with the run's: {listed.reason()}")
    return sorted(p for p in (os.fsdecode(x) for x in listed.out.split(b"\0") if x) if p in touched)


def _with_paths_of(git, env: dict, scratch: str, source: str, paths: list[str]) -> str:
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
    return gitland.write_tree(git, target_env)


def _report(run: Run, change: RunChange, touched: list[str], nested: list[str]) -> dict:
    return {
        "id": run.id,
        "outDir": run.out_dir,
        "workTree": change.work_tree,
        "undid": change.what,
        "restored": touched,
        "left": [{"path": path, "reason": NESTED_REASON} for path in nested],
    }
