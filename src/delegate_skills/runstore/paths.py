"""Where the run store and the rest of our private state live on this machine."""

from __future__ import annotations

import os

RECORDS_DIR = "runs"
WORKTREES_DIR = "worktrees"


def state_dir() -> str:
    """`$XDG_STATE_HOME/delegate-skills` (else ~/.local/state/delegate-skills)."""
    base = os.environ.get("XDG_STATE_HOME")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "delegate-skills")


def records_root() -> str:
    """`<state dir>/runs`: one private directory per run."""
    return os.path.join(state_dir(), RECORDS_DIR)


def worktrees_root() -> str:
    """`<state dir>/worktrees`: the worktrees of --worktree runs, outside every work tree."""
    return os.path.join(state_dir(), WORKTREES_DIR)
