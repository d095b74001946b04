"""The `delegate` command: every capability of the core, runnable by hand.

Exit codes: 0 success; 1 a check found problems (doctor); 2 a usage error, a
bad or untrusted config, or a refused write. Relays keep their own codes.
"""

from __future__ import annotations

import functools
import os
import sys

import click

from .. import fleet, jsjson, lanes, registry, schema
from ..errors import UserError, did_you_mean
from .clirun import group_settings, help_if_bare, run_group

CWD_OPTION = click.option(
    "--cwd",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Directory whose repository to use (default: the current one).",
)


def _cwd(value: str | None) -> str:
    return os.path.abspath(value) if value else os.getcwd()


def _print_json(document, indent: int | None = 2) -> None:
    click.echo(jsjson.stringify(document, indent))


JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="JSON even on a terminal.")
SETUP_OPTION = click.option(
    "--setup", default=None, metavar="CMD",
    help="Shell command run in each new worktree before the implementer.",
)  # fmt: skip
CHECK_OPTION = click.option(
    "--check", default=None, metavar="CMD",
    help="Shell command run in each worktree after the implementer (pass/fail).",
)  # fmt: skip


def _wants_json(as_json: bool) -> bool:
    """The output rule: JSON with --json or on a pipe, readable text on a terminal."""
    return as_json or not sys.stdout.isatty()


def plain_text(document: dict) -> str:
    """A JSON object as `key: value` lines, for a person at a terminal."""
    lines = []
    for key, value in document.items():
        if value is None:
            shown = "-"
        elif isinstance(value, bool):
            shown = "yes" if value else "no"
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            shown = ", ".join(value) or "(none)"
        elif isinstance(value, (dict, list)):
            shown = jsjson.stringify(value)
        else:
            shown = str(value)
        lines.append(f"{key}: {shown}")
    return "\n".join(lines)


def _emit(document: dict, as_json: bool, text=plain_text, indent: int | None = 2) -> None:
    """Print `document` by the output rule; `text` renders it for a terminal."""
    click.echo(jsjson.stringify(document, indent) if _wants_json(as_json) else text(document))


@click.group(**group_settings())
@click.version_option(package_name="delegate-skills", prog_name="delegate")
def cli() -> None:
    """Delegate a brief to a CLI coding agent, and manage the lanes that choose it."""
    help_if_bare()


# ---------------------------------------------------------------- config


@cli.group(**group_settings())
def config() -> None:
    """Read, check and write fleet config files (delegate-fleet.v1)."""
    help_if_bare()


@config.command("load")
@CWD_OPTION
@JSON_OPTION
def config_load(cwd: str | None, as_json: bool) -> None:
    """Print the effective lanes: global, with project lanes replacing them whole."""
    _emit(fleet.Effective(_cwd(cwd)).report(), as_json, config_text)


def config_text(report: dict) -> str:
    """The effective config for a person at a terminal."""
    project = report["projectPath"] or "(not in a repository)"
    if report["projectPresent"]:
        project += "  (approved)" if report["projectTrusted"] else "  (NOT approved)"
    elif report["projectPath"]:
        project += "  (none)"
    lines = [
        f"global:  {report['globalPath']}" + ("" if report["globalPresent"] else "  (none)"),
        f"project: {project}",
    ]
    for name, entry in report["lanes"].items():
        dials = " ".join(
            f"{k}={jsjson.stringify(v)}" for k, v in entry.items() if k != "implementer"
        )
        lines.append(f"  {name:<16} {entry.get('implementer', '?'):<12} {dials}")
    if not report["lanes"]:
        lines.append("no lanes configured (see: delegate lane set --help)")
    return "\n".join(lines)


@config.command("validate")
@click.argument("file", type=click.Path(dir_okay=False))
@JSON_OPTION
def config_validate(file: str, as_json: bool) -> None:
    """Check FILE against delegate-fleet.v1 without writing anything."""
    document = fleet.read_document_file(os.path.abspath(file), file)
    schema.check_fleet(document, file)
    report = {"ok": True, "path": os.path.abspath(file), "lanes": list(document["lanes"])}
    _emit(report, as_json)


@config.command("write")
@click.option("--scope", type=click.Choice(fleet.SCOPES), required=True)
@CWD_OPTION
@click.argument("file", type=click.Path(dir_okay=False))
@JSON_OPTION
def config_write(scope: str, cwd: str | None, file: str, as_json: bool) -> None:
    """Replace a scope's config with FILE. A project write approves it."""
    document = fleet.read_document_file(os.path.abspath(file), file)
    schema.check_fleet(document, file)
    _emit(fleet.write_document(scope, _cwd(cwd), document), as_json)


