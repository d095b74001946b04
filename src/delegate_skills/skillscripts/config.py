"""`python3 config.py load|validate|write|approve`: the delegate-setup config script."""

from __future__ import annotations

import os
import sys

from .. import fleet, jsjson
from . import fail, print_help, run_script, wants_help

SCRIPT = "config.py"
HELP = """config.py — load, validate and write delegate-fleet.v1 lane maps

Usage:
  python3 config.py load [--cwd <dir>]
  python3 config.py validate <file>
  python3 config.py write --scope global|project [--cwd <dir>] <file>
  python3 config.py approve [--cwd <dir>]
  python3 config.py --help

Paths:
  global   $XDG_CONFIG_HOME/delegate-skills/config.json (else ~/.config/...)
  project  <git-root>/.delegate/config.json  (inside a git repository only)

load prints the effective lanes as JSON: a project lane replaces the global
lane of the same name whole. A project write also records your approval.
approve records your approval of the project file exactly as it is on disk
(after checking it) and prints what it approved (`content`, `sha256`): what
a teammate runs once after cloning, having read the file.
"""


def _emit(document: dict) -> None:
    sys.stdout.write(jsjson.stringify(document, 2) + "\n")


def _operands(argv: list[str], value_flags: tuple[str, ...]) -> list[str]:
    """Words after the command that are neither flags nor a flag's value."""
    return [
        arg
        for i, arg in enumerate(argv)
        if i > 0 and not arg.startswith("--") and argv[i - 1] not in value_flags
    ]


def _run(argv: list[str]) -> int:
    if wants_help(argv):
        return print_help(HELP, argv)
    command = argv[0]
    cwd = os.getcwd()
    if "--cwd" in argv:
        at = argv.index("--cwd")
        if at + 1 >= len(argv) or not argv[at + 1]:
            raise fail(SCRIPT, "--cwd needs a directory")
        cwd = os.path.abspath(argv[at + 1])
    if command == "load":
        _emit(fleet.Effective(cwd).report())
        return 0
    if command == "validate":
        files = _operands(argv, ("--cwd",))
        if not files:
            raise fail(SCRIPT, "validate needs a file path")
        document = fleet.read_document_file(os.path.abspath(files[0]), files[0])
        _emit({"ok": True, "path": os.path.abspath(files[0]), "lanes": list(document["lanes"])})
        return 0
    if command == "write":
        scope = argv[argv.index("--scope") + 1] if "--scope" in argv[:-1] else None
        if scope not in fleet.SCOPES:
            raise fail(SCRIPT, "--scope must be global or project")
        files = _operands(argv, ("--cwd", "--scope"))
        if not files:
            raise fail(SCRIPT, "write needs a JSON file path")
        document = fleet.read_document_file(os.path.abspath(files[-1]), files[-1])
        _emit(fleet.write_document(scope, cwd, document))
        return 0
    if command == "approve":
        _emit(fleet.approve_current(cwd))
        return 0
    raise fail(SCRIPT, f"unknown command {jsjson.stringify(command)}. Use --help.")


def main(argv: list[str]) -> int:
    return run_script(SCRIPT, _run, argv)
