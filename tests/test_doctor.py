"""`delegate doctor`: whether each lane would dispatch, and the one fix when not."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from conftest import delegate, fleet_doc, write_json
from discoverkit import ANSWERS, install

from delegate_skills.commands.discover_cli import doctor_text


@pytest.fixture
def machine(tmp_path, home, global_config):
    bindir = install(
        tmp_path / "bin",
        {key: ANSWERS[key] for key in ("claude", "kimi", "cursor-agent", "copilot")},
    )
    for tool in ("bwrap", "socat"):  # Claude Code's sandbox tools: present, whatever the machine
        stub = bindir / tool
        stub.write_text("#!/bin/sh\nexit 0\n")
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin"}
    return env, global_config


def doctor(env, *args):
    return delegate("doctor", "--json", *args, env=env)


def test_all_healthy(machine, repo):
    env, global_config = machine
    write_json(
        global_config,
        fleet_doc({"feature": {"implementer": "claude"}, "chat": {"implementer": "kimi"}}),
    )
    result = doctor(env, "--cwd", str(repo))
    assert result.code == 0, result
    assert result.json() == {
        "ok": True,
        "lanes": [
            {
                "lane": "feature",
                "implementer": "claude",
                "source": "global",
                "ok": True,
                "problem": None,
                "fix": None,
                "checked": ["lane", "approval", "installed", "tools", "login"],
                "notChecked": [],
            },
            {
                "lane": "chat",
                "implementer": "kimi",
                "source": "global",
                "ok": True,
                "problem": None,
                "fix": None,
                "checked": ["lane", "approval", "installed", "tools", "login"],
                "notChecked": [],
            },
        ],
    }


def test_lane_missing(machine, repo):
    env, global_config = machine
    write_json(global_config, fleet_doc({"feature": {"implementer": "claude"}}))
    result = doctor(env, "--cwd", str(repo), "--lane", "nope")
    assert result.code == 1
    row = result.json()["lanes"][0]
    assert (row["lane"], row["problem"]) == ("nope", "lane-missing")
    assert "delegate lane set nope" in row["fix"]


def test_project_not_approved(machine, repo):
    env, _ = machine
    write_json(
        repo / ".delegate" / "config.json",
        fleet_doc({"review": {"implementer": "claude", "readOnly": True}}),
    )
    result = doctor(env, "--cwd", str(repo))
    assert result.code == 1
    row = result.json()["lanes"][0]
    assert (row["problem"], row["source"]) == ("not-approved", "project")
    assert row["fix"].endswith(f"delegate config approve --cwd {repo}")


def test_not_installed(machine, repo):
    env, global_config = machine
    write_json(global_config, fleet_doc({"tests": {"implementer": "codex"}}))
    row = doctor(env, "--cwd", str(repo)).json()["lanes"][0]
    assert row["problem"] == "not-installed"
    assert "`codex`" in row["fix"]
    assert "npm i -g @openai/codex" in row["fix"]


def test_not_logged_in(machine, repo):
    env, global_config = machine
    write_json(global_config, fleet_doc({"ide": {"implementer": "cursor"}}))
    result = doctor(env, "--cwd", str(repo))
    assert result.code == 1
    row = result.json()["lanes"][0]
    assert (row["problem"], row["fix"]) == ("not-logged-in", "sign in: cursor-agent login")


def test_one_bad_lane_fails_the_whole_check(machine, repo):
    env, global_config = machine
    write_json(
        global_config, fleet_doc({"a": {"implementer": "kimi"}, "b": {"implementer": "codex"}})
    )
    result = doctor(env, "--cwd", str(repo))
    assert result.code == 1
    assert [row["ok"] for row in result.json()["lanes"]] == [True, False]


def test_readable_output(machine, repo):
    env, global_config = machine
    write_json(global_config, fleet_doc({"b": {"implementer": "codex"}}))
    report = doctor(env, "--cwd", str(repo)).json()
    text = doctor_text(report)
    assert text.startswith("b                codex (global)")
    assert "not-installed: install `codex`" in text
    assert doctor_text({"ok": True, "lanes": []}).startswith("no lanes configured")


def test_a_login_that_cannot_be_checked_is_not_ok(machine, repo):
    """Copilot's CLI has no login probe: doctor says so instead of calling the lane ok."""
    env, global_config = machine
    write_json(global_config, fleet_doc({"pair": {"implementer": "copilot"}}))
    result = doctor(env, "--cwd", str(repo))
    assert result.code == 1
    row = result.json()["lanes"][0]
    assert (row["ok"], row["problem"]) == (False, "login-unverified")
    assert row["checked"] == ["lane", "approval", "installed", "tools"]
    assert row["notChecked"] == ["login"]
    assert row["fix"].startswith("GitHub Copilot CLI gives no way to check its login from outside")


def test_a_claude_lane_without_its_sandbox_tools_says_what_to_install(
    tmp_path, home, global_config
):
    bindir = install(tmp_path / "bin", {"claude": ANSWERS["claude"]})
    tools = tmp_path / "tools"
    tools.mkdir()
    os.symlink(shutil.which("git"), tools / "git")
    write_json(global_config, fleet_doc({"write": {"implementer": "claude"},
                                         "review": {"implementer": "claude", "readOnly": True}}))  # fmt: skip
    env = {**os.environ, "PATH": f"{bindir}:{tools}"}
    done = delegate("doctor", "--json", env=env)
    rows = {row["lane"]: row for row in json.loads(done.out)["lanes"]}
    assert (rows["write"]["problem"], rows["write"]["fix"]) == (
        "tools-missing",
        "Claude Code's shell sandbox needs bwrap and socat: sudo apt-get install bubblewrap socat",
    )
    assert rows["review"]["problem"] != "tools-missing", rows["review"]
    listed = delegate("discover", "claude", "--json", env=env)
    assert json.loads(listed.out)["missingTools"] == {"claude": ["bwrap", "socat"]}
