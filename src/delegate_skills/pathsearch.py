"""Finding a program on a PATH, without importing shutil and its compression modules."""

from __future__ import annotations

import os


def which(program: str, env: dict[str, str]) -> str | None:
    """`program` as a path, searched on `env`'s PATH as a child started with `env` finds it."""
    if os.sep in program:
        return program if os.access(program, os.X_OK) else None
    for folder in env.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or os.curdir, program)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return os.path.abspath(path) if not folder else path
    return None
