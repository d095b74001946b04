"""Read-only runs enforced by the OS: the implementer under bubblewrap.

On Linux, when `bwrap` is on PATH and works here, the implementer of a
read-only run (its version preflight too) starts inside a bubblewrap
sandbox that sees the whole file system as it is, except:

- the work tree, its git dir and common git dir (objects, refs, hooks, the
  approval store), alternate object stores and included config files, and
  the relay's state dir (the run's private record) are bound read-only;
- the run directory, the temp dir and any path the adapter names (a CLI's
  own state inside the repository) stay writable even when they sit inside
  one of those;
- it has its own PID namespace (it cannot signal the relay) and no
  capabilities (so it cannot remount anything), and dies with the relay.

Everything else (the CLI's config and state under $HOME, the network) is as
at the user's terminal. Where bwrap is missing or cannot make a namespace,
the run is not enforced, `readOnlyEnforced` is null and `readOnlyUnenforced`
says why; the verdict then rests on detection alone (gitstate.Tripwire).
"""

from __future__ import annotations

import os
import shutil
import subprocess

from . import linux

#: Set to "0" to run read-only runs without the sandbox (the verdict still detects).
ENFORCE_ENV = "DELEGATE_RELAY_ENFORCE"
PROBE_TIMEOUT_S = 10.0
#: bwrap's own message when it cannot start (its lines all start so).
BWRAP_PREFIX = "bwrap: "


class Sandbox:
    """How a read-only run is enforced: an argv prefix, or the reason there is none."""

    def __init__(self, prefix: list[str] | None, reason: str | None) -> None:
        self.prefix = prefix
        self.reason = reason

    @property
    def enforced(self) -> str | None:
        return "bwrap" if self.prefix else None

    def wrap(self, argv: list[str]) -> list[str]:
        return [*self.prefix, "--", *argv] if self.prefix else argv


def _exists_dirs(paths) -> list[str]:
    seen: list[str] = []
    for path in paths:
        if not path:
            continue
        real = os.path.realpath(path)
        if os.path.exists(real) and real not in seen:
            seen.append(real)
    return seen


def _inside_any(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def bwrap_argv(read_only: list[str], writable: list[str], bwrap: str) -> list[str]:
    """The bwrap command line up to (not including) `--`."""
    argv = [bwrap, "--dev-bind", "/", "/", "--proc", "/proc"]
    for path in read_only:
        argv += ["--ro-bind", path, path]
    for path in writable:
        if _inside_any(path, read_only):
            argv += ["--bind", path, path]
    argv += ["--unshare-pid", "--die-with-parent", "--cap-drop", "ALL"]
    return argv


def plan(
    *,
    read_only: list[str],
    writable: list[str],
    cwd: str,
    env: dict[str, str],
    refused: str | None = None,
) -> Sandbox:
    """A sandbox for a read-only run, or why there is none.

    `refused` is the adapter's reason to run without one (its CLI cannot
    work inside it).
    """
    if os.environ.get(ENFORCE_ENV) == "0":
        return Sandbox(None, f"{ENFORCE_ENV}=0 turned enforcement off")
    if not linux.enabled():
        return Sandbox(None, "bubblewrap enforcement needs Linux")
    if refused:
        return Sandbox(None, refused)
    bwrap = shutil.which("bwrap", path=env.get("PATH"))
    if bwrap is None:
        return Sandbox(
            None, "bwrap is not on PATH (install Debian's or Ubuntu's bubblewrap package)"
        )
    ro = _exists_dirs(read_only)
    rw = _exists_dirs(writable)
    prefix = bwrap_argv(ro, rw, bwrap)
    problem = _probe(prefix, cwd, env)
    if problem:
        return Sandbox(None, f"bwrap cannot start here: {problem}")
    return Sandbox(prefix, None)


def _probe(prefix: list[str], cwd: str, env: dict[str, str]) -> str | None:
    """None when bwrap runs `true` with these options; else its first line."""
    true = shutil.which("true", path=env.get("PATH")) or "/bin/true"
    try:
        done = subprocess.run(
            [*prefix, "--", true],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=PROBE_TIMEOUT_S,
            start_new_session=True,
        )
    except (OSError, subprocess.TimeoutExpired) as problem:
        return str(problem)
    if done.returncode == 0:
        return None
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[0].removeprefix(BWRAP_PREFIX) if lines else f"exit {done.returncode}"
