"""Helpers for the `delegate skills` tests: an isolated machine, its project, its commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import Result

from delegate_skills.installer import bundle

PYTHON = sys.executable
BUNDLE = bundle.bundle_dir()
LOCK = Path(".agents") / "delegate-skills.lock.json"
_DROPPED = ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "CLAUDE_CONFIG_DIR", "DELEGATE_SKILLS_HOME")


class Machine:
    """One machine: a HOME, a state home, and a git project, never the real ones."""

    def __init__(self, base: Path, umask: int | None = None) -> None:
        self.home = base / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.state_home = self.home / ".config" / "delegate-skills"
        self.umask = umask
        self.env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
        self.env.update(
            HOME=str(self.home),
            DELEGATE_SKILLS_HOME=str(self.state_home),
            GIT_CONFIG_NOSYSTEM="1",
        )
        self.project = base / "project"
        self.project.mkdir()
        subprocess.run(["git", "init", "-q", str(self.project)], env=self.env, check=True)

    @property
    def state(self) -> Path:
        return self.state_home / "state.json"

    @property
    def lock(self) -> Path:
        return self.project / LOCK

    def skills(self, *args: str, cwd: Path | None = None) -> Result:
        umask = self.umask

        def before() -> None:
            if umask is not None:
                os.umask(umask)

        done = subprocess.run(
            [PYTHON, "-m", "delegate_skills.commands.skills", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=cwd or self.project,
            timeout=180,
            preexec_fn=before if umask is not None else None,
            check=False,
        )
        return Result(done)

    def ok(self, *args: str, cwd: Path | None = None) -> Result:
        result = self.skills(*args, cwd=cwd)
        assert result.code == 0, result
        return result

    def lock_doc(self) -> dict:
        return json.loads(self.lock.read_text())


def bundled_revision(skill: str) -> str:
    return bundle.revision(BUNDLE / skill)


def one_error_line(result: Result) -> str:
    """The single `delegate: …` line a user error ends with (and no traceback)."""
    assert result.code == 2, result
    lines = result.err.splitlines()
    assert len(lines) == 1, result
    assert lines[0].startswith("delegate: "), result
    assert "Traceback" not in result.err
    return lines[0]
