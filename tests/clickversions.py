"""The oldest click the project allows, beside the newest one the venv has.

`click>=8.1` is declared, so the CLI must behave on click 8.1 as on today's
click. The oldest 8.1 release is installed once with pip into a cache
directory (`$XDG_CACHE_HOME/delegate-skills-tests`, else `~/.cache/…`) and put
first on PYTHONPATH for the commands under test. Parallel workers take turns
through a lock file. Without network the install fails and the tests say so.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

OLDEST_CLICK = "8.1.8"


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "delegate-skills-tests"


def oldest_click_dir() -> Path:
    """A directory holding click OLDEST_CLICK (installed on first use)."""
    target = _cache_root() / f"click-{OLDEST_CLICK}"
    done = target / ".complete"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"click-{OLDEST_CLICK}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                 "--target", str(target), f"click=={OLDEST_CLICK}"],
                check=True, capture_output=True, timeout=300,
            )  # fmt: skip
            done.write_text("")
    return target


def env_with_click(directory: Path | None) -> dict[str, str]:
    """The environment for a command that must import click from `directory` (None: the venv's)."""
    env = dict(os.environ)
    if directory is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(directory), *filter(None, [env.get("PYTHONPATH")])]
        )
    return env
