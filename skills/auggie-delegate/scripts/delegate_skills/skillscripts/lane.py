"""`python3 lane.py resolve`: the delegate-setup lane script a relay consults."""

from __future__ import annotations

import os
import sys

from .. import jsjson
from ..lanes import resolve
from . import fail, print_help, run_script, wants_help

SCRIPT = "lane.py"
HELP = """lane.py — resolve a delegate-fleet.v1 lane for a relay

Usage:
  python3 lane.py resolve --cwd <dir> --lane <name> --implementer <key>
  python3 lane.py --help

Prints one JSON line: lane, source, implementer, skill and dials, the dials
named as the implementer's relay names them.
"""


def _parse(argv: list[str]) -> tuple[str, str, str]:
    cwd, lane, implementer = os.getcwd(), "", ""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg not in ("--cwd", "--lane", "--implementer"):
            raise fail(SCRIPT, f"unknown option: {arg}")
        if i + 1 >= len(argv):
            raise fail(SCRIPT, f"{arg} requires a value")
        value = argv[i + 1]
        if arg == "--cwd":
            cwd = os.path.abspath(value)
        elif arg == "--lane":
            lane = value
        else:
            implementer = value
        i += 2
    if not lane:
        raise fail(SCRIPT, "resolve requires --lane")
    if not implementer:
        raise fail(SCRIPT, "resolve requires --implementer")
    return cwd, lane, implementer


def _run(argv: list[str]) -> int:
    if wants_help(argv):
        return print_help(HELP, argv)
    if argv[0] != "resolve":
        raise fail(SCRIPT, f"unknown command {jsjson.stringify(argv[0])}")
    cwd, lane, implementer = _parse(argv[1:])
    sys.stdout.write(jsjson.stringify(resolve(cwd, lane, implementer)) + "\n")
    return 0


def main(argv: list[str]) -> int:
    return run_script(SCRIPT, _run, argv)
