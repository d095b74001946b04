"""Where an implementer CLI is installed, and how to start it.

PATH (executable regular files only), a pinned COMMANDCODE_BIN, or the
desktop bundle of a CLI that ships inside an app; and the directory a CLI
keeps its state in.
"""

from __future__ import annotations

import os
import re
import stat

from ..registry import Implementer


class Launch:
    """How to start one CLI: its path, and the argv prefix that runs it."""

    __slots__ = ("path", "prefix")

    def __init__(self, path: str, prefix: list[str]) -> None:
        self.path = path
        self.prefix = prefix


# ---------------------------------------------------------------- finding a CLI


def which(binary: str, env: dict[str, str]) -> str | None:
    """The first executable regular file named `binary` on PATH."""
    for entry in env.get("PATH", "").split(os.pathsep):
        entry = entry[1:-1] if len(entry) > 1 and entry[0] == entry[-1] == '"' else entry
        if not entry:
            continue
        candidate = os.path.join(os.path.abspath(entry), binary)
        try:
            info = os.stat(candidate)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _expand(raw: str, env: dict[str, str], home: str) -> str:
    expanded = home + raw[1:] if raw.startswith("~/") else raw
    return re.sub(r"%([A-Za-z_][A-Za-z0-9_]*)%", lambda m: env.get(m.group(1), ""), expanded)


def _commandcode_pin(configured: str, env: dict[str, str], platform: str) -> Launch | None:
    """COMMANDCODE_BIN: a path (or a PATH name) that must name a regular file.

    On Windows it must be absolute, neither a .cmd/.bat shim nor cmd.exe itself,
    so `cmd` is never mistaken for Command Code.
    """
    if platform == "win32" and not os.path.isabs(configured):
        return None
    if "/" in configured or "\\" in configured:
        command = os.path.abspath(configured)
    else:
        command = which(configured, env)
    if not command:
        return None
    if platform == "win32":
        if command.lower().endswith((".cmd", ".bat")):
            return None
        comspec = env.get("ComSpec") or env.get("COMSPEC")
        if comspec and os.path.realpath(command).lower() == os.path.realpath(comspec).lower():
            return None
    return Launch(command, [command]) if os.path.isfile(command) else None


def locate(impl: Implementer, env: dict[str, str], platform: str, home: str) -> Launch | None:
    """Where `impl` is installed, or None when it is missing."""
    if impl.key == "commandcode" and env.get("COMMANDCODE_BIN"):
        return _commandcode_pin(env["COMMANDCODE_BIN"], env, platform)
    if impl.key == "commandcode" and platform == "win32":
        return None
    found = which(impl.binary, env)
    if found:
        return Launch(found, [found])
    if impl.locate is None:
        return None
    for raw in impl.locate.candidates.get(platform, ()):
        bundle = _expand(raw, env, home)
        if os.path.isfile(bundle):
            launcher = which(impl.locate.launcher, env) or impl.locate.launcher
            return Launch(bundle, [launcher, bundle])
    return None


def state_dir(env_dir: str | None, home_subdir: str, env: dict[str, str], home: str) -> str:
    return (env_dir and env.get(env_dir)) or os.path.join(home, home_subdir)
