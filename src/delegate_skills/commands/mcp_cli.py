"""`delegate mcp`: the MCP server, and the snippet that registers it with a client."""

from __future__ import annotations

import os
import sys

import click

from .. import jsjson
from ..errors import UserError
from .output import (
    print_json,
)

# ---------------------------------------------------------------- mcp


@click.group("mcp", invoke_without_command=True)
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
        print_json({"client": client, "where": where, "snippet": snippet})
        return
    click.echo(where, err=True)
    click.echo(snippet)
