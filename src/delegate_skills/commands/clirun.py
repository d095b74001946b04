"""Running a click command group so every error a user can cause is one line."""

from __future__ import annotations

import click

from ..errors import UserError


def run_group(group: click.Group, args: list[str], prog_name: str) -> int:
    """Run `group` on `args`; return its exit code, errors reported on one stderr line.

    Exit codes: a UserError's own code, 2 for a usage error, a ClickException's
    own code, 130 when aborted, 0 when stdout was closed under us.
    """
    try:
        outcome = group.main(args=args, prog_name=prog_name, standalone_mode=False)
    except UserError as error:
        click.echo(f"delegate: {error}", err=True)
        return error.exit_code
    except click.UsageError as error:
        where = error.ctx.command_path if error.ctx else prog_name
        message = " ".join(error.format_message().split())
        click.echo(f"{where}: {message} (see: {where} --help)", err=True)
        return 2
    except click.ClickException as error:
        click.echo(f"delegate: {error.format_message()}", err=True)
        return error.exit_code
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.Abort:
        click.echo("delegate: aborted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    return outcome if isinstance(outcome, int) else 0
