"""`python3 discover.py [--usage]`: the delegate-setup discovery script."""

from __future__ import annotations

import sys

from .. import jsjson
from ..discover.report import discover
from . import run_script

SCRIPT = "discover.py"
HELP = """discover.py — find the implementer CLIs installed on this machine

Usage:
  python3 discover.py
  python3 discover.py --usage
  python3 discover.py --help

Prints delegate-discover.v1 JSON: "discovered" (key, skill, binary, version,
path, authenticated, supports, models) and "missing" (key, binary, skill).
authenticated is true, false or null (the CLI cannot tell). models.status is
reported, aliases (a fixed list, not a live listing), unsupported or failed.

--usage adds "usage" to each discovered CLI: {"sessions", "lastUsed"} read from
its session store's listings and mtimes (files are never opened), or null when
unknown. Probes run in parallel, each bounded at 10 s. Exit 0 even when
nothing is installed; 2 on a usage error.
"""


def main(argv: list[str]) -> int:
    return run_script(SCRIPT, _run, argv)


def _run(argv: list[str]) -> int:
    if "--help" in argv or "-h" in argv:
        sys.stdout.write(HELP)
        return 0
    if any(arg != "--usage" for arg in argv):
        sys.stderr.write(f"{SCRIPT}: unexpected arguments. Use --help.\n")
        return 2
    sys.stdout.write(jsjson.stringify(discover(with_usage="--usage" in argv), 2) + "\n")
    return 0
