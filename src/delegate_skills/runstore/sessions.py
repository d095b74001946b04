"""What the last run of each session answered: to notice a follow-up that says the same.

After every run that reported a session id, the relay keeps the digest of
its final message under the state dir (`sessions/<implementer>-<digest of
the id>`). A later run that resumes that session and ends with the same
final message is flagged (`repeatedFinal`): the implementer may be stuck.
"""

from __future__ import annotations

import hashlib
import os

from .paths import state_dir

SESSIONS_DIR = "sessions"


def _path(implementer: str, session_id: str) -> str:
    key = hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:24]
    return os.path.join(state_dir(), SESSIONS_DIR, f"{implementer}-{key}")


def _digest(final: str) -> str:
    return hashlib.sha256(final.strip().encode("utf-8", "replace")).hexdigest()


def last_final(implementer: str, session_id: str) -> str | None:
    """The digest of the last final message recorded for this session, if any."""
    try:
        with open(_path(implementer, session_id), "rb") as handle:
            return handle.read(128).decode("ascii", "replace").strip() or None
    except OSError:
        return None


def remember(implementer: str, session_id: str, final: str) -> None:
    """Note this run's final message as the session's last (never fails the run)."""
    from ..store import atomic_write

    try:
        atomic_write(_path(implementer, session_id), (_digest(final) + "\n").encode(),
                     durable=False, new_mode=0o600)  # fmt: skip
    except OSError:
        pass


def repeats(implementer: str, session_ids: list[str], final: str) -> bool:
    """Whether `final` is what the last run of one of these sessions answered too."""
    if not final.strip():
        return False
    digest = _digest(final)
    return any(last_final(implementer, sid) == digest for sid in session_ids if sid)
