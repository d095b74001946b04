"""Reading our JSON files, checking their version, and writing them through the queue."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from .. import __version__, jsjson, store
from ..errors import UserError
from ..reading import CONFIG_LIMIT, first_symlink_below, read_limited

WRITTEN_BY = f"delegate-skills {__version__}"
UPGRADE_HINT = (
    "upgrade delegate-skills (reinstall it from a newer checkout: pipx install --force <checkout>)"
)


class Corrupt(Exception):
    """The file is not JSON, or its top level is not an object."""


def read_bytes(path: str, root: str | None = None) -> bytes | None:
    """The file's bytes, or None when there is no file. UserError when it cannot be read.

    Only a regular file of at most CONFIG_LIMIT bytes is read; with `root`
    (a project), only one whose real path stays inside it.
    """
    return read_limited(path, CONFIG_LIMIT, within=root)


def refuse_symlinks(root: str | None, path: str) -> None:
    """Refuse to write `path` when a folder on its way below the project `root` is a symlink."""
    if root is None:
        return
    link = first_symlink_below(root, path)
    if link is not None:
        raise UserError(
            f"refusing to write {path}: {link} is a symlink, and a project's files are "
            "never written through one; replace it with a real folder"
        )


def parse_object(raw: bytes) -> dict:
    """The top-level object of a JSON document; Corrupt when there is none."""
    try:
        document = jsjson.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise Corrupt("not valid JSON") from None
    if not isinstance(document, dict):
        raise Corrupt("not a JSON object")
    return document


def check_version(path: str, document: dict, current: int, kind: str, oldest: int) -> int:
    """The document's version when this code can read it (maybe after migrating).

    `kind` names the file in messages ("state", "lockfile"); versions from
    `oldest` to `current` are readable, anything else is a hard stop.
    """
    if "version" not in document:
        raise UserError(
            f'{path} has no "version" field; this delegate-skills reads {kind} version {current}'
        )
    found = document["version"]
    if isinstance(found, float) and found.is_integer():
        found = int(found)
    if isinstance(found, bool) or not isinstance(found, int) or found < oldest:
        raise UserError(
            f"{path} has {kind} version {jsjson.stringify(found)}, which this delegate-skills "
            f"cannot read (it reads {kind} version {current})"
        )
    if found > current:
        raise UserError(
            f"{path} is {kind} version {found}, newer than the {kind} version {current} "
            f"that {WRITTEN_BY} reads; {UPGRADE_HINT}"
        )
    return found


@contextlib.contextmanager
def write_queue(path: str) -> Iterator[None]:
    """Hold the write queue of `path` (a filelock lock file beside it)."""
    with store.queue((path,), store.lock_path_for(path)):
        yield


def replace(path: str, data: bytes, root: str | None = None) -> None:
    """Atomically replace `path` (queue held).

    Outside a project a symlinked file keeps its link (a dotfiles setup); in a
    project (`root`), no symlink on the way is written through.
    """
    refuse_symlinks(root, path)
    store.atomic_write(path, data, follow_symlinks=root is None and os.path.islink(path))