@config.command("approve")
@CWD_OPTION
@JSON_OPTION
def config_approve(cwd: str | None, as_json: bool) -> None:
    """Approve the project config as it is on disk. Review it first."""
    _emit(fleet.approve_current(_cwd(cwd)), as_json)


@config.command("path")
@CWD_OPTION
@JSON_OPTION
def config_path(cwd: str | None, as_json: bool) -> None:
    """Print where the global and project configs and the approval live."""
    from .. import approval, gitmeta

    paths = gitmeta.repo_paths(_cwd(cwd))
    report = {
        "globalPath": fleet.global_config_path(),
        "projectPath": fleet.project_config_path(paths.toplevel) if paths.toplevel else None,
        "approvalPath": approval.approval_path(paths.git_dir) if paths.git_dir else None,
    }
    _emit(report, as_json)


# ---------------------------------------------------------------- lane


@cli.group(**group_settings())
def lane() -> None:
    """Resolve, list and edit fleet lanes."""
    help_if_bare()


@lane.command("resolve")
@click.option("--lane", "lane_name", required=True, help="Lane name.")
@click.option("--implementer", required=True, help="The relay asking (implementer key).")
@CWD_OPTION
@JSON_OPTION
def lane_resolve(lane_name: str, implementer: str, cwd: str | None, as_json: bool) -> None:
    """Print the dials LANE gives IMPLEMENTER's relay (one JSON line on a pipe)."""
    _emit(lanes.resolve(_cwd(cwd), lane_name, implementer), as_json, indent=None)


@lane.command("list")
@CWD_OPTION
@click.option("--json", "as_json", is_flag=True, help="JSON even on a terminal.")
def lane_list(cwd: str | None, as_json: bool) -> None:
    """List the effective lanes, where each comes from, and whether it may dispatch."""
    effective = fleet.Effective(_cwd(cwd))
    rows = []
    for name, entry in effective.lanes().items():
        dials = {k: v for k, v in entry.items() if k not in ("implementer", "source")}
        trusted = entry["source"] == "global" or effective.project_trusted
        rows.append(
            {
                "lane": name,
                "implementer": entry["implementer"],
                "source": entry["source"],
                "trusted": trusted,
                "dials": dials,
            }
        )
    if _wants_json(as_json):
        _print_json({"lanes": rows})
        return
    if not rows:
        click.echo("no lanes configured (see: delegate lane set --help)")
        return
    for row in rows:
        dials = " ".join(f"{k}={jsjson.stringify(v)}" for k, v in row["dials"].items())
        mark = "" if row["trusted"] else "  [not approved]"
        click.echo(f"{row['lane']:<16} {row['implementer']:<12} {row['source']:<8} {dials}{mark}")


def _lane_from_options(implementer: str, options: dict) -> dict:
    lane_doc: dict = {"implementer": implementer}
    for dial in registry.ALL_DIALS:
        value = options.get(dial)
        if value is not None:
            lane_doc[dial] = value
    return lane_doc


@lane.command("set")
@click.argument("name")
@click.option("--implementer", type=click.Choice(registry.KEYS), required=True)
@click.option("--model", help=registry.dial_help("model"))
@click.option("--effort", help=registry.dial_help("effort"))
@click.option("--variant", help=registry.dial_help("variant"))
@click.option("--timeout", help=registry.dial_help("timeout"))
@click.option(
    "--read-only/--no-read-only", "read_only", default=None, help=registry.dial_help("readOnly")
)
@click.option("--sandbox", help=registry.dial_help("sandbox"))
@click.option("--permission-mode", "permission_mode", help=registry.dial_help("permissionMode"))
@click.option("--force/--no-force", "force", default=None, help=registry.dial_help("force"))
@click.option("--provider", help=registry.dial_help("provider"))
@click.option("--scope", type=click.Choice(fleet.SCOPES), required=True)
@CWD_OPTION
@JSON_OPTION
def lane_set(
    name: str, implementer: str, scope: str, cwd: str | None, as_json: bool, **dials
) -> None:
    """Set lane NAME to exactly the implementer and dials given.

    The file is read as it is now, the one lane replaced, the whole document
    checked, then written back. A project edit re-approves the file. A dial
    the chosen implementer does not take is refused.
    """
    options = {
        "model": dials["model"],
        "effort": dials["effort"],
        "variant": dials["variant"],
        "timeout": dials["timeout"],
        "readOnly": dials["read_only"],
        "sandbox": dials["sandbox"],
        "permissionMode": dials["permission_mode"],
        "force": dials["force"],
        "provider": dials["provider"],
    }
    lane_doc = _lane_from_options(implementer, options)
    _emit(fleet.edit_lane(scope, _cwd(cwd), name, lane_doc), as_json)


