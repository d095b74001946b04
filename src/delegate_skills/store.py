"""How every file we own is written: atomic replace, through one write queue.

Atomic replace: the new bytes go to a unique temp file beside the target, are
flushed and fsynced, then renamed over it, so a reader sees the old file or
the new one and never half of either.

The write queue is a lock file beside the target, locked with `filelock`, or
with `fcntl.flock` where `filelock` is not installed (a skill folder run by a
bare Python): filelock takes the same flock on the same file, so writers of
either kind queue behind each other. A writer takes the lock, loads the file
as it is now, applies its own small change, replaces the file and lets go. The
kernel drops the lock of a writer that dies, so a killed writer never blocks
the next one; temp files such a writer left behind are swept by the next
writer, which is the only one that can be writing temps at that moment.
Reads never lock.
"""

from __future__ import annotations

import os
import stat
import time

from .errors import UserError

QUEUE_TIMEOUT_S = 60.0
#: How often a writer without filelock tries the lock again while it waits.
_RETRY_S = 0.05
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
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_dir(directory)


def copy_with_times(source: str, target: str, mode: int = 0o600) -> None:
    """Copy a file's bytes and its access and modification times (git's racy-entry check reads
    the index's mtime). Raises OSError (FileNotFoundError when `source` is missing)."""
    info = os.stat(source)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with open(source, "rb") as handle:
            while chunk := handle.read(1 << 20):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))


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
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass


def lock_path_for(target: str) -> str:
    return f"{target}.lock"


class LockTimeout(Exception):
    pass


class _FlockLock:
    """An exclusive flock on `path`, as filelock's Unix lock takes it."""

    def __init__(self, path: str, timeout: float) -> None:
        self._path = path
        self._timeout = timeout
        self._fd: int | None = None

    def acquire(self) -> None:
        import fcntl

        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        ends = time.monotonic() + self._timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= ends:
                    os.close(fd)
                    raise LockTimeout(self._path) from None
                time.sleep(_RETRY_S)
                continue
            self._fd = fd
            return

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def _make_lock(path: str, timeout: float, by_hand: bool):
    """filelock's lock where it is installed, else (or when asked) the same flock taken by hand."""
    if by_hand:
        return _FlockLock(path, timeout), LockTimeout
    try:
        from filelock import FileLock, Timeout
    except ImportError:
        return _FlockLock(path, timeout), LockTimeout
    return FileLock(path, timeout=timeout), Timeout


class queue:  # lower case: used as `with store.queue(...)`, like a function
    """Hold the write queue at `lock_path` while the caller rewrites `targets`.

    On entry the lock is taken (waiting up to QUEUE_TIMEOUT_S) and temp files a
    dead writer left beside the targets are swept; on exit the lock is let go.

    `by_hand=True` takes the flock without filelock even where it is
    installed: a relay does, so that it runs the same code installed as in a
    skill folder, and so that each of many parallel relays stays small
    (importing filelock brings logging, ctypes and decimal, about 6 MB).
    """

    def __init__(self, targets: tuple[str, ...], lock_path: str, *, by_hand: bool = False) -> None:
        self._targets = targets
        self._lock_path = lock_path
        self._by_hand = by_hand
        self._lock = None

    def __enter__(self) -> None:
        self._lock, timed_out = _make_lock(self._lock_path, QUEUE_TIMEOUT_S, self._by_hand)
        try:
            os.makedirs(os.path.dirname(self._lock_path) or ".", exist_ok=True)
            self._lock.acquire()
        except timed_out:
            raise UserError(
                f"another writer has held {self._lock_path} for {QUEUE_TIMEOUT_S:.0f}s; "
                "wait for it to finish, then retry"
            ) from None
        except (FileExistsError, NotADirectoryError):
            raise UserError(
                f"cannot take the write lock {self._lock_path}: a folder on this path is a "
                "file, not a directory; move it aside"
            ) from None
        except OSError as error:
            raise UserError(
                f"cannot take the write lock {self._lock_path}: {error.strerror or error}; "
                "check that its folder is a directory you can write"
            ) from None
        for target in self._targets:
            sweep_temps(target)

    def __exit__(self, *exc_info) -> None:
        self._lock.release()
