"""Project approval: the hash of an approved project config, kept in git metadata.

`<absolute git dir>/delegate-skills/project-config.sha256` holds the lowercase
hex SHA-256 of the exact bytes of `.delegate/config.json`, then a newline. It
lives under the git dir, so it is never committed, a fresh clone starts
untrusted, and each linked worktree has its own. The Node bundle reads and
writes the same file, so an approval given by either is honoured by both and
any edit to the config fails closed in both.
"""

from __future__ import annotations

import hashlib
import os

from .jsjson import js_trim

APPROVAL_DIR = "delegate-skills"
APPROVAL_FILE = "project-config.sha256"
LOCK_FILE = "project-config.lock"


def digest(raw: bytes) -> str:
    """Lowercase hex SHA-256 of `raw`."""
    return hashlib.sha256(raw).hexdigest()


def approval_path(git_dir: str) -> str:
    return os.path.join(git_dir, APPROVAL_DIR, APPROVAL_FILE)


def queue_lock_path(git_dir: str) -> str:
    """The write queue for a project config and its approval.

    It sits beside the approval, under git metadata, so no lock file ever
    shows up in the work tree.
    """
    return os.path.join(git_dir, APPROVAL_DIR, LOCK_FILE)


def is_approved(git_dir: str | None, config_digest: str | None) -> bool:
    if not git_dir or not config_digest:
        return False
    try:
        with open(approval_path(git_dir), "rb") as handle:
            recorded = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return False
    return js_trim(recorded) == config_digest


def approve(git_dir: str, config_digest: str) -> str:
    """Record `config_digest` as approved. Call with the project queue held."""
    from . import store

    path = approval_path(git_dir)
    store.atomic_write(path, f"{config_digest}\n".encode("ascii"))
    return path