@lane.command("unset")
@click.argument("name")
@click.option("--scope", type=click.Choice(fleet.SCOPES), required=True)
@CWD_OPTION
@JSON_OPTION
def lane_unset(name: str, scope: str, cwd: str | None, as_json: bool) -> None:
    """Remove lane NAME from a scope's config."""
    _emit(fleet.edit_lane(scope, _cwd(cwd), name, None), as_json)


# ---------------------------------------------------------------- discover, doctor


def discover_table(report: dict) -> str:
    """The discover report for a person at a terminal."""
    lines = []
    for entry in report["discovered"]:
        auth = {True: "logged in", False: "NOT logged in", None: "login unknown"}[
            entry["authenticated"]
        ]
        models = entry["models"]
        shown = ", ".join(models["values"][:4]) + (" …" if len(models["values"]) > 4 else "")
        lines.append(f"{entry['key']:<12} {entry['version'] or '(version unknown)'}")
        lines.append(f"{'':<12} {entry['path']}  ·  {auth}")
        if models["values"]:
            lines.append(f"{'':<12} models: {shown}")
        usage = entry.get("usage")
        if usage:
            lines.append(
                f"{'':<12} sessions: {usage['sessions']}, last used {usage['lastUsed'] or 'never'}"
            )
    if report["missing"]:
        lines.append("not installed: " + ", ".join(m["key"] for m in report["missing"]))
    return "\n".join(lines)


def _discover_progress(entry: dict) -> None:
    """One line on stderr for a CLI that has answered every probe."""
    auth = {True: "logged in", False: "NOT logged in", None: "login unknown"}[
        entry["authenticated"]
    ]
    models = entry["models"]
    parts = [entry["version"] or "(version unknown)", auth]
    if models["status"] in ("reported", "aliases"):
        parts.append(f"{len(models['values'])} models")
    elif models["status"] == "failed":
        parts.append("models: failed")
    click.echo(f"{entry['key']:<12} " + "  ·  ".join(parts), err=True)


