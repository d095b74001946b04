"""`delegate runs`: list, show, wait for, cancel, follow and compare runs."""

from __future__ import annotations

import os
import sys

import click

from .. import durations, jsjson
from .clirun import group_settings, help_if_bare
from .output import (
    JSON_OPTION,
    emit,
    run_ref,
    wants_json,
)
from .pr_cli import runs_pr
from .usage_cli import runs_usage


@click.group(**group_settings())
def runs() -> None:
    """List relay runs, show one, wait for one, and land or drop a --worktree run."""
    help_if_bare()


runs.add_command(runs_usage)
runs.add_command(runs_pr)


@runs.command("list")
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Also look here (repeatable).",
)
@click.option(
    "--repo",
    type=click.Path(file_okay=False, exists=True),
    help="Only runs on this repository (e.g. --repo .).",
)
@click.option(
    "--status",
    "statuses",
    multiple=True,
    metavar="STATUS",
    help="Only runs with this status: running, completed, failed, aborted, … (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="JSON even on a terminal.")
def runs_list(
    roots: tuple[str, ...], repo: str | None, statuses: tuple[str, ...], as_json: bool
) -> None:
    """Every run the relays on this machine recorded, newest first.

    Runs recorded under another state dir of yours (an MCP server started
    without your XDG_STATE_HOME keeps its own) are listed too. Run directories
    under the run root (and each --root) that no relay here recorded are listed
    as `foreign`; nothing acts on them. On a terminal, a table: id, age,
    implementer (lane), status, landing, repository, what the run changed and,
    where the implementer reported it, the tokens it used.
    """
    from ..runs import view as runs_module

    def warn(line: str) -> None:
        click.echo(f"delegate: {line}", err=True)

    found = runs_module.list_runs([*runs_module.default_roots(), *roots], warn)
    if repo is not None:
        found = [run for run in found if _in_repo(run["repository"], _repo_top(repo))]
    if statuses:
        found = [run for run in found if run["status"] in statuses]
    if wants_json(as_json):
        click.echo(jsjson.stringify({"runs": found}, 2))
        return
    click.echo(runs_table(found) if found else "no runs found")


def _repo_top(path: str) -> str:
    from ..gitmeta import repo_paths

    top = repo_paths(path).toplevel
    if top is None:
        raise click.BadParameter(f"{path} is not in a git repository", param_hint="--repo")
    return os.path.realpath(top)


def _in_repo(where: str | None, top: str) -> bool:
    if not where:
        return False
    real = os.path.realpath(where)
    return real == top or real.startswith(top + os.sep)


def _age(started: str | None) -> str:
    from ..runs.view import parse_iso, utc_now

    begin = parse_iso(started)
    if begin is None:
        return "?"
    seconds = max(0, int((utc_now() - begin).total_seconds()))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def runs_table(found: list[dict]) -> str:
    """`runs list` for a person: one row per run, newest first (with a tokens column when
    an implementer reported its usage)."""
    home = os.path.expanduser("~")
    header = ("id", "age", "implementer", "status", "landing", "repository", "changes")
    counted = any(run.get("tokens") is not None for run in found)
    header = (*header, "tokens") if counted else header
    rows = []
    for run in found:
        who = run["implementer"] or "?"
        if run["lane"]:
            who += f" ({run['lane']})"
        repo = run["repository"] or "?"
        if repo == home or repo.startswith(home + os.sep):
            repo = "~" + repo[len(home) :]
        totals = run["changes"]
        changed = (
            f"{totals['filesChanged']} file(s) +{totals['linesAdded']} -{totals['linesRemoved']}"
            if totals
            else "-"
        )
        tokens = run.get("tokens")
        shown = [str(tokens) if tokens is not None else "-"] if counted else []
        rows.append((run["id"] or "-", _age(run["startedAt"]), who, run["status"],
                     run["landing"] or "-", repo, changed, *shown))  # fmt: skip
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    return "\n".join(
        "  ".join(f"{cell:<{w}}" for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in (header, *rows)
    )


def _run_text(run) -> str:
    from ..relay.main import load_adapter
    from ..relay.report import summary

    implementer = run.record.text("implementer") if run.record is not None else None
    adapter = load_adapter(implementer) if implementer else None
    if run.result is None or adapter is None:
        return jsjson.stringify(run.summary(), 2)
    return summary(adapter, run.result, [], os.path.join(run.out_dir, "result.json")).rstrip("\n")


@runs.command("show")
@run_ref()
@click.option("--json", "as_json", is_flag=True, help="JSON even on a terminal.")
def runs_show(out_dir: str, as_json: bool) -> None:
    """Print one run: its state, and its result and summary once it has one."""
    from ..runs import view as runs_module

    run = runs_module.find(out_dir)
    if wants_json(as_json):
        click.echo(jsjson.stringify({**run.summary(), "result": run.result}, 2))
    else:
        click.echo(_run_text(run))


#: What `runs wait` and `runs logs -f` exit with on Ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED = 130


def _stop_following() -> None:
    """Ctrl-C while following a run: one line, exit 130; the run itself is not touched."""
    click.echo("delegate: interrupted; the run goes on (it was not stopped)", err=True)
    sys.exit(INTERRUPTED)


@runs.command("wait")
@run_ref()
@click.option(
    "--timeout", "timeout", default=None, help="Give up after this h/m/s duration (exit 124)."
)
@click.option("--json", "as_json", is_flag=True, help="JSON even on a terminal.")
def runs_wait(out_dir: str, timeout: str | None, as_json: bool) -> None:
    """Wait until the run has a result; exit with its exit code.

    Exit codes: the run's own exit code once it has ended; 124 when --timeout
    passes first; 1 when the run was lost (its relay ended without a result);
    2 when RUN names no run; 130 when interrupted (Ctrl-C); the run goes on, and
    `runs wait` takes it up again.
    """
    from ..runs import view as runs_module
    from ..runs.waiting import wait

    seconds = None
    if timeout is not None:
        ms = durations.parse_timeout_ms(timeout)
        if ms is None:
            raise click.BadParameter(
                "use an h/m/s duration such as 30m or 90s", param_hint="--timeout"
            )
        seconds = ms / 1000
    try:
        run, timed_out = wait(out_dir, seconds)
    except KeyboardInterrupt:
        _stop_following()
    state = {**run.summary(), "result": run.result}
    click.echo(jsjson.stringify(state, 2) if wants_json(as_json) else _run_text(run))
    if timed_out:
        click.echo(f"delegate: {out_dir}: still {state['status']} after {timeout}", err=True)
        sys.exit(124)
    if state["status"] in ("lost", "orphaned"):
        click.echo(
            f"delegate: {out_dir}: the relay ended without writing a result (lost)", err=True
        )
        sys.exit(1)
    sys.exit(runs_module.exit_code_of(run))


@runs.command("cancel")
@run_ref()
@JSON_OPTION
def runs_cancel(out_dir: str, as_json: bool) -> None:
    """End a running run as Ctrl-C would: its relay stops the implementer and all it started.

    The run's result is `aborted`; nothing of it is left running. A finished
    run is left as it is.
    """
    from ..runs.waiting import cancel

    emit(cancel(out_dir), as_json, cancel_text)


def cancel_text(report: dict) -> str:
    name = report["id"] or report["outDir"]
    if not report["cancelled"]:
        return f"run {name} had already ended: {report['status']}"
    left = report["leftRunning"]
    tail = f"; still running: pid {', '.join(map(str, left))}" if left else ""
    return f"cancelled run {name}: {report['status']}{tail}"


@runs.command("logs")
@run_ref()
@click.option("-f", "--follow", is_flag=True, help="Keep showing new events until the run ends.")
def runs_logs(out_dir: str, follow: bool) -> None:
    """The implementer's events of RUN as readable lines (its kind and text).

    With -f, exit 0 when the run ends, or 130 when interrupted (Ctrl-C); the run
    goes on.
    """
    from ..runs import logs as runlogs

    if follow:
        try:
            runlogs.follow(out_dir, lambda line: click.echo(line))
        except KeyboardInterrupt:
            _stop_following()
        return
    for line in runlogs.iter_all(out_dir):
        click.echo(line)


@runs.command("watch")
@click.option(
    "--repo",
    type=click.Path(file_okay=False, exists=True),
    help="Only runs on this repository (e.g. --repo .).",
)
@click.option(
    "--notify", is_flag=True,
    help="Say when each run ends: a desktop notification (notify-send or osascript) and "
    "notify.command from $XDG_CONFIG_HOME/delegate-skills/settings.json.",
)  # fmt: skip
def runs_watch(repo: str | None, notify: bool) -> None:
    """Show the runs in flight, refreshed each second, until none is running.

    On a terminal a table (run, implementer, status, elapsed, last event)
    redrawn in place, and a line with a bell when a run ends; on a pipe one
    line per run that starts or ends. With --notify, each run that ends is
    announced once (a desktop notification, and notify.command from your
    settings file).
    """
    from ..runs import view as runs_module
    from .watch import notifier, watch

    ended = notifier(notify)
    top = _repo_top(repo) if repo is not None else None
    seen: list[str] = []

    def in_flight() -> list[str]:
        for run in runs_module.list_runs(runs_module.default_roots()):
            wanted = top is None or _in_repo(run["repository"], top)
            if run["status"] == "running" and wanted and run["outDir"] not in seen:
                seen.append(run["outDir"])
        return list(seen)

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    if not watch(in_flight, write=write, tty=sys.stdout.isatty(), on_end=ended):
        click.echo("no runs in flight")


@runs.command("compare")
@click.argument("refs", nargs=-1, required=True, metavar="RUN...")
@JSON_OPTION
def runs_compare(refs: tuple[str, ...], as_json: bool) -> None:
    """Runs side by side to pick one: what each changed, check, review verdict, tokens, time.

    The review verdict is that of the latest `delegate review` of the run, as
    the run store recorded it.
    """
    from ..runs.attempts import compare

    rows = compare(list(refs))
    emit({"runs": rows}, as_json, compare_text)


def compare_text(report: dict) -> str:
    header = ("run", "implementer", "status", "files", "+lines", "-lines", "check", "review",
              "tokens", "time")  # fmt: skip
    body = []
    for row in report["runs"]:
        totals = row["changes"] or {}
        check = "-" if row["check"] is None else ("pass" if row["check"] == 0 else "FAIL")
        seconds = "-" if row["seconds"] is None else f"{row['seconds']:.0f}s"
        body.append(tuple(str(cell) for cell in (
            row["id"] or row["outDir"], row["implementer"] or "?", row["status"],
            totals.get("filesChanged", "-"), totals.get("linesAdded", "-"),
            totals.get("linesRemoved", "-"), check, row["review"] or "-",
            "-" if row["tokens"] is None else row["tokens"], seconds,
        )))  # fmt: skip
    widths = [max(len(r[i]) for r in (header, *body)) for i in range(len(header))]
    lines = ["  ".join(f"{c:<{w}}" for c, w in zip(r, widths, strict=True)).rstrip()
             for r in (header, *body)]  # fmt: skip
    lines.append("land the one you keep: delegate runs apply <run>; then delegate runs prune")
    return "\n".join(lines)
