"""The run directory: where a relay keeps a run's artifacts.

Artifacts are created fresh: whatever already stands at an artifact's name
(a stale file, or a symlink pointing anywhere) is removed first, and files are
opened with O_NOFOLLOW through a handle on the directory taken when the run
starts, so nothing outside the run directory is ever written through a
planted link or a directory swapped in its place. `result.json` and `final.txt` are replaced
atomically, so a reader never sees half of either. A brief can hold anything,
so a directory the relay creates is private (0700) and so are the files it
creates (0600).
"""

from __future__ import annotations

import os
import time

DEFAULT_ROOT_NAME = "delegate-relay"
RESULT = "result.json"
FINAL = "final.txt"
#: Space set aside when the run starts and given back just before the result
#: is written, so a run that fills its disk still gets its result.json.
RESERVE = ".result-space"
RESERVE_BYTES = 1024 * 1024


def default_root() -> str:
    import tempfile

    return os.path.join(tempfile.gettempdir(), DEFAULT_ROOT_NAME)


def ensure_private_root(root: str) -> None:
    """Create the shared run root private to this user; refuse one someone else owns.

    The default root sits in the shared temp dir, where another user could
    have made it first (to read briefs, or to plant links). Raises OSError.
    """
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(root)
    import stat

    if not stat.S_ISDIR(info.st_mode):
        raise OSError(f"{root} is not a directory (remove it, or pass --out-dir)")
    if info.st_uid != os.geteuid():
        raise OSError(
            f"{root} belongs to another user (uid {info.st_uid}); remove it, or pass --out-dir"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(root, 0o700)


def iso_now() -> str:
    """UTC now as JavaScript's Date#toISOString writes it (milliseconds, Z)."""
    ms = time.time_ns() // 1_000_000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def default_out_dir(workdir: str, started_at: str) -> str:
    """A new run directory's path under the shared root, which this makes sure is private.

    Raises OSError when the shared root belongs to someone else.
    """
    stamp = started_at.replace(":", "-").replace(".", "-")
    base = os.path.basename(os.path.normpath(workdir)) or "repo"
    root = default_root()
    ensure_private_root(root)
    return os.path.join(root, f"{base}-{stamp}-{os.getpid()}")


def holds_relay_result(directory: str) -> bool:
    """A regular result.json (never a link) in `directory` that speaks delegate-relay.result.v1.

    Stricter than `RunDir.written_by_a_relay`: for a relay that reuses an
    explicit --out-dir only on proof that a relay run wrote it.
    """
    import stat

    from .. import registry
    from .scan import parse_json

    try:
        fd = os.open(os.path.join(directory, RESULT), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        with os.fdopen(os.dup(fd), "rb") as handle:
            raw = handle.read()
    except OSError:
        return False
    finally:
        os.close(fd)
    document = parse_json(raw.decode("utf-8", errors="replace"))
    return isinstance(document, dict) and document.get("schema") == registry.RESULT_VERSION


def artifact_stands(directory: str, name: str, entries: set[str]) -> bool:
    """An artifact name stands here as a file, a directory or a link to something.

    `entries` is the directory's listing. A link that points at nothing is
    stale: the relay removes the link itself, and nothing behind it can be lost.
    """
    path = os.path.join(directory, name)
    return name in entries and (not os.path.islink(path) or os.path.exists(path))


_UNTRIED = object()
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class RunDir:
    """Paths of one run's artifacts, and the writes that go into them.

    Every write once the directory is prepared goes through a handle on the
    directory taken then (`openat`), never through its path again: an
    implementer that moves the run directory away and puts a link or another
    directory in its place does not get our files written there. `moved()`
    tells when that happened.
    """

    def __init__(self, path: str, started_at: str, brief: str = "") -> None:
        self.path = path
        self.started_at = started_at
        self.brief = brief
        self._fds: dict[str, int] = {}
        self._dir: int | None = None
        #: The first artifact that could not be written (its name and the error).
        self.write_error: tuple[str, OSError] | None = None
        #: What create_final_once answered the first time it was asked.
        self._final_outcome: object = _UNTRIED

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def result_path(self) -> str:
        return self.file(RESULT)

    @property
    def final_path(self) -> str:
        return self.file(FINAL)

    def written_by_a_relay(self) -> bool:
        """Whether an earlier relay run used this directory (its run.json or result.json)."""
        from ..reading import CONFIG_LIMIT, read_json_object

        for name, schema in (("run.json", "delegate-run.v1"), (RESULT, "delegate-relay.result.v1")):
            document = read_json_object(self.file(name), 16 * CONFIG_LIMIT) or {}
            if document.get("schema") == schema:
                return True
        return False

    def foreign_artifact(self, names) -> str | None:
        """The first of `names` already in the directory that no relay run wrote, if any.

        In a directory an earlier relay run used, its artifacts are the
        relay's to replace; anywhere else a file by an artifact's name is the
        user's, and the run must not start.
        """
        if not os.path.isdir(self.path) or self.written_by_a_relay():
            return None
        for name in sorted(names):
            path = self.file(name)
            if os.path.lexists(path):
                return path
        return None

    def handle(self) -> int:
        """The directory's handle: taken once (never through a link), then kept.

        Raises OSError.
        """
        if self._dir is None:
            self._dir = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        return self._dir

    def identity(self) -> tuple[int, int]:
        """(device, inode) of the directory the run was given."""
        info = os.fstat(self.handle())
        return info.st_dev, info.st_ino

    def moved(self) -> bool:
        """Whether the path no longer names the directory the run was given."""
        if self._dir is None:
            return False
        try:
            now = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return True
        return (now.st_dev, now.st_ino) != self.identity()

    def prepare(self, fresh: dict[str, bytes], stale: tuple[str, ...] = (RESULT, FINAL)) -> None:
        """Create the directory and the `fresh` artifacts; remove `stale` leftovers.

        Raises OSError when the directory or an artifact cannot be created.
        """
        if not os.path.isdir(self.path):
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            os.mkdir(self.path, 0o700)
        self.handle()
        for name in (*stale, *fresh):
            self._remove(name)
        for name, data in fresh.items():
            fd = os.open(name, _NEW | os.O_APPEND, 0o600, dir_fd=self._dir)
            if data:
                os.write(fd, data)
            self._fds[name] = fd

    def _remove(self, name: str) -> None:
        import stat

        try:
            info = os.stat(name, dir_fd=self.handle(), follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(f"{self.file(name)} is a directory")
        try:
            os.unlink(name, dir_fd=self.handle())
        except FileNotFoundError:
            pass

    def open_new(self, name: str) -> int:
        """A new artifact (replacing one an earlier run left), open for writing. Raises OSError."""
        self._remove(name)
        return os.open(name, _NEW, 0o600, dir_fd=self.handle())

    def reserve(self) -> None:
        """Set RESERVE_BYTES aside for the result (nothing, where the disk cannot)."""
        try:
            fd = os.open(
                RESERVE, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_TRUNC, 0o600,
                dir_fd=self.handle(),
            )  # fmt: skip
        except OSError:
            return
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except (OSError, AttributeError):
            pass
        finally:
            os.close(fd)

    def release(self) -> None:
        """Give the reserved space back (before the result is written)."""
        try:
            os.unlink(RESERVE, dir_fd=self.handle())
        except OSError:
            pass

    def append(self, name: str, data: bytes) -> None:
        """Append to an artifact created by prepare() (a no-op for one that was not).

        A write that fails (a full disk) stops recording that artifact and is
        kept in `write_error`; it never raises.
        """
        fd = self._fds.get(name)
        if fd is None:
            return
        view = memoryview(data)
        try:
            while view:
                written = os.write(fd, view)
                view = view[written:]
        except OSError as error:
            self.write_error = self.write_error or (name, error)
            del self._fds[name]
            os.close(fd)

    def close(self) -> None:
        """Close the artifacts' handles (the directory's stays, for the result)."""
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds.clear()

    def write_final(self, text: str) -> None:
        self.replace(FINAL, text.encode("utf-8", errors="replace"))

    def create_final_once(self, text: str) -> str | None:
        """Create final.txt once, never through a link or over a file that appeared there.

        For a relay whose implementer may have run in the run directory: the run
        may have put something at the artifact's name (a `git mv` onto it, a
        symlink); that is left alone and the reason is returned. Later calls
        write nothing and answer as the first did.
        """
        if self._final_outcome is _UNTRIED:
            self._final_outcome = self._create_final(text)
        return self._final_outcome

    def _create_final(self, text: str) -> str | None:
        import errno

        try:
            fd = os.open(FINAL, _NEW, 0o600, dir_fd=self.handle())
        except OSError as error:
            return f"could not safely create final.txt: {errno.errorcode.get(error.errno, error)}"
        try:
            view = memoryview(f"{text}\n".encode("utf-8", errors="replace"))
            while view:
                view = view[os.write(fd, view) :]
        except OSError as error:
            return f"could not safely create final.txt: {errno.errorcode.get(error.errno, error)}"
        finally:
            os.close(fd)
        return None

    def existing(self, name: str) -> str | None:
        try:
            os.stat(name, dir_fd=self.handle())
        except OSError:
            return None
        return self.file(name)

    def replace(self, name: str, data: bytes) -> None:
        """Replace an artifact's bytes at once (readers see the old or the new file).

        A unique temp file in the directory, then a rename over the name, both
        through the directory's handle. Raises OSError.
        """
        folder = self.handle()
        temp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        fd = os.open(temp, _NEW, 0o600, dir_fd=folder)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.close(fd)
            fd = -1
            os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            try:
                os.unlink(temp, dir_fd=folder)
            except OSError:
                pass
            raise

    def write_result(self, result: dict) -> None:
        from ..jsjson import document_bytes

        self.replace(RESULT, document_bytes(result))
