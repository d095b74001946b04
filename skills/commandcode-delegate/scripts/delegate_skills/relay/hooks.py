"""`--setup` and `--check`: the user's own shell commands, run around the implementer.

`--setup CMD` runs in a new worktree before the implementer (copy `.env`,
`uv sync`, `npm ci`); `--check CMD` runs where the implementer worked once
it has finished and its change is recorded (`pytest -q`). Each runs under
`/bin/sh -c` in its own process group with the user's environment, its
output kept in the run directory (setup.log, check.log). A signal to the
relay ends it, with everything it started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

SETUP_LOG = "setup.log"
CHECK_LOG = "check.log"
#: How much of the end of a command's output a result keeps.
TAIL_LINES = 20
_POLL_S = 0.1


def run_shell(command: str, cwd: str, log_path: str, stop) -> dict:
    """Run `command`; {command, exitCode, seconds, tail} (exitCode None when stopped).

    `stop()` is asked while it runs; when it says yes, the command's process
    group is killed.
    """
    started = time.monotonic()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command], cwd=cwd, stdin=subprocess.DEVNULL, stdout=fd,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    except OSError as problem:
        os.close(fd)
        return _outcome(command, None, started, [f"cannot start /bin/sh: {problem}"])
    os.close(fd)
    code = None
    while code is None:
        try:
            code = proc.wait(timeout=_POLL_S)
        except subprocess.TimeoutExpired:
            if stop():
                _kill_group(proc)
                proc.wait()
                return _outcome(command, None, started, _tail(log_path))
    _kill_group(proc)  # what it left running in its group
    return _outcome(command, code, started, _tail(log_path))


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _outcome(command: str, code: int | None, started: float, tail: list[str]) -> dict:
    return {
        "command": command,
        "exitCode": code,
        "seconds": round(time.monotonic() - started, 3),
        "tail": tail,
    }


def _tail(path: str) -> list[str]:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 65536))
            data = handle.read()
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[-TAIL_LINES:]
