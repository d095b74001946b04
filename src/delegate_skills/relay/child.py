"""Running a child process tree under supervision, in the relay's own process.

The child leads a new session (its own process group), so the relay can
signal the whole tree it spawns. One select loop in the main thread pumps the
child's stdout and stderr, feeds its stdin, notices the child's exit, and
wakes up for the relay's own signals (SIGTERM, SIGINT, SIGHUP), which are
recorded by a handler and delivered through a wakeup pipe.
"""

from __future__ import annotations

import errno
import math
import os
import select
import time

from ..spawn import Spawned, signal

# `typing` costs milliseconds at every relay start; type checkers read this too.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

READ_SIZE = 65536
#: After the child exits, how long to keep reading output that a lingering
#: grandchild may still be producing before giving up on the pipes.
LINGER_S = 5.0
#: Without a pidfd, how often to look for the child's exit once its pipes are done.
_POLL_S = 0.005

WATCHED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Watched:
    """The descriptors the loop waits on, each with what it is for.

    A small stand-in for `selectors`, which imports `collections` and costs
    several milliseconds of every relay start. poll(2) where the platform has
    it, select(2) otherwise.
    """

    def __init__(self) -> None:
        self.entries: dict[int, tuple[bool, object]] = {}
        self._poll = select.poll() if hasattr(select, "poll") else None

    def add(self, fd: int, data: object, *, write: bool = False) -> None:
        self.entries[fd] = (write, data)
        if self._poll is not None:
            self._poll.register(fd, select.POLLOUT if write else select.POLLIN)

    def discard(self, fd: int) -> None:
        if self.entries.pop(fd, None) is not None and self._poll is not None:
            self._poll.unregister(fd)

    def ready(self, timeout: float) -> list[tuple[int, object]]:
        """(fd, data) for each descriptor ready within `timeout` seconds."""
        if self._poll is not None:
            fds = [fd for fd, _events in self._poll.poll(math.ceil(timeout * 1000))]
        else:
            readers = [fd for fd, (write, _data) in self.entries.items() if not write]
            writers = [fd for fd, (write, _data) in self.entries.items() if write]
            ready_r, ready_w, _ = select.select(readers, writers, [], timeout)
            fds = ready_r + ready_w
        return [(fd, self.entries[fd][1]) for fd in fds if fd in self.entries]

    def readers(self) -> list[tuple[int, object]]:
        return [(fd, data) for fd, (write, data) in self.entries.items() if not write]


