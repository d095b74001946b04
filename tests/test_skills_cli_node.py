"""The bundle as the Skills CLI (`npx skills`) sees it: listed whole, installed by copy.

Needs Node 22.20 or newer and the Skills CLI 1.7.4, which the test suite does
not install. Point the test at them, or it is skipped with the reason:

    DELEGATE_TEST_NODE=/path/to/node               (default: `node` on PATH)
    DELEGATE_TEST_SKILLS_CLI=/path/to/skills/bin/cli.mjs
    # or, to let npx fetch it from the registry:
    DELEGATE_TEST_SKILLS_NPX=1
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

SKILLS_CLI_VERSION = "1.7.4"
MIN_NODE = (22, 20)
ALL_SKILLS = sorted(path.name for path in (ROOT / "skills").iterdir() if path.is_dir())


def _node() -> str | None:
    return os.environ.get("DELEGATE_TEST_NODE") or shutil.which("node")


def _node_version(node: str) -> tuple[int, ...] | None:
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    match = re.match(r"v(\d+)\.(\d+)", done.stdout.strip())
    return tuple(int(part) for part in match.groups()) if match else None


def _skills_command() -> tuple[list[str] | None, str]:
    """The argv prefix that runs the Skills CLI, or None and why not."""
    node = _node()
    version = _node_version(node) if node else None
    if version is None or version < MIN_NODE:
        found = ".".join(map(str, version)) if version else "none"
        return None, f"needs Node {'.'.join(map(str, MIN_NODE))}+ (found {found})"
    cli = os.environ.get("DELEGATE_TEST_SKILLS_CLI")
    if cli:
        return [node, cli], ""
    npx = shutil.which("npx", path=os.path.dirname(node)) or shutil.which("npx")
    if os.environ.get("DELEGATE_TEST_SKILLS_NPX") == "1" and npx:
        return [npx, "-y", f"skills@{SKILLS_CLI_VERSION}"], ""
    return None, (
        "set DELEGATE_TEST_SKILLS_CLI to the Skills CLI's bin/cli.mjs "
        f"(npm install skills@{SKILLS_CLI_VERSION}) or DELEGATE_TEST_SKILLS_NPX=1"
    )


SKILLS_COMMAND, WHY_NOT = _skills_command()
pytestmark = pytest.mark.skipif(SKILLS_COMMAND is None, reason=WHY_NOT)


def skills_cli(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    node_dir = os.path.dirname(SKILLS_COMMAND[0])
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{node_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "DISABLE_TELEMETRY": "1",
        "DO_NOT_TRACK": "1",
        "NO_COLOR": "1",
    }
    env.pop("XDG_CONFIG_HOME", None)
    return subprocess.run(
        [*SKILLS_COMMAND, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def test_it_is_the_pinned_skills_cli(tmp_path):
    done = skills_cli("--version", cwd=tmp_path, home=tmp_path)
    assert done.stdout.strip() == SKILLS_CLI_VERSION, done


def test_lists_all_eighteen_skills(tmp_path):
    done = skills_cli("add", str(ROOT), "--list", cwd=tmp_path, home=tmp_path)
    assert done.returncode == 0, done
    listed = set(re.findall(r"\b([a-z]+-delegate|delegate-setup)\b", done.stdout))
    assert sorted(listed) == ALL_SKILLS
    assert len(ALL_SKILLS) == 18


def test_installs_a_working_copy_for_claude_code(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    done = skills_cli(
        "add",
        str(ROOT),
        "--skill",
        "codex-delegate",
        "--agent",
        "claude-code",
        "-y",
        cwd=project,
        home=tmp_path,
    )
    assert done.returncode == 0, done
    installed = project / ".claude" / "skills" / "codex-delegate"
    relay = installed / "scripts" / "relay.py"
    assert not installed.is_symlink() and relay.is_file() and not relay.is_symlink()
    assert sorted(path.name for path in (installed / "references").iterdir()) == [
        "dispatch-and-poll.md",
        "multi-task-queues.md",
        "review-and-land.md",
        "writing-the-brief.md",
    ]
    helped = subprocess.run(
        [sys.executable, str(relay), "--help"], capture_output=True, text=True, timeout=60
    )
    assert helped.returncode == 0, helped
    assert "codex-delegate" in helped.stdout and "--read-only" in helped.stdout
