"""How `delegate` runs its click groups: click's own error handling, with two choices of ours.

- A group called with no subcommand prints its help (exit 0), the same on
  every click release (8.2 turned that case into a usage error).
- An error a user can cause and the code can explain (a UserError) is shown
  as one line, `delegate: <what and what to do>`, with its documented exit
  code, through click's own ClickException display.

Everything else (usage errors, --help, a closed pipe, Ctrl-C) is click's.
"""

from __future__ import annotations

import click

from ..errors import UserError


class Failure(click.ClickException):
    """A UserError, shown on one line under click's error handling."""

    def __init__(self, error: UserError) -> None:
        super().__init__(str(error))
        self.exit_code = error.exit_code

    def show(self, file=None) -> None:
        click.echo(f"delegate: {self.format_message()}", file=file, err=file is None)


class DelegateGroup(click.Group):
    """A group whose subcommands' UserErrors become one-line Failures."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except UserError as error:
            raise Failure(error) from None


def group_settings(**extra) -> dict:
    """Keyword arguments for `@click.group`: our class, help when bare, -h."""
    return {
        "cls": DelegateGroup,
        "invoke_without_command": True,
        "no_args_is_help": False,
        "context_settings": {"help_option_names": ["-h", "--help"]},
        **extra,
    }


def help_if_bare() -> None:
    """In a group's callback: with no subcommand, print the group's help and stop."""
    ctx = click.get_current_context()
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(0)


def run_group(group: click.Group, args: list[str], prog_name: str) -> int:
    """Run `group` on `args` in click's standalone mode; its exit code."""
    try:
        group.main(args=args, prog_name=prog_name, standalone_mode=True)
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
