"""`delegate runs apply|discard|diff|undo|prune`: what becomes of a run's change."""

from __future__ import annotations

import os
import sys

import click

from .output import (
    CWD_OPTION,
    JSON_OPTION,
    cwd_of,
    emit,
    run_ref,
)


@click.command("prune")
@click.option("--dry-run", is_flag=True, help="Say what would go; remove nothing.")
@click.option("--older-than", "older_than", metavar="AGE",
              help="Only runs that ended longer ago than this (7d, 12h, 90m; 0 for any; "
                   "default 15m). Applied or discarded runs go whatever their age.")  # fmt: skip
@click.option("--force", is_flag=True, help="Also runs whose work nobody landed (it is lost).")
@click.option(
    "--all",
    "everywhere",
    is_flag=True,
    help="Every repository's runs on this machine, not only this repository's.",
)
@CWD_OPTION
@JSON_OPTION
def runs_prune(
    dry_run: bool, older_than: str | None, force: bool, everywhere: bool, cwd: str | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Remove the runs of this repository that hold no unlanded work, and their worktrees.

    Ended runs that worked in place, worktree runs applied or discarded or that
    changed nothing, and worktrees no run names that hold nothing. A worktree
    run with work nobody landed is listed and kept, unless --force; a worktree
    another unlanded run works in is kept; a --host run that has not come
    back is kept. Running runs and run directories no relay here recorded are
    never touched, and in a run directory only the files its relay wrote go.
    """
    from ..runs import prune

    seconds = None
    if older_than is not None:
        seconds = prune.parse_age(older_than)
        if seconds is None:
            raise click.BadParameter("use days or an h/m/s duration: 7d, 12h, 90m, or 0",
                                     param_hint="--older-than")  # fmt: skip
    report = prune.prune(dry_run, seconds, force, everywhere=everywhere, cwd=cwd_of(cwd))
    emit(report, as_json, prune_text)


def prune_text(report: dict) -> str:
    verb = "would remove" if report["dryRun"] else "removed"
    lines = []
    for run in report["removed"]:
        left = f" (left {len(run['left'])} file(s) no relay wrote)" if run.get("left") else ""
        lines.append(f"{verb} {run['id'] or '-'} {run['outDir']}: {run['reason']}{left}")
    for tree in report["orphans"]:
        done = verb if tree["prunable"] else "kept"
        lines.append(f"{done} worktree {tree['path']}: {tree['reason']}")
    for run in report["kept"]:
        lines.append(f"kept {run['id'] or '-'} {run['outDir']}: {run['reason']}")
    return "\n".join(lines) or "nothing to prune"


def apply_text(report: dict) -> str:
    if not report["applied"]:
        return f"nothing to apply: the run changed no file ({report['outDir']})"
    lines = [
        f"applied {len(report['applied'])} file(s) from {report['branch']} into "
        f"{report['source']}, not committed:"
    ]
    for label, key in (("added", "added"), ("modified", "modified"), ("deleted", "deleted")):
        lines += [f"  {label:<9}{path}" for path in report[key]]
    left = report.get("leftOut") or []
    if left:
        lines.append(f"left out {len(left)} file(s) the run changed:")
        lines += [f"  {path}" for path in left]
    lines.append(
        "review it: git status lists the new files (git diff leaves them out), git diff the "
        "edits; re-run the project's gates, then commit it yourself"
        if report["added"]
        else "review the diff (git diff), re-run the project's gates, then commit it yourself"
    )
    return "\n".join(lines)


@click.command("apply")
@run_ref()
@click.option("--only", "only", multiple=True, metavar="PATH",
              help="Land only this file, or what is under this folder (repeatable).")  # fmt: skip
@click.option("--exclude", "exclude", multiple=True, metavar="PATH",
              help="Leave this file or folder out (repeatable; wins over --only).")  # fmt: skip
@JSON_OPTION
def runs_apply(
    out_dir: str, only: tuple[str, ...], exclude: tuple[str, ...], as_json: bool
) -> None:
    """Bring a finished --worktree run's change into its source work tree, uncommitted.

    apply lands the run's recorded change: the change record `runs diff`
    shows, not the worktree as it is now. --only PATH and --exclude PATH land
    part of it: each PATH is a file or a folder, written as `runs diff
    --name-only` prints it (relative to the repository root, no patterns); a
    PATH the run did not change is an error (exit 2) and nothing lands. What
    lands is recorded, so `runs undo` takes back exactly that; what was left
    out is listed. A three-way apply: paths that hold uncommitted changes of
    yours are named before anything is written, and merged, never
    overwritten; when they conflict with the run's, nothing is written and
    the files are named. The source's index is left as it is.
    """
    from ..runs import apply

    emit(apply.apply(out_dir, only, exclude), as_json, apply_text)


def discard_text(report: dict) -> str:
    lines = []
    if report["removedWorktree"]:
        lines.append(f"removed worktree {report['removedWorktree']}")
    if report["deletedBranch"]:
        dropped = report["droppedCommits"]
        note = f" and its {dropped} unlanded commit(s)" if dropped else ""
        lines.append(f"deleted branch {report['deletedBranch']}{note}")
    return "\n".join(lines) or f"nothing left to discard for {report['outDir']}"


@click.command("discard")
@run_ref()
@click.option(
    "--force", is_flag=True, help="Also when the run's branch has commits the source lacks."
)
@JSON_OPTION
def runs_discard(out_dir: str, force: bool, as_json: bool) -> None:
    """Remove a finished --worktree run's worktree and its delegate/… branch."""
    from ..runs import discard

    emit(discard.discard(out_dir, force), as_json, discard_text)


@click.command("diff")
@run_ref("run")
@click.option("--stat", "mode", flag_value="stat", help="A diffstat instead of the patch.")
@click.option("--name-only", "mode", flag_value="name-only", help="Only the changed paths.")
@click.option("--color/--no-color", "color", default=None, help="Colour (default: on a terminal).")
def runs_diff(run: str, mode: str | None, color: bool | None) -> None:
    """What RUN itself changed: the patch from its change record (new files included).

    RUN is a run directory or a run id. The patch is the run's own, however the
    work tree moved on since; on a terminal it is coloured and paged like git.
    """
    from ..runs import diff

    tty = sys.stdout.isatty()
    data = diff.diff(run, mode or "patch", tty if color is None else color)
    if tty and data.count(b"\n") > 40:
        _page(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _page(data: bytes) -> None:
    """Show `data` through the user's pager ($PAGER, else less -FRX), as git does."""
    import shlex
    import subprocess

    pager = os.environ.get("GIT_PAGER") or os.environ.get("PAGER") or "less -FRX"
    try:
        proc = subprocess.Popen(shlex.split(pager), stdin=subprocess.PIPE)
    except (OSError, ValueError):
        sys.stdout.buffer.write(data)
        return
    try:
        proc.communicate(data)
    except (BrokenPipeError, KeyboardInterrupt):
        pass


def undo_text(report: dict) -> str:
    if not report["restored"] and report.get("left"):
        return "\n".join(f"left {item['path']}: {item['reason']}" for item in report["left"])
    if not report["restored"]:
        return f"nothing to undo: the run changed no file ({report['outDir']})"
    what = "its apply into" if report["undid"] == "apply" else "its change in"
    lines = [f"took back {what} {report['workTree']} ({len(report['restored'])} path(s)):"]
    lines += [f"  {path}" for path in report["restored"]]
    lines += [f"left {item['path']}: {item['reason']}" for item in report.get("left") or []]
    return "\n".join(lines)


@click.command("undo")
@run_ref("run")
@JSON_OPTION
def runs_undo(run: str, as_json: bool) -> None:
    """Take back exactly what RUN changed, while every path it touched holds what it left.

    For a worktree run that was applied, the apply is taken back in the source.
    A path changed since the run is named and nothing is changed (exit 2).
    """
    from ..runs import undo

    emit(undo.undo(run), as_json, undo_text)


def register(runs: click.Group) -> None:
    """Add these commands to the `runs` group."""
    for command in (runs_apply, runs_discard, runs_diff, runs_undo, runs_prune):
        runs.add_command(command)
