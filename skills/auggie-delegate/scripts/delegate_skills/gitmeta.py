"""What git says about a directory: its work tree, its git dir, its changes.

These sit on the dispatch path, so each question is one `git` process. A
directory git cannot speak for (not a repository, git missing, a repository
git refuses to open, git hanging) gives None, never an exception.
"""

from __future__ import annotations

import os
import signal
import subprocess

GIT_TIMEOUT_S = 10


class RepoPaths:
    __slots__ = ("git_dir", "toplevel")

    def __init__(self, toplevel: str | None, git_dir: str | None) -> None:
        self.toplevel = toplevel
        self.git_dir = git_dir


def run_git(cwd: str, *args: str, timeout: float = GIT_TIMEOUT_S) -> bytes | None:
    """stdout of `git -C cwd args…`, or None when git fails, is missing or hangs.

    git runs in its own process group, so a hang is ended with everything it
    started (a credential helper, a pager, an fsmonitor).
    """
    proc = start_git(cwd, *args)
    if proc is None:
        return None
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_git(proc)
        proc.communicate()
        return None
    return out if proc.returncode == 0 else None


def start_git(cwd: str, *args: str) -> subprocess.Popen | None:
    """`git -C cwd args…` in its own process group, stdout piped; None if it cannot start."""
    try:
        return subprocess.Popen(
            ["git", "-C", cwd, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None


def kill_git(proc: subprocess.Popen) -> None:
    """SIGKILL a git started by `start_git`, with everything it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def repo_paths(cwd: str) -> RepoPaths:
    """The work tree root and absolute git dir of `cwd` (both None outside a work tree).

    The git dir is the one `git rev-parse --absolute-git-dir` names: a linked
    worktree and a submodule each have their own.
    """
    out = run_git(cwd, "rev-parse", "--show-toplevel", "--absolute-git-dir")
    if out is None:
        return RepoPaths(None, None)
    lines = os.fsdecode(out).split("\n")
    if len(lines) < 2 or not lines[0] or not lines[1]:
        return RepoPaths(None, None)
    return RepoPaths(lines[0], lines[1])


class GitOutcome:
    """What one git command did: its exit code (None: it did not run or hung), stdout, stderr."""

    __slots__ = ("code", "err", "out")

    def __init__(self, code: int | None, out: bytes, err: bytes) -> None:
        self.code = code
        self.out = out
        self.err = err

    @property
    def ok(self) -> bool:
        return self.code == 0

    def reason(self) -> str:
        """git's last stderr line, or why git gave none."""
        lines = [line for line in self.err.decode("utf-8", "replace").splitlines() if line.strip()]
        if lines:
            return lines[-1].strip()
        return "git did not answer in time" if self.code is None else f"git exited {self.code}"


def git_outcome(
    cwd: str,
    *args: str,
    env: dict[str, str] | None = None,
    input: bytes | None = None,
    timeout: float = GIT_TIMEOUT_S,
) -> GitOutcome:
    """Run `git -C cwd args…` (in its own process group) and keep both streams."""
    try:
        proc = subprocess.Popen(
            ["git", "-C", cwd, *args],
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as problem:
        return GitOutcome(None, b"", f"cannot run git: {problem}".encode())
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_git(proc)
        proc.communicate()
        return GitOutcome(None, b"", b"")
    return GitOutcome(proc.returncode, out, err)
