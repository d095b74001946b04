"""`delegate discover` and `delegate doctor`: which CLIs are here, and would each lane run."""

from __future__ import annotations

import os
import sys

import click

from .. import jsjson, registry
from ..errors import did_you_mean
from .output import (
    CWD_OPTION,
    cwd_of,
    wants_json,
)

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


class _Answered:
    """Progress on one line of stderr, redrawn as each CLI answers and erased at the end.

    For a terminal that shows stdout too: the table printed after it names every CLI
    once, so the progress does not name them again line by line.
    """

    def __init__(self) -> None:
        self.keys: list[str] = []

    def __call__(self, entry: dict) -> None:
        self.keys.append(entry["key"])
        shown = f"discovering… {len(self.keys)} answered (latest: {entry['key']})"
        sys.stderr.write(f"\r\x1b[K{shown}")
        sys.stderr.flush()

    def clear(self) -> None:
        if self.keys:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


@click.command("discover")
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
    stderr shows a line for each CLI as it answers (one line, redrawn, when stdout is
    the terminal too, where the table follows). The JSON is the Node
    bundle's document plus `probed`, `cached` and `probeSeconds`. With --host,
    the document that machine gives, plus `host`, `python`, `git` and `root`.
    """
    from ..discover.report import discover_cached

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
    from ..discover.cache import cache_path

    progress = _discover_progress if sys.stderr.isatty() else None
    if progress is not None and sys.stdout.isatty() and not as_json:
        progress = _Answered()
    if progress is not None and not os.path.exists(cache_path()):
        click.echo("delegate: the first discover probes every CLI and may take a minute",
                   err=True)  # fmt: skip
    try:
        report, details = discover_cached(
            with_usage=usage, only=set(keys) or None, fresh=fresh, progress=progress
        )
    finally:
        if isinstance(progress, _Answered):
            progress.clear()
    from .doctor import missing_tools

    needs = {}
    for entry in report["discovered"]:
        missing = missing_tools(entry["key"])
        if missing:
            needs[entry["key"]] = [tool for tool, _ in missing]
    document = {**report, "probed": details["probed"], "cached": details["cached"],
                "probeSeconds": details["seconds"], "missingTools": needs}  # fmt: skip
    if wants_json(as_json):
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
    if wants_json(as_json):
        click.echo(jsjson.stringify(document, 2))
        return
    python, git, root = document["python"], document["git"], document["root"]
    click.echo(f"{host}: Python {python}, {git}, runs in {root}")
    click.echo(discover_table(document))


@click.command("doctor")
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
    report = doctor(cwd_of(cwd), lane_name, there)
    if there is not None:
        report["host"] = {key: there[key] for key in ("host", "python", "git", "root")}
    click.echo(jsjson.stringify(report, 2) if wants_json(as_json) else doctor_text(report))
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