class RelaySignals:
    """Records SIGTERM/SIGINT/SIGHUP sent to the relay; the select loop wakes on them."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        self._previous: dict[int, object] = {}

    def install(self) -> None:
        signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        for signum in WATCHED_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._record)

    def _record(self, signum: int, _frame) -> None:
        self.received.append(signum)

    @property
    def wakeup_fd(self) -> int:
        return self._read_fd

    def drain(self) -> None:
        try:
            while os.read(self._read_fd, 4096):
                pass
        except OSError:
            pass

    def first(self) -> int | None:
        return self.received[0] if self.received else None


class Exited:
    """How a child ended: its exit code, or the signal that killed it."""

    __slots__ = ("code", "signal")

    def __init__(self, returncode: int) -> None:
        self.code = returncode if returncode >= 0 else None
        self.signal = -returncode if returncode < 0 else None

    @property
    def signal_name(self) -> str | None:
        return signal_name(self.signal)

    @property
    def mapped_code(self) -> int:
        """The exit code, or 128 + the signal number when a signal ended it."""
        if self.code is not None:
            return self.code
        return 128 + self.signal if self.signal else 1


_NAMES: dict[int, str] = {}


def signal_name(signum: int | None) -> str | None:
    """SIGTERM for 15, and so on (None for None or an unknown number)."""
    if not _NAMES:
        for name in dir(signal):
            if name.startswith("SIG") and not name.startswith(("SIG_", "SIGRT")):
                _NAMES.setdefault(getattr(signal, name), name)
    return _NAMES.get(signum) if signum is not None else None


class Child:
    """One supervised process tree."""

    def __init__(
        self,
        argv: list[str],
        *,
        cwd: str | None,
        env: dict[str, str],
        stdin: bytes | None,
        on_stdout: Callable[[bytes], None],
        on_stderr: Callable[[bytes], None],
        signals: RelaySignals | None = None,
    ) -> None:
        self.argv = argv
        self._signals = signals
        self._cwd = cwd
        self._env = env
        self._stdin_data = stdin
        self._on_stdout = on_stdout
        self._on_stderr = on_stderr
        self.proc: Spawned | None = None
        self.exited: Exited | None = None
        self._watched = Watched()
        self._open_pipes = 0
        self._exited_at: float | None = None
        self._stdin_view = memoryview(stdin or b"")
        self._pidfd: int | None = None

    def start(self) -> None:
        """Launch the tree. Raises OSError (FileNotFoundError for a missing binary)."""
        self.proc = Spawned(
            self.argv, cwd=self._cwd, env=self._env, stdin_pipe=self._stdin_data is not None
        )
        for fd, handler in (
            (self.proc.stdout, self._on_stdout),
            (self.proc.stderr, self._on_stderr),
        ):
            os.set_blocking(fd, False)
            self._watched.add(fd, handler)
            self._open_pipes += 1
        if self.proc.stdin is not None:
            os.set_blocking(self.proc.stdin, False)
            self._watched.add(self.proc.stdin, None, write=True)
        if self._signals is not None:
            self._watched.add(self._signals.wakeup_fd, "wakeup")
        self._watch_exit()

    def _watch_exit(self) -> None:
        """Wake the loop the moment the child exits (Linux pidfd), when available."""
        try:
            self._pidfd = os.pidfd_open(self.proc.pid)
        except (AttributeError, OSError):
            return
        self._watched.add(self._pidfd, "exit")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def signal_tree(self, signum: int) -> None:
        """Signal the child's whole process group (the child, if the group is gone)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signum)
        except OSError:
            if self.exited is None:
                try:
                    self.proc.send_signal(signum)
                except OSError:
                    pass

    def pump(
        self,
        deadline: float | None,
        *,
        watch_signals: bool = True,
        stop_pipes_on_exit: bool = False,
    ) -> str:
        """Run the loop until something needs the caller.

        Returns "closed" once the child has exited and its output is read (or
        abandoned: at once with `stop_pipes_on_exit`, else after LINGER_S),
        "deadline" when `deadline` (a time.monotonic() value) passes, and
        "signal" when the relay has received a watched signal (unless
        `watch_signals` is off, as during an abort's grace period).
        """
        assert self.proc is not None
        while True:
            if watch_signals and self._signals is not None and self._signals.received:
                return "signal"
            self._reap()
            if self.exited is not None:
                done = self._open_pipes == 0 or stop_pipes_on_exit
                lingered = time.monotonic() - (self._exited_at or 0) > LINGER_S
                if done or lingered:
                    if self._open_pipes:
                        self._drain_now()
                        self._close_pipes()
                    return "closed"
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return "deadline"
            idle = self.exited is not None or (self._open_pipes == 0 and self._pidfd is None)
            wait = _POLL_S if idle else 0.25
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - now))
            self._select_once(wait)

    def _select_once(self, wait: float) -> None:
        for fd, data in self._watched.ready(wait):
            if data == "wakeup":
                self._signals.drain()
            elif data == "exit":
                self._watched.discard(fd)
                self._reap()
            elif data is None:
                self._feed_stdin(fd)
            else:
                self._read(fd, data)

    def _read(self, fd: int, handler: Callable[[bytes], None]) -> None:
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            handler(data)
            return
        self._watched.discard(fd)
        self._open_pipes -= 1

    def _feed_stdin(self, fd: int) -> None:
        try:
            written = os.write(fd, self._stdin_view[:READ_SIZE])
        except BlockingIOError:
            return
        except OSError:
            written = len(self._stdin_view)
        self._stdin_view = self._stdin_view[written:]
        if not self._stdin_view:
            self._close_stdin()

    def _close_stdin(self) -> None:
        fd = self.proc.stdin
        if fd is None:
            return
        self._watched.discard(fd)
        try:
            os.close(fd)
        except OSError:
            pass
        self.proc.stdin = None

    def _drain_now(self) -> None:
        """Read whatever is already waiting in the pipes, without blocking."""
        for fd, handler in self._watched.readers():
            if handler in ("wakeup", "exit"):
                continue
            while True:
                try:
                    data = os.read(fd, READ_SIZE)
                except OSError:
                    break
                if not data:
                    break
                handler(data)

    def _close_pipes(self) -> None:
        for fd, (_write, data) in list(self._watched.entries.items()):
            if data not in ("wakeup", "exit"):
                self._watched.discard(fd)
        self._open_pipes = 0

    def _reap(self) -> None:
        if self.exited is not None or self.proc is None:
            return
        code = self.proc.poll()
        if code is not None:
            self.exited = Exited(code)
            self._exited_at = time.monotonic()
            self._close_stdin()

    def close(self) -> None:
        """Release pipes and the watch list (the tree is left as it is)."""
        self._close_pipes()
        for fd in (self._signals.wakeup_fd if self._signals else None, self._pidfd):
            if fd is not None:
                self._watched.discard(fd)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        if self.proc is not None:
            self.proc.close()


def is_missing_binary(error: OSError, cwd: str | None) -> bool:
    """True when launching failed because the program itself was not found."""
    if error.errno not in (errno.ENOENT, errno.ENOTDIR):
        return False
    return getattr(error, "filename", None) != cwd
