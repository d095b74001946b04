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

from .errors import UserError
from .jstext import js_trim
from .reading import CONFIG_LIMIT, read_limited

APPROVAL_DIR = "delegate-skills"
APPROVAL_FILE = "project-config.sha256"
LOCK_FILE = "project-config.lock"
#: Names the approved digests while a config-and-approval write is under way.
PENDING_FILE = "project-config.pending"
RECORD_LIMIT = 4096


def digest(raw: bytes) -> str:
    """Lowercase hex SHA-256 of `raw`."""
    return hashlib.sha256(raw).hexdigest()


def approval_path(git_dir: str) -> str:
    return os.path.join(git_dir, APPROVAL_DIR, APPROVAL_FILE)


def pending_path(git_dir: str) -> str:
    return os.path.join(git_dir, APPROVAL_DIR, PENDING_FILE)


def queue_lock_path(git_dir: str) -> str:
    """The write queue for a project config and its approval.

    It sits beside the approval, under git metadata, so no lock file ever
    shows up in the work tree.
    """
    return os.path.join(git_dir, APPROVAL_DIR, LOCK_FILE)


def _approval_dir_ok(git_dir: str) -> bool:
    """The approval folder may be read and written: absent, or a real directory."""
    return not os.path.islink(os.path.join(git_dir, APPROVAL_DIR))


def _read_small(path: str) -> str | None:
    try:
        raw = read_limited(path, RECORD_LIMIT, what="digest file")
    except UserError:
        return None
    return None if raw is None else raw.decode("utf-8", errors="replace")


def _pending_digests(git_dir: str) -> list[str]:
    text = _read_small(pending_path(git_dir))
    return [line for line in (text or "").split("\n") if line]


def is_approved(git_dir: str | None, config_digest: str | None) -> bool:
    """True when `config_digest` is the approved one.

    While a write is under way (or was cut short), the pending record names
    the approved digest before the write and the one it writes; either is
    trusted as long as the approval file holds one of them, so a reader never
    sees an approved project turn untrusted halfway through a write.
    """
    if not git_dir or not config_digest or not _approval_dir_ok(git_dir):
        return False
    recorded = _read_small(approval_path(git_dir))
    if recorded is None:
        return False
    recorded = js_trim(recorded)
    if recorded == config_digest:
        return True
    pending = _pending_digests(git_dir)
    return recorded in pending and config_digest in pending


def check_dir(git_dir: str) -> None:
    if not _approval_dir_ok(git_dir):
        raise UserError(
            f"refusing to write under {os.path.join(git_dir, APPROVAL_DIR)}: it is a symlink; "
            "remove it"
        )


def _write(path: str, data: bytes) -> None:
    from . import store

    try:
        store.atomic_write(path, data)
    except OSError as error:
        raise UserError(f"cannot write {path}: {error.strerror or error}") from None


def approve(git_dir: str, config_digest: str) -> str:
    """Record `config_digest` as approved. Call with the project queue held."""
    check_dir(git_dir)
    path = approval_path(git_dir)
    _write(path, f"{config_digest}\n".encode("ascii"))
    return path


def recover(git_dir: str, config_path: str) -> None:
    """Finish or undo a config-and-approval write that was cut short. Queue held.

    If the config on disk is one of the two approved states the pending
    record names, that state is approved again; otherwise (the file was
    edited since) the approval is left as it is. The record is then removed.
    """
    pending = _pending_digests(git_dir)
    if not pending and not os.path.lexists(pending_path(git_dir)):
        return
    try:
        raw = read_limited(config_path, CONFIG_LIMIT)
    except UserError:
        raw = None
    current = digest(raw) if raw is not None else None
    if current in pending:
        approve(git_dir, current)
    try:
        os.unlink(pending_path(git_dir))
    except FileNotFoundError:
        pass


def replace_approved(git_dir: str, config_path: str, data: bytes, before: str | None) -> None:
    """Write `data` as the project config and approve it, as one step. Queue held.

    `before` is the digest of the config now on disk if it is approved (else
    None). The pending record goes first, then the approval of the new bytes,
    then the config, and the record is removed last: at every moment a reader
    finds the project trusted in the state before or after, and a writer
    killed on the way leaves what `recover` puts right.
    """
    from . import store

    check_dir(git_dir)
    new = digest(data)
    trusted = [d for d in (before, new) if d]
    _write(pending_path(git_dir), ("\n".join(dict.fromkeys(trusted)) + "\n").encode("ascii"))
    _write(approval_path(git_dir), f"{new}\n".encode("ascii"))
    try:
        store.atomic_write(config_path, data)
    except OSError as error:
        raise UserError(f"cannot write {config_path}: {error.strerror or error}") from None
    os.unlink(pending_path(git_dir))
