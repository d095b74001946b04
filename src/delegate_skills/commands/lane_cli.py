"""`delegate lane`: resolve, list, set and unset fleet lanes."""

from __future__ import annotations

import click

from .. import fleet, jsjson, lanes, registry
from .clirun import group_settings, help_if_bare
from .output import (
    CWD_OPTION,
    JSON_OPTION,
    cwd_of,
    emit,
    print_json,
    wants_json,
)

# ---------------------------------------------------------------- lane


@click.group(**group_settings())
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
    emit(lanes.resolve(cwd_of(cwd), lane_name, implementer), as_json, indent=None)


@lane.command("list")
@CWD_OPTION
@click.option("--json", "as_json", is_flag=True, help="JSON even on a terminal.")
def lane_list(cwd: str | None, as_json: bool) -> None:
    """List the effective lanes, where each comes from, and whether it may dispatch."""
    effective = fleet.Effective(cwd_of(cwd))
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
    if wants_json(as_json):
        print_json({"lanes": rows})
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
    emit(fleet.edit_lane(scope, cwd_of(cwd), name, lane_doc), as_json)


@lane.command("unset")
@click.argument("name")
@click.option("--scope", type=click.Choice(fleet.SCOPES), required=True)
@CWD_OPTION
@JSON_OPTION
def lane_unset(name: str, scope: str, cwd: str | None, as_json: bool) -> None:
    """Remove lane NAME from a scope's config."""
    emit(fleet.edit_lane(scope, cwd_of(cwd), name, None), as_json)
