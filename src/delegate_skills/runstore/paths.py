"""Where the run store and the rest of our private state live on this machine.

The state dir is `$XDG_STATE_HOME/delegate-skills` (else
~/.local/state/delegate-skills). One user can have several: a shell that sets
XDG_STATE_HOME and an MCP server its client started without it record runs in
different ones. Each state dir that holds runs is listed in the roots index,
a file at a fixed place under the user's home
(`~/.local/state/delegate-skills/roots.json`, or where DELEGATE_STATE_ROOTS
says), so that a command run in one environment finds the runs of the others.
A store is read only when its run records are ours alone (owned by this user,
writable by no one else).

A command that acts on a run recorded in another state dir works in that one
from then on (`use_state_dir`): the run's change record, worktree and landing
state are there, and the relays it starts (a review, a continuation) record
their runs beside it.
"""

from __future__ import annotations

import contextlib
import os
import stat

RECORDS_DIR = "runs"
WORKTREES_DIR = "worktrees"
#: The state dir a command works in when it is not the environment's own.
STATE_DIR_ENV = "DELEGATE_STATE_DIR"
#: Where the roots index is, when not at its usual place under the home.
ROOTS_ENV = "DELEGATE_STATE_ROOTS"
ROOTS_FILE = "roots.json"
ROOTS_SCHEMA = "delegate-state-roots.v1"
#: The most state dirs the index lists (the latest registered are kept).
ROOTS_LIMIT = 64
_ROOTS_BYTES = 256 * 1024

#: A state dir read for a moment (`reading`), over the one in use.
_reading: str | None = None
#: State dirs this process has seen registered in the index.
_registered: set[str] = set()


def default_state_dir() -> str:
    """~/.local/state/delegate-skills: the state dir where XDG_STATE_HOME is unset."""
    return os.path.join(os.path.expanduser("~"), ".local", "state", "delegate-skills")


def own_state_dir() -> str:
    """The state dir of this environment: DELEGATE_STATE_DIR, else from XDG_STATE_HOME."""
    chosen = os.environ.get(STATE_DIR_ENV)
    if chosen and os.path.isabs(chosen):
        return chosen
    base = os.environ.get("XDG_STATE_HOME")
    if not base or not os.path.isabs(base):
        return default_state_dir()
    return os.path.join(base, "delegate-skills")


def state_dir() -> str:
    """The state dir in use: `own_state_dir()`, or the store being read at the moment."""
    return _reading or own_state_dir()


def records_root() -> str:
    """`<state dir>/runs`: one private directory per run.

    The first time a process finds runs there, the state dir is registered in
    the roots index.
    """
    state = state_dir()
    if state not in _registered:
        register(state)
    return os.path.join(state, RECORDS_DIR)


def worktrees_root() -> str:
    """`<state dir>/worktrees`: the worktrees of --worktree runs, outside every work tree."""
    return os.path.join(state_dir(), WORKTREES_DIR)


def use_state_dir(path: str) -> None:
    """Work in state dir `path` from now on (and so do the processes this one starts)."""
    os.environ[STATE_DIR_ENV] = path


@contextlib.contextmanager
def reading(path: str):
    """Read the store in state dir `path` for the time of the block."""
    global _reading
    before, _reading = _reading, path
    try:
        yield
    finally:
        _reading = before


# ---------------------------------------------------------------- the roots index


def roots_index() -> str:
    """The roots index: DELEGATE_STATE_ROOTS, else roots.json in ~/.local/state/delegate-skills."""
    chosen = os.environ.get(ROOTS_ENV)
    if chosen and os.path.isabs(chosen):
        return chosen
    return os.path.join(default_state_dir(), ROOTS_FILE)


def _indexed() -> list[str]:
    """The state dirs the index lists ([] when there is none). Raises UserError when it
    is of an unknown version."""
    from ..errors import UserError
    from ..reading import read_json_object

    path = roots_index()
    document = read_json_object(path, _ROOTS_BYTES)
    if document is None:
        return []
    found = document.get("schema")
    if found != ROOTS_SCHEMA:
        raise UserError(
            f"{path}: version {found!r} is not one this delegate-skills reads "
            f"({ROOTS_SCHEMA}); fix the file or upgrade"
        )
    roots = document.get("roots")
    if not isinstance(roots, list):
        return []
    return [r for r in roots if isinstance(r, str) and os.path.isabs(r)][-ROOTS_LIMIT:]


def _ours(state: str) -> bool:
    """Whether the run records under `state` are ours alone: a directory this user owns
    that no one else may write."""
    try:
        info = os.stat(os.path.join(state, RECORDS_DIR))
    except OSError:
        return False
    uid = os.getuid() if hasattr(os, "getuid") else info.st_uid
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == uid
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def register(state: str) -> None:
    """List `state` in the roots index if it holds runs and is not there yet.

    Never fails: a store that cannot be registered is still used here.
    """
    from .. import store
    from ..errors import UserError
    from ..jsjson import document_bytes

    if not os.path.isdir(os.path.join(state, RECORDS_DIR)):
        return
    _registered.add(state)  # tried once a process, whatever comes of it
    try:
        if state in _indexed():
            return
        path = roots_index()
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with store.queue((path,), store.lock_path_for(path), by_hand=True):
            kept = [r for r in _indexed() if r != state and os.path.isdir(r)]
            roots = [*kept, state][-ROOTS_LIMIT:]
            document = {"schema": ROOTS_SCHEMA, "roots": roots}
            store.atomic_write(path, document_bytes(document), durable=False, new_mode=0o600)
    except (OSError, UserError):
        pass


def known_state_dirs() -> list[str]:
    """Every state dir whose runs a command may act on: the one in use first, then the
    environment's own, then those the roots index lists that are ours alone.

    Raises UserError when the index is of an unknown version.
    """
    found, seen = [], set()
    for position, state in enumerate([state_dir(), own_state_dir(), *_indexed()]):
        real = os.path.realpath(state)
        if real in seen or (position > 1 and not _ours(state)):
            continue
        seen.add(real)
        found.append(state)
    return found
