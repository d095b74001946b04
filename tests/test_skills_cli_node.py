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


def test_lists_all_twenty_four_skills(skills_command, tmp_path):
    done = skills_cli(skills_command, "add", str(ROOT), "--list", cwd=tmp_path, home=tmp_path)
    assert done.returncode == 0, done
    listed = set(re.findall(r"\b([a-z]+-delegate|delegate-setup)\b", done.stdout))
    assert sorted(listed) == ALL_SKILLS
    assert len(ALL_SKILLS) == 24


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


# ---------------------------------------------------------------- the agent table

_AGENT_ENV = (
    "XDG_CONFIG_HOME",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "VIBE_HOME",
    "HERMES_HOME",
    "AUTOHAND_HOME",
    "GROK_HOME",
    "SARVAM_HOME",
    "APPDATA",
    "FLATPAK_XDG_CONFIG_HOME",
)
# Agents whose skills this package relays to, by the Skills CLI's names.
RELAY_AGENTS = (
    "antigravity",
    "claude-code",
    "cline",
    "codex",
    "command-code",
    "cursor",
    "github-copilot",
    "grok",
    "kimi-code-cli",
    "mistral-vibe",
    "opencode",
    "pi",
    "qoder",
    "universal",
    "warp",
    "zcode",
)


def _agent_env(home: Path, overrides: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _AGENT_ENV}
    env.update(HOME=str(home), **overrides)
    return env


@pytest.mark.parametrize("homes", ["default", "overridden"])
def test_our_agent_table_is_the_skills_cli_table(skills_command, tmp_path, monkeypatch, homes):
    from delegate_skills.installer import agents

    home = tmp_path / "home"
    home.mkdir()
    overrides = {}
    if homes == "overridden":
        overrides = {
            "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
            "VIBE_HOME": str(tmp_path / "vibe"),
            "HERMES_HOME": str(tmp_path / "hermes"),
            "AUTOHAND_HOME": str(tmp_path / "autohand"),
            "GROK_HOME": str(tmp_path / "grok"),
        }
        (home / ".clawdbot").mkdir()
    env = _agent_env(home, overrides)
    theirs = skillscli.agent_table(skills_command, env, tmp_path)
    _use_env(monkeypatch, env)
    ours = {row["name"]: row for row in agents.rows()}
    assert sorted(ours) == sorted(theirs)
    for name, agent in theirs.items():
        expected_global = agent["globalSkillsDir"] and os.path.normpath(agent["globalSkillsDir"])
        assert (
            ours[name]["displayName"],
            ours[name]["projectDir"],
            ours[name]["globalDir"],
        ) == (agent["displayName"], agent["skillsDir"], expected_global), name


def _where_the_skills_cli_installs(command, agent, scope, base: Path) -> set[str]:
    home, project = base / "home", make_repo(base / "project")
    home.mkdir()
    flags = ["-g"] if scope == "global" else []
    done = skills_cli(
        command,
        "add",
        str(ROOT),
        "--skill",
        "codex-delegate",
        "-a",
        agent,
        *flags,
        "-y",
        "--copy",
        cwd=project,
        home=home,
    )
    assert done.returncode == 0, done
    return {str(p.parent) for p in base.rglob("codex-delegate") if (p / "SKILL.md").is_file()}


# Skills CLI 1.7.4 puts every global install for an agent reading .agents/skills
# in ~/.agents/skills, whatever that agent's global directory; the agents below
# read their own folders, and there it installs where its table says, as we do.
OWN_FOLDER_RELAY_AGENTS = ("claude-code", "command-code", "grok", "mistral-vibe", "qoder", "zcode")


def _use_env(monkeypatch, env: dict[str, str]) -> None:
    for name in _AGENT_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        if name == "HOME" or name in _AGENT_ENV:
            monkeypatch.setenv(name, value)


@pytest.mark.parametrize(
    ("agent", "scope"),
    [(a, "project") for a in RELAY_AGENTS] + [(a, "global") for a in OWN_FOLDER_RELAY_AGENTS],
)
def test_the_skills_cli_installs_where_our_table_says(
    skills_command, tmp_path, monkeypatch, agent, scope
):
    from delegate_skills.installer import agents

    found = _where_the_skills_cli_installs(skills_command, agent, scope, tmp_path)
    _use_env(monkeypatch, _agent_env(tmp_path / "home", {}))
    if scope == "global":
        assert agents.AGENTS[agent].project != agents.SHARED_PROJECT_DIR
    root = None if scope == "global" else str(tmp_path / "project")
    assert found == {agents.target_dir(agent, root)}
