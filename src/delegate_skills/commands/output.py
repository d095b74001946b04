"""What every `delegate` command shares: options, and the output rule (JSON on a pipe)."""

from __future__ import annotations

import functools
import os
import sys

import click

from .. import jsjson

CWD_OPTION = click.option(
    "--cwd",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Directory whose repository to use (default: the current one).",
)


def cwd_of(value: str | None) -> str:
    return os.path.abspath(value) if value else os.getcwd()


def print_json(document, indent: int | None = 2) -> None:
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


def wants_json(as_json: bool) -> bool:
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


def emit(document: dict, as_json: bool, text=plain_text, indent: int | None = 2) -> None:
    """Print `document` by the output rule; `text` renders it for a terminal."""
    click.echo(jsjson.stringify(document, indent) if wants_json(as_json) else text(document))


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
