"""`delegate relay KEY`: one relay run, with that implementer's relay flags."""

from __future__ import annotations

import sys

import click

from .. import registry
from ..errors import UserError, did_you_mean

# ---------------------------------------------------------------- relay


@click.command(
    "relay",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog=f"KEY is one of: {', '.join(registry.KEYS)}.",
)
@click.argument("key", metavar="KEY", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def relay_command(key: str | None, args: tuple[str, ...]) -> None:
    """Dispatch a brief to implementer KEY with that relay's flags.

    `delegate relay KEY --help` lists them.
    """
    from ..skillscripts.relay import main as relay_main

    if key is None:
        raise click.UsageError(
            f"name the implementer: delegate relay KEY [relay flags]; KEY is one of: "
            f"{', '.join(registry.KEYS)}"
        )
    if registry.get(key) is None:
        raise UserError(
            f"unknown implementer {key!r}{did_you_mean(key, registry.KEYS)} "
            f"(one of: {', '.join(registry.KEYS)})"
        )
    sys.exit(relay_main(key, list(args)))
