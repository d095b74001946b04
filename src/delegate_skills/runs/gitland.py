"""Landing through git's own machinery: what apply and undo share.

A change lands in a work tree only through git's checkout (`read-tree -m
-u` from a private index): git refuses, before writing anything, to
overwrite a file it does not track or a local edit it did not merge, and
this module refuses too where git would take an ignored file as expendable.
Apply, discard and undo on one repository queue behind one lock under its
common git dir; catchable signals wait while the work tree is written.
"""

from __future__ import annotations

import os
import signal

from ..errors import UserError
from ..gitmeta import BoundGit

LOCK_NAME = "landing.lock"
_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
TIMEOUT = 600.0


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


def tracked_paths(git: BoundGit, env: dict) -> set[str]:
    listed = git.run("ls-files", "-z", env=env, timeout=TIMEOUT)
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


def write_tree(git: BoundGit, env: dict) -> str:
    wrote = git.run("write-tree", env=env)
    if not wrote.ok:
        raise UserError(f"git write-tree failed: {wrote.reason()}")
    return wrote.out.decode("ascii", "replace").strip()


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
    checked = git.run("read-tree", "-m", "-u", "-n", ours, target, env=env, timeout=TIMEOUT)
    if not checked.ok:
        raise UserError(f"{what}: {_one_line(checked)}; nothing was changed")
    with _HeldSignals():
        done = git.run("read-tree", "-m", "-u", ours, target, env=env, timeout=TIMEOUT)
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


def record_landing(record, state: str, also: dict | None = None, **fields) -> None:
    """What became of the run (applied, discarded, undone), in its record in the store.

    `also`: fields of the record itself to set at the same time (apply's `overlap`).
    """
    from ..relay.rundir import iso_now

    if record is None:
        return
    try:
        record.update(landing={"state": state, "at": iso_now(), **fields}, **(also or {}))
    except (OSError, UserError):
        pass
