"""Changing the agents' skill directories: placing, replacing and removing a skill folder.

A copy is written beside its final place under a temporary name, then renamed
into place (the old folder is renamed aside first and removed after), so no
agent ever sees half a skill. What a crashed writer left beside a folder is
swept while the lockfile's write queue is held.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat

from ..errors import UserError
from . import bundle, files
from .planning import Bundle, Placement


def _side_name(path: str, kind: str) -> str:
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.{kind}-{os.getpid()}-{os.urandom(4).hex()}")


def _discard(path: str) -> None:
    """Remove a file, link or tree that is already out of every agent's sight."""

    def retry(function, failed, _info) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(failed), stat.S_IRWXU)
        function(failed)

    if os.path.islink(path) or not os.path.isdir(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    shutil.rmtree(path, onerror=retry)


def sweep(directory: str, skill: str) -> None:
    """Remove what a crashed writer left beside `skill` (the lockfile's queue held)."""
    prefixes = (f".{skill}.tmp-", f".{skill}.old-")
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name.startswith(prefixes):
            with contextlib.suppress(OSError):
                _discard(os.path.join(directory, name))


def place(source: str, path: str, link: bool) -> None:
    """Put a copy of (or a link to) `source` at `path`, replacing whatever is there."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fresh = _side_name(path, "tmp")
    try:
        if link:
            os.symlink(os.path.realpath(source), fresh, target_is_directory=True)
        else:
            bundle.copy_skill(source, fresh)
        if os.path.lexists(path):
            old = _side_name(path, "old")
            os.rename(path, old)
            try:
                os.rename(fresh, path)
            except OSError:
                os.rename(old, path)
                raise
            _discard(old)
        else:
            os.rename(fresh, path)
    except BaseException:
        with contextlib.suppress(OSError):
            _discard(fresh)
        raise


def remove(path: str) -> None:
    """Take `path` out of sight in one rename, then delete it."""
    if not os.path.lexists(path):
        return
    old = _side_name(path, "old")
    os.rename(path, old)
    _discard(old)


def tidy(placements: list[Placement]) -> None:
    """Sweep the leftovers of crashed writers beside each placement (queue held)."""
    for placement in placements:
        sweep(placement.directory, placement.skill)


def apply(action: str, placement: Placement, source: Bundle, link: bool, root: str | None) -> None:
    files.refuse_symlinks(root, placement.directory)
    try:
        if action == "removed":
            remove(placement.path)
        else:
            place(source.source(placement.skill), placement.path, link)
    except OSError as error:
        raise UserError(f"cannot write {placement.path}: {error.strerror or error}") from None
