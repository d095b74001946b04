"""The CPython interpreters on this machine that a skill folder must run on (3.10–3.13).

Found by path, never through a version-manager shim: the system's own
`python3.N`, then pyenv's installed versions. Each is asked for its version,
so a broken or mislabelled interpreter is not counted.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

MINORS = (10, 11, 12, 13)


def _candidates(minor: int) -> list[str]:
    name = f"python3.{minor}"
    found = [f"/usr/bin/{name}", f"/usr/local/bin/{name}"]
    pyenv = os.environ.get("PYENV_ROOT") or os.path.join(os.path.expanduser("~"), ".pyenv")
    found += sorted(glob.glob(os.path.join(pyenv, "versions", f"3.{minor}.*", "bin", name)))
    on_path = shutil.which(name)
    if on_path and "shims" not in on_path.split(os.sep):
        found.append(on_path)
    return [path for path in found if os.path.isfile(path) and os.access(path, os.X_OK)]


def _version(path: str) -> tuple[int, int] | None:
    try:
        done = subprocess.run(
            [path, "-I", "-S", "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = done.stdout.split()
    return (int(parts[0]), int(parts[1])) if done.returncode == 0 and len(parts) == 2 else None


def find_pythons() -> dict[str, str | None]:
    """ "3.10" … "3.13" → an interpreter of that version, or None when there is none."""
    found: dict[str, str | None] = {}
    for minor in MINORS:
        found[f"3.{minor}"] = next(
            (path for path in _candidates(minor) if _version(path) == (3, minor)), None
        )
    return found


PYTHONS = find_pythons()
