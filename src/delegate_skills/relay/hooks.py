"""`--setup` and `--check`: the user's own shell commands, run around the implementer.

`--setup CMD` runs in a new worktree before the implementer (copy `.env`,
`uv sync`, `npm ci`); `--check CMD` runs where the implementer worked once
it has finished and its change is recorded (`pytest -q`). Each runs under
`/bin/sh -c` in its own process group with the user's environment, its
output kept in the run directory (setup.log, check.log). A signal to the
relay ends it, with everything it started, and so does the end of its own
budget: as long as the run's --timeout, counted from its start.
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


def run_shell(command: str, cwd: str, run, log_name: str, stop, seconds: float | None) -> dict:
    """Run `command`; {command, exitCode, seconds, tail} (exitCode None when stopped).

    Its output goes to `log_name` in the run directory (through the run
    directory's handle). `stop()` is asked while it runs; when it says yes,
    or `seconds` have passed, the command's process group is killed.
    """
    started = time.monotonic()
    ends = None if seconds is None else started + seconds
    fd = run.open_new(log_name)
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
            if stop() or (ends is not None and time.monotonic() >= ends):
                _kill_group(proc)
                proc.wait()
                return _outcome(command, None, started, _tail(run, log_name))
    _kill_group(proc)  # what it left running in its group
    return _outcome(command, code, started, _tail(run, log_name))


def budget_s(relay) -> float | None:
    """How long --setup or --check may run: as long as the run's own --timeout."""
    watchdog = relay.adapter.watchdog_ms(relay.opts)
    return None if watchdog is None else watchdog / 1000


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


def _tail(run, name: str) -> list[str]:
    """The last lines of the log, read through the run directory's handle (a regular file only)."""
    import stat

    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=run.handle())
    except OSError:
        return []
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return []
        os.lseek(fd, max(0, info.st_size - 65536), os.SEEK_SET)
        data = os.read(fd, 65536)
    except OSError:
        return []
    finally:
        os.close(fd)
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[-TAIL_LINES:]
