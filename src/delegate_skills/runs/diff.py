"""`runs diff`: a run's own change, read from its change record in the store.

Every run keeps two trees in its record: its work tree before the
implementer started and after every process of the run had ended. `diff`
prints the difference of those trees (new files included, binary-safe),
however the work tree has moved on since.
"""

from __future__ import annotations

import os

from ..errors import UserError
from ..gitmeta import BoundGit
from ..runstore import liveness
from ..snapshots.snapshot import private_objects
from .view import Run, show

_KEYS = ("before", "after", "workTree", "gitDir", "commonDir")


class RunChange:
    """The change record of one run: trees, and where they were taken."""

    def __init__(self, run: Run, entry: dict, what: str) -> None:
        self.run = run
        self.name = run.id
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


def entry_of(found) -> dict | None:
    if isinstance(found, dict) and all(isinstance(found.get(k), str) for k in _KEYS):
        return found
    return None


def run_change(run: Run) -> RunChange:
    """The run's own change. Raises UserError when it has none."""
    entry = entry_of(run.record.section("changes"))
    if entry is None:
        status = liveness.status(run.record)
        if status in liveness.IN_FLIGHT:
            raise UserError(
                f"{run.id}: the run is still {status}; its change is known once it ends "
                f"(runs wait {run.id})"
            )
        raise UserError(
            f"{run.id}: the run has no change record (not in a git work tree, or its work tree "
            "could not be snapshotted); its result.json's touchedFiles is all there is"
        )
    return RunChange(run, entry, "run")


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


def diff(ref: str, mode: str = "patch", color: bool = False) -> bytes:
    """The run's change as git prints it: a patch, `--stat` or `--name-only`. Raises UserError."""
    change = run_change(show(ref))
    done = change.git().run(*diff_args(mode, color), change.before, change.after, timeout=600)
    if not done.ok:
        raise UserError(f"cannot read the change record of {change.name}: {done.reason()}")
    return done.out
