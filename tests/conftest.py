"""Shared fixtures: an isolated home, git repositories, and the scripts to run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# Shared, noisy machines: hypothesis checks behaviour here, never speed.
settings.register_profile("delegate", deadline=None)
settings.load_profile("delegate")

ROOT = Path(__file__).resolve().parent.parent
SETUP_SCRIPTS = ROOT / "skills" / "delegate-setup" / "scripts"
PYTHON = sys.executable


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "test@example.invalid")
    git(path, "config", "user.name", "test")
    git(path, "config", "commit.gpgsign", "false")
    return path


def commit_all(repo: Path, message: str = "snapshot") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)


def fleet_doc(lanes: dict) -> dict:
    return {"version": "delegate-fleet.v1", "lanes": lanes}


def node_bytes(document: dict) -> bytes:
    """What `JSON.stringify(doc, null, 2) + "\\n"` writes, for plain ASCII documents."""
    return (json.dumps(document, indent=2) + "\n").encode()


class Result:
    def __init__(self, done: subprocess.CompletedProcess) -> None:
        self.code = done.returncode
        self.out = done.stdout
        self.err = done.stderr

    def json(self):
        return json.loads(self.out)

    def __repr__(self) -> str:
        return f"Result(code={self.code}, out={self.out!r}, err={self.err!r})"


def run(argv: list[str], env: dict | None = None, cwd: Path | None = None, **kw) -> Result:
    done = subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=kw.pop("timeout", 120), **kw
    )
    return Result(done)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fresh HOME with no XDG override, for this process and its children."""
    home_dir = tmp_path / "home"
    home_dir.mkdir()
    monkeypatch.setenv("HOME", str(home_dir))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.invalid")
    return home_dir


@pytest.fixture
def repo(tmp_path, home) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def global_config(home) -> Path:
    return home / ".config" / "delegate-skills" / "config.json"


def script(name: str, *args: str, **kw) -> Result:
    """Run a delegate-setup script as an agent would: python3 <skill>/scripts/<name>."""
    return run([PYTHON, str(SETUP_SCRIPTS / name), *args], **kw)


def delegate(*args: str, **kw) -> Result:
    return run([PYTHON, "-m", "delegate_skills.commands.cli", *args], **kw)


def write_json(path: Path, document, raw: bytes | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw if raw is not None else node_bytes(document))
    return path
