"""Starting a process with pipes, without the `subprocess` module.

The dispatch path starts three processes (the version probe, the implementer,
`git status`) and `subprocess` with what it pulls in (threading, locale, re)
costs more to import than those three starts. `os.posix_spawn` does the job
here; where it is missing the `subprocess` module is used instead.

A child started here leads a new session (its own process group), reads
/dev/null or a pipe on stdin, and writes stdout and stderr to pipes.
"""

from __future__ import annotations

import errno
import os
import select
import time

try:
    # The C module under `signal`: the same functions and numbers, without the
    # enum classes `signal` builds at import (and the enum module they need).
    import _signal as signal
except ImportError:  # pragma: no cover - other Pythons
    import signal

_HAS_SPAWN = hasattr(os, "posix_spawn") and hasattr(os, "POSIX_SPAWN_DUP2")


def find_program(name: str, env: dict[str, str]) -> str | None:
    """`name` itself when it has a slash, else the first executable file on env's PATH."""
    if "/" in name:
        return name
    for entry in env.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(entry or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


class Spawned:
    """A started child: its pid and the parent's ends of its pipes (raw fds)."""

    def __init__(
        self, argv: list[str], *, cwd: str | None, env: dict[str, str], stdin_pipe: bool
    ) -> None:
        self.pid = 0
        self.returncode: int | None = None
        self.stdin: int | None = None
        self.stdout = self.stderr = -1
        if _HAS_SPAWN:
            self._spawn(argv, cwd, env, stdin_pipe)
        else:
            self._popen(argv, cwd, env, stdin_pipe)

    def _spawn(
        self, argv: list[str], cwd: str | None, env: dict[str, str], stdin_pipe: bool
    ) -> None:
        program = find_program(argv[0], env)
        if program is None:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", argv[0])
        if cwd is not None and not os.path.isdir(cwd):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", cwd)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r, in_w = os.pipe() if stdin_pipe else (os.open(os.devnull, os.O_RDONLY), None)
        actions = [
            (os.POSIX_SPAWN_DUP2, in_r, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
        ]
        try:
            self.pid = _spawn_in(cwd, program, argv, env, actions)
        except BaseException:
            for fd in (out_r, err_r, in_w):
                if fd is not None:
                    os.close(fd)
            raise
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        self.stdin, self.stdout, self.stderr = in_w, out_r, err_r

    def _popen(
        self, argv: list[str], cwd: str | None, env: dict[str, str], stdin_pipe: bool
    ) -> None:
        import subprocess

        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.pid = proc.pid
        self._proc = proc
        self.stdin = os.dup(proc.stdin.fileno()) if stdin_pipe else None
        self.stdout, self.stderr = os.dup(proc.stdout.fileno()), os.dup(proc.stderr.fileno())
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal) once the child has ended."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return self.returncode
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            _pid, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def close(self) -> None:
        for name in ("stdin", "stdout", "stderr"):
            fd = getattr(self, name)
            if fd is not None and fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, None if name == "stdin" else -1)


def _spawn_in(
    cwd: str | None, program: str, argv: list[str], env: dict[str, str], actions: list
) -> int:
    """posix_spawn with `cwd` as the child's directory.

    posix_spawn has no directory action, so the relay (single-threaded) steps
    into `cwd` for the call and back out through a descriptor of where it was.
    """
    if cwd is None:
        return os.posix_spawn(program, argv, env, file_actions=actions, setsid=True)
    here = os.open(".", os.O_RDONLY)
    try:
        os.chdir(cwd)
        try:
            return os.posix_spawn(program, argv, env, file_actions=actions, setsid=True)
        finally:
            os.fchdir(here)
    finally:
        os.close(here)


def capture(
    argv: list[str], *, cwd: str | None, env: dict[str, str], timeout: float
) -> tuple[int, bytes] | None:
    """Run to completion and return (exit code, stdout); None when it cannot start or hangs.

    stderr is discarded; on timeout the whole process group is killed.
    """
    try:
        child = Spawned(argv, cwd=cwd, env=env, stdin_pipe=False)
    except OSError:
        return None
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    open_fds = [child.stdout, child.stderr]
    try:
        while open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except OSError:
                    pass
                child.wait()
                return None
            ready, _, _ = select.select(open_fds, [], [], remaining)
            for fd in ready:
                data = os.read(fd, 65536)
                if not data:
                    open_fds.remove(fd)
                elif fd == child.stdout:
                    chunks.append(data)
        return child.wait(), b"".join(chunks)
    finally:
        child.close()
