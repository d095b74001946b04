"""`delegate fanout`, `delegate batch` and `delegate review`: runs side by side."""

from __future__ import annotations

import os
import sys

import click

from .. import durations, jsjson
from ..errors import UserError
from .output import (
    CHECK_OPTION,
    JSON_OPTION,
    SETUP_OPTION,
    cwd_of,
    emit,
    wants_json,
)

# ---------------------------------------------------------------- fanout


def _positive_jobs(_ctx, _param, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise click.BadParameter("use 1 or more", param_hint="--jobs")
    return value


#: fanout and batch confine their runs unless told not to (relay/confine.py).
CONFINE_OPTION = click.option(
    "--confine/--no-confine", default=True, show_default=True,
    help="Confine each run with bubblewrap where it works here: it writes its worktree, its "
    "run directory, its CLI's own state and a /tmp of its own, nothing else.",
)  # fmt: skip

#: fanout and batch (and `runs watch`) say when a run ends only when asked (notify.py).
NOTIFY_OPTION = click.option(
    "--notify", is_flag=True,
    help="Say when each run ends: a desktop notification (notify-send or osascript) and "
    "notify.command from $XDG_CONFIG_HOME/delegate-skills/settings.json.",
)  # fmt: skip


@click.command("fanout")
@click.option(
    "--brief", type=click.Path(exists=True, dir_okay=False), required=True, help="Brief file."
)
@click.option(
    "--cd",
    "cd",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Repository to branch the worktrees from (default: here).",
)
@click.option("--lane", "lanes", multiple=True, help="Run through this fleet lane (repeatable).")
@click.option(
    "--implementer", "implementers", multiple=True, help="Run this implementer (repeatable)."
)
@click.option(
    "--jobs", type=int, default=None, callback=_positive_jobs,
    help="Runs at once (default: all of them).",
)  # fmt: skip
@click.option("--timeout", default=None, help="Each run's watchdog, as h/m/s (e.g. 45m).")
@click.option("--attempts", type=click.IntRange(min=1), default=1,
              help="Run each lane or implementer this many times.")  # fmt: skip
@click.option("--host", "hosts", multiple=True, metavar="NAME",
              help="Run on this machine over your ssh (repeatable: each lane or implementer "
                   "runs once per host).")  # fmt: skip
@SETUP_OPTION
@CHECK_OPTION
@click.option("--review-by", "review_by", default=None, metavar="LANE",
              help="Have this lane's implementer review every completed run.")  # fmt: skip
@CONFINE_OPTION
@NOTIFY_OPTION
@JSON_OPTION
def fanout_command(
    brief: str,
    cd: str | None,
    lanes: tuple[str, ...],
    implementers: tuple[str, ...],
    jobs: int | None,
    timeout: str | None,
    attempts: int,
    hosts: tuple[str, ...],
    setup: str | None,
    check: str | None,
    review_by: str | None,
    confine: bool,
    notify: bool,
    as_json: bool,
) -> None:
    """Run one brief on several lanes or implementers at once, each in its own worktree.

    Each run is `delegate relay KEY --worktree`: a new branch delegate/<run id>
    from HEAD, outside the source tree. Prints a comparison table (JSON on a pipe
    or with --json: `runs`). Ctrl-C aborts every run. Nothing is committed or
    applied: land the run you keep with `delegate runs apply`, drop the rest with
    `delegate runs discard`. With --notify, each run that ends is announced once
    (a desktop notification, and notify.command from your settings file). Exit
    0 when every run completed, 1 when one did not, 2 on a usage error, 128+n
    after signal n.
    """
    from ..runs.attempts import expand, too_many
    from . import fanout
    from .watch import notifier

    if timeout is not None and durations.parse_timeout_ms(timeout) is None:
        raise click.BadParameter("use an h/m/s duration such as 30m or 90s", param_hint="--timeout")
    refused = too_many(len(lanes) + len(implementers), len(hosts), attempts)
    if refused is not None:
        raise click.BadParameter(refused, param_hint="--attempts")
    ended = notifier(notify)
    workdir = cwd_of(cd)
    planned = fanout.plan(workdir, list(lanes), list(implementers))
    hooks = [*_hook_args(setup, check), "--confine" if confine else "--no-confine"]
    targets = expand(planned, list(hosts), attempts, hooks)

    def progress(line: str) -> None:
        click.echo(f"fanout: {line}", err=True)

    live = sys.stderr.isatty()
    runner = fanout.Fanout(
        targets, os.path.abspath(brief), workdir, jobs or len(targets), timeout,
        (lambda _line: None) if live else progress,
    )  # fmt: skip
    runner.on_end = ended
    rows = _run_live(runner) if live else runner.run()
    if review_by is not None and runner.interrupted is None:
        _review_rows(rows, review_by, progress)
    if wants_json(as_json):
        click.echo(jsjson.stringify({"runs": rows}, 2))
    else:
        click.echo(fanout.table(rows))
    sys.exit(fanout.exit_code(rows, runner.interrupted))


def _hook_args(setup: str | None, check: str | None) -> list[str]:
    """Relay flags for --setup and --check."""
    args = []
    for flag, command in (("--setup", setup), ("--check", check)):
        if command is not None:
            if not command.strip():
                raise click.BadParameter("needs a command", param_hint=flag)
            args += [flag, command]
    return args


@click.command("review")
@click.argument("run", metavar="RUN", required=False)
@click.option("--last", is_flag=True, help="Review the run started last on this machine.")
@click.option("--lane", default=None, help="The reviewer: through this fleet lane.")
@click.option("--implementer", default=None, help="The reviewer: this implementer.")
@click.option("--allow-self", is_flag=True, help="Let an implementer review its own run.")
@click.option("--out-dir", default=None, type=click.Path(file_okay=False),
              help="The review run's directory (default: new, under the run root).")  # fmt: skip
@click.option("--timeout", default=None, help="The review run's watchdog, as h/m/s.")
@click.option("--host", default=None, metavar="NAME",
              help="Run the reviewer on that machine, over your ssh.")  # fmt: skip
@JSON_OPTION
def review_command(
    run: str | None, last: bool, lane: str | None, implementer: str | None, allow_self: bool,
    out_dir: str | None, timeout: str | None, host: str | None, as_json: bool,
) -> None:  # fmt: skip
    """Have another implementer review what RUN changed, read-only, for a verdict.

    The reviewer gets RUN's brief and patch and answers with a verdict
    (approve or request-changes) and findings; its result.json gains `review`
    ({verdict, findings, raw}; verdict null when the answer has no valid
    block). A run is not reviewed by its own implementer unless --allow-self.
    Exit: the review run's exit code; 2 on a usage error.
    """
    from ..relay.rundir import default_root, ensure_private_root
    from ..runs import review
    from ..runs.view import LAST

    if last == (run is not None):
        raise click.UsageError("name one run: RUN (a directory or run id) or --last")
    if timeout is not None and durations.parse_timeout_ms(timeout) is None:
        raise click.BadParameter("use an h/m/s duration such as 30m", param_hint="--timeout")
    if out_dir is None:
        root = default_root()
        ensure_private_root(root)
        out_dir = os.path.join(root, f"review-{os.urandom(4).hex()}")
    code, result = review.review(LAST if last else run, os.path.abspath(out_dir), lane,
                                 implementer, allow_self, timeout, host=host)  # fmt: skip
    emit(result, as_json, review_text)
    sys.exit(code)


def review_text(result: dict) -> str:
    verdict = result["review"]["verdict"]
    lines = [f"review of {result['reviewOf']} by {result.get('tool') or '?'}: "
             f"{verdict or 'no verdict (the answer had no valid block; see raw)'}"]  # fmt: skip
    for finding in result["review"]["findings"]:
        where = finding["file"] or "?"
        if finding["line"] is not None:
            where += f":{finding['line']}"
        lines.append(f"  [{finding['severity'] or '?'}] {where}: {finding['text']}")
    lines.append(f"review run: {os.path.dirname(result.get('briefPath') or '') or '?'}")
    return "\n".join(lines)


def _run_live(runner) -> list[dict]:
    """Run a fanout or batch with the live table of its runs on the terminal."""
    from .watch import LiveWhile

    with LiveWhile(runner.out_dirs):
        return runner.run()


@click.command("batch")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--cd", type=click.Path(file_okay=False, exists=True),
              help="The repository to run in (default: the current directory).")  # fmt: skip
