"""Reading files a repository, a run directory or a user can put anything in.

A committed `.delegate/config.json` may be a symlink to `/dev/zero`, a FIFO
or a gigabyte of JSON; a brief may be a named pipe. Every such file is read
here: only a regular file, only up to a size limit, opened without blocking
(a FIFO never hangs the reader), and, for a file inside a repository, only
when its real path stays inside that repository. Writers into a repository
ask `first_symlink_below` so they never write through a committed symlink.
Each refusal is one line naming the file and what to do.
"""

from __future__ import annotations

import os
import stat

from .errors import UserError

KIB = 1024
MIB = 1024 * KIB
#: A fleet config, a lockfile, a state file or run.json holds a few lanes or entries.
CONFIG_LIMIT = MIB


def _size(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit >= MIB and limit % MIB == 0 else f"{limit // KIB} KiB"


def _inside(path: str, root: str) -> bool:
    real, real_root = os.path.realpath(path), os.path.realpath(root)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def read_limited(
    path: str,
    limit: int,
    *,
    label: str | None = None,
    within: str | None = None,
    what: str = "file",
) -> bytes | None:
    """The bytes of the regular file at `path`, or None when there is no file.

    Raises UserError when `path` is not a regular file, holds more than
    `limit` bytes, or (with `within`) resolves outside the directory
    `within`. `label` names the file in messages (default: `path`).
    """
    label = label or path
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise UserError(
            f"{label}: a folder on this path is a file, not a directory; move it aside"
        ) from None
    except OSError as error:
        raise UserError(f"{label}: cannot read ({error.strerror or error})") from None
    if within is not None and not _inside(path, within):
        raise UserError(
            f"refusing to read {label}: it resolves outside {within} "
            f"({os.path.realpath(path)}); replace the symlink with the {what} itself"
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as error:
        raise UserError(f"{label}: cannot read ({error.strerror or error})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"refusing to read {label}: not a regular file; it must be a {what}")
        if info.st_size > limit:
            raise UserError(too_large(label, limit, what))
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(limit + 1 - total, MIB))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise UserError(too_large(label, limit, what))
        return b"".join(chunks)
    except OSError as error:
        raise UserError(f"{label}: cannot read ({error.strerror or error})") from None
    finally:
        os.close(fd)


def read_json_object(path: str, limit: int) -> dict | None:
    """The JSON object in `path`; None when it is missing, too large, not a file or not JSON."""
    try:
        raw = read_limited(path, limit)
        if raw is None:
            return None
        import json  # only once there is something to parse: a missing file costs no import

        value = json.loads(raw)
    except (UserError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def too_large(label: str, limit: int, what: str = "file") -> str:
    return f"refusing to read {label}: larger than {_size(limit)}, more than a {what} holds"


def read_stream_limited(stream, limit: int, label: str) -> bytes:
    """At most `limit` bytes from a binary stream; UserError when it has more."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise UserError(too_large(label, limit, "brief"))
    return data


def tail_of_file(path: str, limit: int) -> bytes:
    """The last `limit` bytes of a regular file (empty when it is missing or not regular)."""
    return part_of_file(path, limit, tail=True)


def part_of_file(path: str, limit: int, *, tail: bool = False) -> bytes:
    """At most `limit` bytes of a regular file, from its start (or its end, with `tail`).

    Empty when the file is missing or is not a regular file; never blocks on a FIFO.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return b""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return b""
        os.set_blocking(fd, True)
        if tail and info.st_size > limit:
            os.lseek(fd, info.st_size - limit, os.SEEK_SET)
        chunks, total = [], 0
        while total < limit:
            chunk = os.read(fd, min(limit - total, MIB))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    except OSError:
        return b""
    finally:
        os.close(fd)


def first_symlink_below(root: str, path: str) -> str | None:
    """The first path component below `root`, down to `path` itself, that is a symlink.

    None when there is none (components that do not exist yet are not links).
    """
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if relative == os.curdir:
        return None
    here = os.path.abspath(root)
    for part in relative.split(os.sep):
        if part == os.pardir:
            return here
        here = os.path.join(here, part)
        if os.path.islink(here):
            return here
    return None
