"""A word to the user when a run ends: a desktop notification and a command of their own.

`delegate fanout`, `delegate batch` and `delegate runs watch` call `notify` once
for every run that ends while they run, under --notify only (the settings file
alone turns nothing on, so scripted use stays silent).

- The desktop notification goes through `notify-send` (Linux) or `osascript`
  (macOS), the first of the two found on PATH, unless the user's settings say
  `"notify": {"desktop": false}`.
- The user's own command is `notify.command` in their settings file
  (usersettings.py), an argv list run without a shell, with the run's facts in
  its environment: DELEGATE_RUN_RESULT (the run's result.json path; the file
  may be missing for a run that ended lost), DELEGATE_RUN_STATUS,
  DELEGATE_RUN_ID and DELEGATE_RUN_IMPLEMENTER. It comes from that file only:
  nothing in a repository, a batch file, an MCP call or a relay's environment
  names it.

Each notifier runs with stdin from /dev/null, its output discarded, in a
process group of its own that is killed after DELEGATE_NOTIFY_TIMEOUT seconds
(10 by default). A notifier that cannot start, fails or hangs costs one line on
stderr; the caller goes on as if nothing happened.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from .errors import UserError
from .pathsearch import which

#: Seconds a notifier may take before its process group is killed.
TIMEOUT_ENV = "DELEGATE_NOTIFY_TIMEOUT"
DEFAULT_TIMEOUT_S = 10.0
_MAX_TIMEOUT_S = 60.0
#: The longest title or summary handed to a notifier.
_TEXT_LIMIT = 200

#: osascript's script: the title and summary arrive as arguments, never as script text.
_APPLESCRIPT = (
    "on run argv",
    "display notification (item 2 of argv) with title (item 1 of argv)",
    "end run",
)


class Settings:
    """What --notify does: a desktop notification or not, and the user's command or None."""

    __slots__ = ("command", "desktop")

    def __init__(self, desktop: bool = True, command: list[str] | None = None) -> None:
        self.desktop = desktop
        self.command = command


def load() -> Settings:
    """The notify settings from the user's settings file. Raises UserError (one line)."""
    from .usersettings import load_settings, notify_settings

    found = notify_settings(load_settings())
    return Settings(found.get("desktop", True), found.get("command"))


def desktop_argv(title: str, summary: str, env: dict[str, str]) -> list[str] | None:
    """The desktop notifier's command line, or None when neither notifier is on PATH."""
    path = which("notify-send", env)
    if path is not None:
        return [path, "--", title, summary]
    path = which("osascript", env)
    if path is not None:
        return [path, *(part for line in _APPLESCRIPT for part in ("-e", line)), title, summary]
    return None


def summary_line(
    implementer: str,
    status: str,
    lane: str | None = None,
    seconds: float | None = None,
    run_id: str | None = None,
    task: str | None = None,
) -> str:
    """The short text under the title: which run, how it ended, how long it took."""
    text = f"{lane} ({implementer})" if lane else implementer
    if task:
        text = f"{task}: {text}"
    text += f" {status}"
    if isinstance(seconds, (int, float)):
        text += f" in {_elapsed(seconds)}"
    if run_id:
        text += f" · run {run_id}"
    return text


def notify(
    result_path: str,
    status: str,
    run_id: str | None,
    implementer: str,
    summary_line: str,
    settings: Settings | None = None,
) -> None:
    """Tell the user a run ended. Never raises: a problem is one line on stderr."""
    try:
        chosen = settings if settings is not None else load()
        env = dict(os.environ)
        timeout = _timeout(env)
        if chosen.desktop:
            title = _clean(f"delegate: {implementer or '?'} run {status or '?'}")
            argv = desktop_argv(title, _clean(summary_line), env)
            if argv is not None:
                _run(argv, env, timeout, os.path.basename(argv[0]))
        if chosen.command:
            facts = {
                "DELEGATE_RUN_RESULT": result_path or "",
                "DELEGATE_RUN_STATUS": status or "",
                "DELEGATE_RUN_ID": run_id or "",
                "DELEGATE_RUN_IMPLEMENTER": implementer or "",
            }
            _run(list(chosen.command), {**env, **facts}, timeout, "notify.command")
    except UserError as problem:
        _say(f"delegate: --notify: {problem}")
    except Exception as problem:  # a notification never takes the caller down
        _say(f"delegate: --notify: {type(problem).__name__}: {problem}")


def _run(argv: list[str], env: dict[str, str], timeout: float, name: str) -> None:
    try:
        proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except (OSError, ValueError) as problem:
        why = problem.strerror if isinstance(problem, OSError) and problem.strerror else problem
        _say(f"delegate: --notify: cannot start {name} ({argv[0]}): {why}")
        return
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
        _say(f"delegate: --notify: {name} still ran after {timeout:g}s; stopped it")
        return
    if code < 0:
        _say(f"delegate: --notify: {name} died of signal {-code}")
    elif code != 0:
        _say(f"delegate: --notify: {name} exited {code}")


def _timeout(env: dict[str, str]) -> float:
    try:
        value = float(env.get(TIMEOUT_ENV, ""))
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return min(value, _MAX_TIMEOUT_S) if value > 0 else DEFAULT_TIMEOUT_S


def _elapsed(seconds: float) -> str:
    whole = int(seconds)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _clean(text: str, limit: int = _TEXT_LIMIT) -> str:
    """One line of printable text, at most `limit` characters."""
    shown = " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _say(line: str) -> None:
    """One line on stderr; a closed stderr is no reason to fail."""
    try:
        sys.stderr.write(_clean(line, 1000) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
