"""Reading our JSON files, checking their version, and writing them through the queue."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from .. import __version__, jsjson, store
from ..errors import UserError

WRITTEN_BY = f"delegate-skills {__version__}"
UPGRADE_HINT = (
    "upgrade delegate-skills (reinstall it from a newer checkout: pipx install --force <checkout>)"
)


class Corrupt(Exception):
    """The file is not JSON, or its top level is not an object."""


def read_bytes(path: str) -> bytes | None:
    """The file's bytes, or None when there is no file. An unreadable file is a UserError."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror or error}") from None


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


def replace(path: str, data: bytes) -> None:
    """Atomically replace `path` (queue held); a symlinked file keeps its link."""
    store.atomic_write(path, data, follow_symlinks=os.path.islink(path))