@cli.command("discover")
@click.argument("keys", nargs=-1, metavar="[KEY]...")
@click.option("--usage", is_flag=True, help="Add session counts and last use (listings only).")
@click.option("--fresh", is_flag=True, help="Probe every CLI again, whatever the cache holds.")
@click.option(
    "--host", default=None, metavar="NAME",
    help="Discover on that machine, over your ssh (see --host on the relays).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="JSON even on a terminal.")
def discover_command(
    keys: tuple[str, ...], usage: bool, fresh: bool, host: str | None, as_json: bool
) -> None:
    """Find installed implementer CLIs: version, login, models (probes run in parallel).

    Answers are remembered (under $XDG_CACHE_HOME/delegate-skills/) until the
    CLI's binary or sign-in files change, or for 15 minutes for sign-in: a
    second run answers at once. KEY probes only those CLIs. On a terminal,
    stderr shows a line for each CLI as it answers. The JSON is the Node
    bundle's document plus `probed`, `cached` and `probeSeconds`. With --host,
    the document that machine gives, plus `host`, `python`, `git` and `root`.
    """
    from ..discover import discover_cached

    if host is not None:
        _discover_there(host, usage, as_json)
        return

    for key in keys:
        if registry.get(key) is None:
            raise click.BadParameter(
                f"{key!r} is not an implementer{did_you_mean(key, registry.KEYS)} "
                f"(one of: {', '.join(registry.KEYS)})",
                param_hint="KEY",
            )
    from ..discovercache import cache_path

    progress = _discover_progress if sys.stderr.isatty() else None
    if progress is not None and not os.path.exists(cache_path()):
        click.echo("delegate: the first discover probes every CLI and may take a minute",
                   err=True)  # fmt: skip
    report, details = discover_cached(
        with_usage=usage, only=set(keys) or None, fresh=fresh, progress=progress
    )
    from .doctor import missing_tools

    needs = {}
    for entry in report["discovered"]:
        missing = missing_tools(entry["key"])
        if missing:
            needs[entry["key"]] = [tool for tool, _ in missing]
    document = {**report, "probed": details["probed"], "cached": details["cached"],
                "probeSeconds": details["seconds"], "missingTools": needs}  # fmt: skip
    if _wants_json(as_json):
        click.echo(jsjson.stringify(document, 2))
        return
    click.echo(discover_table(report))
    for key, tools in needs.items():
        packages = " ".join(tools).replace("bwrap", "bubblewrap")
        click.echo(f"{key}: its write runs need {' and '.join(tools)} on PATH "
                   f"(sudo apt-get install {packages})")  # fmt: skip
    if details["cached"]:
        click.echo(f"(from the cache: {', '.join(details['cached'])}; --fresh probes them again)")


def _discover_there(host: str, usage: bool, as_json: bool) -> None:
    from ..remote.client import discover_there

    document = discover_there(host, usage)
    if _wants_json(as_json):
        click.echo(jsjson.stringify(document, 2))
        return
    python, git, root = document["python"], document["git"], document["root"]
    click.echo(f"{host}: Python {python}, {git}, runs in {root}")
    click.echo(discover_table(document))


@cli.command("doctor")
@click.option("--lane", "lane_name", default=None, help="Check only this lane.")
@click.option(
    "--host", default=None, metavar="NAME",
    help="Check the lanes against what that machine has installed, over your ssh.",
)  # fmt: skip
@CWD_OPTION
@click.option("--json", "as_json", is_flag=True, help="JSON even on a terminal.")
def doctor_command(lane_name: str | None, host: str | None, cwd: str | None, as_json: bool) -> None:
    """Would each lane dispatch? Exit 0 when all would, 1 otherwise, with the fix for each."""
    from .doctor import doctor

    there = None
    if host is not None:
        from ..remote.client import discover_there

        there = discover_there(host, False)
    report = doctor(_cwd(cwd), lane_name, there)
    if there is not None:
        report["host"] = {key: there[key] for key in ("host", "python", "git", "root")}
    click.echo(jsjson.stringify(report, 2) if _wants_json(as_json) else doctor_text(report))
    sys.exit(0 if report["ok"] else 1)


def doctor_text(report: dict) -> str:
    """The doctor report for a person at a terminal."""
    if not report["lanes"]:
        return "no lanes configured (see: delegate lane set --help)"
    lines = []
    for row in report["lanes"]:
        where = f"{row['implementer'] or '?'} ({row['source'] or 'nowhere'})"
        state = "ok" if row["ok"] else f"{row['problem']}: {row['fix']}"
        lines.append(f"{row['lane']:<16} {where:<24} {state}")
    return "\n".join(lines)


# ---------------------------------------------------------------- runs


@cli.group(**group_settings())
def runs() -> None:
    """List relay runs, show one, wait for one, and land or drop a --worktree run."""
    help_if_bare()


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
    """Runs under the default artifact root (and each --root), newest first.

    On a terminal, a table: id, age, implementer (lane), status, landing,
    repository and what the run changed.
    """
    from ..runs import view as runs_module

    def warn(line: str) -> None:
        click.echo(f"delegate: {line}", err=True)

    found = runs_module.list_runs([*runs_module.default_roots(), *roots], warn)
    if repo is not None:
        found = [run for run in found if _in_repo(run["repository"], _repo_top(repo))]
    if statuses:
        found = [run for run in found if run["status"] in statuses]
    if _wants_json(as_json):
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
    from ..runs.view import _parse_iso, _utc_now

    begin = _parse_iso(started)
    if begin is None:
        return "?"
    seconds = max(0, int((_utc_now() - begin).total_seconds()))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def runs_table(found: list[dict]) -> str:
    """`runs list` for a person: one row per run, newest first."""
    home = os.path.expanduser("~")
    header = ("id", "age", "implementer", "status", "landing", "repository", "changes")
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
        rows.append((run["id"] or "-", _age(run["startedAt"]), who, run["status"],
                     run["landing"] or "-", repo, changed))  # fmt: skip
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    return "\n".join(
        "  ".join(f"{cell:<{w}}" for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in (header, *rows)
    )


def _run_text(run) -> str:
    from ..relay.main import load_adapter
    from ..relay.report import summary

    adapter = load_adapter(run.marker.get("implementer", "")) if run.marker else None
    if run.result is None or adapter is None:
        return jsjson.stringify(run.summary(), 2)
    return summary(adapter, run.result, [], os.path.join(run.out_dir, "result.json")).rstrip("\n")


def run_ref(name: str = "out_dir"):
    """RUN (a run directory, a run id or a unique prefix of one), or --last instead of it."""

    def decorate(command):
        @functools.wraps(command)
        def wrapper(*args, last: bool, **kwargs):
            from ..runs.view import LAST

            given = kwargs.get(name)
            if last == (given is not None):
                raise click.UsageError("name one run: RUN (a directory or run id) or --last")
            if last:
                kwargs[name] = LAST
            return command(*args, **kwargs)

        wrapper = click.option(
            "--last", is_flag=True, help="The run started last on this machine, instead of RUN."
        )(wrapper)
        return click.argument(name, metavar="RUN", required=False)(wrapper)

    return decorate


@runs.command("show")
@run_ref()
@click.option("--json", "as_json", is_flag=True, help="JSON even on a terminal.")
def runs_show(out_dir: str, as_json: bool) -> None:
    """Print one run: its state, and its result and summary once it has one."""
    from ..runs import view as runs_module

    run = runs_module.show(out_dir)
    if _wants_json(as_json):
        click.echo(jsjson.stringify({**run.summary(), "result": run.result}, 2))
    else:
        click.echo(_run_text(run))


@runs.command("wait")
@run_ref()
@click.option(
    "--timeout", "timeout", default=None, help="Give up after this h/m/s duration (exit 124)."
)
@click.option("--json", "as_json", is_flag=True, help="JSON even on a terminal.")
def runs_wait(out_dir: str, timeout: str | None, as_json: bool) -> None:
    """Wait until the run has a result; exit with its exit code (124 on timeout, 1 if lost)."""
    from ..runs import view as runs_module

    seconds = None
    if timeout is not None:
        ms = registry.parse_timeout_ms(timeout)
        if ms is None:
            raise click.BadParameter(
                "use an h/m/s duration such as 30m or 90s", param_hint="--timeout"
            )
        seconds = ms / 1000
    run, timed_out = runs_module.wait(out_dir, seconds)
    state = {**run.summary(), "result": run.result}
    click.echo(jsjson.stringify(state, 2) if _wants_json(as_json) else _run_text(run))
    if timed_out:
        click.echo(f"delegate: {out_dir}: still {state['status']} after {timeout}", err=True)
        sys.exit(124)
    if run.result is None:
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
    from ..runs import view as runs_module

    _emit(runs_module.cancel(out_dir), as_json, cancel_text)


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
    """The implementer's events of RUN as readable lines (its kind and text)."""
    from ..runs import logs as runlogs

    if follow:
        runlogs.follow(out_dir, lambda line: click.echo(line))
        return
    for line in runlogs.iter_all(out_dir):
        click.echo(line)


@runs.command("watch")
@click.option(
    "--repo",
    type=click.Path(file_okay=False, exists=True),
    help="Only runs on this repository (e.g. --repo .).",
)
def runs_watch(repo: str | None) -> None:
    """Show the runs in flight, refreshed each second, until none is running.

    On a terminal a table (run, implementer, status, elapsed, last event)
    redrawn in place, and a line with a bell when a run ends; on a pipe one
    line per run that starts or ends.
    """
    from ..runs import view as runs_module
    from .watch import watch

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

    if not watch(in_flight, write=write, tty=sys.stdout.isatty()):
        click.echo("no runs in flight")


@runs.command("compare")
@click.argument("refs", nargs=-1, required=True, metavar="RUN...")
@JSON_OPTION
def runs_compare(refs: tuple[str, ...], as_json: bool) -> None:
    """Runs side by side to pick one: what each changed, check, review verdict, tokens, time.

    The review verdict is the latest `delegate review` of that run.
    """
    from ..runs import view as runs_module
    from .fanout import tokens_of

    reviews: dict[str, str | None] = {}
    for listed in sorted(runs_module.list_runs(runs_module.default_roots()),
                         key=lambda r: r["startedAt"] or ""):  # fmt: skip
        result = runs_module.Run(listed["outDir"]).result or {}
        if isinstance(result.get("review"), dict) and isinstance(result.get("reviewOf"), str):
            reviews[result["reviewOf"]] = result["review"].get("verdict")
    rows = []
    for ref in refs:
        run = runs_module.show(ref)
        summary, result = run.summary(), run.result or {}
        check = result.get("check") if isinstance(result.get("check"), dict) else None
        name = summary["id"] or summary["outDir"]
        rows.append({
            "id": summary["id"], "outDir": summary["outDir"],
            "implementer": summary["implementer"], "lane": summary["lane"],
            "status": summary["status"], "changes": summary["changes"],
            "check": None if check is None else check.get("exitCode"),
            "review": reviews.get(name) if name in reviews else reviews.get(summary["outDir"]),
            "tokens": tokens_of(result), "seconds": summary["elapsedSeconds"],
        })  # fmt: skip
    _emit({"runs": rows}, as_json, compare_text)


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


@runs.command("prune")
@click.option("--dry-run", is_flag=True, help="Say what would go; remove nothing.")
@click.option("--older-than", "older_than", metavar="AGE",
              help="Only runs started longer ago than this (7d, 12h, 90m).")  # fmt: skip
@click.option("--force", is_flag=True, help="Also runs whose work nobody landed (it is lost).")
@JSON_OPTION
def runs_prune(dry_run: bool, older_than: str | None, force: bool, as_json: bool) -> None:
    """Remove run dirs, worktrees and branches that hold no unlanded work.

    Runs that worked in place and have ended, worktree runs applied or
    discarded or that changed nothing, and worktrees no run names that hold
    nothing. A worktree run with work nobody landed is listed and kept,
    unless --force. Running runs are never touched.
    """
    from ..runs import prune

    seconds = None
    if older_than is not None:
        seconds = prune.parse_age(older_than)
        if seconds is None:
            raise click.BadParameter("use days or an h/m/s duration: 7d, 12h, 90m",
                                     param_hint="--older-than")  # fmt: skip
    _emit(prune.prune(dry_run, seconds, force), as_json, prune_text)


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
    lines.append("review the diff (git diff), re-run the project's gates, then commit it yourself")
    return "\n".join(lines)


@runs.command("apply")
@run_ref()
@JSON_OPTION
def runs_apply(out_dir: str, as_json: bool) -> None:
    """Bring a finished --worktree run's change into its source work tree, without a commit.

    A three-way apply: when the source has changes that conflict with the run's,
    nothing is written and the files are named. The source's index is left as it is.
    """
    from ..runs import landing

    _emit(landing.apply(out_dir), as_json, apply_text)


def discard_text(report: dict) -> str:
    lines = []
    if report["removedWorktree"]:
        lines.append(f"removed worktree {report['removedWorktree']}")
    if report["deletedBranch"]:
        dropped = report["droppedCommits"]
        note = f" and its {dropped} unlanded commit(s)" if dropped else ""
        lines.append(f"deleted branch {report['deletedBranch']}{note}")
    return "\n".join(lines) or f"nothing left to discard for {report['outDir']}"


@runs.command("discard")
@run_ref()
@click.option(
    "--force", is_flag=True, help="Also when the run's branch has commits the source lacks."
)
@JSON_OPTION
def runs_discard(out_dir: str, force: bool, as_json: bool) -> None:
    """Remove a finished --worktree run's worktree and its delegate/… branch."""
    from ..runs import landing

    _emit(landing.discard(out_dir, force), as_json, discard_text)


@runs.command("diff")
@run_ref("run")
@click.option("--stat", "mode", flag_value="stat", help="A diffstat instead of the patch.")
@click.option("--name-only", "mode", flag_value="name-only", help="Only the changed paths.")
@click.option("--color/--no-color", "color", default=None, help="Colour (default: on a terminal).")
def runs_diff(run: str, mode: str | None, color: bool | None) -> None:
    """What RUN itself changed: the patch from its change record (new files included).

    RUN is a run directory or a run id. The patch is the run's own, however the
    work tree moved on since; on a terminal it is coloured and paged like git.
    """
    from ..runs import rundiff

    tty = sys.stdout.isatty()
    data = rundiff.diff(run, mode or "patch", tty if color is None else color)
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
    if not report["restored"]:
        return f"nothing to undo: the run changed no file ({report['outDir']})"
    what = "its apply into" if report["undid"] == "apply" else "its change in"
    lines = [f"took back {what} {report['workTree']} ({len(report['restored'])} path(s)):"]
    lines += [f"  {path}" for path in report["restored"]]
    return "\n".join(lines)


@runs.command("undo")
@run_ref("run")
@JSON_OPTION
def runs_undo(run: str, as_json: bool) -> None:
    """Take back exactly what RUN changed, while every path it touched holds what it left.

    For a worktree run that was applied, the apply is taken back in the source.
    A path changed since the run is named and nothing is changed (exit 2).
    """
    from ..runs import rundiff

    _emit(rundiff.undo(run), as_json, undo_text)


# ---------------------------------------------------------------- fanout


def _positive_jobs(_ctx, _param, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise click.BadParameter("use 1 or more", param_hint="--jobs")
    return value


@cli.command("fanout")
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
    as_json: bool,
) -> None:
    """Run one brief on several lanes or implementers at once, each in its own worktree.

    Each run is `delegate relay KEY --worktree`: a new branch delegate/<run id>
    from HEAD, outside the source tree. Prints a comparison table (JSON on a pipe
    or with --json: `runs`). Ctrl-C aborts every run. Nothing is committed or
    applied: land the run you keep with `delegate runs apply`, drop the rest with
    `delegate runs discard`. Exit 0 when every run completed, 1 when one did not,
    2 on a usage error, 128+n after signal n.
    """
    from . import fanout

    if timeout is not None and registry.parse_timeout_ms(timeout) is None:
        raise click.BadParameter("use an h/m/s duration such as 30m or 90s", param_hint="--timeout")
    workdir = _cwd(cd)
    planned = fanout.plan(workdir, list(lanes), list(implementers))
    hooks = _hook_args(setup, check)
    targets = [
        fanout.Target(
            t.implementer, t.lane, args=hooks, host=host, task=f"#{n + 1}" if attempts > 1 else None
        )
        for t in planned
        for host in hosts or (None,)
        for n in range(attempts)
    ]

    def progress(line: str) -> None:
        click.echo(f"fanout: {line}", err=True)

    live = sys.stderr.isatty()
    runner = fanout.Fanout(
        targets, os.path.abspath(brief), workdir, jobs or len(targets), timeout,
        (lambda _line: None) if live else progress,
    )  # fmt: skip
    rows = _run_live(runner) if live else runner.run()
    if review_by is not None and runner.interrupted is None:
        _review_rows(rows, review_by, progress)
    if _wants_json(as_json):
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


@cli.command("review")
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
    if timeout is not None and registry.parse_timeout_ms(timeout) is None:
        raise click.BadParameter("use an h/m/s duration such as 30m", param_hint="--timeout")
    if out_dir is None:
        root = default_root()
        ensure_private_root(root)
        out_dir = os.path.join(root, f"review-{os.urandom(4).hex()}")
    code, result = review.review(LAST if last else run, os.path.abspath(out_dir), lane,
                                 implementer, allow_self, timeout, host=host)  # fmt: skip
    _emit(result, as_json, review_text)
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


@cli.command("batch")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--cd", type=click.Path(file_okay=False, exists=True),
              help="The repository to run in (default: the current directory).")  # fmt: skip
@click.option("--jobs", type=click.IntRange(min=1), help="Runs at once (default: all).")
@SETUP_OPTION
@CHECK_OPTION
@JSON_OPTION
def batch_command(
    file: str, cd: str | None, jobs: int | None, setup: str | None, check: str | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Run a list of tasks (each its own brief, lane or implementer) in parallel worktrees.

    FILE is JSON: {"tasks": [{"brief": "a.md", "lane": "feature"}, {"brief":
    "b.md", "implementer": "claude", "timeout": "30m", "args": [...]}]}, brief
    paths relative to FILE. Every task is checked before any run starts. Runs
    as fanout does and prints one table (JSON on a pipe or with --json). Exit
    codes as fanout's.
    """
    from . import batch, fanout

    workdir = _cwd(cd)
    targets = batch.load(file, workdir)
    hooks = _hook_args(setup, check)
    for target in targets:
        target.args = [*hooks, *target.args]

    def progress(line: str) -> None:
        click.echo(f"batch: {line}", err=True)

    live = sys.stderr.isatty()
    runner = fanout.Fanout(targets, "", workdir, jobs or len(targets), None,
                           (lambda _line: None) if live else progress)  # fmt: skip
    rows = _run_live(runner) if live else runner.run()
    if _wants_json(as_json):
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


# ---------------------------------------------------------------- mcp


@cli.group("mcp", invoke_without_command=True)
@click.pass_context
def mcp_group(ctx: click.Context) -> None:
    """Serve the read and dispatch commands as MCP tools over stdio.

    Nothing it offers writes or approves config, edits lanes or deletes
    anything. Needs the `mcp` package beside delegate: install with the `mcp`
    extra (pipx install '<checkout>[mcp]') or add it (pipx inject delegate-skills mcp).
    """
    if ctx.invoked_subcommand is not None:
        return
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise UserError(
            "the MCP server needs the `mcp` package where delegate runs: "
            f"{sys.executable} -m pip install 'mcp>=2,<3' "
            "(under pipx: pipx inject delegate-skills 'mcp>=2,<3')"
        ) from None
    from .mcp_server import serve

    serve()


MCP_CLIENTS = ("claude", "cursor", "codex", "opencode")


def mcp_snippet(client: str, command: str, args: list[str] | None = None) -> str:
    args = ["mcp"] if args is None else args
    if client == "codex":
        quoted = ", ".join(jsjson.stringify(a) for a in args)
        return f"[mcp_servers.delegate]\ncommand = {jsjson.stringify(command)}\nargs = [{quoted}]"
    if client == "opencode":
        block = {
            "mcp": {"delegate": {"type": "local", "command": [command, *args], "enabled": True}}
        }
    else:
        block = {"mcpServers": {"delegate": {"command": command, "args": args}}}
    return jsjson.stringify(block, 2)


def running_delegate() -> tuple[str, list[str]]:
    """(command, arguments) that start this very `delegate`'s MCP server.

    The console script that is running, by its absolute path; run as
    `python -m delegate_skills`, this interpreter with `-m`.
    """
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(script) == "delegate" and os.access(script, os.X_OK):
        return script, ["mcp"]
    return sys.executable, ["-m", "delegate_skills", "mcp"]


MCP_WHERE = {
    "claude": "Add to .mcp.json in the project (or run: claude mcp add delegate -- {command} mcp):",
    "cursor": "Add to ~/.cursor/mcp.json (or .cursor/mcp.json in the project):",
    "codex": "Add to ~/.codex/config.toml:",
    "opencode": "Add to opencode.json (project) or ~/.config/opencode/opencode.json:",
}


@mcp_group.command("config")
@click.option("--client", type=click.Choice(MCP_CLIENTS), required=True)
@click.option("--json", "as_json", is_flag=True, help="A JSON object: client, where, snippet.")
def mcp_config(client: str, as_json: bool) -> None:
    """Print the snippet that registers this server with a client (writes nothing).

    Only the snippet goes to stdout, so it can be redirected into the file; where
    it belongs goes to stderr.
    """
    import importlib.util

    try:
        present = importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):  # a blocked or broken module is not there either
        present = False
    if not present:
        raise UserError(
            "the MCP server needs the `mcp` package where this delegate runs: "
            f"{sys.executable} -m pip install 'mcp>=2,<3' "
            "(under pipx: pipx inject delegate-skills 'mcp>=2,<3'); no snippet printed"
        )
    command, args = running_delegate()
    where = MCP_WHERE[client].format(command=" ".join([command, *args[:-1]]))
    snippet = mcp_snippet(client, command, args)
    if as_json:
        _print_json({"client": client, "where": where, "snippet": snippet})
        return
    click.echo(where, err=True)
    click.echo(snippet)


# ---------------------------------------------------------------- relay


@cli.command(
    "relay",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("key", metavar="KEY")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def relay_command(key: str, args: tuple[str, ...]) -> None:
    """Dispatch a brief to implementer KEY with that relay's flags.

    `delegate relay KEY --help` lists them. KEY is one of the implementer keys
    (claude, codex, opencode, …).
    """
    from ..relay.main import main as relay_main

    if registry.get(key) is None:
        raise UserError(
            f"unknown implementer {key!r}{did_you_mean(key, registry.KEYS)} "
            f"(one of: {', '.join(registry.KEYS)})"
        )
    sys.exit(relay_main(key, list(args)))


# ---------------------------------------------------------------- plumbing


def _register_skills() -> None:
    from .skills import skills

    cli.add_command(skills)


_register_skills()


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one line on stderr for every error a user can cause."""
    return run_group(cli, sys.argv[1:] if argv is None else argv, "delegate")


if __name__ == "__main__":
    sys.exit(main())
