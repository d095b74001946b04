"""Installing the bundled skills into the coding agents that read them.

`agents` is the table of agents and the directories they read skills from;
`bundle` finds the bundled skill folders and hashes them; `lockfile` and
`state` read and write the two files that hold intent (the shared, committed
lockfile and this machine's per-agent disables); `install` holds the commands
that bring the agents' skill directories in line with that intent, over
`scopes` (where skills go), `planning` (what is on disk and what to do about
it), `writing` (placing and removing a folder) and `report` (what a command
did); `views` holds the read-only list and doctor.
"""

from __future__ import annotations

import sys

_warned: set[str] = set()


def warn(message: str) -> None:
    """One warning line on stderr, at most once per process for the same text."""
    if message in _warned:
        return
    _warned.add(message)
    sys.stderr.write(f"delegate: warning: {message}\n")
    sys.stderr.flush()
