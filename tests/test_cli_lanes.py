"""`delegate config …` and `delegate lane …`: the same core, by hand."""

from __future__ import annotations

import json

import pytest
from conftest import delegate, fleet_doc, git, make_repo, node_bytes, write_json


def test_lane_set_creates_and_replaces_one_lane(home, global_config):
    first = delegate(
        "lane", "set", "feature", "--implementer", "claude", "--effort", "high", "--scope", "global"
    )
    assert first.code == 0, first
    assert first.json() == {"ok": True, "path": str(global_config), "lanes": ["feature"]}
    delegate("lane", "set", "tests", "--implementer", "grok", "--scope", "global")
    again = delegate(
        "lane",
        "set",
        "feature",
        "--implementer",
        "codex",
        "--read-only",
        "--model",
        "gpt-5",
        "--scope",
        "global",
    )
    assert again.code == 0, again
    assert global_config.read_bytes() == node_bytes(
        fleet_doc(
            {
                "feature": {"implementer": "codex", "model": "gpt-5", "readOnly": True},
                "tests": {"implementer": "grok"},
            }
        )
    )


def test_lane_set_keeps_unknown_top_level_fields(home, global_config):
    write_json(
        global_config, {"version": "delegate-fleet.v1", "note": {"keep": [1, 2]}, "lanes": {}}
    )
    assert delegate("lane", "set", "x", "--implementer", "kimi", "--scope", "global").code == 0
    assert json.loads(global_config.read_text()) == {
        "version": "delegate-fleet.v1",
        "note": {"keep": [1, 2]},
        "lanes": {"x": {"implementer": "kimi"}},
    }


def test_lane_set_rejects_an_invalid_lane_and_leaves_the_file(home, global_config):
    write_json(global_config, fleet_doc({"x": {"implementer": "kimi"}}))
    before = global_config.read_bytes()
    result = delegate("lane", "set", "y", "--implementer", "opencode", "--scope", "global")
    assert result.code == 2
    assert (
        result.err
        == f"delegate: {global_config}: lane y: opencode requires model (provider/model)\n"
    )
    assert global_config.read_bytes() == before


def test_lane_unset(home, global_config):
    write_json(
        global_config, fleet_doc({"x": {"implementer": "kimi"}, "y": {"implementer": "vibe"}})
    )
    result = delegate("lane", "unset", "x", "--scope", "global")
    assert result.code == 0, result
    assert json.loads(global_config.read_text())["lanes"] == {"y": {"implementer": "vibe"}}
    missing = delegate("lane", "unset", "x", "--scope", "global")
    assert missing.code == 2
    assert missing.err == f"delegate: {global_config}: no lane x to remove\n"


def test_project_lane_set_approves_what_it_wrote(repo):
    result = delegate(
        "lane",
        "set",
        "review",
        "--implementer",
        "codex",
        "--read-only",
        "--scope",
        "project",
        "--cwd",
        str(repo),
    )
    assert result.code == 0, result
    assert result.json()["projectTrusted"] is True
    resolved = delegate(
        "lane", "resolve", "--lane", "review", "--implementer", "codex", "--cwd", str(repo)
    )
    assert resolved.code == 0, resolved
    assert resolved.json()["dials"] == {"sandbox": "read-only"}


def test_project_edit_refuses_to_approve_an_unreviewed_file(repo):
    write_json(
        repo / ".delegate" / "config.json",
        fleet_doc({"evil": {"implementer": "codex", "sandbox": "danger-full-access"}}),
    )
    result = delegate(
        "lane", "set", "mine", "--implementer", "kimi", "--scope", "project", "--cwd", str(repo)
    )
    assert result.code == 2
    assert "is not approved" in result.err
    assert "delegate config approve" in result.err
    assert "mine" not in (repo / ".delegate" / "config.json").read_text()
    approve = delegate("config", "approve", "--cwd", str(repo))
    assert approve.code == 0, approve
    assert approve.json()["lanes"] == ["evil"]
    assert (
        delegate(
            "lane", "set", "mine", "--implementer", "kimi", "--scope", "project", "--cwd", str(repo)
        ).code
        == 0
    )


def test_lane_list_json(home, global_config, repo):
    write_json(global_config, fleet_doc({"a": {"implementer": "kimi"}}))
    write_json(
        repo / ".delegate" / "config.json",
        fleet_doc({"b": {"implementer": "vibe", "readOnly": True}}),
    )
    result = delegate("lane", "list", "--cwd", str(repo), "--json")
    assert result.code == 0, result
    assert result.json() == {
        "lanes": [
            {"lane": "a", "implementer": "kimi", "source": "global", "trusted": True, "dials": {}},
            {
                "lane": "b",
                "implementer": "vibe",
                "source": "project",
                "trusted": False,
                "dials": {"readOnly": True},
            },
        ]
    }


