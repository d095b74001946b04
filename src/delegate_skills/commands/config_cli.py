"""`delegate config`: read, check, write and approve fleet config files."""

from __future__ import annotations

import os

import click

from .. import fleet, jsjson, schema
from .clirun import group_settings, help_if_bare
from .output import (
    CWD_OPTION,
    JSON_OPTION,
    cwd_of,
    emit,
)

# ---------------------------------------------------------------- config


@click.group(**group_settings())
def config() -> None:
    """Read, check and write fleet config files (delegate-fleet.v1)."""
    help_if_bare()


@config.command("load")
@CWD_OPTION
@JSON_OPTION
def config_load(cwd: str | None, as_json: bool) -> None:
    """Print the effective lanes: global, with project lanes replacing them whole."""
    emit(fleet.Effective(cwd_of(cwd)).report(), as_json, config_text)


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
    emit(report, as_json)


@config.command("write")
@click.option("--scope", type=click.Choice(fleet.SCOPES), required=True)
@CWD_OPTION
@click.argument("file", type=click.Path(dir_okay=False))
@JSON_OPTION
def config_write(scope: str, cwd: str | None, file: str, as_json: bool) -> None:
    """Replace a scope's config with FILE. A project write approves it."""
    document = fleet.read_document_file(os.path.abspath(file), file)
    schema.check_fleet(document, file)
    emit(fleet.write_document(scope, cwd_of(cwd), document), as_json)


@config.command("approve")
@CWD_OPTION
@JSON_OPTION
def config_approve(cwd: str | None, as_json: bool) -> None:
    """Approve the project config as it is on disk. Review it first."""
    emit(fleet.approve_current(cwd_of(cwd)), as_json)


@config.command("path")
@CWD_OPTION
@JSON_OPTION
def config_path(cwd: str | None, as_json: bool) -> None:
    """Print where the global and project configs and the approval live."""
    from .. import approval, gitmeta

    paths = gitmeta.repo_paths(cwd_of(cwd))
    report = {
        "globalPath": fleet.global_config_path(),
        "projectPath": fleet.project_config_path(paths.toplevel) if paths.toplevel else None,
        "approvalPath": approval.approval_path(paths.git_dir) if paths.git_dir else None,
    }
    emit(report, as_json)
