"""What the relay prints on its own stderr: `relay: …` lines and the implementer's passthrough."""

from __future__ import annotations

import os


def write_stderr(data: bytes) -> None:
    try:
        os.write(2, data)
    except OSError:
        pass


def say(line: str) -> None:
    write_stderr(f"relay: {line}\n".encode("utf-8", errors="replace"))


def which(program: str, env: dict[str, str]) -> str | None:
    """`program` as an absolute path, searched on the child's PATH (shutil.which's answer,
    without importing shutil and its compression modules on every relay start)."""
    if os.sep in program:
        return program if os.access(program, os.X_OK) else None
    for folder in env.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or os.curdir, program)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return os.path.abspath(path) if not folder else path
    return None


def temp_dir(env: dict[str, str]) -> str:
    """The child's temp dir, as its environment names it (tempfile would write to find out)."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        if env.get(name):
            return env[name]
    return "/tmp"


def grace_s(variable: str, default: float) -> float:
    """Seconds from the environment `variable` (0 to 3600), else `default`."""
    try:
        value = float(os.environ.get(variable, default))
    except ValueError:
        return default
    return value if 0 <= value <= 3600 else default