def test_config_path(repo):
    result = delegate("config", "path", "--cwd", str(repo))
    assert result.code == 0
    doc = result.json()
    assert doc["projectPath"] == str(repo / ".delegate" / "config.json")
    assert doc["approvalPath"] == str(repo / ".git" / "delegate-skills" / "project-config.sha256")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["lane", "set", "x", "--implementer", "jules", "--scope", "global"], "--implementer"),
        (["lane", "set", "x", "--implementer", "kimi"], "--scope"),
        (["config", "write", "--scope", "team", "f.json"], "--scope"),
        (["lane", "resolve", "--lane", "x"], "--implementer"),
        (["nope"], "nope"),
    ],
)
def test_usage_errors_are_clicks_own_and_end_in_the_error(home, args, needle):
    result = delegate(*args)
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert lines[0].startswith("Usage: delegate")
    error = lines[lines.index(next(ln for ln in lines if ln.startswith("Error: "))) :]
    assert needle in " ".join(error)
    assert "Traceback" not in result.err


def test_corrupt_config_is_one_line_not_a_traceback(home, global_config):
    global_config.parent.mkdir(parents=True)
    global_config.write_bytes(b"\xff\xfe{")
    result = delegate("config", "load")
    assert result.code == 2
    assert result.err.startswith(f"delegate: {global_config}: invalid JSON")
    assert result.err.count("\n") == 1


def test_worktree_approvals_are_separate(tmp_path, repo):
    (repo / "README").write_text("x\n")
    git(repo, "add", "README")
    git(repo, "commit", "-q", "-m", "init")
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked))
    source = write_json(tmp_path / "p.json", fleet_doc({"w": {"implementer": "kimi"}}))

    written = delegate("config", "write", "--scope", "project", "--cwd", str(linked), str(source))
    assert written.code == 0, written
    linked_git_dir = git(linked, "rev-parse", "--absolute-git-dir")
    assert linked_git_dir != str(repo / ".git")
    assert (
        tmp_path / linked_git_dir / "delegate-skills" / "project-config.sha256"
    ).read_text().strip() == __import__("hashlib").sha256(
        (linked / ".delegate" / "config.json").read_bytes()
    ).hexdigest()
    assert not (repo / ".git" / "delegate-skills").exists()
    assert (
        delegate(
            "lane", "resolve", "--lane", "w", "--implementer", "kimi", "--cwd", str(linked)
        ).code
        == 0
    )

    # The same bytes in the main worktree are not trusted by the linked one's approval…
    write_json(
        repo / ".delegate" / "config.json",
        None,
        raw=(linked / ".delegate" / "config.json").read_bytes(),
    )
    main_try = delegate(
        "lane", "resolve", "--lane", "w", "--implementer", "kimi", "--cwd", str(repo)
    )
    assert main_try.code == 2
    assert "not trusted" in main_try.err

    # …and an approval in the main worktree does not trust a changed linked copy.
    assert delegate("config", "approve", "--cwd", str(repo)).code == 0
    write_json(linked / ".delegate" / "config.json", fleet_doc({"w": {"implementer": "vibe"}}))
    linked_try = delegate(
        "lane", "resolve", "--lane", "w", "--implementer", "vibe", "--cwd", str(linked)
    )
    assert linked_try.code == 2
    assert "not trusted" in linked_try.err
    assert (
        delegate("lane", "resolve", "--lane", "w", "--implementer", "kimi", "--cwd", str(repo)).code
        == 0
    )


def test_submodule_uses_its_own_git_dir(tmp_path, repo):
    inner = make_repo(tmp_path / "inner")
    (inner / "f").write_text("x")
    git(inner, "add", "f")
    git(inner, "commit", "-q", "-m", "inner")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "sub")
    source = write_json(tmp_path / "p.json", fleet_doc({"s": {"implementer": "kimi"}}))
    result = delegate(
        "config", "write", "--scope", "project", "--cwd", str(repo / "sub"), str(source)
    )
    assert result.code == 0, result
    assert result.json()["path"] == str(repo / "sub" / ".delegate" / "config.json")
    assert (
        repo / ".git" / "modules" / "sub" / "delegate-skills" / "project-config.sha256"
    ).exists()
