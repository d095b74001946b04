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
