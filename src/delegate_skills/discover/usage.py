"""How much a CLI was used: its stored sessions and when it was last used.

Directory listings and mtimes only: session files hold conversations and are
never opened.
"""

from __future__ import annotations

import datetime
import os

from ..registry import Implementer
from .locate import state_dir


def _iso_ms(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _entries(directory: str) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as it:
            return list(it)
    except OSError:
        return []


def _mtime_ms(path: str) -> int:
    return os.stat(path).st_mtime_ns // 1_000_000


def usage_of(impl: Implementer, env: dict[str, str], home: str) -> dict | None:
    """Session count and last use from listings and mtimes; None when unknown."""
    spec = impl.usage_probe
    if spec is None:
        return None
    base = state_dir(spec.env_dir, spec.home_subdir, env, home)
    if not os.path.isdir(base):
        return None
    containers = [base]
    for segment in spec.path:
        containers = [
            entry.path
            for directory in containers
            for entry in _entries(directory)
            if entry.is_dir(follow_symlinks=False) and segment in ("*", entry.name)
        ]
    sessions, last = 0, 0
    for directory in containers:
        for entry in _entries(directory):
            is_dir = entry.is_dir(follow_symlinks=False)
            if spec.entry != "any" and is_dir != (spec.entry == "dir"):
                continue
            if not spec.match.search(entry.name):
                continue
            sessions += 1
            try:
                last = max(last, _mtime_ms(entry.path))
                if is_dir:
                    # A directory's mtime stays put while a file inside grows.
                    for child in _entries(entry.path):
                        last = max(last, _mtime_ms(child.path))
            except OSError:
                pass
    return {"sessions": sessions, "lastUsed": _iso_ms(last) if last > 0 else None}
