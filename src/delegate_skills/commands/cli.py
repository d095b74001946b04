"""The `delegate` command: every capability of the core, runnable by hand.

This module only wires the command groups together; each lives in its own
module (config_cli, lane_cli, discover_cli, runs_cli with landing_cli,
parallel_cli, mcp_cli, relay_cli, skills).

Exit codes: 0 success; 1 a check found problems (doctor); 2 a usage error, a
bad or untrusted config, or a refused write. Relays keep their own codes.
"""

from __future__ import annotations

import sys

import click

from . import (
    config_cli,
    discover_cli,
    landing_cli,
    lane_cli,
    mcp_cli,
    parallel_cli,
    relay_cli,
    runs_cli,
    skills,
)
from .clirun import group_settings, help_if_bare, run_group


@click.group(**group_settings())
@click.version_option(package_name="delegate-skills", prog_name="delegate")
def cli() -> None:
    """Delegate a brief to a CLI coding agent, and manage the lanes that choose it."""
    help_if_bare()


for command in (
    config_cli.config,
    lane_cli.lane,
    discover_cli.discover_command,
    discover_cli.doctor_command,
    runs_cli.runs,
    parallel_cli.fanout_command,
    parallel_cli.review_command,
    parallel_cli.batch_command,
    mcp_cli.mcp_group,
    relay_cli.relay_command,
    skills.skills,
):
    cli.add_command(command)
landing_cli.register(runs_cli.runs)


def main(argv: list[str] | None = None) -> int:
    """Console entry point: one line on stderr for every error a user can cause."""
    return run_group(cli, sys.argv[1:] if argv is None else argv, "delegate")


if __name__ == "__main__":
    sys.exit(main())
