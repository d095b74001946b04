"""The bundle as the Skills CLI (`npx skills`) sees it: listed whole, installed by copy.

Runs the real Skills CLI 1.7.4 (see skillscli.py for how it and a Node new
enough for it are provisioned from the npm registry).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import skillscli
from conftest import ROOT, make_repo
from fakes import Fake
from pythons import PYTHONS

ALL_SKILLS = sorted(path.name for path in (ROOT / "skills").iterdir() if path.is_dir())


@pytest.fixture(scope="session")
def skills_command() -> list[str]:
    try:
        return skillscli.command()
    except skillscli.Unavailable as why:
        pytest.skip(f"Skills CLI not available: {why}")


def bare_python() -> str:
    """A Python with nothing of ours installed: the system's, else the first one found."""
    for candidate in ("/usr/bin/python3", *[p for p in PYTHONS.values() if p]):
        if os.path.isfile(candidate):
            return candidate
    pytest.skip("no interpreter outside the test environment found")


def skills_cli(
    command: list[str], *args: str, cwd: Path, home: Path
) -> subprocess.CompletedProcess:
    node_dir = os.path.dirname(command[0])
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
        [*command, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def test_it_is_the_pinned_skills_cli(skills_command, tmp_path):
    done = skills_cli(skills_command, "--version", cwd=tmp_path, home=tmp_path)
    assert done.stdout.strip() == skillscli.SKILLS_CLI_VERSION, done


def test_lists_all_eighteen_skills(skills_command, tmp_path):
    done = skills_cli(skills_command, "add", str(ROOT), "--list", cwd=tmp_path, home=tmp_path)
    assert done.returncode == 0, done
    listed = set(re.findall(r"\b([a-z]+-delegate|delegate-setup)\b", done.stdout))
    assert sorted(listed) == ALL_SKILLS
    assert len(ALL_SKILLS) == 18


def test_installs_a_copy_for_claude_code_that_dispatches_with_a_bare_python(
    skills_command, tmp_path
):
    project = make_repo(tmp_path / "project")
    done = skills_cli(
        skills_command,
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
    assert (installed / "scripts" / "delegate_skills" / "relay" / "engine.py").is_file()

    fake = Fake(tmp_path / "fake")
    fake.install("codex")
    fake.script({"run": {"actions": [{"write": ["DONE", "yes\n"]}]}})
    brief = tmp_path / "brief.txt"
    brief.write_text("Write DONE.\n")
    out = tmp_path / "out"
    args = ["--brief", str(brief), "--cd", str(project), "--out-dir", str(out)]
    ran = subprocess.run(
        [bare_python(), "-I", "-S", str(relay), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=fake.env(),
        stdin=subprocess.DEVNULL,
    )
    assert ran.returncode == 0, ran.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "completed"
    assert "?? DONE" in result["touchedFiles"]