@click.option("--jobs", type=click.IntRange(min=1), help="Runs at once (default: all).")
@SETUP_OPTION
@CHECK_OPTION
@CONFINE_OPTION
@NOTIFY_OPTION
@JSON_OPTION
def batch_command(
    file: str, cd: str | None, jobs: int | None, setup: str | None, check: str | None,
    confine: bool, notify: bool, as_json: bool,
) -> None:  # fmt: skip
    """Run a list of tasks (each its own brief, lane or implementer) in parallel worktrees.

    FILE is JSON: {"tasks": [{"brief": "a.md", "lane": "feature"}, {"brief":
    "b.md", "implementer": "claude", "timeout": "30m", "args": [...]}]}, brief
    paths relative to FILE. FILE is code: a task's --setup and --check in
    args run as shell commands, as this command's own do; run only a file you
    would run as a script. Every task is checked in full (its fields, host and
    relay flags, as the relay checks them) before any run starts; a bad task
    is one line naming it, exit 2, and nothing is made. Runs as fanout does
    and prints one table (JSON on a pipe or with --json). --notify as
    fanout's: what to run comes from your settings file, never from FILE.
    Exit codes as fanout's.
    """
    from . import batch, fanout
    from .watch import notifier

    ended = notifier(notify)
    workdir = cwd_of(cd)
    hooks = [*_hook_args(setup, check), "--confine" if confine else "--no-confine"]
    targets = batch.load(file, workdir, hooks)
    for target in targets:
        target.args = [*hooks, *target.args]

    def progress(line: str) -> None:
        click.echo(f"batch: {line}", err=True)

    live = sys.stderr.isatty()
    runner = fanout.Fanout(targets, "", workdir, jobs or len(targets), None,
                           (lambda _line: None) if live else progress)  # fmt: skip
    runner.on_end = ended
    rows = _run_live(runner) if live else runner.run()
    if wants_json(as_json):
        click.echo(jsjson.stringify({"runs": rows}, 2))
    else:
        click.echo(fanout.table(rows))
    sys.exit(fanout.exit_code(rows, runner.interrupted))


def _review_rows(rows: list[dict], lane: str, progress) -> None:
    """Review every completed run through `lane`; each row gains review (verdict) and reviewRun."""
    from ..relay.rundir import default_root
    from ..runs import review

    for row in rows:
        if row["status"] != "completed" or not row["outDir"]:
            continue
        out = os.path.join(default_root(), f"review-{os.urandom(4).hex()}")
        try:
            _code, result = review.review(row["outDir"], out, lane=lane)
        except UserError as problem:
            row.update(review=None, reviewRun=None, reviewError=str(problem))
            continue
        row.update(review=result["review"]["verdict"], reviewRun=out)
        progress(f"reviewed {row['outDir']}: {row['review']}")
