"""config.py and lane.py: the arguments, JSON, files and exit codes of the Node scripts."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from conftest import SETUP_SCRIPTS, fleet_doc, git, make_repo, node_bytes, script, write_json

# The bytes `config.mjs write --scope project` writes for GOLDEN_DOC, and the
# approval file it writes beside them under .git.
GOLDEN_DOC = fleet_doc(
    {
        "feature": {"implementer": "claude", "effort": "high"},
        "review": {"implementer": "codex", "readOnly": True, "model": "gpt-5.1-codex"},
    }
)
GOLDEN_BYTES = (
    b'{\n  "version": "delegate-fleet.v1",\n  "lanes": {\n    "feature": {\n'
    b'      "implementer": "claude",\n      "effort": "high"\n    },\n    "review": {\n'
    b'      "implementer": "codex",\n      "readOnly": true,\n      "model": "gpt-5.1-codex"\n'
    b"    }\n  }\n}\n"
)
GOLDEN_HASH = b"b7c7687ff6a410127d5ed32d80a153121b402a90f27af18d04b9798af97ec5ec\n"


def approval_file(repo):
    return repo / ".git" / "delegate-skills" / "project-config.sha256"


def lay_out_node_approval(repo):
    """A project approved by the Node bundle: config and hash, byte for byte."""
    (repo / ".delegate").mkdir()
    (repo / ".delegate" / "config.json").write_bytes(GOLDEN_BYTES)
    approval_file(repo).parent.mkdir(parents=True)
    approval_file(repo).write_bytes(GOLDEN_HASH)


def resolve(repo, lane, implementer):
    return script(
        "lane.py", "resolve", "--cwd", str(repo), "--lane", lane, "--implementer", implementer
    )


def test_node_approved_project_is_trusted(repo):
    lay_out_node_approval(repo)
    result = resolve(repo, "review", "codex")
    assert result.code == 0, result
    assert result.out == (
        '{"lane":"review","source":"project","implementer":"codex","skill":"codex-delegate",'
        '"dials":{"model":"gpt-5.1-codex","sandbox":"read-only"}}\n'
    )


def test_project_write_lays_out_what_node_expects(tmp_path, repo):
    source = write_json(tmp_path / "lanes.json", GOLDEN_DOC)
    result = script("config.py", "write", "--scope", "project", "--cwd", str(repo), str(source))
    assert result.code == 0, result
    assert result.json() == {
        "ok": True,
        "path": str(repo / ".delegate" / "config.json"),
        "lanes": ["feature", "review"],
        "projectTrusted": True,
    }
    assert (repo / ".delegate" / "config.json").read_bytes() == GOLDEN_BYTES
    assert approval_file(repo).read_bytes() == GOLDEN_HASH
    assert git(repo, "status", "--porcelain") == "?? .delegate/"


def test_one_byte_edit_fails_closed_but_global_lanes_still_resolve(repo, global_config):
    write_json(global_config, fleet_doc({"tests": {"implementer": "grok", "effort": "medium"}}))
    lay_out_node_approval(repo)
    config = repo / ".delegate" / "config.json"
    edited = GOLDEN_BYTES.replace(b'\n  "version"', b'\n\t "version"')
    assert len(edited) == len(GOLDEN_BYTES)
    config.write_bytes(edited)
    result = resolve(repo, "feature", "claude")
    assert result.code == 2
    assert result.err == (
        f"lane.py: project fleet config is not trusted: {config} changed since it was "
        f'approved; review it, then approve it: delegate config approve --cwd "{repo}", or '
        f'from the skill folders: python3 "{SETUP_SCRIPTS / "config.py"}" approve --cwd '
        f'"{repo}"\n'
    )
    assert result.out == ""
    still = resolve(repo, "tests", "grok")
    assert still.code == 0, still
    assert json.loads(still.out)["source"] == "global"


def test_config_copied_into_a_fresh_clone_is_untrusted(tmp_path, repo):
    lay_out_node_approval(repo)
    assert resolve(repo, "feature", "claude").code == 0
    clone = make_repo(tmp_path / "clone")
    shutil.copytree(repo / ".delegate", clone / ".delegate")
    result = resolve(clone, "feature", "claude")
    assert result.code == 2
    assert "not trusted" in result.err


def test_load_overlays_project_on_global_by_whole_lane(tmp_path, repo, global_config):
    write_json(
        global_config,
        fleet_doc(
            {
                "feature": {"implementer": "opencode", "model": "opencode/grok", "variant": "high"},
                "tests": {"implementer": "grok", "effort": "medium"},
            }
        ),
    )
    source = write_json(tmp_path / "p.json", fleet_doc({"feature": {"implementer": "claude"}}))
    assert (
        script("config.py", "write", "--scope", "project", "--cwd", str(repo), str(source)).code
        == 0
    )
    result = script("config.py", "load", "--cwd", str(repo))
    assert result.code == 0, result
    assert result.json() == {
        "version": "delegate-fleet.v1",
        "globalPath": str(global_config),
        "projectPath": str(repo / ".delegate" / "config.json"),
        "globalPresent": True,
        "projectPresent": True,
        "projectTrusted": True,
        "lanes": {
            "feature": {"implementer": "claude", "source": "project"},
            "tests": {"implementer": "grok", "effort": "medium", "source": "global"},
        },
    }


def test_load_outside_git_sees_global_only(tmp_path, home, global_config):
    write_json(global_config, fleet_doc({"tests": {"implementer": "kimi"}}))
    bare = tmp_path / "plain"
    bare.mkdir()
    result = script("config.py", "load", "--cwd", str(bare))
    assert result.code == 0
    assert result.json()["projectPath"] is None
    assert result.json()["lanes"] == {"tests": {"implementer": "kimi", "source": "global"}}
    assert not (bare / ".delegate").exists()


def test_xdg_config_home_moves_the_global_file(tmp_path, home, monkeypatch):
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    source = write_json(tmp_path / "g.json", fleet_doc({}))
    result = script("config.py", "write", "--scope", "global", str(source))
    assert result.code == 0
    assert result.json() == {
        "ok": True,
        "path": str(xdg / "delegate-skills" / "config.json"),
        "lanes": [],
    }
    assert (xdg / "delegate-skills" / "config.json").read_bytes() == node_bytes(fleet_doc({}))


def test_project_write_outside_git_is_refused(tmp_path, home):
    plain = tmp_path / "plain"
    plain.mkdir()
    source = write_json(tmp_path / "p.json", fleet_doc({}))
    result = script("config.py", "write", "--scope", "project", "--cwd", str(plain), str(source))
    assert result.code == 2
    assert result.err == "config.py: project scope requires a git repository (--cwd)\n"


def test_symlinked_delegate_dir_is_refused(tmp_path, repo):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, repo / ".delegate")
    source = write_json(tmp_path / "p.json", fleet_doc({}))
    result = script("config.py", "write", "--scope", "project", "--cwd", str(repo), str(source))
    assert result.code == 2
    assert result.err == "config.py: refusing to write: .delegate is a symlink\n"
    assert list(outside.iterdir()) == []
    assert not approval_file(repo).exists()


def test_symlinked_config_file_is_replaced_not_followed(tmp_path, repo):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (repo / ".delegate").mkdir()
    os.symlink(victim, repo / ".delegate" / "config.json")
    source = write_json(tmp_path / "p.json", fleet_doc({}))
    assert (
        script("config.py", "write", "--scope", "project", "--cwd", str(repo), str(source)).code
        == 0
    )
    assert victim.read_text() == "keep me\n"
    assert not (repo / ".delegate" / "config.json").is_symlink()


def test_a_rejected_write_changes_nothing(tmp_path, repo):
    lay_out_node_approval(repo)
    bad = write_json(
        tmp_path / "bad.json", fleet_doc({"x": {"implementer": "codex", "effort": "a b"}})
    )
    result = script("config.py", "write", "--scope", "project", "--cwd", str(repo), str(bad))
    assert result.code == 2
    assert result.err == f"config.py: {bad}: lane x.effort must be a bare token\n"
    assert (repo / ".delegate" / "config.json").read_bytes() == GOLDEN_BYTES
    assert approval_file(repo).read_bytes() == GOLDEN_HASH


@pytest.mark.parametrize(
    ("args", "err"),
    [
        (["write", "x.json"], "config.py: --scope must be global or project\n"),
        (["write", "--scope", "team", "x.json"], "config.py: --scope must be global or project\n"),
        (["write", "--scope"], "config.py: --scope must be global or project\n"),
        (["write", "--scope", "global"], "config.py: write needs a JSON file path\n"),
        (["validate"], "config.py: validate needs a file path\n"),
        (["load", "--cwd"], "config.py: --cwd needs a directory\n"),
        (["load", "--cwd", ""], "config.py: --cwd needs a directory\n"),
        (["frobnicate"], 'config.py: unknown command "frobnicate". Use --help.\n'),
    ],
)
def test_config_usage_errors(home, args, err):
    result = script("config.py", *args)
    assert (result.code, result.err, result.out) == (2, err, "")


def test_config_help(home):
    assert script("config.py", "--help").code == 0
    assert "validate" in script("config.py", "-h").out
    bare = script("config.py")
    assert bare.code == 2
    assert "Usage" in bare.out


@pytest.mark.parametrize(
    ("args", "err"),
    [
        (["resolve"], "lane.py: resolve requires --lane\n"),
        (["resolve", "--lane"], "lane.py: --lane requires a value\n"),
        (["resolve", "--lane", "x"], "lane.py: resolve requires --implementer\n"),
        (["resolve", "--lane", "x", "--implementer"], "lane.py: --implementer requires a value\n"),
        (["resolve", "--bogus"], "lane.py: unknown option: --bogus\n"),
        (["nope"], 'lane.py: unknown command "nope"\n'),
        (
            ["resolve", "--lane", "bad!", "--implementer", "grok"],
            'lane.py: invalid lane name "bad!"\n',
        ),
        (
            ["resolve", "--lane", "x", "--implementer", "jules"],
            'lane.py: unknown implementer "jules"\n',
        ),
        (
            ["resolve", "--lane", "zz", "--implementer", "grok"],
            "lane.py: fleet lane not found: zz\n",
        ),
    ],
)
def test_lane_usage_errors(home, args, err):
    result = script("lane.py", *args)
    assert (result.code, result.err, result.out) == (2, err, "")


def test_lane_bound_to_another_implementer_names_the_skill(home, global_config, tmp_path):
    write_json(global_config, fleet_doc({"feature": {"implementer": "opencode", "model": "a/b"}}))
    result = resolve(tmp_path, "feature", "claude")
    assert result.code == 2
    assert result.err == (
        'lane.py: fleet lane "feature" → opencode (use opencode-delegate); this relay is claude\n'
    )


def test_broken_global_config_is_reported_with_its_path(home, global_config, tmp_path):
    global_config.parent.mkdir(parents=True)
    global_config.write_text('{"version": "delegate-fleet.v1", "lanes": ')
    result = resolve(tmp_path, "feature", "claude")
    assert result.code == 2
    assert result.err.startswith(f"lane.py: {global_config}: invalid JSON (")
    assert result.err.count("\n") == 1


RENAMES = [
    ("grok", {"readOnly": True, "effort": "high"}, {"effort": "high", "autonomy": "read-only"}),
    ("grok", {"sandbox": "off", "model": "grok-4"}, {"model": "grok-4", "autonomy": "full-access"}),
    ("grok", {"sandbox": "workspace"}, {"autonomy": "workspace-write"}),
    ("grok", {"sandbox": "read-only", "readOnly": True}, {"autonomy": "read-only"}),
    ("codex", {"readOnly": True, "model": "gpt-5"}, {"model": "gpt-5", "sandbox": "read-only"}),
    ("codex", {"readOnly": False}, {"readOnly": False}),
    ("opencode", {"model": "a/b", "readOnly": True}, {"model": "a/b", "agent": "plan"}),
    ("qoder", {"readOnly": True}, {"permissionMode": "plan"}),
    ("omp", {"effort": "high", "readOnly": True}, {"readOnly": True, "thinking": "high"}),
    ("vibe", {"readOnly": True, "timeout": "1m"}, {"timeout": "1m", "planOnly": True}),
    ("claude", {"readOnly": True, "effort": "max"}, {"readOnly": True, "effort": "max"}),
    (
        "zcode",
        {"readOnly": True, "permissionMode": "plan"},
        {"readOnly": True, "permissionMode": "plan"},
    ),
]


@pytest.mark.parametrize(("key", "lane", "dials"), RENAMES)
def test_dials_come_back_in_the_relays_terms(home, global_config, tmp_path, key, lane, dials):
    write_json(global_config, fleet_doc({"l": {"implementer": key, **lane}}))
    result = resolve(tmp_path, "l", key)
    assert result.code == 0, result
    assert list(json.loads(result.out)["dials"].items()) == list(dials.items())
