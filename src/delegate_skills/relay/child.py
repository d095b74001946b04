"""Running a child process tree under supervision, in the relay's own process.

The child leads a new session (its own process group), so the relay can
signal the whole tree it spawns. One selector loop in the main thread pumps
the child's stdout and stderr, feeds its stdin, notices the child's exit, and
wakes up for the relay's own signals (SIGTERM, SIGINT, SIGHUP, SIGQUIT,
SIGUSR1), which are recorded by a handler and delivered through a wakeup
pipe. On Linux the child is started with a parent-death signal, so it does
not outlive a relay that is killed outright.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import subprocess
import time

from ..isolation import linux, procgroup

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

WATCHED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)
#: What the loop's selector holds besides output pipes (whose data is their handler).
_WAKEUP, _EXIT, _STDIN = "wakeup", "exit", "stdin"


class RelaySignals:
    """Records the WATCHED_SIGNALS sent to the relay; the select loop wakes on them."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        self._previous: dict[int, object] = {}

    def install(self) -> None:
        self._previous_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        for signum in WATCHED_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._record)

    def uninstall(self) -> None:
        """Put back the handlers install() replaced (a relay run inside another program)."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
        signal.set_wakeup_fd(getattr(self, "_previous_fd", -1))
        for fd in (self._read_fd, self._write_fd):
            try:
                os.close(fd)
            except OSError:
                pass

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


def signal_name(signum: int | None) -> str | None:
    """SIGTERM for 15, and so on (None for None or an unknown number)."""
    if signum is None:
        return None
    try:
        return signal.Signals(signum).name
    except ValueError:
        return None


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
        on_tick: Callable[[], None] | None = None,
        cgroup: str | None = None,
    ) -> None:
        self.argv = argv
        #: The run's cgroup (None: none): the child is born in it when the relay is inside,
        #: else it joins it before it execs.
        self.cgroup = cgroup
        self._on_tick = on_tick
        self._signals = signals
        self._cwd = cwd
        self._env = env
        self._stdin_data = stdin
        self._on_stdout = on_stdout
        self._on_stderr = on_stderr
        self.proc: subprocess.Popen | None = None
        self.exited: Exited | None = None
        self._selector = selectors.DefaultSelector()
        self._pipes: dict[int, Callable[[bytes], None]] = {}
        self._exited_at: float | None = None
        self._stdin_view = memoryview(stdin or b"")
        self._pidfd: int | None = None

    def start(self) -> None:
        """Launch the tree. Raises OSError (FileNotFoundError for a missing binary)."""
        self.proc = subprocess.Popen(
            self.argv,
            cwd=self._cwd,
            env=self._env,
            stdin=subprocess.PIPE if self._stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=procgroup.death_signal_hook(self._join_hook()),
        )
        for stream, handler in (
            (self.proc.stdout, self._on_stdout),
            (self.proc.stderr, self._on_stderr),
        ):
            fd = stream.fileno()
            os.set_blocking(fd, False)
            self._selector.register(fd, selectors.EVENT_READ, handler)
            self._pipes[fd] = handler
        if self.proc.stdin is not None:
            os.set_blocking(self.proc.stdin.fileno(), False)
            self._selector.register(self.proc.stdin.fileno(), selectors.EVENT_WRITE, _STDIN)
        if self._signals is not None:
            self._selector.register(self._signals.wakeup_fd, selectors.EVENT_READ, _WAKEUP)
        self._watch_exit()

    def _join_hook(self):
        """The child joins the run's cgroup itself unless the relay is in it (cgrouphost.py)."""
        if self.cgroup is None or linux.in_cgroup(self.cgroup):
            return None
        return linux.cgroup_join_hook(self.cgroup)

    def _watch_exit(self) -> None:
        """Wake the loop the moment the child exits (Linux pidfd), when available."""
        self._pidfd = linux.pidfd_open(self.proc.pid)
        if self._pidfd is None:
            return
        self._selector.register(self._pidfd, selectors.EVENT_READ, _EXIT)

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

    def processes(self) -> procgroup.RunProcesses:
        """Every process of the tree: its group, the relay's descendants, its cgroup."""
        return procgroup.RunProcesses(
            pgid=self.proc.pid if self.proc else None, ancestor=os.getpid(), cgroup=self.cgroup
        )

    def sweep(self, grace_s: float, settle_s: float = 0.0) -> list[int]:
        """End what is left of the tree after the child exited; the pids that were left."""
        if self.proc is None:
            return []
        return self.processes().end(grace_s, keep=self.proc.pid, settle=settle_s)

    def kill_tree(self) -> None:
        """SIGKILL the whole tree and wait (bounded) until nothing of it runs."""
        if self.proc is not None:
            self.processes().kill(keep=self.proc.pid)

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
                done = not self._pipes or stop_pipes_on_exit
                lingered = time.monotonic() - (self._exited_at or 0) > LINGER_S
                if done or lingered:
                    if self._pipes:
                        self._drain_now()
                        self._close_pipes()
                    return "closed"
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return "deadline"
            idle = self.exited is not None or (not self._pipes and self._pidfd is None)
            wait = _POLL_S if idle else 0.25
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - now))
            self._select_once(wait)
            if self._on_tick is not None:
                self._on_tick()

    def _select_once(self, wait: float) -> None:
        for key, _events in self._selector.select(wait):
            data = key.data
            if data == _WAKEUP:
                self._signals.drain()
            elif data == _EXIT:
                self._selector.unregister(key.fd)
                self._reap()
            elif data == _STDIN:
                self._feed_stdin(key.fd)
            else:
                self._read(key.fd, data)

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
        self._selector.unregister(fd)
        del self._pipes[fd]

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
        stream = self.proc.stdin if self.proc else None
        if stream is None:
            return
        try:
            self._selector.unregister(stream.fileno())
        except (KeyError, ValueError):
            pass
        try:
            stream.close()
        except OSError:
            pass
        self.proc.stdin = None

    def _drain_now(self) -> None:
        """Read whatever is already waiting in the pipes, without blocking."""
        for fd, handler in list(self._pipes.items()):
            while True:
                try:
                    data = os.read(fd, READ_SIZE)
                except OSError:
                    break
                if not data:
                    break
                handler(data)

    def _close_pipes(self) -> None:
        for fd in list(self._pipes):
            self._selector.unregister(fd)
        self._pipes.clear()

    def _reap(self) -> None:
        if self.exited is not None or self.proc is None:
            return
        code = self.proc.poll()
        if code is not None:
            self.exited = Exited(code)
            self._exited_at = time.monotonic()
            self._close_stdin()

    def close(self) -> None:
        """Release pipes, the pidfd and the selector (the tree is left as it is)."""
        self._close_pipes()
        self._selector.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        if self.proc is not None:
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()
            self._close_stdin()


def is_missing_binary(error: OSError, cwd: str | None) -> bool:
    """True when launching failed because the program itself was not found."""
    if error.errno not in (errno.ENOENT, errno.ENOTDIR):
        return False
    return getattr(error, "filename", None) != cwd
