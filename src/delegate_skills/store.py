"""How every file we own is written: atomic replace, through one write queue.

Atomic replace: the new bytes go to a unique temp file beside the target, are
flushed and fsynced, then renamed over it, so a reader sees the old file or
the new one and never half of either.

The write queue is a `filelock` lock file. A writer takes the lock, loads the
file as it is now, applies its own small change, replaces the file and lets
go. The kernel drops the lock of a writer that dies, so a killed writer never
blocks the next one; temp files such a writer left behind are swept by the
next writer, which is the only one that can be writing temps at that moment.
Reads never lock.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator

from .errors import UserError

QUEUE_TIMEOUT_S = 60.0
_TEMP_SUFFIX = ".tmp"


def _temp_prefix(target: str) -> str:
    return f".{os.path.basename(target)}."


def atomic_write(
    target: str,
    data: bytes,
    *,
    follow_symlinks: bool = False,
    durable: bool = True,
    new_mode: int = 0o666,
) -> None:
    """Replace `target` with `data` atomically, keeping its permission bits.

    With `follow_symlinks`, a symlinked target has the file it points at
    replaced; otherwise the link itself is replaced by a regular file.
    `durable` also fsyncs the data and the directory, so the new file
    survives a crash; without it the replacement is still atomic for readers.
    A file that did not exist yet gets `new_mode` (less the umask).
    """
    if follow_symlinks:
        target = os.path.realpath(target)
    directory = os.path.dirname(target) or "."
    os.makedirs(directory, exist_ok=True)
    mode = _existing_mode(target)
    temp = os.path.join(
        directory, f"{_temp_prefix(target)}{os.getpid()}.{os.urandom(4).hex()}{_TEMP_SUFFIX}"
    )
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, new_mode if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if durable:
        _fsync_dir(directory)


def _existing_mode(target: str) -> int | None:
    try:
        info = os.lstat(target)
    except OSError:
        return None
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else None


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def sweep_temps(target: str) -> None:
    """Remove temp files a dead writer left beside `target`. Call with the lock held."""
    directory = os.path.dirname(target) or "."
    prefix = _temp_prefix(target)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix) and name.endswith(_TEMP_SUFFIX):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))


def lock_path_for(target: str) -> str:
    return f"{target}.lock"


@contextlib.contextmanager
def queue(targets: tuple[str, ...], lock_path: str) -> Iterator[None]:
    """Hold the write queue at `lock_path` while the caller rewrites `targets`."""
    from filelock import FileLock, Timeout

    os.makedirs(os.path.dirname(lock_path) or ".", exist_ok=True)
    lock = FileLock(lock_path, timeout=QUEUE_TIMEOUT_S)
    try:
        lock.acquire()
    except Timeout:
        raise UserError(
            f"another writer has held {lock_path} for {QUEUE_TIMEOUT_S:.0f}s; "
            "wait for it to finish, then retry"
        ) from None
    try:
        for target in targets:
            sweep_temps(target)
        yield
    finally:
        lock.release()
